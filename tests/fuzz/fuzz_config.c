// SPDX-License-Identifier: GPL-2.0
/*
 * lockscoped's settings: the input is a config file (what ls_config_load() reads) and each
 * of its KEY = VALUE lines is also given as --KEY=VALUE is. A value taken must print back
 * (--dump-config's form) into one that is taken again and gives the same setting.
 */
#include <sys/mman.h>
#include <unistd.h>
#include "serve/config.h"
#include "fuzz.h"

static void round_trip(const char *key, const char *value)
{
	struct ls_config a, b;
	const struct ls_setting *s;
	char err[256], printed[LS_CONFIG_STR_MAX * 2];

	ls_config__init(&a);
	if (ls_setting_apply(&a, key, value, err, sizeof(err)))
		return;
	s = ls_setting_find(key);
	if (!s)
		abort();	/* taken, yet not a setting */
	ls_setting_format(&a, s, printed, sizeof(printed));
	ls_config__init(&b);
	if (ls_setting_apply(&b, key, printed, err, sizeof(err)) || !ls_setting_equal(&a, &b, s)) {
		fprintf(stderr, "%s: '%s' was taken, printed as '%s', which %s\n", key, value, printed,
			err[0] ? err : "gives another value");
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int fd = -1;
	static FILE *null;
	struct ls_config c;
	char path[64], err[512], *text, *line, *nl, *eq;

	if (fd < 0) {
		fd = memfd_create("lockscoped.conf", MFD_CLOEXEC);
		null = fopen("/dev/null", "we");
		if (fd < 0 || !null)
			exit(1);
	}
	if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size)
		exit(1);
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ls_config__init(&c);
	if (!ls_config_load(&c, path, err, sizeof(err)))
		ls_config_dump(&c, null);

	text = malloc(size + 1);
	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = 0;
	for (line = text; line; line = nl) {
		nl = strchr(line, '\n');
		if (nl)
			*nl++ = 0;
		eq = strchr(line, '=');
		if (!eq)
			continue;
		*eq = 0;
		round_trip(line, eq + 1);
	}
	free(text);
	return 0;
}

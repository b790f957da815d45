// SPDX-License-Identifier: GPL-2.0
/* What lockscope prints or writes of a response: tables, JSON, exports and flame graphs. */
#include <resolv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api/export.h"
#include "cli.h"
#include "render.h"

/* inferno's renderer, from the Rust library (deps/rust/src/lib.rs) */
int ls_flamegraph_svg(const char *folded, const char *title, const char *count_name, int fd);

/* @len bytes to --output (atomically) or stdout; a binary export never to a terminal. */
static int write_output(const struct cli *c, const char *data, size_t len, bool binary)
{
	int err;

	if (c->output) {
		err = export__write_file(c->output, data, len);
		if (err)
			fprintf(stderr, "lockscope: cannot write %s: %s\n", c->output, strerror(-err));
		return err ? 1 : 0;
	}
	if (binary && isatty(STDOUT_FILENO)) {
		fprintf(stderr, "lockscope: a pprof profile is binary: pass -o FILE or redirect stdout\n");
		return 1;
	}
	return fwrite(data, 1, len, stdout) == len ? 0 : 1;
}

/* An export response: the report itself (json), or its "data", base64 for binary formats. */
static int write_export(const struct cli *c, const cJSON *resp)
{
	const char *data = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "data"));
	const char *enc = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "encoding"));
	unsigned char *bin;
	char *text;
	int n, ret;

	if (!data) {		/* json: the response is the report */
		text = cJSON_Print(resp);
		if (!text)
			return 1;
		n = strlen(text);
		text[n] = '\n';	/* overwrite the NUL: the file ends in a newline */
		ret = write_output(c, text, n + 1, false);
		free(text);
		return ret;
	}
	if (!enc || strcmp(enc, "base64"))
		return write_output(c, data, strlen(data), false);
	bin = malloc(strlen(data) / 4 * 3 + 3);
	if (!bin || (n = b64_pton(data, bin, strlen(data) / 4 * 3 + 3)) < 0) {
		fprintf(stderr, "lockscope: the daemon sent a profile that is not base64\n");
		free(bin);
		return 1;
	}
	ret = write_output(c, (char *)bin, n, true);
	free(bin);
	return ret;
}

/* The folded stacks of the response drawn by inferno into --output. */
static int write_flamegraph(const struct cli *c, const cJSON *resp)
{
	const char *folded = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "data"));
	const cJSON *win = cJSON_GetObjectItemCaseSensitive(resp, "window");
	const char *profile = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(resp, "profile"));
	char title[256], *svg = MAP_FAILED;
	struct stat st;
	int fd, err, ret = 1;

	if (!folded || !folded[0]) {
		fprintf(stderr, "lockscope: nothing waited in this window: no flame graph to draw (try -w all, "
			"or -p PID -d 10s while the workload runs)\n");
		return 1;
	}
	snprintf(title, sizeof(title), "lockscope: wait time by %s (%s)",
		 profile && !strcmp(profile, "mutex") ? "releaser or owner stack" : "waiter stack",
		 cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(win, "name")) ?: "scan");
	fd = memfd_create("lockscope-flamegraph", MFD_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "lockscope: memfd_create: %s\n", strerror(errno));
		return 1;
	}
	err = ls_flamegraph_svg(folded, c->title ? c->title : title, "ns", fd);
	if (err)
		fprintf(stderr, "lockscope: cannot render the flame graph: %s\n", strerror(-err));
	else if (fstat(fd, &st) || (svg = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED)
		fprintf(stderr, "lockscope: cannot read the rendered flame graph: %s\n", strerror(errno));
	else
		ret = write_output(c, svg, st.st_size, false);
	if (svg != MAP_FAILED)
		munmap(svg, st.st_size);
	close(fd);
	return ret;
}

int cli_print_response(const struct cli *c, const cJSON *resp)
{
	const cJSON *err = cJSON_GetObjectItemCaseSensitive(resp, "error");
	char *text;

	if (cJSON_IsString(err)) {
		fprintf(stderr, "lockscope: %s\n", err->valuestring);
		return 1;
	}
	if (!strcmp(c->cmd, "flamegraph"))
		return write_flamegraph(c, resp);
	if (c->exporting)
		return write_export(c, resp);
	if (c->json) {
		text = cJSON_Print(resp);
		if (text)
			printf("%s\n", text);
		free(text);
	} else {
		render_response(stdout, c->cmd, resp, &c->ro);
	}
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * Runs a fuzz target once on each file given (or each file in each directory given), as
 * libFuzzer does when given files: the seed corpora and the inputs that once crashed,
 * replayed by the test suite on ordinary (and sanitizer) builds without libFuzzer.
 * Prints how many inputs ran; a crash is the process's, as it would be under the daemon.
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "re");
	uint8_t *buf = NULL;
	long size;
	int ret = -1;

	if (!f || fseek(f, 0, SEEK_END) || (size = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		goto out;
	buf = malloc(size ? size : 1);
	if (!buf || fread(buf, 1, size, f) != (size_t)size)
		goto out;
	LLVMFuzzerTestOneInput(buf, size);
	ret = 0;
out:
	if (ret)
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
	free(buf);
	if (f)
		fclose(f);
	return ret;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	int i, j, n, inputs = 0, failed = 0;
	struct dirent **names;
	char path[4096];
	struct stat st;

	for (i = 1; i < argc; i++) {
		if (stat(argv[i], &st)) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			failed |= run_file(argv[i]);
			inputs++;
			continue;
		}
		/* in name order, so a failure replays the same way */
		n = scandir(argv[i], &names, NULL, by_name);
		for (j = 0; j < n; j++) {
			snprintf(path, sizeof(path), "%s/%s", argv[i], names[j]->d_name);
			if (names[j]->d_name[0] != '.' && !stat(path, &st) && S_ISREG(st.st_mode)) {
				failed |= run_file(path);
				inputs++;
			}
			free(names[j]);
		}
		free(names);
	}
	printf("replayed %d inputs\n", inputs);
	return failed ? 1 : 0;
}

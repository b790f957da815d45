/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A /proc of the test's own, in a temporary directory: PID/cgroup files as a pure v2 (or
 * hybrid) kernel writes them, for the cgroups table to read (cgroups_opts.proc). For the
 * unit tests that include cmocka first.
 */
#ifndef __LS_FAKE_PROC_H
#define __LS_FAKE_PROC_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* @root/@pid/cgroup saying the process is in cgroup v2 @path */
static inline void fake_proc_cgroup(const char *root, uint32_t pid, const char *path)
{
	char file[256];
	FILE *f;

	snprintf(file, sizeof(file), "%s/%u", root, pid);
	mkdir(file, 0755);
	snprintf(file, sizeof(file), "%s/%u/cgroup", root, pid);
	f = fopen(file, "w");
	assert_non_null(f);
	fprintf(f, "0::%s\n", path);
	fclose(f);
}

static inline void fake_proc_remove(const char *root)
{
	char cmd[256];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
}

#endif

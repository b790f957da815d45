// SPDX-License-Identifier: GPL-2.0
/* /proc/PID/stat's state and start time; what a descriptor is. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "lib/procfs.h"

/* the text after the comm's ')' starts at field 3 (the state) */
#define STAT_FIELD_STATE 3
#define STAT_FIELD_STARTTIME 22

int ls_proc_stat(uint32_t pid, struct ls_proc_stat *st)
{
	char path[64], buf[1024], *p;
	unsigned long long start;
	size_t n;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return -ENOENT;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');	/* the comm may hold spaces and parentheses */
	if (!p || sscanf(p + 1, " %c", &st->state) != 1)
		return -EIO;
	for (i = STAT_FIELD_STATE; p && i <= STAT_FIELD_STARTTIME; i++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &start) != 1)
		return -EIO;
	st->start_ticks = start;
	return 0;
}

int ls_proc_fd(uint32_t pid, uint32_t fd, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	if (!len)
		return -EINVAL;
	snprintf(path, sizeof(path), "/proc/%u/fd/%u", pid, fd);
	n = readlink(path, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	return 0;
}

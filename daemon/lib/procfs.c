// SPDX-License-Identifier: GPL-2.0
/* /proc/PID/stat's state and start time; what a descriptor is. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/procfs.h"

/* the text after the comm's ')' starts at field 3 (the state) */
#define STAT_FIELD_STATE 3
#define STAT_FIELD_STARTTIME 22
/* what every Linux architecture but alpha and ia64 (both gone) has as USER_HZ */
#define DEFAULT_USER_HZ 100

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

/* USER_HZ: a divisor of a second on every architecture, so that the kernel's own conversion is exact */
uint64_t ls_clock_tick_ns(void)
{
	static uint64_t ns;
	long hz;

	if (!ns) {
		hz = sysconf(_SC_CLK_TCK);
		ns = NSEC_PER_SEC / (hz > 0 ? (uint64_t)hz : DEFAULT_USER_HZ);
	}
	return ns;
}

/*
 * /proc shows start times on the boot clock of the reader's time namespace (5.6+); the
 * kernel side reads the host's. The offset, from /proc/self/timens_offsets; 0 without one.
 */
static int64_t boottime_offset_ns(void)
{
	static bool read;
	static int64_t off;
	char line[128];
	long long sec, nsec;
	FILE *f;

	if (read)
		return off;
	read = true;
	if (!(f = fopen("/proc/self/timens_offsets", "re")))
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "boottime %lld %lld", &sec, &nsec) == 2)
			off = sec * (int64_t)NSEC_PER_SEC + nsec;
	fclose(f);
	return off;
}

uint64_t ls_boot_ns_to_ticks(uint64_t ns)
{
	return (ns + boottime_offset_ns()) / ls_clock_tick_ns();
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

size_t ls_host_threads(void)
{
	unsigned long threads = 0;
	FILE *f = fopen("/proc/loadavg", "re");

	if (f) {
		if (fscanf(f, "%*f %*f %*f %*u/%lu", &threads) != 1)
			threads = 0;
		fclose(f);
	}
	return threads;
}

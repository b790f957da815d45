/* SPDX-License-Identifier: GPL-2.0 */
/* What /proc/PID/stat says of a process: read once, parsed past the comm. */
#ifndef __LS_PROCFS_H
#define __LS_PROCFS_H

#include <stddef.h>
#include <stdint.h>

struct ls_proc_stat {
	char state;		/* R, S, D, Z, X... */
	uint64_t start_ticks;	/* field 22: clock ticks since boot when it started */
};

/* @pid's state and start; -ENOENT when it is gone, -EIO when the file does not parse. */
int ls_proc_stat(uint32_t pid, struct ls_proc_stat *st);
/* The length of /proc's clock tick (USER_HZ), in ns. */
uint64_t ls_clock_tick_ns(void);
/*
 * A task's start_boottime, as the kernel side reads it, in /proc's start-time ticks: on
 * the boot clock of the daemon's time namespace, divided as the kernel divides.
 */
uint64_t ls_boot_ns_to_ticks(uint64_t ns);
/*
 * What descriptor @fd of process @pid is, as /proc/PID/fd/FD links it: "pipe:[12345]",
 * "socket:[678]", "anon_inode:[eventfd]", a file's path. -errno when it is closed or the
 * process is gone (an answer for now: the descriptor may have been reused since).
 */
int ls_proc_fd(uint32_t pid, uint32_t fd, char *buf, size_t len);
/* The host's threads now, the kernel's count that /proc/loadavg prints; 0 when unknown. */
size_t ls_host_threads(void);

#endif

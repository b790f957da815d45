/* SPDX-License-Identifier: GPL-2.0 */
/* What /proc/PID/stat says of a process: read once, parsed past the comm. */
#ifndef __LS_PROCFS_H
#define __LS_PROCFS_H

#include <stdint.h>

struct ls_proc_stat {
	char state;		/* R, S, D, Z, X... */
	uint64_t start_ticks;	/* field 22: clock ticks since boot when it started */
};

/* @pid's state and start; -ENOENT when it is gone, -EIO when the file does not parse. */
int ls_proc_stat(uint32_t pid, struct ls_proc_stat *st);

#endif

/* SPDX-License-Identifier: GPL-2.0 */
#ifndef __LS_PEER_H
#define __LS_PEER_H

#include <stdbool.h>
#include <sys/types.h>

/*
 * Who is asking, as SO_PEERCRED and the peer's /proc/PID/status said when it connected.
 * The capabilities decide what the engine shows and does for it: ptrace's rule for scans,
 * kptr_restrict's for kernel addresses.
 */
struct ls_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	bool cap_sys_ptrace;	/* may scan another user's process */
	bool cap_syslog;	/* may see raw kernel addresses */
};

#endif

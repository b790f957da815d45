/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * schedstat: per-thread scheduling, counted in BPF and read by the daemon (no ring records:
 * a switch storm must not become a record storm). Shared by sched.bpf.c and the daemon.
 */
#ifndef __SCHEDSTAT_H
#define __SCHEDSTAT_H

#include "lockscope.h"

/* Where a thread is, as far as the last event we saw says. */
enum sched_tstate {
	SCHED_T_UNKNOWN,	/* first seen: its time so far is not counted */
	SCHED_T_ONCPU,
	SCHED_T_BLOCKED,	/* switched out asleep (a voluntary switch) */
	SCHED_T_RUNNABLE,	/* preempted, yielded or woken: waiting in a run queue */
};

/*
 * One per thread, updated on sched_switch and sched_wakeup(_new). The switch counts are
 * the kernel's own rule (kernel/sched/core.c __schedule): a switch is voluntary when the
 * task was not preempted and its state was not TASK_RUNNING, as /proc's
 * voluntary_ctxt_switches counts it; everything else (preemption, sched_yield) is
 * involuntary.
 */
struct sched_thread {
	__u64 voluntary;
	__u64 involuntary;
	__u64 oncpu_ns;
	__u64 blocked_ns;	/* off CPU, asleep */
	__u64 runq_ns;		/* off CPU, runnable: run-queue latency */
	__u64 last_ns;		/* when state began */
	__u32 tgid;
	__u32 state;		/* enum sched_tstate */
	char comm[LS_COMM_LEN];
};

enum sched_defaults {
	SCHED_DEF_MAX_THREADS = 32768,
};

#endif /* __SCHEDSTAT_H */

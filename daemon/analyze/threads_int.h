/* SPDX-License-Identifier: GPL-2.0 */
/* The thread store's insides, shared by threads.c (the store), threads_json.c and its unit test only. */
#ifndef __LS_THREADS_INT_H
#define __LS_THREADS_INT_H

#include <stdint.h>
#include "analyze/threads.h"
#include "lib/htab.h"
#include "lockscope.h"
#include "scheduler.h"

/* (time on the boot clock, events) points of a thread's history, newest first */
#define REF_POINTS 4

/*
 * The figures a window takes the difference of; the others (names, the current yield
 * storm) are the thread's latest.
 */
enum tcounter {
	TC_VOLUNTARY, TC_INVOLUNTARY, TC_ONCPU, TC_BLOCKED, TC_RUNQ, TC_YIELDS, TC_YIELD_SPIN,
	TC_SAMPLES, TC_SPIN_SAMPLES, TC_POLL_SAMPLES, TC_EVENTS, TC_MAX,
};

struct counters {
	uint64_t v[TC_MAX];
};

/* A thread's counters at one tick (CLOCK_MONOTONIC). */
struct point {
	uint64_t ns;
	struct counters c;
};

struct thread {
	struct sched_thread st;		/* the latest figures */
	uint64_t seen_ns;		/* the tick that last found it */
	uint64_t exited_ns;		/* the first tick that did not; 0: it runs */
	uint64_t prev_ns, prev_voluntary, prev_involuntary;	/* the tick before: live rates */
	/*
	 * The thread's event count (nvcsw and I/O syscalls) at the starts of its last baseline
	 * periods, newest first: its own rate before a stop, for bursts. A period starts anew
	 * only once the count moved, so a stopped thread keeps the points it had before the
	 * stop; a few points, as the first after the resume comes before the stop's record.
	 */
	uint64_t ref_ns[REF_POINTS], ref_events[REF_POINTS];
	struct point *pts;		/* oldest first */
	size_t nr_pts, cap_pts;
};

/* What is left of an exited process's threads once they age out: for the all window. */
struct proc_summary {
	struct counters c;
	uint64_t exited_ns;		/* when its last thread went */
	uint32_t threads;
	char comm[LS_COMM_LEN];
};

struct threads {
	struct threads_opts opts;
	struct htab *by_tid;		/* tid -> struct thread */
	struct htab *exited;		/* pid -> struct proc_summary */
	uint64_t start_ns;		/* the first tick: windows reach back no further */
	uint64_t prev_ns, cur_ns;	/* the last two ticks */
	uint64_t ctxt_prev, ctxt_cur;	/* /proc/stat ctxt at those ticks */
	uint64_t dropped;		/* exited processes with no room for their summary */
	uint64_t folded_early;		/* exited threads summarized before their time: no room */
	uint64_t exits;			/* threads whose last switch out reported their exit */
	uint64_t switch_cost_ns;
};

#endif

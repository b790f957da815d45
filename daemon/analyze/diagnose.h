/* SPDX-License-Identifier: GPL-2.0 */
/*
 * `lockscope report`: figures turned into findings, each with its evidence and a fix,
 * ranked by the time it wastes. The lock rules are the severity table of seed report 004
 * (perf lock contention's reading guide):
 *
 *   coarse_lock      contended often, each wait short   split the lock, or go lock-free
 *   blocking_work    contended rarely, each wait long   the critical section blocks:
 *                                                       show what the holders do there
 *   redesign         both                               lock-free queue, sharding
 *   wait_jitter      max wait >> avg wait               priority inversion or scheduling
 *                                                       jitter: holder preemptions
 *   futex_wake_contention  kernel lock waits inside futex code are a large share of a
 *                    process's futex waits: the futex hash bucket's spinlock
 *   peer_wait        waits in a semaphore, condvar or latch that evidence calls a lock's
 *                    (classify.h), by the caller that waits: PostgreSQL's LWLocks, row locks
 *
 * and the spin findings (yield storms, PAUSE spinning, catch-up bursts, preempted
 * holders) as `lockscope spin` gives them. Rows and findings come in as the protocol's
 * JSON, so the unit tests drive this file with hand-made rows.
 */
#ifndef __LS_DIAGNOSE_H
#define __LS_DIAGNOSE_H

#include <stdint.h>
#include <cjson/cJSON.h>

/* When figures become findings (settings of the same names under [thresholds]). */
struct diag_thresholds {
	uint32_t min_wait_pct;		/* a lock's waits cost at least this % of one thread's time */
	uint32_t contended_rate;	/* contentions per second that count as "high" */
	uint32_t avg_wait_us;		/* an average wait that counts as "high" */
	uint32_t jitter_factor;		/* max wait at least this many times the average */
	uint32_t jitter_min_us;		/* and at least this long */
	uint32_t jitter_tail_pct;	/* and waits that long are this % of the wait time */
	uint32_t futex_wake_pct;	/* kernel waits in futex code vs the futex waits */
	uint32_t work_min_pct;		/* a kind of holder work named when this % of its samples */
};

/*
 * Defaults. A lock whose waits keep a twentieth of a thread busy is worth a look. 100 us is where seed 004 puts the top of the futex slow path (two switches
 * and a wake); 1000 contentions/s is where a lock's switches cost a few percent of a CPU
 * (~5 us each, seed 002); 20 % is the table's futex_wake share.
 */
#define DIAG_DEF_MIN_WAIT_PCT		5
#define DIAG_DEF_CONTENDED_RATE		1000
#define DIAG_DEF_AVG_WAIT_US		100
#define DIAG_DEF_JITTER_FACTOR		50
#define DIAG_DEF_JITTER_MIN_US		1000
#define DIAG_DEF_JITTER_TAIL_PCT	20
#define DIAG_DEF_FUTEX_WAKE_PCT		20
#define DIAG_DEF_WORK_MIN_PCT		10

struct diag_input {
	const cJSON *lock_rows;		/* top rows grouped by lock, with owners and holders */
	const cJSON *kernel_callers;	/* kernel waits by caller, with stacks */
	const cJSON *caller_rows;	/* every wait by caller (split by class) */
	const cJSON *spin_findings;	/* `spin`'s findings, or NULL when spin detection is off */
	double span_s;			/* the time the figures cover */
	const struct diag_thresholds *th;
};

void diag_thresholds__init(struct diag_thresholds *th);
/* The findings, most wasted time first (a new array). */
cJSON *diagnose(const struct diag_input *in);

#endif

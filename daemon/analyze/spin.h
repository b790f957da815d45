/* SPDX-License-Identifier: GPL-2.0 */
/*
 * `lockscope spin`: CPU burnt or latency added while nothing useful runs. Four findings,
 * from the schedstat component (bpf/schedstat.h) and the user-lock holder preemptions:
 *
 *   yield_spin        a thread switching out through sched_yield() in a storm
 *   pause_spin        a thread whose cpu-clock samples land in spin-wait loops
 *   burst             a thread that, resumed after a stop, far outran its own rate
 *   holder_preempted  the holder of a contended user lock preempted while others waited
 *
 * Counts and times are the BPF side's, per thread since it was first seen; this file
 * keeps the stacks that come by record (yield sites, spin samples, bursts) and the last
 * stops, and turns it all into findings with their evidence and a hint.
 */
#ifndef __LS_SPIN_H
#define __LS_SPIN_H

#include <stdint.h>
#include <cjson/cJSON.h>
#include "analyze/threads.h"
#include "scheduler.h"

struct agg_view;
struct query_ctx;
struct spin;

/*
 * When a thread's figures become a finding (settings of the same names; the defaults
 * below). A storm of yields on its own is no problem (a yield that runs the waited-for
 * thread is cheap); hundreds per second are. The same for spin samples: a share of a few
 * percent is the mutexes' adaptive spinning.
 */
struct spin_thresholds {
	uint32_t yield_min;		/* yields in the storm */
	uint32_t yield_min_rate;	/* and per second */
	uint32_t pause_min_samples;	/* spin (or busy-poll) samples of the thread */
	uint32_t pause_min_share_pct;	/* and their share of its samples, percent */
	uint32_t burst_min_events;	/* events in the window after the resume */
	uint32_t burst_factor;		/* and times the thread's own rate before the stop */
};

#define SPIN_DEF_YIELD_MIN		100
#define SPIN_DEF_YIELD_MIN_RATE		100
#define SPIN_DEF_PAUSE_MIN_SAMPLES	20
#define SPIN_DEF_PAUSE_MIN_SHARE_PCT	5
#define SPIN_DEF_BURST_MIN_EVENTS	100
#define SPIN_DEF_BURST_FACTOR		5
#define SPIN_RESUMES_KEPT	64	/* the last stops reported, newest first */

int spin__new(struct spin **out);
void spin__free(struct spin *s);

/* Records: a yield storm's site, a spin sample's stack, a stop and its aftermath. */
void spin__yield_site(struct spin *s, const struct sched_yield_rec *r, uint32_t stack);
void spin__sample(struct spin *s, const struct sched_spin_rec *r, uint32_t stack);
/* @base_events in @base_ns: the thread's own rate before the stop (threads__baseline()). */
void spin__resume(struct spin *s, const struct sched_resume_rec *r, uint32_t stack, uint64_t base_events,
		  uint64_t base_ns);
/* A push interval's spin samples of a process under a stack (export__spin_pprof's input). */
struct spin_sample_key {
	uint32_t pid;
	uint32_t stack;
	uint32_t poll;		/* a busy poll's samples (SCHED_RF_POLL), else a PAUSE loop's */
};

/* From now on also keep each push interval's stacked samples (the pushed spin profile). */
int spin__keep_intervals(struct spin *s);
/*
 * The spin samples since the last call, exact: each thread's count (the BPF side's, from
 * @thr, refreshed by the caller) shared among the stacks its samples in the interval
 * carried (the stacks are sampled; a thread with none gives LS_STACK_MISSING), and @fn
 * called once per (process, stack, loop) with its share. -ENOENT when intervals are not
 * kept. *@dropped: stacked samples of the interval that found the table full.
 */
typedef int (*spin_interval_fn)(void *ctx, uint32_t pid, uint32_t stack, bool poll, double samples);
int spin__take_interval(struct spin *s, const struct threads *thr, uint64_t now, spin_interval_fn fn, void *ctx,
			uint64_t *dropped);

/*
 * A precise scan of @pid ran @ns: futex waits that returned at once (EAGAIN) are counted
 * only then, and their rate is over that time.
 */
void spin__precise_ran(struct spin *s, uint32_t pid, uint64_t ns);

/*
 * The findings for the processes @f keeps into @o's "findings", worst first, from the
 * threads' figures in window @w (exited threads included; THREADS_LIVE: the running ones,
 * since each started); holder preemptions and futex waits that returned at once are read
 * from @tab, an aggregation table covering @secs seconds.
 * -EOPNOTSUPP with *err set when the scheduler component is off.
 */
int spin__json(struct spin *s, const struct sched_source *src, const struct threads *thr, enum ls_window w,
	       const struct agg_view *tab, double secs, const struct query_ctx *ctx,
	       const struct spin_thresholds *th, const struct proc_filter *f, int max_stack, cJSON *o,
	       const char **err);

#endif

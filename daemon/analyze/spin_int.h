/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What spin.c (the store and the view), spin_findings.c (findings from the threads'
 * figures) and spin_locks.c (findings from the lock table) share, and only they.
 */
#ifndef __LS_SPIN_INT_H
#define __LS_SPIN_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "analyze/query.h"
#include "analyze/spin.h"
#include "lib/htab.h"
#include "scheduler.h"

/* tables of stacks by thread: when one fills, it starts over (sites are recorded again) */
#define SPIN_MAX_SITES 16384
#define SPIN_MAX_SAMPLE_STACKS 65536
#define SPIN_STACKS_SHOWN 5

struct yield_site {
	uint32_t stack;		/* the latest stack of the site */
};

struct sample_key {
	uint32_t tid;
	uint32_t stack;
	uint32_t poll;		/* a busy-poll sample (SCHED_RF_POLL), else a PAUSE loop's */
};

struct interval_key {
	uint32_t pid, tid;
	uint32_t stack;
	uint32_t poll;
};

struct pushed_counts {
	uint64_t counts[2];	/* spin_samples, poll_samples as last pushed */
	uint64_t gen;
};

struct resume {
	struct sched_resume_rec r;
	uint32_t stack;
	uint64_t base_events, base_ns;	/* the thread's events before the stop, and over how long */
};

struct spin {
	struct htab *sites;		/* tid -> struct yield_site, the latest */
	struct htab *samples;		/* struct sample_key -> uint64_t spin samples with a stack */
	struct htab *precise;		/* pid -> uint64_t ns its precise scans ran */
	/* with a push (spin__keep_intervals); NULL: not kept */
	struct htab *interval;		/* struct interval_key -> uint64_t stacked samples */
	uint64_t interval_dropped;	/* of them, found the table full */
	struct htab *pushed;		/* tid -> struct pushed_counts: the counts pushed so far */
	uint64_t pushed_gen;		/* the take that last saw each thread */
	struct resume resumes[SPIN_RESUMES_KEPT];	/* a ring, newest at head - 1 */
	unsigned int head, nr_resumes;
};

/* ---- findings ---- */

struct thread {
	uint32_t tid;
	struct sched_thread st;
};

struct peer {
	struct sched_peer_key k;
	struct sched_peer v;
};

/* Everything a query reads, once: the window's threads and the BPF side's yield peers. */
struct snapshot {
	const struct proc_filter *f;	/* the processes whose findings are made */
	uint64_t start;			/* the window's start (live: 0) */
	const struct spin_thresholds *th;
	struct thread *threads;
	size_t nr_threads, cap_threads;
	struct htab *by_tid;		/* tid -> index in threads */
	struct peer *peers;
	size_t nr_peers, cap_peers;
};

/* spin.c: a thread's figures in the snapshot a view is made of; NULL if not in it */
const struct sched_thread *spin_thread_of(const struct snapshot *sn, uint32_t tid);

/* spin_findings.c */
cJSON *spin_finding_new(const char *kind, uint32_t pid, uint32_t tid, const char *comm);
/* @h's values sorted by @cmp (a NULL-terminated array to free), their number in @nr */
void **spin_sorted_values(const struct htab *h, int (*cmp)(const void *, const void *), size_t *nr);
void spin_yield_findings(struct spin *s, const struct snapshot *sn, const struct query_ctx *ctx,
			 int max_stack, uint64_t now, cJSON *arr);
void spin_sample_findings(struct spin *s, const struct snapshot *sn, const struct query_ctx *ctx,
			  int max_stack, bool poll, cJSON *arr);
void spin_burst_findings(struct spin *s, const struct snapshot *sn, const struct query_ctx *ctx,
			 int max_stack, cJSON *arr);

/* spin_locks.c */
int spin_futex_findings(struct spin *s, const struct agg_view *tab, const struct snapshot *sn,
			const struct query_ctx *ctx, int max_stack, cJSON *arr);
int spin_preempt_findings(const struct agg_view *tab, double secs, const struct snapshot *sn,
			  const struct query_ctx *ctx, cJSON *arr);

#endif

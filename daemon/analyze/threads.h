/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-thread scheduling, `lockscope threads` and the thread figures `spin` reads: the
 * kernel's switch counts and times and the programs' spin figures (bpf/scheduler.h),
 * read once a second. Live, rates cover the last one to two seconds, like `pidstat -w 1`;
 * over a window (10s, 1m, 5m, all) every figure is what happened inside it, exited
 * threads included: they are kept while the longest window can hold them, then summed
 * into their process's summary for the all window. Also the host's cost of one context
 * switch, measured as lmbench's lat_ctx does.
 */
#ifndef __LS_THREADS_H
#define __LS_THREADS_H

#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "analyze/query.h"
#include "store/agg.h"

struct sched_peer;
struct sched_peer_key;
struct sched_thread;
struct threads;

/*
 * The kernel side as the thread and spin views read it: what is traced, and readers of the
 * scheduler maps. The api layer wires it to the collector; tests feed it their own threads.
 */
typedef int (*sched_thread_fn)(void *ctx, uint32_t tid, const struct sched_thread *st);
typedef int (*sched_peer_fn)(void *ctx, const struct sched_peer_key *k, const struct sched_peer *v);
struct sched_source {
	bool sched;		/* per-thread scheduling is traced (sched-threads, tp_btf) */
	bool spin_sampling;	/* the cpu-clock spin sampler runs */
	bool precise;		/* precise scans can time futex calls */
	bool ulock;		/* futex waits (and their holders' preemptions) are traced */
	/*
	 * The threads' counters: returns SCHED_ITER_ALL when every live thread was given,
	 * SCHED_ITER_CHANGED when only those that ran since the previous call (the others
	 * slept: their blocked time grew by the time since), else -errno.
	 */
	int (*threads)(void *src, sched_thread_fn fn, void *ctx);
	int (*peers)(const void *src, sched_peer_fn fn, void *ctx);
	void *src;		/* it remembers what it gave */
};

/* A view of the threads running now, instead of a window. */
#define THREADS_LIVE LS_WIN_MAX

struct threads_opts {
	size_t max_exited_procs;	/* summaries of exited processes kept for the all window */
	size_t max_exited_threads;	/* exited threads kept whole for the windows; beyond it
					 * the earliest gone are summarized at once */
};

#define THREADS_DEF_MAX_EXITED_PROCS 4096
#define THREADS_DEF_MAX_EXITED_THREADS 16384

int threads__new(const struct threads_opts *opts, struct threads **out);
void threads__free(struct threads *t);
/* Reads every thread's figures at @now (a tick a second); exited ones are kept. */
void threads__tick(struct threads *t, const struct sched_source *src, uint64_t now);
/* The same for a query, so that it sees up to @now; live rates still span the last tick. */
void threads__refresh(struct threads *t, const struct sched_source *src, uint64_t now);
/* Where window @w starts (the first tick at the earliest). */
uint64_t threads__window_start(const struct threads *t, enum ls_window w, uint64_t now);
/*
 * @fn for every thread in window @w (or THREADS_LIVE): its counters inside the window, its
 * names and yield storm as last read, @exited_ns when it exited (0: it runs). In the all
 * window, exited processes whose threads aged out come as one thread of tid 0.
 */
typedef int (*threads_fn)(void *ctx, uint32_t tid, const struct sched_thread *st, uint64_t exited_ns);
int threads__each(const struct threads *t, enum ls_window w, uint64_t now, threads_fn fn, void *ctx);
/*
 * Adds to @o the rows of the processes @f keeps in window @w, sorted by switches per second,
 * at most @limit (0: all), and the host figures; with @by a group kind (not CGROUP_BY_MAX),
 * one row per unit, cgroup or pod, its threads added up. -EOPNOTSUPP or -ENOMEM with *err
 * set when it cannot.
 */
int threads__json(struct threads *t, const struct sched_source *src, const struct proc_filter *f, enum cgroup_by by,
		  uint32_t limit, enum ls_window w, uint64_t now, cJSON *o, const char **err);
/* Exited processes whose summary found no room (max_exited_procs). */
uint64_t threads__dropped(const struct threads *t);
/* Exited threads summarized early for want of room: the windows lost their own rows. */
uint64_t threads__folded_early(const struct threads *t);
/* Threads whose exit was reported with their final counters (their last switch out). */
uint64_t threads__exits(const struct threads *t);
/* The host's context switches since boot (/proc/stat ctxt), as vmstat reads them. */
uint64_t threads__host_switches(void);
/*
 * Measures the cost of one context switch: two threads pinned to one CPU pass a byte
 * through two pipes @rounds times; the same pipe traffic without switching is subtracted.
 */
int threads__measure_switch_cost(struct threads *t);
/*
 * The thread's events (nvcsw + I/O syscalls) in the baseline period that ended at its stop
 * (@stop_boot_ns on the boot clock, @stop_events then), from the snapshots: what a burst
 * after the resume is held to. -ENOENT when the thread was not seen long enough before.
 */
int threads__baseline(const struct threads *t, uint32_t tid, uint64_t stop_boot_ns, uint64_t stop_events,
		      uint64_t *events, uint64_t *ns);
uint64_t threads__switch_cost_ns(const struct threads *t);


#endif

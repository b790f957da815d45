/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The aggregator: wait statistics per fine-grained key (process, thread, lock, type,
 * waiter stack, owner), kept since start and, optionally, in rolling windows.
 *
 * Each key is stored once and named by an id; its names (comm) are interned. All-time
 * sums are an array by id; window slots hold only the keys that waited in them, as
 * deltas by id. Histograms exist only for keys with more than one wait.
 *
 * Windows cascade like an RRD: 1 s slots serve the last 10 s, 6 s slots the last minute,
 * 30 s slots the last five minutes; a coarse slot is made from the fine ones as they leave
 * their ring, so that the waits of a second are kept in one slot at a time. A window spans
 * its length plus up to one of its slots, and reports the span it really covers.
 */
#ifndef __LS_AGG_H
#define __LS_AGG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lockscope.h"
#include "scheduler.h"	/* enum ls_utype */


enum ls_lock_name {
	LS_NAME_NONE,
	LS_NAME_MMAP_LOCK,	/* the waiter's own process's mm->mmap_lock */
	LS_NAME_SIGLOCK,	/* the waiter's sighand->siglock */
};

enum ls_window { LS_WIN_10S, LS_WIN_1M, LS_WIN_5M, LS_WIN_ALL, LS_WIN_MAX };

/*
 * The kind and type of a wait: kernel locks keep the kernel's LCB flags (enum
 * klock_lcb_flags, MUTEX|SPIN folded into MUTEX); user locks set LS_KIND_USER and one
 * enum ls_utype value.
 */
#define LS_KIND_USER (1U << 31)
/*
 * Not a wait: the owner of a kernel lock preempted while others waited (its time as the
 * wait), the lock's own flags below, the owner as pid/tid.
 */
#define LS_KIND_KPREEMPT (1U << 30)


struct agg_key {
	uint64_t lock;		/* kernel address, user address, or offset in a shared object */
	uint32_t pid;
	uint32_t tid;
	uint32_t flags;		/* see LS_KIND_USER above */
	uint32_t stack;		/* interned waiter stack, enum ls_stack_id for none/missing */
	uint32_t owner_stack;
	uint32_t owner_pid;
	uint32_t owner_tid;
	uint32_t object;	/* user locks in a shared mapping: usyms object; 0 otherwise */
	uint32_t releaser_pid;	/* the thread whose futex wake ended the wait */
	uint32_t releaser_tid;
	uint32_t releaser_stack;
	uint32_t chain_pid;	/* the releaser was itself waiting during the wait, on this process */
	/*
	 * 1: a wait the stack sampler picked, with its stacks, also counted in the exact
	 * entry of its thread and lock (stack none). Queries take figures from exact entries
	 * and split them among callers by the samples.
	 */
	uint16_t sampled;
	uint8_t name;		/* enum ls_lock_name */
	/*
	 * 1: a user wait with no releaser because sched_waking was detached when it ended
	 * (waker-min-rate, waker-max-rate), not because no thread woke it
	 */
	uint8_t unwatched;
	/* 64 bytes, no padding: keys are compared as bytes, and there is one per key id */
};
_Static_assert(sizeof(struct agg_key) == 64, "struct agg_key has no padding");

/* A whole wait table entry, as the kernel aggregated it: what is added, not what is kept. */
struct agg_stat {
	uint64_t count;
	uint64_t total_ns;
	uint64_t max_ns;
	uint64_t min_ns;
	uint64_t hist[LS_HIST_BUCKETS];
};

/* A key's sums in a window. */
struct agg_sum {
	uint64_t count;
	uint64_t total_ns;
	uint64_t max_ns;
	uint64_t min_ns;
};

/* One key's figures as a view reads them: pointers into the aggregator, valid until it changes. */
struct agg_val {
	struct agg_sum st;
	uint64_t nonblocking;	/* precise mode: calls that returned without sleeping */
	/*
	 * LS_HIST_BUCKETS counts, or NULL where the key has at most one wait: its bucket is
	 * that of its total (agg_hist_add() reads both)
	 */
	const uint64_t *hist;
	const char *comm;
	const char *owner_comm;
	const char *releaser_comm;
};

/*
 * What is added: one wait (@wait_ns), or a whole entry of a wait table (@stat, the
 * waits the kernel aggregated in a second), plus calls that returned without waiting.
 */
struct agg_event {
	struct agg_key key;
	uint64_t wait_ns;
	const struct agg_stat *stat;	/* non-NULL: these waits, not @wait_ns */
	uint64_t nonblocking;		/* precise mode: calls counted apart, not waits */
	const char *comm;
	const char *owner_comm;
	const char *releaser_comm;
	/*
	 * The waiter's process start (ns since boot, its leader's) and cgroup id, where the
	 * kernel side read them (a wait table's entry); 0: not known. Not part of the key: the
	 * stages that map a pid to a process or a cgroup use them to tell a reused pid or a
	 * moved process.
	 */
	uint64_t proc_start_ns;
	uint64_t cgroup_id;
};

struct agg_opts {
	bool windows;		/* keep the rolling windows, not only since-start */
	/*
	 * distinct keys; when full, the keys no rolling window holds are folded (agg__folded)
	 * and waits of keys that still find no room are dropped and counted
	 */
	size_t max_keys;
	uint64_t start_ns;	/* CLOCK_MONOTONIC of the first slot */
	/* a view's cells, kept for the next view, are freed after this long unused; 0: kept */
	uint64_t view_cache_idle_ns;
};

struct agg;
struct agg_view;

struct agg *agg__new(const struct agg_opts *opts);
void agg__free(struct agg *a);
int agg__add(struct agg *a, const struct agg_event *ev);
/* Seals every slot that ended at or before @now_ns; frees the view cells kept if idle. */
void agg__rotate(struct agg *a, uint64_t now_ns);
/* Bytes of cells kept for the next window view (agg_opts.view_cache_idle_ns). */
size_t agg__view_cache_bytes(const struct agg *a);
/*
 * What window @w holds, read-only until the aggregator changes: all time is read in
 * place (no copy of 100 k keys per query), a rolling window is its slots merged by key.
 * *start_ns receives the start of the oldest slot in it. NULL when out of memory.
 */
struct agg_view *agg__view(const struct agg *a, enum ls_window w, uint64_t *start_ns);
void agg_view__free(struct agg_view *v);
size_t agg_view__count(const struct agg_view *v);
/* Key @i of the view (0 <= i < count) and its figures; -ENOENT past the end. */
int agg_view__get(const struct agg_view *v, size_t i, const struct agg_key **key, struct agg_val *val);
/* Key @i alone (NULL past the end): a pass that looks at a few keys' figures skips the rest's. */
const struct agg_key *agg_view__key(const struct agg_view *v, size_t i);
/* The start of the oldest slot window @w holds: what agg__view() reports, without merging. */
uint64_t agg__window_start(const struct agg *a, enum ls_window w);
uint64_t agg__dropped(const struct agg *a);
/*
 * Keys folded since start: when the key table is full, the keys no rolling window holds
 * lose their threads (tid, owner and releaser tid 0) and merge with their process's.
 */
uint64_t agg__folded(const struct agg *a);
size_t agg__mem_bytes(const struct agg *a);
size_t agg__keys(const struct agg *a);

/* Adds @v's histogram, each bucket times @f, to @dst[LS_HIST_BUCKETS]. */
void agg_hist_add(double *dst, const struct agg_val *v, double f);
void agg_stat_add_wait(struct agg_stat *st, uint64_t wait_ns);
void agg_stat_merge(struct agg_stat *dst, const struct agg_stat *src);
int ls_hist_bucket(uint64_t ns);
const char *ls_window_name(enum ls_window w);
int ls_window_parse(const char *s, enum ls_window *w);

#endif

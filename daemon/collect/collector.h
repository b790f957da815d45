/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The BPF side behind one lifecycle: collector__new() probes the kernel, opens, sizes and
 * loads the programs and creates the per-CPU rings; attach, start/stop, consume the
 * records, read counters and stacks; free. Nothing above this file touches libbpf.
 */
#ifndef __LS_COLLECTOR_H
#define __LS_COLLECTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <linux/types.h>
#include "lockscope.h"

struct collector;

/* Called for every ring-buffer record; a negative return stops that drain. */
typedef int (*collector_record_fn)(void *ctx, void *rec, size_t size);

struct collector_opts {
	__u32 tgid;			/* 0: every process */
	__u32 max_threads;		/* sleeping waits open at once */
	__u32 stack_entries;		/* distinct waiter stacks in the kernel map */
	__u32 max_locks;		/* locks with a stack sampler */
	__u32 owner_stacks;		/* owner stacks in flight */
	__u32 max_stack;		/* frames kept per waiter stack */
	__u32 ringbuf_bytes;		/* per CPU, a power of two >= page size */
	__u32 wait_keys;		/* entries of each wait table: distinct waits per second */
	__u32 stack_rate;		/* stacks/s per lock per CPU; 0 disables stacks */
	__u32 cpu_stack_rate;		/* stacks/s per CPU, all locks together */
	__u32 stack_budget_us;		/* us/s per CPU kernel-lock stacks may take */
	bool force_tp;			/* classic tracepoints even where tp_btf works */
	bool no_owner_stack;		/* never use bpf_task_from_pid */
	__u32 user_locks;		/* 1: futex waits too; 0: kernel locks only */
	__u32 block_waits;		/* 1: other blocking syscalls too (with user_locks) */
	__u32 uthreads;			/* threads with a futex wait open at once */
	__u32 ustack_entries;		/* distinct user stacks in the kernel map */
	__u32 max_holders;		/* lock holders noted for sampling */
	__u32 hold_freq;		/* holder samples/s per CPU; 0 disables */
	__u32 waker_min_rate;		/* futex waits/s that attach sched_waking; 0: always */
	__u32 waker_max_rate;		/* waits/s past which it is attached part-time; 0: no limit */
	__u32 ustack_bytes;		/* user stack window per dump; 0: frame pointers only */
	__u32 udump_rate;		/* user stack dumps/s per CPU, all user locks together */
	__u32 sched_threads;		/* threads with per-thread scheduling counts; 0: off */
	__u32 spin_freq;		/* spin-loop samples/s per CPU; 0 disables */
	__u32 spin_stack_bytes;		/* stack window of yield, spin and burst dumps */
	__u32 spin_dump_rate;		/* spin-sample dumps/s per CPU; 0: none */
	const struct ls_probes *probes;	/* NULL: probe now */
	collector_record_fn on_record;
	void *ctx;
};

/*
 * Whether @o can be loaded (@page_size: the system's): 0, or -EINVAL with the one-line
 * reason in @err naming the setting to change. collector__new() checks it first.
 */
int collector_opts__check(const struct collector_opts *o, __u32 page_size, char *err, size_t len);
/* The burst of stack dumps a CPU may save up: what a quarter of its ring holds. */
__u64 collector_dump_burst_ns(const struct collector_opts *o, __u32 bytes, __u64 cost_ns);

#define COLLECTOR_NOTES_MAX 16

/* A component that is off although asked for, and why (also logged). */
struct collector_note {
	char component[16];
	char reason[192];
};

#define COLLECTOR_PROG_MAX 16

enum collector_stack_kind { COLL_KSTACK, COLL_USTACK };

struct collector_prog {
	const char *name;
	const char *source;	/* the component: "klock", "ulock" or "schedstat" */
	const char *hook;	/* its ELF section: "tp_btf/sched_switch", "perf_event"... */
	bool attached;
	bool on_demand;		/* attached only while something needs it (a scan, a rate) */
	__u64 run_time_ns;	/* 0 unless kernel.bpf_stats_enabled */
	__u64 run_cnt;
	__u64 recursion_misses;	/* kernel skipped the program: nested on this CPU */
};

struct collector_features {
	bool tp_btf;		/* BTF-enabled tracepoints for lock:* */
	bool task_from_pid;	/* bpf_task_from_pid kfunc (6.2+): owner stacks */
	bool owner_stacks;	/* the loaded variant takes owner stacks */
	const char *attach_mode;	/* "tp_btf" or "tracepoint" */
	bool ulock;		/* futex waits through sched_switch are traced */
	bool holder_sampling;	/* cpu-clock holder sampling is attached */
	bool precise;		/* the futex syscall tracepoints exist (precise scans) */
	const char *user_unwind;	/* "dwarf" (stack dumps unwound with CFI) or "fp" */
	bool sched;		/* per-thread switches and times (the task iterator), yields, stops */
	bool spin_sampling;	/* cpu-clock spin-loop sampling is attached */
	/* what times waits and preemptions between switches: "run_queue" (sched_clock) or "monotonic" */
	const char *switch_clock;
};

int collector__new(const struct collector_opts *opts, struct collector **out);
int collector__attach(struct collector *c);
void collector__start(struct collector *c);
void collector__stop(struct collector *c);
/* An epoll fd that is readable when a ring wants draining. */
int collector__epoll_fd(const struct collector *c);
/* Drains every ring; returns records consumed or a negative errno. */
int collector__consume(struct collector *c);
void collector__counters(const struct collector *c, uint64_t out[LS_CNT_MAX]);
/* Copies up to @max frames of stack @id; returns the frame count or -errno. */
int collector__stack(const struct collector *c, enum collector_stack_kind kind, int id,
		     uint64_t *ips, int max);
/* Frees stack @id in the kernel map so the bucket can take another stack. */
int collector__stack_free(struct collector *c, enum collector_stack_kind kind, int id);
/*
 * Precise mode for process @pid: its futex calls are timed from the syscall tracepoints,
 * which are attached while at least one process is in the set.
 */
int collector__precise_add(struct collector *c, __u32 pid);
void collector__precise_del(struct collector *c, __u32 pid);
/* Turns the holder sampler's cpu-clock events on or off (no-op without one). */
void collector__hold_sampling(struct collector *c, bool on);
/*
 * Every event program off its hook (pause) or back on (resume), the maps kept: the host
 * runs untraced meanwhile, as with perf's --control disable. -EBUSY while a precise scan
 * runs. resume returns the kernel-lock waits that were open at the pause (dropped), or
 * -errno when a program cannot attach again (it stays paused).
 */
int collector__pause(struct collector *c);
int collector__resume(struct collector *c);
/* sched_waking attached (futex releasers named) while @on or a precise scan runs */
void collector__name_releasers(struct collector *c, bool on);
/* Whether sched_waking is attached now (releasers named). */
bool collector__naming_releasers(const struct collector *c);
/*
 * Frees the slots of threads that no longer exist, which would hold them forever. Returns
 * how many held a wait open: its end was missed (the kernel skipped the program, or the
 * thread exited mid-wait), reported as stale_thread_slots.
 */
int collector__gc(struct collector *c);
/* Thread slots of exited threads collector__gc() freed for other threads so far. */
uint64_t collector__slots_freed(const struct collector *c);
/* Entries of exited threads collector__gc() deleted from the tid-keyed maps so far. */
uint64_t collector__entries_swept(const struct collector *c);
struct sched_thread;
typedef int (*collector_thread_fn)(void *ctx, __u32 tid, const struct sched_thread *st);
/*
 * Calls @fn with the threads' scheduling counts; a nonzero return stops the walk. Returns
 * the pass's enum sched_iter_mode: SCHED_ITER_ALL, every thread (one pass in
 * SCHED_ITER_FULL_EVERY, and the first), or SCHED_ITER_CHANGED, only the threads that ran
 * since the previous pass (each other one has only slept since: alive, or gone without a
 * word until the next full pass); else -errno.
 */
int collector__sched_threads(struct collector *c, collector_thread_fn fn, void *ctx);
struct sched_peer_key;
struct sched_peer;
typedef int (*collector_peer_fn)(void *ctx, const struct sched_peer_key *k, const struct sched_peer *v);
/* Calls @fn with every (yielding thread, peer) pair of the yield storms seen. */
int collector__sched_peers(const struct collector *c, collector_peer_fn fn, void *ctx);
/*
 * The wait tables (lockscope.h): moves the programs on to the other table, waits until
 * none still uses the old one, then reads and empties it, calling @fn per entry. Returns
 * the entries read or -errno. Call it whenever the aggregator must be current.
 */
struct ls_wait_key;
struct ls_wait_val;
typedef int (*collector_wait_fn)(void *ctx, const struct ls_wait_key *k, const struct ls_wait_val *v);
int collector__waits_drain(struct collector *c, collector_wait_fn fn, void *ctx);
/* The drains of the wait tables so far. */
struct collector_drain_stats {
	uint64_t flips;		/* the epoch moved on: every drain */
	uint64_t waited;	/* ... and a CPU's program still used the old table, and was waited for */
	uint64_t raced;		/* ... and one still did past the bound (preempted): its wait may be lost */
};
struct collector_drain_stats collector__drain_stats(const struct collector *c);
int collector__progs(const struct collector *c, struct collector_prog *out, int max);
const struct collector_features *collector__features(const struct collector *c);
/* The components turned off at load or attach; returns how many. */
int collector__notes(const struct collector *c, const struct collector_note **out);
struct ls_probes;
const struct ls_probes *collector__probes(const struct collector *c);
int collector__nr_rings(const struct collector *c);
void collector__free(struct collector *c);

const char *ls_counter_name(enum ls_counter c);

#endif

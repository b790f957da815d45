// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * scheduler: what lockscope reads off the scheduler (see scheduler.h), with one program on
 * sched_switch. That hook fires on every context switch of the host, and even an empty
 * program there costs a ping-pong workload measurably, so the common path is a handful
 * of loads: a switch out asleep reads the syscall the task sleeps in (its registers), and
 * a switch in looks the task up in a map only when the pending filter says something is
 * open for it (a futex wait, a preemption, a stop).
 *
 * - Futex waits that block: a task switched out asleep whose syscall registers say
 *   futex(WAIT...) has begun a futex wait, and its next switch-in ends it; the wait is
 *   added to the wait table (exact), and the ones the stack sampler picks also go to the
 *   ring with their stacks. sched_waking names the thread whose futex(WAKE) ended it;
 *   it is attached only while futex waits come fast enough to be worth it.
 *   syscalls:sys_{enter,exit}_futex would put every syscall of every task on the tracing
 *   slow path, so those are attached only for precise scans of one process.
 * - Holders of contended locks: sampled on CPU (cpu-clock), and checked at their
 *   involuntary switches (kernel-lock owners too, noted by klock).
 * - Yield storms (yields that switched, zero sleeps), stops and the bursts after them.
 * - Spin loops and busy polls: a cpu-clock sampler counts, per thread, the samples whose
 *   code is a spin-wait loop (PAUSE) or a wait that returns at once.
 * - Per-thread switches and times: the kernel counts them (nvcsw, nivcsw,
 *   sum_exec_runtime, run_delay); an iter/task program reads them once a second.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "scheduler.h"
#include "common.bpf.h"
#include "sampling.bpf.h"
#include "ustack.bpf.h"
#include "arch.bpf.h"
#include "kowner.bpf.h"
#include "waits.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Load-time switches: what the daemon's config turned on. */
const volatile bool futex_waits = true;		/* user-locks */
const volatile bool block_waits = true;		/* block-waits: other blocking syscalls */
const volatile bool spin_source = true;		/* sched-threads: yields, stops, spin samples */
/*
 * Spin samples' dumps have a budget of their own, far below the waits': the share a thread
 * spins is counted from every sample, the dumps only say where, and a few dozen per second
 * show that. At the waits' rate their 16 KiB each would fill the ring between two timer
 * drains and wake the reader right after samples (ls_submit_lazy()). No burst: a steady
 * rate, one dump's credit at most. 0: no spin dumps.
 */
const volatile __u64 spin_dump_cost_ns = LS_NSEC_PER_SEC / SCHED_DEF_SPIN_DUMP_RATE;
/*
 * sched_waking runs at every wakeup of the host, and only waits need it (to name their
 * releasers): the daemon attaches it while futex waits (and with block-waits the other
 * blocking ones) come at waker-min-rate or more (waker_on). While it is off, the waits of
 * the daemon's current second are counted here, and the one that reaches the rate asks
 * for it at once with a record, so a lock that starts to be contended has its releasers
 * named from its first milliseconds. Past waker-max-rate the daemon attaches it only for
 * short looks (the record says how fast the waits came); a wait that ends while it is off
 * is marked LS_WF_UNWATCHED.
 */
const volatile __u32 waker_min_blocks = 0;	/* 0: sched_waking stays attached */
/*
 * The run queue's clock is one clock on every CPU (set by the daemon: sched_clock is
 * stable), so waits and preemptions that begin on one CPU and end on another are timed
 * by it (sched_now()).
 */
const volatile bool rq_clock_global = false;
bool waker_on = false;				/* the daemon has sched_waking attached */
__u32 waker_blocks = 0;				/* reset by the daemon every second */
__u64 waker_half_ns = 0;			/* when half of waker_min_blocks had come */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_bucket);
} spin_dump_bucket SEC(".maps");

/*
 * The last wait that ended on each CPU and who ended it: a wait ends as its thread is
 * switched in, so while that thread runs on, a wait it ends finds its own last one here
 * (chains: note_chain). A per-CPU slot, not the thread's hash slot: a lookup in the
 * thread hash at every named wake cost wake_storm's sched_waking 40-80 ns. A thread whose
 * entry another wait overwrote (it was switched out and back) gives no chain: chains are
 * missed then, never misnamed.
 */
struct last_wait {
	__u64 end_ns;		/* on the clock of the wait (precise: the monotonic one) */
	__u32 tid;
	__u32 waker_pid;
	__u32 waker_tid;
	__u32 precise;		/* timed by its syscall (precise scans), not by the switch */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct last_wait);
} last_waits SEC(".maps");

/*
 * Holder samples' dumps: half a CPU's at most, and that half while they want it. The
 * sampler runs at 997 Hz while a holder is on the CPU and took each dump the CPU's budget
 * had earned, while a sampled wait whose releaser is named needs two at once: the holder
 * sampler left waits none (a mutex server at user-dump-rate 20 got no releaser's stack in
 * 1 run of 3). Held to half, it got next to nothing instead: a wait asks again the moment
 * the CPU has earned its pair. So a wait leaves one dump for it while it has one due
 * (sample_stack()). A steady rate, one dump's credit at most, like the spin samples'.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_bucket);
} hold_dump_bucket SEC(".maps");

static __always_inline struct stack_bucket *hold_dump_bucket_of(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&hold_dump_bucket, &zero);
}

/*
 * Whether a holder sample may take a dump: one is due in the holder's share, and the CPU
 * has one; both are spent or neither (a share spent while the CPU had none would wait
 * its full period again, and the waits keep nothing for it meanwhile).
 */
static __always_inline bool sample_hold_dump(__u64 now)
{
	__u64 cost = cpu_stack_cost_ns * SCHED_HOLD_DUMP_SHARE;
	struct stack_bucket *b = hold_dump_bucket_of();

	return bucket_due(b, now, cost) && sample_cpu_stack(now) && bucket_take(b, now, cost, cost);
}

/* Whether a spin sample may take a dump: the spin budget, then the CPU's. */
static __always_inline bool sample_spin_dump(__u64 now)
{
	__u32 zero = 0;

	return bucket_take(bpf_map_lookup_elem(&spin_dump_bucket, &zero), now, spin_dump_cost_ns,
			   spin_dump_cost_ns) &&
	       sample_cpu_stack(now);
}

/* Task states (include/linux/sched.h); values, because BTF carries no macros. */
enum task_state_bits {
	TASK_RUNNING		= 0,
	TASK_STOPPED_BIT	= 0x0004,	/* __TASK_STOPPED: SIGSTOP, SIGTSTP */
	TASK_TRACED_BIT		= 0x0008,	/* __TASK_TRACED: a ptrace stop */
	TASK_DEAD_BIT		= 0x0080,	/* TASK_DEAD: an exiting task's last switch out */
	TASK_FREEZABLE_BIT	= 0x2000,	/* TASK_FREEZABLE (6.1+): a sleep the freezer may take */
	TASK_FROZEN_BIT		= 0x8000,	/* the freezer (6.1+): suspend, cgroup v1 freezer */
	TASK_STOP_MASK		= TASK_STOPPED_BIT | TASK_TRACED_BIT | TASK_FROZEN_BIT,
};
/* cgroup v2's freezer traps the task in a plain interruptible sleep, flagged in jobctl */
#define JOBCTL_TRAP_FREEZE	(1UL << 23)

/* libbpf's, from the running kernel's release: which task state bits it has */
extern unsigned int LINUX_KERNEL_VERSION __kconfig;

/*
 * One slot per thread that ever blocked on a futex, was preempted holding a lock or was
 * stopped: the thread sleeps and wakes on any CPU. A preallocated hash, not task storage:
 * storage is allocated on first use, and an allocation under the runqueue lock that
 * sched_switch holds can deadlock. Slots stay when idle (an update and a delete per wait
 * would cost more than the rest); the daemon sweeps those of exited threads.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ULOCK_DEF_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct sched_slot);
} thread_slots SEC(".maps");

/*
 * Most threads' slots, in front of thread_slots: an array indexed by the tid's low bits
 * (threads are made with consecutive tids, so a process's threads get consecutive
 * entries), each entry the slot of the one thread that claimed it (owner). A futex wait
 * looks its thread's slot up three times (switch out, waking, switch in): an array lookup
 * is a few loads the verifier inlines, a hash lookup a helper call of ~60 ns here. A
 * thread whose entry another thread owns has its slot in thread_slots instead; an entry
 * is freed when its owner exits (slot_release()). Mappable, though nothing maps it: the
 * kernel then starts the values on a page, so each slot's lines are the ones its layout
 * was made for (an array's values otherwise start where struct bpf_array ends: 312
 * bytes on 6.18, 56 into a line).
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ULOCK_SLOT_CACHE);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct sched_slot);
} slot_cache SEC(".maps");

/*
 * The pending filter: per bucket of tids, how many things are open (a futex wait, a
 * preemption, a stop). A switch-in and a wakeup look the thread's slot up only when its
 * bucket counts something: an array load instead of a hash lookup on every switch.
 * Opening and closing are paired; a pair the kernel cut short (a program it skipped)
 * leaves a count behind, which costs lookups, never a missed wait. A close is taken off
 * whichever of the bucket's two counts has one (own, then open): their sum never falls
 * below what is open.
 */
struct pending_bucket {
	/* what is open for the threads that do not own the bucket: atomic adds */
	__u32 open;
	/*
	 * The bucket's owner, the first thread that opened something in it (its tid above
	 * PB_OWN_SHIFT, 0: none; released at its exit), and what is open for it (below). Only
	 * the owner's own switches write it once it is claimed, and a thread's switches run
	 * one after another (a switch-in waits for the switch-out to finish on its CPU), so
	 * plain stores do: the atomic adds on open they spare cost wake_storm's switch
	 * program ~23 ns of its ~150 an event (docs/performance.md). Next to open: every
	 * switch reads both with one load (bucket_open()).
	 */
	__u32 own;
	/*
	 * enum pending_marks: a thread of the bucket is in a map the samplers read. The
	 * samplers run in interrupts, where a map is cold in the cache and the TLB: this array
	 * is hot (every switch reads it), so they look here before they look there.
	 */
	__u32 marks;
	/* the last switch out of a thread of the bucket was a preemption (yield peers) */
	__u32 preempted;
};

enum pending_marks {
	PB_HOLDER	= 1 << 0,	/* noted in holders */
	PB_SPINNER	= 1 << 1,	/* has an entry in spinners */
};

/* pending_bucket.own: tid << PB_OWN_SHIFT | count; tids are below 2^22 (PID_MAX_LIMIT) */
enum pending_own {
	PB_OWN_SHIFT	= 8,
	PB_OWN_COUNT	= (1 << PB_OWN_SHIFT) - 1,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LS_PENDING_BUCKETS);
	__type(key, __u32);
	__type(value, struct pending_bucket);
} pending SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, ULOCK_DEF_STACK_ENTRIES);
	__type(key, __u32);
	__uint(value_size, LS_MAX_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct holder {
	__u64 uaddr;
	__u32 tgid;
	__u32 kind;	/* enum ulock_holder_kind */
	__u32 rec_flags;	/* ULOCK_RF_SHARED of the wait that noted it */
	__u32 tid;	/* the holder this entry notes; 0: none */
};

/*
 * Threads that held a lock someone blocked on, in an array indexed by the tid's low bits
 * (holders_mask), each entry tagged with its tid. The cpu-clock sampler checks each
 * against the lock word and forgets those that let go; a holder whose entry another one
 * took is noted again at the next wait that names it. An array, not an LRU hash: every
 * futex wait on a mutex looks its owner up, and with switches few and caches cold an LRU
 * lookup cost 250-400 ns there (mutex_server), an array's a few loads.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ULOCK_DEF_MAX_HOLDERS);
	__type(key, __u32);
	__type(value, struct holder);
} holders SEC(".maps");
/* holders' max_entries - 1 (a power of 2, set by the daemon) */
const volatile __u32 holders_mask = ULOCK_DEF_MAX_HOLDERS - 1;

/* Thread @tid's entry in holders when it is noted there, else NULL. */
static __always_inline struct holder *holder_of(__u32 tid)
{
	__u32 idx = tid & holders_mask;
	struct holder *h = bpf_map_lookup_elem(&holders, &idx);

	return h && h->tid == tid ? h : NULL;
}

/* Processes a precise scan runs on; the syscall programs ignore everything else. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ULOCK_DEF_PRECISE_PIDS);
	__type(key, __u32);
	__type(value, __u8);
} precise_tgids SEC(".maps");

/*
 * Yield and sample figures of the threads that yield or are sampled (see scheduler.h):
 * most in the array, a thread's own entry while it lives (spinner_get()), the rest and
 * those of threads that exited in the LRU hash.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCHED_SPIN_CACHE);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct sched_spin_cached);
} spin_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SCHED_DEF_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct sched_spin_thread);
} spinners SEC(".maps");

/*
 * The spin check's answers for the user code addresses this CPU sampled last. A loop is
 * sampled at its few instructions over and over, and reading the code there was most of
 * the sampler's time: ~400 ns here, a page walk for a line no data access had touched
 * (docs/performance.md). Keyed by address space and address; each answer is used
 * SCHED_SPIN_MEMO_USES times and then read again, so code rewritten in place (a JIT) or
 * a freed address space's reuse is seen again soon.
 */
struct spin_memo {
	__u64 ip;
	__u64 mm;
	__u32 spin;
	__u32 uses;	/* left before the code is read again */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, SCHED_SPIN_MEMO_SLOTS);
	__type(key, __u32);
	__type(value, struct spin_memo);
} spin_memo SEC(".maps");

/*
 * Threads that exited since the daemon's last read, with their last counters; it drains
 * them. Most go in the array, indexed by the tid's low bits, where a hash insert costs
 * ~400 ns here; exited_tasks takes those whose entry is still taken.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SCHED_EXITED_CACHE);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct sched_exited);
} exited_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SCHED_DEF_MAX_EXITED);
	__type(key, __u32);
	__type(value, struct sched_task_rec);
} exited_tasks SEC(".maps");

/* Written only on yields; LRU so that pairs of threads long gone age out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SCHED_DEF_MAX_PEERS);
	__type(key, struct sched_peer_key);
	__type(value, struct sched_peer);
} peers SEC(".maps");

/*
 * Now, for what the switch times: a wait or a preemption from one switch to another. The
 * run queue's clock where it is one clock for all CPUs: __schedule() updated it before
 * sched_switch runs, so it is exact there (and within a tick anywhere else, enough for a
 * sampler's budget), and it is a load from @t's run queue where bpf_ktime_get_ns() is a
 * helper call: ~75 ns here, two per wait, under the run queue lock that others spin on.
 * Elsewhere, or without group scheduling (no path from a task to its run queue), the
 * monotonic clock. @t: a task on this CPU (current, or next at the switch).
 */
static __always_inline __u64 sched_now(struct task_struct *t)
{
	struct cfs_rq *cfs;

	if (rq_clock_global && bpf_core_field_exists(t->se.cfs_rq) &&
	    bpf_core_field_exists(((struct cfs_rq *)0)->rq)) {
		cfs = t->se.cfs_rq;
		if (cfs)
			return cfs->rq->clock;
	}
	return bpf_ktime_get_ns();
}

/*
 * Per CPU: the monotonic clock less the run queue's, as mono_now() last measured it, and
 * when (on the run queue's clock).
 */
struct clock_offset {
	__u64 rq_ns;
	__u64 offset_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct clock_offset);
} clock_offsets SEC(".maps");

/*
 * Now on the monotonic clock (the daemon's: a yield storm's last yield is an age to it),
 * at a switch, where the run queue's clock is exact (sched_now()): that clock plus its
 * offset from the monotonic one, measured on this CPU at most SCHED_CLOCK_RESYNC_NS ago.
 * The two clocks drift apart by parts per million, so the error stays microseconds, and a
 * yield costs a load instead of the helper call (50 ns of ~300 a yield's switch took, on
 * a loop of sched_yield(): docs/performance.md). Per CPU, so a thread that moves reads a
 * clock a few microseconds off the last one: its users compare signed.
 */
static __always_inline __u64 mono_now(struct task_struct *t)
{
	struct clock_offset *o;
	__u32 zero = 0;
	__u64 rq, now;

	if (!rq_clock_global)
		return bpf_ktime_get_ns();
	rq = sched_now(t);
	o = bpf_map_lookup_elem(&clock_offsets, &zero);
	if (!o)
		return bpf_ktime_get_ns();
	if (o->rq_ns && rq - o->rq_ns < SCHED_CLOCK_RESYNC_NS)
		return rq + o->offset_ns;
	now = bpf_ktime_get_ns();
	o->rq_ns = rq;
	o->offset_ns = now - rq;
	return now;
}

static const struct sched_slot empty_slot;
static const struct sched_spin_thread empty_spinner;
static const struct sched_peer empty_peer;

/*
 * Where @t entered the kernel: its registers at the top of its kernel stack. @direct (the
 * variants loaded where kfuncs exist): plain loads at the offset the kernel's own helper
 * gave once (task_pt_regs() is a constant offset from task->stack on every layout),
 * instead of that helper's call: ~17 ns at every switch that sleeps. NULL stacks (a
 * task past its exit) give a pointer whose loads fault safely and read 0.
 */
__u64 regs_off = 0;

static __always_inline struct pt_regs *task_regs(struct task_struct *t, bool direct)
{
	__u64 stack;

	if (!direct)
		return (struct pt_regs *)bpf_task_pt_regs(t);
	stack = (__u64)t->stack;
	if (!regs_off && stack)		/* the first switch calibrates, the same for all */
		regs_off = (__u64)bpf_task_pt_regs(t) - stack;
	return bpf_rdonly_cast((void *)(stack + regs_off), bpf_core_type_id_kernel(struct pt_regs));
}

/* ---- the pending filter ---- */

/*
 * Threads are made in runs of consecutive tids and run on different CPUs: spread them
 * (Fibonacci hashing), or every switch of a pool's threads would write cache lines its
 * neighbours on other CPUs write too.
 */
static __always_inline struct pending_bucket *pending_bucket(__u32 tid)
{
	__u32 key = (tid * 2654435761U) >> (32 - LS_PENDING_BITS);

	return bpf_map_lookup_elem(&pending, &key);
}

/* Whether @b's owner (@own: its own word) is @tid. */
static __always_inline bool pending_owned(__u32 own, __u32 tid)
{
	return own >> PB_OWN_SHIFT == tid;
}

static __always_inline void pending_open(__u32 tid)
{
	struct pending_bucket *b = pending_bucket(tid);
	__u32 own;

	if (!b)
		return;
	own = b->own;
	if (pending_owned(own, tid) && (own & PB_OWN_COUNT) < PB_OWN_COUNT) {
		b->own = own + 1;
		return;
	}
	if (!own && __sync_val_compare_and_swap(&b->own, 0, tid << PB_OWN_SHIFT | 1) == 0)
		return;
	__sync_fetch_and_add(&b->open, 1);
}

static __always_inline void pending_close(__u32 tid)
{
	struct pending_bucket *b = pending_bucket(tid);
	__u32 own;

	if (!b)
		return;
	own = b->own;
	if (pending_owned(own, tid) && (own & PB_OWN_COUNT)) {
		b->own = own - 1;
		return;
	}
	if (b->open)
		__sync_fetch_and_add(&b->open, -1);
}

/*
 * Exiting thread @tid gives its bucket up; what it left open was closed at this switch. A
 * plain store, as the owner's other writes: no other thread writes an owned word (they
 * claim only one that is 0).
 */
static __always_inline void pending_release(__u32 tid)
{
	struct pending_bucket *b = pending_bucket(tid);

	if (b && pending_owned(b->own, tid))
		b->own = 0;
}

/* Whether anything is open in @b: open and own's count, in one load of the two */
static __always_inline bool bucket_open(const struct pending_bucket *b)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	const __u64 mask = 0xffffffffULL | (__u64)PB_OWN_COUNT << 32;
#else
	const __u64 mask = 0xffffffffULL << 32 | PB_OWN_COUNT;
#endif
	_Static_assert(__builtin_offsetof(struct pending_bucket, own) == __builtin_offsetof(struct pending_bucket, open) + 4,
		       "open and own are one word");
	return *(const __u64 *)&b->open & mask;
}

static __always_inline bool pending_any(__u32 tid)
{
	struct pending_bucket *b = pending_bucket(tid);

	return b && bucket_open(b);
}

static __always_inline void pending_mark(__u32 tid, __u32 mark)
{
	struct pending_bucket *b = pending_bucket(tid);

	if (b && !(b->marks & mark))
		__sync_fetch_and_or(&b->marks, mark);
}

static __always_inline bool pending_marked(__u32 tid, __u32 mark)
{
	struct pending_bucket *b = pending_bucket(tid);

	return b && (b->marks & mark);
}

/*
 * Thread @tid's slot: its slot_cache entry when it owns it, else its thread_slots entry.
 * @create: a new slot when it has none, the entry when no thread owns it (a thread
 * never has both: the hash is looked at before the entry is claimed).
 */
static __always_inline struct sched_slot *thread_slot(__u32 tid, bool create)
{
	__u32 idx = tid & (ULOCK_SLOT_CACHE - 1);
	struct sched_slot *cached = bpf_map_lookup_elem(&slot_cache, &idx), *slot;

	if (cached && cached->owner == tid)
		return cached;
	slot = bpf_map_lookup_elem(&thread_slots, &tid);
	if (slot || !create)
		return slot;
	if (cached && !cached->owner && __sync_val_compare_and_swap(&cached->owner, 0, tid) == 0)
		return cached;
	if (bpf_map_update_elem(&thread_slots, &tid, &empty_slot, BPF_NOEXIST) &&
	    !(slot = bpf_map_lookup_elem(&thread_slots, &tid))) {
		ls_count(LS_DROP_USLOT_FULL);
		return NULL;
	}
	return slot ?: bpf_map_lookup_elem(&thread_slots, &tid);
}

/* whether a waker of a kind ends a wait (with sched_waking's program, below) */
static __always_inline bool ends_wait(const struct sched_slot *e, __u32 kind);

#include "sched_futex.bpf.h"

#include "sched_block.bpf.h"

#include "sched_spin.bpf.h"

/* ---- the tasks' own counters ---- */

/* CONFIG_SCHED_INFO's run-queue wait; older layouts have the same field */
static __always_inline __u64 run_delay(struct task_struct *t)
{
	if (bpf_core_field_exists(t->sched_info.run_delay))
		return t->sched_info.run_delay;
	return 0;
}

/* @t's counters as the kernel keeps them. */
static __always_inline void task_rec(struct task_struct *t, struct sched_task_rec *r)
{
	r->tid = t->pid;
	r->tgid = t->tgid;
	r->nvcsw = t->nvcsw;
	r->nivcsw = t->nivcsw;
	r->sum_exec_ns = t->se.sum_exec_runtime;
	r->run_delay_ns = run_delay(t);
	r->start_ns = t->start_time;
	r->end_ns = 0;
	r->events = sched_events(t);
	__builtin_memcpy(r->comm, t->comm, sizeof(r->comm));
}

/*
 * Exiting thread @tid's slot_cache entry, if it owns one, is cleared and freed for another
 * thread (the owner last, after the rest: a thread that claims it finds it clean). A wait
 * it had open was ended at this switch already (switched_out()); a thread_slots entry
 * goes at the daemon's sweep.
 */
static __always_inline void slot_release(__u32 tid)
{
	__u32 idx = tid & (ULOCK_SLOT_CACHE - 1);
	struct sched_slot *cached = bpf_map_lookup_elem(&slot_cache, &idx);

	if (!cached || cached->owner != tid)
		return;
	/* all but the owner, and the switches it shares 8 bytes with */
	__builtin_memset(cached, 0, offsetof(struct sched_slot, switches));
	cached->switches = 0;
	__builtin_memset(&cached->preempt_ns, 0, sizeof(*cached) - offsetof(struct sched_slot, preempt_ns));
	__sync_val_compare_and_swap(&cached->owner, tid, 0);
}

/*
 * @p's counters as it leaves, at its last switch out: the kernel counted that switch as
 * the dying thread's own, so its last voluntary switch is its previous one.
 */
static __always_inline void exit_rec(struct task_struct *p, struct sched_task_rec *r)
{
	task_rec(p, r);
	r->nvcsw--;
	r->events--;
	r->end_ns = bpf_ktime_get_ns();	/* the daemon's clock: an age, not a difference */
}

/*
 * A thread leaving, at its last switch out: its counters as they are now, for the daemon's
 * next read (the iterator no longer sees it there). Without them a thread's last second
 * before its exit would be lost from every window. Once per thread's life, off the switch's
 * common path: a branch it takes already (the dead state), not a program of its own on
 * sched_process_exit (one such program cost 600 ns an exit, every one of them cold).
 * Whatever its slot had open, switched_out() ended first.
 */
static __always_inline void thread_exited(struct task_struct *p)
{
	struct sched_task_rec rec;
	struct sched_exited *x;
	__u32 tid = p->pid, idx;

	slot_release(tid);
	pending_release(tid);
	if (!spin_source)
		return;
	spinner_release(tid);
	idx = tid & (SCHED_EXITED_CACHE - 1);
	x = bpf_map_lookup_elem(&exited_cache, &idx);
	if (x && !x->owner && __sync_val_compare_and_swap(&x->owner, 0, tid) == 0) {
		exit_rec(p, &x->rec);
		/* an exchange: a full barrier, the record is complete before it is ready */
		__sync_lock_test_and_set(&x->ready, 1);
		return;
	}
	exit_rec(p, &rec);
	if (bpf_map_update_elem(&exited_tasks, &tid, &rec, BPF_ANY))
		ls_count(LS_DROP_EXITED_FULL);
}

/* ---- the switch ---- */

/* Whether @t sleeps in an rt_mutex: a PI futex's (FUTEX_LOCK_PI, a requeue to one). */
static __always_inline bool pi_blocked(struct task_struct *t)
{
	/* without CONFIG_RT_MUTEXES there are no PI futexes either */
	return bpf_core_field_exists(t->pi_blocked_on) && t->pi_blocked_on;
}

/* @prev goes to sleep (a voluntary switch): a futex wait, a zero sleep, a stop, or its exit. */
static __always_inline void switched_out_asleep(void *ctx, struct task_struct *prev, unsigned int prev_state,
						bool direct)
{
	struct pt_regs *regs;
	long nr;

	if (prev_state & TASK_DEAD_BIT) {
		thread_exited(prev);
		return;
	}
	if (spin_source && stopping(prev, prev_state)) {
		stopped(prev);
		return;
	}
	/*
	 * A futex wait and a nanosleep sleep TASK_FREEZABLE, a PI futex's in an rt_mutex
	 * (pi_blocked_on). Neither (a pipe's, a socket's sleep): with block waits off nothing
	 * else is looked for, and the syscall's number is not read (7 ns a switch on ping-pong)
	 */
	if (!block_waits && unfreezable_sleep(prev_state) && !pi_blocked(prev))
		return;
	/* kernel threads make no syscalls */
	if (!prev->mm)
		return;
	regs = task_regs(prev, direct);
	nr = LS_SYSCALL_NR(regs);
	if (nr == LS_SYS_FUTEX || nr == LS_SYS_FUTEX_WAITV) {
		if (futex_waits)
			futex_block(ctx, prev, regs, nr);
	} else if (spin_source && is_zero_sleep(regs, nr)) {	/* a yield by another name */
		yield_count(prev, mono_now(prev), LS_POLL_SLEEP);
	} else if (block_waits) {
		block_begin(ctx, prev, regs, nr);
	}
}

/* Kernel threads make no syscalls: their registers are not even looked up. */
static __always_inline bool is_yield(struct task_struct *t, bool direct)
{
	return t->mm && LS_SYSCALL_NR(task_regs(t, direct)) == LS_SYS_SCHED_YIELD;
}

static __always_inline void switched_out(void *ctx, bool preempt, struct task_struct *prev,
					 struct task_struct *next, unsigned int prev_state, bool direct)
{
	struct pending_bucket *b = pending_bucket(prev->pid);
	struct sched_slot *e;
	bool yield;

	if (!b)
		return;
	if (bucket_open(b) && (e = thread_slot(prev->pid, false))) {
		/* it ran again, yet no switch named it as next: end its wait now */
		if (e->state == SLOT_BLOCKED)
			wait_close_unseen(e, prev, true);
		/* in the window after a stop: its events are counted at its switches out */
		if (e->resumed)
			resume_window(e, prev, true);
	}
	/* a preempted task is runnable, not waiting */
	if (!preempt && prev_state != TASK_RUNNING) {
		/* written only when it changes: most switches leave the line clean */
		if (b->preempted)
			b->preempted = 0;
		switched_out_asleep(ctx, prev, prev_state, direct);
		return;
	}
	/*
	 * Runnable and not yielding: it lost its CPU, by preemption or at its return to user
	 * space (a wakeup that made it reschedule there switches it out without the flag)
	 */
	yield = !preempt && spin_source && is_yield(prev, direct);
	if (b->preempted != !yield)
		b->preempted = !yield;
	if (yield)
		yielded(prev, next, mono_now(prev));
	/* one preemption, charged to one lock; the bucket's mark spares most a lookup */
	if (futex_waits && !((b->marks & PB_HOLDER) && holder_preempted(prev)))
		kholder_preempted(prev);
}

/* @next runs again: a futex wait it slept in ends, or a preemption, or a stop. */
static __always_inline void switched_in(struct task_struct *next)
{
	struct sched_slot *e = thread_slot(next->pid, false);

	if (!e)
		return;
	if (e->preempt_ns)
		preempt_end(e, next);
	if (e->state == SLOT_BLOCKED)
		wait_close(e, next->tgid, next->pid, next->comm, 0, sched_now(next), true);
	if (e->stop.stop_ns) {
		if (!e->resumed)
			resumed(e, next);
		else
			resume_window(e, next, false);
	}
}

static __always_inline int on_switch(void *ctx, bool preempt, struct task_struct *prev,
				     struct task_struct *next, unsigned int prev_state, bool direct)
{
	/* the idle task is not a thread of anyone's */
	if (prev->pid && ls_tgid_wanted(prev->tgid))
		switched_out(ctx, preempt, prev, next, prev_state, direct);
	if (next->pid && enabled && pending_any(next->pid))
		switched_in(next);
	return 0;
}

/* The daemon loads one of the two: sched_switch_direct where kfuncs exist (6.2+). */
SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	return on_switch(ctx, preempt, prev, next, prev_state, false);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch_direct, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	return on_switch(ctx, preempt, prev, next, prev_state, true);
}

/*
 * Whether the family of blocking call @btype is ended by a thread: a write to the pipe or
 * eventfd, the kill that sets a latch, a send, a peer's exit. Not a disk's completion (file
 * sync, a page fault's I/O) nor a sleep's timer: interrupts, in whatever task they find on
 * the CPU, which they must not name.
 */
static __always_inline bool thread_ended(__u32 btype)
{
	return btype != LS_BTYPE_SYNC && btype != LS_BTYPE_SLEEP && btype != LS_BTYPE_KERNEL;
}

/*
 * Whether syscall @nr can end another thread's blocking wait: writing to a pipe, socket or
 * eventfd (and reading from a full one: its writer waits), a signal (PostgreSQL's SetLatch
 * is a kill(SIGURG) read from a signalfd), a close or shutdown (the reader sees the end),
 * an exit (the parent's wait4), System V semaphores and queues. Anything else a thread
 * was doing when sched_waking ran in its context was an interrupt's doing: a timer, a
 * device (no helper tells an interrupt apart here: the per-CPU preempt count is out of
 * reach without KALLSYMS_ALL, and programs may run on a stack of their own).
 */
static __always_inline bool ends_waits(long nr)
{
	switch (nr) {
	case LS_SYS_WRITE:
	case LS_SYS_WRITEV:
	case LS_SYS_SENDTO:
	case LS_SYS_SENDMSG:
	case LS_SYS_SENDMMSG:
	case LS_SYS_SENDFILE:
	case LS_SYS_SPLICE:
	case LS_SYS_TEE:
	case LS_SYS_VMSPLICE:
	case LS_SYS_READ:
	case LS_SYS_READV:
	case LS_SYS_RECVFROM:
	case LS_SYS_RECVMSG:
	case LS_SYS_RECVMMSG:
	case LS_SYS_KILL:
	case LS_SYS_TKILL:
	case LS_SYS_TGKILL:
	case LS_SYS_RT_SIGQUEUEINFO:
	case LS_SYS_RT_TGSIGQUEUEINFO:
	case LS_SYS_PIDFD_SEND_SIGNAL:
	case LS_SYS_CLOSE:
	case LS_SYS_SHUTDOWN:
	case LS_SYS_CONNECT:
	case LS_SYS_EXIT:
	case LS_SYS_EXIT_GROUP:
	case LS_SYS_SEMOP:
	case LS_SYS_SEMTIMEDOP:
	case LS_SYS_MSGSND:
	case LS_SYS_FUTEX:	/* a futex wake that also ends a poll: an eventfd-like futex waiter */
	case LS_SYS_IO_URING_ENTER:
		return true;
	default:
		return false;
	}
}

/* Whether the poll in @e has reached its timeout (1 ms early: it counts from the call). */
static __always_inline bool timed_out(const struct sched_slot *e)
{
	return e->deadline_ns && bpf_ktime_get_ns() + LS_NSEC_PER_MSEC >= e->deadline_ns;
}

/*
 * What @cur, waking a thread, is doing (enum waker_kind): inside futex(WAKE...) or
 * FUTEX_UNLOCK_PI, the end of a critical section (*uaddr: the futex), or inside a syscall
 * that ends blocking waits (ends_waits()). 0 for neither: a signal, a timeout, a kill. An
 * interrupt taken while a thread was inside one of those is still named instead: what
 * the check cannot exclude.
 */
static __always_inline __u32 waker_kind(struct task_struct *cur, bool direct, __u64 *uaddr)
{
	struct pt_regs *regs;
	__u32 kind = 0;
	long nr;

	if (!cur->mm)
		return 0;
	regs = task_regs(cur, direct);
	nr = LS_SYSCALL_NR(regs);
	if (ends_waits(nr))
		kind |= WAKER_ENDS_WAITS;
	if (nr == LS_SYS_FUTEX && is_wake_cmd(LS_SYSCALL_ARG2(regs) & ULOCK_FUTEX_CMD_MASK)) {
		kind |= WAKER_FUTEX_WAKE;
		*uaddr = LS_SYSCALL_ARG1(regs);
	}
	return kind;
}

/*
 * Whether a waker of @kind ended the wait in @e. A futex wait: a futex wake. Another
 * blocking call that a thread ends (thread_ended()): a syscall that ends waits, unless
 * the poll's own timeout ran out.
 */
static __always_inline bool ends_wait(const struct sched_slot *e, __u32 kind)
{
	if (e->rec_flags & ULOCK_RF_BLOCKCALL)
		return (kind & WAKER_ENDS_WAITS) && thread_ended(e->op) && !timed_out(e);
	return kind & WAKER_FUTEX_WAKE;
}

/*
 * A chain: @waker, ending the wait in @e (thread @tid's), had itself been waiting during
 * it (its last wait ended after this one began), woken by a third thread: @tid waited for
 * @waker while @waker waited for that one. Not when the waiter itself woke the waker (two
 * threads taking turns).
 */
static __always_inline void note_chain(struct sched_slot *e, __u32 tid, __u32 waker)
{
	__u32 zero = 0;
	struct last_wait *w = bpf_map_lookup_elem(&last_waits, &zero);

	if (w && w->tid == waker && w->waker_tid && w->waker_tid != tid &&
	    w->precise == !!(e->rec_flags & ULOCK_RF_PRECISE) && w->end_ns > e->begin_ns)
		e->chain_pid = w->waker_pid;
}

/* Names @cur, whose syscall (@kind) ended the wait open in @e (thread @tid's), its releaser. */
static __always_inline void name_releaser(void *ctx, struct sched_slot *e, __u32 tid, struct task_struct *cur,
					  __u32 kind)
{
	if ((e->rec_flags & ULOCK_RF_RELEASER) || !ends_wait(e, kind))
		return;
	releaser_named(e, cur->tgid, cur->pid, cur->comm);
	note_chain(e, tid, cur->pid);
	if (e->rec_flags & ULOCK_RF_SAMPLED)
		take_stack(ctx, &e->releaser_stack_id, &e->releaser_dump, &e->rec_flags,
			   ULOCK_RF_RELEASER_STACK, ULOCK_RF_RELEASER_DUMP, false);
}

/*
 * Thread @p, idle in slot @e and still on its CPU, is woken by @cur (@kind, the futex
 * @uaddr): when the wake lands while it switches out, sched_waking runs before the switch
 * that opens its wait. The waker is kept in the slot, with the thread's on-CPU time,
 * for that wait to take (early_releaser()); without it, such a wait names no releaser
 * and a mutex wait no owner (a tenth of the sleeps of two threads taking turns at 30 k/s
 * here). A thread woken before it went to sleep does not sleep: the wait it opens later
 * has run since, and leaves this.
 */
static __always_inline void early_waker(struct task_struct *p, struct sched_slot *e, struct task_struct *cur,
					__u32 kind, __u64 uaddr)
{
	e->early_pid = cur->tgid;
	e->early_tid = cur->pid;
	__builtin_memcpy(e->early_comm, cur->comm, sizeof(e->early_comm));
	e->early_uaddr = uaddr;
	e->early_exec_ns = p->se.sum_exec_runtime;
	/* last, by an exchange (a full barrier): the switch program may be reading it now */
	__sync_lock_test_and_set(&e->early_kind, kind);
}

/*
 * The thread that ends a wait, named in its slot. sched_waking, not sched_wakeup: it runs
 * in the waker's context on every kernel, where sched_wakeup may run on the wakee's CPU.
 * Tasks with nothing open (the pending filter) and not on a CPU cost an array load and a
 * load from the task the kernel is waking.
 */
static __always_inline int on_waking(void *ctx, struct task_struct *p, bool direct)
{
	struct task_struct *cur;
	__u32 tid = p->pid, kind;
	struct sched_slot *e;
	__u64 uaddr = 0;
	bool on_cpu;

	if (!enabled)
		return 0;
	/* one still on its CPU may be switching out: its wait about to open, or opening */
	on_cpu = p->on_cpu;
	if (!on_cpu && !pending_any(tid))
		return 0;
	e = thread_slot(tid, false);
	if (!e || (e->state == SLOT_IDLE && !on_cpu))
		return 0;
	cur = bpf_get_current_task_btf();
	kind = waker_kind(cur, direct, &uaddr);
	if (!kind)
		return 0;
	if (e->state == SLOT_IDLE)
		early_waker(p, e, cur, kind, uaddr);
	else
		name_releaser(ctx, e, tid, cur, kind);
	return 0;
}

/* The daemon loads one of the two, as it does sched_switch's. */
SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking, struct task_struct *p)
{
	return on_waking(ctx, p, false);
}

SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking_direct, struct task_struct *p)
{
	return on_waking(ctx, p, true);
}

#include "sched_samplers.bpf.h"

/* ---- the tasks' own counters, once a second ---- */

/* enum sched_iter_mode: what the next pass writes */
__u32 iter_mode = SCHED_ITER_ALL;
/* SCHED_ITER_CHANGED: when the previous store pass began (bpf_ktime_get_ns()'s clock) */
__u64 iter_since_ns = 0;

/*
 * Whether @t has not run since the previous store pass began: it is not runnable, and its
 * CPU time was last accounted (se.exec_start: update_curr() at its switch out) longer ago
 * than that by its CPU's task clock, the clock exec_start is on, read now. The task clock
 * runs slower than time by the CPU's interrupt and steal time, never faster, so a task
 * that ran since is never taken for one that did not; an idle CPU's clock may lag, which
 * only writes more. "Now" is this task's: a pass over many tasks takes a while. A task
 * that has not run has no counter that moved: its switches, I/O syscalls and run-queue
 * wait move only with its time on CPU, and the time it slept the daemon derives. Where
 * the task's run queue cannot be reached (no group scheduling), or the pass writes every
 * task, false.
 */
static __always_inline bool iter_unchanged(struct task_struct *t)
{
	struct cfs_rq *cfs;
	__u64 clock, window;

	if (iter_mode != SCHED_ITER_CHANGED || t->__state == TASK_RUNNING ||
	    !bpf_core_field_exists(t->se.cfs_rq) || !bpf_core_field_exists(((struct cfs_rq *)0)->rq))
		return false;
	cfs = t->se.cfs_rq;	/* the task group's queue on the CPU the task last ran on */
	if (!cfs)
		return false;
	clock = cfs->rq->clock_task;
	window = bpf_ktime_get_ns() - iter_since_ns + SCHED_ITER_MARGIN_NS;
	return clock > window && t->se.exec_start < clock - window;
}

SEC("iter/task")
int dump_tasks(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	struct sched_task_rec r;

	if (!t || !t->pid || (targ_tgid && (__u32)t->tgid != targ_tgid) || iter_unchanged(t))
		return 0;
	task_rec(t, &r);
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}


/* ---- precise mode: the futex syscalls of the processes in precise_tgids ---- */

static __always_inline void precise_enter(void *ctx, __u64 uaddr, __u32 op, __u32 val)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct sched_slot *e;

	if (!enabled || !bpf_map_lookup_elem(&precise_tgids, &tgid))
		return;
	if (!is_wait_cmd(op & ULOCK_FUTEX_CMD_MASK))
		return;
	e = thread_slot(tid, true);
	if (e)
		wait_open(ctx, e, bpf_get_current_task_btf(), uaddr, op, val, SLOT_SYSCALL, 0);
}

static __always_inline void precise_exit(long ret)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u32 tid = t->pid;
	struct sched_slot *e = thread_slot(tid, false);

	if (e && e->state == SLOT_SYSCALL)
		wait_close(e, t->tgid, tid, t->comm, ret, bpf_ktime_get_ns(), false);
}

SEC("tracepoint/syscalls/sys_enter_futex")
int sched_enter_futex(struct trace_event_raw_sys_enter *ctx)
{
	precise_enter(ctx, ctx->args[0], ctx->args[1], ctx->args[2]);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex")
int sched_exit_futex(struct trace_event_raw_sys_exit *ctx)
{
	precise_exit(ctx->ret);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_futex_waitv")
int sched_enter_futex_waitv(struct trace_event_raw_sys_enter *ctx)
{
	struct futex_waitv first;

	if (bpf_probe_read_user(&first, sizeof(first), (void *)ctx->args[0]))
		return 0;
	precise_enter(ctx, first.uaddr, ULOCK_FUTEX_WAITV | (first.flags & ULOCK_FUTEX_PRIVATE),
		      first.val);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int sched_exit_futex_waitv(struct trace_event_raw_sys_exit *ctx)
{
	precise_exit(ctx->ret);
	return 0;
}

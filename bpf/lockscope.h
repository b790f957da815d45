/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every lockscope BPF component and user space share: the ring-buffer record header,
 * the counters every program keeps, and the limits both sides size their buffers with.
 * Fixed-width fields only: this header is compiled for the BPF target and for the host.
 */
#ifndef __LOCKSCOPE_H
#define __LOCKSCOPE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>	/* BPF programs get the __u* types from vmlinux.h */
#endif

/*
 * The deepest stack any program records. 127 is the kernel's PERF_MAX_STACK_DEPTH; the
 * daemon asks for fewer (config max_stack) and sizes the stack map's values accordingly.
 */
#define LS_MAX_STACK_DEPTH	127
#define LS_COMM_LEN		16

/* Defaults every component sizes its stack sampler with (see sampling.bpf.h). */
enum ls_defaults {
	LS_DEF_MAX_LOCKS	= 8192,		/* stack sampler buckets (a power of two) */
	LS_DEF_STACK_RATE	= 200,		/* stacks/s per lock per CPU before sampling */
	/* Stacks/s per CPU, all locks (kernel-lock stacks are held to a time budget too) */
	LS_DEF_CPU_STACK_RATE	= 500,
	/*
	 * Microseconds per second per CPU that kernel-lock stacks may take (ppm of its time).
	 * A kernel stack walk costs 2.5 us where the unwinder's tables are hot and 7-8 us in a
	 * sparse sample, where they are not (bench: kernel_locks), so a count alone bounds
	 * nothing: 500 stacks/s were up to 0.4 % of a CPU. 1000: 0.1 %, ~130 cold stacks/s.
	 */
	LS_DEF_STACK_BUDGET_US	= 1000,
	LS_DEF_WAIT_KEYS	= 16384,	/* distinct waits per second in a wait table */
	/*
	 * Buckets of the pending filter: the switch program looks a thread up in its maps
	 * only when its bucket counts something open (a wait, a preemption, a stop)
	 */
	LS_PENDING_BITS		= 15,
	LS_PENDING_BUCKETS	= 1 << LS_PENDING_BITS,
};

/*
 * Exact figures are aggregated where the waits happen: every completed wait adds to an
 * entry of a wait table (a BPF hash), keyed by what a wait is told apart by, and the daemon
 * drains the table once a second. The ring carries only what needs user space: the waits
 * the stack sampler picked (their stacks), owner stacks, holder samples and rare events.
 *
 * Two tables alternate: programs add to tables[epoch & 1] while the daemon drains the
 * other. A program counts itself in its CPU's wait_writers around its use of a table; the
 * daemon moves the epoch on, then asks every CPU, on that CPU (wait_barrier, run there by
 * BPF_PROG_TEST_RUN), whether one of our programs is inside a table there; once none is,
 * no program that may have read the old epoch still runs, and the daemon reads and
 * deletes the old table. So the daemon drains whenever it likes (once a second, and
 * before answering a query), and no wait is lost to the drain. The count is read only by
 * its own CPU, by programs and by the barrier's interrupt there, which see its stores in
 * program order: plain adds, no locked instruction, no barrier between CPUs.
 */
enum {
	LS_WAIT_BARRIER_BUSY = 1,	/* wait_barrier's return: a program uses a table on that CPU */
};
#define LS_HIST_BUCKETS		41	/* log2 of the wait in ns: [2^i, 2^(i+1)); 2^40 ns is 18 min */
/*
 * In front of the shared tables, each CPU keeps a small cache of entries (per epoch
 * half), updated with plain adds: no atomic, no hash lookup, for the waits a storm
 * repeats. Set-associative: a key goes to the first of the LS_WAIT_CACHE_WAYS slots of its
 * hash's set that is free or its own. A wait whose set holds other keys goes to the shared
 * table (status: shared_table_waits), where every CPU's atomic adds on one entry bounce
 * its lines between them. Direct-mapped, a quarter of pipe_storm's waits went there (its
 * few dozen keys collided in 256 slots); four ways, 0.0005-3.3 % (five runs).
 */
#define LS_WAIT_CACHE_SLOTS	256
#define LS_WAIT_CACHE_WAYS	4
#define LS_WAIT_TABLES		2

/* What a wait-table entry is about; the kind of lock is in ls_wait_key.type. */
enum ls_wait_class {
	LS_WAIT_KLOCK = 1,	/* a kernel lock: type is enum klock_lcb_flags (MUTEX|SPIN folded) */
	LS_WAIT_FUTEX,		/* a futex wait: type is enum ls_utype (scheduler.h) */
	LS_WAIT_KPREEMPT,	/* a kernel-lock owner preempted while others waited: type as KLOCK */
	LS_WAIT_UPREEMPT,	/* a user-lock holder preempted while others waited */
	LS_WAIT_BLOCK,		/* a blocking syscall not a futex: type is enum ls_btype (scheduler.h) */
};

/* Flags of an entry, beyond its class and type. */
enum ls_wait_flags {
	LS_WF_MMAP_LOCK	= 1U << 0,	/* the lock is the waiter's mm->mmap_lock */
	LS_WF_SIGLOCK	= 1U << 1,	/* the lock is the waiter's sighand->siglock */
	LS_WF_SHARED	= 1U << 2,	/* a futex without FUTEX_PRIVATE_FLAG: maybe cross-process */
	LS_WF_PRECISE	= 1U << 3,	/* timed from the syscall's entry to its exit (precise mode) */
	/*
	 * A user wait that ended with sched_waking detached (waker-min-rate, waker-max-rate):
	 * no releaser, because none was watched for, not because no thread woke it
	 */
	LS_WF_UNWATCHED	= 1U << 4,
	/*
	 * Above these: a chain. The waker had itself been waiting during this wait, and bits
	 * LS_WF_CHAIN_SHIFT.. hold the tgid of the thread that woke it (a pid is below
	 * PID_MAX_LIMIT, 2^22): A waited for B while B waited for C.
	 */
	LS_WF_CHAIN_SHIFT = 8,
};

struct ls_wait_key {
	__u64 lock;		/* kernel address, or the futex word's user address */
	__u32 pid;		/* waiter tgid */
	__u32 tid;
	__u16 class;		/* enum ls_wait_class */
	__u16 type;
	__u32 flags;		/* enum ls_wait_flags */
	__u32 owner_pid;	/* who held the lock when the wait began, 0 when unknown */
	__u32 owner_tid;
	__u32 releaser_pid;	/* futex: the thread whose wake ended the wait */
	__u32 releaser_tid;
};

/*
 * Who waited, as the first wait of an entry found them: the names, and the waiter's
 * process and cgroup, which its pid alone does not tell (a pid is reused once its process
 * is gone; a process moves between cgroups, most often right after it starts). Read once
 * per entry, not per wait.
 */
struct ls_wait_origin {
	__u64 start_ns;		/* the waiter's process: its leader's start_boottime */
	__u64 cgroup_id;	/* the waiter's cgroup v2, by the kernel's id (its directory's inode) */
	char comm[LS_COMM_LEN];
	char owner_comm[LS_COMM_LEN];
	char releaser_comm[LS_COMM_LEN];
};

struct ls_wait_val {
	__u64 count;
	__u64 total_ns;
	__u64 max_ns;
	__u64 min_ns;
	__u64 nonblocking;	/* precise mode: calls that returned without sleeping */
	__u32 hist[LS_HIST_BUCKETS];
	__u32 pad;
	struct ls_wait_origin who;
};

/* One slot of a CPU's wait cache: an entry of the epoch it names (0: never used). */
struct ls_wait_cached {
	struct ls_wait_key key;
	struct ls_wait_val val;
	__u32 epoch;
	__u32 used;
};

/* Every ring-buffer record starts with this tag so one handler can dispatch. */
enum ls_rec_type {
	LS_REC_KLOCK_WAIT = 1,	/* struct klock_wait_rec: a sampled kernel-lock wait, see klock.h */
	LS_REC_ULOCK_WAIT,	/* struct ulock_wait_rec: a sampled futex wait, see scheduler.h */
	LS_REC_ULOCK_HOLD,	/* struct ulock_hold_rec: a sample of a lock holder on CPU */
	LS_REC_USTACK,		/* struct ls_ustack_rec: registers and stack to unwind, see ustack.h */
	LS_REC_SCHED_YIELD,	/* struct sched_yield_rec: a yield storm's site, see scheduler.h */
	LS_REC_SCHED_SPIN,	/* struct sched_spin_rec: a sample in a spin loop */
	LS_REC_SCHED_RESUME,	/* struct sched_resume_rec: a stop and the events after it */
	LS_REC_WAIT,		/* struct ls_wait_rec: one wait the wait table had no room for */
	LS_REC_WAKER_WANTED,	/* struct ls_waker_rec: user waits reached waker-min-rate */
};

struct ls_rec_hdr {
	__u16 type;	/* enum ls_rec_type */
	__u16 size;	/* bytes of the whole record, header included */
	__u32 cpu;	/* CPU the record was written on */
};

/*
 * User waits reached waker-min-rate in a second while sched_waking was off: the last
 * @waits of them came in @span_ns, so the daemon knows their rate at once (the second half
 * of them: a trickle of the host's own waits before a storm does not count).
 */
struct ls_waker_rec {
	struct ls_rec_hdr hdr;
	__u64 span_ns;
	__u32 waits;		/* 0: no rate (waker-min-rate 1) */
	__u32 pad;
};

/* A wait that found its table full: what the entry would have counted, once. */
struct ls_wait_rec {
	struct ls_rec_hdr hdr;
	struct ls_wait_key key;
	__u64 wait_ns;
	__u32 nonblocking;	/* precise mode: the call returned without sleeping */
	__u32 pad;
	struct ls_wait_origin who;
};

/*
 * Per-CPU event and failure counters, one PERCPU_ARRAY slot each. Everything a program
 * fails to record lands in one of the LS_DROP_* slots; the daemon reports all of them.
 */
enum ls_counter {
	/*
	 * Waits themselves are counted in the wait tables (the daemon sums them): no counter
	 * on the per-wait path
	 */
	LS_CNT_SAMPLED,		/* kernel-lock waits the stack sampler picked */
	LS_CNT_STACKED,		/* waits that carried a waiter stack */
	LS_CNT_OWNER_STACKED,	/* waits that carried an owner stack */
	LS_CNT_CONTINUED,	/* begin on the lock already waited for (mutex spin -> sleep) */
	LS_CNT_SPIN_RESCHED,	/* a mutex's spin called schedule(): its wait found on the CPU it left */
	LS_CNT_QUEUED_AT_DRAIN,	/* a drain found ended kernel-lock waits left on a CPU and counted them */
	LS_CNT_RB_WAKEUPS,	/* records submitted with a forced ring-buffer wakeup */
	LS_CNT_OWNER_ON_CPU,	/* owner was running: another CPU's stack cannot be walked */
	LS_CNT_NESTED,		/* waits that began while another was open in the same slot */
	LS_CNT_USAMPLED,	/* futex waits the stack sampler picked */
	LS_CNT_USTACKED,	/* futex waits that carried a waiter user stack */
	LS_CNT_URELEASER,	/* futex waits whose waker was a thread in futex(WAKE...) */
	LS_CNT_UNONBLOCK,	/* precise mode: futex wait calls that returned without sleeping */
	LS_CNT_HOLDERS,		/* holders noted for sampling (owner of a contended lock) */
	LS_CNT_HOLD_SAMPLES,	/* cpu-clock samples that found a thread holding its lock */
	LS_CNT_HOLD_RELEASED,	/* cpu-clock samples of a noted holder that no longer held it */
	LS_CNT_HOLD_THROTTLED,	/* holder samples skipped: the CPU's stack dump budget was spent */
	LS_CNT_UDUMPS,		/* user stack dumps written (also each CPU's dump id sequence) */
	LS_CNT_UDUMP_SHORT,	/* dumps whose window stopped early at an unmapped page */
	LS_CNT_SPIN_SAMPLES,	/* cpu-clock samples that found a thread in a spin loop or busy poll */
	LS_CNT_SPIN_UNSTACKED,	/* spin samples without a stack: the CPU's dump budget was spent */
	LS_CNT_YIELD_SITES,	/* yield storm sites recorded */
	LS_CNT_RESUMES,		/* resumes after a stop reported */
	LS_CNT_HOLDER_PREEMPT,	/* holders of a contended user lock preempted while others waited */
	LS_CNT_KHOLDERS,	/* owners of a contended kernel lock noted for the switch check */
	LS_CNT_KHOLDER_PREEMPT,	/* owners of a contended kernel lock preempted while others waited */
	LS_CNT_TABLE_FULL,	/* waits sent by ring because the wait table was full */
	LS_CNT_BLOCK_WAKERS,	/* other blocking waits ended by a thread, named */
	LS_CNT_WAIT_SHARED,	/* waits added to the shared table: their set of cache slots held
				 * other keys (or a program on the CPU had the cache) */
	LS_CNT_UNSEEN_SWITCH_IN,/* waits whose end no sched_switch showed, timed at the
				 * thread's next switch out (or exit) from the kernel's accounting */
	LS_CNT_STACK_NS,	/* ns spent taking kernel-lock waits' stacks (the time budget's) */
	LS_CNT_UWORDS,		/* futex lock words read at a waiter's block (owner, holder note) */

	LS_DROP_FIRST,
	LS_DROP_RINGBUF = LS_DROP_FIRST,	/* ring buffer full: record lost */
	LS_DROP_SLOT_FULL,	/* per-thread wait map full: wait not timed */
	LS_DROP_NEST_DEPTH,	/* nesting deeper than the slot holds: inner wait not timed */
	LS_DROP_UNMATCHED_END,	/* contention_end without a begin we saw */
	LS_DROP_STACK_COLLISION,/* stack map bucket holds another stack (-EEXIST) */
	LS_DROP_STACK_FAILED,	/* stack map full or the walk failed */
	LS_DROP_OWNER_STACK,	/* owner stack wanted but not captured */
	LS_DROP_MISSED_END,	/* a wait whose end the kernel skipped (see prog_recursion) was
				 * found open and discarded, not timed */
	LS_DROP_USLOT_FULL,	/* per-thread futex wait map full: wait not timed */
	LS_DROP_USTACK_FAILED,	/* user stack wanted but not captured (no frame pointers,
				 * page not present, stack map full or collision) */
	LS_DROP_UNREADABLE,	/* the futex word's neighbourhood could not be read: no owner */
	LS_DROP_UDUMP_FAILED,	/* user stack dump wanted but the stack page was not present */
	LS_DROP_SCHED_FULL,	/* per-thread spin map full: a thread's yields and spin samples
				 * (or an exited thread's) not counted */
	LS_DROP_STOPS_FULL,	/* stopped-thread map full: a stop and its burst not reported */
	LS_DROP_SELF_LOCK,	/* a kernel lock contended inside lockscope's own programs (a
				 * map's bucket lock): not timed, as its begin or end is skipped */
	LS_DROP_WAIT_TABLE,	/* wait table full and the ring too: a wait not counted */
	LS_DROP_EXITED_FULL,	/* exited-thread map full: a thread's last second before it exited
				 * not counted */
	LS_DROP_LAST,

	LS_CNT_MAX = LS_DROP_LAST,
};

#endif /* __LOCKSCOPE_H */

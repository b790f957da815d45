/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * scheduler: everything lockscope reads off the scheduler, in one BPF component with one
 * sched_switch program (every program on that hook costs every context switch of the host,
 * even empty). Shared by scheduler.bpf.c and the daemon; see lockscope.h for what all
 * components share.
 *
 * - futex waits that block (user-space lock contention), their releasers, the holders of
 *   contended locks (sampled on CPU, and preempted while others wait);
 * - yield storms, stops and the bursts after them, spin loops and busy polls (sampled);
 * - per-thread switches and times, which the kernel counts already: read once a second
 *   from the tasks (an iter/task program), never counted per switch.
 */
#ifndef __SCHEDULER_H
#define __SCHEDULER_H

#include "lockscope.h"

/*
 * futex(2) commands and flags (include/uapi/linux/futex.h), copied as values because the
 * kernel has them only as macros, which BTF does not carry.
 */
enum ulock_futex_cmd {
	ULOCK_FUTEX_WAIT		= 0,
	ULOCK_FUTEX_WAKE		= 1,
	ULOCK_FUTEX_REQUEUE		= 3,
	ULOCK_FUTEX_CMP_REQUEUE		= 4,
	ULOCK_FUTEX_WAKE_OP		= 5,
	ULOCK_FUTEX_LOCK_PI		= 6,
	ULOCK_FUTEX_UNLOCK_PI		= 7,
	ULOCK_FUTEX_TRYLOCK_PI		= 8,
	ULOCK_FUTEX_WAIT_BITSET		= 9,
	ULOCK_FUTEX_WAKE_BITSET		= 10,
	ULOCK_FUTEX_WAIT_REQUEUE_PI	= 11,
	ULOCK_FUTEX_CMP_REQUEUE_PI	= 12,
	ULOCK_FUTEX_LOCK_PI2		= 13,
	/* not a futex(2) command: the futex_waitv(2) syscall, first futex of the vector */
	ULOCK_FUTEX_WAITV		= 1 << 16,
};

enum ulock_futex_flags {
	ULOCK_FUTEX_PRIVATE	= 128,	/* FUTEX_PRIVATE_FLAG: the word is process-private */
	ULOCK_FUTEX_CLOCK_RT	= 256,	/* FUTEX_CLOCK_REALTIME */
	ULOCK_FUTEX_CMD_MASK	= ~(ULOCK_FUTEX_PRIVATE | ULOCK_FUTEX_CLOCK_RT),
	ULOCK_FUTEX_TID_MASK	= 0x3fffffff,	/* PI futex word: owner tid in the low bits */
};

/*
 * glibc's pthread_mutex_t (x86-64, aarch64): the futex word `__lock` at offset 0 and the
 * owner's tid `__owner` at offset 8 (sysdeps/nptl/bits/struct_mutex.h). __lock is 2 while
 * the mutex is locked with waiters, the value lll_lock_wait sleeps on.
 */
enum ulock_glibc_layout {
	ULOCK_MUTEX_OWNER_OFF	= 8,
	ULOCK_LOCKED_WAITERS	= 2,
	ULOCK_FUTEX_WAITERS	= 0x80000000,	/* PI futex word: someone waits */
};

/*
 * What a futex wait is, by its op and the value it expected: a wait table entry's type for
 * LS_WAIT_FUTEX (and LS_WAIT_UPREEMPT: LS_UTYPE_PREEMPT).
 */
enum ls_utype {
	LS_UTYPE_MUTEX = 1,	/* lock-style futex word: glibc/Rust mutex, owner when known */
	LS_UTYPE_PI,		/* FUTEX_LOCK_PI: priority-inheritance mutex */
	LS_UTYPE_WAITV,		/* futex_waitv(2) */
	LS_UTYPE_CONDVAR,	/* waiting for an event: condvar, semaphore, barrier, rwlock, join */
	LS_UTYPE_HOLD,		/* not a wait: cpu-clock samples of a holder (count = samples) */
	LS_UTYPE_PREEMPT,	/* not a wait: a holder preempted while others waited (time) */
	LS_UTYPE_BLOCK = 16,	/* + enum ls_btype: a blocking syscall that is not a futex */
};

/*
 * "locked, with waiters": what glibc's lll_lock, Rust's Mutex and most futex locks sleep
 * on. Anything else waits for an event: a condvar's sequence, a semaphore at 0, a thread
 * id to clear. (glibc's rwlock sleeps on 3, and so does its condvar's group switch: the
 * value alone cannot tell them apart, so rwlocks count as events.)
 */
static inline __u16 ls_futex_type(__u32 op, __u32 val)
{
	switch (op & ULOCK_FUTEX_CMD_MASK) {
	case ULOCK_FUTEX_LOCK_PI:
	case ULOCK_FUTEX_LOCK_PI2:
	case ULOCK_FUTEX_TRYLOCK_PI:
		return LS_UTYPE_PI;
	case ULOCK_FUTEX_WAITV:
		return LS_UTYPE_WAITV;
	case ULOCK_FUTEX_WAIT_REQUEUE_PI:	/* pthread_cond_wait on a PI mutex */
		return LS_UTYPE_CONDVAR;
	default:
		return val == ULOCK_LOCKED_WAITERS ? LS_UTYPE_MUTEX : LS_UTYPE_CONDVAR;
	}
}

/*
 * A blocking wait that is not a futex: the family of the syscall the thread slept in
 * (a wait table entry's type with class LS_WAIT_BLOCK). Its object (the entry's lock) is
 * the file descriptor the call names plus one (the daemon reads what it is: pipe, socket,
 * eventfd...); 0 for none (poll and select name a set, sleeps and signals none).
 */
enum ls_btype {
	LS_BTYPE_POLL = 1,	/* poll, select, epoll_wait and their p* forms */
	LS_BTYPE_READ,		/* read, readv, pread64, preadv(2): a pipe, eventfd, tty, file */
	LS_BTYPE_RECV,		/* recvfrom, recvmsg, recvmmsg */
	LS_BTYPE_WRITE,		/* write, writev, pwrite64, sendto, sendmsg: a full pipe or socket */
	LS_BTYPE_ACCEPT,	/* accept, accept4, connect */
	LS_BTYPE_SYNC,		/* fsync, fdatasync, sync_file_range: waiting for the disk */
	LS_BTYPE_URING,		/* io_uring_enter waiting for completions */
	LS_BTYPE_FLOCK,		/* flock, fcntl(F_SETLKW...): a file lock */
	LS_BTYPE_CHILD,		/* wait4, waitid */
	LS_BTYPE_SIGNAL,	/* pause, rt_sigsuspend, rt_sigtimedwait */
	LS_BTYPE_SLEEP,		/* nanosleep, clock_nanosleep (a timed sleep, not contention) */
	LS_BTYPE_OTHER,		/* another syscall */
	LS_BTYPE_KERNEL,	/* no syscall: a page fault, reclaim, a kernel wait in user context */
	LS_BTYPE_MAX,
};

/* A blocking wait's poll timeout when it has none (or none the registers show). */
#define LS_NO_TIMEOUT 0xffffffffU

/* What the BPF side learnt about one futex wait. */
enum ulock_rec_flags {
	ULOCK_RF_SHARED		= 1U << 0,	/* no FUTEX_PRIVATE_FLAG: may be shared across processes */
	ULOCK_RF_STACK		= 1U << 1,	/* stack_id is valid */
	ULOCK_RF_SAMPLED	= 1U << 2,	/* the sampler wanted stacks for this wait */
	ULOCK_RF_RELEASER	= 1U << 3,	/* releaser_* fields are valid */
	ULOCK_RF_RELEASER_STACK	= 1U << 4,	/* releaser_stack_id is valid */
	ULOCK_RF_PRECISE	= 1U << 5,	/* timed from sys_enter to sys_exit (precise mode) */
	ULOCK_RF_BLOCKED	= 1U << 6,	/* the call slept (always set in switch mode) */
	ULOCK_RF_WORDS		= 1U << 7,	/* word0 and word8 were read */
	ULOCK_RF_HOLDER		= 1U << 8,	/* the owner was noted for holder sampling */
	ULOCK_RF_DUMP		= 1U << 9,	/* stack_dump names a dump to unwind (ustack.h) */
	ULOCK_RF_RELEASER_DUMP	= 1U << 10,	/* releaser_dump names a dump to unwind */
	ULOCK_RF_BLOCKCALL	= 1U << 11,	/* not a futex: op is enum ls_btype, uaddr fd + 1 (LS_WAIT_BLOCK) */
	ULOCK_RF_UNWATCHED	= 1U << 12,	/* ended with sched_waking detached (LS_WF_UNWATCHED) */
};

/* What a waking thread was doing, as far as ending other threads' waits goes. */
enum waker_kind {
	WAKER_FUTEX_WAKE	= 1U << 0,	/* inside futex(WAKE...) or FUTEX_UNLOCK_PI */
	WAKER_ENDS_WAITS	= 1U << 1,	/* inside a syscall that ends blocking waits (ends_waits()) */
};

/* How a noted holder is checked: where its tid sits relative to the futex word. */
enum ulock_holder_kind {
	ULOCK_HOLDER_MUTEX = 1,	/* glibc mutex: tid at word + ULOCK_MUTEX_OWNER_OFF */
	ULOCK_HOLDER_PI,	/* PI futex: tid in the word itself */
	ULOCK_HOLDER_KERNEL,	/* a kernel sleeping lock (preemption records only; see kowner.bpf.h) */
};

/*
 * A futex wait the stack sampler picked, with its stacks. Every wait is counted in the
 * wait table; these are the sample the daemon tells callers apart by.
 */
struct ulock_wait_rec {
	struct ls_rec_hdr hdr;
	__u64 uaddr;		/* the futex word, in the waiter's address space */
	__u64 end_ns;
	__u64 wait_ns;
	__u32 pid;
	__u32 tid;
	__u32 op;		/* futex(2) op as passed (command | flags), or ULOCK_FUTEX_WAITV */
	__u32 val;		/* the value the waiter expected the word to hold */
	__u32 word0;		/* the word at uaddr when the wait began */
	__u32 word8;		/* the word at uaddr + 8: glibc mutex __owner */
	__u32 rec_flags;	/* enum ulock_rec_flags */
	__s32 ret;		/* precise mode: the syscall's return value */
	__s32 stack_id;		/* waiter user stack in ustacks, < 0 when none */
	__s32 releaser_stack_id;
	__u64 stack_dump;	/* waiter stack dump id (ULOCK_RF_DUMP), instead of stack_id */
	__u64 releaser_dump;	/* releaser stack dump id (ULOCK_RF_RELEASER_DUMP) */
	__u32 releaser_pid;
	__u32 releaser_tid;
	char comm[LS_COMM_LEN];
	char releaser_comm[LS_COMM_LEN];
};

/* One cpu-clock sample of a thread while it held a lock others were waiting for. */
struct ulock_hold_rec {
	struct ls_rec_hdr hdr;
	__u64 uaddr;
	__u32 pid;
	__u32 tid;
	__s32 stack_id;		/* holder user stack in ustacks, < 0 when none */
	__u32 kind;		/* enum ulock_holder_kind */
	__u32 rec_flags;	/* ULOCK_RF_SHARED as the waiter saw the word; ULOCK_RF_STACK or _DUMP */
	__u32 pad;
	__u64 stack_dump;	/* holder stack dump id (ULOCK_RF_DUMP), instead of stack_id */
	char comm[LS_COMM_LEN];
};


/*
 * One thread as the daemon sees it (not a BPF map value): the kernel's own counters, read
 * once a second by the task iterator (struct sched_task_rec), and the spin figures the
 * programs count (struct sched_spin_thread). The switch counts are the kernel's
 * (nvcsw/nivcsw: the very counters /proc prints): a switch is voluntary when the task was
 * not preempted and its state was not TASK_RUNNING; everything else (preemption,
 * sched_yield) is involuntary.
 */
struct sched_thread {
	__u64 voluntary;
	__u64 involuntary;
	__u64 oncpu_ns;		/* se.sum_exec_runtime */
	__u64 blocked_ns;	/* off CPU, not runnable: its life less the two others */
	__u64 runq_ns;		/* off CPU, runnable: sched_info.run_delay */
	/*
	 * Yield spinning: sched_yield() calls that switched to another thread, and zero
	 * sleeps (nanosleep(0)), which always switch. Yields that find nothing else to run
	 * return without a switch: the samples see those (poll_nr LS_POLL_YIELD).
	 */
	__u64 yields;
	__u64 yield_spin_ns;	/* on CPU between the yields of a storm */
	__u64 storm_start_ns;	/* the current storm: yields at most SCHED_STORM_GAP_NS apart */
	__u64 storm_yields;
	__u64 storm_spin_ns;
	__u64 last_yield_ns;
	/*
	 * cpu-clock samples that found the thread on CPU, those in a spin loop, and those
	 * inside a wait that returns at once (busy polling: zero-timeout poll/epoll/select)
	 */
	__u64 samples;
	__u64 spin_samples;
	__u64 poll_samples;
	__u64 events;		/* sched_task_rec.events: what a burst is made of */
	__u32 tgid;
	__u32 poll_nr;		/* the syscall of its last busy-poll sample (enum ls_poll_call) */
	__u32 storm_via;	/* LS_POLL_NONE (sched_yield) or LS_POLL_SLEEP (a zero sleep) */
	__u32 flags;		/* enum sched_thread_flags */
	__u64 start_ns;		/* CLOCK_MONOTONIC when the thread started (0: not known) */
	char comm[LS_COMM_LEN];
};

enum sched_thread_flags {
	/*
	 * Gone when read: only its spin figures are left (the kernel's counters went with the
	 * task); the daemon keeps what it read while the thread ran.
	 */
	SCHED_THREAD_EXITED	= 1 << 0,
	/* exited, with the kernel's counters at its last switch out: all are final */
	SCHED_THREAD_FINAL	= 1 << 1,
};

/*
 * What a pass of the task iterator writes (iter_mode and iter_since_ns, set by the daemon
 * before the pass). The thread store's passes write only the threads that ran since the
 * previous one began, and every thread every SCHED_ITER_FULL_EVERY passes; a sweep's
 * liveness pass writes every thread.
 */
enum sched_iter_mode {
	SCHED_ITER_ALL,		/* every thread */
	SCHED_ITER_CHANGED,	/* the threads that ran since the previous store pass began */
};

/*
 * The store's passes (one a second, and a query's): every tenth writes every thread, so
 * that a thread gone without its exit record is known gone within ~10 s.
 */
#define SCHED_ITER_FULL_EVERY 10
/* added to a pass's window: the task clock and the monotonic clock drift apart by ppm */
#define SCHED_ITER_MARGIN_NS 1000000ULL

/* What the task iterator writes per thread: the kernel's counters, nothing counted by us. */
struct sched_task_rec {
	__u32 tid;
	__u32 tgid;
	__u64 nvcsw;
	__u64 nivcsw;
	__u64 sum_exec_ns;	/* se.sum_exec_runtime */
	__u64 run_delay_ns;	/* sched_info.run_delay (CONFIG_SCHED_INFO), 0 without */
	__u64 start_ns;		/* start_time: CLOCK_MONOTONIC when the thread started */
	__u64 end_ns;		/* when it switched out for the last time; 0: it runs */
	__u64 events;		/* nvcsw + I/O syscalls (ioac.syscr + syscw): what a burst is made of */
	char comm[LS_COMM_LEN];
};

/*
 * A thread's last counters in the exited_cache array: claimed by its tid (owner), then
 * filled, then published (ready); the daemon reads the ready ones and frees them.
 */
struct sched_exited {
	__u32 owner;		/* 0: free */
	__u32 ready;
	struct sched_task_rec rec;
};

/* A thread a sched_yield() storm yielded to: the one it is probably waiting for. */
struct sched_peer_key {
	__u32 tid;		/* the yielding thread */
	__u32 peer;		/* the thread its yield switched to */
};

struct sched_peer {
	__u64 yields;
	__u64 preempted;	/* yields where the peer had last been switched out by preemption */
	char comm[LS_COMM_LEN];	/* the peer's name at the last yield: it may exit first */
};

/* A yield loop among a few threads (a spin-then-yield lock's) yields to each of the others. */
enum { SCHED_SPIN_PEERS = 3 };	/* peers counted in a spinner's own entry */

/* One of a spinner's own peers: @tid 0 is a free one. */
struct sched_spin_peer {
	__u32 tid;
	__u32 pad;
	struct sched_peer v;
};

/*
 * The figures the programs count per thread, only for threads that yield or are sampled
 * (spin_cache while it lives, most of them; else an LRU map, where those long quiet age
 * out). Its first SCHED_SPIN_PEERS peers are counted in the entry the yield writes
 * anyway, and only more of them in the peers map: a lookup there was a sixth of a
 * yield's switch (docs/performance.md).
 */
struct sched_spin_thread {
	__u64 yields;
	__u64 yield_spin_ns;
	__u64 storm_start_ns;
	__u64 storm_yields;
	__u64 storm_spin_ns;
	__u64 last_yield_ns;
	__u64 last_yield_exec_ns;	/* sum_exec_runtime at the last yield */
	__u64 samples;
	__u64 spin_samples;
	__u64 poll_samples;
	__u32 poll_nr;
	__u32 storm_via;
	__u32 tgid;		/* who it was: the thread may have exited when the daemon reads it */
	__u32 pad;
	char comm[LS_COMM_LEN];
	struct sched_spin_peer peers[SCHED_SPIN_PEERS];
};

/*
 * A spinner's entry in the direct-mapped array that holds most of them, indexed by the
 * tid's low bits: an array lookup where the spinners map's is a hash's (a fifth of a
 * yield's switch). @owner 0: free.
 */
struct sched_spin_cached {
	__u32 owner;
	__u32 pad;
	struct sched_spin_thread sp;
};

/* The waits that return at once when their timeout is zero, as poll_nr names them. */
enum ls_poll_call {
	LS_POLL_NONE,
	LS_POLL_POLL,		/* poll(2), ppoll(2) */
	LS_POLL_SELECT,		/* select(2), pselect6(2) */
	LS_POLL_EPOLL,		/* epoll_wait(2), epoll_pwait(2), epoll_pwait2(2) */
	LS_POLL_SLEEP,		/* nanosleep(2), relative clock_nanosleep(2): storm_via only */
	LS_POLL_YIELD,		/* sched_yield(2) that found nothing else to run */
};

/*
 * A thread that was stopped (SIGSTOP, ptrace, freezer, suspend), from its stop until
 * the burst window after it resumed has closed. Times on the boot clock, which runs
 * through system suspend.
 */
struct sched_stop {
	__u64 stop_ns;
	__u64 resume_ns;
	__u64 stop_events;	/* sched_events() when it stopped */
	__u64 resume_events;	/* sched_events() when it resumed */
	__u64 window_events;	/* sched_events() when last counted in the window after the resume */
	__u64 window_ns;	/* when they were last counted, after the resume */
	__u64 stack_dump;	/* a user stack dump taken in the window, 0 if none */
};

/*
 * A thread's slot (scheduler.bpf.c): the daemon's sweep reads whether an exited
 * thread's slot held something open.
 */
enum slot_state {
	SLOT_IDLE,	/* no futex wait open; kept for the thread's next wait */
	SLOT_BLOCKED,	/* switch mode: asleep in a futex wait since begin_ns */
	SLOT_SYSCALL,	/* precise mode: inside a futex wait call since begin_ns */
};

/*
 * What is open for one thread: a futex wait, a preemption while holding a lock, a stop.
 * Laid out by use, in whole cache lines (four: slot_cache's entries begin on a line).
 * Every wait reads and writes the first two lines only: the first holds the wait, the
 * claim and the preemption each switch in checks; the second what the wait's end and its
 * waker touch, and the stop each switch in checks. The rest is for sampled waits, early
 * wakers, preempted holders and stops.
 */
struct sched_slot {
	__u64 uaddr;
	__u64 begin_ns;
	__u32 state;		/* enum slot_state */
	__u32 op;
	__u32 val;
	__u32 rec_flags;	/* enum ulock_rec_flags */
	__u32 releaser_pid;
	__u32 releaser_tid;
	/* the thread's switches out (nvcsw + nivcsw) and on-CPU time when the wait began */
	__u64 exec_ns;
	__u32 switches;
	__u32 owner;		/* slot_cache: the thread this entry is the slot of; 0: free */
	/* the thread, holding a contended lock, was preempted at preempt_ns (0: it was not) */
	__u64 preempt_ns;

	/* the second line */
	__u32 early_kind;	/* see early_pid below */
	__u32 chain_pid;	/* the wait open: its waker had been waiting on this process */
	__u32 resumed;		/* the stop is over: counting the burst window */
	__u32 pad1;
	/* a blocking wait's poll timeout runs out then (bpf_ktime_get_ns()); 0: none known */
	__u64 deadline_ns;
	char releaser_comm[LS_COMM_LEN];
	/* stopped, or in the burst window after the resume (stop.stop_ns != 0, in this line) */
	struct sched_stop stop;

	/* a sampled wait's: the lock word and owner field (ULOCK_RF_WORDS), the stacks */
	__u32 word0;
	__u32 word8;
	__s32 stack_id;
	__s32 releaser_stack_id;
	__u64 stack_dump;
	__u64 releaser_dump;
	/*
	 * A waker that came while the thread was still switching out, before the switch that
	 * opens its wait ran (early_waker()): its names, what it was doing (early_kind, enum
	 * waker_kind; 0: none), the futex it woke, and the thread's on-CPU time then, which is
	 * the time the wait opens with only if the kernel had already put the thread to sleep.
	 */
	__u64 early_exec_ns;
	__u64 early_uaddr;
	__u32 early_pid;
	__u32 early_tid;
	char early_comm[LS_COMM_LEN];
	__u64 preempt_addr;
	__u32 preempt_kind;	/* enum ulock_holder_kind */
	__u32 preempt_flags;	/* user: ULOCK_RF_SHARED; kernel: the lock's klock_lcb_flags */
	__u64 pad2;		/* to four whole lines */
};

enum { SCHED_SLOT_LINE = 64 };	/* the cache line sched_slot's layout is made for */
_Static_assert(sizeof(struct sched_slot) % SCHED_SLOT_LINE == 0, "slots are whole lines");
_Static_assert(__builtin_offsetof(struct sched_slot, stop.stop_ns) < 2 * SCHED_SLOT_LINE &&
	       __builtin_offsetof(struct sched_slot, releaser_comm) < 2 * SCHED_SLOT_LINE &&
	       __builtin_offsetof(struct sched_slot, preempt_ns) < SCHED_SLOT_LINE, "every wait's fields in two lines");

/* Records the scheduler component writes; stack dumps precede the record naming them. */
enum sched_rec_flags {
	SCHED_RF_DUMP		= 1U << 0,	/* stack_dump names a dump to unwind */
	SCHED_RF_POLL		= 1U << 1,	/* sched_spin_rec: a busy-poll sample, not PAUSE */
};

/* The site of a yield storm: written on the storm's second yield, then every so often. */
struct sched_yield_rec {
	struct ls_rec_hdr hdr;
	__u32 pid;
	__u32 tid;
	__u32 rec_flags;	/* enum sched_rec_flags */
	__u32 pad;
	__u64 stack_dump;
	char comm[LS_COMM_LEN];
};

/*
 * A cpu-clock sample that found a thread in a user spin loop, or busy polling
 * (SCHED_RF_POLL), with its user stack.
 */
struct sched_spin_rec {
	struct ls_rec_hdr hdr;
	__u32 pid;
	__u32 tid;
	__u64 ip;		/* the sampled user instruction pointer (busy poll: after the syscall) */
	__u64 stack_dump;
	__u32 rec_flags;
	__u32 pad;
	char comm[LS_COMM_LEN];
};

/* A stop and what followed: written when the burst window after the resume closes. */
struct sched_resume_rec {
	struct ls_rec_hdr hdr;
	__u32 pid;
	__u32 tid;
	__u64 stop_ns;		/* how long the thread was stopped (boot clock) */
	__u64 resume_ns;	/* when it resumed (boot clock) */
	__u64 window_events;	/* events in the first SCHED_BURST_WINDOW_NS after it */
	__u64 window_ns;	/* the part of the window the count covers */
	/*
	 * sched_events() when it stopped: the daemon holds it to the thread's rate before,
	 * from the task counters it reads every second
	 */
	__u64 stop_events;
	__u64 stack_dump;
	__u32 rec_flags;
	__u32 pad;
	char comm[LS_COMM_LEN];
};

enum sched_defaults {
	SCHED_DEF_MAX_THREADS	= 32768,
	/*
	 * Threads with spin figures: those sampled on CPU or yielding, forgotten oldest first.
	 * Small on purpose: the sampler's map is cold in the cache at every sample, and a
	 * large one costs TLB misses too
	 */
	SCHED_DEF_MAX_SPINNERS	= 4096,
	SCHED_SPIN_CACHE	= 1024,		/* ... most of them in the direct-mapped array (a power of 2) */
	SCHED_DEF_MAX_EXITED	= 16384,	/* threads exiting between two reads (a second) */
	SCHED_EXITED_CACHE	= 4096,		/* ... most of them in the direct-mapped array (a power of 2) */
	SCHED_DEF_MAX_PEERS	= 4096,		/* (yielder, peer) pairs */
	SCHED_DEF_MAX_STOPS	= 1024,		/* threads stopped at once */
	/*
	 * spin samples/s per CPU: prime, and no simple ratio to the common HZ (100, 250,
	 * 300, 1000), so sampling does not lock onto the tick that preempts lock holders.
	 * Each sample is a timer interrupt into whatever runs, whether or not it spins: on
	 * ping-pong (bench --interleaved) 997/s cost 1.9 points, 173/s 0.3, 49/s none that
	 * the bench resolves. The low rate of always-on profilers (bcc's profile 49 Hz,
	 * Parca 19 Hz): a thread spinning all its time gives the finding's 20 samples in
	 * half a second, one spinning 5 % of it 140 in a minute's window
	 */
	SCHED_DEF_SPIN_FREQ	= 47,
	SCHED_DEF_STACK_BYTES	= 16384,	/* dump window: event loops keep big arrays on the stack */
	SCHED_DEF_SPIN_DUMP_RATE = 20,		/* spin-sample dumps/s per CPU (spin-dump-rate) */
	/* holder samples take at most 1/this of a CPU's dumps (user-dump-rate) */
	SCHED_HOLD_DUMP_SHARE	= 2,
	/* user code addresses whose spin check each CPU remembers (a power of 2) */
	SCHED_SPIN_MEMO_SLOTS	= 64,
	/* a remembered answer is used this many times, then the code is read again */
	SCHED_SPIN_MEMO_USES	= 64,
	/* the storm's second yield and every 1024th after it carry the site's stack */
	SCHED_YIELD_STACK_FIRST	= 2,
	SCHED_YIELD_STACK_EVERY	= 1024,
};

/* Times, in nanoseconds. */
#define SCHED_STORM_GAP_NS	1000000000ULL	/* a pause this long ends a yield storm */
#define SCHED_BASE_PERIOD_NS	1000000000ULL	/* baseline period of a thread's event rate (daemon) */
#define SCHED_BURST_WINDOW_NS	100000000ULL	/* events counted this long after a resume */
#define SCHED_STOP_MIN_NS	100000000ULL	/* shorter stops (a tracer's syscall stops) are not reported */
#define SCHED_CLOCK_RESYNC_NS	10000000ULL	/* mono_now() measures its offset again after this */
/* a burst's stack is taken once this many events followed the resume */
#define SCHED_BURST_STACK_EVENTS 64

/* Defaults the daemon sizes maps with when the config says nothing. */
enum ulock_defaults {
	ULOCK_DEF_MAX_THREADS	= 16384,	/* threads that blocked on a futex */
	ULOCK_SLOT_CACHE	= 8192,		/* slots in the direct-mapped array (a power of 2) */
	ULOCK_DEF_STACK_ENTRIES	= 16384,	/* distinct user stacks */
	ULOCK_DEF_MAX_HOLDERS	= 4096,		/* holders noted for sampling at once */
	/*
	 * holder samples/s per CPU (prime: no lockstep). Each sample is a timer interrupt on
	 * every CPU while holders are noted: at 997/s they cost the futex server 2 points
	 * (docs/performance.md); 199/s still gives a contended lock hundreds a second.
	 */
	ULOCK_DEF_HOLD_FREQ	= 199,
	ULOCK_DEF_PRECISE_PIDS	= 64,		/* processes in precise (syscall) mode at once */
	/*
	 * futex waits per second that attach sched_waking (their releasers): a contended
	 * lock makes thousands, an idle thread pool's timed waits a few
	 */
	ULOCK_DEF_WAKER_MIN_RATE = 100,
	/*
	 * user waits per second past which sched_waking is attached part-time: it costs every
	 * wakeup of the host and each named wait ~140 ns (wake_storm, docs/performance.md), so
	 * 20 000 named waits a second are ~0.3 % of a CPU
	 */
	ULOCK_DEF_WAKER_MAX_RATE = 20000,
};

#endif /* __SCHEDULER_H */

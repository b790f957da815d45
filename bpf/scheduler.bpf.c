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
const volatile bool spin_source = true;		/* sched-threads: yields, stops, spin samples */
/*
 * The dump window of yield sites, spin samples and bursts: event loops keep large arrays
 * on the stack (libuv's uv__io_poll has 12 KiB of epoll events between a yield and
 * uv_run), and these dumps are few.
 */
const volatile __u32 spin_stack_bytes = 0;
/*
 * Spin samples' dumps have a budget of their own, far below the waits': the share a thread
 * spins is counted from every sample, the dumps only say where, and a few dozen per second
 * show that. At the waits' rate their 16 KiB each would fill the ring between two timer
 * drains and wake the reader right after samples (ls_submit_lazy()). No burst: a steady
 * rate, one dump's credit at most. 0: no spin dumps.
 */
const volatile __u64 spin_dump_cost_ns = LS_NSEC_PER_SEC / SCHED_DEF_SPIN_DUMP_RATE;
/*
 * sched_waking runs at every wakeup of the host, and only futex waits need it (to name
 * their releasers): the daemon attaches it while futex waits come at waker-min-rate or
 * more (waker_on). While it is off, the futex waits of the daemon's current second are
 * counted here, and the one that reaches the rate asks for it at once with a record, so a
 * lock that starts to be contended has its releasers named from its first milliseconds.
 */
const volatile __u32 waker_min_blocks = 0;	/* 0: sched_waking stays attached */
bool waker_on = false;				/* the daemon has sched_waking attached */
__u32 waker_blocks = 0;				/* reset by the daemon every second */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stack_bucket);
} spin_dump_bucket SEC(".maps");

/* Whether a spin sample may take a dump: the spin budget, then the CPU's. */
static __always_inline bool sample_spin_dump(__u64 now)
{
	return bucket_take(&spin_dump_bucket, now, spin_dump_cost_ns, spin_dump_cost_ns) &&
	       sample_cpu_stack(now);
}

/* Task states (include/linux/sched.h); values, because BTF carries no macros. */
enum task_state_bits {
	TASK_RUNNING		= 0,
	TASK_STOPPED_BIT	= 0x0004,	/* __TASK_STOPPED: SIGSTOP, SIGTSTP */
	TASK_TRACED_BIT		= 0x0008,	/* __TASK_TRACED: a ptrace stop */
	TASK_FROZEN_BIT		= 0x8000,	/* the freezer (6.1+): suspend, cgroup v1 freezer */
	TASK_STOP_MASK		= TASK_STOPPED_BIT | TASK_TRACED_BIT | TASK_FROZEN_BIT,
};
/* cgroup v2's freezer traps the task in a plain interruptible sleep, flagged in jobctl */
#define JOBCTL_TRAP_FREEZE	(1UL << 23)

enum slot_state {
	SLOT_IDLE,	/* no futex wait open; kept for the thread's next wait */
	SLOT_BLOCKED,	/* switch mode: asleep in a futex wait since begin_ns */
	SLOT_SYSCALL,	/* precise mode: inside a futex wait call since begin_ns */
};

/* What is open for one thread: a futex wait, a preemption while holding a lock, a stop. */
struct sched_slot {
	/* the futex wait */
	__u64 uaddr;
	__u64 begin_ns;
	__u32 state;		/* enum slot_state */
	__u32 op;
	__u32 val;
	__u32 word0;
	__u32 word8;
	__u32 rec_flags;	/* enum ulock_rec_flags */
	__s32 stack_id;
	__s32 releaser_stack_id;
	__u64 stack_dump;
	__u64 releaser_dump;
	__u32 releaser_pid;
	__u32 releaser_tid;
	char releaser_comm[LS_COMM_LEN];
	/* the thread, holding a contended lock, was preempted at preempt_ns (0: it was not) */
	__u64 preempt_ns;
	__u64 preempt_addr;
	__u32 preempt_kind;	/* enum ulock_holder_kind */
	__u32 preempt_flags;	/* user: ULOCK_RF_SHARED; kernel: the lock's klock_lcb_flags */
	/* stopped, or in the burst window after the resume (stop.stop_ns != 0) */
	struct sched_stop stop;
	__u32 resumed;		/* the stop is over: counting the burst window */
	__u32 pad;
};

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
 * The pending filter: per bucket of tids, how many things are open (a futex wait, a
 * preemption, a stop). A switch-in and a wakeup look the thread's slot up only when its
 * bucket counts something: an array load instead of a hash lookup on every switch.
 * Opening and closing are paired; a pair the kernel cut short (a program it skipped)
 * leaves a count behind, which costs lookups, never a missed wait.
 */
struct pending_bucket {
	__u32 open;
	/*
	 * enum pending_marks: a thread of the bucket is in a map the samplers read. The
	 * samplers run in interrupts, where a map is cold in the cache and the TLB: this array
	 * is hot (every switch reads it), so they look here before they look there.
	 */
	__u32 marks;
	/* the last switch out of a thread of the bucket was a preemption (yield peers) */
	__u32 preempted;
	__u32 pad;
};

enum pending_marks {
	PB_HOLDER	= 1 << 0,	/* noted in holders */
	PB_SPINNER	= 1 << 1,	/* has an entry in spinners */
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
	__u32 pad;
};

/*
 * Threads that held a lock someone blocked on, keyed by tid. The cpu-clock sampler checks
 * each against the lock word and forgets those that let go; LRU so that holders never
 * sampled again age out instead of filling the map.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, ULOCK_DEF_MAX_HOLDERS);
	__type(key, __u32);
	__type(value, struct holder);
} holders SEC(".maps");

/* Processes a precise scan runs on; the syscall programs ignore everything else. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ULOCK_DEF_PRECISE_PIDS);
	__type(key, __u32);
	__type(value, __u8);
} precise_tgids SEC(".maps");

/* Yield and sample figures of the threads that yield or are sampled (see scheduler.h). */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SCHED_DEF_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct sched_spin_thread);
} spinners SEC(".maps");

/* Threads that exited since the daemon's last read, with their last counters; it drains them. */
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

static const struct sched_slot empty_slot;
static const struct sched_spin_thread empty_spinner;
static const struct sched_peer empty_peer;

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

static __always_inline void pending_open(__u32 tid)
{
	struct pending_bucket *b = pending_bucket(tid);

	if (b)
		__sync_fetch_and_add(&b->open, 1);
}

static __always_inline void pending_close(__u32 tid)
{
	struct pending_bucket *b = pending_bucket(tid);

	if (b && b->open)
		__sync_fetch_and_add(&b->open, -1);
}

static __always_inline bool pending_any(__u32 tid)
{
	struct pending_bucket *b = pending_bucket(tid);

	return b && b->open;
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

static __always_inline struct sched_slot *thread_slot(__u32 tid, bool create)
{
	struct sched_slot *slot = bpf_map_lookup_elem(&thread_slots, &tid);

	if (slot || !create)
		return slot;
	if (bpf_map_update_elem(&thread_slots, &tid, &empty_slot, BPF_NOEXIST) &&
	    !(slot = bpf_map_lookup_elem(&thread_slots, &tid))) {
		ls_count(LS_DROP_USLOT_FULL);
		return NULL;
	}
	return slot ?: bpf_map_lookup_elem(&thread_slots, &tid);
}

/* ---- futex waits ---- */

static __always_inline bool is_wait_cmd(__u32 cmd)
{
	return cmd == ULOCK_FUTEX_WAIT || cmd == ULOCK_FUTEX_WAIT_BITSET ||
	       cmd == ULOCK_FUTEX_LOCK_PI || cmd == ULOCK_FUTEX_LOCK_PI2 ||
	       cmd == ULOCK_FUTEX_WAIT_REQUEUE_PI || cmd == ULOCK_FUTEX_WAITV;
}

static __always_inline bool is_wake_cmd(__u32 cmd)
{
	return cmd == ULOCK_FUTEX_WAKE || cmd == ULOCK_FUTEX_WAKE_BITSET ||
	       cmd == ULOCK_FUTEX_WAKE_OP || cmd == ULOCK_FUTEX_UNLOCK_PI ||
	       cmd == ULOCK_FUTEX_REQUEUE || cmd == ULOCK_FUTEX_CMP_REQUEUE ||
	       cmd == ULOCK_FUTEX_CMP_REQUEUE_PI;
}

/*
 * The futex wait in syscall @nr with registers @regs: false when it is not one. Only valid
 * while the task is current (its user memory is the one mapped).
 */
static __always_inline bool futex_call(struct pt_regs *regs, long nr, __u64 *uaddr, __u32 *op, __u32 *val)
{
	struct futex_waitv first;

	if (nr == LS_SYS_FUTEX) {
		*uaddr = LS_SYSCALL_ARG1(regs);
		*op = LS_SYSCALL_ARG2(regs);
		*val = LS_SYSCALL_ARG3(regs);
		return is_wait_cmd(*op & ULOCK_FUTEX_CMD_MASK);
	}
	if (nr != LS_SYS_FUTEX_WAITV)
		return false;
	/* futex_waitv(waiters, nr, ...): name the wait by its first futex */
	if (bpf_probe_read_user(&first, sizeof(first), (void *)LS_SYSCALL_ARG1(regs)))
		return false;
	*uaddr = first.uaddr;
	*op = ULOCK_FUTEX_WAITV | (first.flags & ULOCK_FUTEX_PRIVATE);
	*val = first.val;
	return true;
}

/*
 * A wait whose futex word can name its owner: PI (the word is the owner's tid) or glibc's
 * mutex protocol (the waiter found it locked with waiters; __owner follows). Only these
 * read the word: a read of user memory (~100 ns) was a fifth of a wait's cost at the switch.
 */
static __always_inline bool names_owner(__u32 op, __u32 val)
{
	__u32 cmd = op & ULOCK_FUTEX_CMD_MASK;

	if (cmd == ULOCK_FUTEX_LOCK_PI || cmd == ULOCK_FUTEX_LOCK_PI2)
		return true;
	return val == ULOCK_LOCKED_WAITERS && (cmd == ULOCK_FUTEX_WAIT || cmd == ULOCK_FUTEX_WAIT_BITSET);
}

/* The owner the futex word names, for a mutex-style or PI wait; 0 when none. */
static __always_inline __u32 futex_owner(const struct sched_slot *e, __u32 tid)
{
	__u32 cmd = e->op & ULOCK_FUTEX_CMD_MASK, owner;

	if (!(e->rec_flags & ULOCK_RF_WORDS))
		return 0;
	if (cmd == ULOCK_FUTEX_LOCK_PI || cmd == ULOCK_FUTEX_LOCK_PI2)
		owner = e->word0 & ULOCK_FUTEX_TID_MASK;
	else if (e->val == ULOCK_LOCKED_WAITERS && (cmd == ULOCK_FUTEX_WAIT || cmd == ULOCK_FUTEX_WAIT_BITSET))
		owner = e->word8;
	else
		return 0;
	return owner == tid ? 0 : owner;
}

/* Notes the lock's owner (if the word names one) for the holder sampler. */
static __always_inline void note_holder(struct sched_slot *e, __u32 tgid, __u32 tid)
{
	__u32 cmd = e->op & ULOCK_FUTEX_CMD_MASK, owner = futex_owner(e, tid);
	struct holder h = { .uaddr = e->uaddr, .tgid = tgid, .rec_flags = e->rec_flags & ULOCK_RF_SHARED };
	const struct holder *cur;

	if (!owner)
		return;
	h.kind = cmd == ULOCK_FUTEX_LOCK_PI || cmd == ULOCK_FUTEX_LOCK_PI2 ? ULOCK_HOLDER_PI : ULOCK_HOLDER_MUTEX;
	/*
	 * The threads of a contended lock own it in turn, so most waits find their owner noted
	 * already: a lookup, where an update of the LRU map cost a mutex wait ~75 ns more.
	 */
	cur = bpf_map_lookup_elem(&holders, &owner);
	if ((cur && cur->uaddr == h.uaddr && cur->tgid == h.tgid && cur->kind == h.kind &&
	     cur->rec_flags == h.rec_flags) ||
	    !bpf_map_update_elem(&holders, &owner, &h, BPF_ANY)) {
		pending_mark(owner, PB_HOLDER);
		e->rec_flags |= ULOCK_RF_HOLDER;
		ls_count(LS_CNT_HOLDERS);
	}
}

/*
 * A user stack for the record: a dump for the daemon to unwind when dumps are on (any
 * code, with or without frame pointers; the daemon's unwinder walks frame pointers where
 * CFI is missing), else a frame-pointer walk here. A dump that fails (ring full, stack
 * page not present) is not replaced by a walk here: through code without frame pointers
 * it would give a stack of garbage addresses. @lazy: for a sampler (ustack_dump()).
 */
static __always_inline void take_stack(void *ctx, __s32 *id, __u64 *dump, __u32 *flags,
				       __u32 fp_flag, __u32 dump_flag, bool lazy)
{
	long sid;

	*id = -1;
	*dump = 0;
	if (ustack_bytes) {
		*dump = ustack_dump(ustack_bytes, lazy);
		if (*dump)
			*flags |= dump_flag;
		return;
	}
	sid = bpf_get_stackid(ctx, &stacks, BPF_F_USER_STACK);
	if (sid < 0) {
		ls_count(LS_DROP_USTACK_FAILED);
		return;
	}
	*id = sid;
	*flags |= fp_flag;
}

/* Opens a wait in @e for the current thread, which is about to sleep (or enters the call). */
static __always_inline void wait_open(void *ctx, struct sched_slot *e, __u32 tgid, __u32 tid,
				      __u64 uaddr, __u32 op, __u32 val, enum slot_state state)
{
	__u32 words[3];
	__u64 now = bpf_ktime_get_ns();

	e->uaddr = uaddr;
	e->begin_ns = now;
	e->op = op;
	e->val = val;
	e->rec_flags = state == SLOT_SYSCALL ? ULOCK_RF_PRECISE : ULOCK_RF_BLOCKED;
	if (!(op & ULOCK_FUTEX_PRIVATE))
		e->rec_flags |= ULOCK_RF_SHARED;
	e->stack_id = -1;
	e->releaser_stack_id = -1;
	e->stack_dump = 0;
	e->releaser_dump = 0;
	e->releaser_pid = 0;
	e->releaser_tid = 0;
	e->word0 = e->word8 = 0;
	/* one read for the word and glibc's owner field behind it */
	if (names_owner(op, val)) {
		if (!bpf_probe_read_user(words, sizeof(words), (void *)uaddr)) {
			e->word0 = words[0];
			e->word8 = words[ULOCK_MUTEX_OWNER_OFF / sizeof(__u32)];
			e->rec_flags |= ULOCK_RF_WORDS;
			note_holder(e, tgid, tid);
		} else {
			ls_count(LS_DROP_UNREADABLE);
		}
	}
	if (sample_stack(uaddr, now)) {
		e->rec_flags |= ULOCK_RF_SAMPLED;
		take_stack(ctx, &e->stack_id, &e->stack_dump, &e->rec_flags, ULOCK_RF_STACK,
			   ULOCK_RF_DUMP, false);
	}
	if (e->state == SLOT_IDLE)
		pending_open(tid);
	e->state = state;
}

/* A sampled wait, with its stacks: the sample callers are told apart by. */
static __always_inline void emit_sample(struct sched_slot *e, __u32 tgid, __u32 tid, const char *comm,
					__u64 wait_ns, __s32 ret)
{
	struct ulock_wait_rec *r;
	void *rb;

	r = ls_reserve(&rb, LS_REC_ULOCK_WAIT, sizeof(*r));
	if (!r)
		return;
	r->uaddr = e->uaddr;
	r->end_ns = bpf_ktime_get_ns();
	r->wait_ns = wait_ns;
	r->pid = tgid;
	r->tid = tid;
	r->op = e->op;
	r->val = e->val;
	r->word0 = e->word0;
	r->word8 = e->word8;
	r->rec_flags = e->rec_flags;
	r->ret = ret;
	r->stack_id = e->stack_id;
	r->releaser_stack_id = e->releaser_stack_id;
	r->stack_dump = e->stack_dump;
	r->releaser_dump = e->releaser_dump;
	r->releaser_pid = e->releaser_pid;
	r->releaser_tid = e->releaser_tid;
	__builtin_memcpy(r->releaser_comm, e->releaser_comm, sizeof(r->releaser_comm));
	bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), comm);
	ls_submit(rb, r);
}

/* The wait in @e ended: counted in the table, and sent with its stacks when sampled. */
static __always_inline void wait_close(struct sched_slot *e, __u32 tgid, __u32 tid, const char *comm,
				       __s32 ret)
{
	__u64 wait_ns = bpf_ktime_get_ns() - e->begin_ns;
	bool nonblocking = (e->rec_flags & ULOCK_RF_PRECISE) && !(e->rec_flags & ULOCK_RF_BLOCKED);
	__u32 owner = futex_owner(e, tid);
	struct ls_wait_key key = {
		.lock = e->uaddr,
		.pid = tgid,
		.tid = tid,
		.class = LS_WAIT_FUTEX,
		.type = ls_futex_type(e->op, e->val),
		.flags = (e->rec_flags & ULOCK_RF_SHARED ? LS_WF_SHARED : 0) |
			 (e->rec_flags & ULOCK_RF_PRECISE ? LS_WF_PRECISE : 0),
		.owner_pid = owner ? tgid : 0,	/* the daemon checks the owner is a thread of tgid */
		.owner_tid = owner,
		.releaser_pid = e->releaser_pid,
		.releaser_tid = e->releaser_tid,
	};
	struct ls_wait_names names = { .comm = comm, .releaser_comm = e->releaser_tid ? e->releaser_comm : NULL };

	e->state = SLOT_IDLE;
	pending_close(tid);
	wait_add(&key, wait_ns, nonblocking, &names);
	if (nonblocking)
		ls_count(LS_CNT_UNONBLOCK);
	if (!(e->rec_flags & ULOCK_RF_SAMPLED))
		return;
	ls_count(LS_CNT_USAMPLED);
	if (!nonblocking && (e->rec_flags & (ULOCK_RF_STACK | ULOCK_RF_DUMP)))
		ls_count(LS_CNT_USTACKED);
	emit_sample(e, tgid, tid, comm, wait_ns, ret);
}

/* @prev goes to sleep in futex call @nr: a futex wait begins. Runs in @prev's context. */
/* A futex wait while sched_waking is off: the one that reaches the rate asks for it. */
static __always_inline void waker_wanted(void)
{
	struct ls_rec_hdr *r;
	void *rb;

	if (__sync_fetch_and_add(&waker_blocks, 1) + 1 != waker_min_blocks)
		return;
	r = ls_reserve(&rb, LS_REC_WAKER_WANTED, sizeof(*r));
	if (r)	/* the daemon acts on it now, not at its next timer drain */
		bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

static __always_inline void futex_block(void *ctx, struct task_struct *prev, struct pt_regs *regs, long nr)
{
	__u32 tgid = prev->tgid, tid = prev->pid, op, val;
	struct sched_slot *e;
	__u64 uaddr;

	if (!futex_call(regs, nr, &uaddr, &op, &val) || !(e = thread_slot(tid, true)))
		return;
	if (e->state == SLOT_SYSCALL) {	/* precise mode times it; note that it slept */
		e->rec_flags |= ULOCK_RF_BLOCKED;
		return;
	}
	if (e->state == SLOT_BLOCKED)	/* its switch-in never reached us */
		ls_count(LS_DROP_MISSED_END);
	wait_open(ctx, e, tgid, tid, uaddr, op, val, SLOT_BLOCKED);
	if (!waker_on)
		waker_wanted();
}

/* ---- holders preempted while others wait ---- */

/*
 * Holder @tid was switched out holding the lock at @addr (@kind, @flags as the table
 * keys them): the preemption runs until its next switch-in.
 */
static __always_inline bool preempt_begin(__u32 tid, __u64 addr, __u32 kind, __u32 flags)
{
	struct sched_slot *e = thread_slot(tid, true);

	if (!e)
		return false;
	if (!e->preempt_ns)
		pending_open(tid);
	e->preempt_ns = bpf_ktime_get_ns();
	e->preempt_addr = addr;
	e->preempt_kind = kind;
	e->preempt_flags = flags;
	return true;
}

/*
 * @prev, switched out involuntarily, is a noted holder: if the lock word still names it
 * and says others wait, the waiters now also wait for its turn in the run queue. Runs in
 * @prev's context, where its memory is readable.
 */
static __always_inline bool holder_preempted(struct task_struct *prev)
{
	__u32 tid = prev->pid, words[3], owner;
	struct holder *h;
	bool waiters;

	h = bpf_map_lookup_elem(&holders, &tid);
	if (!h || bpf_probe_read_user(words, sizeof(words), (void *)h->uaddr))
		return false;
	if (h->kind == ULOCK_HOLDER_PI) {
		owner = words[0] & ULOCK_FUTEX_TID_MASK;
		waiters = words[0] & ULOCK_FUTEX_WAITERS;
	} else {
		owner = words[ULOCK_MUTEX_OWNER_OFF / sizeof(__u32)];
		waiters = words[0] == ULOCK_LOCKED_WAITERS;
	}
	return owner == tid && waiters && preempt_begin(tid, h->uaddr, h->kind, h->rec_flags);
}

/*
 * @prev, switched out involuntarily, is an owner of a kernel lock that some waiter named
 * (once: a thread that took a contended lock once likely takes it again, and the LRU ages
 * out the rest). If the lock still names it, others that queue for it now also wait for
 * its turn in the run queue. Under preempt=none this is a cond_resched() inside the
 * critical section. Whether anyone queues is decided when it runs again (kholder_resumed):
 * at this switch, optimistic spinners still see it on its CPU and have not queued yet.
 */
static __always_inline void kholder_preempted(struct task_struct *prev)
{
	__u32 tid = prev->pid;
	struct kholder *h;
	bool waiters;

	h = bpf_map_lookup_elem(&kholders, &tid);
	if (h && kowner_read(h->lock, h->lcb_flags, &waiters) == prev)
		preempt_begin(tid, h->lock, ULOCK_HOLDER_KERNEL, h->lcb_flags);
}

/* The preemption in @e is over: its time goes to the table as the lock's holder's. */
static __always_inline void preempt_end(struct sched_slot *e, struct task_struct *t)
{
	bool kernel = e->preempt_kind == ULOCK_HOLDER_KERNEL, waiters = true;
	struct ls_wait_key key = {
		.lock = e->preempt_addr,
		.pid = t->tgid,
		.tid = t->pid,
		.class = kernel ? LS_WAIT_KPREEMPT : LS_WAIT_UPREEMPT,
	};
	struct ls_wait_names names = { .comm = t->comm };

	/* a kernel-lock owner still owns the lock (it cannot let go off its CPU): do others queue? */
	if (kernel)
		kowner_read(e->preempt_addr, e->preempt_flags, &waiters);
	if (waiters) {
		if (kernel) {
			key.type = e->preempt_flags & KLOCK_F_MUTEX ? KLOCK_F_MUTEX : e->preempt_flags;
		} else {
			key.type = LS_UTYPE_PREEMPT;
			key.flags = e->preempt_flags & ULOCK_RF_SHARED ? LS_WF_SHARED : 0;
		}
		wait_add(&key, bpf_ktime_get_ns() - e->preempt_ns, false, &names);
		ls_count(kernel ? LS_CNT_KHOLDER_PREEMPT : LS_CNT_HOLDER_PREEMPT);
	}
	e->preempt_ns = 0;
	pending_close(t->pid);
}

/* ---- yield storms ---- */

/*
 * @t's spin figures, made on first use. Named at every use (threads rename themselves), so
 * that they outlive the thread with its last name.
 */
static __always_inline struct sched_spin_thread *spinner_get(struct task_struct *t)
{
	__u32 tid = t->pid;
	struct sched_spin_thread *sp = bpf_map_lookup_elem(&spinners, &tid);

	if (!sp) {
		bpf_map_update_elem(&spinners, &tid, &empty_spinner, BPF_NOEXIST);
		sp = bpf_map_lookup_elem(&spinners, &tid);
		if (!sp)
			return NULL;
		sp->tgid = t->tgid;
		pending_mark(tid, PB_SPINNER);
	}
	__builtin_memcpy(sp->comm, t->comm, sizeof(sp->comm));
	return sp;
}

/*
 * @t calls sched_yield() (or sleeps for zero time, @via): counted into its storm, with the
 * CPU it burnt since the storm's previous yield. The storm's second yield and every
 * SCHED_YIELD_STACK_EVERY-th carry the site's stack.
 */
static __always_inline void yield_count(struct task_struct *t, __u64 now, __u32 via)
{
	__u64 exec = t->se.sum_exec_runtime, dump;
	struct sched_spin_thread *sp = spinner_get(t);
	struct sched_yield_rec *r;
	void *rb;

	if (!sp)
		return;
	if (now - sp->last_yield_ns > SCHED_STORM_GAP_NS || sp->storm_via != via) {
		sp->storm_start_ns = now;
		sp->storm_yields = 0;
		sp->storm_spin_ns = 0;
		sp->storm_via = via;
	} else {
		sp->yield_spin_ns += exec - sp->last_yield_exec_ns;
		sp->storm_spin_ns += exec - sp->last_yield_exec_ns;
	}
	sp->yields++;
	sp->storm_yields++;
	sp->last_yield_ns = now;
	sp->last_yield_exec_ns = exec;
	if (sp->storm_yields != SCHED_YIELD_STACK_FIRST && sp->storm_yields % SCHED_YIELD_STACK_EVERY)
		return;
	if (!sample_cpu_stack(now) || !(dump = ustack_dump(spin_stack_bytes, false)))
		return;
	r = ls_reserve(&rb, LS_REC_SCHED_YIELD, sizeof(*r));
	if (!r)
		return;
	r->pid = t->tgid;
	r->tid = t->pid;
	r->rec_flags = SCHED_RF_DUMP;
	r->pad = 0;
	r->stack_dump = dump;
	__builtin_memcpy(r->comm, t->comm, sizeof(r->comm));
	ls_count(LS_CNT_YIELD_SITES);
	ls_submit(rb, r);
}

/* @prev yielded its CPU to @next: @next is the thread it likely waits for. */
static __always_inline void yielded(struct task_struct *prev, struct task_struct *next, __u64 now)
{
	struct sched_peer_key key = { .tid = prev->pid, .peer = next->pid };
	struct sched_peer *p;

	yield_count(prev, now, LS_POLL_NONE);
	p = bpf_map_lookup_elem(&peers, &key);
	if (!p) {
		bpf_map_update_elem(&peers, &key, &empty_peer, BPF_NOEXIST);
		p = bpf_map_lookup_elem(&peers, &key);
	}
	if (p) {
		struct pending_bucket *b = pending_bucket(next->pid);

		p->yields++;
		__builtin_memcpy(p->comm, next->comm, sizeof(p->comm));
		/* the peer had last been switched out by preemption: it was not waiting, it
		 * lost its CPU (seed 000: the sender preempted between its two stores) */
		p->preempted += next->pid && b && b->preempted;
	}
}

/* A timespec/timeval argument that says "return at once": present and all zero. */
static __always_inline bool zero_time(__u64 uptr)
{
	__u64 t[2];

	return uptr && !bpf_probe_read_user(t, sizeof(t), (void *)uptr) && !t[0] && !t[1];
}

/* Sleeping in syscall @nr for zero time: nanosleep(0), a relative clock_nanosleep(0). */
static __always_inline bool is_zero_sleep(struct pt_regs *regs, long nr)
{
	if (nr == LS_SYS_NANOSLEEP)
		return zero_time(LS_SYSCALL_ARG1(regs));
	if (nr == LS_SYS_CLOCK_NANOSLEEP)
		return !LS_SYSCALL_ARG2(regs) && zero_time(LS_SYSCALL_ARG3(regs));
	return false;
}

/* ---- stops and the bursts after them ---- */

/*
 * What a thread did that a burst is made of: read and write syscalls (the kernel's own
 * per-task I/O accounting, /proc/PID/io syscr and syscw) and sleeps (each voluntary
 * switch is a wait that ended in a wakeup). Three loads from the task.
 */
static __always_inline __u64 sched_events(struct task_struct *t)
{
	__u64 n = t->nvcsw;

	if (bpf_core_field_exists(t->ioac))
		n += BPF_CORE_READ(t, ioac.syscr) + BPF_CORE_READ(t, ioac.syscw);
	return n;
}

static __always_inline bool stopping(struct task_struct *prev, unsigned int prev_state)
{
	return (prev_state & TASK_STOP_MASK) || (prev->jobctl & JOBCTL_TRAP_FREEZE);
}

/* @prev stops: the daemon holds what follows its resume to its rate before. */
static __always_inline void stopped(struct task_struct *prev)
{
	struct sched_slot *e = thread_slot(prev->pid, true);

	if (!e)
		return;
	if (!e->stop.stop_ns)
		pending_open(prev->pid);
	__builtin_memset(&e->stop, 0, sizeof(e->stop));
	e->stop.stop_ns = bpf_ktime_get_boot_ns();
	e->stop.stop_events = sched_events(prev);
	e->resumed = 0;
}

static __always_inline void stop_forget(struct sched_slot *e, __u32 tid)
{
	e->stop.stop_ns = 0;
	e->resumed = 0;
	pending_close(tid);
}

static __always_inline void resumed(struct sched_slot *e, struct task_struct *next)
{
	e->stop.resume_ns = bpf_ktime_get_boot_ns();
	if (e->stop.resume_ns - e->stop.stop_ns < SCHED_STOP_MIN_NS) {
		stop_forget(e, next->pid);
		return;
	}
	e->stop.resume_events = e->stop.window_events = sched_events(next);
	e->resumed = 1;
}

static __always_inline void report_resume(const struct sched_stop *s, struct task_struct *t)
{
	struct sched_resume_rec *r;
	void *rb;

	r = ls_reserve(&rb, LS_REC_SCHED_RESUME, sizeof(*r));
	if (!r)
		return;
	r->pid = t->tgid;
	r->tid = t->pid;
	r->stop_ns = s->resume_ns - s->stop_ns;
	r->resume_ns = s->resume_ns;
	r->window_events = s->window_events - s->resume_events;
	r->window_ns = s->window_ns;
	r->stop_events = s->stop_events;
	r->stack_dump = s->stack_dump;
	r->rec_flags = s->stack_dump ? SCHED_RF_DUMP : 0;
	r->pad = 0;
	__builtin_memcpy(r->comm, t->comm, sizeof(r->comm));
	ls_count(LS_CNT_RESUMES);
	ls_submit(rb, r);
}

/*
 * A thread in the window after its resume switches (@out: out, in its own context). The
 * events it produced are counted at each switch out while the window lasts; the first
 * switch after the window reports it. A thread that bursts gets its stack taken here.
 */
static __always_inline void resume_window(struct sched_slot *e, struct task_struct *t, bool out)
{
	__u64 now = bpf_ktime_get_boot_ns();

	if (now - e->stop.resume_ns <= SCHED_BURST_WINDOW_NS) {
		if (!out)
			return;
		e->stop.window_events = sched_events(t);
		e->stop.window_ns = now - e->stop.resume_ns;
		if (!e->stop.stack_dump &&
		    e->stop.window_events - e->stop.resume_events >= SCHED_BURST_STACK_EVENTS &&
		    sample_cpu_stack(bpf_ktime_get_ns()))
			e->stop.stack_dump = ustack_dump(spin_stack_bytes, false);
		return;
	}
	report_resume(&e->stop, t);
	stop_forget(e, t->pid);
}

/* ---- the switch ---- */

/* @prev goes to sleep (a voluntary switch): a futex wait, a zero sleep, or a stop. */
static __always_inline void switched_out_asleep(void *ctx, struct task_struct *prev, unsigned int prev_state)
{
	struct pt_regs *regs;
	long nr;

	if (spin_source && stopping(prev, prev_state)) {
		stopped(prev);
		return;
	}
	if (!prev->mm)		/* kernel threads make no syscalls */
		return;
	regs = (struct pt_regs *)bpf_task_pt_regs(prev);
	nr = LS_SYSCALL_NR(regs);
	if (nr == LS_SYS_FUTEX || nr == LS_SYS_FUTEX_WAITV) {
		if (futex_waits)
			futex_block(ctx, prev, regs, nr);
	} else if (spin_source && is_zero_sleep(regs, nr)) {	/* a yield by another name */
		yield_count(prev, bpf_ktime_get_ns(), LS_POLL_SLEEP);
	}
}

/* Kernel threads make no syscalls: their registers are not even looked up. */
static __always_inline bool is_yield(struct task_struct *t)
{
	return t->mm && LS_SYSCALL_NR((struct pt_regs *)bpf_task_pt_regs(t)) == LS_SYS_SCHED_YIELD;
}

static __always_inline void switched_out(void *ctx, bool preempt, struct task_struct *prev,
					 struct task_struct *next, unsigned int prev_state)
{
	struct pending_bucket *b = pending_bucket(prev->pid);
	struct sched_slot *e;
	bool yield;

	if (!b)
		return;
	/* in the window after a stop: its events are counted at its switches out */
	if (b->open && (e = thread_slot(prev->pid, false)) && e->resumed)
		resume_window(e, prev, true);
	/* a preempted task is runnable, not waiting */
	if (!preempt && prev_state != TASK_RUNNING) {
		/* written only when it changes: most switches leave the line clean */
		if (b->preempted)
			b->preempted = 0;
		switched_out_asleep(ctx, prev, prev_state);
		return;
	}
	/*
	 * Runnable and not yielding: it lost its CPU, by preemption or at its return to user
	 * space (a wakeup that made it reschedule there switches it out without the flag)
	 */
	yield = !preempt && spin_source && is_yield(prev);
	if (b->preempted != !yield)
		b->preempted = !yield;
	if (yield)
		yielded(prev, next, bpf_ktime_get_ns());
	if (futex_waits && !holder_preempted(prev))	/* one preemption, charged to one lock */
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
		wait_close(e, next->tgid, next->pid, next->comm, 0);
	if (e->stop.stop_ns) {
		if (!e->resumed)
			resumed(e, next);
		else
			resume_window(e, next, false);
	}
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	/* the idle task is not a thread of anyone's */
	if (prev->pid && ls_tgid_wanted(prev->tgid))
		switched_out(ctx, preempt, prev, next, prev_state);
	if (next->pid && enabled && pending_any(next->pid))
		switched_in(next);
	return 0;
}

/*
 * Whoever wakes a waiter from inside futex(WAKE...) or FUTEX_UNLOCK_PI is the thread that
 * ended its wait: the end of the critical section. sched_waking, not sched_wakeup: it runs
 * in the waker's context on every kernel, where sched_wakeup may run on the wakee's CPU.
 * Tasks with nothing open (the pending filter) cost one array load.
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(sched_waking, struct task_struct *p)
{
	struct task_struct *cur;
	__u32 tid = p->pid, cmd;
	struct sched_slot *e;
	struct pt_regs *regs;

	if (!enabled || !pending_any(tid))
		return 0;
	e = bpf_map_lookup_elem(&thread_slots, &tid);
	if (!e || e->state == SLOT_IDLE || (e->rec_flags & ULOCK_RF_RELEASER))
		return 0;
	cur = bpf_get_current_task_btf();
	if (!cur->mm)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(cur);
	if (LS_SYSCALL_NR(regs) != LS_SYS_FUTEX)	/* a signal, a timeout, a kill: no releaser */
		return 0;
	cmd = LS_SYSCALL_ARG2(regs) & ULOCK_FUTEX_CMD_MASK;
	if (!is_wake_cmd(cmd))
		return 0;
	e->releaser_pid = cur->tgid;
	e->releaser_tid = cur->pid;
	bpf_get_current_comm(e->releaser_comm, sizeof(e->releaser_comm));
	e->rec_flags |= ULOCK_RF_RELEASER;
	ls_count(LS_CNT_URELEASER);
	if (e->rec_flags & ULOCK_RF_SAMPLED)
		take_stack(ctx, &e->releaser_stack_id, &e->releaser_dump, &e->rec_flags,
			   ULOCK_RF_RELEASER_STACK, ULOCK_RF_RELEASER_DUMP, false);
	return 0;
}

/* ---- cpu-clock samplers ---- */

/*
 * Holders: a thread noted as a holder is checked against the lock word (it still holds
 * the lock only while the word names it) and, if it does, its stack is what the critical
 * section is doing. Everything else returns after one lookup.
 */
SEC("perf_event")
int hold_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), dump;
	__u32 tid = (__u32)id, word, flags;
	struct ulock_hold_rec *r;
	struct holder *h;
	__s32 stack_id;
	__u64 where;
	void *rb;

	if (!enabled || !pending_marked(tid, PB_HOLDER))
		return 0;
	h = bpf_map_lookup_elem(&holders, &tid);
	if (!h)
		return 0;
	where = h->kind == ULOCK_HOLDER_PI ? h->uaddr : h->uaddr + ULOCK_MUTEX_OWNER_OFF;
	if (bpf_probe_read_user(&word, sizeof(word), (void *)where))
		return 0;	/* page not present in this context; try at the next sample */
	if (h->kind == ULOCK_HOLDER_PI)
		word &= ULOCK_FUTEX_TID_MASK;
	if (word != tid) {
		bpf_map_delete_elem(&holders, &tid);
		ls_count(LS_CNT_HOLD_RELEASED);
		return 0;
	}
	/*
	 * A dump is a large ring record: holder samples share the CPU's dump budget with
	 * waits. A sample over budget is skipped whole, so the stacks that are kept remain
	 * an unbiased sample of the critical section.
	 */
	if (ustack_bytes && !sample_cpu_stack(bpf_ktime_get_ns())) {
		ls_count(LS_CNT_HOLD_THROTTLED);
		return 0;
	}
	/* the stack first: a dump reserved after the record would reach the daemon after it */
	flags = h->rec_flags;
	take_stack(ctx, &stack_id, &dump, &flags, ULOCK_RF_STACK, ULOCK_RF_DUMP, true);
	r = ls_reserve(&rb, LS_REC_ULOCK_HOLD, sizeof(*r));
	if (!r)
		return 0;
	r->uaddr = h->uaddr;
	r->pid = id >> 32;
	r->tid = tid;
	r->kind = h->kind;
	r->rec_flags = flags;
	r->pad = 0;
	r->stack_id = stack_id;
	r->stack_dump = dump;
	bpf_get_current_comm(r->comm, sizeof(r->comm));
	ls_count(LS_CNT_HOLD_SAMPLES);
	ls_submit(rb, r);
	return 0;
}

/*
 * The wait @t is in, when it is one that returns at once: poll, select and epoll with a
 * zero timeout, and sched_yield() (found here when it had nothing to switch to). A loop of
 * these spins in the kernel without ever leaving the CPU, so the switch program never sees
 * it; only a sample does. LS_POLL_NONE else.
 */
static __always_inline __u32 busy_poll(struct task_struct *t)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
	long nr = LS_SYSCALL_NR(regs);

	switch (nr) {
	case LS_SYS_POLL:		/* poll(fds, nfds, int timeout_ms) */
		return (int)LS_SYSCALL_ARG3(regs) == 0 ? LS_POLL_POLL : LS_POLL_NONE;
	case LS_SYS_PPOLL:		/* ppoll(fds, nfds, const struct timespec *tsp, ...) */
		return zero_time(LS_SYSCALL_ARG3(regs)) ? LS_POLL_POLL : LS_POLL_NONE;
	case LS_SYS_SELECT:		/* select(n, r, w, e, struct timeval *tvp) */
	case LS_SYS_PSELECT6:		/* pselect6(n, r, w, e, struct timespec *tsp, ...) */
		return zero_time(LS_SYSCALL_ARG5(regs)) ? LS_POLL_SELECT : LS_POLL_NONE;
	case LS_SYS_EPOLL_WAIT:		/* epoll_wait(epfd, events, maxevents, int timeout_ms) */
	case LS_SYS_EPOLL_PWAIT:
		return (int)LS_SYSCALL_ARG4(regs) == 0 ? LS_POLL_EPOLL : LS_POLL_NONE;
	case LS_SYS_EPOLL_PWAIT2:	/* epoll_pwait2(epfd, events, maxevents, struct timespec *) */
		return zero_time(LS_SYSCALL_ARG4(regs)) ? LS_POLL_EPOLL : LS_POLL_NONE;
	case LS_SYS_SCHED_YIELD:
		return LS_POLL_YIELD;
	default:	/* zero sleeps do switch out (the timer slack): the switch counts them */
		return LS_POLL_NONE;
	}
}

/*
 * Spin loops, every CPU, always on at a low rate: counts the thread's samples, those
 * whose user code is a spin loop (its spin share) and those inside a wait that returns
 * at once (its busy-poll share). Either kind takes the user stack (the loop's caller)
 * within the CPU's dump budget. A thread's samples are counted from its first spin or
 * poll sample on: the others never touch a map.
 */
SEC("perf_event")
int spin_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	bool user = LS_USER_MODE(&ctx->regs);
	__u64 ip = PT_REGS_IP(&ctx->regs), dump = 0;
	struct sched_spin_thread *sp = NULL;
	struct sched_spin_rec *r;
	__u32 flags, poll = LS_POLL_NONE;
	bool spin;
	void *rb;

	if (!t->pid || !ls_tgid_wanted(t->tgid))
		return 0;
	/* user spin loops only: a kernel spinlock's waits are klock's, timed exactly */
	if (user)
		spin = ls_spinning_at(ip);
	else	/* in the kernel on behalf of a process: in a wait that returns at once? */
		spin = t->mm && (poll = busy_poll(t)) != LS_POLL_NONE;
	if (!spin && !pending_marked(t->pid, PB_SPINNER))
		return 0;
	sp = spinner_get(t);
	if (!sp)
		return 0;
	sp->samples++;
	if (!spin)
		return 0;
	if (user) {
		sp->spin_samples++;
		flags = 0;
	} else {
		sp->poll_samples++;
		sp->poll_nr = poll;
		ip = PT_REGS_IP_CORE((struct pt_regs *)bpf_task_pt_regs(t));
		flags = SCHED_RF_POLL;
	}
	ls_count(LS_CNT_SPIN_SAMPLES);
	if (!t->mm || !sample_spin_dump(bpf_ktime_get_ns()) || !(dump = ustack_dump(spin_stack_bytes, true))) {
		ls_count(LS_CNT_SPIN_UNSTACKED);
		return 0;
	}
	r = ls_reserve(&rb, LS_REC_SCHED_SPIN, sizeof(*r));
	if (!r)
		return 0;
	r->pid = t->tgid;
	r->tid = t->pid;
	r->ip = ip;
	r->stack_dump = dump;
	r->rec_flags = SCHED_RF_DUMP | flags;
	r->pad = 0;
	__builtin_memcpy(r->comm, t->comm, sizeof(r->comm));
	ls_submit_lazy(rb, r);
	return 0;
}

/* ---- the tasks' own counters, once a second ---- */

/* CONFIG_SCHED_INFO's run-queue wait; older layouts have the same field */
static __always_inline __u64 run_delay(struct task_struct *t)
{
	if (bpf_core_field_exists(t->sched_info.run_delay))
		return BPF_CORE_READ(t, sched_info.run_delay);
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

SEC("iter/task")
int dump_tasks(struct bpf_iter__task *ctx)
{
	struct task_struct *t = ctx->task;
	struct sched_task_rec r;

	if (!t || !t->pid || (targ_tgid && (__u32)t->tgid != targ_tgid))
		return 0;
	task_rec(t, &r);
	bpf_seq_write(ctx->meta->seq, &r, sizeof(r));
	return 0;
}

/*
 * A thread leaving: its counters as they are now, for the daemon's next read (the iterator
 * no longer sees it there). Without them a thread's last second before its exit would be
 * lost from every window. Once per thread's life: nothing on a hot path.
 */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(sched_process_exit, struct task_struct *p)
{
	struct sched_task_rec r;
	__u32 tid = p->pid;

	if (!enabled || !spin_source || !tid || (targ_tgid && (__u32)p->tgid != targ_tgid))
		return 0;
	task_rec(p, &r);
	r.end_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&exited_tasks, &tid, &r, BPF_ANY))
		ls_count(LS_DROP_EXITED_FULL);
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
		wait_open(ctx, e, tgid, tid, uaddr, op, val, SLOT_SYSCALL);
}

static __always_inline void precise_exit(long ret)
{
	struct task_struct *t = bpf_get_current_task_btf();
	__u32 tid = t->pid;
	struct sched_slot *e = bpf_map_lookup_elem(&thread_slots, &tid);

	if (e && e->state == SLOT_SYSCALL)
		wait_close(e, t->tgid, tid, t->comm, ret);
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

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * ulock: time every futex wait that blocks, name the thread that woke it (the releaser)
 * and sample the lock's holder on CPU while others wait for it.
 *
 * The default path costs nothing outside of waiting. syscalls:sys_{enter,exit}_futex would
 * put every syscall of every task on the tracing slow path (28% of a futex-heavy server's
 * throughput here), so the wait is read off the scheduler instead: a task switched out
 * asleep whose syscall registers say futex(WAIT...) has begun a futex wait, and its next
 * switch-in ends it. sched_switch fires only when something switches; its cost is a few
 * register reads for every switch and a hash lookup for the task switched in.
 *
 * The precise mode (a `scan` of one process asks for it) adds the futex syscall
 * tracepoints, filtered to the processes in precise_tgids: it times each call from entry
 * to exit and also counts the calls that returned without sleeping (EAGAIN: the word
 * changed before the kernel could queue the waiter).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "ulock.h"
#include "common.bpf.h"
#include "sampling.bpf.h"
#include "ustack.bpf.h"
#include "arch.bpf.h"
#include "kowner.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define TASK_RUNNING		0

enum slot_state {
	SLOT_IDLE,	/* no wait open; kept for the thread's next wait */
	SLOT_BLOCKED,	/* switch mode: asleep in a futex wait since begin_ns */
	SLOT_SYSCALL,	/* precise mode: inside a futex wait call since begin_ns */
};

struct ulock_pending {
	__u64 uaddr;
	__u64 begin_ns;
	__u32 state;		/* enum slot_state */
	__u32 op;
	__u32 val;
	__u32 word0;
	__u32 word8;
	__u32 rec_flags;
	__s32 stack_id;
	__s32 releaser_stack_id;
	__u64 stack_dump;
	__u64 releaser_dump;
	__u32 releaser_pid;
	__u32 releaser_tid;
	char releaser_comm[LS_COMM_LEN];
	/* the thread, holding a contended lock, was preempted at preempt_ns (0: it was not) */
	__u64 preempt_ns;
	__u64 preempt_uaddr;
	__u32 preempt_kind;
	__u32 preempt_flags;
};

/*
 * One slot per thread that ever blocked on a futex: the waiter sleeps and wakes on any CPU.
 * A preallocated hash, not task storage: storage is allocated on first use, and an
 * allocation under the runqueue lock that sched_switch holds can deadlock. Slots stay
 * when idle (an update and a delete per wait would cost more than the rest); the daemon
 * sweeps those of exited threads.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, ULOCK_DEF_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct ulock_pending);
} thread_slots SEC(".maps");

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

static const struct ulock_pending empty_slot;

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

static __always_inline struct ulock_pending *thread_slot(__u32 tid, bool create)
{
	struct ulock_pending *slot = bpf_map_lookup_elem(&thread_slots, &tid);

	if (slot || !create)
		return slot;
	if (bpf_map_update_elem(&thread_slots, &tid, &empty_slot, BPF_NOEXIST))
		return NULL;
	return bpf_map_lookup_elem(&thread_slots, &tid);
}

/*
 * The futex call @task is in, decoded from its syscall registers: false when it is not in
 * a futex wait. Only valid while @task is current (its user memory is the one mapped).
 */
static __always_inline bool futex_call(struct task_struct *task, __u64 *uaddr, __u32 *op, __u32 *val)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct futex_waitv first;
	long nr = LS_SYSCALL_NR(regs);

	if (nr == LS_SYS_FUTEX) {
		*uaddr = PT_REGS_PARM1_CORE_SYSCALL(regs);
		*op = PT_REGS_PARM2_CORE_SYSCALL(regs);
		*val = PT_REGS_PARM3_CORE_SYSCALL(regs);
		return is_wait_cmd(*op & ULOCK_FUTEX_CMD_MASK);
	}
	if (nr != LS_SYS_FUTEX_WAITV)
		return false;
	/* futex_waitv(waiters, nr, ...): name the wait by its first futex */
	if (bpf_probe_read_user(&first, sizeof(first), (void *)PT_REGS_PARM1_CORE_SYSCALL(regs)))
		return false;
	*uaddr = first.uaddr;
	*op = ULOCK_FUTEX_WAITV | (first.flags & ULOCK_FUTEX_PRIVATE);
	*val = first.val;
	return true;
}

/* Notes the lock's owner (if the word names one) for the holder sampler. */
static __always_inline void note_holder(struct ulock_pending *e, __u32 tgid, __u32 tid)
{
	__u32 cmd = e->op & ULOCK_FUTEX_CMD_MASK, owner;
	struct holder h = { .uaddr = e->uaddr, .tgid = tgid, .rec_flags = e->rec_flags & ULOCK_RF_SHARED };

	if (cmd == ULOCK_FUTEX_LOCK_PI || cmd == ULOCK_FUTEX_LOCK_PI2) {
		owner = e->word0 & ULOCK_FUTEX_TID_MASK;
		h.kind = ULOCK_HOLDER_PI;
	} else if (e->val == ULOCK_LOCKED_WAITERS &&
		   (cmd == ULOCK_FUTEX_WAIT || cmd == ULOCK_FUTEX_WAIT_BITSET)) {
		owner = e->word8;
		h.kind = ULOCK_HOLDER_MUTEX;
	} else {
		return;
	}
	if (!owner || owner == tid)
		return;
	if (!bpf_map_update_elem(&holders, &owner, &h, BPF_ANY)) {
		e->rec_flags |= ULOCK_RF_HOLDER;
		ls_count(LS_CNT_HOLDERS);
	}
}

/*
 * A user stack for the record: a dump for the daemon to unwind when dumps are on (any
 * code, with or without frame pointers; the daemon's unwinder walks frame pointers where
 * CFI is missing), else a frame-pointer walk here. A dump that fails (ring full, stack
 * page not present) is not replaced by a walk here: through code without frame pointers
 * it would give a stack of garbage addresses.
 */
static __always_inline void take_stack(void *ctx, __s32 *id, __u64 *dump, __u32 *flags,
				       __u32 fp_flag, __u32 dump_flag)
{
	long sid;

	*id = -1;
	*dump = 0;
	if (ustack_bytes) {
		*dump = ustack_dump();
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

/* Opens a wait in @slot for the current thread, which is about to sleep (or enters the call). */
static __always_inline void wait_open(void *ctx, struct ulock_pending *e, __u32 tgid, __u32 tid,
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
	/* one read for the word and glibc's owner field behind it */
	if (!bpf_probe_read_user(words, sizeof(words), (void *)uaddr)) {
		e->word0 = words[0];
		e->word8 = words[ULOCK_MUTEX_OWNER_OFF / sizeof(__u32)];
		e->rec_flags |= ULOCK_RF_WORDS;
		note_holder(e, tgid, tid);
	} else {
		e->word0 = e->word8 = 0;
		ls_count(LS_DROP_UNREADABLE);
	}
	if (sample_stack(uaddr, now)) {
		e->rec_flags |= ULOCK_RF_SAMPLED;
		take_stack(ctx, &e->stack_id, &e->stack_dump, &e->rec_flags, ULOCK_RF_STACK,
			   ULOCK_RF_DUMP);
	}
	e->state = state;
	ls_count(LS_CNT_UBEGIN);
}

static __always_inline void emit_wait(struct ulock_pending *e, __u32 tgid, __u32 tid,
				      const char *comm, __s32 ret)
{
	__u64 now = bpf_ktime_get_ns();
	struct ulock_wait_rec *r;
	void *rb;

	r = ls_reserve(&rb, LS_REC_ULOCK_WAIT, sizeof(*r));
	if (!r)
		return;
	r->uaddr = e->uaddr;
	r->end_ns = now;
	r->wait_ns = now - e->begin_ns;
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
	if (e->rec_flags & (ULOCK_RF_STACK | ULOCK_RF_DUMP))
		ls_count(LS_CNT_USTACKED);
	else if (!(e->rec_flags & ULOCK_RF_SAMPLED))
		ls_count(LS_CNT_USAMPLED_OUT);
	ls_count(LS_CNT_UWAIT);
	ls_submit(rb, r);
}

/* @prev goes to sleep: if in a futex wait, the wait begins. Runs in @prev's context. */
static __always_inline void futex_block(void *ctx, struct task_struct *prev)
{
	__u32 tgid = prev->tgid, tid = prev->pid, op, val;
	struct ulock_pending *e;
	__u64 uaddr;

	if (!ls_tgid_wanted(tgid) || !prev->mm)	/* kernel threads make no futex calls */
		return;
	if (!futex_call(prev, &uaddr, &op, &val))
		return;
	e = thread_slot(tid, true);
	if (!e) {
		ls_count(LS_DROP_USLOT_FULL);
		return;
	}
	if (e->state == SLOT_SYSCALL) {	/* precise mode times it; note that it slept */
		e->rec_flags |= ULOCK_RF_BLOCKED;
		return;
	}
	if (e->state == SLOT_BLOCKED)	/* its switch-in never reached us */
		ls_count(LS_DROP_MISSED_END);
	wait_open(ctx, e, tgid, tid, uaddr, op, val, SLOT_BLOCKED);
}

/*
 * Holder @tid was switched out holding the lock at @addr (@kind, @flags as the record
 * carries them): the preemption runs until its next switch-in (futex_resume).
 */
static __always_inline bool preempt_begin(__u32 tid, __u64 addr, __u32 kind, __u32 flags)
{
	struct ulock_pending *e = thread_slot(tid, true);

	if (!e) {
		ls_count(LS_DROP_USLOT_FULL);
		return false;
	}
	e->preempt_ns = bpf_ktime_get_ns();
	e->preempt_uaddr = addr;
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
	if (!h || !enabled || bpf_probe_read_user(words, sizeof(words), (void *)h->uaddr))
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
	if (h && enabled && kowner_read(h->lock, h->lcb_flags, &waiters) == prev)
		preempt_begin(tid, h->lock, ULOCK_HOLDER_KERNEL, h->lcb_flags);
}

static __always_inline void emit_preempt(struct ulock_pending *e, struct task_struct *t)
{
	struct ulock_preempt_rec *r;
	void *rb;

	r = ls_reserve(&rb, LS_REC_ULOCK_PREEMPT, sizeof(*r));
	if (!r)
		return;
	r->uaddr = e->preempt_uaddr;
	r->preempted_ns = bpf_ktime_get_ns() - e->preempt_ns;
	r->pid = t->tgid;
	r->tid = t->pid;
	r->kind = e->preempt_kind;
	r->rec_flags = e->preempt_flags;
	__builtin_memcpy(r->comm, t->comm, sizeof(r->comm));
	ls_count(e->preempt_kind == ULOCK_HOLDER_KERNEL ? LS_CNT_KHOLDER_PREEMPT : LS_CNT_HOLDER_PREEMPT);
	ls_submit(rb, r);
}

/*
 * A kernel-lock owner preempted at @e runs again, still owning the lock (it cannot let go
 * while off its CPU): true when others queue for it by now.
 */
static __always_inline bool kholder_waited_for(const struct ulock_pending *e)
{
	bool waiters;

	kowner_read(e->preempt_uaddr, e->preempt_flags, &waiters);
	return waiters;
}

/* @next runs again: a futex wait it slept in ends, or a preemption while holding a lock. */
static __always_inline void futex_resume(struct task_struct *next)
{
	__u32 tid = next->pid;
	struct ulock_pending *e = bpf_map_lookup_elem(&thread_slots, &tid);

	if (!e)
		return;
	if (e->preempt_ns) {
		if (e->preempt_kind != ULOCK_HOLDER_KERNEL || kholder_waited_for(e))
			emit_preempt(e, next);
		e->preempt_ns = 0;
	}
	if (e->state != SLOT_BLOCKED)
		return;
	e->state = SLOT_IDLE;
	emit_wait(e, next->tgid, tid, next->comm, 0);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(ulock_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	/* a preempted task is runnable, not waiting */
	if (!preempt && prev_state != TASK_RUNNING)
		futex_block(ctx, prev);
	else if (!holder_preempted(prev))	/* one preemption, charged to one lock */
		kholder_preempted(prev);
	futex_resume(next);
	return 0;
}

/*
 * Whoever wakes a waiter from inside futex(WAKE...) or FUTEX_UNLOCK_PI is the thread that
 * ended its wait: the end of the critical section. sched_waking, not sched_wakeup: it runs
 * in the waker's context on every kernel, where sched_wakeup may run on the wakee's CPU.
 */
SEC("tp_btf/sched_waking")
int BPF_PROG(ulock_waking, struct task_struct *p)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	__u32 tid = p->pid, nr, cmd;
	struct ulock_pending *e;
	struct pt_regs *regs;

	e = bpf_map_lookup_elem(&thread_slots, &tid);
	if (!e || e->state == SLOT_IDLE || (e->rec_flags & ULOCK_RF_RELEASER) || !cur->mm)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(cur);
	nr = LS_SYSCALL_NR(regs);
	if (nr != LS_SYS_FUTEX)	/* a signal, a timeout, a kill: no releaser */
		return 0;
	cmd = PT_REGS_PARM2_CORE_SYSCALL(regs) & ULOCK_FUTEX_CMD_MASK;
	if (!is_wake_cmd(cmd))
		return 0;
	e->releaser_pid = cur->tgid;
	e->releaser_tid = cur->pid;
	bpf_get_current_comm(e->releaser_comm, sizeof(e->releaser_comm));
	e->rec_flags |= ULOCK_RF_RELEASER;
	ls_count(LS_CNT_URELEASER);
	if (e->rec_flags & ULOCK_RF_SAMPLED)
		take_stack(ctx, &e->releaser_stack_id, &e->releaser_dump, &e->rec_flags,
			   ULOCK_RF_RELEASER_STACK, ULOCK_RF_RELEASER_DUMP);
	return 0;
}

/*
 * cpu-clock sampling, every CPU: a thread noted as a holder is checked against the lock
 * word (it still holds the lock only while the word names it) and, if it does, its stack
 * is what the critical section is doing. Everything else returns after one lookup.
 */
SEC("perf_event")
int ulock_hold_sample(struct bpf_perf_event_data *ctx)
{
	__u64 id = bpf_get_current_pid_tgid(), dump;
	__u32 tid = (__u32)id, word, flags;
	struct ulock_hold_rec *r;
	struct holder *h;
	__s32 stack_id;
	__u64 where;
	void *rb;

	h = bpf_map_lookup_elem(&holders, &tid);
	if (!h || !enabled)
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
	take_stack(ctx, &stack_id, &dump, &flags, ULOCK_RF_STACK, ULOCK_RF_DUMP);
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

/* ---- precise mode: the futex syscalls of the processes in precise_tgids ---- */

static __always_inline void precise_enter(void *ctx, __u64 uaddr, __u32 op, __u32 val)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	struct ulock_pending *e;

	if (!enabled || !bpf_map_lookup_elem(&precise_tgids, &tgid))
		return;
	if (!is_wait_cmd(op & ULOCK_FUTEX_CMD_MASK))
		return;
	e = thread_slot(tid, true);
	if (!e) {
		ls_count(LS_DROP_USLOT_FULL);
		return;
	}
	wait_open(ctx, e, tgid, tid, uaddr, op, val, SLOT_SYSCALL);
}

static __always_inline void precise_exit(long ret)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct ulock_pending *e = bpf_map_lookup_elem(&thread_slots, &tid);
	char comm[LS_COMM_LEN];

	if (!e || e->state != SLOT_SYSCALL)
		return;
	e->state = SLOT_IDLE;
	if (!(e->rec_flags & ULOCK_RF_BLOCKED))
		ls_count(LS_CNT_UNONBLOCK);
	bpf_get_current_comm(comm, sizeof(comm));
	emit_wait(e, id >> 32, tid, comm, ret);
}

SEC("tracepoint/syscalls/sys_enter_futex")
int ulock_enter_futex(struct trace_event_raw_sys_enter *ctx)
{
	precise_enter(ctx, ctx->args[0], ctx->args[1], ctx->args[2]);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex")
int ulock_exit_futex(struct trace_event_raw_sys_exit *ctx)
{
	precise_exit(ctx->ret);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_futex_waitv")
int ulock_enter_futex_waitv(struct trace_event_raw_sys_enter *ctx)
{
	struct futex_waitv first;

	if (bpf_probe_read_user(&first, sizeof(first), (void *)ctx->args[0]))
		return 0;
	precise_enter(ctx, first.uaddr, ULOCK_FUTEX_WAITV | (first.flags & ULOCK_FUTEX_PRIVATE),
		      first.val);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int ulock_exit_futex_waitv(struct trace_event_raw_sys_exit *ctx)
{
	precise_exit(ctx->ret);
	return 0;
}

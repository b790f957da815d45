/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Part of scheduler.bpf.c, included where it stands (after its maps and the pending
 * filter): futex waits. A task switched out asleep in futex(WAIT...) opens a wait in its
 * slot, with the lock word's owner; its next switch in closes it into the wait tables,
 * with the releaser sched_waking named; sampled waits also go to the ring with stacks.
 */
#ifndef __LS_SCHED_FUTEX_BPF_H
#define __LS_SCHED_FUTEX_BPF_H

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

/*
 * The owner of the mutex-style or PI lock a wait in @e (thread @tid's of process @tgid)
 * slept on, 0 when none: the one its word named at the block, else (the word not read:
 * wait_open()) the thread of @tgid that released it to the waiter (a futex wake, or
 * FUTEX_UNLOCK_PI's hand-off): the holder the waiter waited for last.
 */
static __always_inline __u32 futex_owner(const struct sched_slot *e, __u32 tgid, __u32 tid)
{
	__u32 cmd = e->op & ULOCK_FUTEX_CMD_MASK, owner;

	/* another blocking call's op is its enum ls_btype, which names_owner() must not see */
	if ((e->rec_flags & ULOCK_RF_BLOCKCALL) || !names_owner(e->op, e->val))
		return 0;
	if (!(e->rec_flags & ULOCK_RF_WORDS))
		owner = e->releaser_pid == tgid ? e->releaser_tid : 0;
	else if (cmd == ULOCK_FUTEX_LOCK_PI || cmd == ULOCK_FUTEX_LOCK_PI2)
		owner = e->word0 & ULOCK_FUTEX_TID_MASK;
	else
		owner = e->word8;
	return owner == tid ? 0 : owner;
}

/* Notes @owner (futex_owner()'s, 0: none) of the lock in @e for the holder sampler. */
static __always_inline void note_holder(struct sched_slot *e, __u32 tgid, __u32 owner)
{
	__u32 cmd = e->op & ULOCK_FUTEX_CMD_MASK, idx, kind;
	__u32 flags = e->rec_flags & ULOCK_RF_SHARED;
	struct holder *cur;

	if (!owner)
		return;
	kind = cmd == ULOCK_FUTEX_LOCK_PI || cmd == ULOCK_FUTEX_LOCK_PI2 ? ULOCK_HOLDER_PI : ULOCK_HOLDER_MUTEX;
	idx = owner & holders_mask;
	cur = bpf_map_lookup_elem(&holders, &idx);
	if (!cur)
		return;
	/*
	 * The threads of a contended lock own it in turn, so most waits find their owner noted
	 * already and write nothing. Else the entry is rewritten untagged, then tagged: a
	 * reader (the sampler, the preemption check) never takes a half-written entry for
	 * this holder's.
	 */
	if (cur->tid != owner || cur->uaddr != e->uaddr || cur->tgid != tgid || cur->kind != kind ||
	    cur->rec_flags != flags) {
		__sync_lock_test_and_set(&cur->tid, 0);
		cur->uaddr = e->uaddr;
		cur->tgid = tgid;
		cur->kind = kind;
		cur->rec_flags = flags;
		__sync_lock_test_and_set(&cur->tid, owner);
	}
	pending_mark(owner, PB_HOLDER);
	e->rec_flags |= ULOCK_RF_HOLDER;
	ls_count(LS_CNT_HOLDERS);
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
		*dump = ustack_dump(USTACK_WAIT, lazy);
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

/*
 * The thread's switches out so far and its on-CPU time: the kernel counts both at every
 * switch, before sched_switch runs (nvcsw/nivcsw, se.sum_exec_runtime).
 */
static __always_inline void task_switches(struct task_struct *t, __u32 *switches, __u64 *exec_ns)
{
	*switches = t->nvcsw + t->nivcsw;
	*exec_ns = t->se.sum_exec_runtime;
}

/* Thread @tid of process @pid, named @comm, released the wait in @e: named its releaser, and counted. */
static __always_inline void releaser_named(struct sched_slot *e, __u32 pid, __u32 tid, const char *comm)
{
	e->releaser_pid = pid;
	e->releaser_tid = tid;
	/* two loads where bpf_get_current_comm() is a helper call of ~100 ns here */
	__builtin_memcpy(e->releaser_comm, comm, sizeof(e->releaser_comm));
	e->rec_flags |= ULOCK_RF_RELEASER;
	ls_count(e->rec_flags & ULOCK_RF_BLOCKCALL ? LS_CNT_BLOCK_WAKERS : LS_CNT_URELEASER);
}

/*
 * The waker early_waker() kept, taken as the releaser of the wait in @e when it came at
 * this wait's switch out: the thread's on-CPU time then is the wait's (the kernel had put
 * it to sleep, and it has not run since), it ends waits of this kind, and a futex wake
 * woke this futex. Taken at the wait's opening, or at its end when the switch program
 * was opening it as the waker wrote (the waker is done before the thread can run again).
 */
static __always_inline void early_releaser(struct sched_slot *e)
{
	__u32 kind;

	/* a precise wait opens at its syscall's entry, before any wake */
	if (!e->early_kind || (e->rec_flags & (ULOCK_RF_RELEASER | ULOCK_RF_PRECISE)))
		return;
	/* taken by an exchange (a full barrier): the names were written before it */
	kind = __sync_lock_test_and_set(&e->early_kind, 0);
	if (!kind || e->early_exec_ns != e->exec_ns || !ends_wait(e, kind) ||
	    (!(e->rec_flags & ULOCK_RF_BLOCKCALL) && e->early_uaddr != e->uaddr))
		return;
	releaser_named(e, e->early_pid, e->early_tid, e->early_comm);
}

/*
 * What a wait's stacks are rationed by (sample_stack()'s per-lock buckets): its object. A
 * descriptor, or a private futex's address, is one process's own: every process has its
 * descriptor 5, and forked workers the same addresses, and one busy process's waits would
 * take the samples of another's on the same number. The process goes in above the bits
 * the buckets' hash drops; a shared futex stays its address alone (one lock in every
 * process that maps it there: PostgreSQL's semaphores).
 */
static __always_inline __u64 stack_key(__u64 uaddr, __u32 tgid, __u32 rec_flags)
{
	return rec_flags & ULOCK_RF_SHARED ? uaddr : uaddr ^ ((__u64)tgid << 34);
}

/*
 * A wait begins in @e for the current thread @cur, about to sleep (or entering the call):
 * a futex wait on @uaddr with @op and @val, or with @blockcall (ULOCK_RF_BLOCKCALL) another
 * blocking syscall, @op its enum ls_btype, @uaddr its descriptor + 1. Everything but its
 * stack and its publication (wait_publish()); whether it is sampled.
 */
static __always_inline bool wait_prepare(struct sched_slot *e, struct task_struct *cur, __u64 uaddr, __u32 op,
					 __u32 val, enum slot_state state, __u32 blockcall)
{
	__u32 tgid = cur->tgid, tid = cur->pid;
	__u64 clock = sched_now(cur);
	/* a precise wait is timed by its syscall, outside the switch: the monotonic clock */
	__u64 now = state == SLOT_SYSCALL ? bpf_ktime_get_ns() : clock;
	__u32 words[3];
	bool sampled;

	e->uaddr = uaddr;
	e->begin_ns = now;
	e->op = op;
	e->val = val;
	e->rec_flags = (state == SLOT_SYSCALL ? ULOCK_RF_PRECISE : ULOCK_RF_BLOCKED) | blockcall;
	if (!blockcall && !(op & ULOCK_FUTEX_PRIVATE))
		e->rec_flags |= ULOCK_RF_SHARED;
	e->chain_pid = 0;
	e->deadline_ns = 0;
	if (state == SLOT_BLOCKED)
		task_switches(cur, &e->switches, &e->exec_ns);
	e->releaser_pid = 0;
	e->releaser_tid = 0;
	early_releaser(e);
	/*
	 * with wakers named, the releaser's stack comes with the sample: both are paid for;
	 * the holder sampler's dumps share the budget (sample_hold_dump())
	 */
	sampled = sample_stack(stack_key(uaddr, tgid, e->rec_flags), clock, false, waker_on ? 2 : 1,
			       ustack_bytes ? &hold_dump_bucket : NULL, cpu_stack_cost_ns * SCHED_HOLD_DUMP_SHARE);
	/*
	 * What only a sampled wait's record carries is set only for one: at most waits the
	 * slot's other lines stay untouched (struct sched_slot)
	 */
	if (sampled) {
		e->word0 = e->word8 = 0;
		e->releaser_stack_id = -1;
		e->releaser_dump = 0;
	}
	/*
	 * One read for the word and glibc's owner field behind it. While sched_waking names
	 * releasers, the thread that releases a mutex to its waiter is the owner it waited
	 * for (futex_owner(); noted as a holder at the wait's end), so the word is read only
	 * for the sample, whose record carries it: the word is on the line every thread of
	 * the lock writes, a miss to another CPU at each read (~100 ns a wait on stress-ng
	 * --mutex: sched_switch 276 -> 224 ns an event; docs/performance.md)
	 */
	if (!blockcall && names_owner(op, val) && (sampled || !waker_on)) {
		if (!bpf_probe_read_user(words, sizeof(words), (void *)uaddr)) {
			e->word0 = words[0];
			e->word8 = words[ULOCK_MUTEX_OWNER_OFF / sizeof(__u32)];
			e->rec_flags |= ULOCK_RF_WORDS;
			ls_count(LS_CNT_UWORDS);
			note_holder(e, tgid, futex_owner(e, tgid, tid));
		} else {
			ls_count(LS_DROP_UNREADABLE);
		}
	}
	if (sampled)
		e->rec_flags |= ULOCK_RF_SAMPLED;
	return sampled;
}

/*
 * The wait wait_prepare() opened in @e for thread @tid: its stack taken when @sampled, and
 * then @state, last, for the waker (sched_waking, on another CPU) to find it complete.
 */
static __always_inline void wait_publish(void *ctx, struct sched_slot *e, __u32 tid, enum slot_state state,
					 bool sampled)
{
	if (sampled)
		take_stack(ctx, &e->stack_id, &e->stack_dump, &e->rec_flags, ULOCK_RF_STACK, ULOCK_RF_DUMP, false);
	if (e->state == SLOT_IDLE)
		pending_open(tid);
	e->state = state;
}

static __always_inline void wait_open(void *ctx, struct sched_slot *e, struct task_struct *cur, __u64 uaddr,
				      __u32 op, __u32 val, enum slot_state state, __u32 blockcall)
{
	bool sampled = wait_prepare(e, cur, uaddr, op, val, state, blockcall);

	wait_publish(ctx, e, cur->pid, state, sampled);
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

/* Thread @tid's wait in @e ended at @end_ns: what a wait it ends next asks (note_chain). */
static __always_inline void note_last_wait(__u32 tid, __u64 end_ns, const struct sched_slot *e)
{
	__u32 zero = 0;
	struct last_wait *w = bpf_map_lookup_elem(&last_waits, &zero);

	if (!w)
		return;
	w->end_ns = end_ns;
	w->tid = tid;
	w->waker_pid = e->releaser_pid;
	w->waker_tid = e->releaser_tid;
	w->precise = !!(e->rec_flags & ULOCK_RF_PRECISE);
}

/*
 * The wait in @e ended after @wait_ns: counted in the table, and sent with its stacks when
 * sampled. @inline_add: the table add inlined here, for the one place that ends most waits
 * (the switch in); elsewhere the global function, which the verifier walks once
 * (wait_add_subprog()).
 */
static __always_inline void wait_end(struct sched_slot *e, __u32 tgid, __u32 tid, const char *comm,
				     __u64 wait_ns, __s32 ret, const bool inline_add)
{
	bool nonblocking = (e->rec_flags & ULOCK_RF_PRECISE) && !(e->rec_flags & ULOCK_RF_BLOCKED);
	__u32 owner = futex_owner(e, tgid, tid);
	bool blockcall = e->rec_flags & ULOCK_RF_BLOCKCALL;
	/* no releaser because none was looked for: the daemon tells it from no thread's wake */
	bool unwatched = !e->releaser_tid && !waker_on;
	struct ls_wait_key key = {
		.lock = e->uaddr,
		.pid = tgid,
		.tid = tid,
		.class = blockcall ? LS_WAIT_BLOCK : LS_WAIT_FUTEX,
		.type = blockcall ? e->op : ls_futex_type(e->op, e->val),
		.flags = (e->rec_flags & ULOCK_RF_SHARED ? LS_WF_SHARED : 0) |
			 (e->rec_flags & ULOCK_RF_PRECISE ? LS_WF_PRECISE : 0) |
			 (unwatched ? LS_WF_UNWATCHED : 0) |
			 (e->chain_pid << LS_WF_CHAIN_SHIFT),
		.owner_pid = owner ? tgid : 0,	/* the daemon checks the owner is a thread of tgid */
		.owner_tid = owner,
		.releaser_pid = e->releaser_pid,
		.releaser_tid = e->releaser_tid,
	};
	struct ls_wait_names names = { .comm = comm, .releaser_comm = e->releaser_tid ? e->releaser_comm : NULL };

	/*
	 * an owner its release named (the word not read at the block) is noted as the word's
	 * would have been: the holder sampler and the preemption check see every thread that
	 * holds the lock, from its first release to a waiter on
	 */
	if (!(e->rec_flags & ULOCK_RF_WORDS))
		note_holder(e, tgid, owner);
	e->state = SLOT_IDLE;
	pending_close(tid);
	if (!nonblocking)
		note_last_wait(tid, e->begin_ns + wait_ns, e);
	if (inline_add)
		wait_add(&key, wait_ns, nonblocking, &names);
	else
		wait_add_subprog(&key, wait_ns, nonblocking, &names);
	if (nonblocking)
		ls_count(LS_CNT_UNONBLOCK);
	if (!(e->rec_flags & ULOCK_RF_SAMPLED))
		return;
	if (unwatched)
		e->rec_flags |= ULOCK_RF_UNWATCHED;
	ls_count(LS_CNT_USAMPLED);
	if (!nonblocking && (e->rec_flags & (ULOCK_RF_STACK | ULOCK_RF_DUMP)))
		ls_count(LS_CNT_USTACKED);
	emit_sample(e, tgid, tid, comm, wait_ns, ret);
}

/* The wait in @e ends at @now, on the clock it began on (wait_open()); @inline_add as wait_end()'s. */
static __always_inline void wait_close(struct sched_slot *e, __u32 tgid, __u32 tid, const char *comm,
				       __s32 ret, __u64 now, const bool inline_add)
{
	early_releaser(e);
	wait_end(e, tgid, tid, comm, now > e->begin_ns ? now - e->begin_ns : 0, ret, inline_add);
}

/*
 * @t, asleep in the wait in @e, is running again, yet sched_switch never named it as next
 * (this kernel skips a few switch-ins from idle: more switches out than in are seen,
 * ftrace's and perf's event streams too). Called at its next switch out (@switching: that
 * switch is counted already) or as it exits. If it was not switched out in between, it
 * ran without a break since its switch in: the wait lasted the time since it began less
 * the time it has run since, which the kernel accounts (at an exit, up to the last tick:
 * what it ran since counts as waiting). Otherwise the end is unknown and the wait is
 * dropped, counted.
 */
static __always_inline void wait_close_unseen(struct sched_slot *e, struct task_struct *t, bool switching)
{
	__u64 now = sched_now(t), exec_ns, ran, off;
	__u32 switches;

	task_switches(t, &switches, &exec_ns);
	ran = exec_ns - e->exec_ns;
	off = now - e->begin_ns;
	if (switches != e->switches + switching || ran > off) {
		e->state = SLOT_IDLE;
		pending_close(t->pid);
		ls_count(LS_DROP_MISSED_END);
		return;
	}
	ls_count(LS_CNT_UNSEEN_SWITCH_IN);
	early_releaser(e);
	wait_end(e, t->tgid, t->pid, t->comm, off - ran, 0, false);
}

/*
 * A wait while sched_waking is off: the one that reaches the rate asks for it, and says how
 * fast they came (the daemon grants a storm's only a look: waker-max-rate).
 */
static __always_inline void waker_wanted(void)
{
	__u32 n, half = waker_min_blocks / 2;
	struct ls_waker_rec *r;
	void *rb;

	/*
	 * asked already this second: a load, no add. Between a storm's looks every wait comes
	 * here, and an atomic add at each, on the line every CPU shares, cost wake_storm's
	 * sched_switch 57 ns an event (117 -> 174)
	 */
	if (waker_blocks >= waker_min_blocks)
		return;
	n = __sync_fetch_and_add(&waker_blocks, 1) + 1;
	if (n == half)	/* once a second: the daemon resets the count */
		waker_half_ns = bpf_ktime_get_ns();
	if (n != waker_min_blocks)
		return;
	r = ls_reserve(&rb, LS_REC_WAKER_WANTED, sizeof(*r));
	if (!r)
		return;
	r->span_ns = bpf_ktime_get_ns() - waker_half_ns;
	r->waits = half ? waker_min_blocks - half : 0;
	/* the daemon acts on it now, not at its next timer drain */
	bpf_ringbuf_submit(r, BPF_RB_FORCE_WAKEUP);
}

/* @prev goes to sleep in futex call @nr: a futex wait begins. Runs in @prev's context. */
static __always_inline void futex_block(void *ctx, struct task_struct *prev, struct pt_regs *regs, long nr)
{
	__u32 tid = prev->pid, op, val;
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
	wait_open(ctx, e, prev, uaddr, op, val, SLOT_BLOCKED, 0);
	if (!waker_on)
		waker_wanted();
}

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Part of klock.bpf.c, included where it stands: a mutex that spins and then sleeps is
 * one wait. A spin preempted by schedule() left its wait on the CPU it ran on; the task
 * claims it back (on any CPU) when it spins or sleeps again.
 */
#ifndef __LS_KLOCK_SPIN_BPF_H
#define __LS_KLOCK_SPIN_BPF_H

struct claim_ctx {
	__u64 lock;
	__u64 now;
	__u32 tid;
	bool found;
	struct klock_pending e;
};

static long claim_on_cpu(__u64 cpu, struct claim_ctx *c)
{
	__u32 zero = 0, depth, i;
	struct klock_slot *slot;
	struct klock_pending *e;

	slot = bpf_map_lookup_percpu_elem(&cpu_slots, &zero, cpu);
	if (!slot)
		return 0;
	depth = *(volatile __u32 *)&slot->depth;	/* that CPU's own, read racily */
	for (i = 0; i < KLOCK_NEST_MAX && i < depth; i++) {
		e = &slot->e[i];
		if (e->lock != c->lock || e->tid != c->tid || c->now - e->begin_ns >= spin_stale_ns)
			continue;
		c->e = *e;
		/* claimed, it is never matched again; that CPU drops it when it next spins */
		c->found = __sync_val_compare_and_swap(&e->tid, c->tid, KLOCK_TID_CLAIMED) == c->tid;
		return 1;
	}
	return 0;
}

/*
 * A mutex whose optimistic spin gave up and called schedule() left its wait (MUTEX|SPIN)
 * in the slot of the CPU it spun on, under whatever others pushed since, and goes on on any
 * CPU: to sleep (MUTEX), or to take the lock at once (contention_end). Only then is the
 * wait neither at the top of this CPU's slot nor in the thread's, so only then are all
 * CPUs' slots searched.
 */
static __always_inline bool claim_moved_spin(__u64 lock, __u32 tid, __u64 now, struct klock_pending *out)
{
	struct claim_ctx c = { .lock = lock, .now = now, .tid = tid };

	bpf_loop(nr_cpus, claim_on_cpu, &c, 0);
	if (!c.found)
		return false;
	*out = c.e;
	ls_count(LS_CNT_SPIN_RESCHED);
	return true;
}

/*
 * A mutex's first waiter, woken, spins again (MUTEX|SPIN) before it may sleep again
 * (MUTEX): the same wait, open in the thread's slot since its first begin. Marks it so
 * that the sleep which may follow continues it too. True when that was the case.
 *
 * Most spinning begins are first tries, with nothing open: a thread whose slot is in
 * slot_cache learns that from its own entry, before it reads the lock's first waiter,
 * whose line is on another task's stack. Only a thread without one asks the waiter
 * first, which spares it the hash lookup.
 */
static __always_inline bool respin(__u32 tid, __u64 lock, const bool direct)
{
	struct klock_slot *slot = slot_cache_entry(tid);
	struct klock_pending *top;

	if (slot && slot->owner == tid) {
		if (!(top = slot_top(slot, lock, tid)) || !mutex_first_waiter_is_current(lock, direct))
			return false;
	} else {
		if (!mutex_first_waiter_is_current(lock, direct) || !(slot = thread_slot(tid, false)) ||
		    !(top = slot_top(slot, lock, tid)))
			return false;
	}
	top->rec_flags |= KLOCK_RF_RESPIN;
	ls_count(LS_CNT_CONTINUED);
	return true;
}

/*
 * A mutex that spun on this CPU (MUTEX|SPIN at the top of @cpu) now goes to sleep on the
 * same lock (MUTEX): one wait, timed from its first begin, moved to the thread's slot
 * because it may wake on another CPU. True when that was the case.
 */
static __always_inline bool continue_sleeping(struct klock_slot *cpu, __u32 tid, __u64 lock, __u32 flags)
{
	struct klock_pending *top = slot_top(cpu, lock, tid), moved;

	if (!top || !is_continuation(top->lcb_flags, flags))
		return false;
	moved = *top;
	moved.lcb_flags = flags;
	cpu->depth--;
	if (thread_push(tid, &moved))
		ls_count(LS_CNT_CONTINUED);
	return true;
}

#endif

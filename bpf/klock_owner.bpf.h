/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Part of klock.bpf.c, included where it stands (after its maps and slots): who
 * holds the lock a wait begins on. Its name (mmap_lock, siglock), its owner read from the
 * lock word (plain loads on 6.2+, helper reads before), owners noted for the preemption
 * check, and an owner's stack when the wait is sampled.
 */
#ifndef __LS_KLOCK_OWNER_BPF_H
#define __LS_KLOCK_OWNER_BPF_H

/*
 * Names the two per-task locks the waiter's task points at; only where the type fits.
 * The task as BTF: its mm and sighand are plain loads, not a helper read each.
 */
static __always_inline __u32 lock_name_flags(struct task_struct *task, __u64 lock, __u32 flags)
{
	struct sighand_struct *sighand;
	struct mm_struct *mm;

	if (flags & (KLOCK_F_MUTEX | KLOCK_F_PERCPU))
		return 0;
	if ((flags & (KLOCK_F_READ | KLOCK_F_WRITE)) && !(flags & KLOCK_F_SPIN)) {
		/* an rwsem (RT|READ/WRITE on PREEMPT_RT): mmap_lock? */
		mm = task->mm;
		if (mm && lock == (__u64)mm + bpf_core_field_offset(struct mm_struct, mmap_lock))
			return KLOCK_RF_MMAP_LOCK;
		return 0;
	}
	/* a spinlock_t (SPIN, or RT on PREEMPT_RT): siglock? */
	sighand = task->sighand;
	if (sighand && lock == (__u64)sighand + bpf_core_field_offset(struct sighand_struct, siglock))
		return KLOCK_RF_SIGLOCK;
	return 0;
}

/*
 * The owner's tid and tgid. @direct: plain loads (bpf_rdonly_cast); else adjacent in
 * task_struct, one helper read where they still are.
 */
static __always_inline void owner_ids(struct task_struct *owner, __u32 *tid, __u32 *tgid, const bool direct)
{
	__u32 ids[2] = {};
	struct task_struct *t;

	if (direct) {
		t = bpf_rdonly_cast(owner, bpf_core_type_id_kernel(struct task_struct));
		*tid = t->pid;
		*tgid = t->tgid;
		return;
	}
	if (bpf_core_field_offset(struct task_struct, tgid) == bpf_core_field_offset(struct task_struct, pid) + 4) {
		bpf_probe_read_kernel(ids, sizeof(ids), (void *)owner + bpf_core_field_offset(struct task_struct, pid));
		*tid = ids[0];
		*tgid = ids[1];
		return;
	}
	*tid = BPF_CORE_READ(owner, pid);
	*tgid = BPF_CORE_READ(owner, tgid);
}

/*
 * A plain mutex's owner word, by a plain load (bpf_rdonly_cast, 6.2+, the variants that
 * have kfuncs); 0 where there is none to read (no such word: PREEMPT_RT's mutex is an
 * rt_mutex). Its line is the lock's, which the holder wrote when it took it: in a storm a
 * miss to another CPU at every wait, the begin's largest cost (bench/profile.py). So it
 * is loaded right after the clock read (whose lfence would wait for it), and the
 * begin's other work runs while it comes.
 */
static __always_inline unsigned long mutex_owner_word(__u64 lock, __u32 flags, const bool direct)
{
	struct mutex___plain *m;

	if (!direct || !(flags & KLOCK_F_MUTEX) || !bpf_core_field_exists(((struct mutex___plain *)0)->owner))
		return 0;
	m = bpf_rdonly_cast((void *)lock, bpf_core_type_id_kernel(struct mutex));
	return *(volatile long *)&m->owner.counter;
}

/* The task a mutex's owner @word names and its ids; NULL for none. */
static __always_inline struct task_struct *mutex_owner_direct(unsigned long word, __u32 *tid, __u32 *tgid)
{
	struct task_struct *t;

	word &= ~KOWNER_FLAGS_MASK;
	if (!word)
		return NULL;
	t = bpf_rdonly_cast((void *)word, bpf_core_type_id_kernel(struct task_struct));
	*tid = t->pid;
	*tgid = t->tgid;
	return (struct task_struct *)word;
}

/*
 * A plain rwsem's owner by plain loads (6.2+, the variants that have kfuncs): mmap_lock
 * storms, on every wait, without two helper reads. NULL when reader-owned (the word then
 * names only the last reader) or unowned; *waiters as kowner_read() says.
 */
static __always_inline struct task_struct *rwsem_owner_direct(__u64 lock, bool *waiters)
{
	struct rw_semaphore___plain *sem;
	unsigned long owner;

	sem = bpf_rdonly_cast((void *)lock, bpf_core_type_id_kernel(struct rw_semaphore));
	owner = sem->owner.counter;
	if (owner & KOWNER_RWSEM_READER)
		return NULL;
	*waiters = sem->count.counter & KOWNER_RWSEM_WAITERS;
	return (struct task_struct *)(owner & ~KOWNER_FLAGS_MASK);
}

/*
 * Whether the current task is @lock's first waiter, which it is only when, woken, it
 * spins again (MUTEX|SPIN) inside a wait it began earlier: on the first begin it has not
 * queued yet. @direct: plain loads (bpf_rdonly_cast), else helper reads.
 */
static __always_inline bool mutex_first_waiter_is_current(__u64 lock, const bool direct)
{
	__u64 head = lock + bpf_core_field_offset(struct mutex___plain, wait_list), next;
	__u64 list_off = bpf_core_field_offset(struct mutex_waiter___plain, list);
	struct mutex_waiter___plain *w;
	struct mutex___plain *m;
	struct task_struct *task;

	if (!bpf_core_field_exists(((struct mutex___plain *)0)->wait_list))
		return false;
	if (direct) {
		m = bpf_rdonly_cast((void *)lock, bpf_core_type_id_kernel(struct mutex));
		next = (__u64)m->wait_list.next;
		if (next == head || !next)
			return false;
		w = bpf_rdonly_cast((void *)(next - list_off), bpf_core_type_id_kernel(struct mutex_waiter___plain));
		task = w->task;
	} else {
		next = (__u64)BPF_CORE_READ((struct mutex___plain *)lock, wait_list.next);
		if (next == head || !next)
			return false;
		w = (void *)(next - list_off);
		task = BPF_CORE_READ(w, task);
	}
	return task == bpf_get_current_task_btf();
}

/*
 * Fills the owner fields of @e; returns the owner for this program's use only. @direct:
 * the variant has kfuncs, a mutex's owner is @word (mutex_owner_word()).
 */
static __always_inline struct task_struct *read_owner(struct klock_pending *e, __u64 lock, __u32 flags,
						      unsigned long word, const bool direct)
{
	struct task_struct *owner;
	bool waiters;

	e->owner_pid = 0;
	e->owner_tid = 0;
	if (direct && (flags & KLOCK_F_MUTEX)) {
		owner = mutex_owner_direct(word, &e->owner_tid, &e->owner_pid);
		e->owner_task = (__u64)owner;
		if (!owner || !e->owner_tid)
			return NULL;
		e->rec_flags |= KLOCK_RF_OWNER;
		return owner;
	}
	waiters = false;
	if (direct && is_plain_rwsem(flags))
		owner = rwsem_owner_direct(lock, &waiters);
	else
		owner = kowner_read(lock, flags, &waiters);
	e->owner_task = (__u64)owner;
	if (!owner)
		return NULL;
	owner_ids(owner, &e->owner_tid, &e->owner_pid, direct);
	if (!e->owner_tid)
		return NULL;
	e->rec_flags |= KLOCK_RF_OWNER;
	return owner;
}

/*
 * Where the owner's and the waiter's names are, for a helper to read when they are kept:
 * soon after the wait, while the tasks still are (a name read after one exited and was
 * freed would be wrong, never unsafe: the helper reads what it can)
 */
static __always_inline const char *owner_comm(const struct klock_pending *e)
{
	return e->owner_tid ? (const char *)(e->owner_task + bpf_core_field_offset(struct task_struct, comm)) : NULL;
}

static __always_inline const char *waiter_comm(const struct klock_pending *e)
{
	return (const char *)(e->task + bpf_core_field_offset(struct task_struct, comm));
}

/*
 * Remembers that @e's owner holds its lock, for the check at its next involuntary switch.
 * Most waits on a lock name the owner the previous one named: the entry is written only
 * when that changes, so waiters on many CPUs read one shared line and write none.
 */
static __always_inline void note_holder(const struct klock_pending *e, __u64 lock, __u32 flags)
{
	__u32 tid = e->owner_tid;
	struct kholder *h = kholder_entry(tid);

	if (!h || (h->tid == tid && h->lock == lock))
		return;
	/*
	 * Untagged while it changes, as the user holders' entries are (exchanges: full
	 * barriers on every architecture), so a switch that reads it meanwhile finds no
	 * owner rather than one owner's tid with another's lock; whatever it reads, the
	 * switch checks against the lock's own owner word before it counts anything
	 */
	__sync_lock_test_and_set(&h->tid, 0);
	h->lock = lock;
	h->lcb_flags = flags & ~KLOCK_F_SPIN;
	__sync_lock_test_and_set(&h->tid, tid);
	ls_count(LS_CNT_KHOLDERS);
}

static __always_inline void take_owner_stack(__u32 tid, struct klock_pending *e,
					     struct task_struct *owner)
{
	struct owner_stack *os;
	struct task_struct *t;
	bool running;
	long n;

	/* the unwinder refuses a task running on another CPU; don't pay to be refused */
	if (BPF_CORE_READ(owner, on_cpu)) {
		ls_count(LS_CNT_OWNER_ON_CPU);
		return;
	}
	if (bpf_map_update_elem(&owner_stacks, &tid, &empty_owner_stack, BPF_ANY)) {
		ls_count(LS_DROP_OWNER_STACK);
		return;
	}
	os = bpf_map_lookup_elem(&owner_stacks, &tid);
	if (!os)
		return;
	t = bpf_task_from_pid(e->owner_tid);
	if (!t) {	/* the owner exited or released in between */
		ls_count(LS_DROP_OWNER_STACK);
		bpf_map_delete_elem(&owner_stacks, &tid);
		return;
	}
	n = bpf_get_task_stack(t, os->ips, sizeof(os->ips), 0);
	/*
	 * An owner switched in on another CPU between the check above and the walk has
	 * its saved stack overwritten under the unwinder, which then gives up: the same
	 * case as one found running, counted with it rather than as a failure
	 */
	running = n <= 0 && BPF_CORE_READ(t, on_cpu);
	bpf_task_release(t);
	if (n <= 0) {
		ls_count(running ? LS_CNT_OWNER_ON_CPU : LS_DROP_OWNER_STACK);
		bpf_map_delete_elem(&owner_stacks, &tid);
		return;
	}
	os->nr = n / sizeof(__u64);
	e->rec_flags |= KLOCK_RF_OWNER_STACK;
}

#endif

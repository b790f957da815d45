/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Part of scheduler.bpf.c, included where it stands: what the switch sees besides futex
 * waits. Lock holders preempted while others wait, yield storms (the yielder and the
 * peer it made way for), stops (SIGSTOP, a debugger) and the burst of events after the
 * resume.
 */
#ifndef __LS_SCHED_SPIN_BPF_H
#define __LS_SCHED_SPIN_BPF_H

/*
 * Holder @t, switched out now, holds the lock at @addr (@kind, @flags as the table keys
 * them): the preemption runs until its next switch-in.
 */
static __always_inline bool preempt_begin(struct task_struct *t, __u64 addr, __u32 kind, __u32 flags)
{
	__u32 tid = t->pid;
	struct sched_slot *e = thread_slot(tid, true);

	if (!e)
		return false;
	if (!e->preempt_ns)
		pending_open(tid);
	e->preempt_ns = sched_now(t);
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

	h = holder_of(tid);
	if (!h || bpf_probe_read_user(words, sizeof(words), (void *)h->uaddr))
		return false;
	if (h->kind == ULOCK_HOLDER_PI) {
		owner = words[0] & ULOCK_FUTEX_TID_MASK;
		waiters = words[0] & ULOCK_FUTEX_WAITERS;
	} else {
		owner = words[ULOCK_MUTEX_OWNER_OFF / sizeof(__u32)];
		waiters = words[0] == ULOCK_LOCKED_WAITERS;
	}
	return owner == tid && waiters && preempt_begin(prev, h->uaddr, h->kind, h->rec_flags);
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
	struct kholder *h = kholder_entry(prev->pid);
	bool waiters;

	if (h && h->tid == (__u32)prev->pid && kowner_read(h->lock, h->lcb_flags, &waiters) == prev)
		preempt_begin(prev, h->lock, ULOCK_HOLDER_KERNEL, h->lcb_flags);
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
		wait_add_subprog(&key, sched_now(t) - e->preempt_ns, false, &names);
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
	__u32 tid = t->pid, idx = tid & (SCHED_SPIN_CACHE - 1);
	struct sched_spin_cached *c = bpf_map_lookup_elem(&spin_cache, &idx);
	struct sched_spin_thread *sp;

	if (c && c->owner == tid) {
		sp = &c->sp;
		goto named;
	}
	sp = bpf_map_lookup_elem(&spinners, &tid);
	if (sp)
		goto named;
	/* an entry is free only cleared (spinner_release()): claimed, it is a new thread's */
	if (c && !c->owner && __sync_val_compare_and_swap(&c->owner, 0, tid) == 0) {
		sp = &c->sp;
	} else {
		bpf_map_update_elem(&spinners, &tid, &empty_spinner, BPF_NOEXIST);
		sp = bpf_map_lookup_elem(&spinners, &tid);
		if (!sp) {
			ls_count(LS_DROP_SCHED_FULL);
			return NULL;
		}
	}
	sp->tgid = t->tgid;
	pending_mark(tid, PB_SPINNER);
named:
	__builtin_memcpy(sp->comm, t->comm, sizeof(sp->comm));
	return sp;
}

/*
 * Exiting thread @tid's spin_cache entry, if it owns one: its figures go to the spinners
 * map, where the daemon finds them as it finds those of the threads that never had an
 * entry, and the entry is cleared and freed for another thread. Once per thread's life,
 * at its last switch out.
 */
static __always_inline void spinner_release(__u32 tid)
{
	__u32 idx = tid & (SCHED_SPIN_CACHE - 1);
	struct sched_spin_cached *c = bpf_map_lookup_elem(&spin_cache, &idx);

	if (!c || c->owner != tid)
		return;
	if (bpf_map_update_elem(&spinners, &tid, &c->sp, BPF_ANY))
		ls_count(LS_DROP_SCHED_FULL);
	__builtin_memset(&c->sp, 0, sizeof(c->sp));
	/* an exchange: a full barrier, the entry is clear before it is free */
	__sync_lock_test_and_set(&c->owner, 0);
}

/*
 * @t calls sched_yield() (or sleeps for zero time, @via): counted into its storm, with the
 * CPU it burnt since the storm's previous yield. The storm's second yield and every
 * SCHED_YIELD_STACK_EVERY-th carry the site's stack. Returns @t's spin figures (NULL when
 * the map is full).
 */
static __always_inline struct sched_spin_thread *yield_count(struct task_struct *t, __u64 now, __u32 via)
{
	__u64 exec = t->se.sum_exec_runtime, dump;
	struct sched_spin_thread *sp = spinner_get(t);
	struct sched_yield_rec *r;
	void *rb;

	if (!sp)
		return NULL;
	/* signed: @now is mono_now()'s, which may read a little behind on another CPU */
	if ((__s64)(now - sp->last_yield_ns) > (__s64)SCHED_STORM_GAP_NS || sp->storm_via != via) {
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
		return sp;
	if (!sample_cpu_stack(now) || !(dump = ustack_dump(USTACK_SPIN, false)))
		return sp;
	r = ls_reserve(&rb, LS_REC_SCHED_YIELD, sizeof(*r));
	if (!r)
		return sp;
	r->pid = t->tgid;
	r->tid = t->pid;
	r->rec_flags = SCHED_RF_DUMP;
	r->pad = 0;
	r->stack_dump = dump;
	__builtin_memcpy(r->comm, t->comm, sizeof(r->comm));
	ls_count(LS_CNT_YIELD_SITES);
	ls_submit(rb, r);
	return sp;
}

/*
 * @sp's own entry for peer @tid, claimed if one is free; NULL when they all count others.
 * Only the thread's own yields write them, one at a time.
 */
static __always_inline struct sched_peer *own_peer(struct sched_spin_thread *sp, __u32 tid)
{
	int i;

	if (!sp || !tid)
		return NULL;
	for (i = 0; i < SCHED_SPIN_PEERS; i++) {
		struct sched_spin_peer *o = &sp->peers[i];

		if (o->tid == tid)
			return &o->v;
		if (!o->tid) {
			o->tid = tid;
			return &o->v;
		}
	}
	return NULL;
}

/* @prev yielded its CPU to @next: @next is the thread it likely waits for. */
static __always_inline void yielded(struct task_struct *prev, struct task_struct *next, __u64 now)
{
	struct sched_peer_key key = { .tid = prev->pid, .peer = next->pid };
	struct sched_peer *p;

	p = own_peer(yield_count(prev, now, LS_POLL_NONE), next->pid);
	if (!p)
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
		n += t->ioac.syscr + t->ioac.syscw;
	return n;
}

/*
 * Whether a sleep in @state cannot be one the freezer may take. Since 6.1 such sleeps say
 * so (TASK_FREEZABLE): a futex wait's, a nanosleep's, cgroup v2's freeze trap; a pipe's,
 * a socket's, most others' do not. Before 6.1 no state says it: false.
 */
static __always_inline bool unfreezable_sleep(unsigned int state)
{
	return LINUX_KERNEL_VERSION >= KERNEL_VERSION(6, 1, 0) && !(state & TASK_FREEZABLE_BIT);
}

/*
 * Whether @prev, switched out asleep in @prev_state, stops. cgroup v2's freezer traps a
 * task in an interruptible sleep that only its jobctl marks, a line of the task nothing
 * else on the switch reads: loaded only for a sleep the freezer may take.
 */
static __always_inline bool stopping(struct task_struct *prev, unsigned int prev_state)
{
	if (prev_state & TASK_STOP_MASK)
		return true;
	return !unfreezable_sleep(prev_state) && (prev->jobctl & JOBCTL_TRAP_FREEZE);
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
			e->stop.stack_dump = ustack_dump(USTACK_SPIN, false);
		return;
	}
	report_resume(&e->stop, t);
	stop_forget(e, t->pid);
}

#endif

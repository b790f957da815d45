/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Part of scheduler.bpf.c, included where it stands: the cpu-clock samplers. Holders of
 * contended locks checked against the lock word and sampled for what the critical section
 * does; every thread sampled for spin-wait loops and busy polls.
 */
#ifndef __LS_SCHED_SAMPLERS_BPF_H
#define __LS_SCHED_SAMPLERS_BPF_H

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
	h = holder_of(tid);
	if (!h)
		return 0;
	where = h->kind == ULOCK_HOLDER_PI ? h->uaddr : h->uaddr + ULOCK_MUTEX_OWNER_OFF;
	if (bpf_probe_read_user(&word, sizeof(word), (void *)where))
		return 0;	/* page not present in this context; try at the next sample */
	if (h->kind == ULOCK_HOLDER_PI)
		word &= ULOCK_FUTEX_TID_MASK;
	if (word != tid) {
		__sync_val_compare_and_swap(&h->tid, tid, 0);	/* forgotten, unless retaken */
		ls_count(LS_CNT_HOLD_RELEASED);
		return 0;
	}
	/*
	 * A dump is a large ring record: holder samples share the CPU's dump budget with
	 * waits, up to half of it. A sample over budget is skipped whole, so the stacks that
	 * are kept remain an unbiased sample of the critical section.
	 */
	if (ustack_bytes && !sample_hold_dump(bpf_ktime_get_ns())) {
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

/* Whether the user code at @ip in @mm is in a spin loop (ls_spinning_at()), remembered. */
static __always_inline bool spinning_at(__u64 mm, __u64 ip)
{
	/* Fibonacci hashing: a loop's addresses are a few bytes apart */
	__u32 idx = (ip * 0x9E3779B97F4A7C15ULL) >> (64 - __builtin_ctz(SCHED_SPIN_MEMO_SLOTS));
	struct spin_memo *m = bpf_map_lookup_elem(&spin_memo, &idx);

	if (!m)
		return ls_spinning_at(ip);
	if (m->ip == ip && m->mm == mm && m->uses) {
		m->uses--;
		return m->spin;
	}
	m->ip = ip;
	m->mm = mm;
	m->spin = ls_spinning_at(ip);
	m->uses = SCHED_SPIN_MEMO_USES;
	return m->spin;
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
		spin = spinning_at((__u64)t->mm, ip);
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
	if (!t->mm || !sample_spin_dump(bpf_ktime_get_ns()) || !(dump = ustack_dump(USTACK_SPIN, true))) {
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

#endif

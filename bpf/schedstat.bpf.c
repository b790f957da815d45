// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * schedstat: per-thread scheduling, and the waste the scheduler sees.
 *
 * - Voluntary and involuntary switches, on-CPU time, time asleep and time waiting in a
 *   run queue, per thread.
 * - Yield storms: a thread switched out by sched_yield() again and again, what it burnt
 *   between yields and which thread each yield ran (the one it likely waits for).
 * - Stops and bursts: a thread stopped (SIGSTOP, ptrace, freezer, suspend) and how many
 *   events it produced in the first 100 ms after it resumed, against its rate before.
 * - Spin loops: a cpu-clock sampler counts, per thread, the samples whose code is a
 *   spin-wait loop (PAUSE) against all its samples.
 *
 * sched_switch fires on every switch of the host, so its common path is two hash lookups
 * and a few adds: no ring record, no stack. Records and stack dumps are written only for
 * yield storms (a few per storm) and stops. The daemon reads the threads map once a second.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "schedstat.h"
#include "common.bpf.h"
#include "sampling.bpf.h"
#include "ustack.bpf.h"
#include "arch.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

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

/*
 * Keyed by tid; preallocated (switch and wakeup hooks run under the runqueue lock, where
 * an allocation can deadlock). The daemon deletes the entries of threads that exited.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SCHED_DEF_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct sched_thread);
} threads SEC(".maps");

/* Written only on yields; LRU so that pairs of threads long gone age out. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, SCHED_DEF_MAX_PEERS);
	__type(key, struct sched_peer_key);
	__type(value, struct sched_peer);
} peers SEC(".maps");

/* Threads between a stop and the end of the window after their resume. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SCHED_DEF_MAX_STOPS);
	__type(key, __u32);
	__type(value, struct sched_stop);
} stops SEC(".maps");

/*
 * Set by the daemon where the kernel has the sched_entry_tp tracepoint (6.16+): every
 * sched_yield() is counted there, also those that find nothing else to run and return
 * without a switch. Elsewhere only the yields that switched are counted, at the switch.
 */
const volatile bool yield_at_entry = false;

static const struct sched_thread empty_thread;
static const struct sched_peer empty_peer;

static __always_inline struct sched_thread *thread_get(struct task_struct *t)
{
	__u32 tid = t->pid;
	struct sched_thread *st = bpf_map_lookup_elem(&threads, &tid);

	if (st)
		return st;
	if (bpf_map_update_elem(&threads, &tid, &empty_thread, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&threads, &tid)) {
		ls_count(LS_DROP_SCHED_FULL);
		return NULL;
	}
	st = bpf_map_lookup_elem(&threads, &tid);
	if (st) {
		st->tgid = t->tgid;
		bpf_probe_read_kernel_str(st->comm, sizeof(st->comm), t->comm);
	}
	return st;
}

/* Closes the interval the thread spent in its last state; returns its length. */
static __always_inline __u64 account(struct sched_thread *st, __u64 now)
{
	__u64 d = now - st->last_ns;

	switch (st->state) {
	case SCHED_T_ONCPU:
		st->oncpu_ns += d;
		break;
	case SCHED_T_BLOCKED:
		st->blocked_ns += d;
		break;
	case SCHED_T_RUNNABLE:
		st->runq_ns += d;
		break;
	}
	st->last_ns = now;
	return d;
}

/*
 * What a thread did that a burst is made of: read and write syscalls (the kernel's own
 * per-task I/O accounting, /proc/PID/io syscr and syscw) and sleeps (each voluntary
 * switch is a wait that ended in a wakeup). Three loads from the task, no hook on the
 * syscall path.
 */
static __always_inline __u64 sched_events(struct task_struct *t)
{
	__u64 n = t->nvcsw;

	if (bpf_core_field_exists(t->ioac))
		n += BPF_CORE_READ(t, ioac.syscr) + BPF_CORE_READ(t, ioac.syscw);
	return n;
}

/* Kernel threads make no syscalls: their registers are not even looked up. */
static __always_inline bool is_yield(struct task_struct *t)
{
	return t->mm && LS_SYSCALL_NR((struct pt_regs *)bpf_task_pt_regs(t)) == LS_SYS_SCHED_YIELD;
}

/* A timespec/timeval argument that says "return at once": present and all zero. */
static __always_inline bool zero_time(__u64 uptr)
{
	__u64 t[2];

	return uptr && !bpf_probe_read_user(t, sizeof(t), (void *)uptr) && !t[0] && !t[1];
}

/* @t, going to sleep, sleeps for zero time: nanosleep(0), a relative clock_nanosleep(0). */
static __always_inline bool is_zero_sleep(struct task_struct *t)
{
	struct pt_regs *regs;
	long nr;

	if (!t->mm)
		return false;
	regs = (struct pt_regs *)bpf_task_pt_regs(t);
	nr = LS_SYSCALL_NR(regs);
	if (nr == LS_SYS_NANOSLEEP)
		return zero_time(PT_REGS_PARM1_CORE_SYSCALL(regs));
	if (nr == LS_SYS_CLOCK_NANOSLEEP)
		return !PT_REGS_PARM2_CORE_SYSCALL(regs) && zero_time(PT_REGS_PARM3_CORE_SYSCALL(regs));
	return false;
}

/*
 * The current thread calls sched_yield() (or sleeps for zero time, @via): counted into
 * its storm. The storm's second
 * yield and every SCHED_YIELD_STACK_EVERY-th carry the site's stack.
 */
static __always_inline void yield_count(struct sched_thread *st, struct task_struct *t, __u64 now,
					__u32 via)
{
	struct sched_yield_rec *r;
	__u64 dump;
	void *rb;

	if (now - st->last_yield_ns > SCHED_STORM_GAP_NS || st->storm_via != via) {
		st->storm_start_ns = now;
		st->storm_yields = 0;
		st->storm_spin_ns = 0;
		st->storm_via = via;
	}
	st->yields++;
	st->storm_yields++;
	st->last_yield_ns = now;
	if (st->storm_yields != SCHED_YIELD_STACK_FIRST &&
	    st->storm_yields % SCHED_YIELD_STACK_EVERY)
		return;
	if (!sample_cpu_stack(now) || !(dump = ustack_dump()))
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

/*
 * @prev yielded its CPU to @next: @next is the thread it likely waits for, and the time
 * @prev was on CPU up to the yield was spent spinning (with whatever little it did before
 * it began to).
 */
static __always_inline void yielded(struct sched_thread *st, struct task_struct *prev,
				    struct task_struct *next, __u64 now, __u64 oncpu)
{
	struct sched_peer_key key = { .tid = prev->pid, .peer = next->pid };
	struct sched_thread *nst;
	struct sched_peer *p;

	if (!yield_at_entry)
		yield_count(st, prev, now, LS_POLL_NONE);
	st->yield_spin_ns += oncpu;
	st->storm_spin_ns += oncpu;
	nst = next->pid ? bpf_map_lookup_elem(&threads, &key.peer) : NULL;
	p = bpf_map_lookup_elem(&peers, &key);
	if (!p) {
		bpf_map_update_elem(&peers, &key, &empty_peer, BPF_NOEXIST);
		p = bpf_map_lookup_elem(&peers, &key);
	}
	if (p) {
		p->yields++;
		p->preempted += nst && (nst->flags & SCHED_TF_PREEMPTED);
	}
}

/* Starts the baseline period anew once a period has passed: the two newest are kept. */
static __always_inline void baseline(struct sched_thread *st, struct task_struct *t, __u64 now)
{
	if (st->ref_ns[1] && now - st->ref_ns[1] < SCHED_BASE_PERIOD_NS)
		return;
	st->ref_ns[0] = st->ref_ns[1] ? st->ref_ns[1] : now;
	st->ref_events[0] = st->ref_ns[1] ? st->ref_events[1] : sched_events(t);
	st->ref_ns[1] = now;
	st->ref_events[1] = sched_events(t);
}

static __always_inline bool stopping(struct task_struct *prev, unsigned int prev_state)
{
	return (prev_state & TASK_STOP_MASK) || (prev->jobctl & JOBCTL_TRAP_FREEZE);
}

/* @prev stops: its rate until now is the baseline a burst after the resume is held to. */
static __always_inline void stopped(struct sched_thread *st, struct task_struct *prev, __u64 now)
{
	struct sched_stop s = {};
	__u32 tid = prev->pid;

	s.stop_ns = bpf_ktime_get_boot_ns();
	s.stop_events = sched_events(prev);
	if (st->ref_ns[0] && now > st->ref_ns[0]) {
		s.base_events = s.stop_events - st->ref_events[0];
		s.base_ns = now - st->ref_ns[0];
	}
	if (bpf_map_update_elem(&stops, &tid, &s, BPF_ANY)) {
		ls_count(LS_DROP_STOPS_FULL);
		return;
	}
	st->flags |= SCHED_TF_STOPPED;
	st->flags &= ~SCHED_TF_RESUMED;
}

static __always_inline void resumed(struct sched_thread *st, struct task_struct *next)
{
	__u32 tid = next->pid;
	struct sched_stop *s = bpf_map_lookup_elem(&stops, &tid);

	st->flags &= ~SCHED_TF_STOPPED;
	if (!s)
		return;
	s->resume_ns = bpf_ktime_get_boot_ns();
	if (s->resume_ns - s->stop_ns < SCHED_STOP_MIN_NS) {
		bpf_map_delete_elem(&stops, &tid);
		return;
	}
	s->resume_events = s->window_events = sched_events(next);
	st->flags |= SCHED_TF_RESUMED;
}

static __always_inline void report_resume(struct sched_stop *s, struct task_struct *t)
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
	r->base_events = s->base_events;
	r->base_ns = s->base_ns;
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
static __always_inline void resume_window(struct sched_thread *st, struct task_struct *t,
					  bool out)
{
	__u32 tid = t->pid;
	struct sched_stop *s = bpf_map_lookup_elem(&stops, &tid);
	__u64 now = bpf_ktime_get_boot_ns();

	if (!s) {
		st->flags &= ~SCHED_TF_RESUMED;
		return;
	}
	if (now - s->resume_ns <= SCHED_BURST_WINDOW_NS) {
		if (!out)
			return;
		s->window_events = sched_events(t);
		s->window_ns = now - s->resume_ns;
		if (!s->stack_dump && s->window_events - s->resume_events >= SCHED_BURST_STACK_EVENTS &&
		    sample_cpu_stack(bpf_ktime_get_ns()))
			s->stack_dump = ustack_dump();
		return;
	}
	report_resume(s, t);
	bpf_map_delete_elem(&stops, &tid);
	st->flags &= ~SCHED_TF_RESUMED;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns(), oncpu;
	struct sched_thread *st;

	if (!enabled)
		return 0;
	/* the idle task is not a thread of anyone's */
	if (prev->pid && ls_tgid_wanted(prev->tgid) && (st = thread_get(prev))) {
		oncpu = account(st, now);
		/* comm changes (exec, pthread_setname_np): keep the latest, 16 bytes */
		__builtin_memcpy(st->comm, prev->comm, sizeof(st->comm));
		if (st->flags & SCHED_TF_RESUMED)
			resume_window(st, prev, true);
		if (!preempt && prev_state != TASK_RUNNING) {
			st->voluntary++;
			st->state = SCHED_T_BLOCKED;
			st->flags &= ~(SCHED_TF_PREEMPTED | SCHED_TF_YIELDED);
			if (stopping(prev, prev_state))
				stopped(st, prev, now);
			else if (is_zero_sleep(prev)) {	/* a yield by another name */
				yield_count(st, prev, now, LS_POLL_SLEEP);
				st->storm_spin_ns += oncpu;
			}
		} else {
			st->involuntary++;
			st->state = SCHED_T_RUNNABLE;
			if (!preempt && is_yield(prev)) {
				yielded(st, prev, next, now, oncpu);
				st->flags = (st->flags & ~SCHED_TF_PREEMPTED) | SCHED_TF_YIELDED;
			} else {
				st->flags = (st->flags & ~SCHED_TF_YIELDED) | SCHED_TF_PREEMPTED;
			}
		}
		baseline(st, prev, now);
	}
	if (next->pid && ls_tgid_wanted(next->tgid) && (st = thread_get(next))) {
		account(st, now);
		st->state = SCHED_T_ONCPU;
		if (st->flags & SCHED_TF_STOPPED)
			resumed(st, next);
		else if (st->flags & SCHED_TF_RESUMED)
			resume_window(st, next, false);
	}
	return 0;
}

/*
 * Every call of __schedule(), in the caller's context, before it picks the next task: a
 * register read for everything but yields.
 */
SEC("tp_btf/sched_entry_tp")
int BPF_PROG(sched_entry, bool preempt)
{
	struct task_struct *t;
	struct sched_thread *st;

	if (preempt || !enabled)
		return 0;
	t = bpf_get_current_task_btf();
	if (!is_yield(t) || !ls_tgid_wanted(t->tgid) || !(st = thread_get(t)))
		return 0;
	yield_count(st, t, bpf_ktime_get_ns(), LS_POLL_NONE);
	return 0;
}

static __always_inline void woken(struct task_struct *p)
{
	struct sched_thread *st;

	if (!enabled || !p->pid || !ls_tgid_wanted(p->tgid) || !(st = thread_get(p)))
		return;
	/* a task woken while it still runs (before it switched out) stays on CPU */
	if (st->state == SCHED_T_ONCPU)
		return;
	account(st, bpf_ktime_get_ns());
	st->state = SCHED_T_RUNNABLE;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	woken(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	woken(p);
	return 0;
}

/*
 * The wait @t is in, when it is one that returns at once: poll, select and epoll with a
 * zero timeout. A loop of these spins in the kernel without ever leaving
 * the CPU, so the scheduler hooks never see it; only a sample does. LS_POLL_NONE else.
 */
static __always_inline __u32 busy_poll(struct task_struct *t)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
	long nr = LS_SYSCALL_NR(regs);

	switch (nr) {
	case LS_SYS_POLL:		/* poll(fds, nfds, int timeout_ms) */
		return (int)PT_REGS_PARM3_CORE_SYSCALL(regs) == 0 ? LS_POLL_POLL : LS_POLL_NONE;
	case LS_SYS_PPOLL:		/* ppoll(fds, nfds, const struct timespec *tsp, ...) */
		return zero_time(PT_REGS_PARM3_CORE_SYSCALL(regs)) ? LS_POLL_POLL : LS_POLL_NONE;
	case LS_SYS_SELECT:		/* select(n, r, w, e, struct timeval *tvp) */
	case LS_SYS_PSELECT6:		/* pselect6(n, r, w, e, struct timespec *tsp, ...) */
		return zero_time(PT_REGS_PARM5_CORE_SYSCALL(regs)) ? LS_POLL_SELECT : LS_POLL_NONE;
	case LS_SYS_EPOLL_WAIT:		/* epoll_wait(epfd, events, maxevents, int timeout_ms) */
	case LS_SYS_EPOLL_PWAIT:
		return (int)PT_REGS_PARM4_CORE_SYSCALL(regs) == 0 ? LS_POLL_EPOLL : LS_POLL_NONE;
	case LS_SYS_EPOLL_PWAIT2:	/* epoll_pwait2(epfd, events, maxevents, struct timespec *) */
		return zero_time(PT_REGS_PARM4_CORE_SYSCALL(regs)) ? LS_POLL_EPOLL : LS_POLL_NONE;
	default:	/* zero sleeps do switch out (the timer slack): sched_switch counts them */
		return LS_POLL_NONE;
	}
}

/*
 * cpu-clock sampling, every CPU, always on at a low rate: counts the thread's samples,
 * those whose user code is a spin loop (its spin share) and those inside a wait that
 * returns at once (its busy-poll share). Either kind takes the user stack (the loop's
 * caller) within the CPU's dump budget.
 */
SEC("perf_event")
int cpu_sample(struct bpf_perf_event_data *ctx)
{
	struct task_struct *t = bpf_get_current_task_btf();
	bool user = LS_USER_MODE(&ctx->regs);
	__u64 ip = PT_REGS_IP(&ctx->regs), dump = 0;
	struct sched_spin_rec *r;
	struct sched_thread *st;
	__u32 flags, poll;
	void *rb;

	if (!t->pid || !ls_tgid_wanted(t->tgid) || !(st = thread_get(t)))
		return 0;
	st->samples++;
	if (user) {
		/* user spin loops only: a kernel spinlock's waits are klock's, timed exactly */
		if (!ls_spinning_at(ip))
			return 0;
		st->spin_samples++;
		flags = 0;
	} else {
		/* in the kernel on behalf of a process: in a wait that returns at once? */
		if (!t->mm || (poll = busy_poll(t)) == LS_POLL_NONE)
			return 0;
		st->poll_samples++;
		st->poll_nr = poll;
		ip = PT_REGS_IP_CORE((struct pt_regs *)bpf_task_pt_regs(t));
		flags = SCHED_RF_POLL;
	}
	ls_count(LS_CNT_SPIN_SAMPLES);
	if (!t->mm || !sample_cpu_stack(bpf_ktime_get_ns()) || !(dump = ustack_dump())) {
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
	ls_submit(rb, r);
	return 0;
}

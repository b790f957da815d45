/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * schedstat: per-thread scheduling, counted in BPF and read by the daemon (no ring records:
 * a switch storm must not become a record storm). Shared by sched.bpf.c and the daemon.
 */
#ifndef __SCHEDSTAT_H
#define __SCHEDSTAT_H

#include "lockscope.h"

/* Where a thread is, as far as the last event we saw says. */
enum sched_tstate {
	SCHED_T_UNKNOWN,	/* first seen: its time so far is not counted */
	SCHED_T_ONCPU,
	SCHED_T_BLOCKED,	/* switched out asleep (a voluntary switch) */
	SCHED_T_RUNNABLE,	/* preempted, yielded or woken: waiting in a run queue */
};

/* What a thread's last switches were; kept in struct sched_thread.flags. */
enum sched_thread_flags {
	SCHED_TF_PREEMPTED	= 1U << 0,	/* last switched out by preemption */
	SCHED_TF_YIELDED	= 1U << 1,	/* last switched out by sched_yield() */
	SCHED_TF_STOPPED	= 1U << 2,	/* stopped, traced or frozen: an entry in stops */
	SCHED_TF_RESUMED	= 1U << 3,	/* in the window after a stop: events counted */
};

/*
 * One per thread, updated on sched_switch and sched_wakeup(_new). The switch counts are
 * the kernel's own rule (kernel/sched/core.c __schedule): a switch is voluntary when the
 * task was not preempted and its state was not TASK_RUNNING, as /proc's
 * voluntary_ctxt_switches counts it; everything else (preemption, sched_yield) is
 * involuntary.
 */
struct sched_thread {
	__u64 voluntary;
	__u64 involuntary;
	__u64 oncpu_ns;
	__u64 blocked_ns;	/* off CPU, asleep */
	__u64 runq_ns;		/* off CPU, runnable: run-queue latency */
	__u64 last_ns;		/* when state began */
	/*
	 * Yield spinning: sched_yield() calls, all of them where the kernel has the
	 * sched_entry_tp tracepoint (6.16+), else those that switched to another thread;
	 * and zero sleeps (nanosleep(0)), which always switch.
	 */
	__u64 yields;
	__u64 yield_spin_ns;	/* on CPU from each switch-in to a yield that switched */
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
	/*
	 * Event count (sched_events()) at the starts of the last two baseline periods: the
	 * thread's own rate before a stop, for burst detection.
	 */
	__u64 ref_ns[2];
	__u64 ref_events[2];
	__u32 tgid;
	__u32 state;		/* enum sched_tstate */
	__u32 flags;		/* enum sched_thread_flags */
	__u32 poll_nr;		/* the syscall of its last busy-poll sample (enum ls_poll_call) */
	/*
	 * What the current storm calls: sched_yield (LS_POLL_NONE) or a zero sleep
	 * (LS_POLL_SLEEP), which with the default 50 us timer slack does switch out
	 */
	__u32 storm_via;
	__u32 pad;
	char comm[LS_COMM_LEN];
};

/* The waits that return at once when their timeout is zero, as poll_nr names them. */
enum ls_poll_call {
	LS_POLL_NONE,
	LS_POLL_POLL,		/* poll(2), ppoll(2) */
	LS_POLL_SELECT,		/* select(2), pselect6(2) */
	LS_POLL_EPOLL,		/* epoll_wait(2), epoll_pwait(2), epoll_pwait2(2) */
	LS_POLL_SLEEP,		/* nanosleep(2), relative clock_nanosleep(2): storm_via only */
};

/* A thread a sched_yield() storm yielded to: the one it is probably waiting for. */
struct sched_peer_key {
	__u32 tid;		/* the yielding thread */
	__u32 peer;		/* the thread its yield switched to */
};

struct sched_peer {
	__u64 yields;
	__u64 preempted;	/* yields where the peer had last been switched out by preemption */
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
	__u64 base_events;	/* events in the baseline period before the stop */
	__u64 base_ns;		/* that period's length */
	__u64 resume_events;	/* sched_events() when it resumed */
	__u64 window_events;	/* events in the window after the resume, so far */
	__u64 window_ns;	/* when they were last counted, after the resume */
	__u64 stack_dump;	/* a user stack dump taken in the window, 0 if none */
};

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
	__u64 base_events;	/* events in the baseline period before the stop */
	__u64 base_ns;
	__u64 stack_dump;
	__u32 rec_flags;
	__u32 pad;
	char comm[LS_COMM_LEN];
};

enum sched_defaults {
	SCHED_DEF_MAX_THREADS	= 32768,
	SCHED_DEF_MAX_PEERS	= 4096,		/* (yielder, peer) pairs */
	SCHED_DEF_MAX_STOPS	= 1024,		/* threads stopped at once */
	/*
	 * spin samples/s per CPU: prime, and no simple ratio to the common HZ (100, 250,
	 * 300, 1000), so sampling does not lock onto the tick that preempts lock holders
	 */
	SCHED_DEF_SPIN_FREQ	= 173,
	SCHED_DEF_STACK_BYTES	= 16384,	/* dump window: event loops keep big arrays on the stack */
	/* the storm's second yield and every 1024th after it carry the site's stack */
	SCHED_YIELD_STACK_FIRST	= 2,
	SCHED_YIELD_STACK_EVERY	= 1024,
};

/* Times, in nanoseconds. */
#define SCHED_STORM_GAP_NS	1000000000ULL	/* a pause this long ends a yield storm */
#define SCHED_BASE_PERIOD_NS	1000000000ULL	/* baseline period of a thread's event rate */
#define SCHED_BURST_WINDOW_NS	100000000ULL	/* events counted this long after a resume */
#define SCHED_STOP_MIN_NS	100000000ULL	/* shorter stops (a tracer's syscall stops) are not reported */
/* a burst's stack is taken once this many events followed the resume */
#define SCHED_BURST_STACK_EVENTS 64

#endif /* __SCHEDSTAT_H */

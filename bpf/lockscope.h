/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every lockscope BPF component and user space share: the ring-buffer record header,
 * the counters every program keeps, and the limits both sides size their buffers with.
 * Fixed-width fields only: this header is compiled for the BPF target and for the host.
 */
#ifndef __LOCKSCOPE_H
#define __LOCKSCOPE_H

#ifndef __VMLINUX_H__
#include <linux/types.h>	/* BPF programs get the __u* types from vmlinux.h */
#endif

/*
 * The deepest stack any program records. 127 is the kernel's PERF_MAX_STACK_DEPTH; the
 * daemon asks for fewer (config max_stack) and sizes the stack map's values accordingly.
 */
#define LS_MAX_STACK_DEPTH	127
#define LS_COMM_LEN		16

/* Defaults every component sizes its stack sampler with (see sampling.bpf.h). */
enum ls_defaults {
	LS_DEF_MAX_LOCKS	= 8192,		/* stack sampler buckets (a power of two) */
	LS_DEF_STACK_RATE	= 200,		/* stacks/s per lock per CPU before sampling */
};

/* Every ring-buffer record starts with this tag so one handler can dispatch. */
enum ls_rec_type {
	LS_REC_KLOCK_WAIT = 1,	/* struct klock_wait_rec, see klock.h */
	LS_REC_ULOCK_WAIT,	/* struct ulock_wait_rec, see ulock.h */
	LS_REC_ULOCK_HOLD,	/* struct ulock_hold_rec: a sample of a lock holder on CPU */
	LS_REC_USTACK,		/* struct ls_ustack_rec: registers and stack to unwind, see ustack.h */
	LS_REC_SCHED_YIELD,	/* struct sched_yield_rec: a yield storm's site, see schedstat.h */
	LS_REC_SCHED_SPIN,	/* struct sched_spin_rec: a sample in a spin loop */
	LS_REC_SCHED_RESUME,	/* struct sched_resume_rec: a stop and the events after it */
	LS_REC_ULOCK_PREEMPT,	/* struct ulock_preempt_rec: a lock holder preempted, see ulock.h */
};

struct ls_rec_hdr {
	__u16 type;	/* enum ls_rec_type */
	__u16 size;	/* bytes of the whole record, header included */
	__u32 cpu;	/* CPU the record was written on */
};

/*
 * Per-CPU event and failure counters, one PERCPU_ARRAY slot each. Everything a program
 * fails to record lands in one of the LS_DROP_* slots; the daemon reports all of them.
 */
enum ls_counter {
	LS_CNT_BEGIN,		/* contention_begin seen (after filters) */
	LS_CNT_WAIT,		/* completed waits recorded */
	LS_CNT_STACKED,		/* waits that carried a waiter stack */
	LS_CNT_SAMPLED_OUT,	/* waits where sampling chose not to take a stack */
	LS_CNT_OWNER_STACKED,	/* waits that carried an owner stack */
	LS_CNT_CONTINUED,	/* begin on the lock already waited for (mutex spin -> sleep) */
	LS_CNT_RB_WAKEUPS,	/* records submitted with a forced ring-buffer wakeup */
	LS_CNT_OWNER_ON_CPU,	/* owner was running: another CPU's stack cannot be walked */
	LS_CNT_NESTED,		/* waits that began while another was open in the same slot */
	LS_CNT_UBEGIN,		/* futex waits that blocked (after filters) */
	LS_CNT_UWAIT,		/* futex waits recorded */
	LS_CNT_USTACKED,	/* futex waits that carried a waiter user stack */
	LS_CNT_USAMPLED_OUT,	/* futex waits where sampling chose not to take a stack */
	LS_CNT_URELEASER,	/* futex waits whose waker was a thread in futex(WAKE...) */
	LS_CNT_UNONBLOCK,	/* precise mode: futex wait calls that returned without sleeping */
	LS_CNT_HOLDERS,		/* holders noted for sampling (owner of a contended lock) */
	LS_CNT_HOLD_SAMPLES,	/* cpu-clock samples that found a thread holding its lock */
	LS_CNT_HOLD_RELEASED,	/* cpu-clock samples of a noted holder that no longer held it */
	LS_CNT_HOLD_THROTTLED,	/* holder samples skipped: the CPU's stack dump budget was spent */
	LS_CNT_UDUMPS,		/* user stack dumps written (also each CPU's dump id sequence) */
	LS_CNT_UDUMP_SHORT,	/* dumps whose window stopped early at an unmapped page */
	LS_CNT_SPIN_SAMPLES,	/* cpu-clock samples that found a thread in a spin loop or busy poll */
	LS_CNT_SPIN_UNSTACKED,	/* spin samples without a stack: the CPU's dump budget was spent */
	LS_CNT_YIELD_SITES,	/* yield storm sites recorded */
	LS_CNT_RESUMES,		/* resumes after a stop reported */
	LS_CNT_HOLDER_PREEMPT,	/* holders of a contended user lock preempted while others waited */
	LS_CNT_KHOLDERS,	/* owners of a contended kernel lock noted for the switch check */
	LS_CNT_KHOLDER_PREEMPT,	/* owners of a contended kernel lock preempted while others waited */

	LS_DROP_FIRST,
	LS_DROP_RINGBUF = LS_DROP_FIRST,	/* ring buffer full: record lost */
	LS_DROP_SLOT_FULL,	/* per-thread wait map full: wait not timed */
	LS_DROP_NEST_DEPTH,	/* nesting deeper than the slot holds: inner wait not timed */
	LS_DROP_UNMATCHED_END,	/* contention_end without a begin we saw */
	LS_DROP_STACK_COLLISION,/* stack map bucket holds another stack (-EEXIST) */
	LS_DROP_STACK_FAILED,	/* stack map full or the walk failed */
	LS_DROP_OWNER_STACK,	/* owner stack wanted but not captured */
	LS_DROP_MISSED_END,	/* a wait whose end the kernel skipped (see prog_recursion) was
				 * found open and discarded, not timed */
	LS_DROP_USLOT_FULL,	/* per-thread futex wait map full: wait not timed */
	LS_DROP_USTACK_FAILED,	/* user stack wanted but not captured (no frame pointers,
				 * page not present, stack map full or collision) */
	LS_DROP_UNREADABLE,	/* the futex word's neighbourhood could not be read: no owner */
	LS_DROP_UDUMP_FAILED,	/* user stack dump wanted but the stack page was not present */
	LS_DROP_SCHED_FULL,	/* per-thread scheduling map full: a thread's switches not counted */
	LS_DROP_STOPS_FULL,	/* stopped-thread map full: a stop and its burst not reported */
	LS_DROP_SELF_LOCK,	/* a kernel lock contended inside lockscope's own programs (a
				 * map's bucket lock): not timed, as its begin or end is skipped */
	LS_DROP_LAST,

	LS_CNT_MAX = LS_DROP_LAST,
};

#endif /* __LOCKSCOPE_H */

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * klock: kernel lock contention from lock:contention_begin/end. Shared by klock.bpf.c and
 * the daemon; see lockscope.h for what all components share.
 */
#ifndef __KLOCK_H
#define __KLOCK_H

#include "lockscope.h"

/*
 * Lock kinds as the kernel passes them to contention_begin (LCB_F_* in
 * include/trace/events/lock.h). Copied as values because the kernel has them only as
 * macros, which BTF does not carry.
 */
enum klock_lcb_flags {
	KLOCK_F_SPIN	= 1U << 0,
	KLOCK_F_READ	= 1U << 1,
	KLOCK_F_WRITE	= 1U << 2,
	KLOCK_F_RT	= 1U << 3,
	KLOCK_F_PERCPU	= 1U << 4,
	KLOCK_F_MUTEX	= 1U << 5,
};

/* What the BPF side learnt about one wait, beyond the kernel's flags. */
enum klock_rec_flags {
	KLOCK_RF_MMAP_LOCK	= 1U << 0,	/* lock is current->mm->mmap_lock */
	KLOCK_RF_SIGLOCK	= 1U << 1,	/* lock is current->sighand->siglock */
	KLOCK_RF_OWNER		= 1U << 2,	/* owner_* fields are valid */
	KLOCK_RF_STACK		= 1U << 3,	/* stack_id is valid */
	KLOCK_RF_OWNER_STACK	= 1U << 4,	/* owner_ips[0..owner_nr) follow */
	KLOCK_RF_SPINNING	= 1U << 5,	/* timed in the per-CPU slot */
	KLOCK_RF_NESTED		= 1U << 6,	/* began while another wait was open */
	KLOCK_RF_SAMPLED	= 1U << 7,	/* the sampler wanted stacks for this wait */
	KLOCK_RF_RESPIN		= 1U << 8,	/* a woken mutex waiter spins again (see respin()) */
};

/*
 * Waits one slot can hold open at once. Per-CPU slots nest as task context, softirq,
 * hardirq and NMI each spin on another lock; a thread's slot holds one sleeping wait
 * plus room for a continued one.
 */
#define KLOCK_NEST_MAX		4
/* count_done_waits' return: the CPU was inside one of our programs; ask again */
#define KLOCK_DRAIN_BUSY	1
/* Owner stacks are copied into the record, so keep them short. */
#define KLOCK_OWNER_STACK_DEPTH	32

struct klock_wait_rec {
	struct ls_rec_hdr hdr;
	__u64 lock_addr;
	__u64 end_ns;		/* bpf_ktime_get_ns() at contention_end */
	__u64 wait_ns;
	__u32 pid;		/* waiter tgid */
	__u32 tid;
	__u32 lcb_flags;	/* enum klock_lcb_flags */
	__u32 rec_flags;	/* enum klock_rec_flags */
	__s32 stack_id;		/* waiter kernel stack in the stack map (at begin), < 0 when none */
	__u32 pad;
	__u32 owner_pid;
	__u32 owner_tid;
	char comm[LS_COMM_LEN];
	char owner_comm[LS_COMM_LEN];
	__u32 nest;		/* waits already open in the slot when this one began */
	__u32 owner_nr;		/* frames in owner_ips */
	/* present only with KLOCK_RF_OWNER_STACK; hdr.size tells */
	__u64 owner_ips[KLOCK_OWNER_STACK_DEPTH];
};

#define KLOCK_WAIT_REC_MIN_SIZE __builtin_offsetof(struct klock_wait_rec, owner_ips)

/*
 * A wait between its begin and its end, in a slot: a CPU's (spinning locks) or a
 * thread's (sleeping locks); once ended, in a CPU's slot until it is counted (its done
 * mask). The daemon frees slot_cache entries (owner). One cache line.
 */
struct klock_pending {
	__u64 lock;
	union {
		__u64 begin_ns;	/* while open */
		__u64 wait_ns;	/* once ended */
	};
	__u32 lcb_flags;
	__u32 rec_flags;
	__u32 nest;
	__u32 tid;	/* the waiter: a CPU slot may hold the wait of a task that left it */
	__u32 owner_pid;
	__u32 owner_tid;
	/*
	 * The owner's and the waiter's tasks: their names are read only where they are kept
	 * (a new table entry, a sampled record), not on every wait
	 */
	__u64 owner_task;
	__u64 task;
	__u32 pid;	/* the waiter's tgid */
	/*
	 * KLOCK_RF_STACK: the waiter's kernel stack, taken at the begin of a sampled wait.
	 * Not at its end, which runs inside the critical section: there a stack (2 to 35 us
	 * here) held up every other waiter of the lock.
	 */
	__s32 stack_id;
};

struct klock_slot {
	__u32 depth;
	__u32 busy;	/* cpu slot: one of our programs runs on this CPU (see guard_enter()) */
	/* a slot_cache entry: the thread that claimed it; 0: free (the daemon frees it) */
	__u32 owner;
	/* cpu slot: e[i] at or above depth ended and is not counted yet (bit i; count_done()) */
	__u32 done;
	struct klock_pending e[KLOCK_NEST_MAX];
};

/* Defaults the daemon sizes maps with when the config says nothing. */
enum klock_defaults {
	KLOCK_DEF_MAX_THREADS	= 16384,	/* threads that waited on a sleeping lock */
	KLOCK_DEF_STACK_ENTRIES	= 16384,	/* distinct waiter stacks */
	KLOCK_DEF_OWNER_STACKS	= 1024,		/* owner stacks waiting for their wait's end */
	KLOCK_DEF_MAX_HOLDERS	= 4096,		/* owners noted for the preemption check */
	KLOCK_SLOT_CACHE	= 4096,		/* thread slots in the direct-mapped array (a power of 2) */
};

#endif /* __KLOCK_H */

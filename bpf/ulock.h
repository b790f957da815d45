/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ulock: user-space lock contention, i.e. futex waits that block. Shared by ulock.bpf.c
 * and the daemon; see lockscope.h for what all components share.
 */
#ifndef __ULOCK_H
#define __ULOCK_H

#include "lockscope.h"

/*
 * futex(2) commands and flags (include/uapi/linux/futex.h), copied as values because the
 * kernel has them only as macros, which BTF does not carry.
 */
enum ulock_futex_cmd {
	ULOCK_FUTEX_WAIT		= 0,
	ULOCK_FUTEX_WAKE		= 1,
	ULOCK_FUTEX_REQUEUE		= 3,
	ULOCK_FUTEX_CMP_REQUEUE		= 4,
	ULOCK_FUTEX_WAKE_OP		= 5,
	ULOCK_FUTEX_LOCK_PI		= 6,
	ULOCK_FUTEX_UNLOCK_PI		= 7,
	ULOCK_FUTEX_TRYLOCK_PI		= 8,
	ULOCK_FUTEX_WAIT_BITSET		= 9,
	ULOCK_FUTEX_WAKE_BITSET		= 10,
	ULOCK_FUTEX_WAIT_REQUEUE_PI	= 11,
	ULOCK_FUTEX_CMP_REQUEUE_PI	= 12,
	ULOCK_FUTEX_LOCK_PI2		= 13,
	/* not a futex(2) command: the futex_waitv(2) syscall, first futex of the vector */
	ULOCK_FUTEX_WAITV		= 1 << 16,
};

enum ulock_futex_flags {
	ULOCK_FUTEX_PRIVATE	= 128,	/* FUTEX_PRIVATE_FLAG: the word is process-private */
	ULOCK_FUTEX_CLOCK_RT	= 256,	/* FUTEX_CLOCK_REALTIME */
	ULOCK_FUTEX_CMD_MASK	= ~(ULOCK_FUTEX_PRIVATE | ULOCK_FUTEX_CLOCK_RT),
	ULOCK_FUTEX_TID_MASK	= 0x3fffffff,	/* PI futex word: owner tid in the low bits */
};

/*
 * glibc's pthread_mutex_t (x86-64, aarch64): the futex word `__lock` at offset 0 and the
 * owner's tid `__owner` at offset 8 (sysdeps/nptl/bits/struct_mutex.h). __lock is 2 while
 * the mutex is locked with waiters, the value lll_lock_wait sleeps on.
 */
enum ulock_glibc_layout {
	ULOCK_MUTEX_OWNER_OFF	= 8,
	ULOCK_LOCKED_WAITERS	= 2,
	ULOCK_FUTEX_WAITERS	= 0x80000000,	/* PI futex word: someone waits */
};

/* What the BPF side learnt about one futex wait. */
enum ulock_rec_flags {
	ULOCK_RF_SHARED		= 1U << 0,	/* no FUTEX_PRIVATE_FLAG: may be shared across processes */
	ULOCK_RF_STACK		= 1U << 1,	/* stack_id is valid */
	ULOCK_RF_SAMPLED	= 1U << 2,	/* the sampler wanted stacks for this wait */
	ULOCK_RF_RELEASER	= 1U << 3,	/* releaser_* fields are valid */
	ULOCK_RF_RELEASER_STACK	= 1U << 4,	/* releaser_stack_id is valid */
	ULOCK_RF_PRECISE	= 1U << 5,	/* timed from sys_enter to sys_exit (precise mode) */
	ULOCK_RF_BLOCKED	= 1U << 6,	/* the call slept (always set in switch mode) */
	ULOCK_RF_WORDS		= 1U << 7,	/* word0 and word8 were read */
	ULOCK_RF_HOLDER		= 1U << 8,	/* the owner was noted for holder sampling */
	ULOCK_RF_DUMP		= 1U << 9,	/* stack_dump names a dump to unwind (ustack.h) */
	ULOCK_RF_RELEASER_DUMP	= 1U << 10,	/* releaser_dump names a dump to unwind */
};

/* How a noted holder is checked: where its tid sits relative to the futex word. */
enum ulock_holder_kind {
	ULOCK_HOLDER_MUTEX = 1,	/* glibc mutex: tid at word + ULOCK_MUTEX_OWNER_OFF */
	ULOCK_HOLDER_PI,	/* PI futex: tid in the word itself */
	ULOCK_HOLDER_KERNEL,	/* a kernel sleeping lock (preemption records only; see kowner.bpf.h) */
};

struct ulock_wait_rec {
	struct ls_rec_hdr hdr;
	__u64 uaddr;		/* the futex word, in the waiter's address space */
	__u64 end_ns;
	__u64 wait_ns;
	__u32 pid;
	__u32 tid;
	__u32 op;		/* futex(2) op as passed (command | flags), or ULOCK_FUTEX_WAITV */
	__u32 val;		/* the value the waiter expected the word to hold */
	__u32 word0;		/* the word at uaddr when the wait began */
	__u32 word8;		/* the word at uaddr + 8: glibc mutex __owner */
	__u32 rec_flags;	/* enum ulock_rec_flags */
	__s32 ret;		/* precise mode: the syscall's return value */
	__s32 stack_id;		/* waiter user stack in ustacks, < 0 when none */
	__s32 releaser_stack_id;
	__u64 stack_dump;	/* waiter stack dump id (ULOCK_RF_DUMP), instead of stack_id */
	__u64 releaser_dump;	/* releaser stack dump id (ULOCK_RF_RELEASER_DUMP) */
	__u32 releaser_pid;
	__u32 releaser_tid;
	char comm[LS_COMM_LEN];
	char releaser_comm[LS_COMM_LEN];
};

/* One cpu-clock sample of a thread while it held a lock others were waiting for. */
struct ulock_hold_rec {
	struct ls_rec_hdr hdr;
	__u64 uaddr;
	__u32 pid;
	__u32 tid;
	__s32 stack_id;		/* holder user stack in ustacks, < 0 when none */
	__u32 kind;		/* enum ulock_holder_kind */
	__u32 rec_flags;	/* ULOCK_RF_SHARED as the waiter saw the word; ULOCK_RF_STACK or _DUMP */
	__u32 pad;
	__u64 stack_dump;	/* holder stack dump id (ULOCK_RF_DUMP), instead of stack_id */
	char comm[LS_COMM_LEN];
};

/*
 * A thread that held a contended lock was switched out involuntarily (preempted) while
 * others waited for it: the waiters wait for its whole time in the run queue too.
 * Written when it runs again. Kernel locks (ULOCK_HOLDER_KERNEL) come through here as
 * well: this component's switch program is the one that sees involuntary switches.
 */
struct ulock_preempt_rec {
	struct ls_rec_hdr hdr;
	__u64 uaddr;		/* the lock: a user address, or a kernel one for ULOCK_HOLDER_KERNEL */
	__u64 preempted_ns;	/* from the switch out to the switch back in */
	__u32 pid;
	__u32 tid;
	__u32 kind;		/* enum ulock_holder_kind */
	__u32 rec_flags;	/* user: ULOCK_RF_SHARED as the waiter saw the word;
				 * kernel: the lock's enum klock_lcb_flags */
	char comm[LS_COMM_LEN];
};

/* Defaults the daemon sizes maps with when the config says nothing. */
enum ulock_defaults {
	ULOCK_DEF_MAX_THREADS	= 16384,	/* threads that blocked on a futex */
	ULOCK_DEF_STACK_ENTRIES	= 16384,	/* distinct user stacks */
	ULOCK_DEF_MAX_HOLDERS	= 4096,		/* holders noted for sampling at once */
	ULOCK_DEF_HOLD_FREQ	= 997,		/* holder samples/s per CPU (prime: no lockstep) */
	ULOCK_DEF_PRECISE_PIDS	= 64,		/* processes in precise (syscall) mode at once */
};

#endif /* __ULOCK_H */

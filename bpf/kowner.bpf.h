/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Who owns a kernel sleeping lock, read from the lock itself, and the map of owners that
 * some waiter named. klock notes an owner at contention_begin; ulock's sched_switch
 * program, which already looks at every involuntary switch for user-lock holders, checks
 * the switched-out task against this map for kernel locks. Both objects declare the map
 * under the same name and the daemon hands ulock the fd klock created.
 */
#ifndef __LS_KOWNER_BPF_H
#define __LS_KOWNER_BPF_H

#include "klock.h"

/*
 * Low bits of the owner words are flags (MUTEX_FLAGS, RWSEM_OWNER_FLAGS_MASK,
 * RT_MUTEX_HAS_WAITERS); task_structs are cache-line aligned, so clearing 3 bits is safe
 * on every layout. Copied as values: the kernel has them only as macros.
 */
#define KOWNER_FLAGS_MASK	0x7UL
#define KOWNER_MUTEX_WAITERS	0x1UL		/* MUTEX_FLAG_WAITERS in mutex.owner */
#define KOWNER_RT_WAITERS	0x1UL		/* RT_MUTEX_HAS_WAITERS in rt_mutex_base.owner */
#define KOWNER_RWSEM_READER	0x1UL		/* RWSEM_READER_OWNED in rw_semaphore.owner */
#define KOWNER_RWSEM_WAITERS	0x2UL		/* RWSEM_FLAG_WAITERS in rw_semaphore.count */

/* Layouts of the owner word: a plain kernel, and PREEMPT_RT where mutex and rwsem are
 * built on rt_mutex_base. */
struct mutex___plain {
	atomic_long_t owner;
	struct list_head wait_list;
} __attribute__((preserve_access_index));

struct mutex_waiter___plain {
	struct list_head list;
	struct task_struct *task;
} __attribute__((preserve_access_index));

struct mutex___rt {
	struct rt_mutex_base rtmutex;
} __attribute__((preserve_access_index));

struct rw_semaphore___plain {
	atomic_long_t count;
	atomic_long_t owner;
} __attribute__((preserve_access_index));

struct rwbase_rt___rt {
	struct rt_mutex_base rtmutex;
} __attribute__((preserve_access_index));

struct rw_semaphore___rt {
	struct rwbase_rt___rt rwbase;
} __attribute__((preserve_access_index));

/* An owner some waiter named: which lock, of which kind (enum klock_lcb_flags). */
struct kholder {
	__u64 lock;
	__u32 lcb_flags;
	__u32 tid;		/* the owner's; 0: a free entry */
};

/*
 * Indexed by the owner's tid's low bits (kholders_mask), each entry tagged with its tid;
 * an owner whose entry another one took is noted again at the next wait that names it.
 * An array, not a hash: the switch program looks here at every preemption, of any
 * thread, and an LRU hash's lookup cost it ~40 ns there (ping-pong preempts at every
 * round trip); an array's is one load.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KLOCK_DEF_MAX_HOLDERS);
	__type(key, __u32);
	__type(value, struct kholder);
} kholders SEC(".maps");
/* kholders' max_entries - 1 (a power of 2, set by the daemon in both objects) */
const volatile __u32 kholders_mask = KLOCK_DEF_MAX_HOLDERS - 1;

/* Where owner @tid is noted, or would be: an entry of kholders, whoever it holds now. */
static __always_inline struct kholder *kholder_entry(__u32 tid)
{
	__u32 idx = tid & kholders_mask;

	return bpf_map_lookup_elem(&kholders, &idx);
}

/* @flags name a plain (non-RT) kernel's rw_semaphore, whose owner word is its own. */
static __always_inline bool is_plain_rwsem(__u32 flags)
{
	return !(flags & (KLOCK_F_MUTEX | KLOCK_F_RT | KLOCK_F_SPIN | KLOCK_F_PERCPU)) &&
	       (flags & (KLOCK_F_READ | KLOCK_F_WRITE)) &&
	       bpf_core_field_exists(((struct rw_semaphore___plain *)0)->owner);
}

/*
 * The task that owns the sleeping lock at @lock of kind @flags, NULL when the lock has
 * no single owner (spinlocks, rwlocks, reader-owned or percpu rwsems). *waiters tells
 * whether the lock says others queue for it (optimistic spinners are not counted: they
 * stop spinning once the owner is off its CPU and queue).
 */
static __always_inline struct task_struct *kowner_read(__u64 lock, __u32 flags, bool *waiters)
{
	unsigned long owner = 0, count;

	*waiters = false;
	if (flags & KLOCK_F_MUTEX) {	/* MUTEX|SPIN while spinning: the owner is known too */
		if (bpf_core_field_exists(((struct mutex___plain *)0)->owner)) {
			owner = BPF_CORE_READ((struct mutex___plain *)lock, owner.counter);
			*waiters = owner & KOWNER_MUTEX_WAITERS;
		} else {
			owner = (unsigned long)BPF_CORE_READ((struct mutex___rt *)lock, rtmutex.owner);
			*waiters = owner & KOWNER_RT_WAITERS;
		}
	} else if ((flags & KLOCK_F_RT) && (flags & (KLOCK_F_READ | KLOCK_F_WRITE))) {
		/* PREEMPT_RT rwsem and rwlock_t: an rwbase_rt, whose rt-mutex the writer owns;
		 * the type exists only in RT kernels' BTF */
		if (!bpf_core_type_exists(struct rwbase_rt___rt))
			return NULL;
		owner = (unsigned long)BPF_CORE_READ((struct rwbase_rt___rt *)lock, rtmutex.owner);
		*waiters = owner & KOWNER_RT_WAITERS;
	} else if (flags & KLOCK_F_RT) {
		/* rt_mutex_base: rt-mutexes, and PREEMPT_RT's spinlock_t */
		owner = (unsigned long)BPF_CORE_READ((struct rt_mutex_base *)lock, owner);
		*waiters = owner & KOWNER_RT_WAITERS;
	} else if (flags & (KLOCK_F_SPIN | KLOCK_F_PERCPU)) {
		/* spinlocks and rwlocks have no owner word; percpu-rwsem readers are many */
		return NULL;
	} else if (flags & (KLOCK_F_READ | KLOCK_F_WRITE)) {
		if (bpf_core_field_exists(((struct rw_semaphore___plain *)0)->owner)) {
			owner = BPF_CORE_READ((struct rw_semaphore___plain *)lock, owner.counter);
			/* reader-owned: the word names only the last reader, not an owner */
			if (owner & KOWNER_RWSEM_READER)
				return NULL;
			count = BPF_CORE_READ((struct rw_semaphore___plain *)lock, count.counter);
			*waiters = count & KOWNER_RWSEM_WAITERS;
		} else {
			owner = (unsigned long)BPF_CORE_READ((struct rw_semaphore___rt *)lock,
							     rwbase.rtmutex.owner);
			*waiters = owner & KOWNER_RT_WAITERS;
		}
	}
	return (struct task_struct *)(owner & ~KOWNER_FLAGS_MASK);
}

#endif /* __LS_KOWNER_BPF_H */

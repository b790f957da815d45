// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * klock: time every kernel lock contention (lock:contention_begin -> contention_end) and
 * add it to the wait table (waits.bpf.h): per thread, lock, type and owner, exactly, with
 * no ring record.
 *
 * Stacks are sampled: a kernel stack walk costs ~40x the rest of the program, so each lock
 * has a token bucket that allows stack_rate stacks per second (per CPU) and each CPU a
 * budget of cpu_stack_rate. A wait the sampler picks (KLOCK_RF_SAMPLED) also goes to the
 * ring with its stack; the daemon splits each thread's and lock's exact figures among its
 * callers in proportion to the sample. Under a lock storm the ring thus carries at most
 * the sampling rate, whatever the rate of waits.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "klock.h"
#include "common.bpf.h"
#include "sampling.bpf.h"
#include "kowner.bpf.h"
#include "waits.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define EEXIST			17	/* errno-base.h; vmlinux.h has no macros */
/* A CPU slot's wait taken over by its task on another CPU: no thread has this id. */
#define KLOCK_TID_CLAIMED	(~0U)

/* Spinning waits longer than this are taken for waits whose end we missed: the kernel's
 * soft-lockup detector fires after 20 s, so a real spin never gets near. */
const volatile __u64 spin_stale_ns = 10 * LS_NSEC_PER_SEC;
/* CPUs the per-CPU slots exist for (set by the daemon): the cross-CPU search's bound. */
const volatile __u32 nr_cpus = 1;
/* Note named owners in kholders for ulock's switch program (set when ulock is loaded). */
const volatile bool note_holders = false;

struct klock_pending {
	__u64 lock;
	__u64 begin_ns;
	__u32 lcb_flags;
	__u32 rec_flags;
	__u32 nest;
	__u32 tid;	/* the waiter: a CPU slot may hold the wait of a task that left it */
	__u32 owner_pid;
	__u32 owner_tid;
	/*
	 * The owner's task: its name is read only where it is kept (a new table entry, a
	 * sampled record), not on every wait
	 */
	__u64 owner_task;
};

struct klock_slot {
	__u32 depth;
	__u32 busy;	/* cpu slot: one of our programs runs on this CPU (see guard_enter()) */
	/* cpu slot: the owner this CPU last noted in kholders, to skip noting it again */
	__u64 noted_lock;
	__u32 noted_tid;
	__u32 pad;
	struct klock_pending e[KLOCK_NEST_MAX];
};

/*
 * Sleeping locks (mutex, rwsem, rt-mutex, percpu-rwsem): the waiter sleeps and may wake on
 * another CPU, so the start time is keyed by thread. A preallocated hash, not task
 * storage: an allocation inside a contention hook could recurse into the traced lock.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KLOCK_DEF_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct klock_slot);
} thread_slots SEC(".maps");

/* Spinning locks: the waiter cannot sleep or migrate until it has the lock, so a per-CPU
 * slot is enough, and it nests as interrupts spin on other locks. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct klock_slot);
} cpu_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_STACK_TRACE);
	__uint(max_entries, KLOCK_DEF_STACK_ENTRIES);
	__type(key, __u32);
	__uint(value_size, LS_MAX_STACK_DEPTH * sizeof(__u64));
} stacks SEC(".maps");

struct owner_stack {
	__u32 nr;
	__u32 pad;
	__u64 ips[KLOCK_OWNER_STACK_DEPTH];
};

/* Owner stacks taken at begin, keyed by waiter tid until the wait's end copies them out. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, KLOCK_DEF_OWNER_STACKS);
	__type(key, __u32);
	__type(value, struct owner_stack);
} owner_stacks SEC(".maps");

static const struct klock_slot empty_slot;
static const struct owner_stack empty_owner_stack;

/* Kernels 6.2+; only the *_owner_stack program variants call them. */
extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym __weak;
extern void bpf_task_release(struct task_struct *p) __ksym __weak;
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/*
 * Waits timed in the per-CPU slot: spinlocks and rwlocks, and a mutex's optimistic spin
 * (MUTEX|SPIN), which runs with preemption off: most mutex waits end there, on the same
 * CPU, without a map lookup. One that goes on to sleep (MUTEX) moves to the thread's
 * slot (continue_sleeping()). PREEMPT_RT's spinlock_t is SPIN|RT and sleeps.
 */
static __always_inline bool is_spinning(__u32 flags)
{
	return (flags & KLOCK_F_SPIN) && !(flags & KLOCK_F_RT);
}

static __always_inline bool is_continuation(__u32 old_flags, __u32 new_flags)
{
	return (old_flags & (KLOCK_F_MUTEX | KLOCK_F_SPIN)) == (KLOCK_F_MUTEX | KLOCK_F_SPIN) &&
	       !(new_flags & KLOCK_F_SPIN);
}

static __always_inline struct klock_slot *thread_slot(__u32 tid, bool create)
{
	struct klock_slot *slot = bpf_map_lookup_elem(&thread_slots, &tid);

	if (slot || !create)
		return slot;
	if (bpf_map_update_elem(&thread_slots, &tid, &empty_slot, BPF_NOEXIST))
		return NULL;
	return bpf_map_lookup_elem(&thread_slots, &tid);
}

/* Pushes @e onto @tid's slot (a wait that goes on in a thread's slot); false if it cannot. */
static __always_inline bool thread_push(__u32 tid, const struct klock_pending *e)
{
	struct klock_slot *slot = thread_slot(tid, true);
	__u32 idx;

	if (!slot) {
		ls_count(LS_DROP_SLOT_FULL);
		return false;
	}
	idx = slot->depth;
	if (idx >= KLOCK_NEST_MAX) {
		ls_count(LS_DROP_NEST_DEPTH);
		return false;
	}
	barrier_var(idx);
	slot->e[idx & (KLOCK_NEST_MAX - 1)] = *e;
	slot->e[idx & (KLOCK_NEST_MAX - 1)].rec_flags &= ~KLOCK_RF_SPINNING;
	slot->depth = idx + 1;
	return true;
}

/*
 * A spinner holds its CPU until it gets the lock, so an open per-CPU wait older than
 * spin_stale_ns, or another task's, lost its end (see above). Except one: a mutex whose
 * optimistic spin gave up and called schedule() (MUTEX|SPIN) left its wait here, and may
 * wait long on a run queue before it goes on, on any CPU: such a wait moves to its
 * thread's slot, where the task finds it (unless it already claimed it from here, see
 * claim_moved_spin()). Drops the rest, wherever they are, and returns the new depth. Only
 * the slot's own CPU writes it, and our programs do not nest on a CPU (guard_enter()).
 */
static __always_inline __u32 expire_stale(struct klock_slot *slot, __u32 depth, __u32 tid, __u64 now)
{
	__u32 i, kept = 0;

	if (depth > KLOCK_NEST_MAX)
		return 0;
	for (i = 0; i < KLOCK_NEST_MAX && i < depth; i++) {
		struct klock_pending *e = &slot->e[i];
		__u32 owner = e->tid;

		if (owner == KLOCK_TID_CLAIMED)
			continue;
		if (now - e->begin_ns >= spin_stale_ns || (owner != tid && !(e->lcb_flags & KLOCK_F_MUTEX))) {
			ls_count(LS_DROP_MISSED_END);
			continue;
		}
		if (owner != tid) {
			/* claimed first, so that its task cannot claim it too */
			if (__sync_val_compare_and_swap(&e->tid, owner, KLOCK_TID_CLAIMED) == owner) {
				struct klock_pending moved = *e;

				moved.tid = owner;
				if (thread_push(owner, &moved))
					ls_count(LS_CNT_SPIN_RESCHED);
			}
			continue;
		}
		if (kept != i)
			slot->e[kept & (KLOCK_NEST_MAX - 1)] = *e;
		kept++;
	}
	slot->depth = kept;
	return kept;
}

static __always_inline struct klock_slot *cpu_slot(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&cpu_slots, &zero);
}

/* Names the two per-task locks the waiter's task points at; only where the type fits. */
static __always_inline __u32 lock_name_flags(__u64 lock, __u32 flags)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct sighand_struct *sighand;
	struct mm_struct *mm;

	if (flags & (KLOCK_F_MUTEX | KLOCK_F_PERCPU))
		return 0;
	if ((flags & (KLOCK_F_READ | KLOCK_F_WRITE)) && !(flags & KLOCK_F_SPIN)) {
		/* an rwsem (RT|READ/WRITE on PREEMPT_RT): mmap_lock? */
		mm = BPF_CORE_READ(task, mm);
		if (mm && lock == (__u64)mm + bpf_core_field_offset(struct mm_struct, mmap_lock))
			return KLOCK_RF_MMAP_LOCK;
		return 0;
	}
	/* a spinlock_t (SPIN, or RT on PREEMPT_RT): siglock? */
	sighand = BPF_CORE_READ(task, sighand);
	if (sighand && lock == (__u64)sighand + bpf_core_field_offset(struct sighand_struct, siglock))
		return KLOCK_RF_SIGLOCK;
	return 0;
}

/* The owner's tid and tgid: adjacent in task_struct, one read where they still are. */
static __always_inline void owner_ids(struct task_struct *owner, __u32 *tid, __u32 *tgid)
{
	__u32 ids[2] = {};

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
 * A mutex's owner by plain loads (bpf_rdonly_cast, 6.2+, in the variants that have
 * kfuncs): the storm case, on every wait, without a helper call per field. NULL when the
 * lock is not a plain mutex (PREEMPT_RT's is an rt_mutex) or has no owner.
 */
static __always_inline struct task_struct *mutex_owner_direct(__u64 lock, __u32 *tid, __u32 *tgid)
{
	struct mutex___plain *m;
	struct task_struct *t;
	unsigned long word;

	if (!bpf_core_field_exists(((struct mutex___plain *)0)->owner))
		return NULL;
	m = bpf_rdonly_cast((void *)lock, bpf_core_type_id_kernel(struct mutex));
	word = m->owner.counter & ~KOWNER_FLAGS_MASK;
	if (!word)
		return NULL;
	t = bpf_rdonly_cast((void *)word, bpf_core_type_id_kernel(struct task_struct));
	*tid = t->pid;
	*tgid = t->tgid;
	return (struct task_struct *)word;
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
 * the variant has kfuncs, mutexes are read with plain loads.
 */
static __always_inline struct task_struct *read_owner(struct klock_pending *e, __u64 lock, __u32 flags,
						      const bool direct)
{
	struct task_struct *owner;
	bool waiters;

	e->owner_pid = 0;
	e->owner_tid = 0;
	if (direct && (flags & KLOCK_F_MUTEX)) {
		owner = mutex_owner_direct(lock, &e->owner_tid, &e->owner_pid);
		e->owner_task = (__u64)owner;
		if (!owner || !e->owner_tid)
			return NULL;
		e->rec_flags |= KLOCK_RF_OWNER;
		return owner;
	}
	owner = kowner_read(lock, flags, &waiters);
	e->owner_task = (__u64)owner;
	if (!owner)
		return NULL;
	owner_ids(owner, &e->owner_tid, &e->owner_pid);
	if (!e->owner_tid)
		return NULL;
	e->rec_flags |= KLOCK_RF_OWNER;
	return owner;
}

/* Where the owner's name is, for a helper to read when it is kept. */
static __always_inline const char *owner_comm(const struct klock_pending *e)
{
	return e->owner_tid ? (const char *)(e->owner_task + bpf_core_field_offset(struct task_struct, comm)) : NULL;
}

/*
 * Remembers that @e's owner holds its lock, for the check at its next involuntary switch.
 * Most waits on a lock name the owner the previous one named: this CPU remembers the
 * last one it noted, and the map is looked at only when that changes.
 */
static __always_inline void note_holder(struct klock_slot *cpu, const struct klock_pending *e, __u64 lock,
					__u32 flags)
{
	struct kholder h = { .lock = lock, .lcb_flags = flags & ~KLOCK_F_SPIN };
	__u32 tid = e->owner_tid;
	struct kholder *old;

	if (cpu->noted_tid == tid && cpu->noted_lock == lock)
		return;
	cpu->noted_tid = tid;
	cpu->noted_lock = lock;
	old = bpf_map_lookup_elem(&kholders, &tid);
	if (old && old->lock == lock)
		return;
	if (!bpf_map_update_elem(&kholders, &tid, &h, BPF_ANY))
		ls_count(LS_CNT_KHOLDERS);
}

static __always_inline void take_owner_stack(__u32 tid, struct klock_pending *e,
					     struct task_struct *owner)
{
	struct owner_stack *os;
	struct task_struct *t;
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
	bpf_task_release(t);
	if (n <= 0) {
		ls_count(LS_DROP_OWNER_STACK);
		bpf_map_delete_elem(&owner_stacks, &tid);
		return;
	}
	os->nr = n / sizeof(__u64);
	e->rec_flags |= KLOCK_RF_OWNER_STACK;
}

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
 */
static __always_inline bool respin(__u32 tid, __u64 lock, const bool direct)
{
	struct klock_pending *top;
	struct klock_slot *slot;
	__u32 depth;

	if (!mutex_first_waiter_is_current(lock, direct))
		return false;
	slot = thread_slot(tid, false);
	if (!slot)
		return false;
	depth = slot->depth;
	if (!depth || depth > KLOCK_NEST_MAX)
		return false;
	top = &slot->e[(depth - 1) & (KLOCK_NEST_MAX - 1)];
	if (top->lock != lock)
		return false;
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
	__u32 depth = cpu->depth, idx;
	struct klock_pending *top, moved;

	if (!depth || depth > KLOCK_NEST_MAX)
		return false;
	idx = depth - 1;
	barrier_var(idx);
	top = &cpu->e[idx & (KLOCK_NEST_MAX - 1)];
	if (top->lock != lock || top->tid != tid || !is_continuation(top->lcb_flags, flags))
		return false;
	moved = *top;
	moved.lcb_flags = flags;
	cpu->depth = depth - 1;
	if (thread_push(tid, &moved))
		ls_count(LS_CNT_CONTINUED);
	return true;
}

static __always_inline int __lock_contended(struct klock_slot *cpu, __u64 id, __u64 lock, __u32 flags,
					    bool with_owner_stack)
{
	__u64 now;
	__u32 tid = (__u32)id, depth, idx;
	bool spinning = is_spinning(flags);
	struct klock_pending *e, *top;
	struct task_struct *owner;
	struct klock_slot *slot;

	if (spinning && (flags & KLOCK_F_MUTEX) && respin(tid, lock, with_owner_stack))
		return 0;
	if (!spinning && (flags & KLOCK_F_MUTEX) && continue_sleeping(cpu, tid, lock, flags))
		return 0;
	slot = spinning ? cpu : thread_slot(tid, true);
	if (!slot) {
		ls_count(LS_DROP_SLOT_FULL);
		return 0;
	}
	now = bpf_ktime_get_ns();
	depth = slot->depth;
	if (spinning && depth)
		depth = expire_stale(slot, depth, tid, now);
	if (depth > 0 && depth <= KLOCK_NEST_MAX) {
		top = &slot->e[(depth - 1) & (KLOCK_NEST_MAX - 1)];
		if (top->lock == lock && top->tid == tid) {
			/* a mutex that spun (MUTEX|SPIN), or spun again once woken (RESPIN),
			 * now sleeps (MUTEX) on the same lock: one wait, timed from its first
			 * begin */
			if (is_continuation(top->lcb_flags, flags) || (top->rec_flags & KLOCK_RF_RESPIN)) {
				top->lcb_flags = flags;
				top->rec_flags &= ~KLOCK_RF_RESPIN;
				ls_count(LS_CNT_CONTINUED);
				return 0;
			}
			/* anything else means the previous wait's end never reached us (the
			 * kernel skips a program that fires while it runs on that CPU): that
			 * wait cannot be timed, so drop it rather than stretch it to now */
			ls_count(LS_DROP_MISSED_END);
			depth--;
		}
	}
	if (depth >= KLOCK_NEST_MAX) {
		ls_count(LS_DROP_NEST_DEPTH);
		return 0;
	}
	idx = depth;
	/* keep the mask: the compiler knows depth < KLOCK_NEST_MAX, the verifier does not */
	barrier_var(idx);
	e = &slot->e[idx & (KLOCK_NEST_MAX - 1)];
	if (!spinning && (flags & KLOCK_F_MUTEX) && claim_moved_spin(lock, tid, now, e)) {
		e->lcb_flags = flags;
		e->rec_flags &= ~KLOCK_RF_SPINNING;
		e->tid = tid;
		slot->depth = depth + 1;
		ls_count(LS_CNT_CONTINUED);
		return 0;
	}
	e->lock = lock;
	e->tid = tid;
	e->begin_ns = now;
	e->lcb_flags = flags;
	e->nest = depth;
	e->rec_flags = (depth ? KLOCK_RF_NESTED : 0) | (spinning ? KLOCK_RF_SPINNING : 0);
	if (depth)	/* timed on its own, never merged into the wait below it */
		ls_count(LS_CNT_NESTED);
	if (sample_stack(lock, now))
		e->rec_flags |= KLOCK_RF_SAMPLED;
	owner = read_owner(e, lock, flags, with_owner_stack);
	if (note_holders && owner)
		note_holder(cpu, e, lock, flags);
	/* named now, not at the end: the end runs inside the critical section */
	e->rec_flags |= lock_name_flags(lock, flags);
	if (with_owner_stack && owner && (e->rec_flags & KLOCK_RF_SAMPLED))
		take_owner_stack(tid, e, owner);
	/* published last: contention_end from an interrupt only looks below depth */
	slot->depth = depth + 1;
	return 0;
}

/* Removes @tid's open wait on @lock from @slot into @out; false when there is none. */
static __always_inline bool slot_pop(struct klock_slot *slot, __u64 lock, __u32 tid, struct klock_pending *out)
{
	__u32 depth = slot->depth, i, found = KLOCK_NEST_MAX;

	if (depth > KLOCK_NEST_MAX)
		return false;
	for (i = 0; i < KLOCK_NEST_MAX; i++) {
		if (i < depth && slot->e[i].lock == lock && slot->e[i].tid == tid)
			found = i;
	}
	if (found >= KLOCK_NEST_MAX)
		return false;
	*out = slot->e[found];
	/* close the gap so the slot stays a stack; only out-of-order ends move anything */
	for (i = 0; i + 1 < KLOCK_NEST_MAX; i++) {
		if (i >= found && i + 1 < depth)
			slot->e[i] = slot->e[i + 1];
	}
	slot->depth = depth - 1;
	return true;
}

static __always_inline bool find_wait(struct klock_slot *cpu, __u64 lock, __u32 tid, struct klock_pending *out)
{
	struct klock_slot *slot;

	if (cpu->depth > 0 && slot_pop(cpu, lock, tid, out))
		return true;
	/* the emptied slot stays for the thread's next wait (an update and a delete per
	 * wait cost more than the rest of the program); the daemon sweeps exited threads */
	slot = thread_slot(tid, false);
	if (slot && slot_pop(slot, lock, tid, out))
		return true;
	return claim_moved_spin(lock, tid, bpf_ktime_get_ns(), out);
}

static __always_inline void copy_owner_stack(struct klock_wait_rec *r, __u32 tid)
{
	struct owner_stack *os = bpf_map_lookup_elem(&owner_stacks, &tid);

	if (!os) {
		r->rec_flags &= ~KLOCK_RF_OWNER_STACK;
		r->owner_nr = 0;
		return;
	}
	r->owner_nr = os->nr;
	__builtin_memcpy(r->owner_ips, os->ips, sizeof(r->owner_ips));
	bpf_map_delete_elem(&owner_stacks, &tid);
	ls_count(LS_CNT_OWNER_STACKED);
}

static __always_inline void fill_record(struct klock_wait_rec *r, void *ctx, struct klock_pending *e,
					__u64 id, __u64 now)
{
	__u32 tid = (__u32)id;
	long sid;

	r->lock_addr = e->lock;
	r->end_ns = now;
	r->wait_ns = now - e->begin_ns;
	r->pid = id >> 32;
	r->tid = tid;
	r->lcb_flags = e->lcb_flags;
	r->rec_flags = e->rec_flags;
	r->nest = e->nest;
	r->owner_pid = e->owner_pid;
	r->owner_tid = e->owner_tid;
	r->owner_nr = 0;
	__builtin_memset(r->owner_comm, 0, sizeof(r->owner_comm));
	if (e->owner_tid)
		bpf_probe_read_kernel_str(r->owner_comm, sizeof(r->owner_comm), owner_comm(e));
	bpf_get_current_comm(&r->comm, sizeof(r->comm));
	r->stack_id = -1;
	sid = bpf_get_stackid(ctx, &stacks, 0);
	if (sid >= 0) {
		r->stack_id = sid;
		r->rec_flags |= KLOCK_RF_STACK;
		ls_count(LS_CNT_STACKED);
	} else {
		ls_count(sid == -EEXIST ? LS_DROP_STACK_COLLISION : LS_DROP_STACK_FAILED);
	}
}

/*
 * A sampled wait, with its stacks (it is counted in the table too). Each size has its own
 * reserve-fill-submit path: older verifiers (6.1) lose track of which size a shared path
 * reserved and refuse the owner-stack copy.
 */
static __always_inline void emit_sample(void *ctx, struct klock_pending *e, __u64 id, __u64 now,
					const bool with_owner_stack)
{
	const __u32 size = with_owner_stack ? sizeof(struct klock_wait_rec) : KLOCK_WAIT_REC_MIN_SIZE;
	__u32 tid = (__u32)id;
	struct klock_wait_rec *r;
	void *rb;

	r = ls_reserve(&rb, LS_REC_KLOCK_WAIT, size);
	if (!r) {
		if (with_owner_stack)
			bpf_map_delete_elem(&owner_stacks, &tid);
		return;
	}
	fill_record(r, ctx, e, id, now);
	if (with_owner_stack)
		copy_owner_stack(r, tid);
	ls_submit(rb, r);
}

/* The kind of lock a wait counts under: a mutex that spun and then slept is one mutex wait. */
static __always_inline __u16 wait_type(__u32 lcb_flags)
{
	return lcb_flags & KLOCK_F_MUTEX ? KLOCK_F_MUTEX : lcb_flags;
}

/* The exact part: one wait added to its table entry. */
static __always_inline void count_wait(const struct klock_pending *e, __u64 id, __u64 wait_ns, __u32 names)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct ls_wait_key key = {
		.lock = e->lock,
		.pid = id >> 32,
		.tid = (__u32)id,
		.class = LS_WAIT_KLOCK,
		.type = wait_type(e->lcb_flags),
		.flags = (names & KLOCK_RF_MMAP_LOCK ? LS_WF_MMAP_LOCK : 0) |
			 (names & KLOCK_RF_SIGLOCK ? LS_WF_SIGLOCK : 0),
		.owner_pid = e->owner_pid,
		.owner_tid = e->owner_tid,
	};
	struct ls_wait_names nm = { .comm = task->comm, .owner_comm = owner_comm(e) };

	wait_add(&key, wait_ns, false, &nm);
}

static __always_inline int __lock_acquired(struct klock_slot *cpu, void *ctx, __u64 id, __u64 lock)
{
	struct klock_pending e;
	__u64 now;

	if (!find_wait(cpu, lock, (__u32)id, &e)) {
		ls_count(LS_DROP_UNMATCHED_END);
		return 0;
	}
	now = bpf_ktime_get_ns();
	count_wait(&e, id, now - e.begin_ns, e.rec_flags);
	/* the sampled part: the wait again, with the stacks its caller is told by */
	if (!(e.rec_flags & KLOCK_RF_SAMPLED))
		return 0;
	ls_count(LS_CNT_SAMPLED);
	if (e.rec_flags & KLOCK_RF_OWNER_STACK)
		emit_sample(ctx, &e, id, now, true);
	else
		emit_sample(ctx, &e, id, now, false);
	return 0;
}

/*
 * Our programs take locks of their own: the buckets of thread_slots and owner_stacks, the
 * stack map's. When one of those is contended while a begin program runs, the kernel skips
 * the nested begin (a program never re-enters itself on a CPU) but runs the end program,
 * and the other way round; an end matched to the wrong begin would time a wait of seconds.
 * So each CPU notes when one of our programs runs there, and waits that begin or end
 * inside them are counted (self_lock) and not timed. The programs do not sleep, and on
 * non-RT kernels the hooks run with preemption off, so the flag cannot leak to another task.
 */
static __always_inline struct klock_slot *guard_enter(void)
{
	struct klock_slot *cpu = cpu_slot();

	if (!cpu)
		return NULL;
	if (cpu->busy) {
		ls_count(LS_DROP_SELF_LOCK);
		return NULL;
	}
	cpu->busy = 1;
	return cpu;
}

static __always_inline int lock_contended(__u64 lock, __u32 flags, bool with_owner_stack)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct klock_slot *cpu;

	if (!ls_tgid_wanted(id >> 32) || !(cpu = guard_enter()))
		return 0;
	__lock_contended(cpu, id, lock, flags, with_owner_stack);
	cpu->busy = 0;
	return 0;
}

static __always_inline int lock_acquired(void *ctx, __u64 lock)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct klock_slot *cpu;

	if (!ls_tgid_wanted(id >> 32) || !(cpu = guard_enter()))
		return 0;
	__lock_acquired(cpu, ctx, id, lock);
	cpu->busy = 0;
	return 0;
}

/*
 * Entry points. BTF-enabled tracepoints are preferred (typed arguments, cheaper entry);
 * classic tracepoints are the fallback. The *_owner_stack variants need the
 * bpf_task_from_pid kfunc; user space autoloads one begin and one end program.
 */
SEC("tp_btf/contention_begin")
int BPF_PROG(contention_begin_btf_owner_stack, void *lock, unsigned int flags)
{
	return lock_contended((__u64)lock, flags, true);
}

SEC("tp_btf/contention_begin")
int BPF_PROG(contention_begin_btf, void *lock, unsigned int flags)
{
	return lock_contended((__u64)lock, flags, false);
}

SEC("tp_btf/contention_end")
int BPF_PROG(contention_end_btf, void *lock, int ret)
{
	return lock_acquired(ctx, (__u64)lock);
}

SEC("tracepoint/lock/contention_begin")
int contention_begin_tp(struct trace_event_raw_contention_begin *ctx)
{
	return lock_contended((__u64)ctx->lock_addr, ctx->flags, false);
}

SEC("tracepoint/lock/contention_end")
int contention_end_tp(struct trace_event_raw_contention_end *ctx)
{
	return lock_acquired(ctx, (__u64)ctx->lock_addr);
}

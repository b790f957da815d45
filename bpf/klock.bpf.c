// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * klock: time every kernel lock contention (lock:contention_begin -> contention_end) and
 * add it to the wait table (waits.bpf.h): per thread, lock, type and owner, exactly, with
 * no ring record.
 *
 * Stacks are sampled: a kernel stack walk costs ~40x the rest of the program, so each lock
 * has a token bucket that allows stack_rate stacks per second (per CPU) and each CPU a
 * budget of cpu_stack_rate, and of stack_budget_ppm of its time. A wait the sampler picks
 * (KLOCK_RF_SAMPLED) gets its stack at its begin, outside the lock, and goes to the ring with it at its end; the daemon splits
 * each thread's and lock's exact figures among its callers in proportion to the sample.
 * Under a lock storm the ring thus carries at most the sampling rate, whatever the rate
 * of waits.
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
/* slot_cache's max_entries - 1: max-threads rounded down to a power of 2, at most KLOCK_SLOT_CACHE */
const volatile __u32 slot_cache_mask = KLOCK_SLOT_CACHE - 1;

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

/*
 * In front of thread_slots: an array indexed by the tid's low bits (slot_cache_mask: it
 * holds max-threads at most, like the hash), each entry claimed by
 * the first thread that needs it (owner). An array lookup costs next to nothing where a
 * hash lookup costs ~80 ns here, twice per sleeping wait. A thread whose entry another
 * thread holds uses thread_slots. No program sees a thread exit, so the daemon frees the
 * entries of exited threads where it sweeps thread_slots (collector__gc(), through its
 * mapping: BPF_F_MMAPABLE).
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KLOCK_SLOT_CACHE);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct klock_slot);
} slot_cache SEC(".maps");

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

/*
 * Waits that ended on this CPU and are not in the table yet. contention_end runs inside
 * the critical section of the lock it ends on (the lock is held, and a mutex that slept
 * holds its wait_lock too), so what it spends there every other waiter of the lock spends
 * spinning: the end only notes the wait, and the next spinning begin on this CPU, which
 * takes no lock of its own, adds it to the table (count_done()). A noted wait lies in this
 * CPU's slot at or above its depth, marked in its done mask: a wait that ends at the
 * slot's top (a lock storm's every wait) stays where it is; one that ends in a thread's
 * slot is copied to a free entry there (count_later()), or counted at once when there is
 * none. The daemon runs count_done_waits on every CPU before it moves the table epoch on,
 * so a window misses none.
 */
static const struct klock_slot empty_slot;
static const struct owner_stack empty_owner_stack;

/* Kernels 6.2+; only the *_owner_stack program variants call them (and bpf_rdonly_cast()). */
extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym __weak;
extern void bpf_task_release(struct task_struct *p) __ksym __weak;

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

/* @tid's slot_cache entry, whoever owns it; NULL for tid 0 (see below). */
static __always_inline struct klock_slot *slot_cache_entry(__u32 tid)
{
	__u32 idx = tid & slot_cache_mask;

	/* 0 marks a free entry: tid 0 (the idle tasks, one per CPU) keeps to the hash */
	return tid ? bpf_map_lookup_elem(&slot_cache, &idx) : NULL;
}

/* @tid's slot: its slot_cache entry, else its thread_slots entry; @create: claim one. */
static __always_inline struct klock_slot *thread_slot(__u32 tid, bool create)
{
	struct klock_slot *cached = slot_cache_entry(tid), *slot;

	if (cached && cached->owner == tid)
		return cached;
	slot = bpf_map_lookup_elem(&thread_slots, &tid);
	if (slot || !create)
		return slot;
	if (cached && !cached->owner && __sync_val_compare_and_swap(&cached->owner, 0, tid) == 0)
		return cached;
	if (bpf_map_update_elem(&thread_slots, &tid, &empty_slot, BPF_NOEXIST))
		return NULL;
	return bpf_map_lookup_elem(&thread_slots, &tid);
}

/* @slot's top wait when it is @tid's on @lock, else NULL: where a wait goes on or ends. */
static __always_inline struct klock_pending *slot_top(struct klock_slot *slot, __u64 lock, __u32 tid)
{
	__u32 depth = slot->depth, idx;
	struct klock_pending *top;

	if (!depth || depth > KLOCK_NEST_MAX)
		return NULL;
	idx = depth - 1;
	/* keep the mask: the compiler knows depth <= KLOCK_NEST_MAX, the verifier does not */
	barrier_var(idx);
	top = &slot->e[idx & (KLOCK_NEST_MAX - 1)];
	return top->lock == lock && top->tid == tid ? top : NULL;
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
 * A global function, verified once: it runs only where a spinning begin finds its CPU's
 * slot in use (a nested wait, or a lost end), and inlined, its loop over the entries, each
 * of which may move to its thread's slot, was a fifth of what the verifier walked in the
 * begin program.
 */
__noinline int expire_stale(struct klock_slot *slot, __u32 depth, __u32 tid, __u64 now)
{
	__u32 i, kept = 0;

	if (!slot || depth > KLOCK_NEST_MAX)
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

#include "klock_owner.bpf.h"

#include "klock_spin.bpf.h"

/* The waiter's kernel stack, for a sampled wait, into @e (KLOCK_RF_STACK). */
static __always_inline void take_stack(void *ctx, struct klock_pending *e)
{
	long sid = bpf_get_stackid(ctx, &stacks, 0);

	if (sid < 0) {
		ls_count(sid == -EEXIST ? LS_DROP_STACK_COLLISION : LS_DROP_STACK_FAILED);
		return;
	}
	e->stack_id = sid;
	e->rec_flags |= KLOCK_RF_STACK;
	ls_count(LS_CNT_STACKED);
}

static __always_inline void count_done(struct klock_slot *cpu);
int count_done_all(struct klock_slot *cpu);

/*
 * A wait begins. A spinning one first counts the waits that ended on this CPU
 * (count_done(): not where a mutex's sleeping begin runs, under the wait_lock its
 * unlocker takes), after the owner word's load has gone out: they run while it comes.
 */
static __always_inline int __lock_contended(void *ctx, struct klock_slot *cpu, __u64 id, __u64 lock, __u32 flags,
					    bool with_owner_stack)
{
	__u64 now, owner_word;
	__u32 tid = (__u32)id, depth, idx;
	bool spinning = is_spinning(flags);
	struct klock_pending *e, *top;
	struct task_struct *owner, *task;
	struct klock_slot *slot;

	if (spinning && (flags & KLOCK_F_MUTEX) && respin(tid, lock, with_owner_stack)) {
		/* once a sleep: a storm's every begin counts on the inlined path below */
		if (cpu->done)
			count_done_all(cpu);
		return 0;
	}
	if (!spinning && (flags & KLOCK_F_MUTEX) && continue_sleeping(cpu, tid, lock, flags))
		return 0;
	slot = spinning ? cpu : thread_slot(tid, true);
	if (!slot) {
		ls_count(LS_DROP_SLOT_FULL);
		return 0;
	}
	now = bpf_ktime_get_ns();
	owner_word = mutex_owner_word(lock, flags, with_owner_stack);
	if (spinning)
		count_done(cpu);
	depth = slot->depth;
	if (spinning && depth)
		depth = expire_stale(slot, depth, tid, now);
	/* expire_stale() left slot->depth == depth */
	if ((top = slot_top(slot, lock, tid))) {
		/* a mutex that spun (MUTEX|SPIN), or spun again once woken (RESPIN), now
		 * sleeps (MUTEX) on the same lock: one wait, timed from its first begin */
		if (is_continuation(top->lcb_flags, flags) || (top->rec_flags & KLOCK_RF_RESPIN)) {
			top->lcb_flags = flags;
			top->rec_flags &= ~KLOCK_RF_RESPIN;
			ls_count(LS_CNT_CONTINUED);
			return 0;
		}
		/* anything else means the previous wait's end never reached us (the kernel
		 * skips a program that fires while it runs on that CPU): that wait cannot be
		 * timed, so drop it rather than stretch it to now */
		ls_count(LS_DROP_MISSED_END);
		depth--;
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
	task = bpf_get_current_task_btf();
	e->lock = lock;
	e->tid = tid;
	e->pid = id >> 32;
	e->task = (__u64)task;
	e->begin_ns = now;
	e->lcb_flags = flags;
	e->nest = depth;
	e->rec_flags = (depth ? KLOCK_RF_NESTED : 0) | (spinning ? KLOCK_RF_SPINNING : 0);
	if (depth)	/* timed on its own, never merged into the wait below it */
		ls_count(LS_CNT_NESTED);
	if (sample_stack(lock, now, true, 1, NULL, 0))	/* no sampler of klock's shares its budget */
		e->rec_flags |= KLOCK_RF_SAMPLED;
	owner = read_owner(e, lock, flags, owner_word, with_owner_stack);
	if (note_holders && owner)
		note_holder(e, lock, flags);
	/* named now, not at the end: the end runs inside the critical section */
	e->rec_flags |= lock_name_flags(task, lock, flags);
	if (e->rec_flags & KLOCK_RF_SAMPLED) {
		if (with_owner_stack && owner)
			take_owner_stack(tid, e, owner);
		take_stack(ctx, e);
		/*
		 * timed from here: the stacks took microseconds, which without us the thread
		 * would have spent waiting or not at all; counted in, they were our cost
		 * reported as the lock's (twice futex_bucket's waits: test_klock.py); and
		 * charged to the CPU's stack time budget, which this clock read measures
		 */
		e->begin_ns = bpf_ktime_get_ns();
		sample_stack_spent(e->begin_ns, e->begin_ns - now);
	}
	/* published last: contention_end from an interrupt only looks below depth */
	slot->depth = depth + 1;
	return 0;
}

/* Removes @tid's open wait on @lock from @slot into @out; false when there is none. */
static __always_inline bool slot_pop(struct klock_slot *slot, __u64 lock, __u32 tid, struct klock_pending *out)
{
	__u32 depth = slot->depth, i, found = KLOCK_NEST_MAX;
	struct klock_pending *top = slot_top(slot, lock, tid);

	/* most waits end in the order they began: the top one, with nothing to move */
	if (top) {
		*out = *top;
		slot->depth = depth - 1;
		return true;
	}
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

static __always_inline void fill_record(struct klock_wait_rec *r, struct klock_pending *e, __u64 id, __u64 now)
{
	__u32 tid = (__u32)id;

	r->lock_addr = e->lock;
	r->end_ns = now;
	r->wait_ns = e->wait_ns;
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
	r->stack_id = e->rec_flags & KLOCK_RF_STACK ? e->stack_id : -1;
}

/*
 * A sampled wait, with its stacks (it is counted in the table too). Each size has its own
 * reserve-fill-submit path: older verifiers (6.1) lose track of which size a shared path
 * reserved and refuse the owner-stack copy.
 */
static __always_inline void emit_sample(struct klock_pending *e, __u64 id, __u64 now,
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
	fill_record(r, e, id, now);
	if (with_owner_stack)
		copy_owner_stack(r, tid);
	ls_submit(rb, r);
}

/* The kind of lock a wait counts under: a mutex that spun and then slept is one mutex wait. */
static __always_inline __u16 wait_type(__u32 lcb_flags)
{
	return lcb_flags & KLOCK_F_MUTEX ? KLOCK_F_MUTEX : lcb_flags;
}

/* The exact part: one ended wait (@e->wait_ns) added to its table entry. */
static __always_inline void count_wait(const struct klock_pending *e)
{
	__u32 names = e->rec_flags;
	struct ls_wait_key key = {
		.lock = e->lock,
		.pid = e->pid,
		.tid = e->tid,
		.class = LS_WAIT_KLOCK,
		.type = wait_type(e->lcb_flags),
		.flags = (names & KLOCK_RF_MMAP_LOCK ? LS_WF_MMAP_LOCK : 0) |
			 (names & KLOCK_RF_SIGLOCK ? LS_WF_SIGLOCK : 0),
		.owner_pid = e->owner_pid,
		.owner_tid = e->owner_tid,
	};
	struct ls_wait_names nm = { .comm = waiter_comm(e), .owner_comm = owner_comm(e) };

	wait_add(&key, e->wait_ns, false, &nm);
}

static long count_done_one(__u32 i, struct klock_slot **cpu)
{
	if ((*cpu)->done & (1U << i))
		count_wait(&(*cpu)->e[i & (KLOCK_NEST_MAX - 1)]);
	return 0;
}

/* The index of @bit, a mask of one of the low four bits (BPF has no count-trailing-zeros). */
static __always_inline __u32 bit_index(__u32 bit)
{
	_Static_assert(KLOCK_NEST_MAX == 4, "bit_index() knows four entries");
	return (bit & 0xa ? 1 : 0) | (bit & 0xc ? 2 : 0);
}

/*
 * Every wait that ended in this CPU's slot, one at a time: for where there are several, or
 * where this runs once a sleep or a drain. A global function, verified once: count_wait()
 * inlined at each place that counts multiplied the verifier's work on the begin program.
 */
__noinline int count_done_all(struct klock_slot *cpu)
{
	if (!cpu)
		return 0;
	bpf_loop(KLOCK_NEST_MAX, count_done_one, &cpu, 0);
	cpu->done = 0;
	return 0;
}

/*
 * The waits that ended in this CPU's slot (see above), added to the table. Before anything
 * is pushed there: they lie at and above its depth. Inside guard_enter().
 */
static __always_inline void count_done(struct klock_slot *cpu)
{
	__u32 done = cpu->done;

	if (!done)
		return;
	/* nearly always one wait (a storm's begin follows its previous end): inlined, no loop */
	if (done & (done - 1)) {
		count_done_all(cpu);
		return;
	}
	count_wait(&cpu->e[bit_index(done) & (KLOCK_NEST_MAX - 1)]);
	cpu->done = 0;
}

/* The ended wait @e, out of a thread's slot: noted in a free entry of @cpu, for count_done(). */
static __always_inline void count_later(struct klock_slot *cpu, const struct klock_pending *e)
{
	__u32 depth = cpu->depth, used = cpu->done, i, free = KLOCK_NEST_MAX;

	for (i = KLOCK_NEST_MAX; i-- > 0;) {
		if (i >= depth && !(used & (1U << i)))
			free = i;
	}
	if (free >= KLOCK_NEST_MAX) {
		count_wait(e);
		return;
	}
	/* keep the mask: the compiler knows free < KLOCK_NEST_MAX, the verifier does not */
	barrier_var(free);
	cpu->e[free & (KLOCK_NEST_MAX - 1)] = *e;
	cpu->done = used | (1U << free);
}

static __always_inline int __lock_acquired(struct klock_slot *cpu, __u64 id, __u64 lock)
{
	struct klock_pending e, *top = slot_top(cpu, lock, (__u32)id);
	__u32 depth = cpu->depth;
	__u64 now;

	/*
	 * A lock storm's every wait: the top of this CPU's slot, not sampled. It ends where it
	 * is, for the next spinning begin here to count (count_done()): this runs inside the
	 * critical section, where each nanosecond holds up every waiter (bench: 100 ns more
	 * here cost pipe_storm two thirds of its throughput, 100 ns more at begin a fifth)
	 */
	if (top && !(top->rec_flags & KLOCK_RF_SAMPLED)) {
		top->wait_ns = bpf_ktime_get_ns() - top->begin_ns;
		cpu->done |= 1U << ((depth - 1) & (KLOCK_NEST_MAX - 1));
		cpu->depth = depth - 1;
		return 0;
	}
	if (!find_wait(cpu, lock, (__u32)id, &e)) {
		ls_count(LS_DROP_UNMATCHED_END);
		return 0;
	}
	now = bpf_ktime_get_ns();
	e.wait_ns = now - e.begin_ns;
	if (!(e.rec_flags & KLOCK_RF_SAMPLED)) {
		count_later(cpu, &e);
		return 0;
	}
	/* the sampled part, rate-limited: counted now, and again with its stacks */
	count_wait(&e);
	ls_count(LS_CNT_SAMPLED);
	if (e.rec_flags & KLOCK_RF_OWNER_STACK)
		emit_sample(&e, id, now, true);
	else
		emit_sample(&e, id, now, false);
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

static __always_inline int lock_contended(void *ctx, __u64 lock, __u32 flags, bool with_owner_stack)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct klock_slot *cpu;

	if (!ls_tgid_wanted(id >> 32) || !(cpu = guard_enter()))
		return 0;
	__lock_contended(ctx, cpu, id, lock, flags, with_owner_stack);
	cpu->busy = 0;
	return 0;
}

static __always_inline int lock_acquired(__u64 lock)
{
	__u64 id = bpf_get_current_pid_tgid();
	struct klock_slot *cpu;

	if (!ls_tgid_wanted(id >> 32) || !(cpu = guard_enter()))
		return 0;
	__lock_acquired(cpu, id, lock);
	cpu->busy = 0;
	return 0;
}

/*
 * Run by the daemon on each CPU (BPF_PROG_TEST_RUN, BPF_F_TEST_RUN_ON_CPU) before it moves
 * the table epoch on: the waits that ended there and are not counted yet go into the table
 * being written. When it interrupted one of our programs there, it leaves them to it and
 * says so.
 */
SEC("raw_tp")
int count_done_waits(void *ctx)
{
	struct klock_slot *cpu = cpu_slot();

	if (!cpu || cpu->busy)
		return KLOCK_DRAIN_BUSY;
	cpu->busy = 1;
	if (cpu->done) {
		count_done_all(cpu);
		ls_count(LS_CNT_QUEUED_AT_DRAIN);
	}
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
	return lock_contended(ctx, (__u64)lock, flags, true);
}

SEC("tp_btf/contention_begin")
int BPF_PROG(contention_begin_btf, void *lock, unsigned int flags)
{
	return lock_contended(ctx, (__u64)lock, flags, false);
}

SEC("tp_btf/contention_end")
int BPF_PROG(contention_end_btf, void *lock, int ret)
{
	return lock_acquired((__u64)lock);
}

SEC("tracepoint/lock/contention_begin")
int contention_begin_tp(struct trace_event_raw_contention_begin *ctx)
{
	return lock_contended(ctx, (__u64)ctx->lock_addr, ctx->flags, false);
}

SEC("tracepoint/lock/contention_end")
int contention_end_tp(struct trace_event_raw_contention_end *ctx)
{
	return lock_acquired((__u64)ctx->lock_addr);
}

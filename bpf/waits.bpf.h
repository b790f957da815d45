/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The wait tables (see lockscope.h): every completed wait adds to its entry, exactly, with
 * atomic adds, so that a wait costs a hash lookup and no ring record. The daemon creates
 * the tables and hands every component the same ones; wait_epoch says which one is being
 * written.
 */
#ifndef __LS_WAITS_BPF_H
#define __LS_WAITS_BPF_H

#include "lockscope.h"
#include "common.bpf.h"

/*
 * Only a template: the daemon creates both tables, sized by wait-keys. Sizes, not types:
 * clang emits a struct seen only through the template's pointers as a forward
 * declaration, whose size libbpf cannot know.
 */
struct ls_wait_table {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__uint(key_size, sizeof(struct ls_wait_key));
	__uint(value_size, sizeof(struct ls_wait_val));
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, LS_WAIT_TABLES);
	__type(key, __u32);
	__array(values, struct ls_wait_table);
} wait_tables SEC(".maps");

/* A new entry's first value, built off the stack (it is half the stack's size). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ls_wait_val);
} wait_scratch SEC(".maps");

/* The CPUs' wait caches: LS_WAIT_CACHE_SLOTS slots per epoch half. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LS_WAIT_TABLES * LS_WAIT_CACHE_SLOTS);
	__type(key, __u32);
	__type(value, struct ls_wait_cached);
} wait_cache SEC(".maps");

/*
 * Per CPU: how many of our programs are inside a wait table or cache there now (nested:
 * an interrupt's program inside a task's). Only its own CPU reads and writes it: the
 * programs, with plain adds, and wait_barrier, which the daemon runs there. Tracepoints
 * call programs with preemption off (syscall tracepoints too, since they may fault: perf's
 * handler turns it off), so one is never left halfway for another task's: only an
 * interrupt's program comes in between, and it puts back what it found before the one it
 * interrupted goes on. A program that finds it above 0 interrupted another one and leaves
 * the cache slots to it: it uses the shared table.
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} wait_writers SEC(".maps");

/* Which table programs write; the daemon moves it on (lockscope.h). */
__u32 wait_epoch = 0;

/*
 * 1 when @v > @c, else 0, for @c < 2^63, without a branch: the top bit of @v, or of @c - @v,
 * which borrows when @v is the larger. BPF has no setcc, so the compiler's `v > c` is a
 * jump, and each jump of ls_log2() forks the verifier's state: 32 paths a bucket.
 */
static __always_inline __u64 ls_gt(__u64 v, __u64 c)
{
	__u64 d = c - v;

	barrier_var(d);		/* keep it arithmetic: the compiler knows the idiom */
	return (v | d) >> 63;
}

/*
 * floor(log2(@v)) for @v > 0, 0 for 0: the histogram bucket, branch-free as bcc's log2l().
 * 64-bit throughout: older verifiers (6.1) lose the bound of a 32-bit result that indexes
 * a map value.
 */
static __always_inline __u64 ls_log2(__u64 v)
{
	__u64 r, shift;

	r = ls_gt(v, 0xFFFFFFFFULL) << 5; v >>= r;
	shift = ls_gt(v, 0xFFFF) << 4; v >>= shift; r |= shift;
	shift = ls_gt(v, 0xFF) << 3; v >>= shift; r |= shift;
	shift = ls_gt(v, 0xF) << 2; v >>= shift; r |= shift;
	shift = ls_gt(v, 0x3) << 1; v >>= shift; r |= shift;
	return r | (v >> 1);
}

/* The histogram bucket of @wait_ns: 64-bit, bounded where the verifier can see it. */
static __always_inline __u64 ls_hist_bucket(__u64 wait_ns)
{
	__u64 b = ls_log2(wait_ns);

	return b < LS_HIST_BUCKETS ? b : LS_HIST_BUCKETS - 1;
}

/* *p = max(*p, v), racing other CPUs: retried while another writer moved it. */
static __always_inline void ls_atomic_max(__u64 *p, __u64 v)
{
	__u64 old = *p, seen;
	int i;

	for (i = 0; i < 4 && v > old; i++) {
		seen = __sync_val_compare_and_swap(p, old, v);
		if (seen == old)
			break;
		old = seen;
	}
}

static __always_inline void ls_atomic_min(__u64 *p, __u64 v)
{
	__u64 old = *p, seen;
	int i;

	for (i = 0; i < 4 && v < old; i++) {
		seen = __sync_val_compare_and_swap(p, old, v);
		if (seen == old)
			break;
		old = seen;
	}
}

/*
 * The names a new entry carries (copied once, when the key is first seen in this table):
 * where they are in kernel memory, each a task's comm; any but the waiter's may be NULL.
 */
struct ls_wait_names {
	const char *comm;		/* the waiter's: its task is found from it */
	const char *owner_comm;
	const char *releaser_comm;
};

/*
 * @o from @n: the names, and the waiter's process and cgroup from its task, the struct
 * @n->comm is in. Probe reads: a kernel-lock wait is counted after its end, when its task
 * may have exited (a name or id read then is wrong, never unsafe). Only a new entry pays
 * them, so this is a global function, verified once: inlined at wait_add()'s five places
 * (each way of the cache, the table, the ring), it was most of what the verifier walked in
 * klock's begin program, which counts the waits ended on its CPU in two places.
 */
__noinline int wait_origin(struct ls_wait_origin *o, const struct ls_wait_names *n)
{
	struct task_struct *t;

	if (!o)
		return 0;
	__builtin_memset(o, 0, sizeof(*o));
	if (!n)
		return 0;
	if (n->comm) {
		t = (struct task_struct *)((__u64)n->comm - bpf_core_field_offset(struct task_struct, comm));
		o->start_ns = BPF_CORE_READ(t, group_leader, start_boottime);
		o->cgroup_id = BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
		bpf_probe_read_kernel_str(o->comm, sizeof(o->comm), n->comm);
	}
	if (n->owner_comm)
		bpf_probe_read_kernel_str(o->owner_comm, sizeof(o->owner_comm), n->owner_comm);
	if (n->releaser_comm)
		bpf_probe_read_kernel_str(o->releaser_comm, sizeof(o->releaser_comm), n->releaser_comm);
	return 0;
}

/* One wait that found no room in the table: a ring record instead, so it is still counted. */
static __always_inline void wait_overflow(const struct ls_wait_key *key, __u64 wait_ns, bool nonblocking,
					  const struct ls_wait_names *names)
{
	struct ls_wait_rec *r;
	void *rb;

	r = ls_reserve(&rb, LS_REC_WAIT, sizeof(*r));
	if (!r) {
		ls_count(LS_DROP_WAIT_TABLE);
		return;
	}
	r->key = *key;
	r->wait_ns = wait_ns;
	r->nonblocking = nonblocking;
	r->pad = 0;
	wait_origin(&r->who, names);
	ls_count(LS_CNT_TABLE_FULL);
	ls_submit(rb, r);
}

static __always_inline struct ls_wait_val *wait_entry(void *table, const struct ls_wait_key *key,
						      const struct ls_wait_names *names)
{
	struct ls_wait_val *v = bpf_map_lookup_elem(table, key), *init;
	__u32 zero = 0;

	if (v)
		return v;
	init = bpf_map_lookup_elem(&wait_scratch, &zero);
	if (!init)
		return NULL;
	__builtin_memset(init, 0, sizeof(*init));
	init->min_ns = ~0ULL;
	wait_origin(&init->who, names);
	/* another CPU may have added it meanwhile: then its entry is the one */
	bpf_map_update_elem(table, key, init, BPF_NOEXIST);
	return bpf_map_lookup_elem(table, key);
}

static __always_inline void wait_count(struct ls_wait_val *v, __u64 wait_ns, bool nonblocking)
{
	if (nonblocking) {
		__sync_fetch_and_add(&v->nonblocking, 1);
		return;
	}
	__sync_fetch_and_add(&v->count, 1);
	__sync_fetch_and_add(&v->total_ns, wait_ns);
	ls_atomic_max(&v->max_ns, wait_ns);
	ls_atomic_min(&v->min_ns, wait_ns);
	__sync_fetch_and_add(&v->hist[ls_hist_bucket(wait_ns)], 1);
}

/* The key as five words: compared and hashed without a loop the verifier must unroll. */
static __always_inline bool wait_key_eq(const struct ls_wait_key *a, const struct ls_wait_key *b)
{
	const __u64 *x = (const __u64 *)a, *y = (const __u64 *)b;

	return x[0] == y[0] && x[1] == y[1] && x[2] == y[2] && x[3] == y[3] && x[4] == y[4];
}

static __always_inline __u32 wait_key_slot(const struct ls_wait_key *k)
{
	const __u64 *x = (const __u64 *)k;
	__u64 h = (x[0] ^ (x[1] * 0x9E3779B97F4A7C15ULL) ^ x[2] ^ (x[3] << 7) ^ x[4]) * 0x9E3779B97F4A7C15ULL;

	return h >> 56;	/* LS_WAIT_CACHE_SLOTS is 2^8 */
}

/*
 * Whether cache slot @c is @key's in @epoch: it was, or it was free (an older epoch of
 * this half was drained already) and now is.
 */
static __always_inline bool wait_cache_claim(struct ls_wait_cached *c, const struct ls_wait_key *key, __u32 epoch,
					     const struct ls_wait_names *names)
{
	if (c->used && c->epoch == epoch)
		return wait_key_eq(&c->key, key);
	__builtin_memset(&c->val, 0, sizeof(c->val));
	c->key = *key;
	c->val.min_ns = ~0ULL;
	wait_origin(&c->val.who, names);
	c->epoch = epoch;
	c->used = 1;
	return true;
}

/* slot ^ way stays in the set and in the half */
_Static_assert((LS_WAIT_CACHE_WAYS & (LS_WAIT_CACHE_WAYS - 1)) == 0 && LS_WAIT_CACHE_WAYS <= LS_WAIT_CACHE_SLOTS,
	       "cache ways: a power of 2, at most the slots");

/*
 * One wait into this CPU's cache slot for @key in the half of @epoch: true when done,
 * false when its set's slots hold other keys. Slots are freed only with their epoch, so a
 * key's place is the same for the whole epoch: the first slot of its set that was free
 * when it first came. Only for a program that interrupted none of ours on this CPU.
 */
static __always_inline bool wait_cache_add(const struct ls_wait_key *key, __u32 epoch, __u64 wait_ns,
					   bool nonblocking, const struct ls_wait_names *names)
{
	/* the set: LS_WAIT_CACHE_WAYS aligned slots, the hash's first */
	__u32 base = (epoch & (LS_WAIT_TABLES - 1)) * LS_WAIT_CACHE_SLOTS, slot = wait_key_slot(key);
	struct ls_wait_cached *c = NULL;
	bool done = false;
	__u32 idx;
	int way;

	for (way = 0; way < LS_WAIT_CACHE_WAYS && !done; way++) {
		idx = base + (slot ^ way);
		c = bpf_map_lookup_elem(&wait_cache, &idx);
		if (!c)
			break;
		done = wait_cache_claim(c, key, epoch, names);
	}
	if (!done || !c)
		return false;
	if (nonblocking) {
		c->val.nonblocking++;
		return true;
	}
	c->val.count++;
	c->val.total_ns += wait_ns;
	if (wait_ns > c->val.max_ns)
		c->val.max_ns = wait_ns;
	if (wait_ns < c->val.min_ns)
		c->val.min_ns = wait_ns;
	c->val.hist[ls_hist_bucket(wait_ns)]++;
	return true;
}

/*
 * Adds one wait of @wait_ns (or, @nonblocking, one call that did not wait) to @key's entry
 * in the table being written. Counted in this CPU's writers before the epoch is read: the
 * daemon, which moves the epoch on and then asks each CPU's count there (wait_barrier),
 * either finds this program inside or makes it read the new epoch. The compiler keeps the
 * order (barrier()); the CPU needs no fence, its own interrupt sees its stores in order.
 */
static __always_inline void wait_add(const struct ls_wait_key *key, __u64 wait_ns, bool nonblocking,
				     const struct ls_wait_names *names)
{
	__u32 zero = 0, *writers = bpf_map_lookup_elem(&wait_writers, &zero), nested, epoch;
	struct ls_wait_val *v = NULL;
	void *table;

	if (!writers)
		return;
	nested = *writers;
	*writers = nested + 1;
	barrier();
	epoch = *(volatile __u32 *)&wait_epoch;
	/* an interrupted program of ours may be halfway through a cache slot: not nested ones */
	if (!nested && wait_cache_add(key, epoch, wait_ns, nonblocking, names)) {
		barrier();
		*writers = nested;
		return;
	}
	ls_count(LS_CNT_WAIT_SHARED);
	epoch &= LS_WAIT_TABLES - 1;
	table = bpf_map_lookup_elem(&wait_tables, &epoch);
	if (table)
		v = wait_entry(table, key, names);
	if (v)
		wait_count(v, wait_ns, nonblocking);
	barrier();
	*writers = nested;
	if (!v)
		wait_overflow(key, wait_ns, nonblocking, names);
}

/*
 * Run by the daemon on each CPU (BPF_PROG_TEST_RUN, BPF_F_TEST_RUN_ON_CPU: an interrupt
 * there, or the daemon's own task when it is that CPU) after it moved the epoch on:
 * LS_WAIT_BARRIER_BUSY while a program of ours is inside a table there, which may have
 * read the old epoch; 0 when none is, and any that starts later reads the new one.
 */
SEC("raw_tp")
int wait_barrier(void *ctx)
{
	__u32 zero = 0, *writers = bpf_map_lookup_elem(&wait_writers, &zero);

	return writers && *writers ? LS_WAIT_BARRIER_BUSY : 0;
}

/*
 * wait_add() as a global function, verified once, for a program that counts waits in many
 * places: inlined at each of sched_switch's (the futex, block and preemption paths), its
 * paths multiplied the verifier's work to 0.7 of its million instructions, and past them
 * once new entries read their waiter's process and cgroup. So sched_switch inlines it at
 * one place only, the switch in that ends most waits, and calls this at the rare others
 * (a preempted holder, a switch in the kernel skipped); klock counts in one place and
 * inlines it. On a host that returns through the SRSO thunk the call, its return and the
 * key's copy cost contention_begin 20 ns, and sched_switch 9-36 ns an event where futex
 * waits end (stress-ng --mutex, wake_storm: docs/performance.md).
 */
__noinline int wait_add_subprog(const struct ls_wait_key *arg, __u64 wait_ns, bool nonblocking,
				const struct ls_wait_names *names)
{
	struct ls_wait_key key;

	if (!arg || !names)
		return 0;
	/* a map's key is on the stack for 6.1's verifier, not in an argument's memory */
	key = *arg;
	wait_add(&key, wait_ns, nonblocking, names);
	return 0;
}

#endif /* __LS_WAITS_BPF_H */

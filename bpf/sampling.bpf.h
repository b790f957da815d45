/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The stack sampler every component uses: counting and timing are exact for every wait,
 * stacks are not. A stack walk costs 10-40x the rest of a program, so each lock has a
 * token bucket that allows stack_rate stacks per second (per CPU) and each CPU a budget of
 * cpu_stack_rate. A lock below its rate gets a stack on every wait; above it, a sample of
 * its waits does, and the daemon scales each caller's share of the sample up to the exact
 * totals of the same thread and lock.
 *
 * Each component's object has its own buckets (they are not shared like the rings), so
 * kernel and user locks have separate budgets.
 *
 * A count bounds what stacks cost only as far as each costs the same, and a kernel stack
 * walk does not: 2.5 us where the unwinder's tables are hot (a stack per event, as perf
 * takes them), 7-8 us in a sparse sample, deeper stacks more. So a CPU also has a budget
 * of time: stack_budget_ppm of it (microseconds per second). A component whose stacks
 * vary so times each sample and charges what it took (sample_stack_spent(); klock does,
 * from the clock it reads after its stacks anyway); one that does not charge is held by
 * its counts alone.
 */
#ifndef __LS_SAMPLING_BPF_H
#define __LS_SAMPLING_BPF_H

#include "lockscope.h"
#include "common.bpf.h"

#define LS_NSEC_PER_SEC 1000000000ULL
#define LS_NSEC_PER_MSEC 1000000ULL
#define LS_NSEC_PER_USEC 1000ULL
#define LS_PPM 1000000ULL	/* stack_budget_ppm's whole: a CPU's every microsecond */

/* Stack budgets, in nanoseconds of credit per stack; 0 turns stacks off. */
const volatile __u64 lock_stack_cost_ns = LS_NSEC_PER_SEC / LS_DEF_STACK_RATE;
const volatile __u64 cpu_stack_cost_ns = LS_NSEC_PER_SEC / LS_DEF_CPU_STACK_RATE;
/* lock_buckets' max_entries - 1 */
const volatile __u32 lock_bucket_mask = LS_DEF_MAX_LOCKS - 1;
/*
 * The most credit a CPU's bucket saves up: its burst. A second's worth by default; less
 * where each stack is a large ring record (user stack dumps), so that a burst after a
 * quiet spell fits in the ring instead of overflowing it.
 */
const volatile __u64 cpu_burst_ns = LS_NSEC_PER_SEC;
/* Stack time a CPU may spend per second of its time, in us (ppm); at most a second's saved. */
const volatile __u64 stack_budget_ppm = LS_DEF_STACK_BUDGET_US;

struct stack_bucket {
	__u64 last_ns;
	__u64 credit_ns;
};

/*
 * Per lock and per CPU, so a bucket's credit never races. Direct-mapped by a hash of the
 * lock address rather than an LRU hash keyed by it: an array lookup costs a few ns, an LRU
 * lookup ~10x that on every wait. Locks that share a bucket share its rate, which only
 * makes sampling start earlier for them. max_entries is a power of two (set by the daemon).
 */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LS_DEF_MAX_LOCKS);
	__type(key, __u32);
	__type(value, struct stack_bucket);
} lock_buckets SEC(".maps");

/*
 * A CPU's budget, and the earliest time a lock's wait may ask it again after it refused:
 * on the clock of sample_stack()'s callers, which is not the budget's own where they pass
 * the run queue's. Credit grows no faster than time, so until then the answer is no and
 * the clock need not be read to know it: a lock whose turn has come keeps asking at every
 * wait while the CPU's budget is spent (by other locks, by the samplers), and the
 * monotonic clock cost each of those 30-40 ns (measured: 136-144 against 106 ns a switch
 * on ping-pong's blocking waits, where two pipes' 200 stacks/s each met the CPU's 200
 * dumps/s).
 */
struct cpu_stack_bucket {
	struct stack_bucket bucket;
	__u64 retry_ns;
	/*
	 * The time budget: ns of stack work earned (stack_budget_ppm of the time passed on
	 * the monotonic clock) less those spent. Below 0 after a stack that cost more than
	 * was left: the next waits until it is earned back.
	 */
	__s64 time_credit_ns;
	__u64 time_last_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_stack_bucket);
} cpu_bucket SEC(".maps");

static __always_inline void bucket_refill(struct stack_bucket *b, __u64 now, __u64 max)
{
	__u64 credit;

	/*
	 * The scheduler's lock buckets run on the run queue's clock, which lags by up to a
	 * tick where a precise wait opens, off the switch (sched_now()): time that seems to
	 * go back earns nothing, and is not taken back either
	 */
	if ((__s64)(now - b->last_ns) <= 0)
		return;
	credit = b->credit_ns + (now - b->last_ns);

	/* bounded credit: a quiet lock earns no backlog of stacks */
	b->credit_ns = credit > max ? max : credit;
	b->last_ns = now;
}

/* Whether bucket @b allows @cost_ns and still holds @keep_ns, and spends @cost_ns if so. */
static __always_inline bool bucket_take_keep(struct stack_bucket *b, __u64 now, __u64 burst_ns, __u64 cost_ns,
					     __u64 keep_ns)
{
	if (!b || !cost_ns)
		return false;
	bucket_refill(b, now, burst_ns);
	if (b->credit_ns < cost_ns + keep_ns)
		return false;
	b->credit_ns -= cost_ns;
	return true;
}

/* Whether bucket @b allows one more @cost_ns, and spends it if so. */
static __always_inline bool bucket_take(struct stack_bucket *b, __u64 now, __u64 burst_ns, __u64 cost_ns)
{
	return bucket_take_keep(b, now, burst_ns, cost_ns, 0);
}

/* Whether bucket @b, of a steady rate (@cost_ns its burst), has a stack due at @now; spends nothing. */
static __always_inline bool bucket_due(const struct stack_bucket *b, __u64 now, __u64 cost_ns)
{
	__s64 passed;

	if (!b || !cost_ns)
		return false;
	passed = now - b->last_ns;
	return b->credit_ns + (passed > 0 ? passed : 0) >= cost_ns;
}

static __always_inline struct cpu_stack_bucket *cpu_stack_bucket(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&cpu_bucket, &zero);
}

/*
 * The time budget earned up to @clock (monotonic); whether it has any left. A second's
 * earnings at most: a quiet CPU saves no more than that for a burst.
 */
static __always_inline bool time_credit(struct cpu_stack_bucket *cb, __u64 clock)
{
	const __s64 max = stack_budget_ppm * LS_NSEC_PER_USEC;
	__u64 passed = clock - cb->time_last_ns;
	__s64 credit;

	if ((__s64)passed > 0) {
		if (passed > LS_NSEC_PER_SEC)
			passed = LS_NSEC_PER_SEC;
		credit = cb->time_credit_ns + (__s64)(passed * stack_budget_ppm / LS_PPM);
		cb->time_credit_ns = credit > max ? max : credit;
		cb->time_last_ns = clock;
	}
	return cb->time_credit_ns > 0;
}

/*
 * What a sampled wait's stacks took, @ns, charged to this CPU's time budget, and counted.
 * A CPU that went into debt asks again only once it is earned back (retry_ns, on the
 * clock of the component's sample_stack() calls: the monotonic one where it charges).
 */
static __always_inline void sample_stack_spent(__u64 now, __u64 ns)
{
	struct cpu_stack_bucket *cb = cpu_stack_bucket();
	__s64 credit;

	ls_count_add(LS_CNT_STACK_NS, ns);
	if (!cb)
		return;
	credit = cb->time_credit_ns - (__s64)ns;
	cb->time_credit_ns = credit;
	if (credit <= 0 && stack_budget_ppm)
		cb->retry_ns = now + (__u64)(-credit) * LS_PPM / stack_budget_ppm + 1;
}

/* Whether the CPU's budget allows one more stack, and spends it if so. */
static __always_inline bool sample_cpu_stack(__u64 now)
{
	struct cpu_stack_bucket *cb = cpu_stack_bucket();

	return cb && bucket_take(&cb->bucket, now, cpu_burst_ns, cpu_stack_cost_ns);
}

/*
 * Whether this wait may take stacks: its lock's bucket has credit, and then its CPU's
 * (the lock's credit is spent only when the CPU's was). @now: the caller's clock, which
 * only the lock's bucket sees; the CPU's, which samplers share, runs on the monotonic
 * clock (@now itself when @monotonic), read only when the lock's bucket allows a stack.
 * @stacks: what the sample will take from the CPU's budget, 2 when its releaser's stack
 * is taken too (later, on the waker's CPU: paid here, so that it is never refused).
 * @sampler: the bucket of a sampler that shares the CPU's (a per-CPU array of one; NULL:
 * none), of a steady rate of one stack per @sampler_cost_ns, looked up only for a wait
 * whose lock has credit. While it has a stack due, the wait leaves one of the
 * CPU's for it: a wait that pays for two would otherwise take every pair the moment the
 * CPU has earned it (it asks again exactly then, retry_ns), and the sampler, which asks
 * at its own ticks, would get what is left of the budget or nothing.
 */
static __always_inline bool sample_stack(__u64 lock, __u64 now, bool monotonic, __u32 stacks,
					 void *sampler, __u64 sampler_cost_ns)
{
	/* never more than the bucket holds (a ring with room for one dump a burst), or never paid */
	__u64 cpu_cost = cpu_stack_cost_ns * stacks < cpu_burst_ns ? cpu_stack_cost_ns * stacks : cpu_burst_ns;
	__u64 keep = 0;
	/* locks are at least 4-byte aligned; fold the address and spread it (Fibonacci) */
	__u32 idx = (__u32)(((lock >> 2) * 0x9E3779B97F4A7C15ULL) >> 32) & lock_bucket_mask;
	struct cpu_stack_bucket *cb;
	struct stack_bucket *lb;
	__u64 clock;

	if (!lock_stack_cost_ns)
		return false;
	lb = bpf_map_lookup_elem(&lock_buckets, &idx);
	/*
	 * Read before it is written: a hot lock's bucket is every CPU's, and written on each
	 * of its waits its line moved between the CPUs on each (most find no stack due)
	 */
	if (!bucket_due(lb, now, lock_stack_cost_ns))
		return false;
	bucket_refill(lb, now, LS_NSEC_PER_SEC);
	if (lb->credit_ns < lock_stack_cost_ns)
		return false;
	cb = cpu_stack_bucket();
	if (!cb || (__s64)(now - cb->retry_ns) < 0)
		return false;
	clock = monotonic ? now : bpf_ktime_get_ns();
	if (!time_credit(cb, clock))
		return false;
	/* what the sampler is kept, never so much that the wait could not be paid at all */
	if (sampler && cpu_cost + cpu_stack_cost_ns <= cpu_burst_ns &&
	    bucket_due(bpf_map_lookup_elem(sampler, &(__u32){ 0 }), clock, sampler_cost_ns))
		keep = cpu_stack_cost_ns;
	if (!bucket_take_keep(&cb->bucket, clock, cpu_burst_ns, cpu_cost, keep)) {
		if (cpu_cost + keep > cb->bucket.credit_ns)
			cb->retry_ns = now + (cpu_cost + keep - cb->bucket.credit_ns);
		return false;
	}
	lb->credit_ns -= lock_stack_cost_ns;
	return true;
}

#endif /* __LS_SAMPLING_BPF_H */

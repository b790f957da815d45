// SPDX-License-Identifier: GPL-2.0
/*
 * The bound of `make bench`: the least work any tracer must do on lockscoped's hooks to
 * count and time every wait exactly, with nothing else. Where the floor (floor.bpf.c) is
 * the price of being on the hooks, this is the price of the figures lockscope promises:
 * what a configuration costs beyond it is lockscope's design, what it costs is no design's.
 *
 * Every shortcut makes it cheaper than a real tracer, never dearer, so that a loss this
 * bound already shows is a loss no exact tracer avoids on this host:
 * - one wait per CPU or thread slot, no nesting, no lock or thread filter;
 * - totals per CPU, not per lock, thread or owner; no stacks, names, owners or wakers;
 * - a futex wait ends at the thread's next switch in (the pending filter, the slot);
 * - the run queue's clock at the switch (free there), the monotonic one around a lock.
 * The spin sampler stays empty, as in the floor. It still counts what
 * happened: test_bench checks its kernel-lock waits against perf's count of
 * lock:contention_end and its futex waits against mutex_server's own count of its sleeps.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "arch.bpf.h"
#include "scheduler.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct start {
	__u64 key;	/* the lock's address, or the thread's tid */
	__u64 ns;	/* 0: no wait open */
};

struct total {
	__u64 count;
	__u64 ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct start);
} lock_start SEC(".maps");

/* thread slots, indexed by the tid's low bits as lockscope's slot cache is */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ULOCK_SLOT_CACHE);
	__type(key, __u32);
	__type(value, struct start);
} futex_start SEC(".maps");

/* [0] kernel-lock waits, [1] futex waits: what a reader would check the bound counted */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct total);
} totals SEC(".maps");

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

/* pt_regs' offset from task->stack, as lockscope's direct loads use it (the first switch sets it) */
__u64 regs_off;

static __always_inline void add(__u32 which, __u64 ns)
{
	struct total *t = bpf_map_lookup_elem(&totals, &which);

	if (t) {
		t->count++;
		t->ns += ns;
	}
}

SEC("tp_btf/contention_begin")
int BPF_PROG(klock_begin, void *lock, unsigned int flags)
{
	__u32 zero = 0;
	struct start *s = bpf_map_lookup_elem(&lock_start, &zero);

	if (s) {
		s->key = (__u64)lock;
		s->ns = bpf_ktime_get_ns();
	}
	return 0;
}

SEC("tp_btf/contention_end")
int BPF_PROG(klock_end, void *lock, int ret)
{
	__u32 zero = 0;
	struct start *s = bpf_map_lookup_elem(&lock_start, &zero);

	if (s && s->key == (__u64)lock && s->ns) {
		add(0, bpf_ktime_get_ns() - s->ns);
		s->ns = 0;
	}
	return 0;
}

static __always_inline struct start *futex_slot(__u32 tid)
{
	__u32 idx = tid & (ULOCK_SLOT_CACHE - 1);

	return bpf_map_lookup_elem(&futex_start, &idx);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(scheduler_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = prev->se.cfs_rq->rq->clock, stack;
	struct pt_regs *regs;
	struct start *s;
	__u32 op;

	if (!preempt && prev_state && prev->mm) {
		stack = (__u64)prev->stack;
		if (!regs_off && stack)
			regs_off = (__u64)bpf_task_pt_regs(prev) - stack;
		regs = bpf_rdonly_cast((void *)(stack + regs_off), bpf_core_type_id_kernel(struct pt_regs));
		op = LS_SYSCALL_ARG2(regs) & ULOCK_FUTEX_CMD_MASK;
		if (LS_SYSCALL_NR(regs) == LS_SYS_FUTEX && (op == ULOCK_FUTEX_WAIT || op == ULOCK_FUTEX_WAIT_BITSET) &&
		    (s = futex_slot(prev->pid))) {
			s->key = prev->pid;
			s->ns = now;
		}
	}
	s = futex_slot(next->pid);
	if (s && s->ns && s->key == (__u32)next->pid) {
		add(1, now - s->ns);
		s->ns = 0;
	}
	return 0;
}

SEC("perf_event") int scheduler_spin_sample(void *ctx) { return 0; }

// SPDX-License-Identifier: GPL-2.0
/*
 * What one helper call or map lookup costs on this host, the unit lockscope's programs are
 * built from: one program per operation on sched_switch, all attached at once, each doing
 * nothing else. The kernel times each program on its own (kernel.bpf_stats_enabled), so
 * one run of a switch-heavy workload gives every figure; an operation's cost is its
 * program's ns per event less the empty program's (`floor --helpers`, `make bench`).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "arch.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* As big as the maps the scheduler programs look threads up in (scheduler.h's sizes). */
enum { THREADS = 16384, SLOT_CACHE = 8192 };

struct slot {
	__u64 words[26];	/* struct sched_slot's 208 bytes */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, THREADS);
	__type(key, __u32);
	__type(value, struct slot);
} by_tid SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, SLOT_CACHE);
	__type(key, __u32);
	__type(value, struct slot);
} by_index SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} per_cpu SEC(".maps");

/* Where results go, so that the compiler keeps every operation. */
__u64 sink;

static const struct slot empty;

SEC("tp_btf/sched_switch")
int BPF_PROG(empty_program, bool preempt, struct task_struct *prev)
{
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(ktime_get_ns, bool preempt, struct task_struct *prev)
{
	sink = bpf_ktime_get_ns();
	return 0;
}

/* What sched_now() reads instead: the run queue's clock, through the task's cfs_rq. */
SEC("tp_btf/sched_switch")
int BPF_PROG(rq_clock_load, bool preempt, struct task_struct *prev)
{
	struct cfs_rq *cfs;

	if (!bpf_core_field_exists(prev->se.cfs_rq))
		return 0;
	cfs = prev->se.cfs_rq;
	if (cfs)
		sink = cfs->rq->clock;
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(get_current_comm, bool preempt, struct task_struct *prev)
{
	char comm[16];

	bpf_get_current_comm(comm, sizeof(comm));
	sink = comm[0];
	return 0;
}

/* What sched_waking copies the waker's name with instead. */
SEC("tp_btf/sched_switch")
int BPF_PROG(comm_loads, bool preempt, struct task_struct *prev)
{
	char comm[16];

	__builtin_memcpy(comm, prev->comm, sizeof(comm));
	sink = comm[0] + comm[15];
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(get_current_task_btf, bool preempt, struct task_struct *prev)
{
	sink = bpf_get_current_task_btf()->pid;
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(get_current_pid_tgid, bool preempt, struct task_struct *prev)
{
	sink = bpf_get_current_pid_tgid();
	return 0;
}

/* The syscall a task is switched out in: the helper, and the load from its registers. */
SEC("tp_btf/sched_switch")
int BPF_PROG(task_pt_regs_syscall, bool preempt, struct task_struct *prev)
{
	sink = LS_SYSCALL_NR((struct pt_regs *)bpf_task_pt_regs(prev));
	return 0;
}

/* A thread's entry in a hash keyed by tid, made on its first switch as thread_slots' are. */
SEC("tp_btf/sched_switch")
int BPF_PROG(hash_lookup, bool preempt, struct task_struct *prev)
{
	__u32 tid = prev->pid;
	struct slot *s = bpf_map_lookup_elem(&by_tid, &tid);

	if (s)
		sink = s->words[0];
	else
		bpf_map_update_elem(&by_tid, &tid, &empty, BPF_NOEXIST);
	return 0;
}

/* The same in an array indexed by the tid's low bits, as slot_cache's. */
SEC("tp_btf/sched_switch")
int BPF_PROG(array_lookup, bool preempt, struct task_struct *prev)
{
	__u32 idx = prev->pid & (SLOT_CACHE - 1);
	struct slot *s = bpf_map_lookup_elem(&by_index, &idx);

	if (s)
		sink = s->words[0];
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(percpu_array_lookup, bool preempt, struct task_struct *prev)
{
	__u32 zero = 0;
	__u64 *v = bpf_map_lookup_elem(&per_cpu, &zero);

	if (v)
		sink = *v;
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * schedstat: voluntary and involuntary switches, on-CPU time, time asleep and time waiting in a
 * run queue, per thread. sched_switch fires on every switch of the host, so the program
 * is two hash lookups and a few adds: no ring record, no stack. The daemon reads the map.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "schedstat.h"
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define TASK_RUNNING 0

/*
 * Keyed by tid; preallocated (switch and wakeup hooks run under the runqueue lock, where
 * an allocation can deadlock). The daemon deletes the entries of threads that exited.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, SCHED_DEF_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct sched_thread);
} threads SEC(".maps");

static const struct sched_thread empty_thread;

static __always_inline struct sched_thread *thread_get(struct task_struct *t)
{
	__u32 tid = t->pid;
	struct sched_thread *st = bpf_map_lookup_elem(&threads, &tid);

	if (st)
		return st;
	if (bpf_map_update_elem(&threads, &tid, &empty_thread, BPF_NOEXIST) &&
	    !bpf_map_lookup_elem(&threads, &tid)) {
		ls_count(LS_DROP_SCHED_FULL);
		return NULL;
	}
	st = bpf_map_lookup_elem(&threads, &tid);
	if (st) {
		st->tgid = t->tgid;
		bpf_probe_read_kernel_str(st->comm, sizeof(st->comm), t->comm);
	}
	return st;
}

/* Closes the interval the thread spent in its last state. */
static __always_inline void account(struct sched_thread *st, __u64 now)
{
	__u64 d = now - st->last_ns;

	switch (st->state) {
	case SCHED_T_ONCPU:
		st->oncpu_ns += d;
		break;
	case SCHED_T_BLOCKED:
		st->blocked_ns += d;
		break;
	case SCHED_T_RUNNABLE:
		st->runq_ns += d;
		break;
	}
	st->last_ns = now;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	__u64 now = bpf_ktime_get_ns();
	struct sched_thread *st;

	if (!enabled)
		return 0;
	/* the idle task is not a thread of anyone's */
	if (prev->pid && ls_tgid_wanted(prev->tgid) && (st = thread_get(prev))) {
		account(st, now);
		/* comm changes (exec, pthread_setname_np): keep the latest, 16 bytes */
		__builtin_memcpy(st->comm, prev->comm, sizeof(st->comm));
		if (!preempt && prev_state != TASK_RUNNING) {
			st->voluntary++;
			st->state = SCHED_T_BLOCKED;
		} else {
			st->involuntary++;
			st->state = SCHED_T_RUNNABLE;
		}
	}
	if (next->pid && ls_tgid_wanted(next->tgid) && (st = thread_get(next))) {
		account(st, now);
		st->state = SCHED_T_ONCPU;
	}
	return 0;
}

static __always_inline void woken(struct task_struct *p)
{
	struct sched_thread *st;

	if (!enabled || !p->pid || !ls_tgid_wanted(p->tgid) || !(st = thread_get(p)))
		return;
	/* a task woken while it still runs (before it switched out) stays on CPU */
	if (st->state == SCHED_T_ONCPU)
		return;
	account(st, bpf_ktime_get_ns());
	st->state = SCHED_T_RUNNABLE;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	woken(p);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(sched_wakeup_new, struct task_struct *p)
{
	woken(p);
	return 0;
}

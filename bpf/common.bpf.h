/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * BPF-only pieces every lockscope component uses: the per-CPU ring buffers, the counters
 * and the filters. Each component's object declares these maps under the same names; the
 * daemon creates them once and hands the same fds to every component (bpf_map__reuse_fd),
 * so all records arrive through one set of rings and all counters sum in one place.
 */
#ifndef __LS_COMMON_BPF_H
#define __LS_COMMON_BPF_H

#include "lockscope.h"

/* Only a template: the daemon creates one RINGBUF per CPU of the configured size. */
struct ls_ringbuf_inner {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
};

/*
 * One ring per CPU, so writers on different CPUs never share a ring's spinlock and a
 * storm on one CPU cannot push out another CPU's records. Sized to the CPU count by the
 * daemon before load.
 */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1);
	__type(key, __u32);
	__array(values, struct ls_ringbuf_inner);
} ringbufs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LS_CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Load-time settings shared by all components (rodata, set before load). */
const volatile __u32 targ_tgid = 0;		/* 0: every process */
/*
 * Wake the reader only once this much is queued: the daemon drains every ring on a short
 * timer anyway, and a wakeup per record would cost more than the record.
 */
const volatile __u64 wakeup_bytes = 0;

/*
 * Plain loads through a pointer the verifier cannot type (6.2+; faulting-safe, as a
 * probe read is, without its helper call). Only the program variants the daemon loads
 * where kfuncs exist call it.
 */
extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym __weak;

/* Runtime switch: collector__start()/stop() flip it without detaching. */
bool enabled = false;

static __always_inline void ls_count_add(enum ls_counter c, __u64 n)
{
	__u32 key = c;
	__u64 *val = bpf_map_lookup_elem(&counters, &key);

	if (val)
		*val += n;	/* per-CPU slot: no other writer */
}

static __always_inline void ls_count(enum ls_counter c)
{
	ls_count_add(c, 1);
}

static __always_inline bool ls_tgid_wanted(__u32 tgid)
{
	return enabled && (!targ_tgid || targ_tgid == tgid);
}

static __always_inline void *ls_ringbuf(void)
{
	__u32 cpu = bpf_get_smp_processor_id();

	return bpf_map_lookup_elem(&ringbufs, &cpu);
}

static __always_inline void ls_hdr_init(struct ls_rec_hdr *hdr, enum ls_rec_type type, __u32 size)
{
	hdr->type = type;
	hdr->size = size;
	hdr->cpu = bpf_get_smp_processor_id();
}

/*
 * Reserves a record of @type and @size (a constant) on this CPU's ring and fills its
 * header; *rb receives the ring for ls_submit(). A full ring is counted as a drop.
 */
static __always_inline void *ls_reserve(void **rb, enum ls_rec_type type, __u32 size)
{
	struct ls_rec_hdr *r = NULL;

	*rb = ls_ringbuf();
	if (*rb)
		r = bpf_ringbuf_reserve(*rb, size, 0);
	if (!r) {
		ls_count(LS_DROP_RINGBUF);
		return NULL;
	}
	ls_hdr_init(r, type, size);
	return r;
}

/*
 * Submits a record nobody waits for: the daemon's timer drains it (ENGINE_TICK_MS) unless
 * the ring is three quarters full. A sampler's records must not wake the reader at the
 * instants it samples: the reader then preempts the sampled program's threads right after
 * samples, and the next samples land in what that preemption caused (a preempted lock
 * holder's waiters spinning), not in a fair sample of the program's time.
 */
static __always_inline void ls_submit_lazy(void *rb, void *rec)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA) >= wakeup_bytes + wakeup_bytes / 2) {
		flags = BPF_RB_FORCE_WAKEUP;
		ls_count(LS_CNT_RB_WAKEUPS);
	}
	bpf_ringbuf_submit(rec, flags);
}

static __always_inline void ls_submit(void *rb, void *rec)
{
	__u64 flags = BPF_RB_NO_WAKEUP;

	if (bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA) >= wakeup_bytes) {
		flags = BPF_RB_FORCE_WAKEUP;
		ls_count(LS_CNT_RB_WAKEUPS);
	}
	bpf_ringbuf_submit(rec, flags);
}

#endif /* __LS_COMMON_BPF_H */

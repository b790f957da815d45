// SPDX-License-Identifier: GPL-2.0
/*
 * The collector's options checked and its budgets sized: pure functions of the options,
 * so the rules are tested without a kernel (tests/unit/test_collect.c).
 */
#include <errno.h>
#include <stdio.h>
#include "collect/collector.h"
#include "lockscope.h"
#include "ustack.h"

/* A stack window of @bytes fits the ring a few times over, or is 0 (no dumps). */
static bool dump_bytes_ok(const struct collector_opts *o, __u32 bytes)
{
	return !bytes || (bytes >= LS_USTACK_MIN_BYTES && bytes <= LS_USTACK_MAX_BYTES && !(bytes % 8) &&
			  bytes <= o->ringbuf_bytes / 8);
}

static bool power_of_two(__u32 n)
{
	return n && !(n & (n - 1));
}

int collector_opts__check(const struct collector_opts *o, __u32 page_size, char *err, size_t len)
{
	__u32 widest = o->ustack_bytes > o->spin_stack_bytes ? o->ustack_bytes : o->spin_stack_bytes;

	if (o->ringbuf_bytes < page_size || !power_of_two(o->ringbuf_bytes)) {
		snprintf(err, len, "ringbuf-kb=%u: a ring is a power of two of at least a page (%u KiB)",
			 o->ringbuf_bytes / 1024, page_size / 1024);
		return -EINVAL;
	}
	if (!o->max_stack || o->max_stack > LS_MAX_STACK_DEPTH) {
		snprintf(err, len, "max-stack=%u: frames kept per stack are 1 to %u", o->max_stack, LS_MAX_STACK_DEPTH);
		return -EINVAL;
	}
	/* a ring must hold a few dumps besides everything else: say which setting to change */
	if (!dump_bytes_ok(o, o->ustack_bytes) || (o->ustack_bytes && !dump_bytes_ok(o, o->spin_stack_bytes))) {
		snprintf(err, len, "ringbuf-kb=%u holds too few stack dumps of user-stack-bytes=%u and "
			 "spin-stack-bytes=%u: raise ringbuf-kb to %u or lower the dump windows",
			 o->ringbuf_bytes / 1024, o->ustack_bytes, o->spin_stack_bytes, widest * 8 / 1024);
		return -EINVAL;
	}
	if (!power_of_two(o->max_locks)) {
		snprintf(err, len, "max-locks=%u: the stack sampler's buckets are a power of two", o->max_locks);
		return -EINVAL;
	}
	return 0;
}

/*
 * A dump costs about what a frame-pointer walk does in BPF, but the daemon then unwinds
 * it (5-11 us measured): with dumps on, the per-CPU stack budget is the dump rate, and a
 * burst fills at most a quarter of the ring: one that begins where the reader is woken
 * (half full) still fits.
 */
__u64 collector_dump_burst_ns(const struct collector_opts *o, __u32 bytes, __u64 cost_ns)
{
	__u64 fit = o->ringbuf_bytes / 4 / (sizeof(struct ls_ustack_rec) + bytes);

	return cost_ns * (fit ? fit : 1);
}

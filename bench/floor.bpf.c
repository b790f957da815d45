// SPDX-License-Identifier: GPL-2.0
/*
 * The floor of `make bench`: empty programs on exactly the hooks lockscoped attaches at its
 * defaults. What a configuration costs beyond these is lockscope's own work; what these
 * cost is the price of being there at all. bench/run.py checks the list against the
 * daemon's `status` (each program's `hook`) before it measures anything. Each program is
 * named for the lockscope component whose hook it shadows. The ones marked on demand are
 * attached only with `floor --all` (lockscoped attaches them only while futex waits or
 * lock holders need them): per-event costs are compared on every hook.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* klock */
SEC("tp_btf/contention_begin") int klock_begin(void *ctx) { return 0; }
SEC("tp_btf/contention_end") int klock_end(void *ctx) { return 0; }
/* scheduler: one switch program, releasers off the waking, holder and spin samples */
SEC("tp_btf/sched_switch") int scheduler_switch(void *ctx) { return 0; }
SEC("tp_btf/sched_waking") int scheduler_waking(void *ctx) { return 0; }		/* on demand */
SEC("perf_event") int scheduler_hold_sample(void *ctx) { return 0; }		/* on demand */
SEC("perf_event") int scheduler_spin_sample(void *ctx) { return 0; }

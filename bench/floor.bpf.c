// SPDX-License-Identifier: GPL-2.0
/*
 * The floor of `make bench`: empty programs on exactly the hooks lockscoped attaches at its
 * defaults. What a configuration costs beyond these is lockscope's own work; what these
 * cost is the price of being there at all. bench/run.py checks the list against the
 * daemon's `status` (each program's `hook`) before it measures anything. Each program is
 * named for the lockscope component whose hook it shadows.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* klock */
SEC("tp_btf/contention_begin") int klock_begin(void *ctx) { return 0; }
SEC("tp_btf/contention_end") int klock_end(void *ctx) { return 0; }
/* ulock: futex waits off the switch, releasers off the waking, holder samples */
SEC("tp_btf/sched_switch") int ulock_switch(void *ctx) { return 0; }
SEC("tp_btf/sched_waking") int ulock_waking(void *ctx) { return 0; }
SEC("perf_event") int ulock_hold_sample(void *ctx) { return 0; }
/* schedstat: per-thread switches, wakeups, yields and spin samples */
SEC("tp_btf/sched_switch") int schedstat_switch(void *ctx) { return 0; }
SEC("tp_btf/sched_entry_tp") int schedstat_entry(void *ctx) { return 0; }
SEC("tp_btf/sched_wakeup") int schedstat_wakeup(void *ctx) { return 0; }
SEC("tp_btf/sched_wakeup_new") int schedstat_wakeup_new(void *ctx) { return 0; }
SEC("perf_event") int schedstat_cpu_sample(void *ctx) { return 0; }

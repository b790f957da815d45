/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The cpu-clock sampling event the samplers attach to (no hardware PMU needed): shared by
 * the daemon's collector and bench/floor, so the floor samples exactly as lockscoped does.
 */
#ifndef __LS_CPUCLOCK_H
#define __LS_CPUCLOCK_H

#include <linux/perf_event.h>
#include <stdbool.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A per-CPU cpu-clock event at @freq samples/s (created disabled if asked); fd or -1. */
static inline int ls_cpu_clock_open(int cpu, unsigned int freq, bool disabled)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_freq = freq,
		.freq = 1,
		.disabled = disabled,
	};

	return syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

#endif

/* SPDX-License-Identifier: GPL-2.0 */
/* Clocks, in nanoseconds: every layer stamps and compares times with these. */
#ifndef __LS_CLOCK_H
#define __LS_CLOCK_H

#include <stdint.h>
#include <time.h>

#define NSEC_PER_SEC 1000000000ULL
#define NSEC_PER_MSEC 1000000ULL

/* @id's time in ns. */
uint64_t ls_clock_ns(clockid_t id);
/* CLOCK_MONOTONIC: the clock BPF's timestamps (bpf_ktime_get_ns) use. */
uint64_t ls_now_ns(void);

#endif

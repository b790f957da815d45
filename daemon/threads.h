/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Per-thread scheduling, `lockscope threads`: switches counted in BPF (bpf/scheduler.h), read
 * once a second into a snapshot so rates cover the last one to two seconds, like
 * `pidstat -w 1`, and the host's cost of one context switch, measured as lmbench's
 * lat_ctx does.
 */
#ifndef __LS_THREADS_H
#define __LS_THREADS_H

#include <stdint.h>
#include <cjson/cJSON.h>

struct collector;
struct threads;

int threads__new(struct threads **out);
void threads__free(struct threads *t);
/* Takes this second's snapshot (rates are against the one before). */
void threads__tick(struct threads *t, const struct collector *c, uint64_t now);
/*
 * Adds to @o the rows of @pid (0: all) sorted by switches per second, at most @limit (0:
 * all), and the host figures. -EOPNOTSUPP or -EIO with *err set when it cannot.
 */
int threads__json(struct threads *t, const struct collector *c, uint32_t pid, uint32_t limit,
		  uint64_t now, cJSON *o, const char **err);
/*
 * Measures the cost of one context switch: two threads pinned to one CPU pass a byte
 * through two pipes @rounds times; the same pipe traffic without switching is subtracted.
 */
int threads__measure_switch_cost(struct threads *t, uint32_t rounds);
/*
 * The thread's events (nvcsw + I/O syscalls) in the baseline period that ended at its stop
 * (@stop_boot_ns on the boot clock, @stop_events then), from the snapshots: what a burst
 * after the resume is held to. -ENOENT when the thread was not seen long enough before.
 */
int threads__baseline(const struct threads *t, uint32_t tid, uint64_t stop_boot_ns, uint64_t stop_events,
		      uint64_t *events, uint64_t *ns);
uint64_t threads__switch_cost_ns(const struct threads *t);

#define THREADS_SWITCH_ROUNDS 20000

#endif

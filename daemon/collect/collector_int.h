/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The collector's insides, shared by collect/ only: collector.c loads and sizes the
 * programs and maps, attach.c attaches them (and the on-demand hooks and samplers),
 * drain.c reads what they wrote (rings, wait tables, scheduler maps, stacks, counters).
 */
#ifndef __LS_COLLECTOR_INT_H
#define __LS_COLLECTOR_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <bpf/libbpf.h>
#include "collect/collector.h"
#include "collect/probe.h"
#include "lockscope.h"

struct klock_bpf;
struct scheduler_bpf;

/*
 * Program variants, best first. One begin and one end program are autoloaded; when a
 * variant cannot be used (feature missing, verifier refuses) the next one is tried.
 */
struct klock_variant {
	const char *name;
	bool needs_tp_btf;
	bool needs_task_from_pid;
	struct bpf_program *(*begin)(struct klock_bpf *);
	struct bpf_program *(*end)(struct klock_bpf *);
};

/* The precise-mode programs: attached only while a precise scan runs. */
enum { PRECISE_PROGS = 4 };
/* The scheduler's tracepoint programs, in sched_prog()'s order. */
enum { SCHED_SWITCH, SCHED_WAKING, SCHED_PROGS };
/* Scheduler program @i: of two variants, @direct the one with plain loads (kfuncs, 6.2+). */
struct bpf_program *sched_prog_variant(struct scheduler_bpf *s, int i, bool direct);

/* A cpu-clock sampler: while on, an event with the program on each CPU; NULL while off. */
struct sampler {
	int *fds;			/* -1 where a CPU has none */
	struct bpf_link **links;
};

/* The maps klock and the scheduler share, which the collector makes (collector.c). */
enum shared_map {
	SHARED_RINGBUFS,	/* outer: a ring per CPU */
	SHARED_WAIT_TABLES,	/* outer: the two wait tables */
	SHARED_COUNTERS,
	SHARED_WAIT_CACHE,
	SHARED_WAIT_WRITERS,	/* per CPU: our programs inside a table there */
	SHARED_KHOLDERS,	/* kernel-lock holders, for the scheduler's switch */
	SHARED_MAPS,
};

struct collector {
	struct collector_opts opts;
	struct collector_features feat;
	const struct klock_variant *variant;
	struct klock_bpf *skel;
	struct bpf_link *links[2];
	struct bpf_program *progs[2];
	struct scheduler_bpf *sskel;
	struct bpf_link *slinks[SCHED_PROGS];
	struct bpf_link *iter_link;		/* the task iterator: per-thread counters */
	unsigned int iter_passes;		/* the store's passes: each SCHED_ITER_FULL_EVERY-th is full */
	__u64 iter_began_ns;			/* when the last one began (CLOCK_MONOTONIC) */
	struct bpf_link *precise_links[PRECISE_PROGS];
	int precise_pids;
	bool waker_wanted;			/* the engine wants releasers named */
	bool waker_failed;			/* sched_waking would not attach: said once */
	struct sampler hold;			/* the holder sampler */
	bool hold_wanted;			/* the engine wants holders sampled (kept through a pause) */
	int hold_failing;			/* its last try to turn on failed with this */
	struct sampler spin;			/* the spin sampler */
	bool paused;				/* every event program off its hook (collector__pause()) */
	int shared_fds[SHARED_MAPS];		/* -1 until made */
	int sched_load_err;			/* the scheduler's load, in a thread of its own */
	int table_fds[LS_WAIT_TABLES];		/* the wait tables (lockscope.h) */
	__u32 epoch;				/* the table programs write: table_fds[epoch & 1] */
	struct collector_drain_stats drain;	/* the wait tables' drains (drain.c) */
	struct ring_buffer *rb;
	int *ring_fds;
	int nr_rings;
	int nr_cpus;
	struct ls_probes probes;
	uint64_t kslots_freed;			/* klock's slot_cache entries of exited threads freed */
	uint64_t entries_swept;			/* tid-keyed maps' entries of exited threads deleted */
	struct collector_note notes[COLLECTOR_NOTES_MAX];
	int nr_notes;
};

/* collector.c: a component turned off at load or attach, logged once and kept for status */
void __attribute__((format(printf, 3, 4)))
collector_degrade(struct collector *c, const char *component, const char *fmt, ...);
/* attach.c: the samplers' events exist only while they are on */
void collector_sampler_off(struct sampler *sm, int nr_cpus);
/* drain.c: klock's slots emptied while its programs are off; the open waits dropped */
int collector_klock_reset(struct collector *c);

#endif

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The decoder: what the kernel side hands over, into store events. Ring records of every
 * type (sampled waits with their stacks, holder samples, stack dumps, waits that found
 * their table full, spin and scheduling records) and wait-table entries (the exact
 * figures). Kernel and frame-pointer user stack ids are read from the collector's stack
 * maps and interned; stack dumps are unwound and kept until the record naming them comes
 * (a record that comes first is parked until the end of the drain); futex owners are
 * checked against /proc. Waits and samples go to the sink's event(), the rest to its own
 * callbacks: the decoder knows the store's event, not what the layers above make of it.
 */
#ifndef __LS_RECORDS_H
#define __LS_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "store/agg.h"
#include "lockscope.h"
#include "scheduler.h"

struct collector;
struct decoder;
struct dumps;
struct ksyms;
struct stacks;
struct unwind;
struct usyms;

struct decode_sink {
	void (*event)(void *ctx, const struct agg_event *ev);	/* a wait, or a holder sample */
	void (*yield_site)(void *ctx, const struct sched_yield_rec *r, uint32_t stack);
	void (*spin_sample)(void *ctx, const struct sched_spin_rec *r, uint32_t stack);
	void (*resume)(void *ctx, const struct sched_resume_rec *r, uint32_t stack);
	/* futex waits came fast enough that the kernel side asks for their releasers */
	void (*waker_wanted)(void *ctx, uint32_t waits, uint64_t span_ns);
	void *ctx;
};

struct decoder_opts {
	struct collector *coll;		/* whose stack maps record ids name */
	struct stacks *stacks;		/* where stacks are interned */
	struct usyms *usyms;		/* user mappings: shared locks, stack normalization */
	struct ksyms *ksyms;		/* NULL: tracing frames are not skipped */
	struct unwind *unwind;
	struct dumps *dumps;
	uint32_t max_stack;		/* frames kept per unwound stack */
	uint32_t kstack_entries, ustack_entries;	/* the stack maps' sizes */
	struct decode_sink sink;
};

/* What was lost or counted on the way, for `status`. */
struct decoder_stats {
	uint64_t bad_records;		/* malformed: too short, unknown type or class */
	uint64_t stack_read_failed;	/* a stack id that could not be read or interned */
	uint64_t dump_missing;		/* records whose stack dump never arrived */
	uint64_t dumps_expired;		/* dumps no record took */
	uint64_t dump_table_full;
	uint64_t kernel_waits, futex_waits;	/* waits decoded, per class */
	uint64_t block_waits;			/* other blocking syscalls' waits decoded */
	uint64_t unwatched_waits;		/* user waits ended while sched_waking was detached */
	uint64_t wait_entries;		/* wait-table entries decoded */
	uint64_t stack_ids_freed;	/* stack-map ids freed once idle */
};

int decoder__new(const struct decoder_opts *opts, struct decoder **out);
void decoder__free(struct decoder *d);
/*
 * One ring record (@ctx: the decoder; a collector_record_fn). A record whose stack dump
 * has not come yet is parked; any bytes are counted as bad or decoded, never trusted.
 */
int decoder__record(void *ctx, void *data, size_t size);
/* One wait-table entry (@ctx: the decoder; a collector_wait_fn). */
int decoder__wait_entry(void *ctx, const struct ls_wait_key *k, const struct ls_wait_val *v);
/*
 * A drain of the rings begins, and ends: parked records are tried again, and once a drain
 * that began after a record was read has ended, its dump is lost (counted). Returns
 * whether records are still parked.
 */
void decoder__pass_begin(struct decoder *d);
bool decoder__pass_end(struct decoder *d);
/* The time records are stamped with until the next tick (cheaper than a clock read each). */
void decoder__tick(struct decoder *d, uint64_t now);
/* Frees stack ids idle for long (the maps keep room) and dumps no record took. */
void decoder__gc(struct decoder *d, uint64_t now);
struct decoder_stats decoder__stats(const struct decoder *d);

#endif

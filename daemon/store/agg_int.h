/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The aggregator's insides, shared by agg.c (keys and events), cells.c (sums and slots)
 * and windows.c (the rolling windows and views), and only they.
 */
#ifndef __LS_AGG_INT_H
#define __LS_AGG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "lib/htab.h"
#include "store/agg.h"

enum {
	LEVELS = 3,
	SLOTS_PER_LEVEL = 10,	/* each level serves a window of 10 of its slots */
};

/* Slot lengths: 1 s, 6 s, 30 s; each level's slot is a whole number of the finer one. */
static const uint64_t level_slot_ns[LEVELS] = { 1 * NSEC_PER_SEC, 6 * NSEC_PER_SEC, 30 * NSEC_PER_SEC };

/*
 * A key's sums in one table (all time, a slot, a view). Most keys wait once per slot, and
 * a sampled key (one stack) often once in all: their one wait's bucket is that of the total,
 * so a histogram is taken from the table's pool only at the second wait.
 */
struct cell {
	uint64_t count, total_ns, max_ns, min_ns, nonblocking;
	uint32_t hist;		/* index + 1 in the table's pool; 0: none */
};

struct hist_pool {
	uint64_t (*h)[LS_HIST_BUCKETS];
	uint32_t nr, cap;
};

/* A window slot: the keys that waited in it (key id -> struct cell), and their histograms. */
struct slot {
	struct htab *cells;	/* NULL: nothing waited */
	struct hist_pool hists;
	uint64_t start;
};

struct level {
	struct slot ring[SLOTS_PER_LEVEL];	/* sealed slots, newest at head - 1 */
	int head, filled;
	/* the start of the level's next slot: the finer slots from here on are not in it yet */
	uint64_t live_start;
};

/* A key's names, interned: ids in agg->comms. */
struct key_names {
	uint32_t comm, owner_comm, releaser_comm;
};

struct agg {
	struct agg_opts opts;
	struct htab *keys;		/* struct agg_key -> struct key_names; entry index = key id */
	struct htab *comms;		/* char[LS_COMM_LEN]; entry index = comm id */
	struct cell *all;		/* all time, by key id */
	size_t all_cap;
	struct hist_pool all_hists;
	struct slot live;		/* level 0's slot being filled */
	struct level levels[LEVELS];
	uint64_t dropped;
	uint64_t folded;		/* idle keys folded into their process's (fold_key()) */
	uint64_t compact_at;		/* no compaction before this slot start: none could fold more */
	struct scratch *scratch;	/* a window view's cells and key list, kept for the next one */
};

/*
 * A rolling window's view refers to the cells of the slots it covers: a key that waited in
 * one of them only (most keys of a burst, or of sampled stacks) is read in place there,
 * and only a key found in a second slot gets a cell of the view's own, the merge of its
 * slots' cells. The references (one per key id), the key list and the merged cells come
 * from the aggregator's scratch (lib/scratch.h), kept between queries until they go unused
 * for view_cache_idle_ns: a fresh block is mapped and faulted in page by page on every query
 * (a quarter of a query's time at 100 k keys). A view gives the references back with those
 * it set cleared (SCRATCH_KEPT_ZEROED); the merged cells are written before they are read.
 */
enum view_scratch {
	VIEW_REFS,
	VIEW_IDS,
	VIEW_CELLS,
};

/* Where a view reads a key's cell. */
struct view_ref {
	uint32_t src;		/* 0: not in the view; VIEW_OWN; else slots[src - 1] */
	uint32_t idx;		/* the cell's entry in that slot's table, or in own */
};

#define VIEW_OWN UINT32_MAX
/* The slots a window reads: level 0's live slot, and at most a ring and one more per level. */
#define VIEW_MAX_SLOTS (1 + LEVELS * (SLOTS_PER_LEVEL + 1))

struct agg_view {
	const struct agg *a;
	const struct cell *cells;	/* all time: by key id; NULL: refs */
	const struct hist_pool *hists;
	struct view_ref *refs;		/* by key id */
	const struct slot *slots[VIEW_MAX_SLOTS];
	uint32_t nr_slots;
	uint32_t *ids;			/* the keys in the view; NULL: every key */
	size_t nr;
	struct cell *own;		/* keys in more than one slot: their cells merged */
	size_t nr_own;
	struct hist_pool own_hists;
};

/* cells.c */
void agg_pool_free(struct hist_pool *p);
/* The histogram @ref names in @p (index + 1); NULL for 0 */
uint64_t *agg_pool_hist(const struct hist_pool *p, uint32_t ref);
void agg_cell_add_event(struct cell *c, struct hist_pool *p, const struct agg_event *ev);
/* Adds cell @s (histograms in @sp) to @d (in @dp). */
void agg_cell_merge(struct cell *d, struct hist_pool *dp, const struct cell *s, const struct hist_pool *sp);
void agg_slot_free(struct slot *s);
struct cell *agg_slot_cell(struct slot *s, uint32_t id, size_t max_keys);
/* Adds slot @src into @dst (a coarser slot being made); false when out of memory. */
bool agg_slot_merge(struct slot *dst, const struct slot *src, size_t max_keys);

/* agg.c */
const char *agg_comm_str(const struct agg *a, uint32_t id);

#endif

// SPDX-License-Identifier: GPL-2.0
/*
 * The aggregator's rolling windows: slots of 1 s, 6 s and 30 s in three rings, sealed
 * and merged into the coarser level as time passes, and a window's view made of the slots
 * it covers (read in place, or merged where a key waited in more than one).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/scratch.h"
#include "store/agg.h"
#include "store/agg_int.h"

static void ring_push(struct level *l, struct slot *s)
{
	agg_slot_free(&l->ring[l->head]);
	l->ring[l->head] = *s;
	l->head = (l->head + 1) % SLOTS_PER_LEVEL;
	if (l->filled < SLOTS_PER_LEVEL)
		l->filled++;
	memset(s, 0, sizeof(*s));
}

/* Slot @n of level @l's ring, newest first (n < filled). */
static const struct slot *ring_slot(const struct level *l, int n)
{
	return &l->ring[(l->head - 1 - n + 2 * SLOTS_PER_LEVEL) % SLOTS_PER_LEVEL];
}

static void make_coarse(struct agg *a, int i);

/*
 * Pushes @s onto level @i's ring. A slot about to leave the ring that no coarser slot
 * holds yet is made into one first, and not before: as long as the finer ring holds a
 * key's waits, they are kept there only.
 */
static void push(struct agg *a, int i, struct slot *s)
{
	struct level *l = &a->levels[i];

	if (l->filled == SLOTS_PER_LEVEL && i + 1 < LEVELS) {
		uint64_t leaving = ring_slot(l, SLOTS_PER_LEVEL - 1)->start;

		while (a->levels[i + 1].live_start <= leaving)
			make_coarse(a, i + 1);
	}
	ring_push(l, s);
}

/*
 * Level @i's next slot, made from the slots of level i - 1 it spans (all still in that
 * level's ring, which holds more of them than one coarser slot takes).
 */
static void make_coarse(struct agg *a, int i)
{
	struct level *l = &a->levels[i];
	const struct level *fine = &a->levels[i - 1];
	uint64_t start = l->live_start, end = start + level_slot_ns[i];
	struct slot s = { .start = start };
	int n;

	for (n = 0; n < fine->filled; n++) {
		const struct slot *f = ring_slot(fine, n);

		if (f->start >= start && f->start < end && !agg_slot_merge(&s, f, a->opts.max_keys))
			a->dropped++;	/* out of memory: the coarse slot misses some keys */
	}
	l->live_start = end;
	push(a, i, &s);
}

size_t agg__view_cache_bytes(const struct agg *a)
{
	return scratch__bytes(a->scratch);
}

void agg__rotate(struct agg *a, uint64_t now_ns)
{
	if (!a->opts.windows)
		return;
	scratch__idle(a->scratch, now_ns);
	while (now_ns >= a->live.start + level_slot_ns[0]) {
		uint64_t next = a->live.start + level_slot_ns[0];

		push(a, 0, &a->live);
		a->live.start = next;
	}
}

/*
 * Calls @fn for each slot window @w holds: level 0's live slot, the slots of the finer
 * levels not yet made into coarser ones (the newest), and level @w's newest slots, as many
 * as make the window's length (ten of its slots) and at most one slot more. Returns the
 * start of the oldest.
 */
static uint64_t for_each_slot(const struct agg *a, enum ls_window w,
			      void (*fn)(void *arg, const struct slot *s), void *arg)
{
	uint64_t start = a->live.start, end = a->live.start + level_slot_ns[0];
	uint64_t span = (SLOTS_PER_LEVEL + 1) * level_slot_ns[w];
	int i, n;

	if (fn)
		fn(arg, &a->live);
	for (i = 0; i <= (int)w; i++) {
		const struct level *l = &a->levels[i];

		for (n = 0; n < l->filled; n++) {
			const struct slot *s = ring_slot(l, n);

			if (i < (int)w && s->start < a->levels[i + 1].live_start)
				break;	/* in a coarser slot already */
			if (i == (int)w && s->start + span < end)
				break;
			if (s->start < start)
				start = s->start;
			if (fn)
				fn(arg, s);
		}
	}
	return start;
}

uint64_t agg__window_start(const struct agg *a, enum ls_window w)
{
	if (w == LS_WIN_ALL || !a->opts.windows)
		return a->opts.start_ns;
	return for_each_slot(a, w, NULL, NULL);
}

/* The cell @r refers to, and the pool its histogram is in. */
static const struct cell *ref_cell(const struct agg_view *v, struct view_ref r, const struct hist_pool **pool)
{
	const struct slot *s;

	if (r.src == VIEW_OWN) {
		*pool = &v->own_hists;
		return &v->own[r.idx];
	}
	s = v->slots[r.src - 1];
	*pool = &s->hists;
	return htab__at(s->cells, r.idx, NULL);
}

/*
 * A key's first slot is referred to; at its second, its cell becomes one of the view's own
 * (the first slot's merged in), and every later slot is merged into that.
 */
static void view_add_slot(void *arg, const struct slot *s)
{
	struct agg_view *v = arg;
	uint32_t src = ++v->nr_slots;
	const void *kp;
	size_t iter = 0;
	void *vp;

	v->slots[src - 1] = s;
	while (s->cells && !htab__next(s->cells, &iter, &kp, &vp)) {
		uint32_t id = *(const uint32_t *)kp;
		struct view_ref *r = &v->refs[id];
		const struct hist_pool *first_pool;
		const struct cell *first;

		if (!r->src) {
			*r = (struct view_ref){ src, iter - 1 };
			v->ids[v->nr++] = id;
			continue;
		}
		if (r->src != VIEW_OWN) {
			first = ref_cell(v, *r, &first_pool);
			v->own[v->nr_own] = (struct cell){ 0 };
			agg_cell_merge(&v->own[v->nr_own], &v->own_hists, first, first_pool);
			*r = (struct view_ref){ VIEW_OWN, v->nr_own++ };
		}
		agg_cell_merge(&v->own[r->idx], &v->own_hists, vp, &s->hists);
	}
}

/*
 * References and an id list for @n keys, and room for as many merged cells: the
 * aggregator's scratch when it is free, else new. The cells' block is written only as
 * far as keys are merged: the pages past that are never touched, never resident.
 */
static int view_refs(struct agg_view *v, size_t n)
{
	v->refs = scratch__get(v->a->scratch, VIEW_REFS, n * sizeof(*v->refs), SCRATCH_KEPT_ZEROED);
	v->ids = scratch__get(v->a->scratch, VIEW_IDS, n * sizeof(*v->ids), SCRATCH_RAW);
	v->own = scratch__get(v->a->scratch, VIEW_CELLS, n * sizeof(*v->own), SCRATCH_RAW);
	return v->refs && v->ids && v->own ? 0 : -ENOMEM;
}

struct agg_view *agg__view(const struct agg *a, enum ls_window w, uint64_t *start_ns)
{
	struct agg_view *v = calloc(1, sizeof(*v));
	size_t keys = htab__count(a->keys);

	if (!v)
		return NULL;
	v->a = a;
	*start_ns = agg__window_start(a, w);
	/* all time is the table itself: a query reads it in place, no copy */
	if (w == LS_WIN_ALL || !a->opts.windows) {
		v->cells = a->all;
		v->hists = &a->all_hists;
		v->nr = keys;
		return v;
	}
	if (view_refs(v, keys ? keys : 1)) {
		agg_view__free(v);
		return NULL;
	}
	_Static_assert(VIEW_MAX_SLOTS < VIEW_OWN, "a slot's number is not VIEW_OWN");
	for_each_slot(a, w, view_add_slot, v);
	return v;
}

void agg_view__free(struct agg_view *v)
{
	if (!v)
		return;
	if (v->refs) {
		size_t i;

		/* the references go back as they came: clear (SCRATCH_KEPT_ZEROED) */
		for (i = 0; i < v->nr; i++)
			v->refs[v->ids[i]] = (struct view_ref){ 0 };
	}
	scratch__put(v->a->scratch, VIEW_REFS, v->refs);
	scratch__put(v->a->scratch, VIEW_IDS, v->ids);
	scratch__put(v->a->scratch, VIEW_CELLS, v->own);
	agg_pool_free(&v->own_hists);
	free(v);
}

size_t agg_view__count(const struct agg_view *v)
{
	return v->nr;
}

const struct agg_key *agg_view__key(const struct agg_view *v, size_t i)
{
	const void *kp = NULL;

	if (i >= v->nr)
		return NULL;
	htab__at(v->a->keys, v->ids ? v->ids[i] : (uint32_t)i, &kp);
	return kp;
}

int agg_view__get(const struct agg_view *v, size_t i, const struct agg_key **key, struct agg_val *val)
{
	const struct hist_pool *pool;
	const struct key_names *n;
	const struct cell *c;
	const void *kp = NULL;
	uint32_t id;

	if (i >= v->nr)
		return -ENOENT;
	id = v->ids ? v->ids[i] : (uint32_t)i;
	n = htab__at(v->a->keys, id, &kp);
	if (v->cells) {
		c = &v->cells[id];
		pool = v->hists;
	} else {
		c = ref_cell(v, v->refs[id], &pool);
	}
	*key = kp;
	val->st.count = c->count;
	val->st.total_ns = c->total_ns;
	val->st.max_ns = c->max_ns;
	val->st.min_ns = c->min_ns;
	val->nonblocking = c->nonblocking;
	val->hist = agg_pool_hist(pool, c->hist);
	val->comm = agg_comm_str(v->a, n->comm);
	val->owner_comm = agg_comm_str(v->a, n->owner_comm);
	val->releaser_comm = agg_comm_str(v->a, n->releaser_comm);
	return 0;
}

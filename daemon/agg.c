// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "agg.h"
#include "htab.h"

#define NSEC_PER_SEC 1000000000ULL

enum {
	LEVELS = 3,
	SLOTS_PER_LEVEL = 10,	/* each level serves a window of 10 of its slots */
};

/* Slot lengths: 1 s, 6 s, 30 s; each level's slot is a whole number of the finer one. */
static const uint64_t level_slot_ns[LEVELS] = { 1 * NSEC_PER_SEC, 6 * NSEC_PER_SEC, 30 * NSEC_PER_SEC };

struct level {
	struct htab *live;		/* the slot being filled */
	uint64_t live_start;
	struct htab *ring[SLOTS_PER_LEVEL];	/* sealed slots, newest at head - 1 */
	uint64_t ring_start[SLOTS_PER_LEVEL];
	int head, filled;
};

struct agg {
	struct agg_opts opts;
	struct htab *all;
	struct level levels[LEVELS];
	uint64_t dropped;
};

static const char *const window_names[LS_WIN_MAX] = { "10s", "1m", "5m", "all" };

const char *ls_window_name(enum ls_window w)
{
	return w < LS_WIN_MAX ? window_names[w] : "?";
}

int ls_window_parse(const char *s, enum ls_window *w)
{
	int i;

	for (i = 0; i < LS_WIN_MAX; i++) {
		if (!strcmp(s, window_names[i])) {
			*w = i;
			return 0;
		}
	}
	return -EINVAL;
}

int ls_hist_bucket(uint64_t ns)
{
	int b = ns ? 63 - __builtin_clzll(ns) : 0;

	return b < LS_HIST_BUCKETS ? b : LS_HIST_BUCKETS - 1;
}

void agg_stat_add_wait(struct agg_stat *st, uint64_t wait_ns)
{
	if (!st->count || wait_ns < st->min_ns)
		st->min_ns = wait_ns;
	if (wait_ns > st->max_ns)
		st->max_ns = wait_ns;
	st->count++;
	st->total_ns += wait_ns;
	st->hist[ls_hist_bucket(wait_ns)]++;
}

void agg_stat_merge(struct agg_stat *dst, const struct agg_stat *src)
{
	int i;

	if (!src->count)
		return;
	if (!dst->count || src->min_ns < dst->min_ns)
		dst->min_ns = src->min_ns;
	if (src->max_ns > dst->max_ns)
		dst->max_ns = src->max_ns;
	dst->count += src->count;
	dst->total_ns += src->total_ns;
	for (i = 0; i < LS_HIST_BUCKETS; i++)
		dst->hist[i] += src->hist[i];
}

static struct htab *new_table(const struct agg *a)
{
	return htab__new(sizeof(struct agg_key), sizeof(struct agg_val), a->opts.max_keys);
}

static int merge_table(struct htab *dst, const struct htab *src, uint64_t *dropped)
{
	const void *key;
	size_t iter = 0;
	void *val;

	while (!htab__next(src, &iter, &key, &val)) {
		const struct agg_val *sv = val;
		struct agg_val *dv;
		int created;

		dv = htab__upsert(dst, key, &created, NULL);
		if (!dv) {
			*dropped += sv->st.count;
			continue;
		}
		if (created) {
			*dv = *sv;
			continue;
		}
		agg_stat_merge(&dv->st, &sv->st);
		dv->nonblocking += sv->nonblocking;
	}
	return 0;
}

struct agg *agg__new(const struct agg_opts *opts)
{
	struct agg *a = calloc(1, sizeof(*a));
	int i;

	if (!a)
		return NULL;
	a->opts = *opts;
	a->all = new_table(a);
	if (!a->all)
		goto cleanup;
	for (i = 0; opts->windows && i < LEVELS; i++) {
		a->levels[i].live = new_table(a);
		a->levels[i].live_start = opts->start_ns;
		if (!a->levels[i].live)
			goto cleanup;
	}
	return a;
cleanup:
	agg__free(a);
	return NULL;
}

void agg__free(struct agg *a)
{
	int i, j;

	if (!a)
		return;
	htab__free(a->all);
	for (i = 0; i < LEVELS; i++) {
		htab__free(a->levels[i].live);
		for (j = 0; j < SLOTS_PER_LEVEL; j++)
			htab__free(a->levels[i].ring[j]);
	}
	free(a);
}

static void add_to(struct agg *a, struct htab *t, const struct agg_event *ev)
{
	struct agg_val *v;
	int created;

	v = htab__upsert(t, &ev->key, &created, NULL);
	if (!v) {
		a->dropped++;
		return;
	}
	if (created) {
		if (ev->comm)
			strncpy(v->comm, ev->comm, sizeof(v->comm) - 1);
		if (ev->owner_comm)
			strncpy(v->owner_comm, ev->owner_comm, sizeof(v->owner_comm) - 1);
		if (ev->releaser_comm)
			strncpy(v->releaser_comm, ev->releaser_comm, sizeof(v->releaser_comm) - 1);
	}
	v->nonblocking += ev->nonblocking;
	if (ev->stat)
		agg_stat_merge(&v->st, ev->stat);
	else if (!ev->nonblocking)
		agg_stat_add_wait(&v->st, ev->wait_ns);
}

int agg__add(struct agg *a, const struct agg_event *ev)
{
	add_to(a, a->all, ev);
	if (a->opts.windows)
		add_to(a, a->levels[0].live, ev);
	return 0;
}

/* Seals level @i's live slot into its ring; the coarser level absorbs it. */
static void seal(struct agg *a, int i)
{
	struct level *l = &a->levels[i];
	struct htab *fresh = new_table(a);

	if (!fresh) {	/* keep filling the old slot rather than lose it */
		return;
	}
	if (i + 1 < LEVELS)
		merge_table(a->levels[i + 1].live, l->live, &a->dropped);
	htab__free(l->ring[l->head]);
	l->ring[l->head] = l->live;
	l->ring_start[l->head] = l->live_start;
	l->head = (l->head + 1) % SLOTS_PER_LEVEL;
	if (l->filled < SLOTS_PER_LEVEL)
		l->filled++;
	l->live = fresh;
	l->live_start += level_slot_ns[i];
}

void agg__rotate(struct agg *a, uint64_t now_ns)
{
	int i;

	if (!a->opts.windows)
		return;
	/* finest first, so a coarser slot that ends now has absorbed its last fine slot */
	for (i = 0; i < LEVELS; i++) {
		struct level *l = &a->levels[i];

		while (now_ns >= l->live_start + level_slot_ns[i])
			seal(a, i);
	}
}

uint64_t agg__window_start(const struct agg *a, enum ls_window w)
{
	const struct level *top;

	if (w == LS_WIN_ALL || !a->opts.windows)
		return a->opts.start_ns;
	top = &a->levels[w];
	if (!top->filled)
		return top->live_start;
	return top->ring_start[(top->head - top->filled + SLOTS_PER_LEVEL) % SLOTS_PER_LEVEL];
}

struct htab *agg__window(const struct agg *a, enum ls_window w, uint64_t now_ns, uint64_t *start_ns)
{
	struct htab *out;
	uint64_t dropped = 0;
	const struct level *top;
	int i, n;

	(void)now_ns;
	*start_ns = agg__window_start(a, w);
	/* all time is the table itself: a query reads it in place, no copy */
	if (w == LS_WIN_ALL || !a->opts.windows)
		return a->all;
	out = htab__new(sizeof(struct agg_key), sizeof(struct agg_val), SIZE_MAX);
	if (!out)
		return NULL;
	/* the live slots of this level and every finer one, then this level's sealed ring */
	for (i = 0; i <= (int)w; i++)
		merge_table(out, a->levels[i].live, &dropped);
	top = &a->levels[w];
	for (n = 0; n < top->filled; n++)
		merge_table(out, top->ring[(top->head - 1 - n + SLOTS_PER_LEVEL) % SLOTS_PER_LEVEL], &dropped);
	return out;
}

void agg__window_free(const struct agg *a, struct htab *t)
{
	if (t != a->all)
		htab__free(t);
}

uint64_t agg__dropped(const struct agg *a)
{
	return a->dropped;
}

size_t agg__keys(const struct agg *a)
{
	return htab__count(a->all);
}

size_t agg__mem_bytes(const struct agg *a)
{
	size_t sum = htab__mem_bytes(a->all);
	int i, j;

	for (i = 0; a->opts.windows && i < LEVELS; i++) {
		sum += htab__mem_bytes(a->levels[i].live);
		for (j = 0; j < SLOTS_PER_LEVEL; j++)
			if (a->levels[i].ring[j])
				sum += htab__mem_bytes(a->levels[i].ring[j]);
	}
	return sum;
}

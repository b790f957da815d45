// SPDX-License-Identifier: GPL-2.0
/*
 * The aggregator's sums: a key's count, total, max, min and log2 histogram in a cell
 * (histograms pooled, taken at a key's second wait), and slots of cells; the window names.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/clock.h"
#include "lib/htab.h"
#include "store/agg.h"
#include "store/agg_int.h"

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

void agg_hist_add(double *dst, const struct agg_val *v, double f)
{
	int i;

	if (v->hist) {
		for (i = 0; i < LS_HIST_BUCKETS; i++)
			dst[i] += v->hist[i] * f;
	} else if (v->st.count) {
		dst[ls_hist_bucket(v->st.total_ns)] += v->st.count * f;
	}
}

/* ---- cells and their histograms ---- */

void agg_pool_free(struct hist_pool *p)
{
	free(p->h);
	memset(p, 0, sizeof(*p));
}

uint64_t *agg_pool_hist(const struct hist_pool *p, uint32_t ref)
{
	return ref ? p->h[ref - 1] : NULL;
}

/* A zeroed histogram from @p; its reference (index + 1), 0 when out of memory. */
static uint32_t pool_take(struct hist_pool *p)
{
	if (p->nr == p->cap) {
		uint32_t cap = p->cap ? p->cap * 2 : 4;	/* most slots take a few: 64 were 21 KB each */
		void *n = realloc(p->h, (size_t)cap * sizeof(*p->h));

		if (!n)
			return 0;
		p->h = n;
		p->cap = cap;
	}
	memset(p->h[p->nr], 0, sizeof(p->h[p->nr]));
	return ++p->nr;
}

/*
 * @c's histogram, taken from @p when it has none: its one wait (if any) moves into the
 * bucket of its total. NULL when out of memory.
 */
static uint64_t *cell_hist(struct cell *c, struct hist_pool *p)
{
	uint64_t *h;

	if (c->hist)
		return agg_pool_hist(p, c->hist);
	if (!(c->hist = pool_take(p)))
		return NULL;
	h = agg_pool_hist(p, c->hist);
	if (c->count)
		h[ls_hist_bucket(c->total_ns)] += c->count;
	return h;
}

static void sum_add(struct cell *c, uint64_t count, uint64_t total, uint64_t max, uint64_t min)
{
	if (!count)
		return;
	if (!c->count || min < c->min_ns)
		c->min_ns = min;
	if (max > c->max_ns)
		c->max_ns = max;
	c->count += count;
	c->total_ns += total;
}

static void cell_add_wait(struct cell *c, struct hist_pool *p, uint64_t wait_ns)
{
	uint64_t *h = c->count ? cell_hist(c, p) : NULL;

	sum_add(c, 1, wait_ns, wait_ns, wait_ns);
	if (h)
		h[ls_hist_bucket(wait_ns)]++;
}

static void cell_add_stat(struct cell *c, struct hist_pool *p, const struct agg_stat *st)
{
	uint64_t *h;
	int i;

	if (!st->count)
		return;
	if (!c->count && st->count == 1) {
		sum_add(c, 1, st->total_ns, st->max_ns, st->min_ns);
		return;
	}
	h = cell_hist(c, p);
	sum_add(c, st->count, st->total_ns, st->max_ns, st->min_ns);
	for (i = 0; h && i < LS_HIST_BUCKETS; i++)
		h[i] += st->hist[i];
}

void agg_cell_add_event(struct cell *c, struct hist_pool *p, const struct agg_event *ev)
{
	c->nonblocking += ev->nonblocking;
	if (ev->stat)
		cell_add_stat(c, p, ev->stat);
	else if (!ev->nonblocking)
		cell_add_wait(c, p, ev->wait_ns);
}

/* Adds cell @s (histograms in @sp) to @d (in @dp). */
void agg_cell_merge(struct cell *d, struct hist_pool *dp, const struct cell *s, const struct hist_pool *sp)
{
	const uint64_t *sh = agg_pool_hist(sp, s->hist);
	uint64_t *dh;
	int i;

	d->nonblocking += s->nonblocking;
	if (!s->count)
		return;
	if (!d->count && !sh) {
		sum_add(d, s->count, s->total_ns, s->max_ns, s->min_ns);
		return;
	}
	dh = cell_hist(d, dp);
	sum_add(d, s->count, s->total_ns, s->max_ns, s->min_ns);
	if (!dh)
		return;
	if (sh) {
		for (i = 0; i < LS_HIST_BUCKETS; i++)
			dh[i] += sh[i];
	} else {
		dh[ls_hist_bucket(s->total_ns)] += s->count;
	}
}

/* ---- slots ---- */

void agg_slot_free(struct slot *s)
{
	htab__free(s->cells);
	agg_pool_free(&s->hists);
	s->cells = NULL;
}

struct cell *agg_slot_cell(struct slot *s, uint32_t id, size_t max_keys)
{
	if (!s->cells && !(s->cells = htab__new(sizeof(uint32_t), sizeof(struct cell), max_keys)))
		return NULL;
	return htab__upsert(s->cells, &id, NULL, NULL);
}

/* Adds slot @src into @dst (a coarser slot being made); false when out of memory. */
bool agg_slot_merge(struct slot *dst, const struct slot *src, size_t max_keys)
{
	const void *kp;
	size_t iter = 0;
	void *vp;

	while (src->cells && !htab__next(src->cells, &iter, &kp, &vp)) {
		struct cell *d = agg_slot_cell(dst, *(const uint32_t *)kp, max_keys);

		if (!d)
			return false;
		agg_cell_merge(d, &dst->hists, vp, &src->hists);
	}
	return true;
}

// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/clock.h"
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
	uint32_t seen;		/* views: the key is in the view's list */
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
	struct view_scratch *scratch;	/* a window view's cells, kept for the next one */
};

/*
 * The cells and key list of a rolling window's view, kept between queries: a fresh block of
 * a cell per key is mapped and faulted in page by page on every query (a quarter of a
 * query's time at 100 k keys). A view gives it back with the cells it touched cleared.
 */
struct view_scratch {
	struct cell *cells;
	uint32_t *ids;
	size_t cap;
	bool busy;		/* a view holds it; another one at the same time allocates its own */
};

struct agg_view {
	const struct agg *a;
	const struct cell *cells;	/* by key id */
	const struct hist_pool *hists;
	uint32_t *ids;			/* the keys in the view; NULL: every key */
	size_t nr;
	struct cell *own;		/* a rolling window's merged cells */
	struct hist_pool own_hists;
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

static void pool_free(struct hist_pool *p)
{
	free(p->h);
	memset(p, 0, sizeof(*p));
}

static uint64_t *pool_hist(const struct hist_pool *p, uint32_t ref)
{
	return ref ? p->h[ref - 1] : NULL;
}

/* A zeroed histogram from @p; its reference (index + 1), 0 when out of memory. */
static uint32_t pool_take(struct hist_pool *p)
{
	if (p->nr == p->cap) {
		uint32_t cap = p->cap ? p->cap * 2 : 64;
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
		return pool_hist(p, c->hist);
	if (!(c->hist = pool_take(p)))
		return NULL;
	h = pool_hist(p, c->hist);
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

static void cell_add_event(struct cell *c, struct hist_pool *p, const struct agg_event *ev)
{
	c->nonblocking += ev->nonblocking;
	if (ev->stat)
		cell_add_stat(c, p, ev->stat);
	else if (!ev->nonblocking)
		cell_add_wait(c, p, ev->wait_ns);
}

/* Adds cell @s (histograms in @sp) to @d (in @dp). */
static void cell_merge(struct cell *d, struct hist_pool *dp, const struct cell *s, const struct hist_pool *sp)
{
	const uint64_t *sh = pool_hist(sp, s->hist);
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

static void slot_free(struct slot *s)
{
	htab__free(s->cells);
	pool_free(&s->hists);
	s->cells = NULL;
}

static struct cell *slot_cell(struct slot *s, uint32_t id, size_t max_keys)
{
	if (!s->cells && !(s->cells = htab__new(sizeof(uint32_t), sizeof(struct cell), max_keys)))
		return NULL;
	return htab__upsert(s->cells, &id, NULL, NULL);
}

/* Adds slot @src into @dst (a coarser slot being made); false when out of memory. */
static bool slot_merge(struct slot *dst, const struct slot *src, size_t max_keys)
{
	const void *kp;
	size_t iter = 0;
	void *vp;

	while (src->cells && !htab__next(src->cells, &iter, &kp, &vp)) {
		struct cell *d = slot_cell(dst, *(const uint32_t *)kp, max_keys);

		if (!d)
			return false;
		cell_merge(d, &dst->hists, vp, &src->hists);
	}
	return true;
}

/* ---- names ---- */

/* The id of name @s (NULL: none), interned; 0 (the first name, "") when out of memory. */
static uint32_t comm_id(struct agg *a, const char *s)
{
	char buf[LS_COMM_LEN] = {};
	uint32_t id = 0;

	if (s)
		strncpy(buf, s, sizeof(buf) - 1);
	htab__upsert_at(a->comms, buf, &id, NULL, NULL);
	return id;
}

static const char *comm_str(const struct agg *a, uint32_t id)
{
	const void *k = NULL;

	htab__at(a->comms, id, &k);
	return k ? k : "";
}

/* ---- the aggregator ---- */

struct agg *agg__new(const struct agg_opts *opts)
{
	struct agg *a = calloc(1, sizeof(*a));
	int i;

	if (!a)
		return NULL;
	a->opts = *opts;
	a->keys = htab__new(sizeof(struct agg_key), sizeof(struct key_names), opts->max_keys);
	a->comms = htab__new(LS_COMM_LEN, 0, SIZE_MAX);
	if (!a->keys || !a->comms) {
		agg__free(a);
		return NULL;
	}
	a->scratch = calloc(1, sizeof(*a->scratch));
	if (!a->scratch) {
		agg__free(a);
		return NULL;
	}
	comm_id(a, NULL);	/* id 0: no name */
	a->live.start = opts->start_ns;
	for (i = 0; i < LEVELS; i++)
		a->levels[i].live_start = opts->start_ns;
	return a;
}

void agg__free(struct agg *a)
{
	int i, j;

	if (!a)
		return;
	htab__free(a->keys);
	htab__free(a->comms);
	free(a->all);
	pool_free(&a->all_hists);
	slot_free(&a->live);
	for (i = 0; i < LEVELS; i++)
		for (j = 0; j < SLOTS_PER_LEVEL; j++)
			slot_free(&a->levels[i].ring[j]);
	if (a->scratch) {
		free(a->scratch->cells);
		free(a->scratch->ids);
		free(a->scratch);
	}
	free(a);
}

/* The id of @ev's key, added with its names if new; -ENOSPC when the keys are full. */
static int key_id(struct agg *a, const struct agg_event *ev, uint32_t *id)
{
	struct key_names *n;
	int created = 0, err = 0;

	/* room for a new key's all-time cell first, so that every key has one */
	if (htab__count(a->keys) >= a->all_cap) {
		size_t cap = a->all_cap ? a->all_cap * 2 : 1024;
		struct cell *c = realloc(a->all, cap * sizeof(*c));

		if (!c)
			return -ENOMEM;
		memset(c + a->all_cap, 0, (cap - a->all_cap) * sizeof(*c));
		a->all = c;
		a->all_cap = cap;
	}
	n = htab__upsert_at(a->keys, &ev->key, id, &created, &err);
	if (!n)
		return err ? err : -ENOMEM;
	if (created) {
		n->comm = comm_id(a, ev->comm);
		n->owner_comm = comm_id(a, ev->owner_comm);
		n->releaser_comm = comm_id(a, ev->releaser_comm);
	}
	return 0;
}

/* ---- compaction: a full key table folds the keys no window holds ---- */

/*
 * The key an idle key folds into: the same process, lock, type and stacks, without its
 * threads (waiter, owner, releaser: tid 0). Threads come and go by the thousand; what a
 * process's lock cost since start, and from where, stays exact.
 */
static void fold_key(struct agg_key *k)
{
	k->tid = 0;
	k->owner_tid = 0;
	k->releaser_tid = 0;
}

/* Marks in @active the keys that waited in slot @s. */
static void mark_active(const struct slot *s, uint8_t *active)
{
	const void *kp;
	size_t iter = 0;
	void *vp;

	while (s->cells && !htab__next(s->cells, &iter, &kp, &vp))
		active[*(const uint32_t *)kp] = 1;
}

/* Every slot the aggregator keeps, the live one first; NULL past the last. */
static struct slot *slot_nr(struct agg *a, int n)
{
	if (n == 0)
		return &a->live;
	n--;
	return n < LEVELS * SLOTS_PER_LEVEL ? &a->levels[n / SLOTS_PER_LEVEL].ring[n % SLOTS_PER_LEVEL] : NULL;
}

/* @s's cells under the new key ids of @map, in a new table; false when out of memory. */
static bool slot_remap(const struct slot *s, const uint32_t *map, size_t max_keys, struct htab **out)
{
	const void *kp;
	size_t iter = 0;
	void *vp;

	*out = NULL;
	if (!s->cells)
		return true;
	if (!(*out = htab__new(sizeof(uint32_t), sizeof(struct cell), max_keys)))
		return false;
	while (!htab__next(s->cells, &iter, &kp, &vp)) {
		struct cell *c = htab__upsert(*out, &map[*(const uint32_t *)kp], NULL, NULL);

		if (!c)
			return false;
		*c = *(const struct cell *)vp;	/* histogram references stay in the slot's pool */
	}
	return true;
}

/*
 * Rebuilds the key table with every key that waited in no slot (idle for longer than the
 * longest window) folded by fold_key(): its all-time figures merge into the folded key's,
 * the windows keep every key they hold. -ENOSPC when that frees nothing, -ENOMEM when out
 * of memory (then nothing changed).
 */
static int compact(struct agg *a)
{
	size_t count = htab__count(a->keys), idle = 0, i;
	struct htab *keys = NULL, *cells[1 + LEVELS * SLOTS_PER_LEVEL] = {};
	struct hist_pool hists = {};
	struct cell *all = NULL;
	uint32_t *map = NULL;
	uint8_t *active;
	struct slot *s;
	int err = -ENOMEM, n;

	active = calloc(count, 1);
	if (!active)
		return -ENOMEM;
	for (n = 0; (s = slot_nr(a, n)); n++)
		mark_active(s, active);
	for (i = 0; i < count; i++)
		idle += !active[i];
	keys = htab__new(sizeof(struct agg_key), sizeof(struct key_names), a->opts.max_keys);
	all = calloc(a->all_cap, sizeof(*all));
	map = malloc(count * sizeof(*map));
	if (!keys || !all || !map)
		goto out;
	for (i = 0; i < count; i++) {
		const void *kp = NULL;
		const struct key_names *names = htab__at(a->keys, i, &kp);
		struct agg_key k = *(const struct agg_key *)kp;
		struct key_names *nn;
		int created = 0;

		if (!active[i])
			fold_key(&k);
		nn = htab__upsert_at(keys, &k, &map[i], &created, &err);
		if (!nn) {
			err = err ?: -ENOMEM;
			goto out;
		}
		if (created)
			*nn = *names;
		cell_merge(&all[map[i]], &hists, &a->all[i], &a->all_hists);
	}
	err = -ENOSPC;
	if (htab__count(keys) == count)
		goto out;
	err = -ENOMEM;
	for (n = 0; (s = slot_nr(a, n)); n++)
		if (!slot_remap(s, map, a->opts.max_keys, &cells[n]))
			goto out;
	for (n = 0; (s = slot_nr(a, n)); n++) {
		htab__free(s->cells);
		s->cells = cells[n];
		cells[n] = NULL;
	}
	htab__free(a->keys);
	a->keys = keys;
	keys = NULL;
	free(a->all);
	a->all = all;
	all = NULL;
	pool_free(&a->all_hists);
	a->all_hists = hists;
	memset(&hists, 0, sizeof(hists));
	a->folded += idle;
	err = 0;
out:
	for (n = 0; n < (int)(sizeof(cells) / sizeof(cells[0])); n++)
		htab__free(cells[n]);
	htab__free(keys);
	free(all);
	pool_free(&hists);
	free(map);
	free(active);
	return err;
}

/*
 * A new key and no room: fold what no window holds, at most once per coarsest slot (keys
 * leave the windows only when such a slot does).
 */
static int key_id_compacting(struct agg *a, const struct agg_event *ev, uint32_t *id)
{
	int err = key_id(a, ev, id);

	if (err != -ENOSPC || !a->opts.windows || a->live.start < a->compact_at)
		return err;
	a->compact_at = a->live.start + level_slot_ns[LEVELS - 1];
	if (compact(a))
		return err;
	return key_id(a, ev, id);
}

int agg__add(struct agg *a, const struct agg_event *ev)
{
	struct cell *c;
	uint32_t id;

	if (key_id_compacting(a, ev, &id)) {
		a->dropped++;
		return 0;
	}
	cell_add_event(&a->all[id], &a->all_hists, ev);
	if (!a->opts.windows)
		return 0;
	c = slot_cell(&a->live, id, a->opts.max_keys);
	if (!c) {
		a->dropped++;
		return 0;
	}
	cell_add_event(c, &a->live.hists, ev);
	return 0;
}

static void ring_push(struct level *l, struct slot *s)
{
	slot_free(&l->ring[l->head]);
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

		if (f->start >= start && f->start < end && !slot_merge(&s, f, a->opts.max_keys))
			a->dropped++;	/* out of memory: the coarse slot misses some keys */
	}
	l->live_start = end;
	push(a, i, &s);
}

void agg__rotate(struct agg *a, uint64_t now_ns)
{
	if (!a->opts.windows)
		return;
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

static void view_add_slot(void *arg, const struct slot *s)
{
	struct agg_view *v = arg;
	const void *kp;
	size_t iter = 0;
	void *vp;

	while (s->cells && !htab__next(s->cells, &iter, &kp, &vp)) {
		uint32_t id = *(const uint32_t *)kp;
		struct cell *d = &v->own[id];

		if (!d->seen) {
			d->seen = 1;
			v->ids[v->nr++] = id;
		}
		cell_merge(d, &v->own_hists, vp, &s->hists);
	}
}

/* Cells and an id list for @n keys: the aggregator's scratch when it is free, else new. */
static int view_cells(struct agg_view *v, size_t n)
{
	struct view_scratch *sc = v->a->scratch;

	if (sc->busy) {
		v->own = calloc(n, sizeof(*v->own));
		v->ids = malloc(n * sizeof(*v->ids));
		return v->own && v->ids ? 0 : -ENOMEM;
	}
	if (sc->cap < n) {
		size_t cap = n + n / 16;	/* keys only grow: a little room for the next ones */
		struct cell *cells = realloc(sc->cells, cap * sizeof(*cells));
		uint32_t *ids;

		if (!cells)
			return -ENOMEM;
		memset(cells + sc->cap, 0, (cap - sc->cap) * sizeof(*cells));
		sc->cells = cells;
		ids = realloc(sc->ids, cap * sizeof(*ids));
		if (!ids)
			return -ENOMEM;
		sc->ids = ids;
		sc->cap = cap;
	}
	sc->busy = true;
	v->own = sc->cells;
	v->ids = sc->ids;
	return 0;
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
	/* a cell per key id, merged slot by slot */
	if (view_cells(v, keys ? keys : 1)) {
		agg_view__free(v);
		return NULL;
	}
	for_each_slot(a, w, view_add_slot, v);
	v->cells = v->own;
	v->hists = &v->own_hists;
	return v;
}

void agg_view__free(struct agg_view *v)
{
	if (!v)
		return;
	if (v->own && v->own == v->a->scratch->cells) {
		size_t i;

		for (i = 0; i < v->nr; i++)
			v->own[v->ids[i]] = (struct cell){ 0 };
		v->a->scratch->busy = false;
	} else {
		free(v->own);
		free(v->ids);
	}
	pool_free(&v->own_hists);
	free(v);
}

size_t agg_view__count(const struct agg_view *v)
{
	return v->nr;
}

int agg_view__get(const struct agg_view *v, size_t i, const struct agg_key **key, struct agg_val *val)
{
	const struct key_names *n;
	const struct cell *c;
	const void *kp = NULL;
	uint32_t id;

	if (i >= v->nr)
		return -ENOENT;
	id = v->ids ? v->ids[i] : (uint32_t)i;
	n = htab__at(v->a->keys, id, &kp);
	c = &v->cells[id];
	*key = kp;
	val->st.count = c->count;
	val->st.total_ns = c->total_ns;
	val->st.max_ns = c->max_ns;
	val->st.min_ns = c->min_ns;
	val->nonblocking = c->nonblocking;
	val->hist = pool_hist(v->hists, c->hist);
	val->comm = comm_str(v->a, n->comm);
	val->owner_comm = comm_str(v->a, n->owner_comm);
	val->releaser_comm = comm_str(v->a, n->releaser_comm);
	return 0;
}

uint64_t agg__dropped(const struct agg *a)
{
	return a->dropped;
}

uint64_t agg__folded(const struct agg *a)
{
	return a->folded;
}

size_t agg__keys(const struct agg *a)
{
	return htab__count(a->keys);
}

static size_t slot_bytes(const struct slot *s)
{
	return (s->cells ? htab__mem_bytes(s->cells) : 0) + (size_t)s->hists.cap * sizeof(*s->hists.h);
}

size_t agg__mem_bytes(const struct agg *a)
{
	size_t sum = htab__mem_bytes(a->keys) + htab__mem_bytes(a->comms) + a->all_cap * sizeof(*a->all) +
		     (size_t)a->all_hists.cap * sizeof(*a->all_hists.h) + slot_bytes(&a->live);
	int i, j;

	for (i = 0; i < LEVELS; i++)
		for (j = 0; j < SLOTS_PER_LEVEL; j++)
			sum += slot_bytes(&a->levels[i].ring[j]);
	return sum;
}

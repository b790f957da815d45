// SPDX-License-Identifier: GPL-2.0
/*
 * The aggregator (agg.h): keys interned with their names, an event added to all time and
 * to the live slot, and, when the key table fills, keys no window holds folded into their
 * process's (the table compacted).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/scratch.h"
#include "store/agg.h"
#include "store/agg_int.h"

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

const char *agg_comm_str(const struct agg *a, uint32_t id)
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
	a->scratch = scratch__new(opts->view_cache_idle_ns);
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
	agg_pool_free(&a->all_hists);
	agg_slot_free(&a->live);
	for (i = 0; i < LEVELS; i++)
		for (j = 0; j < SLOTS_PER_LEVEL; j++)
			agg_slot_free(&a->levels[i].ring[j]);
	scratch__free(a->scratch);
	free(a);
}

/* The id of @ev's key, added with its names if new; -ENOSPC when the keys are full. */
static int key_id(struct agg *a, const struct agg_event *ev, uint32_t *id)
{
	struct key_names *n;
	int created = 0, err = 0;

	/*
	 * room for a new key's all-time cell first, so that every key has one. Not cleared
	 * here: a new key clears its own, so the pages past the last key (up to half the
	 * array, mapped: above the mmap threshold) stay untouched, not resident.
	 */
	if (htab__count(a->keys) >= a->all_cap) {
		size_t cap = a->all_cap ? a->all_cap * 2 : 1024;
		struct cell *c = realloc(a->all, cap * sizeof(*c));

		if (!c)
			return -ENOMEM;
		a->all = c;
		a->all_cap = cap;
	}
	n = htab__upsert_at(a->keys, &ev->key, id, &created, &err);
	if (!n)
		return err ? err : -ENOMEM;
	if (created) {
		a->all[*id] = (struct cell){ 0 };
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
		agg_cell_merge(&all[map[i]], &hists, &a->all[i], &a->all_hists);
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
	agg_pool_free(&a->all_hists);
	a->all_hists = hists;
	memset(&hists, 0, sizeof(hists));
	a->folded += idle;
	err = 0;
out:
	for (n = 0; n < (int)(sizeof(cells) / sizeof(cells[0])); n++)
		htab__free(cells[n]);
	htab__free(keys);
	free(all);
	agg_pool_free(&hists);
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

/*
 * The waits @ev stands for: a wait table's entry is many (all of a key's waits in a
 * second), and agg_full says how many waits were lost, not how many entries.
 */
static uint64_t event_waits(const struct agg_event *ev)
{
	return ev->stat ? ev->stat->count : 1;
}

int agg__add(struct agg *a, const struct agg_event *ev)
{
	struct cell *c;
	uint32_t id;

	if (key_id_compacting(a, ev, &id)) {
		a->dropped += event_waits(ev);
		return 0;
	}
	agg_cell_add_event(&a->all[id], &a->all_hists, ev);
	if (!a->opts.windows)
		return 0;
	c = agg_slot_cell(&a->live, id, a->opts.max_keys);
	if (!c) {
		a->dropped += event_waits(ev);
		return 0;
	}
	agg_cell_add_event(c, &a->live.hists, ev);
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


// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "htab.h"
#include "stacks.h"

struct stack_ref {
	uint64_t off;	/* into ips */
	uint32_t nr;
	uint32_t flags;		/* enum ls_stack_flags */
};

struct stacks {
	struct htab *by_hash;	/* content hash -> id */
	struct stack_ref *refs;	/* by id */
	uint32_t nr, cap, max;
	uint64_t *ips;
	uint64_t ips_len, ips_cap;
	uint64_t dropped;
};

struct stacks *stacks__new(uint32_t max_stacks)
{
	struct stacks *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->by_hash = htab__new(sizeof(uint64_t), sizeof(uint32_t), max_stacks);
	if (!s->by_hash) {
		free(s);
		return NULL;
	}
	s->max = max_stacks;
	s->nr = LS_STACK_FIRST;
	return s;
}

void stacks__free(struct stacks *s)
{
	if (!s)
		return;
	htab__free(s->by_hash);
	free(s->refs);
	free(s->ips);
	free(s);
}

static bool same(const struct stacks *s, uint32_t id, const uint64_t *ips, uint32_t nr,
		 uint32_t flags)
{
	return s->refs[id].nr == nr && s->refs[id].flags == flags && !memcmp(s->ips + s->refs[id].off, ips, nr * sizeof(*ips));
}

static int grow(struct stacks *s, uint32_t nr)
{
	if (s->nr >= s->cap) {
		uint32_t cap = s->cap ? s->cap * 2 : 1024;
		struct stack_ref *r = realloc(s->refs, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		s->refs = r;
		s->cap = cap;
	}
	if (s->ips_len + nr > s->ips_cap) {
		uint64_t cap = s->ips_cap ? s->ips_cap * 2 : 16384;
		uint64_t *n;

		while (cap < s->ips_len + nr)
			cap *= 2;
		n = realloc(s->ips, cap * sizeof(*n));
		if (!n)
			return -ENOMEM;
		s->ips = n;
		s->ips_cap = cap;
	}
	return 0;
}

int stacks__intern(struct stacks *s, const uint64_t *ips, uint32_t nr, uint32_t flags, uint32_t *id)
{
	/* flags spread over the high bits: same frames, other method, other stack */
	uint64_t h = ls_hash_bytes(ips, nr * sizeof(*ips)) ^ ((uint64_t)flags * 0x9E3779B97F4A7C15ULL);
	int created, err = 0;
	uint32_t *slot;

	/* a 64-bit content hash; on the (unseen) collision the content check below
	 * stores the second stack unshared rather than merging two stacks */
	slot = htab__upsert(s->by_hash, &h, &created, &err);
	if (slot && !created && same(s, *slot, ips, nr, flags)) {
		*id = *slot;
		return 0;
	}
	if (!slot || s->nr - LS_STACK_FIRST >= s->max) {
		s->dropped++;
		return err ? err : -ENOSPC;
	}
	if ((err = grow(s, nr)))
		return err;
	s->refs[s->nr].off = s->ips_len;
	s->refs[s->nr].nr = nr;
	s->refs[s->nr].flags = flags;
	memcpy(s->ips + s->ips_len, ips, nr * sizeof(*ips));
	s->ips_len += nr;
	if (created)
		*slot = s->nr;
	*id = s->nr++;
	return 0;
}

const uint64_t *stacks__get(const struct stacks *s, uint32_t id, uint32_t *nr)
{
	if (id < LS_STACK_FIRST || id >= s->nr) {
		*nr = 0;
		return NULL;
	}
	*nr = s->refs[id].nr;
	return s->ips + s->refs[id].off;
}

uint32_t stacks__flags(const struct stacks *s, uint32_t id)
{
	return id >= LS_STACK_FIRST && id < s->nr ? s->refs[id].flags : 0;
}

uint32_t stacks__count(const struct stacks *s)
{
	return s->nr - LS_STACK_FIRST;
}

uint64_t stacks__dropped(const struct stacks *s)
{
	return s->dropped;
}

size_t stacks__mem_bytes(const struct stacks *s)
{
	return sizeof(*s) + htab__mem_bytes(s->by_hash) + s->cap * sizeof(*s->refs) +
	       s->ips_cap * sizeof(*s->ips);
}

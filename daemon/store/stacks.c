// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "lib/htab.h"
#include "store/stacks.h"

/*
 * Stacks share their outer frames (main, the event loop, the worker's entry), so they are
 * kept as paths in a tree rooted at the outermost frame: a stack is its innermost node,
 * and a frame shared by a thousand stacks is stored once. Walking from that node to the
 * root gives the frames innermost first, as the kernel and the unwinder give them.
 */
#define NODE_ROOT UINT32_MAX

struct node {
	uint32_t parent;	/* node id, NODE_ROOT for an outermost frame */
	uint32_t frame;		/* frame id */
};

struct stack_ref {
	uint32_t leaf;		/* innermost node */
	uint32_t flags;		/* enum ls_stack_flags */
};

struct stacks {
	struct htab *frames;	/* uint64_t ip; entry index = frame id */
	struct htab *nodes;	/* struct node; entry index = node id */
	struct htab *refs;	/* struct stack_ref -> nothing; entry index + LS_STACK_FIRST = stack id */
	uint32_t max;
	uint64_t dropped;
};

struct stacks *stacks__new(uint32_t max_stacks)
{
	struct stacks *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->frames = htab__new(sizeof(uint64_t), 0, SIZE_MAX);
	s->nodes = htab__new(sizeof(struct node), 0, SIZE_MAX);
	s->refs = htab__new(sizeof(struct stack_ref), 0, max_stacks);
	if (!s->frames || !s->nodes || !s->refs) {
		stacks__free(s);
		return NULL;
	}
	s->max = max_stacks;
	return s;
}

void stacks__free(struct stacks *s)
{
	if (!s)
		return;
	htab__free(s->frames);
	htab__free(s->nodes);
	htab__free(s->refs);
	free(s);
}

/* @ips's stack as it is kept, if every node of it is: *ref; false if one is missing. */
static bool find_path(const struct stacks *s, const uint64_t *ips, uint32_t nr, struct stack_ref *ref)
{
	uint32_t i;

	for (i = nr; i-- > 0;) {
		struct node n = { .parent = ref->leaf };

		if (!htab__index(s->frames, &ips[i], &n.frame) || !htab__index(s->nodes, &n, &ref->leaf))
			return false;
	}
	return true;
}

int stacks__intern(struct stacks *s, const uint64_t *ips, uint32_t nr, uint32_t flags, uint32_t *id)
{
	struct stack_ref ref = { .leaf = NODE_ROOT, .flags = flags };
	uint32_t i, idx;
	int err = 0;

	if (find_path(s, ips, nr, &ref) && htab__index(s->refs, &ref, &idx)) {
		*id = idx + LS_STACK_FIRST;
		return 0;
	}
	/* a stack refused (full) adds no node */
	if (htab__count(s->refs) >= s->max) {
		s->dropped++;
		return -ENOSPC;
	}
	ref.leaf = NODE_ROOT;
	for (i = nr; i-- > 0;) {
		struct node n = { .parent = ref.leaf };

		if (!htab__upsert_at(s->frames, &ips[i], &n.frame, NULL, &err) ||
		    !htab__upsert_at(s->nodes, &n, &ref.leaf, NULL, &err)) {
			s->dropped++;
			return err ? err : -ENOMEM;
		}
	}
	if (!htab__upsert_at(s->refs, &ref, &idx, NULL, &err)) {
		s->dropped++;
		return err ? err : -ENOSPC;
	}
	*id = idx + LS_STACK_FIRST;
	return 0;
}

static const struct stack_ref *ref_of(const struct stacks *s, uint32_t id)
{
	const void *k = NULL;

	if (id < LS_STACK_FIRST)
		return NULL;
	htab__at(s->refs, id - LS_STACK_FIRST, &k);
	return k;
}

uint32_t stacks__get(const struct stacks *s, uint32_t id, uint64_t *ips, uint32_t max)
{
	const struct stack_ref *r = ref_of(s, id);
	uint32_t node = r ? r->leaf : NODE_ROOT, nr = 0;

	while (node != NODE_ROOT && nr < max) {
		const void *nk = NULL, *fk = NULL;

		htab__at(s->nodes, node, &nk);
		htab__at(s->frames, ((const struct node *)nk)->frame, &fk);
		ips[nr++] = *(const uint64_t *)fk;
		node = ((const struct node *)nk)->parent;
	}
	return nr;
}

uint32_t stacks__flags(const struct stacks *s, uint32_t id)
{
	const struct stack_ref *r = ref_of(s, id);

	return r ? r->flags : 0;
}

uint32_t stacks__count(const struct stacks *s)
{
	return htab__count(s->refs);
}

uint64_t stacks__dropped(const struct stacks *s)
{
	return s->dropped;
}

size_t stacks__mem_bytes(const struct stacks *s)
{
	return sizeof(*s) + htab__mem_bytes(s->frames) + htab__mem_bytes(s->nodes) + htab__mem_bytes(s->refs);
}

// SPDX-License-Identifier: GPL-2.0
/* Buffers kept from one query to the next, freed when idle (scratch.h). */
#include <stdlib.h>
#include <string.h>
#include "lib/clock.h"
#include "lib/scratch.h"

struct scratch_buf {
	void *p;
	size_t size;
	bool lent;
};

struct scratch {
	struct scratch_buf b[SCRATCH_SLOTS];
	uint64_t idle_ns;
	uint64_t used_ns;	/* the last get or put */
};

struct scratch *scratch__new(uint64_t idle_ns)
{
	struct scratch *s = calloc(1, sizeof(*s));

	if (s)
		s->idle_ns = idle_ns;
	return s;
}

static void drop(struct scratch_buf *b)
{
	free(b->p);
	b->p = NULL;
	b->size = 0;
}

void scratch__free(struct scratch *s)
{
	unsigned int i;

	if (!s)
		return;
	for (i = 0; i < SCRATCH_SLOTS; i++)
		drop(&s->b[i]);
	free(s);
}

static void *alloc(size_t size, enum scratch_init init)
{
	size = size ? size : 1;
	return init == SCRATCH_RAW ? malloc(size) : calloc(1, size);
}

void *scratch__get(struct scratch *s, unsigned int slot, size_t size, enum scratch_init init)
{
	struct scratch_buf *b;
	size_t room;

	if (!s || slot >= SCRATCH_SLOTS || s->b[slot].lent)
		return alloc(size, init);
	b = &s->b[slot];
	s->used_ns = ls_now_ns();
	if (b->size < size || !b->p) {
		/*
		 * a fresh block comes zeroed, its pages untouched until used; a little room
		 * past @size, as what it is sized by (keys, rows) mostly grows
		 */
		room = size + size / 16;
		drop(b);
		if (!(b->p = alloc(room, init)))
			return NULL;
		b->size = room ? room : 1;
	} else if (init == SCRATCH_ZEROED) {
		memset(b->p, 0, size);
	}
	b->lent = true;
	return b->p;
}

void scratch__put(struct scratch *s, unsigned int slot, void *p)
{
	if (!p)
		return;
	if (!s || slot >= SCRATCH_SLOTS || s->b[slot].p != p) {
		free(p);
		return;
	}
	s->b[slot].lent = false;
	s->used_ns = ls_now_ns();
}

void scratch__idle(struct scratch *s, uint64_t now_ns)
{
	unsigned int i;

	if (!s || !s->idle_ns || now_ns - s->used_ns < s->idle_ns)
		return;
	for (i = 0; i < SCRATCH_SLOTS; i++)
		if (!s->b[i].lent)
			drop(&s->b[i]);
}

size_t scratch__bytes(const struct scratch *s)
{
	size_t sum = 0;
	unsigned int i;

	for (i = 0; s && i < SCRATCH_SLOTS; i++)
		sum += s->b[i].size;
	return sum;
}

// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include "decode/dumps.h"
#include "lib/htab.h"

struct dump_val {
	uint64_t seen_ns;
	uint32_t sid;
	uint32_t taken;
};

struct dumps {
	struct htab *h;		/* dump id -> struct dump_val */
	uint32_t max;
};

struct dumps *dumps__new(uint32_t max)
{
	struct dumps *d = calloc(1, sizeof(*d));

	if (!d)
		return NULL;
	d->max = max;
	d->h = htab__new(sizeof(uint64_t), sizeof(struct dump_val), max);
	if (!d->h) {
		free(d);
		return NULL;
	}
	return d;
}

void dumps__free(struct dumps *d)
{
	if (!d)
		return;
	htab__free(d->h);
	free(d);
}

int dumps__put(struct dumps *d, uint64_t id, uint32_t sid, uint64_t now)
{
	struct dump_val *v;
	int created, err = 0;

	v = htab__upsert(d->h, &id, &created, &err);
	if (!v)
		return err;
	v->seen_ns = now;
	v->sid = sid;
	v->taken = 0;
	return 0;
}

bool dumps__find(const struct dumps *d, uint64_t id, uint32_t *sid)
{
	const struct dump_val *v = htab__find(d->h, &id);

	if (!v || v->taken)
		return false;
	*sid = v->sid;
	return true;
}

bool dumps__take(struct dumps *d, uint64_t id, uint32_t *sid)
{
	struct dump_val *v = htab__find(d->h, &id);

	if (!v || v->taken)
		return false;
	v->taken = 1;
	*sid = v->sid;
	return true;
}

/* The table cannot delete: it is rebuilt with the dumps still waiting to be taken. */
uint64_t dumps__gc(struct dumps *d, uint64_t now)
{
	struct htab *n = htab__new(sizeof(uint64_t), sizeof(struct dump_val), d->max);
	uint64_t expired = 0;
	const void *k;
	size_t it = 0;
	void *v;

	if (!n)
		return 0;	/* keep the old table; the next sweep tries again */
	while (!htab__next(d->h, &it, &k, &v)) {
		const struct dump_val *dv = v;
		struct dump_val *nv;

		if (dv->taken)
			continue;
		if (now - dv->seen_ns >= DUMPS_KEEP_NS) {
			expired++;
			continue;
		}
		nv = htab__upsert(n, k, NULL, NULL);
		if (nv)
			*nv = *dv;
	}
	htab__free(d->h);
	d->h = n;
	return expired;
}

uint32_t dumps__count(const struct dumps *d)
{
	return htab__count(d->h);
}

// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "lib/htab.h"

enum {
	HTAB_MIN_BUCKETS = 16,
	HTAB_MIN_ENTRIES = 16,
};

/*
 * A word at a time (keys here are small fixed structs: 4 to ~100 bytes), each mixed by a
 * multiply and a shift, the tail as one zero-padded word, then murmur3's 64-bit finalizer:
 * the tables mask the low bits, which it makes depend on every bit of the key. (Byte at a
 * time, FNV-1a took a dependent multiply per byte.)
 */
uint64_t ls_hash_bytes(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ULL ^ len, w;

	for (; len >= sizeof(w); p += sizeof(w), len -= sizeof(w)) {
		memcpy(&w, p, sizeof(w));
		h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
		h ^= h >> 29;
	}
	if (len) {	/* shifted in, not copied: a copy of a variable length is a call */
		for (w = 0; len--;)
			w = w << 8 | p[len];
		h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
		h ^= h >> 29;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ULL;
	h ^= h >> 33;
	return h;
}

/*
 * Key equality without a call: a 4-byte key (a tid, an id) as one load, keys of whole
 * words (8 bytes, the aggregator's, the queries') a word at a time; others by memcmp().
 */
static inline bool key_eq(const void *a, const void *b, size_t len)
{
	uint64_t x, y;
	uint32_t u, v;

	if (len == sizeof(u)) {
		memcpy(&u, a, sizeof(u));
		memcpy(&v, b, sizeof(v));
		return u == v;
	}
	if (len % sizeof(x))
		return !memcmp(a, b, len);
	for (; len; a = (const char *)a + sizeof(x), b = (const char *)b + sizeof(x), len -= sizeof(x)) {
		memcpy(&x, a, sizeof(x));
		memcpy(&y, b, sizeof(y));
		if (x != y)
			return false;
	}
	return true;
}

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

struct htab *htab__new(size_t key_size, size_t value_size, size_t max_entries)
{
	struct htab *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->key_size = key_size;
	h->value_size = value_size;
	h->key_space = align8(key_size);
	h->entry_size = h->key_space + align8(value_size);
	/* indexes are 32-bit */
	h->max_entries = max_entries < UINT32_MAX - 1 ? max_entries : UINT32_MAX - 1;
	return h;
}

void htab__free(struct htab *h)
{
	if (!h)
		return;
	free(h->buckets);
	free(h->entries);
	free(h);
}

static unsigned char *entry(const struct htab *h, size_t i)
{
	return h->entries + i * h->entry_size;
}

/* The bucket holding @key, or the empty one where it would go. */
static uint32_t *probe(const struct htab *h, const void *key)
{
	size_t mask = h->nr_buckets - 1, i = ls_hash_bytes(key, h->key_size) & mask;

	for (;; i = (i + 1) & mask) {
		uint32_t *b = &h->buckets[i];

		if (!*b || key_eq(entry(h, *b - 1), key, h->key_size))
			return b;
	}
}

static int grow_buckets(struct htab *h)
{
	size_t n = h->nr_buckets ? h->nr_buckets * 2 : HTAB_MIN_BUCKETS, i;
	uint32_t *old = h->buckets;

	h->buckets = calloc(n, sizeof(*h->buckets));
	if (!h->buckets) {
		h->buckets = old;
		return -ENOMEM;
	}
	free(old);
	h->nr_buckets = n;
	for (i = 0; i < h->count; i++)
		*probe(h, entry(h, i)) = i + 1;
	return 0;
}

static int grow_entries(struct htab *h)
{
	size_t cap = h->cap ? h->cap * 2 : HTAB_MIN_ENTRIES;
	unsigned char *n;

	if (cap > h->max_entries)
		cap = h->max_entries;
	/* large blocks are mapped: pages past the last entry cost nothing until written */
	n = realloc(h->entries, cap * h->entry_size);
	if (!n)
		return -ENOMEM;
	h->entries = n;
	h->cap = cap;
	return 0;
}

void *htab__find(const struct htab *h, const void *key)
{
	uint32_t *b;

	if (!h->count)
		return NULL;
	b = probe(h, key);
	return *b ? entry(h, *b - 1) + h->key_space : NULL;
}

bool htab__index(const struct htab *h, const void *key, uint32_t *index)
{
	uint32_t *b;

	if (!h->count)
		return false;
	b = probe(h, key);
	if (*b)
		*index = *b - 1;
	return *b;
}

void *htab__upsert_at(struct htab *h, const void *key, uint32_t *index, int *created, int *err)
{
	unsigned char *e;
	uint32_t *b = NULL;
	bool grow;

	if (created)
		*created = 0;
	if (h->count) {
		b = probe(h, key);
		if (*b) {
			if (index)
				*index = *b - 1;
			return entry(h, *b - 1) + h->key_space;
		}
	}
	if (h->count >= h->max_entries) {
		if (err)
			*err = -ENOSPC;
		return NULL;
	}
	/* keep the load factor under 1/2 so probes stay short */
	grow = (h->count + 1) * 2 > h->nr_buckets;
	if ((grow && grow_buckets(h)) || (h->count == h->cap && grow_entries(h))) {
		if (err)
			*err = -ENOMEM;
		return NULL;
	}
	if (grow || !b)	/* the empty bucket found above is still the key's */
		b = probe(h, key);
	e = entry(h, h->count);
	memcpy(e, key, h->key_size);
	memset(e + h->key_size, 0, h->entry_size - h->key_size);
	*b = h->count + 1;
	if (index)
		*index = h->count;
	h->count++;
	if (created)
		*created = 1;
	return e + h->key_space;
}

void *htab__upsert(struct htab *h, const void *key, int *created, int *err)
{
	return htab__upsert_at(h, key, NULL, created, err);
}

size_t htab__mem_bytes(const struct htab *h)
{
	return sizeof(*h) + h->nr_buckets * sizeof(*h->buckets) + h->count * h->entry_size;
}

void htab__clear(struct htab *h)
{
	if (h->buckets)
		memset(h->buckets, 0, h->nr_buckets * sizeof(*h->buckets));
	h->count = 0;
}

int htab__next(const struct htab *h, size_t *iter, const void **key, void **value)
{
	if (*iter >= h->count)
		return -ENOENT;
	*key = entry(h, *iter);
	*value = entry(h, *iter) + h->key_space;
	(*iter)++;
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "htab.h"

enum { HTAB_MIN_BUCKETS = 16 };

struct htab {
	size_t key_size, value_size, entry_size;
	size_t max_entries, nr_buckets, count;
	unsigned char *entries;	/* [used byte][key][value] per bucket, padded to 8 */
};

/* FNV-1a over 8-byte words with a final avalanche: keys here are small fixed structs. */
uint64_t ls_hash_bytes(const void *data, size_t len)
{
	const unsigned char *p = data;
	uint64_t h = 0xcbf29ce484222325ULL;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ULL;
	}
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
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
	h->entry_size = 8 + align8(key_size) + align8(value_size);
	h->max_entries = max_entries;
	return h;
}

void htab__free(struct htab *h)
{
	if (!h)
		return;
	free(h->entries);
	free(h);
}

static unsigned char *bucket(const struct htab *h, size_t i)
{
	return h->entries + i * h->entry_size;
}

static void *bucket_key(const struct htab *h, unsigned char *b)
{
	(void)h;
	return b + 8;
}

static void *bucket_value(const struct htab *h, unsigned char *b)
{
	return b + 8 + align8(h->key_size);
}

static unsigned char *probe(const struct htab *h, const void *key)
{
	size_t mask = h->nr_buckets - 1, i = ls_hash_bytes(key, h->key_size) & mask;

	for (;; i = (i + 1) & mask) {
		unsigned char *b = bucket(h, i);

		if (!b[0] || !memcmp(bucket_key(h, b), key, h->key_size))
			return b;
	}
}

static int grow(struct htab *h)
{
	size_t old_n = h->nr_buckets, n = old_n ? old_n * 2 : HTAB_MIN_BUCKETS, i;
	unsigned char *old = h->entries;

	h->entries = calloc(n, h->entry_size);
	if (!h->entries) {
		h->entries = old;
		return -ENOMEM;
	}
	h->nr_buckets = n;
	for (i = 0; i < old_n; i++) {
		unsigned char *b = old + i * h->entry_size;

		if (b[0])
			memcpy(probe(h, bucket_key(h, b)), b, h->entry_size);
	}
	free(old);
	return 0;
}

void *htab__find(const struct htab *h, const void *key)
{
	unsigned char *b;

	if (!h->count)
		return NULL;
	b = probe(h, key);
	return b[0] ? bucket_value(h, b) : NULL;
}

void *htab__upsert(struct htab *h, const void *key, int *created, int *err)
{
	unsigned char *b;

	if (created)
		*created = 0;
	if (h->count) {
		b = probe(h, key);
		if (b[0])
			return bucket_value(h, b);
	}
	if (h->count >= h->max_entries) {
		if (err)
			*err = -ENOSPC;
		return NULL;
	}
	/* keep the load factor under 1/2 so probes stay short */
	if ((h->count + 1) * 2 > h->nr_buckets && grow(h)) {
		if (err)
			*err = -ENOMEM;
		return NULL;
	}
	b = probe(h, key);
	b[0] = 1;
	memcpy(bucket_key(h, b), key, h->key_size);
	memset(bucket_value(h, b), 0, h->value_size);
	h->count++;
	if (created)
		*created = 1;
	return bucket_value(h, b);
}

size_t htab__count(const struct htab *h)
{
	return h->count;
}

size_t htab__mem_bytes(const struct htab *h)
{
	return sizeof(*h) + h->nr_buckets * h->entry_size;
}

void htab__clear(struct htab *h)
{
	if (h->entries)
		memset(h->entries, 0, h->nr_buckets * h->entry_size);
	h->count = 0;
}

int htab__next(const struct htab *h, size_t *iter, const void **key, void **value)
{
	for (; *iter < h->nr_buckets; (*iter)++) {
		unsigned char *b = bucket(h, *iter);

		if (b[0]) {
			(*iter)++;
			*key = bucket_key(h, b);
			*value = bucket_value(h, b);
			return 0;
		}
	}
	return -ENOENT;
}

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Open-addressing hash table with fixed-size keys and values, bounded by a maximum entry
 * count. Entries are stored densely in insertion order and the buckets hold their
 * indexes, so an entry's index names it for the table's life (the aggregator's key ids)
 * and iteration visits entries in the order they came. No deletion: tables are dropped or
 * cleared whole. A pointer into the table is valid until the next insertion.
 */
#ifndef __LS_HTAB_H
#define __LS_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Entries are dense, in insertion order (an entry's index is its id for as long as the
 * table lives); the buckets hold entry index + 1 (0: empty). A sparse bucket costs 4 bytes,
 * not an entry, and iteration walks only live entries. The fields are the table's own:
 * they are here so that reading an entry by index compiles to a multiply and an add.
 */
struct htab {
	size_t key_size, value_size, key_space, entry_size;
	size_t max_entries, count, cap;
	size_t nr_buckets;
	uint32_t *buckets;
	unsigned char *entries;
};

struct htab *htab__new(size_t key_size, size_t value_size, size_t max_entries);
void htab__free(struct htab *h);
/* Returns the value for @key, inserting a zeroed one; NULL when the table is full (-ENOSPC
 * in *err) or out of memory (-ENOMEM). *created says whether it was inserted. */
void *htab__upsert(struct htab *h, const void *key, int *created, int *err);
/* As htab__upsert(), and *index (if not NULL) receives the entry's index. */
void *htab__upsert_at(struct htab *h, const void *key, uint32_t *index, int *created, int *err);
void *htab__find(const struct htab *h, const void *key);
/* Whether @key is in @h; *index receives its entry's index if so. */
bool htab__index(const struct htab *h, const void *key, uint32_t *index);
/* The value of entry @index (and its key in *key if not NULL); NULL past the end. */
static inline void *htab__at(const struct htab *h, uint32_t index, const void **key)
{
	unsigned char *e;

	if (index >= h->count)
		return NULL;
	e = h->entries + index * h->entry_size;
	if (key)
		*key = e;
	return e + h->key_space;
}
static inline size_t htab__count(const struct htab *h)
{
	return h->count;
}
size_t htab__mem_bytes(const struct htab *h);
void htab__clear(struct htab *h);

/* Iteration: pass *iter = 0 first; returns 0 and fills key/value until the end (-ENOENT). */
int htab__next(const struct htab *h, size_t *iter, const void **key, void **value);

uint64_t ls_hash_bytes(const void *data, size_t len);

#endif

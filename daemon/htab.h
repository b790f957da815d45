/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Open-addressing hash table with fixed-size keys and values stored inline, bounded by a
 * maximum entry count. The aggregator keeps one per time slot and the stack interner one
 * in all, so lookups must not allocate per entry. No deletion: tables are dropped whole.
 */
#ifndef __LS_HTAB_H
#define __LS_HTAB_H

#include <stddef.h>
#include <stdint.h>

struct htab;

struct htab *htab__new(size_t key_size, size_t value_size, size_t max_entries);
void htab__free(struct htab *h);
/* Returns the value for @key, inserting a zeroed one; NULL when the table is full (-ENOSPC
 * in *err) or out of memory (-ENOMEM). *created says whether it was inserted. */
void *htab__upsert(struct htab *h, const void *key, int *created, int *err);
void *htab__find(const struct htab *h, const void *key);
size_t htab__count(const struct htab *h);
size_t htab__mem_bytes(const struct htab *h);
void htab__clear(struct htab *h);

/* Iteration: pass *iter = 0 first; returns 0 and fills key/value until the end (-ENOENT). */
int htab__next(const struct htab *h, size_t *iter, const void **key, void **value);

uint64_t ls_hash_bytes(const void *data, size_t len);

#endif

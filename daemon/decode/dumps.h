/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Unwound stack dumps waiting for the record that names them. A dump reaches the daemon
 * on its own (bpf/ustack.h); the wait that asked for it is emitted when the wait ends,
 * often through another CPU's ring. Each dump is taken by exactly one record; ones no
 * record took (the record was lost, counted in BPF) are dropped after DUMPS_KEEP_NS.
 */
#ifndef __LS_DUMPS_H
#define __LS_DUMPS_H

#include <stdbool.h>
#include <stdint.h>

/* A futex wait can last minutes (a condvar); its waiter's dump waits as long. */
#define DUMPS_KEEP_NS (600ULL * 1000000000ULL)

struct dumps;

struct dumps *dumps__new(uint32_t max);
void dumps__free(struct dumps *d);
/* Remembers that dump @id unwound to interned stack @sid. -ENOSPC when full. */
int dumps__put(struct dumps *d, uint64_t id, uint32_t sid, uint64_t now);
/* Dump @id's stack without taking it; false when it has not arrived (or was taken). */
bool dumps__find(const struct dumps *d, uint64_t id, uint32_t *sid);
/* Takes dump @id's stack into *sid; false when the dump has not arrived. */
bool dumps__take(struct dumps *d, uint64_t id, uint32_t *sid);
/* Drops taken dumps and those older than DUMPS_KEEP_NS; returns how many expired untaken. */
uint64_t dumps__gc(struct dumps *d, uint64_t now);
uint32_t dumps__count(const struct dumps *d);

#endif

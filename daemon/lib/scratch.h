/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Buffers kept from one query to the next. A query over 100 k keys fills arrays of a few
 * megabytes (a row per key, a row index per key); allocated afresh they are mapped anew
 * and faulted in page by page each time, ~1 750 faults and an eighth of the daemon's time
 * per query. A buffer is lent to one user at a time (another one asking meanwhile gets an
 * allocation of its own), and every buffer is freed once none was lent for idle_ns: a
 * burst of queries reuses them, an idle daemon holds none.
 */
#ifndef __LS_SCRATCH_H
#define __LS_SCRATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { SCRATCH_SLOTS = 8 };

/* What a buffer holds when scratch__get() lends it. */
enum scratch_init {
	SCRATCH_RAW,		/* anything: its user writes it before it reads it */
	SCRATCH_ZEROED,		/* zeros: cleared at each loan */
	/*
	 * zeros, kept so by its users, who clear what they wrote before they give it back:
	 * cleared only when it is made (a view clears the cells of its keys, not the block)
	 */
	SCRATCH_KEPT_ZEROED,
};

struct scratch;

/* @idle_ns: buffers unused this long are freed (scratch__idle()); 0: kept. */
struct scratch *scratch__new(uint64_t idle_ns);
void scratch__free(struct scratch *s);
/*
 * Buffer @slot, of at least @size bytes, as @init says, lent until scratch__put(); an
 * allocation of its own when it is lent already, or @s is NULL. NULL: out of memory.
 * A slot asks for the same @init each time.
 */
void *scratch__get(struct scratch *s, unsigned int slot, size_t size, enum scratch_init init);
/* Gives back what scratch__get(@s, @slot) returned (frees it if it was not the slot's). */
void scratch__put(struct scratch *s, unsigned int slot, void *p);
/* Frees the buffers if none was lent for idle_ns by @now_ns. Call from a timer. */
void scratch__idle(struct scratch *s, uint64_t now_ns);
/* Bytes held now. */
size_t scratch__bytes(const struct scratch *s);

#endif

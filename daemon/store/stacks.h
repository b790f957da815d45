/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Interned stacks: every distinct stack is stored once and named by a small id, so the
 * aggregator's keys stay fixed-size and a stack seen a million times costs one copy; and
 * frames that stacks share from the outermost one in are stored once for all of them.
 */
#ifndef __LS_STACKS_H
#define __LS_STACKS_H

#include <stdint.h>

enum ls_stack_id {
	LS_STACK_NONE = 0,	/* no stack was taken (sampled out) */
	LS_STACK_MISSING = 1,	/* a stack was wanted but the kernel could not give one */
	LS_STACK_FIRST = 2,
};

/* How a stack was taken, kept with it: a DWARF and a frame-pointer walk are two stacks. */
enum ls_stack_flags {
	LS_STACK_F_DWARF	= 1U << 0,	/* unwound from a dump with CFI (else frame pointers) */
	LS_STACK_F_TRUNCATED	= 1U << 1,	/* the walk ended before the outermost frame */
};

struct stacks;

struct stacks *stacks__new(uint32_t max_stacks);
void stacks__free(struct stacks *s);
/* Finds or adds @ips with @flags; *id receives its id. -ENOSPC when the table is full. */
int stacks__intern(struct stacks *s, const uint64_t *ips, uint32_t nr, uint32_t flags, uint32_t *id);
/* enum ls_stack_flags of @id (0 for the special ids). */
uint32_t stacks__flags(const struct stacks *s, uint32_t id);
/* Copies up to @max frames of @id, innermost first, into @ips; returns how many (0 for the special ids). */
uint32_t stacks__get(const struct stacks *s, uint32_t id, uint64_t *ips, uint32_t max);
uint32_t stacks__count(const struct stacks *s);
uint64_t stacks__dropped(const struct stacks *s);
size_t stacks__mem_bytes(const struct stacks *s);

#endif

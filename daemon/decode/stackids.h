/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Stack-map ids -> interned stacks, for one of the collector's stack maps. Ids are stable
 * until freed (the maps are written without BPF_F_REUSE_STACKID); an id unseen for
 * STACK_IDS_IDLE_NS is freed in the map, so a daemon that runs for weeks keeps room for
 * new stacks (no record in the rings can still name it: they are drained every tick).
 * User stacks also remember the process they were normalized for: the same addresses
 * mean other code elsewhere. Kernel stacks lose their tracing frames (our program and the
 * tracepoint glue are not the waiter's stack).
 */
#ifndef __LS_STACKIDS_H
#define __LS_STACKIDS_H

#include <stdint.h>
#include "collect/collector.h"

#define STACK_IDS_IDLE_NS (300 * 1000000000ULL)

struct ksyms;
struct stacks;
struct usyms;

struct stack_ids_opts {
	enum collector_stack_kind kind;
	uint32_t entries;		/* the stack map's size */
	struct collector *coll;
	struct stacks *stacks;		/* where stacks are interned */
	struct usyms *usyms;		/* user stacks: normalized per process */
	struct ksyms *ksyms;		/* kernel stacks: NULL, tracing frames are kept */
};

struct stack_ids;

int stack_ids__new(const struct stack_ids_opts *opts, struct stack_ids **out);
void stack_ids__free(struct stack_ids *s);
/*
 * The interned stack of map id @id (of process @pid for user stacks), read and interned
 * the first time; LS_STACK_MISSING when it cannot be (counted in *failed).
 */
uint32_t stack_ids__intern(struct stack_ids *s, int32_t id, uint32_t pid, uint64_t now, uint64_t *failed);
/* Frees the ids unseen since @now - STACK_IDS_IDLE_NS in the map. */
void stack_ids__gc(struct stack_ids *s, uint64_t now);
/* Ids freed so far. */
uint64_t stack_ids__freed(const struct stack_ids *s);

#endif

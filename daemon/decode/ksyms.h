/* SPDX-License-Identifier: GPL-2.0 */
/* Kernel symbols from /proc/kallsyms: code for stacks, data for static lock names. */
#ifndef __LS_KSYMS_H
#define __LS_KSYMS_H

#include <stdbool.h>
#include <stdint.h>

struct ksyms;

struct ksym {
	uint64_t addr;
	const char *name;
	const char *module;	/* NULL for vmlinux */
	bool data;		/* a variable, not a function */
};

/* Loads @path (NULL: /proc/kallsyms). Fails with -EPERM when addresses are hidden. */
int ksyms__new(const char *path, struct ksyms **out);
void ksyms__free(struct ksyms *k);
/* The function containing @addr, or NULL. */
const struct ksym *ksyms__func(const struct ksyms *k, uint64_t addr);
/* The variable starting at or containing @addr (within @max_off bytes), or NULL. */
const struct ksym *ksyms__data(const struct ksyms *k, uint64_t addr, uint64_t max_off);
/* Locking internals (sched and lock text sections): skipped to find a wait's caller. */
bool ksyms__is_lock_func(const struct ksyms *k, uint64_t addr);
/* Frames the tracing machinery adds on top of a stack taken in a BPF program. */
bool ksyms__is_tracing_func(const struct ksyms *k, uint64_t addr);
size_t ksyms__count(const struct ksyms *k);

#endif

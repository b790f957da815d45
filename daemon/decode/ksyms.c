// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "decode/ksyms.h"
#include "lib/vec.h"

struct range {
	uint64_t start, end;
};

struct ksyms {
	struct ksym *syms;	/* sorted by address */
	size_t nr, cap;
	char *strs;		/* all names, NUL-separated */
	size_t strs_len, strs_cap;
	/* mutex/rwsem slow paths live in .sched.text, spinlocks in .spinlock.text */
	struct range sched_text, lock_text;
};

static long add_str(struct ksyms *k, const char *s)
{
	size_t len = strlen(s) + 1;
	long off;

	if (k->strs_len + len > k->strs_cap) {
		size_t cap = k->strs_cap ? k->strs_cap * 2 : 1 << 20;
		char *n;

		while (cap < k->strs_len + len)
			cap *= 2;
		n = realloc(k->strs, cap);
		if (!n)
			return -ENOMEM;
		k->strs = n;
		k->strs_cap = cap;
	}
	off = k->strs_len;
	memcpy(k->strs + off, s, len);
	k->strs_len += len;
	return off;
}

static int add_sym(struct ksyms *k, uint64_t addr, char type, const char *name, const char *mod)
{
	long name_off, mod_off = -1;

	if (k->nr == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 4096;
		struct ksym *n = realloc(k->syms, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		k->syms = n;
		k->cap = cap;
	}
	name_off = add_str(k, name);
	if (mod && (mod_off = add_str(k, mod)) < 0)
		return -ENOMEM;
	if (name_off < 0)
		return -ENOMEM;
	/* string offsets until the table stops growing; turned into pointers at the end */
	k->syms[k->nr].addr = addr;
	k->syms[k->nr].name = (const char *)(uintptr_t)name_off;
	k->syms[k->nr].module = mod_off < 0 ? NULL : (const char *)(uintptr_t)(mod_off + 1);
	k->syms[k->nr].data = strchr("dDbBrR", type) != NULL;
	k->nr++;
	return 0;
}

static int cmp_sym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void note_section(struct ksyms *k, uint64_t addr, const char *name)
{
	if (!strcmp(name, "__sched_text_start"))
		k->sched_text.start = addr;
	else if (!strcmp(name, "__sched_text_end"))
		k->sched_text.end = addr;
	else if (!strcmp(name, "__lock_text_start"))
		k->lock_text.start = addr;
	else if (!strcmp(name, "__lock_text_end"))
		k->lock_text.end = addr;
}

/*
 * One line of /proc/kallsyms, "ADDR TYPE NAME" or "ADDR TYPE NAME\t[MODULE]", split in
 * place (NUL-terminated name and module); false when it is not one. By hand: sscanf()
 * took 45 ms of the daemon's start over the 120 000 lines here.
 */
static bool split_line(char *line, uint64_t *addr, char *type, char **name, char **mod)
{
	char *p;

	*addr = strtoull(line, &p, 16);
	if (p == line || *p != ' ' || !p[1] || p[2] != ' ')
		return false;
	*type = p[1];
	*name = p + 3;
	p = *name + strcspn(*name, " \t\n");
	if (p == *name)
		return false;
	*mod = NULL;
	if (*p == '\t' && p[1] == '[') {
		*mod = p + 2;
		(*mod)[strcspn(*mod, "]\n")] = 0;
	}
	*p = 0;
	return true;
}

static int parse(struct ksyms *k, FILE *f)
{
	char line[512], *name, *mod;
	bool nonzero = false;
	uint64_t addr;
	char type;
	size_t i;
	int err;

	while (fgets(line, sizeof(line), f)) {
		if (!split_line(line, &addr, &type, &name, &mod))
			continue;
		nonzero |= addr != 0;
		if (!strchr("tTwWdDbBrR", type))
			continue;
		note_section(k, addr, name);
		if ((err = add_sym(k, addr, type, name, mod)))
			return err;
	}
	/* kptr_restrict hides addresses as zeros: every lookup would be wrong */
	if (!nonzero)
		return -EPERM;
	for (i = 0; i < k->nr; i++) {
		k->syms[i].name = k->strs + (uintptr_t)k->syms[i].name;
		if (k->syms[i].module)
			k->syms[i].module = k->strs + (uintptr_t)k->syms[i].module - 1;
	}
	ls_sort(k->syms, k->nr, sizeof(*k->syms), cmp_sym);
	return 0;
}

int ksyms__new(const char *path, struct ksyms **out)
{
	struct ksyms *k = calloc(1, sizeof(*k));
	FILE *f;
	int err;

	if (!k)
		return -ENOMEM;
	f = fopen(path ? path : "/proc/kallsyms", "re");
	if (!f) {
		err = -errno;
		goto cleanup;
	}
	err = parse(k, f);
	fclose(f);
	if (err)
		goto cleanup;
	*out = k;
	return 0;
cleanup:
	ksyms__free(k);
	return err;
}

void ksyms__free(struct ksyms *k)
{
	if (!k)
		return;
	free(k->syms);
	free(k->strs);
	free(k);
}

/* Index of the last symbol at or below @addr, or -1. */
static long floor_idx(const struct ksyms *k, uint64_t addr)
{
	long lo = 0, hi = (long)k->nr - 1, best = -1;

	while (lo <= hi) {
		long mid = lo + (hi - lo) / 2;

		if (k->syms[mid].addr <= addr) {
			best = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return best;
}

const struct ksym *ksyms__func(const struct ksyms *k, uint64_t addr)
{
	long i = floor_idx(k, addr);

	for (; i >= 0; i--) {
		if (!k->syms[i].data)
			return &k->syms[i];
		if (k->syms[i].addr != addr)
			break;	/* a variable covers this address, not code */
	}
	return NULL;
}

const struct ksym *ksyms__data(const struct ksyms *k, uint64_t addr, uint64_t max_off)
{
	long i = floor_idx(k, addr);

	if (i < 0 || !k->syms[i].data || addr - k->syms[i].addr > max_off)
		return NULL;
	return &k->syms[i];
}

static bool in_range(const struct range *r, uint64_t addr)
{
	return r->start && addr >= r->start && addr < r->end;
}

bool ksyms__is_lock_func(const struct ksyms *k, uint64_t addr)
{
	return in_range(&k->sched_text, addr) || in_range(&k->lock_text, addr);
}

bool ksyms__is_tracing_func(const struct ksyms *k, uint64_t addr)
{
	static const char *const prefixes[] = { "bpf_", "__bpf_", "__traceiter_", "perf_trace_",
						"trace_event_", "__trace_" };
	const struct ksym *s = ksyms__func(k, addr);
	size_t i;

	/* BPF programs load after the table is read: unnamed text above the kernel */
	if (!s || s->module)
		return !s || !strcmp(s->module, "bpf");
	for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(s->name, prefixes[i], strlen(prefixes[i])))
			return true;
	return false;
}

size_t ksyms__count(const struct ksyms *k)
{
	return k->nr;
}

// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include "decode/ksyms.h"
#include "decode/stackids.h"
#include "decode/usyms.h"
#include "lib/clock.h"
#include "store/stacks.h"
#include "lockscope.h"

/*
 * What the daemon knows of a map id, in one place: a record's lookup touches one line.
 * The map may be sized far past the stacks it holds (524 k ids for 100 k stacks, spread by
 * their hash), so the entry is kept small: seconds are fine enough to tell 300 s of idleness.
 */
struct id_entry {
	uint32_t sid;		/* the interned stack; 0: not read yet */
	uint32_t pid;		/* the process a user stack was normalized for */
	uint32_t seen_s;	/* when a record last named the id, in seconds */
};

struct stack_ids {
	struct stack_ids_opts opts;
	struct id_entry *ids;	/* by map id */
	uint64_t freed;
};

int stack_ids__new(const struct stack_ids_opts *opts, struct stack_ids **out)
{
	struct stack_ids *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->opts = *opts;
	s->ids = calloc(opts->entries, sizeof(*s->ids));
	if (!s->ids) {
		stack_ids__free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void stack_ids__free(struct stack_ids *s)
{
	if (!s)
		return;
	free(s->ids);
	free(s);
}

uint32_t stack_ids__intern(struct stack_ids *s, int32_t id, uint32_t pid, uint64_t now, uint64_t *failed)
{
	uint64_t ips[LS_MAX_STACK_DEPTH];
	uint32_t sid;
	int n, skip = 0;

	struct id_entry *e;

	if (id < 0 || (uint32_t)id >= s->opts.entries)
		return LS_STACK_MISSING;
	e = &s->ids[id];
	e->seen_s = now / NSEC_PER_SEC;
	if (e->sid && e->pid == pid)
		return e->sid;
	n = collector__stack(s->opts.coll, s->opts.kind, id, ips, LS_MAX_STACK_DEPTH);
	if (s->opts.kind == COLL_USTACK && n > 0)
		usyms__normalize(s->opts.usyms, pid, ips, n, ips);
	while (s->opts.kind == COLL_KSTACK && s->opts.ksyms && skip < n - 1 &&
	       ksyms__is_tracing_func(s->opts.ksyms, ips[skip]))
		skip++;
	if (n <= 0 || stacks__intern(s->opts.stacks, ips + skip, n - skip, 0, &sid)) {
		(*failed)++;
		return LS_STACK_MISSING;
	}
	e->sid = sid;
	e->pid = pid;
	return sid;
}

void stack_ids__gc(struct stack_ids *s, uint64_t now)
{
	uint64_t now_s = now / NSEC_PER_SEC;
	uint32_t id;

	for (id = 0; id < s->opts.entries; id++) {
		struct id_entry *e = &s->ids[id];

		if (!e->sid || now_s - e->seen_s < STACK_IDS_IDLE_NS / NSEC_PER_SEC)
			continue;
		if (!collector__stack_free(s->opts.coll, s->opts.kind, id))
			s->freed++;
		e->sid = 0;
	}
}

uint64_t stack_ids__freed(const struct stack_ids *s)
{
	return s->freed;
}

// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include "decode/ksyms.h"
#include "decode/stackids.h"
#include "decode/usyms.h"
#include "store/stacks.h"
#include "lockscope.h"

struct stack_ids {
	struct stack_ids_opts opts;
	uint32_t *sid;		/* by map id: the interned stack; 0: not read yet */
	uint32_t *pid;		/* the process a user stack was normalized for */
	uint64_t *seen;		/* when a record last named the id */
	uint64_t freed;
};

int stack_ids__new(const struct stack_ids_opts *opts, struct stack_ids **out)
{
	struct stack_ids *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->opts = *opts;
	s->sid = calloc(opts->entries, sizeof(*s->sid));
	s->pid = calloc(opts->entries, sizeof(*s->pid));
	s->seen = calloc(opts->entries, sizeof(*s->seen));
	if (!s->sid || !s->pid || !s->seen) {
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
	free(s->sid);
	free(s->pid);
	free(s->seen);
	free(s);
}

uint32_t stack_ids__intern(struct stack_ids *s, int32_t id, uint32_t pid, uint64_t now, uint64_t *failed)
{
	uint64_t ips[LS_MAX_STACK_DEPTH];
	uint32_t sid;
	int n, skip = 0;

	if (id < 0 || (uint32_t)id >= s->opts.entries)
		return LS_STACK_MISSING;
	s->seen[id] = now;
	if (s->sid[id] && s->pid[id] == pid)
		return s->sid[id];
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
	s->sid[id] = sid;
	s->pid[id] = pid;
	return sid;
}

void stack_ids__gc(struct stack_ids *s, uint64_t now)
{
	uint32_t id;

	for (id = 0; id < s->opts.entries; id++) {
		if (!s->sid[id] || now - s->seen[id] < STACK_IDS_IDLE_NS)
			continue;
		if (!collector__stack_free(s->opts.coll, s->opts.kind, id))
			s->freed++;
		s->sid[id] = 0;
	}
}

uint64_t stack_ids__freed(const struct stack_ids *s)
{
	return s->freed;
}

// SPDX-License-Identifier: GPL-2.0
/* The rows of a query as JSON: figures, histogram, stacks, owners, releasers and holders. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/query.h"
#include "analyze/query_int.h"
#include "store/stacks.h"
#include "lib/htab.h"
#include "lib/vec.h"

static int dominant_type(const struct row_detail *d)
{
	int i, best = 0;

	for (i = 1; i < ls_nr_lock_types; i++)
		if (d->type_total[i] > d->type_total[best])
			best = i;
	return best;
}

static cJSON *hist_json(const struct row_detail *d)
{
	cJSON *arr = cJSON_CreateArray();
	int last = -1, i;

	for (i = 0; i < LS_HIST_BUCKETS; i++)
		if (llround(d->hist[i]))
			last = i;
	for (i = 0; i <= last; i++)
		cJSON_AddItemToArray(arr, cJSON_CreateNumber(llround(d->hist[i])));
	return arr;
}

static cJSON *party_json(const struct query_ctx *ctx, const struct party *p, int max_stack)
{
	cJSON *o;

	if (!p->tid)
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "pid", p->pid);
	cJSON_AddNumberToObject(o, "tid", p->tid);
	cJSON_AddStringToObject(o, "comm", p->comm);
	query__add_stack(o, ctx, p->stack, max_stack, true);
	if (p->stack_tid) {	/* none of tid's stacks was sampled: another's of the row */
		cJSON_AddNumberToObject(o, "stack_pid", p->stack_pid);
		cJSON_AddNumberToObject(o, "stack_tid", p->stack_tid);
	}
	return o;
}

/* The process a chain goes on to: {pid, comm}, or null. */
static cJSON *chain_json(const struct party *p)
{
	cJSON *o;

	if (!p->pid)
		return cJSON_CreateNull();
	o = cJSON_CreateObject();
	cJSON_AddNumberToObject(o, "pid", p->pid);
	cJSON_AddStringToObject(o, "comm", p->comm[0] ? p->comm : "?");
	return o;
}

/* ---- holder samples ---- */

/*
 * Holder events are keyed like the lock they were taken for, plus their type and, for
 * samples, the stack.
 */
struct hold_key {
	uint64_t lock;
	uint32_t object, pid, stack, utype;
};

struct hold_val {
	uint64_t count;
	uint64_t total_ns;
};

/* A kernel lock's address, and a user lock's in a shared mapping, name it for every process. */
static struct hold_key hold_key_of(const struct agg_key *k, uint32_t utype, uint32_t stack)
{
	bool global = k->object || !(k->flags & LS_KIND_USER);
	struct hold_key hk = { .lock = k->lock, .object = k->object,
			       .pid = global ? 0 : k->pid, .stack = stack, .utype = utype };
	return hk;
}

static struct htab *build_holds(const struct agg_view *view, const struct query *q)
{
	struct htab *holds = htab__new(sizeof(struct hold_key), sizeof(struct hold_val), SIZE_MAX);
	const struct agg_key *k;
	struct agg_val val, *v = &val;
	size_t i;

	for (i = 0; holds && !agg_view__get(view, i, &k, &val); i++) {
		uint32_t utype = query__is_preempt(k->flags) ? LS_UTYPE_PREEMPT : LS_UTYPE_HOLD;
		struct hold_key hk;
		struct hold_val *n;

		if (!query_is_holder_event(k) || (q->pid && k->pid != q->pid))
			continue;
		hk = hold_key_of(k, utype, utype == LS_UTYPE_HOLD ? k->stack : 0);
		n = htab__upsert(holds, &hk, NULL, NULL);
		if (n) {
			n->count += v->st.count;
			n->total_ns += v->st.total_ns;
		}
	}
	return holds;
}

/* How often, and how long, the row's lock's holders were preempted while others waited. */
static cJSON *preempted_json(const struct htab *holds, const struct agg_key *rep)
{
	struct hold_key want = hold_key_of(rep, LS_UTYPE_PREEMPT, 0);
	const struct hold_val *v = htab__find(holds, &want);
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "count", v ? v->count : 0);
	cJSON_AddNumberToObject(o, "total_ns", v ? v->total_ns : 0);
	return o;
}

struct hold_pick {
	uint32_t stack;
	uint64_t samples;
};

static int cmp_picks(const void *a, const void *b)
{
	const struct hold_pick *x = a, *y = b;

	return x->samples < y->samples ? 1 : x->samples > y->samples ? -1 : 0;
}

/* Every holder stack of the row's lock, most sampled first; *total gets all its samples. */
static cJSON *holders_json(const struct query_ctx *ctx, const struct htab *holds,
			   const struct agg_key *rep, int max_stack, uint64_t *total)
{
	struct hold_key want = hold_key_of(rep, LS_UTYPE_HOLD, 0);
	cJSON *arr = cJSON_CreateArray();
	struct hold_pick *picks = NULL;
	size_t nr = 0, cap = 0, i;
	const void *kp;
	size_t iter = 0;
	void *vp;

	*total = 0;
	while (!htab__next(holds, &iter, &kp, &vp)) {
		const struct hold_key *hk = kp;

		if (hk->lock != want.lock || hk->object != want.object || hk->pid != want.pid ||
		    hk->utype != want.utype)
			continue;
		if (ls_vec_reserve(&picks, &cap, nr, sizeof(*picks)))
			break;
		picks[nr++] = (struct hold_pick){ hk->stack, ((struct hold_val *)vp)->count };
		*total += ((struct hold_val *)vp)->count;
	}
	ls_sort(picks, nr, sizeof(*picks), cmp_picks);
	for (i = 0; i < nr; i++) {
		cJSON *h = cJSON_CreateObject();

		cJSON_AddNumberToObject(h, "samples", picks[i].samples);
		cJSON_AddNumberToObject(h, "share", (double)picks[i].samples / *total);
		query__add_stack(h, ctx, picks[i].stack, max_stack, true);
		cJSON_AddItemToArray(arr, h);
	}
	free(picks);
	return arr;
}

/* The class of most of a row's wait time (rows by thread or cgroup mix them). */
static enum ls_wclass row_class(const struct row_detail *d)
{
	enum ls_wclass c, best = LS_WCLASS_LOCK;

	for (c = LS_WCLASS_LOCK; c < LS_WCLASS_MAX; c++)
		if (d->class_ns[c] > d->class_ns[best])
			best = c;
	return best;
}

static cJSON *row_json(const struct query_ctx *ctx, const struct query *q, const struct row *r,
		       const struct row_detail *d, const struct htab *holds)
{
	cJSON *o = cJSON_CreateObject();
	uint64_t count = llround(r->count), total = llround(r->total_ns);
	char caller[160];
	int type = q->group == LS_GROUP_THREAD ? dominant_type(d) : query__type_index(d->rep->flags);
	bool user = d->rep->flags & LS_KIND_USER;

	cJSON_AddStringToObject(o, "kind", user ? "user" : "kernel");
	cJSON_AddStringToObject(o, "type", ls_lock_types[type].name);
	cJSON_AddStringToObject(o, "class", classify__name(row_class(d)));
	if (q->group == LS_GROUP_CALLER) {
		query_caller_string(ctx, d->rep->stack, caller, sizeof(caller));
		cJSON_AddStringToObject(o, "caller", caller);
	}
	if (!d->many_locks) {
		cJSON_AddItemToObject(o, "lock", query__lock_json(ctx, d->rep));
		if (user && !d->rep->object)
			query_add_hex(o, "uaddr", d->rep->lock);
	}
	if (!d->many_pids) {
		cJSON_AddNumberToObject(o, "pid", d->rep->pid);
		if (!d->many_tids) {
			cJSON_AddNumberToObject(o, "tid", d->rep->tid);
			cJSON_AddStringToObject(o, "comm", d->comm);
		} else if (q->group == LS_GROUP_EDGE) {	/* the waiting process, by a thread's name */
			cJSON_AddStringToObject(o, "comm", d->comm);
		}
	}
	if (ctx->cgroups)
		query__add_cgroup(o, ctx, d->rep->pid, d->cgroups.many);
	cJSON_AddNumberToObject(o, "contended", count);
	cJSON_AddNumberToObject(o, "total_wait_ns", total);
	cJSON_AddNumberToObject(o, "max_wait_ns", r->max_ns);
	cJSON_AddNumberToObject(o, "min_wait_ns", r->min_ns);
	cJSON_AddNumberToObject(o, "avg_wait_ns", count ? total / count : 0);
	cJSON_AddItemToObject(o, "hist", hist_json(d));
	cJSON_AddBoolToObject(o, "estimated", d->estimated);
	cJSON_AddNumberToObject(o, "stack_samples", d->samples);
	if (q->group == LS_GROUP_CALLER && q->stacks)
		query__add_stack(o, ctx, d->rep->stack, q->max_stack, false);
	if (user)
		cJSON_AddNumberToObject(o, "nonblocking", d->nonblocking);
	if (q->owners)
		cJSON_AddItemToObject(o, "owner", party_json(ctx, &d->owner, q->max_stack));
	/* an edge's far end: the thread that woke the waits (null: none, an interrupt or a timer) */
	if (user && (q->owners || q->group == LS_GROUP_EDGE)) {
		cJSON_AddItemToObject(o, "releaser", party_json(ctx, &d->releaser, q->max_stack));
		/* a chain: the waker itself waited meanwhile, most often on this process */
		cJSON_AddNumberToObject(o, "chained_wait_ns", llround(d->chained_ns));
		cJSON_AddItemToObject(o, "via", chain_json(&d->chain));
	}
	/* an edge's two ends by the code they were in: the waiter's and the waker's sampled stacks */
	if (q->group == LS_GROUP_EDGE) {
		query_caller_string(ctx, d->waiter.tid ? d->waiter.stack : LS_STACK_NONE, caller, sizeof(caller));
		cJSON_AddStringToObject(o, "caller", caller);
		query_caller_string(ctx, d->releaser.tid ? d->releaser.stack : LS_STACK_NONE, caller, sizeof(caller));
		cJSON_AddStringToObject(o, "releaser_caller", caller);
		cJSON_AddBoolToObject(o, "waker_watched", !d->rep->unwatched);
	}
	if (q->owners) {
		if (!d->many_locks && holds)
			cJSON_AddItemToObject(o, "holder_preempted", preempted_json(holds, d->rep));
	}
	if (q->holders && user && !d->many_locks && holds) {
		uint64_t samples;

		cJSON_AddItemToObject(o, "holder_stacks", holders_json(ctx, holds, d->rep, q->max_stack, &samples));
		cJSON_AddNumberToObject(o, "holder_samples", samples);
	}
	return o;
}

cJSON *query__rows(const struct agg_view *view, const struct query *q, const struct query_ctx *ctx)
{
	struct row_set rs = {};
	struct htab *holds = NULL;
	cJSON *arr = NULL;
	size_t i;

	if (rows_fill(&rs, view, q, ctx->scratch))
		goto cleanup;
	if ((q->holders || q->owners) && !(holds = build_holds(view, q)))
		goto cleanup;
	arr = cJSON_CreateArray();
	for (i = 0; arr && i < rs.nr_shown; i++)
		cJSON_AddItemToArray(arr, row_json(ctx, q, &rs.rows[rs.shown[i]], &rs.details[i], holds));
cleanup:
	htab__free(holds);
	rows_free(&rs);
	return arr;
}

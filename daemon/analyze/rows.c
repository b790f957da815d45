// SPDX-License-Identifier: GPL-2.0
/*
 * The rows of a query: one pass over the view's keys (by caller, strata of exact figures
 * scaled by their sampled stacks), the top rows picked with a partial heap, and for the
 * shown rows alone their histograms, types, owners and releasers.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/classify.h"
#include "analyze/query.h"
#include "analyze/query_int.h"
#include "lib/htab.h"
#include "lib/scratch.h"
#include "store/stacks.h"

static bool kind_wanted(const struct query *q, const struct agg_key *k)
{
	if (q->kind == LS_KIND_KERNEL_ONLY)
		return !(k->flags & LS_KIND_USER);
	if (q->kind == LS_KIND_USER_ONLY)
		return k->flags & LS_KIND_USER;
	return true;
}

/* Not waits: what a lock's holder did (samples, preemptions), keyed like the lock's waits. */
bool query_is_holder_event(const struct agg_key *k)
{
	return k->flags == (LS_KIND_USER | LS_UTYPE_HOLD) || query__is_preempt(k->flags);
}

/* A type the query asks for, or (by default) a lock's waits however they sleep (classify.h). */
static bool type_wanted(const struct query *q, const struct agg_key *k, enum ls_wclass cls)
{
	if (!q->type_mask || (q->type_mask & (1U << query__type_index(k->flags))))
		return true;
	return q->evident_locks && cls == LS_WCLASS_LOCK && classify__by_evidence(k->flags);
}

/*
 * Whether the query may want @k, by what the key alone says: asked before its figures are
 * read and its class made (which may make the view's wait-for graph), so that the keys of
 * other processes cost a query next to nothing. type_wanted() decides the rest.
 */
static bool key_maybe_wanted(const struct query *q, const struct agg_key *k)
{
	if (query_is_holder_event(k) || !kind_wanted(q, k))
		return false;
	struct proc_filter f = query__proc_filter(q);

	if (q->tid && k->tid != q->tid)
		return false;
	return query__proc_wanted(&f, k->pid);
}

/* The group the process of @k is in; processes in none (no unit, no pod) make one row. */
static uint32_t cgroup_group(const struct query *q, const struct agg_key *k, enum cgroup_by by)
{
	return q->cgroups ? cgroups__group(q->cgroups, k->pid, by) : 0;
}

/* A stratum: one thread's waits on one lock of one type and class (a lock's, idle...). */
static struct stratum_key stratum_of(const struct agg_key *k, enum ls_wclass cls)
{
	struct stratum_key s = { .lock = k->lock, .pid = k->pid, .tid = k->tid, .flags = k->flags,
				 .name = k->name, .object = k->object, .cls = cls };
	return s;
}

static struct row_key row_key_of(const struct query *q, const struct agg_key *k, enum ls_wclass cls)
{
	struct row_key rk = { .cls = cls };

	switch (q->group) {
	case LS_GROUP_CALLER:
		rk.a = query__type_index(k->flags);
		rk.b = k->stack;
		break;
	case LS_GROUP_MECHANISM:
		rk.a = query__type_index(k->flags);
		break;
	case LS_GROUP_THREAD:	/* a thread's row holds all it waited on */
		rk.cls = 0;
		rk.a = k->pid;
		rk.b = k->tid;
		break;
	case LS_GROUP_UNIT:
		rk.cls = 0;
		rk.a = cgroup_group(q, k, CGROUP_BY_UNIT);
		break;
	case LS_GROUP_CGROUP:
		rk.cls = 0;
		rk.a = cgroup_group(q, k, CGROUP_BY_CGROUP);
		break;
	case LS_GROUP_POD:
		rk.cls = 0;
		rk.a = cgroup_group(q, k, CGROUP_BY_POD);
		break;
	case LS_GROUP_EDGE:	/* waiter process -> waker process (0: no thread woke it, or none watched) */
		rk.a = query__type_index(k->flags);
		rk.b = k->pid;
		rk.c = k->releaser_pid;
		rk.d = k->unwatched;
		break;
	case LS_GROUP_LOCK:
	default:
		rk.lock = k->lock;
		rk.a = query__type_index(k->flags);
		rk.b = k->name;
		/* mmap_lock and private futex addresses are per process; a shared futex is
		 * (object, offset) in every process that maps it */
		rk.c = k->name == LS_NAME_MMAP_LOCK || ((k->flags & LS_KIND_USER) && !k->object) ? k->pid : 0;
		rk.d = k->object;
		break;
	}
	return rk;
}

/* The stack a wait is drawn under: its own, or the one of whoever made it wait. */
static uint32_t side_stack(const struct agg_key *k, enum query_side side)
{
	if (side == QUERY_WAITER)
		return k->stack;
	return k->releaser_tid ? k->releaser_stack : k->owner_stack;
}

/*
 * A pass over a view's wait keys, as query__for_each_wait() describes; each key's class and
 * whether the query wants it, and the strata, are found once and serve every pass.
 */
/* The arrays of a key or a row each that rows_fill() borrows from the query's scratch. */
enum rows_scratch {
	RS_CLASS_OF,
	RS_STRATUM_OF,
	RS_ROWS,
	RS_ROW_OF,
	RS_ROW_OF_STACK,
	RS_DETAIL_OF,
	RS_MAX,
};
_Static_assert((int)RS_MAX <= (int)SCRATCH_SLOTS, "rows_fill's arrays fit the scratch");

struct walk {
	struct scratch *scratch;	/* where class_of and stratum_of come from; NULL: allocated */
	const struct agg_view *view;
	const struct query *q;
	enum query_side side;
	bool by_stack;
	struct wait_classes *classes;	/* each key's class (classify.h) */
	uint8_t *class_of;	/* by view position: its enum ls_wclass + 1; 0: a key not wanted */
	struct htab *strata;	/* by_stack: struct stratum_key -> struct stratum */
	uint32_t *stratum_of;	/* by_stack, by view position: stratum index + 1 */
	size_t wanted;		/* keys the query wants */
	uint32_t max_stack;	/* the highest stack id of those keys */
};

typedef int (*walk_fn)(void *arg, size_t pos, const struct agg_key *k, const struct agg_val *v,
		       enum ls_wclass cls, uint32_t stack, double fc, double fw);

/*
 * What a row by caller needs of a wanted key, as the first pass read it: the second pass
 * then scales it by its stratum without reading the view again (over 100 k keys, reading
 * each key, its reference and its cell once more was a fifth of `top`). Kept in the rows'
 * own array, one per row's room: rows are made in the keys' order, at most one each, so
 * the row a key makes or adds to lies at or below its figures, which it has read by then.
 */
struct key_figures {
	struct agg_sum st;
	uint32_t stack;		/* side_stack() */
	uint8_t type;		/* query__type_index() */
	uint8_t sampled;
};
_Static_assert(sizeof(struct key_figures) == sizeof(struct row) &&
		       _Alignof(struct key_figures) <= _Alignof(struct row),
	       "a key's figures take exactly the room of the row that may replace them");

/*
 * Where walk_init() hands each wanted key on as it reads it, so that no pass reads the
 * view again: without strata (by thread, lock...) to @fn, scaled as walk_each() would;
 * with them, whose sums are known only at the end, its figures to @figures (room for the
 * view's every key).
 */
struct walk_sink {
	walk_fn fn;
	void *arg;
	struct key_figures *figures;
};

static void walk_free(struct walk *w)
{
	wait_classes__free(w->classes);
	scratch__put(w->scratch, RS_CLASS_OF, w->class_of);
	htab__free(w->strata);
	scratch__put(w->scratch, RS_STRATUM_OF, w->stratum_of);
}

/*
 * The factors by which the key at view position @pos counts (@fc its waits, @fw their
 * time); false when it does not count at all.
 */
static bool walk_scale(const struct walk *w, size_t pos, bool sampled, uint32_t stack, double *fc, double *fw)
{
	const struct stratum *s;

	*fc = *fw = 1.0;
	if (!w->by_stack) {
		/*
		 * By thread or lock the exact entries are the figures; the samples only lend
		 * their stacks (owners', releasers') to the row
		 */
		if (sampled)
			*fc = *fw = 0;
		return true;
	}
	/*
	 * A stack is known only for sampled waits. Scale each sampled key by its stratum's
	 * (same thread, lock and type) exact figures over the sample's; a stratum with no
	 * sample at all keeps its exact entry (stackless), never dropped.
	 */
	s = htab__at(w->strata, w->stratum_of[pos] - 1, NULL);
	if (!sampled)
		return !s->s_count;
	if (stack == LS_STACK_NONE)
		return false;	/* a sample without this side's stack */
	*fc = (double)s->count / s->s_count;
	*fw = s->s_total_ns ? (double)s->total_ns / s->s_total_ns : *fc;
	return true;
}

static int walk_init(struct walk *w, const struct agg_view *view, const struct query *q, enum query_side side,
		     bool by_stack, struct scratch *scratch, const struct walk_sink *sink)
{
	size_t i, nr = agg_view__count(view);
	/* the last key's stratum: a thread's waits on one lock come in a run, one lookup */
	struct stratum_key last_key;
	uint32_t last = 0;	/* its index + 1 */
	const struct agg_key *k;
	struct agg_val v;

	memset(w, 0, sizeof(*w));
	w->scratch = scratch;
	w->view = view;
	w->q = q;
	w->side = side;
	w->by_stack = by_stack;
	w->classes = wait_classes__new(view);
	w->class_of = scratch__get(scratch, RS_CLASS_OF, nr * sizeof(*w->class_of), SCRATCH_ZEROED);
	if (!w->classes || !w->class_of)
		goto nomem;
	if (by_stack) {
		w->strata = htab__new(sizeof(struct stratum_key), sizeof(struct stratum), SIZE_MAX);
		/* not cleared: read only where class_of says the key is wanted, set there */
		w->stratum_of = scratch__get(scratch, RS_STRATUM_OF, nr * sizeof(*w->stratum_of), SCRATCH_RAW);
		if (!w->strata || !w->stratum_of)
			goto nomem;
	}
	for (i = 0; (k = agg_view__key(view, i)); i++) {
		enum ls_wclass cls;
		struct stratum_key sk;
		struct stratum *s;
		uint32_t idx;

		if (!key_maybe_wanted(q, k))
			continue;
		agg_view__get(view, i, &k, &v);
		cls = wait_classes__of(w->classes, k, &v);
		if (!type_wanted(q, k, cls))
			continue;
		w->class_of[i] = cls + 1;
		w->wanted++;
		if (k->stack > w->max_stack)
			w->max_stack = k->stack;
		if (!by_stack) {
			uint32_t stack = side_stack(k, side);
			double fc, fw;
			int err;

			if (sink && sink->fn && walk_scale(w, i, k->sampled, stack, &fc, &fw) &&
			    (err = sink->fn(sink->arg, i, k, &v, cls, stack, fc, fw))) {
				walk_free(w);
				return err;
			}
			continue;
		}
		if (sink && sink->figures)
			sink->figures[w->wanted - 1] = (struct key_figures){
				.st = v.st,
				.stack = side_stack(k, side),
				.type = query__type_index(k->flags),
				.sampled = !!k->sampled,
			};
		sk = stratum_of(k, cls);
		if (last && !memcmp(&sk, &last_key, sizeof(sk))) {
			idx = last - 1;
			s = htab__at(w->strata, idx, NULL);
		} else if ((s = htab__upsert_at(w->strata, &sk, &idx, NULL, NULL))) {
			last_key = sk;
			last = idx + 1;
		} else {
			goto nomem;
		}
		w->stratum_of[i] = idx + 1;
		if (k->sampled && side_stack(k, side) != LS_STACK_NONE) {
			s->s_count += v.st.count;
			s->s_total_ns += v.st.total_ns;
		} else if (!k->sampled) {
			s->count += v.st.count;
			s->total_ns += v.st.total_ns;
		}
	}
	return 0;
nomem:
	walk_free(w);
	return -ENOMEM;
}

/* Calls @fn for each wait key; with @want, only at view positions where want(arg, pos). */
static int walk_each(const struct walk *w, walk_fn fn, bool (*want)(void *arg, size_t pos), void *arg)
{
	const struct agg_key *k;
	struct agg_val v;
	size_t i, nr = agg_view__count(w->view);
	int err = 0;

	for (i = 0; !err && i < nr; i++) {
		uint32_t stack;
		double fc, fw;

		if (!w->class_of[i] || (want && !want(arg, i)))
			continue;
		agg_view__get(w->view, i, &k, &v);
		stack = side_stack(k, w->side);
		if (walk_scale(w, i, k->sampled, stack, &fc, &fw))
			err = fn(arg, i, k, &v, w->class_of[i] - 1, stack, fc, fw);
	}
	return err;
}

struct public_walk {
	query_wait_fn fn;
	void *arg;
};

static int public_step(void *arg, size_t pos, const struct agg_key *k, const struct agg_val *v,
		       enum ls_wclass cls, uint32_t stack, double fc, double fw)
{
	struct public_walk *p = arg;

	(void)pos;
	return p->fn(p->arg, k, v, stack, fc, fw, cls);
}

int query__for_each_wait(const struct agg_view *view, const struct query *q, enum query_side side,
			 bool by_stack, query_wait_fn fn, void *arg)
{
	struct public_walk p = { fn, arg };
	/* without strata every key is handed on as the first pass reads it: one pass */
	struct walk_sink sink = { .fn = public_step, .arg = &p };
	struct walk w;
	int err;

	if ((err = walk_init(&w, view, q, side, by_stack, NULL, by_stack ? NULL : &sink)))
		return err;
	if (by_stack)
		err = walk_each(&w, public_step, NULL, &p);
	walk_free(&w);
	return err;
}

static void row_add(struct row *r, const struct agg_sum *st, double fc, double fw)
{
	r->count += st->count * fc;
	r->total_ns += st->total_ns * fw;
	if (st->max_ns > r->max_ns)
		r->max_ns = st->max_ns;
	if (st->min_ns < r->min_ns)
		r->min_ns = st->min_ns;
}

/* What a shown row names: its first key, and whether the others differ from it. */
static void detail_add(struct row_detail *d, const struct agg_key *k, const struct agg_val *v, double fc,
		       double fw, bool sampled)
{
	if (!d->rep) {
		d->rep = k;
		d->comm = v->comm;
	}
	d->many_pids |= d->rep->pid != k->pid;
	d->many_tids |= d->rep->tid != k->tid;
	d->many_locks |= d->rep->lock != k->lock;
	d->estimated |= fc && (fc != 1.0 || fw != 1.0);
	if (sampled)
		d->samples += v->st.count;
	d->nonblocking += v->nonblocking;
}

static int row_new(struct row_set *rs, uint32_t *idx)
{
	if (rs->nr >= rs->cap)	/* reserved for every wanted key (rows_fill()) */
		return -ENOSPC;
	rs->rows[rs->nr] = (struct row){ .min_ns = UINT64_MAX };
	*idx = rs->nr++;
	return 0;
}

/*
 * By caller, @k's row is its (type, stack, class). Stack ids are dense (stacks.h): the
 * stack's first row is found by its id, the rare others (another type or class under the
 * same stack) chained from it. Over 100 k keys, each of a stack of its own, hashing their
 * row keys took half of `top`.
 */
static int caller_row(struct row_set *rs, uint32_t stack, uint8_t type, enum ls_wclass cls, uint32_t *idx)
{
	uint32_t prev = 0, i;

	for (i = rs->row_of_stack[stack]; i; prev = i, i = rs->rows[i - 1].next_of_stack) {
		if (rs->rows[i - 1].type == type && rs->rows[i - 1].cls == cls) {
			*idx = i - 1;
			return 0;
		}
	}
	if (row_new(rs, idx))
		return -ENOMEM;
	rs->rows[*idx].type = type;
	rs->rows[*idx].cls = cls;
	if (prev)
		rs->rows[prev - 1].next_of_stack = *idx + 1;
	else
		rs->row_of_stack[stack] = *idx + 1;
	return 0;
}

static int keyed_row(struct row_set *rs, const struct agg_key *k, enum ls_wclass cls, uint32_t *idx)
{
	struct row_key rk = row_key_of(rs->q, k, cls);
	int created;
	uint32_t *ip = htab__upsert(rs->index, &rk, &created, NULL);

	if (!ip)
		return -ENOMEM;
	if (created && row_new(rs, ip))
		return -ENOMEM;
	*idx = *ip;
	return 0;
}

/* A key's row by thread, lock, process...: made as the first pass reads it. */
static int fill_keyed_row(void *arg, size_t pos, const struct agg_key *k, const struct agg_val *v,
			  enum ls_wclass cls, uint32_t stack, double fc, double fw)
{
	struct row_set *rs = arg;
	uint32_t idx;
	int err;

	(void)stack;	/* a shown row's samples are counted in its second pass */
	if ((err = keyed_row(rs, k, cls, &idx)))
		return err;
	rs->row_of[pos] = idx + 1;
	row_add(&rs->rows[idx], &v->st, fc, fw);
	return 0;
}

/* The rows by caller, from the wanted keys' @figures (the rows' array: see key_figures). */
static int fill_caller_rows(struct row_set *rs, const struct walk *w, const struct key_figures *figures)
{
	size_t i, j = 0, nr = agg_view__count(w->view);

	for (i = 0; i < nr; i++) {
		struct key_figures f;
		double fc, fw;
		uint32_t idx;
		int err;

		if (!w->class_of[i])
			continue;
		f = figures[j++];	/* whole, before a row takes its place */
		if (!walk_scale(w, i, f.sampled, f.stack, &fc, &fw))
			continue;
		if ((err = caller_row(rs, f.stack, f.type, w->class_of[i] - 1, &idx)))
			return err;
		rs->row_of[i] = idx + 1;
		row_add(&rs->rows[idx], &f.st, fc, fw);
	}
	return 0;
}

static void party_tally(struct row_set *rs, const struct owner_key *ok, const char *comm, double count)
{
	struct owner_val *ov = htab__upsert(rs->owners, ok, NULL, NULL);

	if (ov) {
		ov->count += count;
		memcpy(ov->comm, comm, sizeof(ov->comm));
	}
}

/*
 * One key's party: its waits count for the party as such (stack none), and a sampled
 * key's waits also for the stack it was seen with.
 */
static void party_add(struct row_set *rs, uint32_t detail, enum party_role role, const struct agg_key *k,
		      const struct agg_val *v, uint32_t pid, uint32_t tid, uint32_t stack, const char *comm,
		      double count)
{
	struct owner_key ok = { detail, role, pid, tid, LS_STACK_NONE };

	party_tally(rs, &ok, comm, count);
	if (k->sampled && stack != LS_STACK_NONE) {
		ok.stack = stack;
		party_tally(rs, &ok, comm, v->st.count);
	}
}

static bool in_shown_row(void *arg, size_t pos)
{
	const struct row_set *rs = arg;

	return rs->row_of[pos] && rs->detail_of[rs->row_of[pos] - 1] >= 0;
}

/* The second pass: what the shown rows need of each of their keys. */
static int fill_detail(void *arg, size_t pos, const struct agg_key *k, const struct agg_val *v,
		       enum ls_wclass cls, uint32_t stack, double fc, double fw)
{
	struct row_set *rs = arg;
	int32_t di = rs->detail_of[rs->row_of[pos] - 1];
	struct row_detail *d = &rs->details[di];

	detail_add(d, k, v, fc, fw, stack != LS_STACK_NONE);
	d->class_ns[cls] += v->st.total_ns * fw;
	if (rs->q->cgroups)
		query__cgroup_mix(rs->q->cgroups, k->pid, &d->cgroups);
	agg_hist_add(d->hist, v, fc);
	d->type_total[query__type_index(k->flags)] += v->st.total_ns * fw;
	if (k->owner_tid)
		party_add(rs, di, PARTY_OWNER, k, v, k->owner_pid, k->owner_tid, k->owner_stack,
			  v->owner_comm, v->st.count * fc);
	if (k->releaser_tid)
		party_add(rs, di, PARTY_RELEASER, k, v, k->releaser_pid, k->releaser_tid, k->releaser_stack,
			  v->releaser_comm, v->st.count * fc);
	if (rs->q->group == LS_GROUP_EDGE)	/* the waiting end's stack, as the waker's */
		party_add(rs, di, PARTY_WAITER, k, v, k->pid, k->tid, k->stack, v->comm, v->st.count * fc);
	if (k->chain_pid) {	/* a process: its pid stands for the thread, named later */
		static const char unnamed[LS_COMM_LEN];

		d->chained_ns += v->st.total_ns * fw;
		party_add(rs, di, PARTY_CHAIN, k, v, k->chain_pid, k->chain_pid, LS_STACK_NONE, unnamed,
			  v->st.count * fc);
	}
	return 0;
}

static struct party *party_of(struct row_detail *d, enum party_role role)
{
	switch (role) {
	case PARTY_OWNER: return &d->owner;
	case PARTY_RELEASER: return &d->releaser;
	case PARTY_CHAIN: return &d->chain;
	default: return &d->waiter;
	}
}

/* A chain's process is named by a thread of it the view has (as a waiter or a waker). */
static void name_chains(struct row_set *rs, const struct agg_view *view)
{
	const struct agg_key *k;
	struct agg_val v;
	size_t i, d, unnamed = 0;

	for (d = 0; d < rs->nr_shown; d++)
		unnamed += rs->details[d].chain.pid && !rs->details[d].chain.comm[0];
	for (i = 0; unnamed && !agg_view__get(view, i, &k, &v); i++) {
		for (d = 0; d < rs->nr_shown; d++) {
			struct party *c = &rs->details[d].chain;
			const char *comm = c->pid == k->pid ? v.comm : c->pid == k->releaser_pid ? v.releaser_comm : NULL;

			if (!c->pid || c->comm[0] || !comm || !comm[0])
				continue;
			snprintf(c->comm, sizeof(c->comm), "%s", comm);
			unnamed--;
		}
	}
}

/*
 * Each shown row's party with the most waits, then that party's stack seen most. Stacks
 * are sampled, so the thread that ended most waits may have none (of 8 like workers, the
 * one a sample missed): its row then shows the role's stack seen most among its other
 * threads, and says whose it is, rather than no stack at all.
 */
static void pick_owners(struct row_set *rs)
{
	const void *kp;
	size_t iter = 0;
	void *vp;

	while (!htab__next(rs->owners, &iter, &kp, &vp)) {
		const struct owner_key *ok = kp;
		const struct owner_val *ov = vp;
		struct party *p = party_of(&rs->details[ok->detail], ok->role);

		if (ok->stack == LS_STACK_NONE && ov->count >= p->best && (ov->count > p->best || !p->tid)) {
			p->best = ov->count;
			p->pid = ok->pid;
			p->tid = ok->tid;
			p->stack = LS_STACK_NONE;
			memcpy(p->comm, ov->comm, sizeof(p->comm));
		}
	}
	/* its own stack seen most, else (none of its own sampled) the role's seen most */
	for (iter = 0; !htab__next(rs->owners, &iter, &kp, &vp);) {
		const struct owner_key *ok = kp;
		const struct owner_val *ov = vp;
		struct party *p = party_of(&rs->details[ok->detail], ok->role);

		if (ok->stack == LS_STACK_NONE || !p->tid)
			continue;
		if (ok->pid == p->pid && ok->tid == p->tid) {
			if (ov->count > p->stack_best) {
				p->stack_best = ov->count;
				p->stack = ok->stack;
				p->stack_pid = p->stack_tid = 0;
			}
		} else if (!p->stack_best && ov->count > p->other_best) {
			p->other_best = ov->count;
			p->stack = ok->stack;
			p->stack_pid = ok->pid;
			p->stack_tid = ok->tid;
		}
	}
}

static double sort_value(const struct row *r, enum ls_sort s)
{
	switch (s) {
	case LS_SORT_CONTENDED: return r->count;
	case LS_SORT_MAX: return r->max_ns;
	case LS_SORT_MIN: return r->min_ns;
	case LS_SORT_AVG: return r->count ? r->total_ns / r->count : 0;
	case LS_SORT_TOTAL:
	default: return r->total_ns;
	}
}

/*
 * Whether row @a goes before row @b: by the sort key, ties by count, then in the order the
 * rows came (the view's), so that equal rows keep a stable, testable order.
 */
static bool row_before(const struct row_set *rs, uint32_t a, uint32_t b)
{
	const struct row *x = &rs->rows[a], *y = &rs->rows[b];
	double vx = sort_value(x, rs->q->sort), vy = sort_value(y, rs->q->sort);

	if (vx != vy)
		return vx > vy;
	if (x->count != y->count)
		return x->count > y->count;
	return a < b;
}

static int cmp_shown(const void *a, const void *b, void *arg)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x == y ? 0 : row_before(arg, x, y) ? -1 : 1;
}

/* Restores the heap below @i: its root is the row that goes last. */
static void sift_down(const struct row_set *rs, uint32_t *heap, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, worst = i;
		uint32_t t;

		if (l < n && row_before(rs, heap[worst], heap[l]))
			worst = l;
		if (r < n && row_before(rs, heap[worst], heap[r]))
			worst = r;
		if (worst == i)
			return;
		t = heap[i];
		heap[i] = heap[worst];
		heap[worst] = t;
		i = worst;
	}
}

/*
 * The first @n rows in order, without sorting them all: a heap of the best @n seen, whose
 * root is the one that would leave first.
 */
static int select_rows(struct row_set *rs, size_t n)
{
	size_t i, kept = 0;

	rs->shown = malloc((n ? n : 1) * sizeof(*rs->shown));
	if (!rs->shown)
		return -ENOMEM;
	for (i = 0; i < rs->nr; i++) {
		if (kept < n) {
			rs->shown[kept++] = i;
			if (kept == n) {
				size_t j;

				for (j = n / 2; j-- > 0;)
					sift_down(rs, rs->shown, n, j);
			}
			continue;
		}
		if (n && row_before(rs, i, rs->shown[0])) {
			rs->shown[0] = i;
			sift_down(rs, rs->shown, n, 0);
		}
	}
	qsort_r(rs->shown, kept, sizeof(*rs->shown), cmp_shown, rs);
	rs->nr_shown = kept;
	return 0;
}

/* Rows for @q: every key grouped, the first q->limit (all: 0) chosen, then detailed. */
int rows_fill(struct row_set *rs, const struct agg_view *view, const struct query *q, struct scratch *scratch)
{
	size_t i, n, nr = agg_view__count(view);
	bool by_caller = q->group == LS_GROUP_CALLER;
	struct walk_sink sink = { .arg = rs };
	struct walk w;
	int err;

	rs->q = q;
	rs->scratch = scratch;
	rs->index = htab__new(sizeof(struct row_key), sizeof(uint32_t), SIZE_MAX);
	rs->owners = htab__new(sizeof(struct owner_key), sizeof(struct owner_val), SIZE_MAX);
	rs->row_of = scratch__get(scratch, RS_ROW_OF, nr * sizeof(*rs->row_of), SCRATCH_ZEROED);
	/*
	 * every wanted key makes a row or adds to one: the rows never outgrow the view (the
	 * block's pages past the wanted keys are never touched, never resident)
	 */
	rs->rows = scratch__get(scratch, RS_ROWS, (nr ? nr : 1) * sizeof(*rs->rows), SCRATCH_RAW);
	rs->cap = nr;
	if (!rs->index || !rs->owners || !rs->row_of || !rs->rows)
		return -ENOMEM;
	/* a caller is known only for waits with a stack: those stand for the rest */
	if (by_caller)
		sink.figures = (struct key_figures *)rs->rows;
	else
		sink.fn = fill_keyed_row;
	if ((err = walk_init(&w, view, q, QUERY_WAITER, by_caller, scratch, &sink)))
		return err;
	if (by_caller) {
		rs->nr_stacks = w.max_stack + 1;
		if (!(rs->row_of_stack = scratch__get(scratch, RS_ROW_OF_STACK,
						      rs->nr_stacks * sizeof(*rs->row_of_stack), SCRATCH_ZEROED)))
			err = -ENOMEM;
		if (!err)
			err = fill_caller_rows(rs, &w, sink.figures);
	}
	n = q->limit && (size_t)q->limit < rs->nr ? (size_t)q->limit : rs->nr;
	if (!err)
		err = select_rows(rs, n);
	if (!err) {
		rs->detail_of = scratch__get(scratch, RS_DETAIL_OF, rs->nr * sizeof(*rs->detail_of), SCRATCH_RAW);
		rs->details = calloc(n ? n : 1, sizeof(*rs->details));
		if (!rs->detail_of || !rs->details)
			err = -ENOMEM;
	}
	if (!err) {
		for (i = 0; i < rs->nr; i++)
			rs->detail_of[i] = -1;
		for (i = 0; i < rs->nr_shown; i++)
			rs->detail_of[rs->shown[i]] = i;
		err = walk_each(&w, fill_detail, in_shown_row, rs);
	}
	walk_free(&w);
	if (!err) {
		pick_owners(rs);
		name_chains(rs, view);
	}
	return err;
}

void rows_free(struct row_set *rs)
{
	htab__free(rs->index);
	htab__free(rs->owners);
	scratch__put(rs->scratch, RS_ROWS, rs->rows);
	scratch__put(rs->scratch, RS_ROW_OF, rs->row_of);
	scratch__put(rs->scratch, RS_ROW_OF_STACK, rs->row_of_stack);
	free(rs->shown);
	scratch__put(rs->scratch, RS_DETAIL_OF, rs->detail_of);
	free(rs->details);
}

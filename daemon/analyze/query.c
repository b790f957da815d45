// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/query.h"
#include "decode/ksyms.h"
#include "decode/usyms.h"
#include "lib/htab.h"
#include "lib/vec.h"
#include "store/stacks.h"
#include "klock.h"
#include "scheduler.h"

/* The names perf lock contention prints, so the two tools' tables read alike. */
const struct lock_type ls_lock_types[] = {
	{ KLOCK_F_SPIN, "spinlock", "spinlock" },
	{ KLOCK_F_SPIN | KLOCK_F_READ, "rwlock:R", "rwlock" },
	{ KLOCK_F_SPIN | KLOCK_F_WRITE, "rwlock:W", "rwlock" },
	{ KLOCK_F_READ, "rwsem:R", "rwsem" },
	{ KLOCK_F_WRITE, "rwsem:W", "rwsem" },
	{ KLOCK_F_RT, "rt-mutex", "rt-mutex" },
	{ KLOCK_F_RT | KLOCK_F_SPIN, "rtlock", "rt-mutex" },
	{ KLOCK_F_RT | KLOCK_F_READ, "rwlock-rt:R", "rwlock-rt" },
	{ KLOCK_F_RT | KLOCK_F_WRITE, "rwlock-rt:W", "rwlock-rt" },
	{ KLOCK_F_PERCPU | KLOCK_F_READ, "pcpu-sem:R", "percpu-rwsem" },
	{ KLOCK_F_PERCPU | KLOCK_F_WRITE, "pcpu-sem:W", "percpu-rwsem" },
	{ KLOCK_F_MUTEX, "mutex", "mutex" },
	{ LS_KIND_USER | LS_UTYPE_MUTEX, "futex:mutex", "futex" },
	{ LS_KIND_USER | LS_UTYPE_PI, "futex:pi", "futex" },
	{ LS_KIND_USER | LS_UTYPE_WAITV, "futex:waitv", "futex" },
	{ LS_KIND_USER | LS_UTYPE_CONDVAR, "futex:condvar", "futex" },
	{ 0, "unknown", "unknown" },	/* flags no kernel we know passes */
};
const int ls_nr_lock_types = sizeof(ls_lock_types) / sizeof(ls_lock_types[0]);
_Static_assert(sizeof(ls_lock_types) / sizeof(ls_lock_types[0]) <= LS_MAX_LOCK_TYPES,
	       "type masks and per-type totals hold LS_MAX_LOCK_TYPES");
#define UNKNOWN_TYPE (ls_nr_lock_types - 1)

static const char *const group_names[LS_GROUP_MAX] = { "caller", "thread", "lock" };
static const char *const kind_names[LS_KIND_MAX] = { "all", "kernel", "user" };
static const char *const sort_names[] = { "wait_total", "contended", "wait_max", "avg_wait", "wait_min" };

static const char *const lock_names[] = {
	[LS_NAME_NONE] = NULL,
	[LS_NAME_MMAP_LOCK] = "mmap_lock",
	[LS_NAME_SIGLOCK] = "siglock",
};

/* Addresses up to this far into a kernel variable are named "var+0xoff": locks sit
 * inside static structs more often than at their start. */
#define LOCK_SYM_MAX_OFF 256

const char *query__group_name(enum ls_group g)
{
	return g < LS_GROUP_MAX ? group_names[g] : "?";
}

const char *query__sort_name(enum ls_sort s)
{
	return s < LS_SORT_KEYS ? sort_names[s] : "?";
}

bool query__is_preempt(uint32_t flags)
{
	return flags == (LS_KIND_USER | LS_UTYPE_PREEMPT) || (flags & LS_KIND_KPREEMPT);
}

int query__type_index(uint32_t flags)
{
	int i;

	for (i = 0; i < UNKNOWN_TYPE; i++)
		if (ls_lock_types[i].flags == flags)
			return i;
	return UNKNOWN_TYPE;
}

/*
 * Every type but waits for an event: a consumer sleeping on a condition variable is idle,
 * not contended, and would top every table by total wait. -Y futex:condvar (or futex)
 * asks for them.
 */
static uint32_t default_types(void)
{
	return ~(1U << query__type_index(LS_KIND_USER | LS_UTYPE_CONDVAR));
}

void query__init(struct query *q)
{
	memset(q, 0, sizeof(*q));
	q->type_mask = default_types();
	q->window = LS_WIN_ALL;
	q->group = LS_GROUP_CALLER;
	q->sort = LS_SORT_TOTAL;
	q->max_stack = LS_QUERY_DEF_MAX_STACK;
}

int query__parse_types(const char *list, uint32_t *mask, char *err, size_t err_len)
{
	char *copy = strdup(list), *tok, *save = NULL;
	int i, ret = 0;

	if (!copy)
		return -ENOMEM;
	*mask = 0;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint32_t m = 0;

		for (i = 0; i < UNKNOWN_TYPE; i++)
			if (!strcmp(tok, ls_lock_types[i].name) || !strcmp(tok, ls_lock_types[i].class))
				m |= 1U << i;
		if (!m) {
			snprintf(err, err_len, "unknown lock type '%s' (accepted: spinlock, rwlock[:R|:W], "
				 "rwsem[:R|:W], mutex, rt-mutex, rwlock-rt, percpu-rwsem, futex[:mutex|"
				 ":pi|:waitv|:condvar])", tok);
			ret = -EINVAL;
			break;
		}
		*mask |= m;
	}
	free(copy);
	return ret;
}

static int enum_from_json(const cJSON *req, const char *field, const char *const *names, int n,
			  int *out, char *err, size_t err_len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, field);
	int i;

	if (!v)
		return 0;
	for (i = 0; cJSON_IsString(v) && i < n; i++) {
		if (!strcmp(v->valuestring, names[i])) {
			*out = i;
			return 0;
		}
	}
	snprintf(err, err_len, "'%s' must be one of:", field);
	for (i = 0; i < n; i++)
		snprintf(err + strlen(err), err_len - strlen(err), " %s", names[i]);
	return -EINVAL;
}

int query__uint_field(const cJSON *req, const char *field, uint64_t max, uint64_t *out,
		      char *err, size_t err_len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, field);

	if (!v)
		return 0;
	if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > (double)max ||
	    v->valuedouble != floor(v->valuedouble)) {
		snprintf(err, err_len, "'%s' must be an integer from 0 to %" PRIu64, field, max);
		return -EINVAL;
	}
	*out = (uint64_t)v->valuedouble;
	return 0;
}

int query__bool_field(const cJSON *req, const char *field, bool *out, char *err, size_t err_len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, field);

	if (!v)
		return 0;
	if (!cJSON_IsBool(v)) {
		snprintf(err, err_len, "'%s' must be true or false", field);
		return -EINVAL;
	}
	*out = cJSON_IsTrue(v);
	return 0;
}

static const char *const windows[LS_WIN_MAX] = { "10s", "1m", "5m", "all" };

int query__window_field(const cJSON *req, enum ls_window *w, char *err, size_t err_len)
{
	int v = *w, ret = enum_from_json(req, "window", windows, LS_WIN_MAX, &v, err, err_len);

	if (!ret)
		*w = v;
	return ret;
}

int query__from_json(const cJSON *req, struct query *q, char *err, size_t err_len)
{
	uint64_t pid = 0, tid = 0, limit = 0, max_stack = q->max_stack;
	int window = q->window, group = q->group, sort = q->sort, kind = q->kind;
	const cJSON *types = cJSON_GetObjectItemCaseSensitive(req, "types");
	int err_ret;

	if ((err_ret = enum_from_json(req, "window", windows, LS_WIN_MAX, &window, err, err_len)) ||
	    (err_ret = enum_from_json(req, "group", group_names, LS_GROUP_MAX, &group, err, err_len)) ||
	    (err_ret = enum_from_json(req, "sort", sort_names, LS_SORT_KEYS, &sort, err, err_len)) ||
	    (err_ret = enum_from_json(req, "kind", kind_names, LS_KIND_MAX, &kind, err, err_len)) ||
	    (err_ret = query__uint_field(req, "pid", INT32_MAX, &pid, err, err_len)) ||
	    (err_ret = query__uint_field(req, "tid", INT32_MAX, &tid, err, err_len)) ||
	    (err_ret = query__uint_field(req, "limit", 1000000, &limit, err, err_len)) ||
	    (err_ret = query__uint_field(req, "max_stack", LS_MAX_STACK_DEPTH, &max_stack, err, err_len)) ||
	    (err_ret = query__bool_field(req, "stacks", &q->stacks, err, err_len)) ||
	    (err_ret = query__bool_field(req, "owners", &q->owners, err, err_len)) ||
	    (err_ret = query__bool_field(req, "holders", &q->holders, err, err_len)))
		return err_ret;
	if (types) {
		if (!cJSON_IsString(types)) {
			snprintf(err, err_len, "'types' must be a comma-separated string");
			return -EINVAL;
		}
		if ((err_ret = query__parse_types(types->valuestring, &q->type_mask, err, err_len)))
			return err_ret;
	}
	q->window = window;
	q->group = group;
	q->sort = sort;
	q->kind = kind;
	q->pid = pid;
	q->tid = tid;
	q->limit = limit;
	q->max_stack = max_stack;
	return 0;
}

/*
 * A user frame inside the locking implementation: the C library's futex, mutex and condvar
 * code, or a thin wrapper around it (libuv's uv_mutex_lock, libstdc++'s __gthread_*).
 */
static bool is_user_lock_frame(struct usyms *u, uint64_t code)
{
	static const char *const libs[] = { "libc.so", "libpthread.so", "ld-linux" };
	static const char *const syms[] = { "mutex_lock", "mutex_timedlock", "cond_wait",
					    "cond_timedwait", "cond_clockwait", "rwlock_rdlock",
					    "rwlock_wrlock", "sem_wait", "sem_timedwait", "lll_lock",
					    "futex", "gthread_" };
	struct uframe f;
	size_t i;

	if (!usyms__frame(u, code, &f))
		return false;
	for (i = 0; f.module && i < sizeof(libs) / sizeof(libs[0]); i++)
		if (strstr(f.module, libs[i]))
			return true;
	for (i = 0; f.sym && i < sizeof(syms) / sizeof(syms[0]); i++)
		if (strstr(f.sym, syms[i]))
			return true;
	return false;
}

static int user_caller_frame(const struct query_ctx *ctx, const uint64_t *ips, uint32_t nr)
{
	uint32_t i;

	if (!ctx->usyms)
		return 0;
	for (i = 0; i < nr; i++)
		if (!is_user_lock_frame(ctx->usyms, ips[i]))
			return i;
	return 0;
}

int query__caller_frame(const struct query_ctx *ctx, const uint64_t *ips, uint32_t nr)
{
	uint32_t i;
	int first_plain = -1;
	bool seen_lock = false;

	if (nr && usyms__is_user(ips[0]))
		return user_caller_frame(ctx, ips, nr);
	if (!ctx->ksyms)
		return 0;
	/* like perf: the first frame after the locking internals (sched and lock text) */
	for (i = 0; i < nr; i++) {
		if (ksyms__is_lock_func(ctx->ksyms, ips[i])) {
			seen_lock = true;
			continue;
		}
		if (seen_lock)
			return i;
		if (first_plain < 0 && !ksyms__is_tracing_func(ctx->ksyms, ips[i]))
			first_plain = i;
	}
	return first_plain < 0 ? 0 : first_plain;
}

/* ---- grouping ---- */

struct stratum_key {
	uint64_t lock;
	uint32_t pid, tid, flags, name, object, pad;
};

struct stratum {
	uint64_t count, total_ns;		/* every wait: the exact entries */
	uint64_t s_count, s_total_ns;		/* the sampled waits (with their stacks) */
};

struct row_key {
	uint64_t lock;
	uint32_t a, b, c, d;
};

/*
 * A row's figures, made in one pass over every key. What only a shown row needs (its
 * histogram, types, owner and releaser) is made in a second pass, for those rows alone.
 */
struct row {
	double count, total_ns;
	uint64_t max_ns, min_ns;
	uint64_t samples;		/* waits with a stack behind the row */
	uint64_t nonblocking;
	const struct agg_key *rep;	/* the first fine key: names pid/tid/lock when unique */
	const char *comm;
	bool estimated;
	bool many_pids, many_tids, many_locks;
};

/* the owner and the releaser with the most waits behind a row */
struct party {
	double best, stack_best;
	uint32_t pid, tid, stack;
	char comm[LS_COMM_LEN];
};

struct row_detail {
	double hist[LS_HIST_BUCKETS];
	double type_total[LS_MAX_LOCK_TYPES];
	struct party owner, releaser;
};

enum party_role { PARTY_OWNER, PARTY_RELEASER };

/*
 * A party (owner or releaser) of a shown row: its waits decide which one the row names;
 * its stacks come from the samples (stack != LS_STACK_NONE), each counted by the waits
 * behind.
 */
struct owner_key {
	uint32_t detail, role, pid, tid, stack;
};

struct owner_val {
	double count;		/* the row's waits it was the party of (stack none: all of them) */
	char comm[LS_COMM_LEN];
};

static bool kind_wanted(const struct query *q, const struct agg_key *k)
{
	if (q->kind == LS_KIND_KERNEL_ONLY)
		return !(k->flags & LS_KIND_USER);
	if (q->kind == LS_KIND_USER_ONLY)
		return k->flags & LS_KIND_USER;
	return true;
}

/* Not waits: what a lock's holder did (samples, preemptions), keyed like the lock's waits. */
static bool is_holder_event(const struct agg_key *k)
{
	return k->flags == (LS_KIND_USER | LS_UTYPE_HOLD) || query__is_preempt(k->flags);
}

static bool key_wanted(const struct query *q, const struct agg_key *k)
{
	if (is_holder_event(k) || !kind_wanted(q, k))
		return false;
	if (q->pid && k->pid != q->pid)
		return false;
	if (q->tid && k->tid != q->tid)
		return false;
	if (q->type_mask && !(q->type_mask & (1U << query__type_index(k->flags))))
		return false;
	return true;
}

static struct stratum_key stratum_of(const struct agg_key *k)
{
	struct stratum_key s = { .lock = k->lock, .pid = k->pid, .tid = k->tid,
				 .flags = k->flags, .name = k->name, .object = k->object };
	return s;
}

static struct row_key row_key_of(const struct query *q, const struct agg_key *k)
{
	struct row_key rk = {};

	switch (q->group) {
	case LS_GROUP_CALLER:
		rk.a = query__type_index(k->flags);
		rk.b = k->stack;
		break;
	case LS_GROUP_THREAD:
		rk.a = k->pid;
		rk.b = k->tid;
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
 * A pass over a view's wait keys, as query__for_each_wait() describes; the strata are
 * made once and serve every pass.
 */
struct walk {
	const struct agg_view *view;
	const struct query *q;
	enum query_side side;
	bool by_stack;
	struct htab *strata;	/* by_stack: struct stratum_key -> struct stratum */
	uint32_t *stratum_of;	/* by view position: stratum index + 1; 0: a key not wanted */
};

typedef int (*walk_fn)(void *arg, size_t pos, const struct agg_key *k, const struct agg_val *v,
		       uint32_t stack, double fc, double fw);

static void walk_free(struct walk *w)
{
	htab__free(w->strata);
	free(w->stratum_of);
}

static int walk_init(struct walk *w, const struct agg_view *view, const struct query *q, enum query_side side,
		     bool by_stack)
{
	size_t i, nr = agg_view__count(view);
	const struct agg_key *k;
	struct agg_val v;

	memset(w, 0, sizeof(*w));
	w->view = view;
	w->q = q;
	w->side = side;
	w->by_stack = by_stack;
	if (!by_stack)
		return 0;
	w->strata = htab__new(sizeof(struct stratum_key), sizeof(struct stratum), SIZE_MAX);
	w->stratum_of = calloc(nr ? nr : 1, sizeof(*w->stratum_of));
	if (!w->strata || !w->stratum_of)
		goto nomem;
	for (i = 0; !agg_view__get(view, i, &k, &v); i++) {
		struct stratum_key sk;
		struct stratum *s;
		uint32_t idx;

		if (!key_wanted(q, k))
			continue;
		sk = stratum_of(k);
		if (!(s = htab__upsert_at(w->strata, &sk, &idx, NULL, NULL)))
			goto nomem;
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
		double fc = 1.0, fw = 1.0;

		if ((want && !want(arg, i)) || (w->by_stack && !w->stratum_of[i]))
			continue;
		agg_view__get(w->view, i, &k, &v);
		stack = side_stack(k, w->side);

		if (w->by_stack) {
			const struct stratum *s;

			if (!w->stratum_of[i])
				continue;
			s = htab__at(w->strata, w->stratum_of[i] - 1, NULL);
			/*
			 * A stack is known only for sampled waits. Scale each sampled key by
			 * its stratum's (same thread, lock and type) exact figures over the
			 * sample's; a stratum with no sample at all keeps its exact entry
			 * (stackless), never dropped.
			 */
			if (!k->sampled && s->s_count)
				continue;
			if (k->sampled && stack == LS_STACK_NONE)
				continue;	/* a sample without this side's stack */
			if (k->sampled) {
				fc = (double)s->count / s->s_count;
				fw = s->s_total_ns ? (double)s->total_ns / s->s_total_ns : fc;
			}
		} else {
			if (!key_wanted(w->q, k))
				continue;
			/*
			 * By thread or lock the exact entries are the figures; the samples only
			 * lend their stacks (owners', releasers') to the row
			 */
			if (k->sampled)
				fc = fw = 0;
		}
		err = fn(arg, i, k, &v, stack, fc, fw);
	}
	return err;
}

struct public_walk {
	query_wait_fn fn;
	void *arg;
};

static int public_step(void *arg, size_t pos, const struct agg_key *k, const struct agg_val *v, uint32_t stack,
		       double fc, double fw)
{
	struct public_walk *p = arg;

	(void)pos;
	return p->fn(p->arg, k, v, stack, fc, fw);
}

int query__for_each_wait(const struct agg_view *view, const struct query *q, enum query_side side,
			 bool by_stack, query_wait_fn fn, void *arg)
{
	struct public_walk p = { fn, arg };
	struct walk w;
	int err;

	if ((err = walk_init(&w, view, q, side, by_stack)))
		return err;
	err = walk_each(&w, public_step, NULL, &p);
	walk_free(&w);
	return err;
}

struct row_set {
	const struct query *q;
	struct row *rows;
	size_t nr, cap;
	struct htab *index;	/* row_key -> row index */
	uint32_t *row_of;	/* by view position: row index + 1; 0: no row */
	/* the rows shown, in order, and what only they need */
	uint32_t *shown;
	size_t nr_shown;
	int32_t *detail_of;	/* by row: index in details, -1 when not shown */
	struct row_detail *details;
	struct htab *owners;	/* owner_key -> owner_val */
};

static void row_add(struct row *r, const struct agg_key *k, const struct agg_val *v, double fc, double fw,
		    bool sampled)
{
	if (!r->rep) {
		r->rep = k;
		r->comm = v->comm;
		r->min_ns = v->st.min_ns;
	}
	r->many_pids |= r->rep->pid != k->pid;
	r->many_tids |= r->rep->tid != k->tid;
	r->many_locks |= r->rep->lock != k->lock;
	r->count += v->st.count * fc;
	r->total_ns += v->st.total_ns * fw;
	r->estimated |= fc && (fc != 1.0 || fw != 1.0);
	if (v->st.max_ns > r->max_ns)
		r->max_ns = v->st.max_ns;
	if (v->st.min_ns < r->min_ns)
		r->min_ns = v->st.min_ns;
	if (sampled)
		r->samples += v->st.count;
	r->nonblocking += v->nonblocking;
}

static int fill_row(void *arg, size_t pos, const struct agg_key *k, const struct agg_val *v, uint32_t stack,
		    double fc, double fw)
{
	struct row_set *rs = arg;
	struct row_key rk = row_key_of(rs->q, k);
	int created;
	uint32_t *ip = htab__upsert(rs->index, &rk, &created, NULL);

	if (!ip)
		return -ENOMEM;
	if (created) {
		if (ls_vec_reserve(&rs->rows, &rs->cap, rs->nr, sizeof(*rs->rows)))
			return -ENOMEM;
		memset(&rs->rows[rs->nr], 0, sizeof(struct row));
		*ip = rs->nr++;
	}
	rs->row_of[pos] = *ip + 1;
	row_add(&rs->rows[*ip], k, v, fc, fw, stack != LS_STACK_NONE);
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
static int fill_detail(void *arg, size_t pos, const struct agg_key *k, const struct agg_val *v, uint32_t stack,
		       double fc, double fw)
{
	struct row_set *rs = arg;
	int32_t di = rs->detail_of[rs->row_of[pos] - 1];
	struct row_detail *d = &rs->details[di];

	(void)stack;
	agg_hist_add(d->hist, v, fc);
	d->type_total[query__type_index(k->flags)] += v->st.total_ns * fw;
	if (k->owner_tid)
		party_add(rs, di, PARTY_OWNER, k, v, k->owner_pid, k->owner_tid, k->owner_stack,
			  v->owner_comm, v->st.count * fc);
	if (k->releaser_tid)
		party_add(rs, di, PARTY_RELEASER, k, v, k->releaser_pid, k->releaser_tid, k->releaser_stack,
			  v->releaser_comm, v->st.count * fc);
	return 0;
}

/* Each shown row's party with the most waits, then that party's stack seen most. */
static void pick_owners(struct row_set *rs)
{
	const void *kp;
	size_t iter = 0;
	void *vp;

	while (!htab__next(rs->owners, &iter, &kp, &vp)) {
		const struct owner_key *ok = kp;
		const struct owner_val *ov = vp;
		struct row_detail *d = &rs->details[ok->detail];
		struct party *p = ok->role == PARTY_OWNER ? &d->owner : &d->releaser;

		if (ok->stack == LS_STACK_NONE && ov->count >= p->best && (ov->count > p->best || !p->tid)) {
			p->best = ov->count;
			p->pid = ok->pid;
			p->tid = ok->tid;
			p->stack = LS_STACK_NONE;
			memcpy(p->comm, ov->comm, sizeof(p->comm));
		}
	}
	for (iter = 0; !htab__next(rs->owners, &iter, &kp, &vp);) {
		const struct owner_key *ok = kp;
		const struct owner_val *ov = vp;
		struct row_detail *d = &rs->details[ok->detail];
		struct party *p = ok->role == PARTY_OWNER ? &d->owner : &d->releaser;

		if (ok->stack != LS_STACK_NONE && ok->pid == p->pid && ok->tid == p->tid &&
		    ov->count > p->stack_best) {
			p->stack_best = ov->count;
			p->stack = ok->stack;
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
static int fill_rows(struct row_set *rs, const struct agg_view *view, const struct query *q)
{
	size_t i, n, nr = agg_view__count(view);
	struct walk w;
	int err;

	rs->q = q;
	rs->index = htab__new(sizeof(struct row_key), sizeof(uint32_t), SIZE_MAX);
	rs->owners = htab__new(sizeof(struct owner_key), sizeof(struct owner_val), SIZE_MAX);
	rs->row_of = calloc(nr ? nr : 1, sizeof(*rs->row_of));
	if (!rs->index || !rs->owners || !rs->row_of)
		return -ENOMEM;
	/* a caller is known only for waits with a stack: those stand for the rest */
	if ((err = walk_init(&w, view, q, QUERY_WAITER, q->group == LS_GROUP_CALLER)))
		return err;
	err = walk_each(&w, fill_row, NULL, rs);
	n = q->limit && (size_t)q->limit < rs->nr ? (size_t)q->limit : rs->nr;
	if (!err)
		err = select_rows(rs, n);
	if (!err) {
		rs->detail_of = malloc((rs->nr ? rs->nr : 1) * sizeof(*rs->detail_of));
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
	if (!err)
		pick_owners(rs);
	return err;
}

static void row_set_free(struct row_set *rs)
{
	htab__free(rs->index);
	htab__free(rs->owners);
	free(rs->rows);
	free(rs->row_of);
	free(rs->shown);
	free(rs->detail_of);
	free(rs->details);
}

/* ---- JSON ---- */

static void add_hex(cJSON *obj, const char *name, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	cJSON_AddStringToObject(obj, name, buf);
}

/*
 * Frame @i of a stack. Past the first, a user frame is a return address: it is looked up
 * one byte back, inside the call instruction, or the inline information would name the
 * code after the call (perf does the same).
 */
void query__frame(const struct query_ctx *ctx, const uint64_t *ips, uint32_t i, struct query_frame *fi)
{
	uint64_t ip = ips[i], back = i && (ip & ((1ULL << USYMS_MOD_SHIFT) - 1)) ? 1 : 0;
	const struct ksym *ks;
	struct uframe uf;

	memset(fi, 0, sizeof(*fi));
	fi->addr = ip;
	fi->kernel = !usyms__is_user(ip);
	if (!fi->kernel) {
		if (!ctx->usyms || !usyms__frame(ctx->usyms, ip - back, &uf))
			return;
		fi->addr = uf.addr + back;
		fi->sym = uf.sym;
		fi->offset = uf.offset + back;
		fi->module = uf.module;
		fi->path = uf.path;
		fi->build_id = uf.build_id;
		fi->inlined = uf.inlined;
		fi->nr_inlined = uf.nr_inlined;
		return;
	}
	ks = ctx->ksyms ? ksyms__func(ctx->ksyms, ip) : NULL;
	if (!ks)
		return;
	fi->sym = ks->name;
	fi->offset = ip - ks->addr;
	fi->module = ks->module ? ks->module : "kernel";
}

static void frame_name(const struct query_ctx *ctx, const uint64_t *ips, uint32_t i, char *buf,
		       size_t len)
{
	struct query_frame fi;

	query__frame(ctx, ips, i, &fi);
	if (fi.nr_inlined)	/* the call was made in the innermost inlined function */
		snprintf(buf, len, "%s (inlined in %s)", fi.inlined[0], fi.sym);
	else if (fi.sym)
		snprintf(buf, len, "%s+0x%" PRIx64, fi.sym, fi.offset);
	else if (fi.module)
		snprintf(buf, len, "%s+0x%" PRIx64, fi.module, fi.addr);
	else if (fi.kernel && ctx->hide_kernel_addrs)
		snprintf(buf, len, "[unknown]");
	else
		snprintf(buf, len, "0x%" PRIx64, fi.addr);
}

static void add_str_or_null(cJSON *o, const char *name, const char *v)
{
	if (v)
		cJSON_AddStringToObject(o, name, v);
	else
		cJSON_AddNullToObject(o, name);
}

/* An address, or null where it is a kernel one the client may not see. */
static void add_addr(cJSON *obj, const struct query_ctx *ctx, uint64_t v, bool kernel)
{
	if (kernel && ctx->hide_kernel_addrs)
		cJSON_AddNullToObject(obj, "addr");
	else
		add_hex(obj, "addr", v);
}

static cJSON *frame_json(const struct query_ctx *ctx, const struct query_frame *fi, const char *sym,
			 bool inlined)
{
	cJSON *f = cJSON_CreateObject();

	add_addr(f, ctx, fi->addr, fi->kernel);
	add_str_or_null(f, "sym", sym);
	/* an inlined function has no offset of its own: its code is inside sym's */
	if (sym && !inlined)
		cJSON_AddNumberToObject(f, "offset", fi->offset);
	else
		cJSON_AddNullToObject(f, "offset");
	add_str_or_null(f, "module", fi->module);
	if (fi->build_id && fi->build_id[0])
		cJSON_AddStringToObject(f, "build_id", fi->build_id);
	if (inlined)
		cJSON_AddBoolToObject(f, "inlined", true);
	return f;
}

/* Up to @max frames of stack @id; functions inlined at a frame come before it, as perf shows them. */
static cJSON *stack_json(const struct query_ctx *ctx, uint32_t id, int max)
{
	cJSON *arr = cJSON_CreateArray();
	uint64_t ips[LS_MAX_STACK_DEPTH];
	uint32_t nr, i, j;

	nr = stacks__get(ctx->stacks, id, ips, LS_MAX_STACK_DEPTH);
	for (i = 0; i < nr && (int)i < max; i++) {
		struct query_frame fi;

		query__frame(ctx, ips, i, &fi);
		for (j = 0; j < fi.nr_inlined; j++)
			cJSON_AddItemToArray(arr, frame_json(ctx, &fi, fi.inlined[j], true));
		cJSON_AddItemToArray(arr, frame_json(ctx, &fi, fi.sym, false));
	}
	return arr;
}

/* How stack @id was walked: "dwarf" (dump + CFI), "fp" (frame pointers) or "kernel" (ORC). */
static const char *unwind_method(const struct query_ctx *ctx, uint32_t id)
{
	uint64_t ip;

	if (stacks__flags(ctx->stacks, id) & LS_STACK_F_DWARF)
		return "dwarf";
	return stacks__get(ctx->stacks, id, &ip, 1) && !usyms__is_user(ip) ? "kernel" : "fp";
}

/*
 * Adds "stack" to @o with how it was walked ("unwind", "truncated"). Without a stack:
 * null, or an empty array where the field has always been an array (rows).
 */
void query__add_stack(cJSON *o, const struct query_ctx *ctx, uint32_t id, int max, bool null_if_none)
{
	if (id < LS_STACK_FIRST) {
		if (null_if_none)
			cJSON_AddNullToObject(o, "stack");
		else
			cJSON_AddItemToObject(o, "stack", cJSON_CreateArray());
		return;
	}
	cJSON_AddItemToObject(o, "stack", stack_json(ctx, id, max));
	cJSON_AddStringToObject(o, "unwind", unwind_method(ctx, id));
	cJSON_AddBoolToObject(o, "truncated", stacks__flags(ctx->stacks, id) & LS_STACK_F_TRUNCATED);
}

static void caller_string(const struct query_ctx *ctx, uint32_t id, char *buf, size_t len)
{
	uint64_t ips[LS_MAX_STACK_DEPTH];
	uint32_t nr;

	if (id == LS_STACK_NONE) {
		snprintf(buf, len, "[not sampled]");
		return;
	}
	nr = stacks__get(ctx->stacks, id, ips, LS_MAX_STACK_DEPTH);
	if (!nr) {
		snprintf(buf, len, "[stack missing]");
		return;
	}
	frame_name(ctx, ips, query__caller_frame(ctx, ips, nr), buf, len);
}

/* A user lock: its address, and where it lies when that is an image's data ("libuv.so.1+0x2f1c0"). */
static cJSON *ulock_json(const struct query_ctx *ctx, const struct agg_key *k)
{
	cJSON *lock = cJSON_CreateObject();
	const char *module;
	uint64_t vaddr;
	char buf[320];

	add_hex(lock, "addr", k->lock);
	if (k->object) {	/* a shared futex: an offset in a file every process maps */
		const char *path = ctx->usyms ? usyms__object_path(ctx->usyms, k->object) : NULL;

		snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, path ? path : "?", k->lock);
		cJSON_AddStringToObject(lock, "name", buf);
		cJSON_AddBoolToObject(lock, "shared", true);
		return lock;
	}
	if (ctx->usyms && !usyms__data(ctx->usyms, k->pid, k->lock, &module, &vaddr)) {
		snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, module, vaddr);
		cJSON_AddStringToObject(lock, "name", buf);
	} else {
		cJSON_AddNullToObject(lock, "name");
	}
	cJSON_AddBoolToObject(lock, "shared", false);
	return lock;
}

cJSON *query__lock_json(const struct query_ctx *ctx, const struct agg_key *k)
{
	cJSON *lock;
	const struct ksym *s = NULL;
	char buf[160];

	if (k->flags & LS_KIND_USER)
		return ulock_json(ctx, k);
	lock = cJSON_CreateObject();
	add_addr(lock, ctx, k->lock, true);
	if (k->name != LS_NAME_NONE && k->name < sizeof(lock_names) / sizeof(lock_names[0])) {
		cJSON_AddStringToObject(lock, "name", lock_names[k->name]);
		return lock;
	}
	if (ctx->ksyms)
		s = ksyms__data(ctx->ksyms, k->lock, LOCK_SYM_MAX_OFF);
	if (!s) {
		cJSON_AddNullToObject(lock, "name");
		return lock;
	}
	if (k->lock == s->addr)
		snprintf(buf, sizeof(buf), "%s", s->name);
	else
		snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, s->name, k->lock - s->addr);
	cJSON_AddStringToObject(lock, "name", buf);
	return lock;
}

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

		if (!is_holder_event(k) || (q->pid && k->pid != q->pid))
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

static cJSON *row_json(const struct query_ctx *ctx, const struct query *q, const struct row *r,
		       const struct row_detail *d, const struct htab *holds)
{
	cJSON *o = cJSON_CreateObject();
	uint64_t count = llround(r->count), total = llround(r->total_ns);
	char caller[160];
	int type = q->group == LS_GROUP_THREAD ? dominant_type(d) : query__type_index(r->rep->flags);
	bool user = r->rep->flags & LS_KIND_USER;

	cJSON_AddStringToObject(o, "kind", user ? "user" : "kernel");
	cJSON_AddStringToObject(o, "type", ls_lock_types[type].name);
	if (q->group == LS_GROUP_CALLER) {
		caller_string(ctx, r->rep->stack, caller, sizeof(caller));
		cJSON_AddStringToObject(o, "caller", caller);
	}
	if (!r->many_locks) {
		cJSON_AddItemToObject(o, "lock", query__lock_json(ctx, r->rep));
		if (user && !r->rep->object)
			add_hex(o, "uaddr", r->rep->lock);
	}
	if (!r->many_pids) {
		cJSON_AddNumberToObject(o, "pid", r->rep->pid);
		if (!r->many_tids) {
			cJSON_AddNumberToObject(o, "tid", r->rep->tid);
			cJSON_AddStringToObject(o, "comm", r->comm);
		}
	}
	cJSON_AddNumberToObject(o, "contended", count);
	cJSON_AddNumberToObject(o, "total_wait_ns", total);
	cJSON_AddNumberToObject(o, "max_wait_ns", r->max_ns);
	cJSON_AddNumberToObject(o, "min_wait_ns", r->min_ns);
	cJSON_AddNumberToObject(o, "avg_wait_ns", count ? total / count : 0);
	cJSON_AddItemToObject(o, "hist", hist_json(d));
	cJSON_AddBoolToObject(o, "estimated", r->estimated);
	cJSON_AddNumberToObject(o, "stack_samples", r->samples);
	if (q->group == LS_GROUP_CALLER && q->stacks)
		query__add_stack(o, ctx, r->rep->stack, q->max_stack, false);
	if (user)
		cJSON_AddNumberToObject(o, "nonblocking", r->nonblocking);
	if (q->owners) {
		cJSON_AddItemToObject(o, "owner", party_json(ctx, &d->owner, q->max_stack));
		if (user)
			cJSON_AddItemToObject(o, "releaser", party_json(ctx, &d->releaser, q->max_stack));
		if (!r->many_locks && holds)
			cJSON_AddItemToObject(o, "holder_preempted", preempted_json(holds, r->rep));
	}
	if (q->holders && user && !r->many_locks && holds) {
		uint64_t samples;

		cJSON_AddItemToObject(o, "holder_stacks", holders_json(ctx, holds, r->rep, q->max_stack, &samples));
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

	if (fill_rows(&rs, view, q))
		goto cleanup;
	if ((q->holders || q->owners) && !(holds = build_holds(view, q)))
		goto cleanup;
	arr = cJSON_CreateArray();
	for (i = 0; arr && i < rs.nr_shown; i++)
		cJSON_AddItemToArray(arr, row_json(ctx, q, &rs.rows[rs.shown[i]], &rs.details[i], holds));
cleanup:
	htab__free(holds);
	row_set_free(&rs);
	return arr;
}

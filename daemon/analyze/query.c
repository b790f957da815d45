// SPDX-License-Identifier: GPL-2.0
/*
 * A query (query.h): the lock types as perf names them, and a request's fields (pid,
 * group, sort, kinds, types, window...) read and checked into struct query.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/query.h"
#include "klock.h"

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
	/* other blocking syscalls, by family (scheduler.h's enum ls_btype) */
	{ LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_POLL), "wait:poll", "wait" },
	{ LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_READ), "wait:read", "wait" },
	{ LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_RECV), "wait:recv", "wait" },
	{ LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_WRITE), "wait:write", "wait" },
	{ LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_ACCEPT), "wait:accept", "wait" },
	{ LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_SYNC), "wait:sync", "wait" },
	{ LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_URING), "wait:uring", "wait" },
	{ LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_FLOCK), "wait:flock", "wait" },
	{ LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_CHILD), "wait:child", "wait" },
	{ LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_SIGNAL), "wait:signal", "wait" },
	{ LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_SLEEP), "wait:sleep", "wait" },
	{ LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_OTHER), "wait:other", "wait" },
	{ LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_KERNEL), "wait:kernel", "wait" },
	{ 0, "unknown", "unknown" },	/* flags no kernel we know passes */
};
const int ls_nr_lock_types = sizeof(ls_lock_types) / sizeof(ls_lock_types[0]);
_Static_assert(sizeof(ls_lock_types) / sizeof(ls_lock_types[0]) <= LS_MAX_LOCK_TYPES,
	       "type masks and per-type totals hold LS_MAX_LOCK_TYPES");
#define UNKNOWN_TYPE (ls_nr_lock_types - 1)

static const char *const group_names[LS_GROUP_MAX] = { "caller", "thread", "lock", "unit", "cgroup", "pod",
							       "edge", "mechanism" };
static const char *const kind_names[LS_KIND_MAX] = { "all", "kernel", "user" };
static const char *const sort_names[] = { "wait_total", "contended", "wait_max", "avg_wait", "wait_min" };

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

static int type_index_scan(uint32_t flags)
{
	int i;

	for (i = 0; i < UNKNOWN_TYPE; i++)
		if (ls_lock_types[i].flags == flags)
			return i;
	return UNKNOWN_TYPE;
}

/*
 * A query asks for the type of every key, several times (its filter, its strata, its
 * rows): the scan above took an eighth of `top` over 100 k keys. The types' flags are a
 * kernel lock's KLOCK_F_* bits or LS_KIND_USER and a small user type: a table indexed by
 * those bits, made once, answers for all of them; other flags take the scan.
 */
enum {
	TYPE_LOW_BITS = 6,
	TYPE_LOW_MASK = (1U << TYPE_LOW_BITS) - 1,
	TYPE_TABLE_SIZE = 2U << TYPE_LOW_BITS,	/* kernel, then user */
};
static int8_t type_table[TYPE_TABLE_SIZE];
static pthread_once_t type_table_once = PTHREAD_ONCE_INIT;
_Static_assert(LS_MAX_LOCK_TYPES <= INT8_MAX, "type indexes fit the table's entries");

/* @flags' entry in type_table, or -1 where it has none. */
static int type_slot(uint32_t flags)
{
	if (flags & ~(LS_KIND_USER | TYPE_LOW_MASK))
		return -1;
	return (flags & LS_KIND_USER ? 1U << TYPE_LOW_BITS : 0) | (flags & TYPE_LOW_MASK);
}

static void type_table_init(void)
{
	int i;

	for (i = 0; i < TYPE_TABLE_SIZE; i++)
		type_table[i] = type_index_scan(i < (1 << TYPE_LOW_BITS) ? (uint32_t)i :
						LS_KIND_USER | (i & TYPE_LOW_MASK));
}

int query__type_index(uint32_t flags)
{
	int slot = type_slot(flags);

	if (slot < 0)
		return type_index_scan(flags);
	pthread_once(&type_table_once, type_table_init);
	return type_table[slot];
}

uint32_t query__lock_types(void)
{
	uint32_t mask = ~0U;
	int t;

	for (t = LS_BTYPE_POLL; t < LS_BTYPE_MAX; t++)
		mask &= ~(1U << query__type_index(LS_KIND_USER | (LS_UTYPE_BLOCK + t)));
	return mask;
}

uint32_t query__user_wait_types(void)
{
	uint32_t mask = 0;
	int i;

	for (i = 0; i < UNKNOWN_TYPE; i++)
		if (ls_lock_types[i].flags & LS_KIND_USER)
			mask |= 1U << i;
	return mask;
}

/*
 * Every type but waits for an event: a consumer sleeping on a condition variable is idle,
 * not contended, and would top every table by total wait; so would every event loop in
 * epoll_wait and every worker reading an empty queue (the wait:* types). -Y futex:condvar
 * (or futex), -Y wait (or wait:read...) ask for them.
 */
static uint32_t default_types(void)
{
	return query__lock_types() & ~(1U << query__type_index(LS_KIND_USER | LS_UTYPE_CONDVAR));
}

void query__init(struct query *q)
{
	memset(q, 0, sizeof(*q));
	q->type_mask = default_types();
	q->evident_locks = true;
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
				 ":pi|:waitv|:condvar], wait[:poll|:read|:recv|:write|:accept|:sync|:uring|:flock|:child|"
				 ":signal|:sleep|:other|:kernel])", tok);
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

int query__cgroup_field(const cJSON *req, char *out, size_t len, char *err, size_t err_len)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(req, "cgroup");

	if (!v)
		return 0;
	if (!cJSON_IsString(v) || strlen(v->valuestring) >= len) {
		snprintf(err, err_len, "'cgroup' must be a cgroup path, unit, container id or pod UID (under %zu bytes)",
			 len);
		return -EINVAL;
	}
	strcpy(out, v->valuestring);
	return 0;
}

struct proc_filter query__proc_filter(const struct query *q)
{
	return (struct proc_filter){ .pid = q->pid, .cgroup = q->cgroup, .cgroups = q->cgroups };
}

bool query__proc_wanted(const struct proc_filter *f, uint32_t pid)
{
	if (f->pid && pid != f->pid)
		return false;
	return !f->cgroup || !f->cgroup[0] || (f->cgroups && cgroups__matches(f->cgroups, pid, f->cgroup));
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

int query__by_field(const cJSON *req, enum cgroup_by *by, char *err, size_t err_len)
{
	/* by thread (the rows as they are), or folded by where the process runs */
	static const char *const names[] = { "thread", "unit", "cgroup", "pod" };
	static const enum cgroup_by kinds[] = { CGROUP_BY_MAX, CGROUP_BY_UNIT, CGROUP_BY_CGROUP, CGROUP_BY_POD };
	int v = 0, ret = enum_from_json(req, "group", names, sizeof(names) / sizeof(names[0]), &v, err, err_len);

	if (!ret)
		*by = kinds[v];
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
	    (err_ret = query__bool_field(req, "holders", &q->holders, err, err_len)) ||
	    (err_ret = query__cgroup_field(req, q->cgroup, sizeof(q->cgroup), err, err_len)))
		return err_ret;
	if (types) {
		if (!cJSON_IsString(types)) {
			snprintf(err, err_len, "'types' must be a comma-separated string");
			return -EINVAL;
		}
		if ((err_ret = query__parse_types(types->valuestring, &q->type_mask, err, err_len)))
			return err_ret;
		q->evident_locks = false;	/* the types asked for, whatever their class */
	}
	/* a kernel lock's waits have an owner, not a waker: edges are of user waits */
	if (group == LS_GROUP_EDGE && kind == LS_KIND_KERNEL_ONLY) {
		snprintf(err, err_len, "edges are of user waits (a kernel lock has an owner, not a waker): drop kind kernel");
		return -EINVAL;
	}
	if (group == LS_GROUP_EDGE)
		kind = LS_KIND_USER_ONLY;
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


/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Queries over aggregated waits: group, filter, estimate, sort and render rows as the
 * JSON that the protocol and `lockscope --json` share. No kernel needed: the unit tests
 * drive this file with hand-made tables.
 */
#ifndef __LS_QUERY_H
#define __LS_QUERY_H

#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "decode/cgroups.h"
#include "analyze/classify.h"
#include "store/agg.h"

struct agg_view;
struct stacks;
struct ksyms;
struct usyms;
struct scratch;

/*
 * rows by caller, thread or lock, by where the process runs (unit, cgroup, pod), or by edge:
 * the waiting process and the one whose thread woke it, per type (the wait-for graph)
 */
enum ls_group { LS_GROUP_CALLER, LS_GROUP_THREAD, LS_GROUP_LOCK, LS_GROUP_UNIT, LS_GROUP_CGROUP, LS_GROUP_POD,
		LS_GROUP_EDGE, LS_GROUP_MECHANISM, LS_GROUP_MAX };
enum ls_kind { LS_KIND_ALL, LS_KIND_KERNEL_ONLY, LS_KIND_USER_ONLY, LS_KIND_MAX };
enum ls_sort { LS_SORT_TOTAL, LS_SORT_CONTENDED, LS_SORT_MAX, LS_SORT_AVG, LS_SORT_MIN, LS_SORT_KEYS };

#define LS_QUERY_DEF_MAX_STACK 8

struct query {
	enum ls_window window;
	enum ls_group group;
	enum ls_sort sort;
	uint32_t pid;		/* 0: every process */
	uint32_t tid;		/* 0: every thread */
	uint32_t type_mask;	/* bit i: ls_lock_types[i]; default: all but event waits */
	bool evident_locks;	/* and event waits classed a lock's (classify.h): the default */
	int limit;		/* rows; 0: all */
	int max_stack;		/* frames per stack in the output */
	bool stacks;		/* include waiter stacks */
	bool owners;		/* include the dominant owner (and releaser) of each row */
	bool holders;		/* include the holder's sampled stacks (user locks) */
	enum ls_kind kind;
	char cgroup[LS_CGROUP_PATH_MAX];	/* -G: "" every cgroup; see ls_cgroup_matches() */
	/* where -G and the unit/cgroup/pod groups look processes up; the caller sets it */
	const struct cgroups *cgroups;
};

/* Which processes a view keeps (-p, -G): rows, threads and spin findings alike. */
struct proc_filter {
	uint32_t pid;			/* 0: every process */
	const char *cgroup;		/* NULL or "": every cgroup; see ls_cgroup_matches() */
	const struct cgroups *cgroups;	/* where @cgroup looks processes up */
};

struct query_ctx {
	const struct stacks *stacks;
	const struct ksyms *ksyms;	/* NULL: addresses only */
	struct usyms *usyms;		/* NULL: user frames as codes */
	const struct cgroups *cgroups;	/* NULL: rows without their cgroup */
	bool hide_kernel_addrs;		/* kernel frames and locks by name only (null addr) */
	struct scratch *scratch;	/* buffers kept from one query to the next; NULL: none */
};

/* type_mask is a uint32_t: room for this many lock types */
#define LS_MAX_LOCK_TYPES 32

struct lock_type {
	uint32_t flags;
	const char *name;	/* as perf prints it: "rwsem:R" */
	const char *class;	/* what -Y also accepts: "rwsem" */
};

extern const struct lock_type ls_lock_types[];
extern const int ls_nr_lock_types;

void query__init(struct query *q);
/* The type mask of every lock type: all but the other blocking syscalls' (wait:*) */
uint32_t query__lock_types(void);
/* Every user wait's type: futex:* and wait:* (what `lockscope waits` shows). */
uint32_t query__user_wait_types(void);
/* Fills @q from a request object; on error returns -EINVAL with a message in @err. */
int query__from_json(const cJSON *req, struct query *q, char *err, size_t err_len);
/* Parses "rwsem,mutex:R,..." into a type mask; -EINVAL names the bad entry in @err. */
int query__parse_types(const char *list, uint32_t *mask, char *err, size_t err_len);
int query__type_index(uint32_t flags);
/* Flags of a holder-preempted event (user LS_UTYPE_PREEMPT or LS_KIND_KPREEMPT), not a wait. */
bool query__is_preempt(uint32_t flags);
const char *query__group_name(enum ls_group g);
const char *query__sort_name(enum ls_sort s);
/* Rows for @view as a JSON array, sorted and cut to q->limit (the rest never sorted). */
cJSON *query__rows(const struct agg_view *view, const struct query *q, const struct query_ctx *ctx);
/*
 * One frame, kernel or user: the symbol, its offset, the module and (user frames) the
 * build id. A user frame's addr is its file offset in the module.
 */
struct query_frame {
	bool kernel;
	uint64_t addr;
	const char *sym;	/* NULL: unknown */
	uint64_t offset;
	const char *module;	/* file name; "kernel" or the kernel module's name */
	const char *path;	/* user frames: the module's path */
	const char *build_id;
	const char *const *inlined;	/* innermost first */
	uint32_t nr_inlined;
};

/*
 * Frame @i of a stack. Past the first, a user frame is a return address: it is looked up
 * one byte back, inside the call instruction.
 */
void query__frame(const struct query_ctx *ctx, const uint64_t *ips, uint32_t i, struct query_frame *fi);

/* What a wait is drawn under in a profile: its own stack, or the one that made it wait. */
enum query_side {
	QUERY_WAITER,	/* the waiter's stack */
	QUERY_HOLDER,	/* the releaser's (user locks) or the owner's (kernel locks) */
};

/*
 * @k's waits scaled by @fc (count) and @fw (time): with stacks sampled, the sampled keys of
 * a thread/lock/type stand for all of its waits. @stack is @k's stack on the side asked,
 * @cls its class (classify.h).
 */
typedef int (*query_wait_fn)(void *arg, const struct agg_key *k, const struct agg_val *v,
			     uint32_t stack, double fc, double fw, enum ls_wclass cls);
/*
 * Calls @fn for each wait key of @view that @q wants (holder events excluded); with
 * @by_stack the counts are scaled to the sampled keys as above. Stops at @fn's first
 * nonzero return and returns it; -ENOMEM.
 */
int query__for_each_wait(const struct agg_view *view, const struct query *q, enum query_side side,
			 bool by_stack, query_wait_fn fn, void *arg);

/* The frame where a wait's caller is: the first one past the locking internals. */
int query__caller_frame(const struct query_ctx *ctx, const uint64_t *ips, uint32_t nr);

/*
 * Adds "stack" (@id's frames, at most @max), "unwind" and "truncated" to @o; without a
 * stack, "stack" is null or (@null_if_none false) an empty array.
 */
void query__add_stack(cJSON *o, const struct query_ctx *ctx, uint32_t id, int max, bool null_if_none);
/*
 * Adds "cgroup" to @o: @pid's cgroup (id, path, unit, container, pod; a field null where
 * @many[by] says the row's processes differ in it), or null when it is not known.
 */
void query__add_cgroup(cJSON *o, const struct query_ctx *ctx, uint32_t pid, const bool many[CGROUP_BY_MAX]);
/* What the processes of a row of several have in common: each group kind's first, and whether they differ. */
struct cgroup_mix {
	bool has;
	uint32_t first[CGROUP_BY_MAX];
	bool many[CGROUP_BY_MAX];
};
/* @pid's groups into @m (a process in none, or not known, counts as group 0). */
void query__cgroup_mix(const struct cgroups *cg, uint32_t pid, struct cgroup_mix *m);
/* The lock of key @k: kernel address and name, or the user lock's mapping and offset. */
cJSON *query__lock_json(const struct query_ctx *ctx, const struct agg_key *k);

/* The processes @q keeps. */
struct proc_filter query__proc_filter(const struct query *q);
/* Whether @f keeps process @pid (with no cgroups table a -G filter keeps nothing). */
bool query__proc_wanted(const struct proc_filter *f, uint32_t pid);

/* Optional request fields: absent leaves *out; a wrong type or range is a one-line error. */
int query__uint_field(const cJSON *req, const char *field, uint64_t max, uint64_t *out,
		      char *err, size_t err_len);
int query__bool_field(const cJSON *req, const char *field, bool *out, char *err, size_t err_len);
/* The request's "cgroup" (-G) into @out (@len bytes); @out unchanged when it has none. */
int query__cgroup_field(const cJSON *req, char *out, size_t len, char *err, size_t err_len);
/* threads: the request's "group" (thread, unit, cgroup, pod) into @by; thread: CGROUP_BY_MAX */
int query__by_field(const cJSON *req, enum cgroup_by *by, char *err, size_t err_len);
/* The request's "window" (10s, 1m, 5m, all) into @w; @w unchanged when it has none. */
int query__window_field(const cJSON *req, enum ls_window *w, char *err, size_t err_len);

#endif

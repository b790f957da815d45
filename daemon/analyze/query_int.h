/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What query.c (requests, types), frames.c (stacks, callers, locks), rows.c (building and
 * picking rows) and rows_json.c (rendering them) share, and only they.
 */
#ifndef __LS_QUERY_INT_H
#define __LS_QUERY_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "analyze/classify.h"
#include "analyze/query.h"
#include "store/agg.h"

/* ---- grouping ---- */

struct stratum_key {
	uint64_t lock;
	uint32_t pid, tid, flags, name, object, cls;
};

struct stratum {
	uint64_t count, total_ns;		/* every wait: the exact entries */
	uint64_t s_count, s_total_ns;		/* the sampled waits (with their stacks) */
};

struct row_key {
	uint64_t lock;
	uint32_t a, b, c, d;
	uint32_t cls, pad;	/* enum ls_wclass: a lock's waits and idle ones make two rows */
};

/*
 * A row's figures, made in one pass over every key: what ranks it, and no more (100 k rows
 * are 100 k of these). What only a shown row needs (its first key, names, histogram,
 * types, owner and releaser) is made in a second pass, for those rows alone.
 */
struct row {
	double count, total_ns;
	uint64_t max_ns, min_ns;
	uint32_t next_of_stack;		/* by caller: the next row of the same stack (index + 1) */
	uint8_t type, cls;		/* by caller: the row's type index and class */
};

/* the owner and the releaser with the most waits behind a row */
struct party {
	double best, stack_best;
	uint32_t pid, tid, stack;
	/*
	 * The stack's own thread when it is not tid's: the thread named ended most waits but
	 * had none of its stacks sampled, so the stack is the role's seen most in the row
	 * (other_best: its count).
	 */
	double other_best;
	uint32_t stack_pid, stack_tid;
	char comm[LS_COMM_LEN];
};

struct row_detail {
	const struct agg_key *rep;	/* the first fine key: names pid/tid/lock when unique */
	const char *comm;
	uint64_t samples;		/* waits with a stack behind the row */
	uint64_t nonblocking;
	bool estimated;
	bool many_pids, many_tids, many_locks;
	double hist[LS_HIST_BUCKETS];
	double type_total[LS_MAX_LOCK_TYPES];
	double class_ns[LS_WCLASS_MAX];	/* wait time by class (classify.h) */
	struct party owner, releaser;
	/* chains: the waits whose waker was itself waiting meanwhile, and on whom, most */
	struct party chain;
	double chained_ns;
	struct party waiter;	/* edges: the waiting thread with most waits, and its stack */
	/* the groups (cgroups__group) of the row's first key, and which the others differ in */
	struct cgroup_mix cgroups;	/* what its processes' cgroups have in common */
};

enum party_role { PARTY_OWNER, PARTY_RELEASER, PARTY_CHAIN, PARTY_WAITER };

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

struct row_set {
	const struct query *q;
	struct scratch *scratch;	/* where its arrays of a key or row each come from */
	struct row *rows;
	size_t nr, cap;
	struct htab *index;	/* row_key -> row index */
	uint32_t *row_of_stack;	/* by caller: by stack id, its first row (index + 1) */
	uint32_t nr_stacks;	/* row_of_stack's length: the highest stack id + 1 */
	uint32_t *row_of;	/* by view position: row index + 1; 0: no row */
	/* the rows shown, in order, and what only they need */
	uint32_t *shown;
	size_t nr_shown;
	int32_t *detail_of;	/* by row: index in details, -1 when not shown */
	struct row_detail *details;
	struct htab *owners;	/* owner_key -> owner_val */
};

/* rows.c */
/* Not waits: what a lock's holder did (samples, preemptions), keyed like the lock's waits. */
bool query_is_holder_event(const struct agg_key *k);
/*
 * Builds the rows of @view for @q and picks the shown ones; rows_free() after. Its arrays
 * of a key or a row each come from @scratch (NULL: allocated for it).
 */
struct scratch;
int rows_fill(struct row_set *rs, const struct agg_view *view, const struct query *q, struct scratch *scratch);
void rows_free(struct row_set *rs);

/* frames.c */
void query_add_hex(cJSON *o, const char *name, uint64_t v);
/* "sym+0xoff" of the frame a row is named by, or its address */
void query_caller_string(const struct query_ctx *ctx, uint32_t stack, char *out, size_t len);

#endif

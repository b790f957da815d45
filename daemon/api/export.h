/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Waits in the formats other tools read: collapsed stacks (flamegraph.pl, inferno,
 * speedscope) and gzip'd pprof profiles (go tool pprof, Pyroscope, Parca). Both are drawn
 * from an aggregation table through the same query filters as `top`, with sampled stacks
 * standing for all the waits of their thread, lock and type (query__for_each_wait).
 *
 * Two views, as Go's runtime profiles have them:
 *   block (QUERY_WAITER)  each wait under the waiter's stack
 *   mutex (QUERY_HOLDER)  each wait under the stack that ended it: the releaser's futex
 *                         wake (user locks) or the owner's stack (kernel locks)
 */
#ifndef __LS_EXPORT_H
#define __LS_EXPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "analyze/query.h"

struct agg_view;

enum ls_export_format {
	LS_EXPORT_JSON,		/* the report (schemas/report.schema.json) */
	LS_EXPORT_PROMETHEUS,	/* text exposition 0.0.4: health and lock metrics */
	LS_EXPORT_PPROF,	/* gzip'd profile.proto */
	LS_EXPORT_FOLDED,	/* "comm;root;...;leaf WAIT_NS" lines */
	LS_EXPORT_DOT,		/* the wait-for graph, Graphviz's DOT */
	LS_EXPORT_MAX,
};

/*
 * Whose stack a wait is drawn under: the waiter's (block), the releaser's or owner's
 * (mutex), or the waiter's under two root frames, the wait's class and its mechanism
 * (mechanism: folded and flame graphs only).
 */
enum ls_profile { LS_PROFILE_BLOCK, LS_PROFILE_MUTEX, LS_PROFILE_MECHANISM, LS_PROFILE_MAX };

const char *ls_export_format_name(enum ls_export_format f);
int ls_export_format_parse(const char *s, enum ls_export_format *f);
const char *ls_profile_name(enum ls_profile p);
int ls_profile_parse(const char *s, enum ls_profile *p);

/* A malloc'd output buffer. */
struct export_buf {
	char *data;
	size_t len;
};

/* Collapsed stacks weighted by wait ns, heaviest first. */
int export__folded(const struct agg_view *tab, const struct query *q, const struct query_ctx *ctx,
		   enum ls_profile p, struct export_buf *out);

/*
 * The wait-for graph of the user waits @q selects (graph.c): a node per process, an edge
 * per (type, waiting process, process whose thread woke it).
 */
int export__dot(const struct agg_view *tab, const struct query *q, const struct query_ctx *ctx,
		struct export_buf *out);

/* Where and when the profile was taken: pprof's time_nanos and duration_nanos. */
struct export_span {
	uint64_t start_unix_ns;
	uint64_t duration_ns;
	/*
	 * For a fleet's backend (Parca, Pyroscope turn sample labels into series): only the
	 * bounded labels unit, kind and type, never pids, threads or lock addresses
	 */
	bool fleet;
};

/*
 * A gzip'd pprof profile with Go's contention sample types ([contentions/count,
 * delay/nanoseconds], period type contentions/count) and labels pid, tid, comm, kind,
 * type and lock on every sample (span->fleet: unit, kind and type).
 */
int export__pprof(const struct agg_view *tab, const struct query *q, const struct query_ctx *ctx,
		  enum ls_profile p, const struct export_span *span, struct export_buf *out);
/*
 * A push interval's spin samples (struct spin_sample_key -> double count, as
 * spin__take_interval shares them) as a CPU profile for a fleet's backend: sample types samples/count and
 * cpu/nanoseconds (@period_ns each), each under its stack, labels unit and kind
 * (pause_spin, busy_poll).
 */
struct htab;
int export__spin_pprof(const struct htab *samples, uint64_t period_ns, const struct query_ctx *ctx,
		       const struct export_span *span, struct export_buf *out);

/*
 * Replaces @path with @len bytes at once: written to a temporary file beside it, then
 * renamed over it, so that a reader (node_exporter's textfile collector, a scraper) sees
 * the old file or the new one, never half of one. The temporary name ends in random
 * characters, not ".prom": the textfile collector skips it.
 */
int export__write_file(const char *path, const void *data, size_t len);

/* @len bytes as base64 (the protocol carries binary exports in JSON strings). */
char *export__base64(const void *data, size_t len);

#endif

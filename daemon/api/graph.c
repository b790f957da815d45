// SPDX-License-Identifier: GPL-2.0
/*
 * The wait-for graph in Graphviz's DOT language: the rows by edge (one per type, waiting
 * process and process whose thread woke it) drawn as a node per process and an arrow from
 * each waiter to its waker, labelled with the type, the class, the waits and their total
 * time. Waits no thread ended (an interrupt, a timer, a signal: idle time or the disk) go
 * to one node, those whose waker was not watched (sched_waking detached) to another. A lock's edges are solid and red, idle ones dashed grey, I/O dotted blue.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api/export.h"
#include "lib/jsonget.h"

/* A DOT string's body: quotes and backslashes escaped, control bytes dropped. */
static void dot_string(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		if ((unsigned char)*s >= ' ')
			fputc(*s, f);
	}
}

/* How an edge of each class is drawn (classify.h's names). */
static const char *edge_style(const char *cls)
{
	if (!strcmp(cls, "lock"))
		return "color=firebrick";
	if (!strcmp(cls, "io"))
		return "color=steelblue, style=dotted";
	return "color=grey50, style=dashed";
}

/* "p1234" names process 1234's node; "none" the waits no thread ended. */
static void dot_node(FILE *f, uint32_t pid, const char *comm)
{
	fprintf(f, "\tp%" PRIu32 " [label=\"", pid);
	dot_string(f, comm);
	fprintf(f, "/%" PRIu32 "\"];\n", pid);
}

int export__dot(const struct agg_view *tab, const struct query *base, const struct query_ctx *ctx,
		struct export_buf *out)
{
	struct query q = *base;
	const cJSON *r;
	cJSON *rows;
	FILE *f;

	out->data = NULL;
	out->len = 0;
	q.group = LS_GROUP_EDGE;
	/* kernel locks have owners, not wakers: their waits have no edge to draw */
	q.kind = LS_KIND_USER_ONLY;
	q.stacks = q.owners = q.holders = false;
	if (!(rows = query__rows(tab, &q, ctx)))
		return -ENOMEM;
	if (!(f = open_memstream(&out->data, &out->len))) {
		cJSON_Delete(rows);
		return -errno;
	}
	fprintf(f, "digraph waits {\n\trankdir=LR;\n\tnode [shape=box];\n"
		   "\tnone [label=\"(no thread)\", shape=ellipse];\n"
		   "\tunwatched [label=\"(waker not watched)\", shape=ellipse, style=dashed];\n");
	cJSON_ArrayForEach(r, rows) {
		const cJSON *w = cJSON_GetObjectItemCaseSensitive(r, "releaser");
		uint32_t pid = ls_json_u64(r, "pid");
		double ms = ls_json_num(r, "total_wait_ns") / 1e6;

		dot_node(f, pid, ls_json_str_or(r, "comm", "?"));
		if (cJSON_IsObject(w))
			dot_node(f, ls_json_u64(w, "pid"), ls_json_str_or(w, "comm", "?"));
		fprintf(f, "\tp%" PRIu32 " -> ", pid);
		if (cJSON_IsObject(w))
			fprintf(f, "p%" PRIu64, ls_json_u64(w, "pid"));
		else if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(r, "waker_watched")))
			fprintf(f, "unwatched");
		else
			fprintf(f, "none");
		fprintf(f, " [label=\"%s (%s): %" PRIu64 " waits, %.1f ms\", penwidth=%.1f, %s];\n",
			ls_json_str_or(r, "type", "?"), ls_json_str_or(r, "class", "?"), ls_json_u64(r, "contended"), ms,
			1 + fmin(4, log10(1 + ms)), edge_style(ls_json_str_or(r, "class", "?")));
	}
	fprintf(f, "}\n");
	cJSON_Delete(rows);
	if (fclose(f)) {
		free(out->data);
		out->data = NULL;
		return -ENOMEM;
	}
	return 0;
}

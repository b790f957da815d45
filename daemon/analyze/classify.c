// SPDX-License-Identifier: GPL-2.0
/*
 * Lock, idle or I/O: each event wait of a view classed by the wait-for graph's cycles
 * among peers (classify.h says why). One pass over the view's keys makes the graph (a node
 * per type and thread, weighted by its waits, an edge per waiter -> waker pair of peers),
 * Tarjan's algorithm its strongly connected components; the nodes of a component with a
 * small part of its waits are dropped and the components made again; a wait is a lock's
 * when its waiter and waker are in one.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/classify.h"
#include "analyze/query.h"
#include "analyze/query_int.h"
#include "lib/htab.h"
#include "lib/vec.h"
#include "scheduler.h"

static const char *const class_names[LS_WCLASS_MAX] = { "lock", "idle", "io" };

const char *classify__name(enum ls_wclass c)
{
	return c < LS_WCLASS_MAX ? class_names[c] : "?";
}

static bool is_block(uint32_t flags, enum ls_btype t)
{
	return flags == (LS_KIND_USER | (LS_UTYPE_BLOCK + t));
}

bool classify__by_evidence(uint32_t flags)
{
	if (flags == (LS_KIND_USER | LS_UTYPE_CONDVAR))
		return true;
	/* a file lock is a lock whoever releases it */
	return (flags & LS_KIND_USER) && (flags & ~LS_KIND_USER) >= LS_UTYPE_BLOCK && !is_block(flags, LS_BTYPE_FLOCK);
}

/* A node of the graph: a thread's waits of one type (a thread can wait on a lock and idle). */
struct node_key {
	uint32_t type, tid;
};

struct edge {
	uint32_t from, to;
};

/*
 * What a process waits on, as one object: a futex word (a shared one by its mapping) or a
 * descriptor, of one type. Its waits that ended while sched_waking was detached have no
 * releaser to class them by; they take the class its watched waits were given.
 */
struct object_key {
	uint64_t lock;
	uint32_t pid, type, object, zero;	/* compared as bytes: no padding */
};

static struct object_key object_of(const struct agg_key *k)
{
	return (struct object_key){ .lock = k->lock, .pid = k->pid, .type = k->flags, .object = k->object };
}

struct graph;

struct wait_classes {
	const struct agg_view *view;
	struct graph *graph;	/* made at the first wait classed by evidence */
	bool failed;		/* out of memory making it: every such wait is idle */
};

/*
 * A thread whose waits in a cycle are fewer than this share of the cycle's average is not
 * one of the peers taking turns: condvar_pc's producer, which in 1000 hand-outs waits once
 * for a consumer (glibc's condvar group switch) while each consumer waits ~230 times for
 * it, would otherwise make one cycle with them.
 */
#define MINOR_NODE_PCT 10

struct graph {
	struct htab *nodes;	/* node_key -> uint64_t: its waits a peer ended */
	struct edge *edges;
	size_t nr_edges, cap_edges;
	uint32_t *first, *adj;	/* CSR: node i's successors are adj[first[i] .. first[i + 1]) */
	uint32_t *comp;		/* by node: its component */
	bool *minor;		/* by node: too few waits to be one of its cycle's peers */
	struct htab *lock_objects;	/* struct object_key -> uint8_t: a watched wait on it was a lock's */
	uint32_t *wakes;	/* the view positions of the keys has_waker() takes: the graph's second pass */
	size_t nr_wakes, cap_wakes;
};

/* Peers take turns on one thing: threads of one process, or processes of one program. */
static bool peers(const struct agg_key *k, const struct agg_val *v)
{
	if (k->pid == k->releaser_pid)
		return true;
	return v->comm && v->releaser_comm && !strcmp(v->comm, v->releaser_comm);
}

/* A wait a thread other than its own ended, of a type classed by evidence: an edge's maybe. */
static bool has_waker(const struct agg_key *k)
{
	return classify__by_evidence(k->flags) && !query_is_holder_event(k) && k->releaser_tid &&
	       k->releaser_tid != k->tid;
}

static bool is_peer_wake(const struct agg_key *k, const struct agg_val *v)
{
	return has_waker(k) && peers(k, v);
}

static int node_of(struct graph *g, uint32_t type, uint32_t tid, uint64_t waits, uint32_t *idx)
{
	struct node_key nk = { type, tid };
	uint64_t *w;
	int err = 0;

	if (!(w = htab__upsert_at(g->nodes, &nk, idx, NULL, &err)))
		return err ? err : -ENOMEM;
	*w += waits;
	return 0;
}

static int add_edges(struct graph *g, const struct agg_view *view)
{
	const struct agg_key *k;
	struct agg_val v;
	size_t i;
	int err;

	for (i = 0; (k = agg_view__key(view, i)); i++) {
		struct edge e;

		/* the figures and names only of the keys that may be an edge */
		if (!has_waker(k))
			continue;
		if ((err = ls_vec_reserve(&g->wakes, &g->cap_wakes, g->nr_wakes, sizeof(*g->wakes))))
			return err;
		g->wakes[g->nr_wakes++] = i;
		if (agg_view__get(view, i, &k, &v) || !peers(k, &v))
			continue;
		if ((err = node_of(g, k->flags, k->tid, v.st.count, &e.from)) ||
		    (err = node_of(g, k->flags, k->releaser_tid, 0, &e.to)) ||
		    (err = ls_vec_reserve(&g->edges, &g->cap_edges, g->nr_edges, sizeof(*g->edges))))
			return err;
		g->edges[g->nr_edges++] = e;
	}
	return 0;
}

/* The edges as adjacency lists (compressed rows): node i's successors are adj[first[i]..first[i+1]). */
static int make_csr(struct graph *g)
{
	size_t n = htab__count(g->nodes), i;
	uint32_t *next;

	g->first = calloc(n + 1, sizeof(*g->first));
	g->adj = malloc((g->nr_edges ? g->nr_edges : 1) * sizeof(*g->adj));
	next = malloc((n ? n : 1) * sizeof(*next));
	if (!g->first || !g->adj || !next) {
		free(next);
		return -ENOMEM;
	}
	for (i = 0; i < g->nr_edges; i++)
		g->first[g->edges[i].from + 1]++;
	for (i = 0; i < n; i++) {
		g->first[i + 1] += g->first[i];
		next[i] = g->first[i];
	}
	for (i = 0; i < g->nr_edges; i++)
		g->adj[next[g->edges[i].from]++] = g->edges[i].to;
	free(next);
	return 0;
}

#define UNVISITED UINT32_MAX

struct frame {
	uint32_t node, cursor;
};

/* Tarjan's strongly connected components, without recursion (a graph may hold every thread). */
static int components(struct graph *g)
{
	size_t n = htab__count(g->nodes), i, depth = 0, top = 0;
	uint32_t *index = malloc((n ? n : 1) * sizeof(*index)), *low = malloc((n ? n : 1) * sizeof(*low));
	uint32_t *stack = malloc((n ? n : 1) * sizeof(*stack)), counter = 0, ncomp = 0;
	struct frame *frames = malloc((n ? n : 1) * sizeof(*frames));
	bool *on_stack = calloc(n ? n : 1, sizeof(*on_stack));
	int err = 0;

	g->comp = malloc((n ? n : 1) * sizeof(*g->comp));
	if (!index || !low || !stack || !frames || !on_stack || !g->comp) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++)
		index[i] = UNVISITED;
	for (i = 0; i < n; i++) {
		if (index[i] != UNVISITED)
			continue;
		index[i] = low[i] = counter++;
		stack[top++] = i;
		on_stack[i] = true;
		frames[depth++] = (struct frame){ i, g->first[i] };
		while (depth) {
			struct frame *f = &frames[depth - 1];
			uint32_t u = f->node, w;

			if (f->cursor < g->first[u + 1]) {
				w = g->adj[f->cursor++];
				if (index[w] == UNVISITED) {
					index[w] = low[w] = counter++;
					stack[top++] = w;
					on_stack[w] = true;
					frames[depth++] = (struct frame){ w, g->first[w] };
				} else if (on_stack[w] && index[w] < low[u]) {
					low[u] = index[w];
				}
				continue;
			}
			depth--;
			if (low[u] == index[u]) {
				do {
					w = stack[--top];
					on_stack[w] = false;
					g->comp[w] = ncomp;
				} while (w != u);
				ncomp++;
			}
			if (depth && low[u] < low[frames[depth - 1].node])
				low[frames[depth - 1].node] = low[u];
		}
	}
out:
	free(index);
	free(low);
	free(stack);
	free(frames);
	free(on_stack);
	return err;
}

static void graph_free(struct graph *g)
{
	htab__free(g->nodes);
	htab__free(g->lock_objects);
	free(g->edges);
	free(g->first);
	free(g->adj);
	free(g->comp);
	free(g->minor);
	free(g->wakes);
}

/*
 * The nodes of each cycle with too few waits to be peers taking turns (MINOR_NODE_PCT),
 * and their edges dropped; the components are then made again without them.
 */
static int drop_minor_nodes(struct graph *g)
{
	size_t n = htab__count(g->nodes), i, kept = 0;
	uint64_t *sum = calloc(n ? n : 1, sizeof(*sum));
	uint32_t *size = calloc(n ? n : 1, sizeof(*size));
	int err = 0;

	g->minor = calloc(n ? n : 1, sizeof(*g->minor));
	if (!sum || !size || !g->minor) {
		err = -ENOMEM;
		goto out;
	}
	for (i = 0; i < n; i++) {
		sum[g->comp[i]] += *(uint64_t *)htab__at(g->nodes, i, NULL);
		size[g->comp[i]]++;
	}
	for (i = 0; i < n; i++)
		g->minor[i] = size[g->comp[i]] > 1 &&
			      *(uint64_t *)htab__at(g->nodes, i, NULL) * 100 * size[g->comp[i]] <
				      sum[g->comp[i]] * MINOR_NODE_PCT;
	for (i = 0; i < g->nr_edges; i++)
		if (!g->minor[g->edges[i].from] && !g->minor[g->edges[i].to])
			g->edges[kept++] = g->edges[i];
	g->nr_edges = kept;
	free(g->first);
	free(g->adj);
	free(g->comp);
	g->first = g->adj = g->comp = NULL;
	err = make_csr(g);
	if (!err)
		err = components(g);
out:
	free(sum);
	free(size);
	return err;
}

/* @k's class in graph @g (NULL: a wait that is no peer's wake, which needs none). */
static enum ls_wclass class_of(const struct graph *g, const struct agg_key *k, const struct agg_val *v)
{
	struct node_key from = { k->flags, k->tid }, to = { k->flags, k->releaser_tid };
	uint32_t a, b;

	if (!classify__by_evidence(k->flags))
		return LS_WCLASS_LOCK;
	if (k->unwatched && g) {
		struct object_key ok = object_of(k);

		if (htab__find(g->lock_objects, &ok))
			return LS_WCLASS_LOCK;
	}
	if (!k->releaser_tid)	/* a device, a timer, an interrupt (or not watched: as its object's) */
		return is_block(k->flags, LS_BTYPE_SYNC) || is_block(k->flags, LS_BTYPE_KERNEL) ? LS_WCLASS_IO
											: LS_WCLASS_IDLE;
	if (g && is_peer_wake(k, v) && htab__index(g->nodes, &from, &a) && htab__index(g->nodes, &to, &b) &&
	    !g->minor[a] && !g->minor[b] && g->comp[a] == g->comp[b])
		return LS_WCLASS_LOCK;
	return LS_WCLASS_IDLE;
}

/*
 * The objects some watched wait of the view was a lock's wait on (class_of() with the graph
 * complete): the evidence for the waits on them no releaser was watched for. Only the keys
 * add_edges() found a waker in: one thread's 116 k timed waits, none woken by a thread,
 * made the graph take a pass over them all, and this took a second one.
 */
static int mark_lock_objects(struct graph *g, const struct agg_view *view)
{
	const struct agg_key *k;
	struct agg_val v;
	size_t i;
	int err = 0;

	if (!(g->lock_objects = htab__new(sizeof(struct object_key), sizeof(uint8_t), SIZE_MAX)))
		return -ENOMEM;
	for (i = 0; i < g->nr_wakes; i++) {
		struct object_key ok;

		if (agg_view__get(view, g->wakes[i], &k, &v) || class_of(g, k, &v) != LS_WCLASS_LOCK)
			continue;
		ok = object_of(k);
		if (!htab__upsert(g->lock_objects, &ok, NULL, &err))
			return err ? err : -ENOMEM;
	}
	return 0;
}

static struct graph *graph_new(const struct agg_view *view)
{
	struct graph *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	if (!(g->nodes = htab__new(sizeof(struct node_key), sizeof(uint64_t), SIZE_MAX)) || add_edges(g, view) ||
	    make_csr(g) || components(g) || drop_minor_nodes(g) || mark_lock_objects(g, view)) {
		graph_free(g);
		free(g);
		return NULL;
	}
	return g;
}

struct wait_classes *wait_classes__new(const struct agg_view *view)
{
	struct wait_classes *wc = calloc(1, sizeof(*wc));

	if (wc)
		wc->view = view;
	return wc;
}

void wait_classes__free(struct wait_classes *wc)
{
	if (!wc)
		return;
	if (wc->graph) {
		graph_free(wc->graph);
		free(wc->graph);
	}
	free(wc);
}

enum ls_wclass wait_classes__of(struct wait_classes *wc, const struct agg_key *k, const struct agg_val *v)
{
	if (!wc || !classify__by_evidence(k->flags))
		return LS_WCLASS_LOCK;
	if (!is_peer_wake(k, v) && !k->unwatched)	/* no graph needed: not a peer's wake */
		return class_of(NULL, k, v);
	if (!wc->graph && !wc->failed && !(wc->graph = graph_new(wc->view)))
		wc->failed = true;
	return wc->graph ? class_of(wc->graph, k, v) : LS_WCLASS_IDLE;
}

// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "analyze/threads.h"
#include "analyze/threads_int.h"
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/switch_cost.h"
#include "lib/vec.h"
#include "scheduler.h"

/*
 * How a thread's points thin out with age, like the aggregator's window slots: every
 * change in the last 11 s, the newest per 6 s step up to 66 s, per 30 s step up to 330 s,
 * and one older than that (the base of the 5-minute window). A window's base is the newest
 * point before it starts: at most one step of its level early. An idle thread has one.
 */
#define THIN_ALL_NS	(11 * NSEC_PER_SEC)
#define THIN_6S_NS	(66 * NSEC_PER_SEC)
#define THIN_30S_NS	(330 * NSEC_PER_SEC)

static const uint64_t window_ns[LS_WIN_MAX] = {
	[LS_WIN_10S] = 10 * NSEC_PER_SEC, [LS_WIN_1M] = 60 * NSEC_PER_SEC, [LS_WIN_5M] = 300 * NSEC_PER_SEC,
};

/* An exited thread is kept while it can be in the longest window (and a slot of it). */
#define EXITED_KEEP_NS THIN_30S_NS

int threads__new(const struct threads_opts *opts, struct threads **out)
{
	struct threads *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->opts = *opts;
	t->by_tid = htab__new(sizeof(uint32_t), sizeof(struct thread), SIZE_MAX);
	t->exited = htab__new(sizeof(uint32_t), sizeof(struct proc_summary), opts->max_exited_procs);
	if (!t->by_tid || !t->exited) {
		threads__free(t);
		return -ENOMEM;
	}
	*out = t;
	return 0;
}

static void free_points(struct htab *h)
{
	size_t iter = 0;
	const void *k;
	void *v;

	while (h && !htab__next(h, &iter, &k, &v))
		free(((struct thread *)v)->pts);
}

void threads__free(struct threads *t)
{
	if (!t)
		return;
	free_points(t->by_tid);
	htab__free(t->by_tid);
	htab__free(t->exited);
	free(t);
}

/* The host's switches since boot, as vmstat reads them. */
uint64_t threads__host_switches(void)
{
	unsigned long long v = 0;
	char line[256];
	FILE *f = fopen("/proc/stat", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "ctxt %llu", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static void counters_of(const struct sched_thread *st, struct counters *c)
{
	c->v[TC_VOLUNTARY] = st->voluntary;
	c->v[TC_INVOLUNTARY] = st->involuntary;
	c->v[TC_ONCPU] = st->oncpu_ns;
	c->v[TC_BLOCKED] = st->blocked_ns;
	c->v[TC_RUNQ] = st->runq_ns;
	c->v[TC_YIELDS] = st->yields;
	c->v[TC_YIELD_SPIN] = st->yield_spin_ns;
	c->v[TC_SAMPLES] = st->samples;
	c->v[TC_SPIN_SAMPLES] = st->spin_samples;
	c->v[TC_POLL_SAMPLES] = st->poll_samples;
	c->v[TC_EVENTS] = st->events;
}

static void counters_to(const struct counters *c, struct sched_thread *st)
{
	st->voluntary = c->v[TC_VOLUNTARY];
	st->involuntary = c->v[TC_INVOLUNTARY];
	st->oncpu_ns = c->v[TC_ONCPU];
	st->blocked_ns = c->v[TC_BLOCKED];
	st->runq_ns = c->v[TC_RUNQ];
	st->yields = c->v[TC_YIELDS];
	st->yield_spin_ns = c->v[TC_YIELD_SPIN];
	st->samples = c->v[TC_SAMPLES];
	st->spin_samples = c->v[TC_SPIN_SAMPLES];
	st->poll_samples = c->v[TC_POLL_SAMPLES];
	st->events = c->v[TC_EVENTS];
}

/* Counters only grow; a thread id reused by a new thread starts a new record instead. */
static void counters_sub(struct counters *c, const struct counters *base)
{
	int i;

	for (i = 0; i < TC_MAX; i++)
		c->v[i] = c->v[i] > base->v[i] ? c->v[i] - base->v[i] : 0;
}

/* Whether @next, the point after @p, stands for it (see THIN_*). */
static bool thinned(const struct point *p, const struct point *next, uint64_t now)
{
	uint64_t age = now - p->ns;

	if (age < THIN_ALL_NS)
		return false;
	if (age < THIN_6S_NS)
		return p->ns / (6 * NSEC_PER_SEC) == next->ns / (6 * NSEC_PER_SEC);
	if (age < THIN_30S_NS)
		return p->ns / (30 * NSEC_PER_SEC) == next->ns / (30 * NSEC_PER_SEC);
	return now - next->ns >= THIN_30S_NS;
}

static void thin_points(struct thread *th, uint64_t now)
{
	size_t i, n = 0;

	for (i = 0; i < th->nr_pts; i++)
		if (i + 1 == th->nr_pts || !thinned(&th->pts[i], &th->pts[i + 1], now))
			th->pts[n++] = th->pts[i];
	th->nr_pts = n;
}

/*
 * Whether @a and @b differ in more than blocked time. A thread that sleeps adds blocked
 * time at every tick and nothing else: base_at() derives it for such a thread, so that an
 * idle thread keeps one point. With 20 000 idle threads a point each a tick (thinned to
 * ~25 a thread) had cost the daemon 53-83 MB after 45 s, and 2.1-2.4 % of a core against
 * 1.6-1.8 % now (30 MB).
 */
static bool counters_moved(const struct counters *a, const struct counters *b)
{
	int i;

	for (i = 0; i < TC_MAX; i++)
		if (i != TC_BLOCKED && a->v[i] != b->v[i])
			return true;
	return false;
}

static int add_point(struct thread *th, uint64_t now)
{
	struct point *last = th->nr_pts ? &th->pts[th->nr_pts - 1] : NULL;
	struct counters c;

	counters_of(&th->st, &c);
	if (last && !counters_moved(&last->c, &c))
		return 0;
	if (ls_vec_reserve(&th->pts, &th->cap_pts, th->nr_pts, sizeof(*th->pts)))
		return -ENOMEM;
	th->pts[th->nr_pts++] = (struct point){ now, c };
	thin_points(th, now);
	return 0;
}

struct ticking {
	struct threads *t;
	uint64_t now, boot_ns;
	bool periodic;		/* the once-a-second read (else a query's): live rates start anew */
};

/* Starts a new baseline period once one has passed and the thread did something since. */
static void baseline(struct thread *th, uint64_t events, uint64_t now)
{
	if (th->ref_ns[0] && (now - th->ref_ns[0] < SCHED_BASE_PERIOD_NS || events == th->ref_events[0]))
		return;
	memmove(th->ref_ns + 1, th->ref_ns, (REF_POINTS - 1) * sizeof(th->ref_ns[0]));
	memmove(th->ref_events + 1, th->ref_events, (REF_POINTS - 1) * sizeof(th->ref_events[0]));
	th->ref_ns[0] = now;
	th->ref_events[0] = events;
}

/* A periodic read of @th: its live rates span from the figures it had until now. */
static void rates_from_last(struct thread *th)
{
	th->prev_ns = th->seen_ns;
	th->prev_voluntary = th->st.voluntary;
	th->prev_involuntary = th->st.involuntary;
}

static int tick_one(void *ctx, __u32 tid, const struct sched_thread *st)
{
	struct ticking *tk = ctx;
	struct thread *th;
	int created, err;

	th = htab__upsert(tk->t->by_tid, &tid, &created, &err);
	if (!th)
		return 0;	/* SIZE_MAX entries: only out of memory */
	/* a new thread with a reused id: the old one's record ends here */
	if (!created && (!(st->flags & SCHED_THREAD_EXITED) || (st->flags & SCHED_THREAD_FINAL)) &&
	    st->start_ns && th->st.start_ns && st->start_ns != th->st.start_ns) {
		free(th->pts);
		memset(th, 0, sizeof(*th));
		created = 1;
	}
	if (st->flags & SCHED_THREAD_FINAL)
		tk->t->exits++;
	if (st->flags & SCHED_THREAD_EXITED) {
		/*
		 * Gone without its final counters (its exit record found no room, or it exited
		 * before we started): what the last tick read stands; a thread never seen alive
		 * is known by its spin figures alone.
		 */
		if (created || (st->flags & SCHED_THREAD_FINAL))
			th->st = *st;
		th->st.flags |= SCHED_THREAD_EXITED;
		if (!th->exited_ns)
			th->exited_ns = tk->now;
	} else {
		if (!created && tk->periodic)
			rates_from_last(th);
		th->st = *st;
		th->seen_ns = tk->now;
		th->exited_ns = 0;
		if (tk->periodic)
			baseline(th, st->events, tk->boot_ns);
	}
	return add_point(th, tk->now);
}

/* The all window's part of an exited thread that ages out: its process's summary. */
static void summarize(struct threads *t, uint32_t tid, const struct thread *th)
{
	struct proc_summary *ps;
	struct counters c;
	uint32_t pid = th->st.tgid;
	int created, err, i;

	ps = htab__upsert(t->exited, &pid, &created, &err);
	if (!ps) {
		t->dropped++;
		return;
	}
	counters_of(&th->st, &c);
	if (th->nr_pts && th->st.start_ns && th->st.start_ns < t->start_ns)
		counters_sub(&c, &th->pts[0].c);	/* born before the daemon: since it started */
	for (i = 0; i < TC_MAX; i++)
		ps->c.v[i] += c.v[i];
	ps->threads++;
	if (th->exited_ns > ps->exited_ns)
		ps->exited_ns = th->exited_ns;
	if (created || tid == pid)	/* the process's name is its main thread's */
		memcpy(ps->comm, th->st.comm, sizeof(ps->comm));
}

/*
 * Marks the threads this tick did not find as exited, and moves the ones exited longer
 * than the longest window into their process's summary (a new table: entries are dense).
 */
static int by_time(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The exit time at or before which exited threads are summarized now: the longest window
 * ago, or earlier-exited ones beyond max_exited_threads (a churn of short-lived threads
 * must not grow the table for the 5 minutes they would otherwise be kept).
 */
static uint64_t expiry(struct threads *t, uint64_t cutoff, size_t exited)
{
	uint64_t *times;
	size_t iter = 0, n = 0, over;
	const void *k;
	void *v;

	if (exited <= t->opts.max_exited_threads)
		return cutoff;
	over = exited - t->opts.max_exited_threads;
	times = malloc(exited * sizeof(*times));
	if (!times)
		return cutoff;
	while (!htab__next(t->by_tid, &iter, &k, &v) && n < exited)
		if (((struct thread *)v)->exited_ns)
			times[n++] = ((struct thread *)v)->exited_ns;
	ls_sort(times, n, sizeof(*times), by_time);
	if (over <= n && times[over - 1] > cutoff)
		cutoff = times[over - 1];
	free(times);
	return cutoff;
}

/*
 * @th, which a pass of changed threads did not give: it has only slept since it was last
 * given (SCHED_ITER_CHANGED), so its blocked time grew by the time since and nothing else
 * moved (tick_one() for a thread that did not change, but the point it would not add).
 */
static void slept(struct thread *th, uint64_t now, bool periodic)
{
	if (periodic)
		rates_from_last(th);
	th->st.blocked_ns += now - th->seen_ns;
	th->seen_ns = now;
}

static void sweep(struct threads *t, uint64_t now, bool periodic, bool all_given)
{
	struct htab *keep = NULL;
	size_t iter = 0, expired = 0, exited = 0;
	/* summarized when gone longer than the longest window */
	uint64_t in_time = now > EXITED_KEEP_NS ? now - EXITED_KEEP_NS - 1 : 0, cutoff;
	const void *k;
	void *v;

	while (!htab__next(t->by_tid, &iter, &k, &v)) {
		struct thread *th = v;

		if (!th->exited_ns && th->seen_ns != now) {
			if (all_given) {
				th->exited_ns = now;
				th->st.flags |= SCHED_THREAD_EXITED;
			} else {
				slept(th, now, periodic);
			}
		}
		exited += !!th->exited_ns;
	}
	cutoff = expiry(t, in_time, exited);
	iter = 0;
	while (!htab__next(t->by_tid, &iter, &k, &v))
		expired += ((struct thread *)v)->exited_ns && ((struct thread *)v)->exited_ns <= cutoff;
	if (!expired)
		return;
	keep = htab__new(sizeof(uint32_t), sizeof(struct thread), SIZE_MAX);
	if (!keep)
		return;	/* next tick */
	iter = 0;
	while (!htab__next(t->by_tid, &iter, &k, &v)) {
		struct thread *th = v, *nt;

		if (th->exited_ns && th->exited_ns <= cutoff) {
			t->folded_early += th->exited_ns > in_time;
			summarize(t, *(const uint32_t *)k, th);
			free(th->pts);
			continue;
		}
		nt = htab__upsert(keep, k, NULL, NULL);
		if (nt)
			*nt = *th;
		else
			free(th->pts);
	}
	htab__free(t->by_tid);
	t->by_tid = keep;
}

static void read_threads(struct threads *t, const struct sched_source *src, uint64_t now, bool periodic)
{
	int pass;

	if (!src->sched)
		return;
	if (!t->start_ns)
		t->start_ns = now;
	if (periodic) {
		t->prev_ns = t->cur_ns;
		t->ctxt_prev = t->ctxt_cur;
		t->cur_ns = now;
		t->ctxt_cur = threads__host_switches();
	}
	pass = src->threads(src->src, tick_one, &(struct ticking){ t, now, ls_clock_ns(CLOCK_BOOTTIME), periodic });
	/* a thread not given is gone only when all were; a pass that failed took no one's life */
	sweep(t, now, periodic, pass == SCHED_ITER_ALL);
}

void threads__tick(struct threads *t, const struct sched_source *src, uint64_t now)
{
	read_threads(t, src, now, true);
}

void threads__refresh(struct threads *t, const struct sched_source *src, uint64_t now)
{
	read_threads(t, src, now, false);
}

uint64_t threads__dropped(const struct threads *t)
{
	return t->dropped;
}

uint64_t threads__folded_early(const struct threads *t)
{
	return t->folded_early;
}

uint64_t threads__exits(const struct threads *t)
{
	return t->exits;
}

int threads__baseline(const struct threads *t, uint32_t tid, uint64_t stop_boot_ns, uint64_t stop_events,
		      uint64_t *events, uint64_t *ns)
{
	const struct thread *s = htab__find(t->by_tid, &tid);
	int i, pick = -1;

	*events = *ns = 0;
	/* the newest point a baseline period before the stop, else the oldest before it */
	for (i = 0; s && i < REF_POINTS && s->ref_ns[i]; i++) {
		if (s->ref_ns[i] >= stop_boot_ns || stop_events < s->ref_events[i])
			continue;
		pick = i;
		if (stop_boot_ns - s->ref_ns[i] >= SCHED_BASE_PERIOD_NS)
			break;
	}
	if (pick < 0)
		return -ENOENT;
	*events = stop_events - s->ref_events[pick];
	*ns = stop_boot_ns - s->ref_ns[pick];
	return 0;
}

uint64_t threads__window_start(const struct threads *t, enum ls_window w, uint64_t now)
{
	if (w == LS_WIN_ALL || w >= LS_WIN_MAX || now - t->start_ns < window_ns[w])
		return t->start_ns;
	return now - window_ns[w];
}

/*
 * @th's counters at @start (*base): the newest point before it, else its first (seen
 * later); zero for a thread born inside the window, all it did is in it. A point is added
 * only when more than blocked time moved (add_point()), so up to the next point the
 * thread only slept: its blocked time at @start is the point's plus the time since, and
 * no more than the next point's.
 */
static void base_at(const struct thread *th, uint64_t start, struct counters *base)
{
	const struct point *p = NULL, *next = NULL;
	uint64_t blocked, cap;
	size_t i;

	memset(base, 0, sizeof(*base));
	if (th->st.start_ns && th->st.start_ns >= start)
		return;
	for (i = th->nr_pts; i-- > 0;) {
		if (th->pts[i].ns <= start) {
			p = &th->pts[i];
			break;
		}
		next = &th->pts[i];
	}
	if (!p) {
		if (th->nr_pts)
			*base = th->pts[0].c;
		return;
	}
	*base = p->c;
	cap = next ? next->c.v[TC_BLOCKED] : th->st.blocked_ns;
	blocked = p->c.v[TC_BLOCKED] + (start - p->ns);
	base->v[TC_BLOCKED] = blocked < cap ? blocked : cap;
}

int threads__each(const struct threads *t, enum ls_window w, uint64_t now, threads_fn fn, void *ctx)
{
	uint64_t start = threads__window_start(t, w, now);
	size_t iter = 0;
	const void *k;
	void *v;
	int err = 0;

	while (!err && !htab__next(t->by_tid, &iter, &k, &v)) {
		const struct thread *th = v;
		struct sched_thread st = th->st;
		struct counters c, base;

		if (w == THREADS_LIVE) {
			if (!th->exited_ns)
				err = fn(ctx, *(const uint32_t *)k, &st, 0);
			continue;
		}
		if (th->exited_ns && th->exited_ns < start)
			continue;	/* gone before the window */
		counters_of(&th->st, &c);
		base_at(th, start, &base);
		counters_sub(&c, &base);
		counters_to(&c, &st);
		err = fn(ctx, *(const uint32_t *)k, &st, th->exited_ns);
	}
	if (w != LS_WIN_ALL)
		return err;
	/* processes whose threads aged out: one row each, tid 0 */
	iter = 0;
	while (!err && !htab__next(t->exited, &iter, &k, &v)) {
		const struct proc_summary *ps = v;
		struct sched_thread st = { .tgid = *(const uint32_t *)k, .flags = SCHED_THREAD_EXITED };

		counters_to(&ps->c, &st);
		memcpy(st.comm, ps->comm, sizeof(st.comm));
		err = fn(ctx, 0, &st, ps->exited_ns);
	}
	return err;
}

uint64_t threads__switch_cost_ns(const struct threads *t)
{
	return t->switch_cost_ns;
}

/* 30 ms here: the daemon measures before it loads anything, and on request */
enum { SWITCH_ROUNDS = 1000, SWITCH_RUNS = 4 };

int threads__measure_switch_cost(struct threads *t)
{
	return ls_measure_switch_cost(SWITCH_ROUNDS, SWITCH_RUNS, &t->switch_cost_ns);
}

// SPDX-License-Identifier: GPL-2.0
/*
 * The thread store: a window's figures are the thread's counters less those at the
 * window's start, and a thread that only sleeps costs one point however long it sleeps.
 * The figures are made here the way the collector makes them from the kernel's counters
 * (blocked = life - on CPU - run queue), one tick a second, and given as it gives them:
 * every thread in every tenth pass, else only those that ran since they were last given.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "analyze/threads.h"
#include "analyze/threads_int.h"

#define SEC 1000000000ULL
#define MS 1000000ULL
#define T0 (1000 * SEC)		/* the daemon's first tick, CLOCK_MONOTONIC */
#define BORN (500 * SEC)	/* both threads started before the daemon */
#define BUSY_FROM 100		/* the busy thread runs in the ticks after 100..109 s */
#define BUSY_TICKS 10
#define RUN_PER_TICK (100 * MS)	/* on CPU, each busy second */
#define WAIT_PER_TICK (10 * MS)	/* in the run queue, each busy second */
enum { IDLE_TID = 11, BUSY_TID = 12 };

struct host {
	uint64_t now;
	struct sched_thread th[2];	/* the idle thread, the busy one */
	uint64_t given_oncpu[2];	/* on CPU when last given, plus one (0: never) */
	unsigned int passes;
	unsigned int given[2];		/* how often each was given */
	bool gone[2];			/* exited without a word: never given again */
};

/* What the collector reads at @now: the kernel's counters, blocked derived from them. */
static void host_at(struct host *h, uint64_t now)
{
	uint64_t s = (now - T0) / SEC, busy = s > BUSY_FROM ? s - BUSY_FROM : 0;
	int i;

	if (busy > BUSY_TICKS)
		busy = BUSY_TICKS;
	h->now = now;
	for (i = 0; i < 2; i++) {
		struct sched_thread *st = &h->th[i];

		memset(st, 0, sizeof(*st));
		st->tgid = 10;
		st->start_ns = BORN;
		st->oncpu_ns = SEC + (i ? busy * RUN_PER_TICK : 0);
		st->runq_ns = 100 * MS + (i ? busy * WAIT_PER_TICK : 0);
		st->voluntary = 5 + (i ? busy : 0);
		st->blocked_ns = now - BORN - st->oncpu_ns - st->runq_ns;
		strcpy(st->comm, i ? "busy" : "idle");
	}
}

static int host_threads(void *src, sched_thread_fn fn, void *ctx)
{
	struct host *h = src;
	bool all = h->passes++ % SCHED_ITER_FULL_EVERY == 0;
	int i, err;

	for (i = 0; i < 2; i++) {
		if (h->gone[i] || (!all && h->given_oncpu[i] == h->th[i].oncpu_ns + 1))
			continue;
		h->given_oncpu[i] = h->th[i].oncpu_ns + 1;
		h->given[i]++;
		if ((err = fn(ctx, i ? BUSY_TID : IDLE_TID, &h->th[i])))
			return err;
	}
	return all ? SCHED_ITER_ALL : SCHED_ITER_CHANGED;
}

struct got {
	struct sched_thread th[2];
};

static int collect(void *ctx, uint32_t tid, const struct sched_thread *st, uint64_t exited_ns)
{
	struct got *g = ctx;

	assert_int_equal(exited_ns, 0);
	g->th[tid == BUSY_TID] = *st;
	return 0;
}

static void window(struct threads *t, enum ls_window w, uint64_t now, struct got *g)
{
	memset(g, 0, sizeof(*g));
	assert_int_equal(threads__each(t, w, now, collect, g), 0);
}

static void test_sleeping_threads_keep_one_point(void **state)
{
	struct threads_opts opts = { THREADS_DEF_MAX_EXITED_PROCS, THREADS_DEF_MAX_EXITED_THREADS };
	struct host h = {};
	struct sched_source src = { .sched = true, .threads = host_threads, .src = &h };
	const uint64_t end = T0 + 120 * SEC;
	struct threads *t;
	struct got g;
	uint32_t tid;
	uint64_t now;

	(void)state;
	assert_int_equal(threads__new(&opts, &t), 0);
	for (now = T0; now <= end; now += SEC) {
		host_at(&h, now);
		threads__tick(t, &src, now);
	}
	/* a query between ticks reads up to its own time */
	host_at(&h, end + SEC / 2);
	threads__refresh(t, &src, end + SEC / 2);

	/* the idle thread only slept: its first point stands for all 120 s */
	tid = IDLE_TID;
	assert_int_equal(((struct thread *)htab__find(t->by_tid, &tid))->nr_pts, 1);
	/* given by the full passes only (122 passes, the refresh's included); the busy one by its busy ones too */
	assert_int_equal(h.given[0], 13);
	assert_int_equal(h.given[1], 13 + BUSY_TICKS - 1);

	/* 10 s: both slept through it, every nanosecond of it */
	window(t, LS_WIN_10S, end + SEC / 2, &g);
	assert_int_equal(g.th[0].blocked_ns, 10 * SEC);
	assert_int_equal(g.th[1].blocked_ns, 10 * SEC);
	assert_int_equal(g.th[1].oncpu_ns, 0);

	/* 1 min: the busy thread's 10 s of work are in it, the rest it slept */
	window(t, LS_WIN_1M, end + SEC / 2, &g);
	assert_int_equal(g.th[0].blocked_ns, 60 * SEC);
	assert_int_equal(g.th[0].voluntary, 0);
	assert_int_equal(g.th[1].oncpu_ns, BUSY_TICKS * RUN_PER_TICK);
	assert_int_equal(g.th[1].runq_ns, BUSY_TICKS * WAIT_PER_TICK);
	assert_int_equal(g.th[1].voluntary, BUSY_TICKS);
	assert_int_equal(g.th[1].blocked_ns, 60 * SEC - BUSY_TICKS * (RUN_PER_TICK + WAIT_PER_TICK));

	/* 5 min, 120.5 s of it since the first tick: the same, from the first tick on */
	window(t, LS_WIN_5M, end + SEC / 2, &g);
	assert_int_equal(g.th[0].blocked_ns, 120 * SEC + SEC / 2);
	assert_int_equal(g.th[1].blocked_ns, 120 * SEC + SEC / 2 - BUSY_TICKS * (RUN_PER_TICK + WAIT_PER_TICK));

	/* the live view: the latest figures, blocked time included */
	window(t, THREADS_LIVE, end + SEC / 2, &g);
	assert_int_equal(g.th[0].blocked_ns, h.th[0].blocked_ns);
	assert_int_equal(g.th[1].blocked_ns, h.th[1].blocked_ns);
	threads__free(t);
}

static int count_live(void *ctx, uint32_t tid, const struct sched_thread *st, uint64_t exited_ns)
{
	(void)tid;
	(void)st;
	*(int *)ctx += !exited_ns;
	return 0;
}

/* A thread gone without its exit record: partial passes cannot tell it from a sleeper. */
static void test_gone_without_a_word_is_known_at_the_next_full_pass(void **state)
{
	struct threads_opts opts = { THREADS_DEF_MAX_EXITED_PROCS, THREADS_DEF_MAX_EXITED_THREADS };
	struct host h = {};
	struct sched_source src = { .sched = true, .threads = host_threads, .src = &h };
	struct threads *t;
	uint64_t now;
	int live;

	(void)state;
	assert_int_equal(threads__new(&opts, &t), 0);
	for (now = T0; now < T0 + SCHED_ITER_FULL_EVERY * SEC; now += SEC) {
		host_at(&h, now);
		h.gone[1] = now > T0;		/* given by the first pass, a full one, then gone */
		threads__tick(t, &src, now);
		live = 0;
		assert_int_equal(threads__each(t, THREADS_LIVE, now, count_live, &live), 0);
		assert_int_equal(live, 2);	/* partial passes: it only slept, for all they know */
	}
	host_at(&h, now);
	threads__tick(t, &src, now);		/* the next full pass */
	live = 0;
	assert_int_equal(threads__each(t, THREADS_LIVE, now, count_live, &live), 0);
	assert_int_equal(live, 1);
	threads__free(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sleeping_threads_keep_one_point),
		cmocka_unit_test(test_gone_without_a_word_is_known_at_the_next_full_pass),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

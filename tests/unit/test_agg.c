// SPDX-License-Identifier: GPL-2.0
/* Aggregator, histograms, rolling windows, stack interning and the hash table: exact values. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/scratch.h"
#include "store/agg.h"
#include "store/stacks.h"

#define SEC 1000000000ULL
#define T0 (1000 * SEC)

static void test_hist_buckets(void **state)
{
	(void)state;
	assert_int_equal(ls_hist_bucket(0), 0);
	assert_int_equal(ls_hist_bucket(1), 0);
	assert_int_equal(ls_hist_bucket(2), 1);
	assert_int_equal(ls_hist_bucket(3), 1);
	assert_int_equal(ls_hist_bucket(1023), 9);
	assert_int_equal(ls_hist_bucket(1024), 10);
	assert_int_equal(ls_hist_bucket(UINT64_MAX), LS_HIST_BUCKETS - 1);
}

static void test_stat_add_and_merge(void **state)
{
	struct agg_stat a = {}, b = {};

	(void)state;
	agg_stat_add_wait(&a, 100);
	agg_stat_add_wait(&a, 3000);
	agg_stat_add_wait(&b, 50);
	agg_stat_merge(&a, &b);
	assert_int_equal(a.count, 3);
	assert_int_equal(a.total_ns, 3150);
	assert_int_equal(a.min_ns, 50);
	assert_int_equal(a.max_ns, 3000);
	assert_int_equal(a.hist[6], 1);		/* 100 in [64,128) */
	assert_int_equal(a.hist[11], 1);	/* 3000 in [2048,4096) */
	assert_int_equal(a.hist[5], 1);		/* 50 in [32,64) */
	/* merging an empty stat changes nothing, min included */
	memset(&b, 0, sizeof(b));
	agg_stat_merge(&a, &b);
	assert_int_equal(a.min_ns, 50);
	assert_int_equal(a.count, 3);
}

static void add(struct agg *a, uint32_t tid, uint64_t lock, uint64_t wait)
{
	struct agg_event ev = { .key = { .lock = lock, .pid = 1, .tid = tid, .flags = 4 },
				.wait_ns = wait, .comm = "worker" };

	assert_int_equal(agg__add(a, &ev), 0);
}

static uint64_t window_count(struct agg *a, enum ls_window w, uint64_t *start)
{
	struct agg_view *v = agg__view(a, w, start);
	const struct agg_key *k;
	struct agg_val val;
	uint64_t n = 0;
	size_t i;

	assert_non_null(v);
	for (i = 0; !agg_view__get(v, i, &k, &val); i++)
		n += val.st.count;
	agg_view__free(v);
	return n;
}

static void test_windows_roll(void **state)
{
	struct agg_opts o = { .windows = true, .max_keys = 1000, .start_ns = T0 };
	struct agg *a = agg__new(&o);
	uint64_t start, t;

	(void)state;
	assert_non_null(a);
	add(a, 10, 0xa, 100);			/* second 0 */
	for (t = 1; t <= 20; t++) {		/* one wait in each of seconds 1..20 */
		agg__rotate(a, T0 + t * SEC);
		add(a, 10, 0xa, 100);
	}
	/* at 20.5 s: 10 s window = sealed seconds 10..19 + live second 20 */
	assert_int_equal(window_count(a, LS_WIN_10S, &start), 11);
	assert_int_equal(start, T0 + 10 * SEC);
	/* 1 m has everything so far: live 1 s slot, live 6 s slot (18..20), sealed 0..17 */
	assert_int_equal(window_count(a, LS_WIN_1M, &start), 21);
	assert_int_equal(start, T0);
	assert_int_equal(window_count(a, LS_WIN_ALL, &start), 21);
	/* 100 s later, nothing new: 10 s and 1 m windows are empty, all keeps every wait */
	agg__rotate(a, T0 + 120 * SEC);
	assert_int_equal(window_count(a, LS_WIN_10S, &start), 0);
	assert_int_equal(start, T0 + 110 * SEC);
	assert_int_equal(window_count(a, LS_WIN_1M, &start), 0);
	assert_int_equal(start, T0 + 60 * SEC);
	assert_int_equal(window_count(a, LS_WIN_5M, &start), 21);
	assert_int_equal(window_count(a, LS_WIN_ALL, &start), 21);
	/* 6 minutes on, the 5 m window has let go too */
	agg__rotate(a, T0 + 420 * SEC);
	assert_int_equal(window_count(a, LS_WIN_5M, &start), 0);
	agg__free(a);
}

/* A window view's cells are kept for the next view, and given back once unused for a while. */
static void test_view_cells_given_back_when_idle(void **state)
{
	struct agg_opts o = { .windows = true, .max_keys = 1000, .start_ns = ls_now_ns(), .view_cache_idle_ns = SEC };
	struct agg *a = agg__new(&o);
	uint64_t start;

	(void)state;
	assert_non_null(a);
	add(a, 10, 0xa, 100);
	assert_int_equal(agg__view_cache_bytes(a), 0);
	assert_int_equal(window_count(a, LS_WIN_1M, &start), 1);
	assert_true(agg__view_cache_bytes(a) > 0);
	agg__rotate(a, ls_now_ns());		/* used just now: kept */
	assert_true(agg__view_cache_bytes(a) > 0);
	agg__rotate(a, ls_now_ns() + SEC);	/* unused for a second: given back */
	assert_int_equal(agg__view_cache_bytes(a), 0);
	/* the next view makes them anew, and counts the same */
	assert_int_equal(window_count(a, LS_WIN_1M, &start), 1);
	assert_true(agg__view_cache_bytes(a) > 0);
	agg__free(a);
}

/* A query's scratch: lent once at a time, reused cleared, freed only once idle. */
static void test_scratch_lends_reuses_and_idles(void **state)
{
	struct scratch *s = scratch__new(SEC);
	unsigned char *a, *b, *c;

	(void)state;
	assert_non_null(s);
	a = scratch__get(s, 0, 4096, SCRATCH_ZEROED);
	assert_non_null(a);
	memset(a, 0xab, 4096);
	/* lent: a second user gets a block of its own, freed when it gives it back */
	b = scratch__get(s, 0, 4096, SCRATCH_ZEROED);
	assert_non_null(b);
	assert_ptr_not_equal(a, b);
	assert_int_equal(b[4095], 0);
	scratch__put(s, 0, b);
	scratch__put(s, 0, a);
	assert_int_equal(scratch__bytes(s), 4096 + 4096 / 16);
	/* given back: the same block again, cleared when asked, no larger than it needs */
	c = scratch__get(s, 0, 2048, SCRATCH_ZEROED);
	assert_ptr_equal(c, a);
	assert_int_equal(c[0], 0);
	assert_int_equal(c[2047], 0);
	scratch__idle(s, ls_now_ns() + 2 * SEC);	/* lent: kept, however idle */
	assert_int_equal(scratch__bytes(s), 4096 + 4096 / 16);
	scratch__put(s, 0, c);
	scratch__idle(s, ls_now_ns());			/* used just now: kept */
	assert_int_equal(scratch__bytes(s), 4096 + 4096 / 16);
	scratch__idle(s, ls_now_ns() + SEC);		/* idle a second: freed */
	assert_int_equal(scratch__bytes(s), 0);
	/* NULL: plain allocations */
	a = scratch__get(NULL, 0, 16, SCRATCH_ZEROED);
	assert_non_null(a);
	scratch__put(NULL, 0, a);
	scratch__free(s);
}

/* @v's histogram as agg_hist_add() gives it */
static void hist_of(const struct agg_val *v, double *h)
{
	memset(h, 0, LS_HIST_BUCKETS * sizeof(*h));
	agg_hist_add(h, v, 1.0);
}

static const struct agg_val *only_key(struct agg_view *v, struct agg_val *val)
{
	const struct agg_key *k;

	assert_int_equal(agg_view__count(v), 1);
	assert_int_equal(agg_view__get(v, 0, &k, val), 0);
	assert_int_equal(agg_view__get(v, 1, &k, val), -2);	/* -ENOENT */
	return val;
}

/*
 * A key with one wait keeps no histogram (its bucket is its total's); a second wait, in
 * the same slot or merged from another, makes one with both.
 */
static void test_histograms_one_wait_and_more(void **state)
{
	struct agg_opts o = { .windows = true, .max_keys = 10, .start_ns = T0 };
	struct agg *a = agg__new(&o);
	struct agg_stat st = {};
	struct agg_event ev = { .key = { .lock = 0xb, .pid = 1, .tid = 2 }, .comm = "one" };
	struct agg_view *v;
	struct agg_val val;
	uint64_t start;
	double h[LS_HIST_BUCKETS];

	(void)state;
	ev.wait_ns = 100;			/* second 0: one wait, bucket 6 */
	agg__add(a, &ev);
	v = agg__view(a, LS_WIN_ALL, &start);
	only_key(v, &val);
	assert_null(val.hist);
	assert_string_equal(val.comm, "one");
	hist_of(&val, h);
	assert_true(h[6] == 1.0);
	agg_view__free(v);
	agg__rotate(a, T0 + SEC);
	ev.wait_ns = 3000;			/* second 1: another, bucket 11 */
	agg__add(a, &ev);
	agg__rotate(a, T0 + 2 * SEC);
	/* a whole kernel table entry: 2 waits of 50 (bucket 5) */
	st.count = 2;
	st.total_ns = 100;
	st.max_ns = st.min_ns = 50;
	st.hist[5] = 2;
	ev.stat = &st;
	agg__add(a, &ev);
	v = agg__view(a, LS_WIN_10S, &start);
	only_key(v, &val);
	assert_non_null(val.hist);
	assert_int_equal(val.st.count, 4);
	assert_int_equal(val.st.total_ns, 3200);
	assert_int_equal(val.st.min_ns, 50);
	assert_int_equal(val.st.max_ns, 3000);
	hist_of(&val, h);
	assert_true(h[5] == 2.0 && h[6] == 1.0 && h[11] == 1.0);
	agg_view__free(v);
	/* 40 s on, the 5 m window has them in a 30 s slot made of 6 s slots made of 1 s slots */
	agg__rotate(a, T0 + 40 * SEC);
	v = agg__view(a, LS_WIN_5M, &start);
	only_key(v, &val);
	assert_int_equal(start, T0);
	hist_of(&val, h);
	assert_true(h[5] == 2.0 && h[6] == 1.0 && h[11] == 1.0);
	agg_view__free(v);
	v = agg__view(a, LS_WIN_10S, &start);
	assert_int_equal(agg_view__count(v), 0);
	agg_view__free(v);
	agg__free(a);
}

/* Thread @tid's key in view @v (its only lock): its figures in *val. */
static void key_of(struct agg_view *v, uint32_t tid, struct agg_val *val)
{
	const struct agg_key *k;
	size_t i;

	for (i = 0; !agg_view__get(v, i, &k, val); i++)
		if (k->tid == tid)
			return;
	fail_msg("thread %u is not in the view", tid);
}

/*
 * A window view reads a key that waited in one slot in that slot (its histogram from the
 * slot's pool), and merges one that waited in two; a second view of the same window,
 * made from the references and cells the first gave back, reads the same.
 */
static void test_view_reads_one_slot_in_place_and_merges_more(void **state)
{
	struct agg_opts o = { .windows = true, .max_keys = 100, .start_ns = T0 };
	struct agg *a = agg__new(&o);
	struct agg_view *v;
	struct agg_val val;
	uint64_t start;
	double h[LS_HIST_BUCKETS];
	int round;

	(void)state;
	assert_non_null(a);
	add(a, 1, 0xa, 100);		/* second 0: thread 1 twice, thread 2 once */
	add(a, 1, 0xa, 3000);
	add(a, 2, 0xa, 50);
	agg__rotate(a, T0 + SEC);
	add(a, 2, 0xa, 70);		/* second 1: thread 2 again, thread 3 once */
	add(a, 3, 0xa, 5000);
	for (round = 0; round < 2; round++) {
		v = agg__view(a, LS_WIN_10S, &start);
		assert_non_null(v);
		assert_int_equal(agg_view__count(v), 3);
		key_of(v, 1, &val);		/* one slot, two waits: its histogram there */
		assert_int_equal(val.st.count, 2);
		assert_int_equal(val.st.total_ns, 3100);
		assert_int_equal(val.st.min_ns, 100);
		assert_int_equal(val.st.max_ns, 3000);
		assert_non_null(val.hist);
		hist_of(&val, h);
		assert_true(h[6] == 1.0 && h[11] == 1.0);
		key_of(v, 2, &val);		/* two slots: merged */
		assert_int_equal(val.st.count, 2);
		assert_int_equal(val.st.total_ns, 120);
		assert_int_equal(val.st.min_ns, 50);
		assert_int_equal(val.st.max_ns, 70);
		hist_of(&val, h);
		assert_true(h[5] == 1.0 && h[6] == 1.0);
		key_of(v, 3, &val);		/* one slot, one wait: no histogram needed */
		assert_int_equal(val.st.count, 1);
		assert_int_equal(val.st.total_ns, 5000);
		assert_null(val.hist);
		agg_view__free(v);
	}
	agg__free(a);
}

static void test_keys_full_are_counted(void **state)
{
	struct agg_opts o = { .windows = false, .max_keys = 2, .start_ns = T0 };
	struct agg *a = agg__new(&o);
	uint64_t start;

	(void)state;
	add(a, 1, 0xa, 10);
	add(a, 2, 0xa, 10);
	add(a, 3, 0xa, 10);	/* a third key does not fit */
	add(a, 1, 0xa, 10);	/* existing keys still count */
	assert_int_equal(agg__dropped(a), 1);
	assert_int_equal(window_count(a, LS_WIN_ALL, &start), 3);
	agg__free(a);
}

/* A wait table's entry that finds no room: each of its waits is counted as lost. */
static void test_a_lost_table_entry_counts_its_waits(void **state)
{
	struct agg_opts o = { .windows = false, .max_keys = 1, .start_ns = T0 };
	struct agg *a = agg__new(&o);
	struct agg_stat st = { .count = 7, .total_ns = 700, .max_ns = 100, .min_ns = 100 };
	struct agg_event ev = { .key = { .lock = 0xb, .pid = 1, .tid = 2, .flags = 4 }, .comm = "worker",
				.stat = &st };
	uint64_t start;

	(void)state;
	add(a, 1, 0xa, 10);
	assert_int_equal(agg__add(a, &ev), 0);	/* a second key: no room for its 7 waits */
	assert_int_equal(agg__dropped(a), 7);
	assert_int_equal(window_count(a, LS_WIN_ALL, &start), 1);
	agg__free(a);
}

/* The all window's figures for (tid, lock), -1 when it has no such key. */
static int64_t all_count(struct agg *a, uint32_t tid, uint64_t lock, uint64_t *total, uint64_t *max)
{
	uint64_t start;
	struct agg_view *v = agg__view(a, LS_WIN_ALL, &start);
	const struct agg_key *k;
	struct agg_val val;
	int64_t n = -1;
	size_t i;

	assert_non_null(v);
	for (i = 0; !agg_view__get(v, i, &k, &val); i++) {
		if (k->tid == tid && k->lock == lock) {
			n = val.st.count;
			*total = val.st.total_ns;
			*max = val.st.max_ns;
		}
	}
	agg_view__free(v);
	return n;
}

static void test_full_table_folds_idle_threads(void **state)
{
	struct agg_opts o = { .windows = true, .max_keys = 8, .start_ns = T0 };
	struct agg *a = agg__new(&o);
	uint64_t start, total = 0, max = 0, t;
	uint32_t tid;

	(void)state;
	/* eight threads wait, on two locks, and exit */
	for (tid = 1; tid <= 8; tid++)
		add(a, tid, 0xa + tid % 2, tid * 100);
	/* the table is full, and every key is in the 10 s window: nothing can fold */
	agg__rotate(a, T0 + 2 * SEC);
	add(a, 100, 0xa, 5);
	assert_int_equal(agg__dropped(a), 1);
	assert_int_equal(agg__folded(a), 0);
	/* past the 5 m window (and one slot of it more), the old threads are in no window */
	t = T0 + 400 * SEC;
	agg__rotate(a, t);
	assert_int_equal(window_count(a, LS_WIN_5M, &start), 0);
	add(a, 101, 0xa, 7);	/* fits: the eight fold into one key per lock */
	assert_int_equal(agg__dropped(a), 1);
	assert_int_equal(agg__folded(a), 8);
	assert_int_equal(agg__keys(a), 3);
	/* exact per lock: 2+4+6+8 and 1+3+5+7 hundred ns, the max kept */
	assert_int_equal(all_count(a, 0, 0xa, &total, &max), 4);
	assert_int_equal(total, 2000);
	assert_int_equal(max, 800);
	assert_int_equal(all_count(a, 0, 0xb, &total, &max), 4);
	assert_int_equal(total, 1600);
	assert_int_equal(max, 700);
	assert_int_equal(all_count(a, 3, 0xb, &total, &max), -1);
	/* the windows keep the thread that waits now, under its own key */
	assert_int_equal(all_count(a, 101, 0xa, &total, &max), 1);
	assert_int_equal(window_count(a, LS_WIN_10S, &start), 1);
	add(a, 101, 0xa, 9);
	assert_int_equal(window_count(a, LS_WIN_10S, &start), 2);
	assert_int_equal(window_count(a, LS_WIN_ALL, &start), 8 + 2);
	/* a thread that waits again after being folded gets a key of its own */
	add(a, 3, 0xb, 11);
	assert_int_equal(all_count(a, 3, 0xb, &total, &max), 1);
	assert_int_equal(all_count(a, 0, 0xb, &total, &max), 4);
	agg__free(a);
}

static void test_window_names(void **state)
{
	enum ls_window w;

	(void)state;
	assert_int_equal(ls_window_parse("1m", &w), 0);
	assert_int_equal(w, LS_WIN_1M);
	assert_int_equal(ls_window_parse("1h", &w), -22);
	assert_string_equal(ls_window_name(LS_WIN_ALL), "all");
}

static void test_stacks_intern(void **state)
{
	struct stacks *s = stacks__new(2);
	uint64_t a[] = { 1, 2, 3 }, b[] = { 1, 2 }, c[] = { 9 };
	uint32_t ia, ib, ia2, ic, nr;
	uint64_t ips[8];

	(void)state;
	assert_int_equal(stacks__intern(s, a, 3, 0, &ia), 0);
	assert_int_equal(stacks__intern(s, b, 2, 0, &ib), 0);
	assert_int_equal(stacks__intern(s, a, 3, 0, &ia2), 0);
	assert_int_equal(ia, ia2);
	assert_int_not_equal(ia, ib);
	assert_true(ia >= LS_STACK_FIRST && ib >= LS_STACK_FIRST);
	nr = stacks__get(s, ib, ips, 8);
	assert_int_equal(nr, 2);
	assert_memory_equal(ips, b, sizeof(b));
	nr = stacks__get(s, ia, ips, 8);
	assert_int_equal(nr, 3);
	assert_memory_equal(ips, a, sizeof(a));
	assert_int_equal(stacks__get(s, ia, ips, 2), 2);	/* cut at max, innermost first */
	assert_memory_equal(ips, a, 2 * sizeof(*a));
	assert_int_equal(stacks__get(s, LS_STACK_MISSING, ips, 8), 0);
	assert_int_equal(stacks__intern(s, c, 1, 0, &ic), -28);	/* full: -ENOSPC */
	assert_int_equal(stacks__dropped(s), 1);
	assert_int_equal(stacks__count(s), 2);
	stacks__free(s);
}

static void test_htab_grows_and_iterates(void **state)
{
	struct htab *h = htab__new(sizeof(uint64_t), sizeof(uint64_t), 100000);
	uint64_t k, sum = 0, n = 0;
	const void *kp;
	size_t iter = 0;
	void *vp;

	(void)state;
	for (k = 0; k < 5000; k++) {
		uint64_t *v = htab__upsert(h, &k, NULL, NULL);

		assert_non_null(v);
		*v = k * 2;
	}
	assert_int_equal(htab__count(h), 5000);
	k = 4321;
	assert_int_equal(*(uint64_t *)htab__find(h, &k), 8642);
	k = 5000;
	assert_null(htab__find(h, &k));
	while (!htab__next(h, &iter, &kp, &vp)) {
		sum += *(uint64_t *)vp;
		n++;
	}
	assert_int_equal(n, 5000);
	assert_int_equal(sum, 4999ULL * 5000);
	htab__free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hist_buckets),
		cmocka_unit_test(test_stat_add_and_merge),
		cmocka_unit_test(test_windows_roll),
		cmocka_unit_test(test_view_cells_given_back_when_idle),
		cmocka_unit_test(test_view_reads_one_slot_in_place_and_merges_more),
		cmocka_unit_test(test_scratch_lends_reuses_and_idles),
		cmocka_unit_test(test_histograms_one_wait_and_more),
		cmocka_unit_test(test_keys_full_are_counted),
		cmocka_unit_test(test_a_lost_table_entry_counts_its_waits),
		cmocka_unit_test(test_full_table_folds_idle_threads),
		cmocka_unit_test(test_window_names),
		cmocka_unit_test(test_stacks_intern),
		cmocka_unit_test(test_htab_grows_and_iterates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

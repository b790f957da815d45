// SPDX-License-Identifier: GPL-2.0
/* Aggregator, histograms, rolling windows, stack interning and the hash table: exact values. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "agg.h"
#include "htab.h"
#include "stacks.h"

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

static uint64_t window_count(struct agg *a, enum ls_window w, uint64_t now, uint64_t *start)
{
	struct htab *t = agg__window(a, w, now, start);
	const void *k;
	size_t iter = 0;
	uint64_t n = 0;
	void *v;

	assert_non_null(t);
	while (!htab__next(t, &iter, &k, &v))
		n += ((struct agg_val *)v)->st.count;
	agg__window_free(a, t);
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
	assert_int_equal(window_count(a, LS_WIN_10S, T0 + 20 * SEC + SEC / 2, &start), 11);
	assert_int_equal(start, T0 + 10 * SEC);
	/* 1 m has everything so far: live 1 s slot, live 6 s slot (18..20), sealed 0..17 */
	assert_int_equal(window_count(a, LS_WIN_1M, T0 + 20 * SEC, &start), 21);
	assert_int_equal(start, T0);
	assert_int_equal(window_count(a, LS_WIN_ALL, T0 + 20 * SEC, &start), 21);
	/* 100 s later, nothing new: 10 s and 1 m windows are empty, all keeps every wait */
	agg__rotate(a, T0 + 120 * SEC);
	assert_int_equal(window_count(a, LS_WIN_10S, T0 + 120 * SEC, &start), 0);
	assert_int_equal(start, T0 + 110 * SEC);
	assert_int_equal(window_count(a, LS_WIN_1M, T0 + 120 * SEC, &start), 0);
	assert_int_equal(start, T0 + 60 * SEC);
	assert_int_equal(window_count(a, LS_WIN_5M, T0 + 120 * SEC, &start), 21);
	assert_int_equal(window_count(a, LS_WIN_ALL, T0 + 120 * SEC, &start), 21);
	/* 6 minutes on, the 5 m window has let go too */
	agg__rotate(a, T0 + 420 * SEC);
	assert_int_equal(window_count(a, LS_WIN_5M, T0 + 420 * SEC, &start), 0);
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
	assert_int_equal(window_count(a, LS_WIN_ALL, T0, &start), 3);
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
	const uint64_t *ips;

	(void)state;
	assert_int_equal(stacks__intern(s, a, 3, 0, &ia), 0);
	assert_int_equal(stacks__intern(s, b, 2, 0, &ib), 0);
	assert_int_equal(stacks__intern(s, a, 3, 0, &ia2), 0);
	assert_int_equal(ia, ia2);
	assert_int_not_equal(ia, ib);
	assert_true(ia >= LS_STACK_FIRST && ib >= LS_STACK_FIRST);
	ips = stacks__get(s, ib, &nr);
	assert_int_equal(nr, 2);
	assert_memory_equal(ips, b, sizeof(b));
	assert_null(stacks__get(s, LS_STACK_MISSING, &nr));
	assert_int_equal(nr, 0);
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
		cmocka_unit_test(test_keys_full_are_counted),
		cmocka_unit_test(test_window_names),
		cmocka_unit_test(test_stacks_intern),
		cmocka_unit_test(test_htab_grows_and_iterates),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

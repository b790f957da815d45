// SPDX-License-Identifier: GPL-2.0
/*
 * The lock metrics' bound: at most metrics-max-series series with labels of their own,
 * the first seen by wait time, kept for good; the rest summed into "(other)" per kind and
 * type, and counted; every wait still counted once.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "analyze/query.h"
#include "api/prom.h"
#include "store/agg.h"
#include "klock.h"

#define LIMIT 4

/* @n waits of 1 us by a thread named @comm */
static void put(struct agg *a, const char *comm, uint32_t tid, int n)
{
	struct agg_key k = { .lock = 0xffff888000001000, .pid = 100, .tid = tid, .flags = KLOCK_F_SPIN };
	struct agg_event ev = { .key = k, .comm = comm, .wait_ns = 1000 };
	int i;

	for (i = 0; i < n; i++)
		assert_int_equal(agg__add(a, &ev), 0);
}

/* lockscope_contentions_total for @comm, -1 when it has no series */
static long long count_of(const char *text, const char *comm)
{
	char want[128];
	const char *p;

	snprintf(want, sizeof(want), "lockscope_contentions_total{kind=\"kernel\",type=\"spinlock\",comm=\"%s\",", comm);
	p = strstr(text, want);
	return p ? atoll(strchr(p, '}') + 2) : -1;
}

static char *write(struct agg *a, struct prom_series *ps)
{
	struct query q;
	uint64_t start;
	struct agg_view *v = agg__view(a, LS_WIN_ALL, &start);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	query__init(&q);
	q.type_mask = 0;
	assert_non_null(v);
	assert_int_equal(prom_write_locks(f, v, &q, ps), 0);
	fclose(f);
	agg_view__free(v);
	return text;
}

static void test_series_past_the_limit_are_folded_for_good(void **state)
{
	struct agg_opts ao = { .max_keys = 1024 };
	struct prom_series *ps;
	struct agg *a = agg__new(&ao);
	char comm[16], *text;
	int i;

	(void)state;
	assert_non_null(a);
	assert_int_equal(prom_series__new(LIMIT, &ps), 0);
	/* six threads: t0 waits 10 times, t1 20, ... t5 60 */
	for (i = 0; i < 6; i++) {
		snprintf(comm, sizeof(comm), "t%d", i);
		put(a, comm, 200 + i, 10 * (i + 1));
	}
	text = write(a, ps);
	/* the four that waited most have their own series; t0 and t1 are one "(other)" */
	for (i = 2; i < 6; i++) {
		snprintf(comm, sizeof(comm), "t%d", i);
		assert_int_equal(count_of(text, comm), 10 * (i + 1));
	}
	assert_int_equal(count_of(text, "t0"), -1);
	assert_int_equal(count_of(text, "t1"), -1);
	assert_int_equal(count_of(text, "(other)"), 10 + 20);
	assert_non_null(strstr(text, "comm=\"(other)\",unit=\"(other)\"} 30"));
	assert_int_equal(prom_series__count(ps), LIMIT);
	assert_int_equal(prom_series__folded(ps), 2);
	free(text);

	/* t0 now waits more than anyone: it stays in "(other)", whose counter only grows */
	put(a, "t0", 200, 1000);
	text = write(a, ps);
	assert_int_equal(count_of(text, "t0"), -1);
	assert_int_equal(count_of(text, "(other)"), 1010 + 20);
	assert_int_equal(count_of(text, "t5"), 60);
	free(text);
	prom_series__free(ps);

	/* with room for all, nothing is folded and no "(other)" is written */
	assert_int_equal(prom_series__new(100, &ps), 0);
	text = write(a, ps);
	assert_int_equal(count_of(text, "(other)"), -1);
	assert_int_equal(count_of(text, "t0"), 1010);
	assert_int_equal(prom_series__folded(ps), 0);
	free(text);
	prom_series__free(ps);
	agg__free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_series_past_the_limit_are_folded_for_good),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: GPL-2.0
/*
 * The collector's rules that need no kernel: which options can be loaded (and the one-line
 * reason when not), how the stack-dump budget is sized from the ring, and the names status
 * gives every counter.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "collect/collector.h"
#include "lockscope.h"
#include "ustack.h"

#define PAGE 4096

/* lockscoped's defaults, as far as the checks read them */
static struct collector_opts defaults(void)
{
	return (struct collector_opts){ .ringbuf_bytes = 256 * 1024, .max_stack = 32, .max_locks = 4096,
					.ustack_bytes = LS_USTACK_DEF_BYTES, .spin_stack_bytes = 8192 };
}

static void test_defaults_load(void **state)
{
	struct collector_opts o = defaults();
	char err[256] = "";

	(void)state;
	assert_int_equal(collector_opts__check(&o, PAGE, err, sizeof(err)), 0);
	assert_string_equal(err, "");
	/* dumps off: any spin window goes, as frame pointers are used instead */
	o.ustack_bytes = 0;
	o.spin_stack_bytes = 1;
	assert_int_equal(collector_opts__check(&o, PAGE, err, sizeof(err)), 0);
}

static void test_each_bad_setting_is_named(void **state)
{
	struct collector_opts o;
	char err[256];

	(void)state;
	o = defaults();
	o.ringbuf_bytes = 3 * PAGE;
	assert_int_equal(collector_opts__check(&o, PAGE, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "ringbuf-kb=12: a ring is a power of two"));
	o = defaults();
	o.max_stack = LS_MAX_STACK_DEPTH + 1;
	assert_int_equal(collector_opts__check(&o, PAGE, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "max-stack="));
	o = defaults();
	o.max_locks = 1000;
	assert_int_equal(collector_opts__check(&o, PAGE, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "max-locks=1000"));
	o = defaults();
	o.ustack_bytes = 1000;		/* not a multiple of 8, and under the minimum */
	assert_int_equal(collector_opts__check(&o, PAGE, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "user-stack-bytes=1000"));
}

static void test_a_ring_too_small_for_the_dumps_says_how_big(void **state)
{
	struct collector_opts o = defaults();
	char err[256];

	(void)state;
	/* 16 KiB holds 2 dumps of 8 KiB: a ring must hold 8 of the widest window */
	o.ringbuf_bytes = 16 * 1024;
	o.ustack_bytes = 4096;
	o.spin_stack_bytes = 8192;
	assert_int_equal(collector_opts__check(&o, PAGE, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "ringbuf-kb=16 holds too few stack dumps of user-stack-bytes=4096 and "
				 "spin-stack-bytes=8192: raise ringbuf-kb to 64 or lower the dump windows");
	o.ringbuf_bytes = 64 * 1024;
	assert_int_equal(collector_opts__check(&o, PAGE, err, sizeof(err)), 0);
}

static void test_dump_burst_is_a_quarter_ring(void **state)
{
	struct collector_opts o = defaults();
	uint64_t per_dump = sizeof(struct ls_ustack_rec) + 4096;

	(void)state;
	/* at 1 ms of credit per dump, the burst is as many dumps as a quarter of the ring holds */
	assert_int_equal(collector_dump_burst_ns(&o, 4096, 1000000), (o.ringbuf_bytes / 4 / per_dump) * 1000000);
	/* a ring that holds none still allows one */
	o.ringbuf_bytes = PAGE;
	assert_int_equal(collector_dump_burst_ns(&o, 32768, 1000000), 1000000);
}

static void test_every_counter_has_one_name(void **state)
{
	int i, j;

	(void)state;
	for (i = 0; i < LS_CNT_MAX; i++) {
		const char *n = ls_counter_name(i);

		assert_string_not_equal(n, "unknown");
		for (j = 0; j < i; j++)
			assert_string_not_equal(n, ls_counter_name(j));
	}
	assert_string_equal(ls_counter_name(LS_DROP_RINGBUF), "ringbuf_full");
	assert_string_equal(ls_counter_name(LS_CNT_MAX), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_load),
		cmocka_unit_test(test_each_bad_setting_is_named),
		cmocka_unit_test(test_a_ring_too_small_for_the_dumps_says_how_big),
		cmocka_unit_test(test_dump_burst_is_a_quarter_ring),
		cmocka_unit_test(test_every_counter_has_one_name),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

// SPDX-License-Identifier: GPL-2.0
/* The CLI's tables and units, and the daemon's settings table and config file. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "serve/config.h"
#include "render.h"

static void test_units_like_perf(void **state)
{
	static const struct { double ns; const char *text; } cases[] = {
		{ 0, "0 ns" }, { 999, "999 ns" }, { 1000, "1.00 us" }, { 9260, "9.26 us" },
		{ 431460000, "431.46 ms" }, { 2.5e9, "2.50 s" },
	};
	char buf[32];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ls_fmt_ns(buf, sizeof(buf), cases[i].ns);
		assert_string_equal(buf, cases[i].text);
	}
}

static char *render(const char *json, const struct render_opts *o)
{
	cJSON *resp = cJSON_Parse(json);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(resp);
	render_rows(f, resp, o);
	fclose(f);
	cJSON_Delete(resp);
	return buf;
}

static const char response[] =
	"{\"schema_version\":1,\"cmd\":\"top\",\"window\":{\"name\":\"10s\",\"start_ns\":0,\"end_ns\":10000000000},"
	"\"rows\":[{\"type\":\"rwsem:R\",\"caller\":\"do_syscall_64+0x71\",\"pid\":7,\"tid\":8,\"comm\":\"srv\","
	"\"lock\":{\"addr\":\"0xffff888100\",\"name\":\"mmap_lock\"},"
	"\"contended\":2817,\"total_wait_ns\":508370000,\"max_wait_ns\":8030000,\"avg_wait_ns\":180470,"
	"\"min_wait_ns\":1000,\"estimated\":false,"
	"\"stack\":[{\"addr\":\"0xffffffff81000010\",\"sym\":\"down_read\",\"offset\":16}],"
	"\"owner\":{\"pid\":7,\"tid\":9,\"comm\":\"srv\",\"stack\":null}}],"
	"\"dropped\":{\"ringbuf_full\":0,\"stack_collision\":3}}";

static void test_table_default(void **state)
{
	struct render_opts o = {};
	char *out;

	(void)state;
	out = render(response, &o);
	assert_string_equal(out,
		"  contended   total wait     max wait     avg wait         type   caller\n"
		"\n"
		"       2817    508.37 ms      8.03 ms    180.47 us      rwsem:R   do_syscall_64+0x71\n"
		"\n"
		"=== window 10s: 10.00 s\n"
		"\n"
		"=== dropped: stack_collision=3\n");
	free(out);
}

static void test_table_threads_locks_owners_stacks(void **state)
{
	struct render_opts o = { .threads = true, .owners = true, .stacks = true };
	char *out;

	(void)state;
	out = render(response, &o);
	assert_non_null(strstr(out, "      pid      tid  comm             "));
	assert_non_null(strstr(out, "rwsem:R        7        8  srv                srv/9                  -                      -\n"));
	assert_non_null(strstr(out, "\t\t\t0xffffffff81000010 down_read+0x10\n"));
	free(out);
	memset(&o, 0, sizeof(o));
	o.locks = true;
	out = render(response, &o);
	assert_non_null(strstr(out, "rwsem:R       0xffff888100  mmap_lock\n"));
	free(out);
}

/* A user lock row with -o: its holders' preemptions in the last column. */
static void test_holder_preempted_column(void **state)
{
	static const char user_row[] =
		"{\"rows\":[{\"type\":\"futex:mutex\",\"caller\":\"take\",\"contended\":5,"
		"\"total_wait_ns\":5000,\"max_wait_ns\":1000,\"avg_wait_ns\":1000,"
		"\"owner\":null,\"releaser\":null,"
		"\"holder_preempted\":{\"count\":12,\"total_ns\":3400000}}],\"window\":{}}";
	struct render_opts o = { .owners = true };
	char *out;

	(void)state;
	out = render(user_row, &o);
	assert_non_null(strstr(out, "holder preempted\n"));
	assert_non_null(strstr(out, "take   -                      -                      12x 3.40 ms\n"));
	free(out);
}

static void test_spin_findings(void **state)
{
	static const char spin[] =
		"{\"findings\":["
		"{\"kind\":\"yield_spin\",\"pid\":7,\"tid\":7,\"comm\":\"uv-loop\",\"rate_per_s\":250.4,"
		"\"cpu_ns\":54000000,\"stack\":[{\"addr\":\"0xee017\",\"sym\":\"sched_yield\",\"offset\":7,"
		"\"module\":\"libc.so.6\"}],\"peer\":{\"tid\":9,\"comm\":\"uv-send-0\",\"preempted\":true},"
		"\"evidence\":{\"storm_yields\":701,\"storm_s\":2.8,\"active\":true},\"hint\":\"upgrade\"},"
		"{\"kind\":\"pause_spin\",\"pid\":7,\"tid\":8,\"comm\":\"spinner\",\"share\":0.553,"
		"\"cpu_ns\":1070000000,\"stack\":null,\"peer\":null,"
		"\"evidence\":{\"samples\":385,\"spin_samples\":213},\"hint\":\"block\"},"
		"{\"kind\":\"burst\",\"pid\":7,\"tid\":10,\"comm\":\"tick\",\"rate_per_s\":21000,"
		"\"cpu_ns\":null,\"stack\":null,\"peer\":null,\"evidence\":{\"stop_ns\":2000000000,"
		"\"events_first_100ms\":2100,\"baseline_per_100ms\":100,\"ratio\":21},\"hint\":\"Skip\"}]}";
	cJSON *resp = cJSON_Parse(spin);
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	(void)state;
	render_spin(f, resp);
	fclose(f);
	cJSON_Delete(resp);
	assert_non_null(strstr(buf, "yield_spin               7        7  uv-loop               250.4/s    54.00 ms   uv-send-0/9 (preempted)\n"
				    "\t701 yields in 2.80 s, still going\n\tstack:\n\t  0xee017 sched_yield+0x7 (libc.so.6)\n"
				    "\thint: upgrade\n"));
	assert_non_null(strstr(buf, "pause_spin               7        8  spinner                 55.3%      1.07 s   -\n"
				    "\t213 of 385 samples in a spin loop\n\thint: block\n"));
	assert_non_null(strstr(buf, "burst                    7       10  tick                21000.0/s           -   -\n"
				    "\tstopped 2.00 s; 2100 events in the first 100 ms after, 100.0 per 100 ms before (21x)\n"));
	free(buf);
}

static void test_empty_table_says_so(void **state)
{
	struct render_opts o = {};
	char *out;

	(void)state;
	out = render("{\"rows\":[],\"window\":{\"name\":\"all\",\"start_ns\":0,\"end_ns\":5},\"dropped\":{}}", &o);
	assert_non_null(strstr(out, " (no contention in this window)\n"));
	assert_null(strstr(out, "dropped"));
	free(out);
}

static void test_settings_apply(void **state)
{
	struct ls_config c;
	char err[256];

	(void)state;
	ls_config__init(&c);
	assert_int_equal(ls_setting_apply(&c, "stack-rate", "50", err, sizeof(err)), 0);
	assert_int_equal(c.engine.collector.stack_rate, 50);
	assert_int_equal(ls_setting_apply(&c, "ringbuf-kb", "512", err, sizeof(err)), 0);
	assert_int_equal(c.engine.collector.ringbuf_bytes, 512 * 1024);
	assert_int_equal(ls_setting_apply(&c, "ringbuf-kb", "300", err, sizeof(err)), -22);
	assert_string_equal(err, "ringbuf-kb: '300' is not a power of two");
	assert_int_equal(ls_setting_apply(&c, "max-stack", "0", err, sizeof(err)), -22);
	assert_string_equal(err, "max-stack: '0' is not an integer from 1 to 127");
	assert_int_equal(ls_setting_apply(&c, "max-stack", "-1", err, sizeof(err)), -22);
	assert_int_equal(ls_setting_apply(&c, "colour", "1", err, sizeof(err)), -22);
	assert_string_equal(err, "unknown setting 'colour' (see lockscoped --help)");
	assert_int_equal(ls_setting_apply(&c, "socket", "run/ls.sock", err, sizeof(err)), -22);
	assert_string_equal(err, "socket: 'run/ls.sock' is not an absolute path");
	assert_int_equal(ls_setting_apply(&c, "socket-group", "ops", err, sizeof(err)), 0);
	assert_string_equal(c.socket_group, "ops");
	assert_int_equal(ls_setting_apply(&c, "pause-min-share", "101", err, sizeof(err)), -22);
	assert_int_equal(ls_setting_apply(&c, "pause-min-share", "20", err, sizeof(err)), 0);
	assert_int_equal(c.engine.spin.pause_min_share_pct, 20);
}

static void test_config_file_all_or_nothing(void **state)
{
	char path[] = "/tmp/ls-conf-XXXXXX", err[256];
	struct ls_config c;
	FILE *f;
	int fd;

	(void)state;
	ls_config__init(&c);
	fd = mkstemp(path);
	f = fdopen(fd, "w");
	fprintf(f, "# lockscoped.conf\nstack-rate = 10\n\nmax-keys=5000   # per slot\nmax-stack = 999\n");
	fclose(f);
	assert_int_equal(ls_config_load(&c, path, err, sizeof(err)), -22);
	assert_non_null(strstr(err, ":5: max-stack: '999' is not an integer from 1 to 127"));
	assert_int_equal(c.engine.collector.stack_rate, 200);	/* untouched: the file was rejected */
	f = fopen(path, "w");
	fprintf(f, "stack-rate = 10\nmax-keys=5000   # per slot\nsocket = /tmp/x.sock\n");
	fclose(f);
	assert_int_equal(ls_config_load(&c, path, err, sizeof(err)), 0);
	assert_int_equal(c.engine.collector.stack_rate, 10);
	assert_int_equal(c.engine.max_keys, 5000);
	assert_string_equal(c.socket, "/tmp/x.sock");
	unlink(path);
}

/* What --dump-config prints reads back as the same settings. */
static void test_config_dump_round_trip(void **state)
{
	char path[] = "/tmp/ls-conf-XXXXXX", err[256];
	struct ls_config c, back;
	int i, fd;
	FILE *f;

	(void)state;
	ls_config__init(&c);
	assert_int_equal(ls_setting_apply(&c, "ringbuf-kb", "1024", err, sizeof(err)), 0);
	assert_int_equal(ls_setting_apply(&c, "socket-group", "ops", err, sizeof(err)), 0);
	assert_int_equal(ls_setting_apply(&c, "burst-factor", "9", err, sizeof(err)), 0);
	fd = mkstemp(path);
	f = fdopen(fd, "w");
	ls_config_dump(&c, f);
	fclose(f);
	ls_config__init(&back);
	assert_int_equal(ls_config_load(&back, path, err, sizeof(err)), 0);
	for (i = 0; i < ls_nr_settings; i++)
		assert_true(ls_setting_equal(&c, &back, &ls_settings[i]));
	unlink(path);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_units_like_perf),
		cmocka_unit_test(test_table_default),
		cmocka_unit_test(test_table_threads_locks_owners_stacks),
		cmocka_unit_test(test_holder_preempted_column),
		cmocka_unit_test(test_spin_findings),
		cmocka_unit_test(test_empty_table_says_so),
		cmocka_unit_test(test_settings_apply),
		cmocka_unit_test(test_config_file_all_or_nothing),
		cmocka_unit_test(test_config_dump_round_trip),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

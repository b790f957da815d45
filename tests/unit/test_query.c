// SPDX-License-Identifier: GPL-2.0
/* Grouping, estimation from sampled stacks, naming, sorting and request parsing. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>
#include "analyze/query.h"
#include "decode/cgroups.h"
#include "decode/ksyms.h"
#include "fake_proc.h"
#include "store/agg.h"
#include "store/stacks.h"
#include "klock.h"
#include "scheduler.h"

static const char kallsyms_text[] =
	"ffffffff81000000 T _stext\n"
	"ffffffff81000500 T bpf_trace_run2\n"
	"ffffffff81001000 T do_work\n"
	"ffffffff81001800 t mmap_region\n"
	"ffffffff81002000 T __sched_text_start\n"
	"ffffffff81002100 T rwsem_down_write_slowpath\n"
	"ffffffff81003000 T __sched_text_end\n"
	"ffffffff81003000 T __lock_text_start\n"
	"ffffffff81003100 T _raw_spin_lock\n"
	"ffffffff81004000 T __lock_text_end\n"
	"ffffffff82000000 d my_static_lock\n"
	"ffffffff82001000 D struct_with_lock\n"
	"ffffffffc0001000 t mod_func\t[mymod]\n";

struct fixture {
	struct ksyms *ksyms;
	struct stacks *stacks;
	struct agg *agg;
	uint32_t x, y;
	struct query_ctx qc;
};

static void put(struct agg *a, struct agg_key k, const uint64_t *waits, int n, const char *comm)
{
	struct agg_event ev = { .key = k, .comm = comm, .owner_comm = "owner" };
	int i;

	for (i = 0; i < n; i++) {
		ev.wait_ns = waits[i];
		assert_int_equal(agg__add(a, &ev), 0);
	}
}

/* query__rows() over everything added */
static cJSON *rows_of(struct fixture *f, const struct query *q)
{
	uint64_t start;
	struct agg_view *v = agg__view(f->agg, LS_WIN_ALL, &start);
	cJSON *rows;

	assert_non_null(v);
	rows = query__rows(v, q, &f->qc);
	agg_view__free(v);
	return rows;
}

static int setup(void **state)
{
	static const uint64_t stack_x[] = { 0xffffffff81002110, 0xffffffff81001020 };
	static const uint64_t stack_y[] = { 0xffffffff81000510, 0xffffffff81001810 };
	static const uint64_t w_x[] = { 50, 150 }, w_y[] = { 100 }, w_sampled[] = { 50, 150, 100 };
	static const uint64_t w_none[] = { 100, 100, 100, 100, 100, 100, 100 };
	static const uint64_t w_spin[] = { 10, 10, 10, 10 };
	struct fixture *f = calloc(1, sizeof(*f));
	char path[] = "/tmp/ls-kallsyms-XXXXXX";
	int fd = mkstemp(path);
	struct agg_key k1 = { .lock = 0xffff888000001000, .pid = 100, .tid = 101,
			      .flags = KLOCK_F_WRITE, .name = LS_NAME_MMAP_LOCK };
	struct agg_key k2 = { .lock = 0xffffffff82001010, .pid = 100, .tid = 102, .flags = KLOCK_F_SPIN };

	assert_true(fd >= 0);
	assert_int_equal(write(fd, kallsyms_text, sizeof(kallsyms_text) - 1), sizeof(kallsyms_text) - 1);
	close(fd);
	assert_int_equal(ksyms__new(path, &f->ksyms), 0);
	unlink(path);
	f->stacks = stacks__new(100);
	assert_int_equal(stacks__intern(f->stacks, stack_x, 2, 0, &f->x), 0);
	assert_int_equal(stacks__intern(f->stacks, stack_y, 2, 0, &f->y), 0);
	f->agg = agg__new(&(struct agg_opts){ .max_keys = 100 });
	assert_non_null(f->agg);
	/*
	 * thread 101 on mmap_lock: 10 waits in the exact entries (3 owned by 103, 7 by 104),
	 * 3 of them also sampled with their stacks
	 */
	k1.owner_pid = 100;
	k1.owner_tid = 103;
	put(f->agg, k1, w_sampled, 3, "writer");
	k1.owner_tid = 104;
	put(f->agg, k1, w_none, 7, "writer");
	k1.owner_tid = 103;
	k1.sampled = 1;
	k1.stack = f->x;
	put(f->agg, k1, w_x, 2, "writer");
	k1.stack = f->y;
	put(f->agg, k1, w_y, 1, "writer");
	/* thread 102 on a static spinlock: 4 waits, none sampled */
	put(f->agg, k2, w_spin, 4, "spinner");
	f->qc.stacks = f->stacks;
	f->qc.ksyms = f->ksyms;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	agg__free(f->agg);
	stacks__free(f->stacks);
	ksyms__free(f->ksyms);
	free(f);
	return 0;
}

static double num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	assert_non_null(v);
	return v->valuedouble;
}

static const char *str(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	assert_true(cJSON_IsString(v));
	return v->valuestring;
}

static void test_caller_rows_scale_samples_to_exact_totals(void **state)
{
	struct fixture *f = *state;
	struct query q;
	cJSON *rows, *r;

	query__init(&q);
	rows = rows_of(f, &q);
	assert_int_equal(cJSON_GetArraySize(rows), 3);
	/* stack X: 2 of 3 sampled waits, 200 of 300 sampled ns; stratum has 10 waits, 1000 ns */
	r = cJSON_GetArrayItem(rows, 0);
	assert_string_equal(str(r, "caller"), "do_work+0x20");
	assert_string_equal(str(r, "type"), "rwsem:W");
	assert_int_equal(num(r, "contended"), 7);	/* 2 * 10/3 = 6.67 */
	assert_int_equal(num(r, "total_wait_ns"), 667);	/* 200 * 1000/300 */
	assert_int_equal(num(r, "avg_wait_ns"), 95);
	assert_int_equal(num(r, "max_wait_ns"), 150);
	assert_int_equal(num(r, "min_wait_ns"), 50);
	assert_true(cJSON_IsTrue(cJSON_GetObjectItem(r, "estimated")));
	assert_int_equal(num(r, "stack_samples"), 2);
	assert_string_equal(str(cJSON_GetObjectItem(r, "lock"), "name"), "mmap_lock");
	/* stack Y: the tracing frame on top is skipped, no lock frame: first plain frame */
	r = cJSON_GetArrayItem(rows, 1);
	assert_string_equal(str(r, "caller"), "mmap_region+0x10");
	assert_int_equal(num(r, "contended"), 3);
	assert_int_equal(num(r, "total_wait_ns"), 333);
	/* a stratum with no sample keeps its exact figures in a row of its own */
	r = cJSON_GetArrayItem(rows, 2);
	assert_string_equal(str(r, "caller"), "[not sampled]");
	assert_int_equal(num(r, "contended"), 4);
	assert_int_equal(num(r, "total_wait_ns"), 40);
	assert_false(cJSON_IsTrue(cJSON_GetObjectItem(r, "estimated")));
	assert_string_equal(str(r, "type"), "spinlock");
	cJSON_Delete(rows);
}

static void test_thread_rows_are_exact(void **state)
{
	struct fixture *f = *state;
	struct query q;
	cJSON *rows, *r, *hist;

	query__init(&q);
	q.group = LS_GROUP_THREAD;
	rows = rows_of(f, &q);
	assert_int_equal(cJSON_GetArraySize(rows), 2);
	r = cJSON_GetArrayItem(rows, 0);
	assert_int_equal(num(r, "tid"), 101);
	assert_int_equal(num(r, "pid"), 100);
	assert_string_equal(str(r, "comm"), "writer");
	assert_int_equal(num(r, "contended"), 10);
	assert_int_equal(num(r, "total_wait_ns"), 1000);
	assert_int_equal(num(r, "min_wait_ns"), 50);
	assert_null(cJSON_GetObjectItem(r, "caller"));
	hist = cJSON_GetObjectItem(r, "hist");
	/* 50 -> [32,64), 100 x8 -> [64,128), 150 -> [128,256) */
	assert_int_equal(cJSON_GetArraySize(hist), 8);
	assert_int_equal(cJSON_GetArrayItem(hist, 5)->valuedouble, 1);
	assert_int_equal(cJSON_GetArrayItem(hist, 6)->valuedouble, 8);
	assert_int_equal(cJSON_GetArrayItem(hist, 7)->valuedouble, 1);
	cJSON_Delete(rows);
}

static void test_lock_rows_named_and_owner(void **state)
{
	struct fixture *f = *state;
	struct query q;
	cJSON *rows, *r, *owner;

	query__init(&q);
	q.group = LS_GROUP_LOCK;
	q.owners = true;
	rows = rows_of(f, &q);
	r = cJSON_GetArrayItem(rows, 0);
	assert_string_equal(str(cJSON_GetObjectItem(r, "lock"), "name"), "mmap_lock");
	assert_string_equal(str(cJSON_GetObjectItem(r, "lock"), "addr"), "0xffff888000001000");
	/* owner 104 blocked 7 waits, owner 103 three */
	owner = cJSON_GetObjectItem(r, "owner");
	assert_int_equal(num(owner, "tid"), 104);
	assert_string_equal(str(owner, "comm"), "owner");
	r = cJSON_GetArrayItem(rows, 1);
	assert_string_equal(str(cJSON_GetObjectItem(r, "lock"), "name"), "struct_with_lock+0x10");
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(r, "owner")));
	cJSON_Delete(rows);
}

static void test_filters_sort_limit(void **state)
{
	struct fixture *f = *state;
	struct query q;
	cJSON *rows;
	char err[256];

	query__init(&q);
	assert_int_equal(query__parse_types("spinlock", &q.type_mask, err, sizeof(err)), 0);
	rows = rows_of(f, &q);
	assert_int_equal(cJSON_GetArraySize(rows), 1);
	assert_string_equal(str(cJSON_GetArrayItem(rows, 0), "type"), "spinlock");
	cJSON_Delete(rows);

	query__init(&q);
	q.tid = 101;
	q.sort = LS_SORT_CONTENDED;
	q.limit = 1;
	q.stacks = true;
	rows = rows_of(f, &q);
	assert_int_equal(cJSON_GetArraySize(rows), 1);
	assert_string_equal(str(cJSON_GetArrayItem(rows, 0), "caller"), "do_work+0x20");
	assert_string_equal(str(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "stack"), 0),
				"sym"), "rwsem_down_write_slowpath");
	cJSON_Delete(rows);

	query__init(&q);
	q.pid = 999;
	rows = rows_of(f, &q);
	assert_int_equal(cJSON_GetArraySize(rows), 0);
	cJSON_Delete(rows);
}

static void test_request_parsing(void **state)
{
	static const struct { const char *json; const char *err; } bad[] = {
		{ "{\"window\":\"2h\"}", "'window' must be one of: 10s 1m 5m all" },
		{ "{\"group\":1}", "'group' must be one of: caller thread lock" },
		{ "{\"pid\":-1}", "'pid' must be an integer from 0 to 2147483647" },
		{ "{\"limit\":1.5}", "'limit' must be an integer from 0 to 1000000" },
		{ "{\"stacks\":1}", "'stacks' must be true or false" },
		{ "{\"types\":\"rwsem,bogus\"}", "unknown lock type 'bogus'" },
		{ "{\"types\":[\"rwsem\"]}", "'types' must be a comma-separated string" },
	};
	struct query q;
	char err[256];
	cJSON *req;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		req = cJSON_Parse(bad[i].json);
		query__init(&q);
		err[0] = 0;
		assert_int_equal(query__from_json(req, &q, err, sizeof(err)), -22);
		assert_non_null(strstr(err, bad[i].err));
		cJSON_Delete(req);
	}
	req = cJSON_Parse("{\"window\":\"1m\",\"group\":\"lock\",\"pid\":42,\"limit\":5,"
			  "\"types\":\"rwsem:R,mutex\",\"stacks\":true,\"max_stack\":4,\"sort\":\"wait_max\"}");
	query__init(&q);
	assert_int_equal(query__from_json(req, &q, err, sizeof(err)), 0);
	assert_int_equal(q.window, LS_WIN_1M);
	assert_int_equal(q.group, LS_GROUP_LOCK);
	assert_int_equal(q.pid, 42);
	assert_int_equal(q.limit, 5);
	assert_int_equal(q.max_stack, 4);
	assert_int_equal(q.sort, LS_SORT_MAX);
	assert_true(q.stacks);
	assert_int_equal(q.type_mask, (1U << query__type_index(KLOCK_F_READ)) |
				      (1U << query__type_index(KLOCK_F_MUTEX)));
	cJSON_Delete(req);
}

static void test_type_names(void **state)
{
	uint32_t mask;
	char err[256];

	(void)state;
	assert_string_equal(ls_lock_types[query__type_index(KLOCK_F_SPIN | KLOCK_F_READ)].name, "rwlock:R");
	assert_string_equal(ls_lock_types[query__type_index(KLOCK_F_PERCPU | KLOCK_F_WRITE)].name, "pcpu-sem:W");
	assert_string_equal(ls_lock_types[query__type_index(0x40)].name, "unknown");
	assert_string_equal(ls_lock_types[query__type_index(LS_KIND_USER | 0x3f)].name, "unknown");
	assert_string_equal(ls_lock_types[query__type_index(LS_KIND_KPREEMPT | KLOCK_F_SPIN)].name, "unknown");
	/* every type is found by its own flags, inside the lookup table or past it */
	for (int i = 0; i < ls_nr_lock_types - 1; i++)
		assert_int_equal(ls_lock_types[query__type_index(ls_lock_types[i].flags)].flags,
				 ls_lock_types[i].flags);
	for (uint32_t f = 0; f < 1024; f++) {
		int t = query__type_index(f), u = query__type_index(LS_KIND_USER | f);

		assert_true(t == ls_nr_lock_types - 1 || ls_lock_types[t].flags == f);
		assert_true(u == ls_nr_lock_types - 1 || ls_lock_types[u].flags == (LS_KIND_USER | f));
	}
	/* a class name selects both of its modes */
	assert_int_equal(query__parse_types("rwlock", &mask, err, sizeof(err)), 0);
	assert_int_equal(mask, (1U << query__type_index(KLOCK_F_SPIN | KLOCK_F_READ)) |
			       (1U << query__type_index(KLOCK_F_SPIN | KLOCK_F_WRITE)));
}

static void test_futex_types(void **state)
{
	static const struct {
		uint32_t op, val, type;
		const char *name;
	} cases[] = {
		{ ULOCK_FUTEX_WAIT | ULOCK_FUTEX_PRIVATE, 2, LS_UTYPE_MUTEX, "futex:mutex" },	/* glibc */
		{ ULOCK_FUTEX_WAIT_BITSET | ULOCK_FUTEX_PRIVATE, 2, LS_UTYPE_MUTEX, "futex:mutex" }, /* Rust */
		{ ULOCK_FUTEX_WAIT_BITSET | ULOCK_FUTEX_PRIVATE, 0, LS_UTYPE_CONDVAR, "futex:condvar" },
		{ ULOCK_FUTEX_WAIT_BITSET, 3, LS_UTYPE_CONDVAR, "futex:condvar" },	/* rwlock, g1 switch */
		{ ULOCK_FUTEX_WAIT, 12345, LS_UTYPE_CONDVAR, "futex:condvar" },		/* join */
		{ ULOCK_FUTEX_LOCK_PI | ULOCK_FUTEX_PRIVATE, 0, LS_UTYPE_PI, "futex:pi" },
		{ ULOCK_FUTEX_LOCK_PI2 | ULOCK_FUTEX_CLOCK_RT, 7, LS_UTYPE_PI, "futex:pi" },
		{ ULOCK_FUTEX_WAIT_REQUEUE_PI, 2, LS_UTYPE_CONDVAR, "futex:condvar" },
		{ ULOCK_FUTEX_WAITV | ULOCK_FUTEX_PRIVATE, 2, LS_UTYPE_WAITV, "futex:waitv" },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint32_t t = ls_futex_type(cases[i].op, cases[i].val);

		assert_int_equal(t, cases[i].type);
		assert_string_equal(ls_lock_types[query__type_index(LS_KIND_USER | t)].name, cases[i].name);
	}
}

/* User rows: the kind filter, the releaser, holder samples attached to their lock. */
static void test_user_rows(void **state)
{
	struct fixture *f = *state;
	static const uint64_t w30[30] = { [0 ... 29] = 1000 }, w10[10] = { [0 ... 9] = 1000 };
	static const uint64_t samples3[3], samples1[1];
	struct agg_key k = { .lock = 0x5000, .pid = 300, .tid = 301,
			     .flags = LS_KIND_USER | LS_UTYPE_MUTEX, .owner_pid = 300, .owner_tid = 302,
			     .releaser_pid = 300, .releaser_tid = 302 };
	struct query q;
	cJSON *rows, *r, *h;
	char err[256];

	put(f->agg, k, w30, 30, "waiter");
	k.releaser_tid = 303;
	put(f->agg, k, w10, 10, "waiter");
	k = (struct agg_key){ .lock = 0x5000, .pid = 300, .tid = 302,
			      .flags = LS_KIND_USER | LS_UTYPE_HOLD, .stack = f->x };
	put(f->agg, k, samples3, 3, "holder");
	k.stack = f->y;
	put(f->agg, k, samples1, 1, "holder");

	query__init(&q);
	q.group = LS_GROUP_LOCK;
	q.kind = LS_KIND_USER_ONLY;
	q.owners = q.holders = true;
	rows = rows_of(f, &q);
	assert_int_equal(cJSON_GetArraySize(rows), 1);	/* holder samples are not a row */
	r = cJSON_GetArrayItem(rows, 0);
	assert_string_equal(str(r, "kind"), "user");
	assert_string_equal(str(r, "type"), "futex:mutex");
	assert_string_equal(str(r, "uaddr"), "0x5000");
	assert_int_equal(num(r, "contended"), 40);
	assert_int_equal(num(cJSON_GetObjectItem(r, "owner"), "tid"), 302);
	assert_int_equal(num(cJSON_GetObjectItem(r, "releaser"), "tid"), 302);
	h = cJSON_GetObjectItem(r, "holder_stacks");
	assert_int_equal(num(r, "holder_samples"), 4);
	assert_int_equal(cJSON_GetArraySize(h), 2);
	assert_int_equal(num(cJSON_GetArrayItem(h, 0), "samples"), 3);
	assert_true(num(cJSON_GetArrayItem(h, 0), "share") == 0.75);
	/* thread 302 ended most waits, none sampled: its stack is its own or, here, null */
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "releaser"), "stack")));
	cJSON_Delete(rows);

	/* a sample of 303's release: 302 stays named, with the stack 303's sample saw, said so */
	k = (struct agg_key){ .lock = 0x5000, .pid = 300, .tid = 301, .flags = LS_KIND_USER | LS_UTYPE_MUTEX,
			      .owner_pid = 300, .owner_tid = 302, .releaser_pid = 300, .releaser_tid = 303,
			      .sampled = 1, .stack = f->y, .releaser_stack = f->x };
	put(f->agg, k, w10, 2, "waiter");
	rows = rows_of(f, &q);
	r = cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "releaser");
	assert_int_equal(num(r, "tid"), 302);
	assert_true(cJSON_IsArray(cJSON_GetObjectItem(r, "stack")));
	assert_int_equal(num(r, "stack_pid"), 300);
	assert_int_equal(num(r, "stack_tid"), 303);
	cJSON_Delete(rows);

	/* once 302's own release is sampled, its stack is shown and no other thread is named */
	k.releaser_tid = 302;
	k.releaser_stack = f->y;
	put(f->agg, k, w10, 1, "waiter");
	rows = rows_of(f, &q);
	r = cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "releaser");
	assert_int_equal(num(r, "tid"), 302);
	assert_true(cJSON_IsArray(cJSON_GetObjectItem(r, "stack")));
	assert_null(cJSON_GetObjectItem(r, "stack_tid"));
	cJSON_Delete(rows);

	q.kind = LS_KIND_KERNEL_ONLY;
	rows = rows_of(f, &q);
	for (r = rows->child; r; r = r->next)
		assert_string_equal(str(r, "kind"), "kernel");
	cJSON_Delete(rows);
	assert_int_equal(query__parse_types("futex:pi,futex", &q.type_mask, err, sizeof(err)), 0);
}

static void test_kallsyms_lookup(void **state)
{
	struct fixture *f = *state;
	const struct ksym *s;

	s = ksyms__func(f->ksyms, 0xffffffffc0001010);
	assert_string_equal(s->name, "mod_func");
	assert_string_equal(s->module, "mymod");
	assert_true(ksyms__is_lock_func(f->ksyms, 0xffffffff81003100));
	assert_true(ksyms__is_lock_func(f->ksyms, 0xffffffff81002100));
	assert_false(ksyms__is_lock_func(f->ksyms, 0xffffffff81001000));
	assert_null(ksyms__data(f->ksyms, 0xffffffff82000000 + 2048, 256));
	assert_string_equal(ksyms__data(f->ksyms, 0xffffffff82000008, 256)->name, "my_static_lock");
}

static const cJSON *cgroup_of(const cJSON *row)
{
	return cJSON_GetObjectItemCaseSensitive(row, "cgroup");
}

/* --by unit|cgroup and -G over three processes: two cgroups of one unit, and another unit. */
static void test_rows_by_unit_and_cgroup_filter(void **state)
{
	static const uint64_t w[] = { 100, 100, 100, 100 };
	char root[] = "/tmp/test_query.XXXXXX";
	struct agg *a = agg__new(&(struct agg_opts){ .max_keys = 100 });
	struct agg_key k = { .lock = 0xffffffff82001010, .tid = 1, .flags = KLOCK_F_SPIN };
	struct query_ctx qc = {};
	struct cgroups *cg;
	struct agg_view *v;
	struct query q;
	uint64_t start;
	cJSON *rows;
	uint32_t pid;

	(void)state;
	assert_non_null(mkdtemp(root));
	fake_proc_cgroup(root, 200, "/system.slice/a.service");
	fake_proc_cgroup(root, 201, "/system.slice/a.service/worker");
	fake_proc_cgroup(root, 202, "/system.slice/b.service");
	assert_int_equal(cgroups__new(&(struct cgroups_opts){ .max_procs = 16, .max_cgroups = 16, .proc = root,
							      .mountinfo = "" }, &cg), 0);
	for (pid = 200; pid <= 202; pid++) {
		k.pid = k.tid = pid;
		put(a, k, w, pid == 202 ? 4 : pid - 199, "proc");	/* 1, 2 and 4 waits */
		cgroups__see(cg, pid, 0);
	}
	qc.cgroups = cg;
	v = agg__view(a, LS_WIN_ALL, &start);
	query__init(&q);
	q.cgroups = cg;

	/* one row per unit: a.service's two cgroups together, its path null as they differ */
	q.group = LS_GROUP_UNIT;
	rows = query__rows(v, &q, &qc);
	assert_int_equal(cJSON_GetArraySize(rows), 2);
	assert_string_equal(str(cgroup_of(cJSON_GetArrayItem(rows, 0)), "unit"), "b.service");
	assert_int_equal(num(cJSON_GetArrayItem(rows, 0), "contended"), 4);
	assert_string_equal(str(cgroup_of(cJSON_GetArrayItem(rows, 1)), "unit"), "a.service");
	assert_int_equal(num(cJSON_GetArrayItem(rows, 1), "contended"), 3);
	assert_true(cJSON_IsNull(cJSON_GetObjectItem(cgroup_of(cJSON_GetArrayItem(rows, 1)), "path")));
	cJSON_Delete(rows);

	/* one per cgroup: three, each with its path */
	q.group = LS_GROUP_CGROUP;
	rows = query__rows(v, &q, &qc);
	assert_int_equal(cJSON_GetArraySize(rows), 3);
	assert_string_equal(str(cgroup_of(cJSON_GetArrayItem(rows, 1)), "path"), "/system.slice/a.service/worker");
	cJSON_Delete(rows);

	/* -G a.service: its two processes' threads, nothing of b's; a path takes what is below it */
	q.group = LS_GROUP_THREAD;
	snprintf(q.cgroup, sizeof(q.cgroup), "a.service");
	rows = query__rows(v, &q, &qc);
	assert_int_equal(cJSON_GetArraySize(rows), 2);
	assert_int_equal(num(cJSON_GetArrayItem(rows, 0), "pid"), 201);
	assert_int_equal(num(cJSON_GetArrayItem(rows, 1), "pid"), 200);
	cJSON_Delete(rows);
	snprintf(q.cgroup, sizeof(q.cgroup), "/system.slice");
	rows = query__rows(v, &q, &qc);
	assert_int_equal(cJSON_GetArraySize(rows), 3);
	cJSON_Delete(rows);
	/* without a table to look processes up in, a filter keeps nothing (never everything) */
	q.cgroups = NULL;
	rows = query__rows(v, &q, &qc);
	assert_int_equal(cJSON_GetArraySize(rows), 0);
	cJSON_Delete(rows);

	agg_view__free(v);
	agg__free(a);
	cgroups__free(cg);
	fake_proc_remove(root);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_caller_rows_scale_samples_to_exact_totals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_thread_rows_are_exact, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lock_rows_named_and_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_filters_sort_limit, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kallsyms_lookup, setup, teardown),
		cmocka_unit_test(test_request_parsing),
		cmocka_unit_test(test_type_names),
		cmocka_unit_test(test_futex_types),
		cmocka_unit_test_setup_teardown(test_user_rows, setup, teardown),
		cmocka_unit_test(test_rows_by_unit_and_cgroup_filter),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

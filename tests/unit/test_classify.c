// SPDX-License-Identifier: GPL-2.0
/*
 * Lock, idle or I/O by evidence (analyze/classify.c): the wait-for graphs of a lock's peers,
 * a thread pool, a pipeline, a producer that once waited for a consumer, a server and its
 * client, and waits no thread ended.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>
#include "analyze/classify.h"
#include "analyze/diagnose.h"
#include "store/agg.h"
#include "scheduler.h"

#define POLL (LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_POLL))
#define READ (LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_READ))
#define SYNC (LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_SYNC))
#define FLOCK (LS_KIND_USER | (LS_UTYPE_BLOCK + LS_BTYPE_FLOCK))
#define CONDVAR (LS_KIND_USER | LS_UTYPE_CONDVAR)
#define MUTEX (LS_KIND_USER | LS_UTYPE_MUTEX)

struct wait {
	uint32_t flags, pid, tid, waker_pid, waker_tid;
	int count;
	const char *comm, *waker_comm;	/* NULL: "app" */
	uint64_t lock;			/* 0: one of its own */
	uint8_t unwatched;		/* ended with sched_waking detached */
};

/* A wait on object @lock; unwatched: its waker was not looked for. */
#define WO(flags, pid, tid, waker_pid, waker_tid, count, lock, unwatched) \
	{ flags, pid, tid, waker_pid, waker_tid, count, NULL, NULL, lock, unwatched }

static uint64_t lock_of(const struct wait *w, size_t i)
{
	return w[i].lock ? w[i].lock : 0x1000 + i;
}

#define W(flags, pid, tid, waker_pid, waker_tid, count) { flags, pid, tid, waker_pid, waker_tid, count, NULL, NULL, 0, 0 }

/* The class of each of @w's waits, as one view of them all classes it. */
static void classify(const struct wait *w, size_t n, enum ls_wclass *out)
{
	struct agg *a = agg__new(&(struct agg_opts){ .max_keys = 100 });
	struct wait_classes *wc;
	const struct agg_key *k;
	struct agg_view *v;
	struct agg_val val;
	uint64_t start;
	size_t i, j;
	int c;

	assert_non_null(a);
	for (i = 0; i < n; i++) {
		struct agg_event ev = {
			.key = { .lock = lock_of(w, i), .pid = w[i].pid, .tid = w[i].tid, .flags = w[i].flags,
				 .releaser_pid = w[i].waker_pid, .releaser_tid = w[i].waker_tid,
				 .unwatched = w[i].unwatched },
			.wait_ns = 1000, .comm = w[i].comm ? w[i].comm : "app",
			.releaser_comm = w[i].waker_comm ? w[i].waker_comm : w[i].comm ? w[i].comm : "app",
		};

		for (c = 0; c < w[i].count; c++)
			assert_int_equal(agg__add(a, &ev), 0);
	}
	v = agg__view(a, LS_WIN_ALL, &start);
	assert_non_null(v);
	assert_non_null(wc = wait_classes__new(v));
	for (i = 0; i < n; i++) {
		out[i] = LS_WCLASS_MAX;
		for (j = 0; !agg_view__get(v, j, &k, &val); j++)
			if (k->lock == lock_of(w, i) && k->pid == w[i].pid && k->tid == w[i].tid &&
			    k->releaser_tid == w[i].waker_tid && k->unwatched == w[i].unwatched && !k->sampled)
				out[i] = wait_classes__of(wc, k, &val);
		assert_int_not_equal(out[i], LS_WCLASS_MAX);
	}
	wait_classes__free(wc);
	agg_view__free(v);
	agg__free(a);
}

#define CLASSIFY(w, out) classify(w, sizeof(w) / sizeof(w[0]), out)

/* Three threads taking turns on a latch: each waits for the others' release. */
static void test_peers_taking_turns_are_a_lock(void **state)
{
	static const struct wait w[] = {
		W(POLL, 1, 11, 1, 12, 100), W(POLL, 1, 12, 1, 13, 100), W(POLL, 1, 13, 1, 11, 100),
		W(POLL, 1, 11, 1, 13, 50),
	};
	enum ls_wclass c[4];
	size_t i;

	(void)state;
	CLASSIFY(w, c);
	for (i = 0; i < 4; i++)
		assert_int_equal(c[i], LS_WCLASS_LOCK);
}

/* Workers reading an eventfd a producer writes: the producer never waits for them. */
static void test_a_pool_and_a_pipeline_are_idle(void **state)
{
	static const struct wait pool[] = {
		W(READ, 1, 12, 1, 11, 100), W(READ, 1, 13, 1, 11, 100), W(READ, 1, 14, 1, 11, 100),
	};
	static const struct wait pipeline[] = {
		W(READ, 1, 12, 1, 11, 100), W(READ, 1, 13, 1, 12, 100), W(READ, 1, 14, 1, 13, 100),
	};
	enum ls_wclass c[3];
	size_t i;

	(void)state;
	CLASSIFY(pool, c);
	for (i = 0; i < 3; i++)
		assert_int_equal(c[i], LS_WCLASS_IDLE);
	CLASSIFY(pipeline, c);
	for (i = 0; i < 3; i++)
		assert_int_equal(c[i], LS_WCLASS_IDLE);
}

/* condvar_pc: the producer waited once for a consumer (glibc's group switch), not a peer. */
static void test_one_wait_back_makes_no_lock(void **state)
{
	static const struct wait w[] = {
		W(CONDVAR, 1, 12, 1, 11, 230), W(CONDVAR, 1, 13, 1, 11, 230), W(CONDVAR, 1, 11, 1, 12, 1),
	};
	enum ls_wclass c[3];

	(void)state;
	CLASSIFY(w, c);
	assert_int_equal(c[0], LS_WCLASS_IDLE);
	assert_int_equal(c[1], LS_WCLASS_IDLE);
	assert_int_equal(c[2], LS_WCLASS_IDLE);
}

/*
 * PostgreSQL: backends (processes of one program) wake each other's row-lock waits; a
 * backend waiting for its client is woken by pgbench, another program, which waits for it.
 */
static void test_processes_of_one_program_are_peers(void **state)
{
	static const struct wait w[] = {
		{ POLL, 10, 10, 11, 11, 100, "postgres", "postgres", 0, 0 },
		{ POLL, 11, 11, 12, 12, 100, "postgres", "postgres", 0, 0 },
		{ POLL, 12, 12, 10, 10, 100, "postgres", "postgres", 0, 0 },
		{ POLL, 10, 10, 20, 21, 100, "postgres", "pgbench", 0, 0 },
		{ POLL, 20, 21, 10, 10, 100, "pgbench", "postgres", 0, 0 },
	};
	enum ls_wclass c[5];

	(void)state;
	CLASSIFY(w, c);
	assert_int_equal(c[0], LS_WCLASS_LOCK);
	assert_int_equal(c[1], LS_WCLASS_LOCK);
	assert_int_equal(c[2], LS_WCLASS_LOCK);
	assert_int_equal(c[3], LS_WCLASS_IDLE);	/* waiting for the client */
	assert_int_equal(c[4], LS_WCLASS_IDLE);	/* the client waiting for the answer */
}

/* No thread ended it: the disk's is I/O, a poll's is idle; mutexes and file locks are locks. */
static void test_by_type_and_without_waker(void **state)
{
	static const struct wait w[] = {
		W(SYNC, 1, 11, 0, 0, 10), W(POLL, 1, 11, 0, 0, 10), W(MUTEX, 1, 11, 0, 0, 10),
		W(FLOCK, 1, 12, 1, 11, 10), W(READ, 1, 11, 1, 11, 10),
	};
	enum ls_wclass c[5];

	(void)state;
	CLASSIFY(w, c);
	assert_int_equal(c[0], LS_WCLASS_IO);
	assert_int_equal(c[1], LS_WCLASS_IDLE);
	assert_int_equal(c[2], LS_WCLASS_LOCK);
	assert_int_equal(c[3], LS_WCLASS_LOCK);
	assert_int_equal(c[4], LS_WCLASS_IDLE);	/* a thread that woke itself (a signal to self) */
	assert_string_equal(classify__name(LS_WCLASS_IO), "io");
	assert_true(classify__by_evidence(CONDVAR) && classify__by_evidence(POLL));
	assert_false(classify__by_evidence(MUTEX) || classify__by_evidence(FLOCK));
}

/*
 * Waits that ended while sched_waking was detached (past waker-max-rate, the seconds it is
 * off) have no releaser: each takes the class its object's watched waits were given. Three
 * backends take turns on their latches (0xa); backend 10 also waits for its client on
 * another descriptor (0xb), which pgbench wakes; 0xc has no watched wait at all.
 */
static void test_unwatched_waits_take_their_objects_class(void **state)
{
	static const struct wait w[] = {
		{ POLL, 10, 10, 11, 11, 100, "postgres", "postgres", 0xa, 0 },
		{ POLL, 11, 11, 12, 12, 100, "postgres", "postgres", 0xa, 0 },
		{ POLL, 12, 12, 10, 10, 100, "postgres", "postgres", 0xa, 0 },
		{ POLL, 10, 10, 20, 21, 100, "postgres", "pgbench", 0xb, 0 },
		{ POLL, 20, 21, 10, 10, 100, "pgbench", "postgres", 0xd, 0 },
		WO(POLL, 10, 10, 0, 0, 900, 0xa, 1),	/* the latch, unwatched: a lock's */
		WO(POLL, 10, 10, 0, 0, 900, 0xb, 1),	/* the client's socket: idle */
		WO(POLL, 10, 10, 0, 0, 900, 0xc, 1),	/* no evidence: idle */
		WO(POLL, 10, 10, 0, 0, 10, 0xa, 0),	/* watched, and no thread woke it: idle */
		WO(SYNC, 10, 10, 0, 0, 10, 0xe, 1),	/* the disk's: io */
		WO(POLL, 13, 13, 0, 0, 10, 0xa, 1),	/* another process's 0xa is another object */
	};
	enum ls_wclass c[11];

	(void)state;
	CLASSIFY(w, c);
	assert_int_equal(c[0], LS_WCLASS_LOCK);
	assert_int_equal(c[3], LS_WCLASS_IDLE);
	assert_int_equal(c[5], LS_WCLASS_LOCK);
	assert_int_equal(c[6], LS_WCLASS_IDLE);
	assert_int_equal(c[7], LS_WCLASS_IDLE);
	assert_int_equal(c[8], LS_WCLASS_IDLE);
	assert_int_equal(c[9], LS_WCLASS_IO);
	assert_int_equal(c[10], LS_WCLASS_IDLE);
}

static cJSON *caller_row(const char *type, const char *cls, const char *caller, double count, double total_ns)
{
	cJSON *r = cJSON_CreateObject();

	cJSON_AddStringToObject(r, "kind", "user");
	cJSON_AddStringToObject(r, "type", type);
	cJSON_AddStringToObject(r, "class", cls);
	cJSON_AddStringToObject(r, "caller", caller);
	cJSON_AddNumberToObject(r, "contended", count);
	cJSON_AddNumberToObject(r, "total_wait_ns", total_ns);
	cJSON_AddNumberToObject(r, "max_wait_ns", total_ns / count * 2);
	cJSON_AddNumberToObject(r, "avg_wait_ns", total_ns / count);
	return r;
}

/*
 * report's peer_wait: a lock's waits classed by evidence, one finding per calling function
 * (its rows by stack merged), none for idle waits however long.
 */
static void test_report_finds_peer_waits_by_function(void **state)
{
	struct diag_thresholds th;
	cJSON *rows = cJSON_CreateArray(), *findings, *f;
	struct diag_input in = { .caller_rows = rows, .span_s = 10, .th = &th };

	(void)state;
	diag_thresholds__init(&th);
	cJSON_AddItemToArray(rows, caller_row("wait:poll", "lock", "ProcSleep+0x314", 1000, 30e9));
	cJSON_AddItemToArray(rows, caller_row("wait:poll", "lock", "ProcSleep+0x314", 500, 10e9));
	cJSON_AddItemToArray(rows, caller_row("futex:condvar", "lock", "LWLockAcquire+0xad", 4000, 8e9));
	cJSON_AddItemToArray(rows, caller_row("wait:poll", "idle", "secure_read+0xd5", 9000, 90e9));
	cJSON_AddItemToArray(rows, caller_row("futex:condvar", "lock", "ConditionVariableSleep+0x1", 10, 1e6));
	findings = diagnose(&in);
	assert_int_equal(cJSON_GetArraySize(findings), 2);
	f = cJSON_GetArrayItem(findings, 0);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(f, "rule")), "peer_wait");
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(f, "caller")), "ProcSleep");
	assert_true(cJSON_GetObjectItem(f, "wasted_ns")->valuedouble == 40e9);
	assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(f, "evidence"), "contended")->valuedouble == 1500);
	f = cJSON_GetArrayItem(findings, 1);
	assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(f, "caller")), "LWLockAcquire");
	cJSON_Delete(findings);
	cJSON_Delete(rows);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_peers_taking_turns_are_a_lock),
		cmocka_unit_test(test_a_pool_and_a_pipeline_are_idle),
		cmocka_unit_test(test_one_wait_back_makes_no_lock),
		cmocka_unit_test(test_processes_of_one_program_are_peers),
		cmocka_unit_test(test_by_type_and_without_waker),
		cmocka_unit_test(test_unwatched_waits_take_their_objects_class),
		cmocka_unit_test(test_report_finds_peer_waits_by_function),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

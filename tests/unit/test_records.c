// SPDX-License-Identifier: GPL-2.0
/*
 * The decoder without a kernel: wait-table entries and ring records built here go in, the
 * store events and spin records that come out are checked field by field, and so is what
 * it counts as bad or lost. No collector: records carry no stack-map ids.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include "decode/dumps.h"
#include "decode/records.h"
#include "decode/unwind.h"
#include "decode/usyms.h"
#include "store/stacks.h"
#include "klock.h"
#include "lockscope.h"
#include "scheduler.h"
#include "ustack.h"

#define MAX_EVENTS 16

struct sink {
	struct agg_event ev[MAX_EVENTS];
	struct agg_stat stat[MAX_EVENTS];	/* ev[i].stat points into the decoder's stack frame */
	int events, yields, samples, resumes, wakers;
	uint32_t waker_waits;
	uint64_t waker_span_ns;
	uint32_t yield_stack;
};

struct fixture {
	struct stacks *stacks;
	struct usyms *usyms;
	struct unwind *unwind;
	struct dumps *dumps;
	struct decoder *dec;
	struct sink sink;
};

static void on_event(void *ctx, const struct agg_event *ev)
{
	struct sink *s = ctx;

	assert_true(s->events < MAX_EVENTS);
	s->ev[s->events] = *ev;
	if (ev->stat)
		s->stat[s->events] = *ev->stat;
	s->events++;
}

static void on_yield(void *ctx, const struct sched_yield_rec *r, uint32_t stack)
{
	struct sink *s = ctx;

	(void)r;
	s->yields++;
	s->yield_stack = stack;
}

static void on_sample(void *ctx, const struct sched_spin_rec *r, uint32_t stack)
{
	(void)r;
	(void)stack;
	((struct sink *)ctx)->samples++;
}

static void on_resume(void *ctx, const struct sched_resume_rec *r, uint32_t stack)
{
	(void)r;
	(void)stack;
	((struct sink *)ctx)->resumes++;
}

static void on_waker(void *ctx, uint32_t waits, uint64_t span_ns)
{
	((struct sink *)ctx)->wakers++;
	((struct sink *)ctx)->waker_waits = waits;
	((struct sink *)ctx)->waker_span_ns = span_ns;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->stacks = stacks__new(1024);
	assert_non_null(f->stacks);
	assert_int_equal(usyms__new(&(struct usyms_opts){ .max_procs = 16, .debuginfod_dir = "" }, &f->usyms), 0);
	assert_int_equal(unwind__new(f->usyms, 4, &f->unwind), 0);
	f->dumps = dumps__new(64);
	assert_non_null(f->dumps);
	assert_int_equal(decoder__new(&(struct decoder_opts){
					      .stacks = f->stacks, .usyms = f->usyms, .unwind = f->unwind,
					      .dumps = f->dumps, .max_stack = 32, .kstack_entries = 64,
					      .ustack_entries = 64,
					      .sink = { .event = on_event, .yield_site = on_yield, .spin_sample = on_sample,
							.resume = on_resume, .waker_wanted = on_waker, .ctx = &f->sink } },
				      &f->dec), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	decoder__free(f->dec);
	dumps__free(f->dumps);
	unwind__free(f->unwind);
	usyms__free(f->usyms);
	stacks__free(f->stacks);
	free(f);
	return 0;
}

/* One ring record, as a drain hands it over: a pass around it. */
static void record(struct fixture *f, void *rec, size_t size)
{
	decoder__pass_begin(f->dec);
	assert_int_equal(decoder__record(f->dec, rec, size), 0);
	decoder__pass_end(f->dec);
}

static void test_wait_entry_is_one_exact_event(void **state)
{
	struct fixture *f = *state;
	struct ls_wait_key k = { .lock = 0xffff888100001000ULL, .pid = 10, .tid = 11, .class = LS_WAIT_KLOCK,
				 .type = KLOCK_F_MUTEX | KLOCK_F_SPIN, .flags = LS_WF_MMAP_LOCK,
				 .owner_pid = 20, .owner_tid = 21 };
	struct ls_wait_val v = { .count = 3, .total_ns = 600, .max_ns = 400, .min_ns = 50 };
	const struct agg_event *ev = &f->sink.ev[0];

	v.hist[ls_hist_bucket(400)] = 1;
	v.hist[ls_hist_bucket(150)] = 1;
	v.hist[ls_hist_bucket(50)] = 1;
	strcpy(v.who.comm, "waiter");
	strcpy(v.who.owner_comm, "holder");
	v.who.start_ns = 123450000000ULL;
	v.who.cgroup_id = 4242;
	assert_int_equal(decoder__wait_entry(f->dec, &k, &v), 0);
	assert_int_equal(f->sink.events, 1);
	assert_int_equal(ev->key.lock, k.lock);
	assert_int_equal(ev->key.tid, 11);
	/* a mutex that spun and slept is one mutex wait */
	assert_int_equal(ev->key.flags, KLOCK_F_MUTEX);
	assert_int_equal(ev->key.name, LS_NAME_MMAP_LOCK);
	assert_int_equal(ev->key.owner_tid, 21);
	assert_string_equal(ev->owner_comm, "holder");
	/* the waiter's process and cgroup, as the kernel side read them */
	assert_int_equal(ev->proc_start_ns, 123450000000ULL);
	assert_int_equal(ev->cgroup_id, 4242);
	assert_int_equal(f->sink.stat[0].count, 3);
	assert_int_equal(f->sink.stat[0].total_ns, 600);
	assert_int_equal(f->sink.stat[0].min_ns, 50);
	assert_int_equal(f->sink.stat[0].max_ns, 400);
	assert_int_equal(f->sink.stat[0].hist[ls_hist_bucket(150)], 1);
	assert_int_equal(decoder__stats(f->dec).kernel_waits, 3);
	assert_int_equal(decoder__stats(f->dec).wait_entries, 1);
}

static void test_bad_input_is_counted_not_decoded(void **state)
{
	struct fixture *f = *state;
	struct ls_wait_key k = { .class = 99 };
	struct ls_wait_val v = { .count = 1 };
	struct ls_rec_hdr h = { .type = LS_REC_KLOCK_WAIT, .size = sizeof(h) };
	uint64_t buf[64] = {};
	struct ls_rec_hdr *u = (void *)buf;

	assert_int_equal(decoder__wait_entry(f->dec, &k, &v), 0);	/* an unknown class */
	record(f, &h, sizeof(h));					/* a header, no body */
	record(f, buf, 3);						/* not even a header */
	u->type = 200;							/* an unknown type */
	record(f, buf, sizeof(buf));
	u->type = LS_REC_ULOCK_WAIT;					/* a truncated user wait */
	record(f, buf, sizeof(struct ulock_wait_rec) - 1);
	assert_int_equal(f->sink.events, 0);
	assert_int_equal(decoder__stats(f->dec).bad_records, 5);
}

static struct ulock_wait_rec futex_wait(uint32_t flags, uint64_t dump)
{
	struct ulock_wait_rec r = { .hdr = { .type = LS_REC_ULOCK_WAIT, .size = sizeof(r) },
				    .uaddr = 0x7f0000001000ULL, .wait_ns = 5000, .pid = getpid(), .tid = getpid(),
				    .op = 0 /* FUTEX_WAIT */, .rec_flags = flags, .stack_id = -1,
				    .releaser_stack_id = -1, .stack_dump = dump };

	strcpy(r.comm, "waiter");
	return r;
}

static void test_record_waits_for_its_dump_then_is_decoded(void **state)
{
	struct fixture *f = *state;
	struct ulock_wait_rec r = futex_wait(ULOCK_RF_DUMP, 7);
	struct ls_ustack_rec dump = { .hdr = { .type = LS_REC_USTACK, .size = sizeof(dump) }, .id = 7,
				      .pid = getpid(), .tid = getpid() };

	/* the record came through one CPU's ring before its dump came through another's */
	record(f, &r, sizeof(r));
	assert_int_equal(f->sink.events, 0);
	decoder__pass_begin(f->dec);
	assert_int_equal(decoder__record(f->dec, &dump, sizeof(dump)), 0);
	assert_false(decoder__pass_end(f->dec));	/* nothing parked any more */
	assert_int_equal(f->sink.events, 1);
	assert_int_equal(f->sink.ev[0].key.sampled, 1);
	assert_int_equal(f->sink.ev[0].key.lock, r.uaddr);
	assert_int_equal(f->sink.ev[0].wait_ns, 5000);
	/* an empty dump unwinds to nothing: the stack is missing, the dump was not */
	assert_int_equal(f->sink.ev[0].key.stack, LS_STACK_MISSING);
	assert_int_equal(decoder__stats(f->dec).dump_missing, 0);
}

static void test_a_dump_that_never_comes_is_counted_missing(void **state)
{
	struct fixture *f = *state;
	struct ulock_wait_rec r = futex_wait(ULOCK_RF_DUMP, 8);

	record(f, &r, sizeof(r));
	assert_int_equal(f->sink.events, 0);
	/* a drain that began after the record was read has ended: the dump is lost */
	decoder__pass_begin(f->dec);
	assert_false(decoder__pass_end(f->dec));
	assert_int_equal(f->sink.events, 1);
	assert_int_equal(f->sink.ev[0].key.stack, LS_STACK_MISSING);
	assert_int_equal(decoder__stats(f->dec).dump_missing, 1);
}

static void test_spin_and_scheduling_records_go_to_their_sinks(void **state)
{
	struct fixture *f = *state;
	struct sched_yield_rec y = { .hdr = { .type = LS_REC_SCHED_YIELD, .size = sizeof(y) }, .pid = 1, .tid = 1 };
	struct sched_spin_rec sp = { .hdr = { .type = LS_REC_SCHED_SPIN, .size = sizeof(sp) }, .pid = 1, .tid = 1 };
	struct sched_resume_rec rs = { .hdr = { .type = LS_REC_SCHED_RESUME, .size = sizeof(rs) }, .pid = 1, .tid = 1 };
	struct ls_waker_rec w = { .hdr = { .type = LS_REC_WAKER_WANTED, .size = sizeof(w) }, .span_ns = 4321, .waits = 50 };

	record(f, &y, sizeof(y));
	record(f, &sp, sizeof(sp));
	record(f, &rs, sizeof(rs));
	record(f, &w, sizeof(w));
	/* a request cut short is a bad record, not a request */
	record(f, &w, sizeof(w.hdr));
	assert_int_equal(f->sink.yields, 1);
	assert_int_equal(f->sink.yield_stack, LS_STACK_MISSING);	/* no dump flag: no stack */
	assert_int_equal(f->sink.samples, 1);
	assert_int_equal(f->sink.resumes, 1);
	assert_int_equal(f->sink.wakers, 1);
	assert_int_equal(f->sink.waker_span_ns, 4321);
	assert_int_equal(f->sink.waker_waits, 50);
	assert_int_equal(f->sink.events, 0);
	assert_int_equal(decoder__stats(f->dec).bad_records, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_wait_entry_is_one_exact_event, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_input_is_counted_not_decoded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_record_waits_for_its_dump_then_is_decoded, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_dump_that_never_comes_is_counted_missing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_spin_and_scheduling_records_go_to_their_sinks, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}

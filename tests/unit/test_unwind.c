// SPDX-License-Identifier: GPL-2.0
/*
 * The unwinder's memo: a dump that repeats a walk done before (the same registers but the
 * program's callee-saved ones, the same words where the walk read) gets its frames without
 * a walk; any word the walk read that differs makes a new walk. Dumps of this test's own
 * stack, taken as the BPF side takes them.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "decode/unwind.h"
#include "decode/usyms.h"
#include "../self_dump.h"

#if defined(SELF_DUMP)
#define MAX_FRAMES 64

struct fixture {
	struct usyms *usyms;
	struct unwind *memo, *fresh;
};

struct walk_out {
	int n;
	bool truncated;
	uint64_t ips[MAX_FRAMES];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	assert_int_equal(usyms__new(&(struct usyms_opts){ .max_procs = 4 }, &f->usyms), 0);
	assert_int_equal(unwind__new(f->usyms, 4, &f->memo), 0);
	assert_int_equal(unwind__new(f->usyms, 4, &f->fresh), 0);
	unwind__memo(f->fresh, false);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	unwind__free(f->memo);
	unwind__free(f->fresh);
	usyms__free(f->usyms);
	free(f);
	return 0;
}

static struct walk_out walk(struct unwind *u, const struct ls_ustack_rec *r)
{
	struct walk_out w = {};
	bool by_cfi;

	w.n = unwind__stack(u, r, r->hdr.size, w.ips, MAX_FRAMES, &w.truncated, &by_cfi);
	assert_true(by_cfi);
	return w;
}

static uint64_t memo_hits(const struct unwind *u)
{
	struct unwind_stats st;

	unwind__stats(u, &st);
	return st.memo_hits;
}

static void assert_same(const struct walk_out *a, const struct walk_out *b)
{
	assert_int_equal(a->n, b->n);
	assert_int_equal(a->truncated, b->truncated);
	assert_memory_equal(a->ips, b->ips, a->n * sizeof(a->ips[0]));
}

/* Deep enough that the walk reads words of several frames. */
static struct ls_ustack_rec *__attribute__((noinline)) dump_at(int depth)
{
	volatile char frame[48];
	struct ls_ustack_rec *r;

	frame[0] = depth;
	r = depth ? dump_at(depth - 1) : self_dump(LS_USTACK_DEF_BYTES);
	(void)frame[0];
	return r;
}

static void test_a_repeated_walk_comes_from_the_memo(void **state)
{
	struct fixture *f = *state;
	struct ls_ustack_rec *r = dump_at(3);
	struct walk_out first, again, afresh;

	assert_non_null(r);
	first = walk(f->memo, r);
	assert_true(first.n >= 5);	/* self_dump, 4 of dump_at, and on */
	assert_int_equal(memo_hits(f->memo), 0);
	again = walk(f->memo, r);
	assert_int_equal(memo_hits(f->memo), 1);
	afresh = walk(f->fresh, r);
	assert_same(&again, &afresh);
	assert_same(&first, &afresh);
	free(r);
}

static void test_a_callee_saved_register_is_not_in_the_key(void **state)
{
	struct fixture *f = *state;
	struct ls_ustack_rec *r = dump_at(2);
	struct walk_out first, again, afresh;

	assert_non_null(r);
	first = walk(f->memo, r);
	r->regs[3] ^= 0x5a5a;	/* rbx: a loop's counter, say */
	again = walk(f->memo, r);
	assert_int_equal(memo_hits(f->memo), 1);
	assert_same(&first, &again);
	afresh = walk(f->fresh, r);
	assert_same(&again, &afresh);
	free(r);
}

static void test_a_word_the_walk_read_makes_a_new_walk(void **state)
{
	struct fixture *f = *state;
	struct ls_ustack_rec *r = dump_at(3);
	struct walk_out first, changed, afresh;
	uint64_t *words;
	size_t i, at = SIZE_MAX;

	assert_non_null(r);
	first = walk(f->memo, r);
	assert_true(first.n >= 4);
	/* the return address into the second caller: a word the walk read */
	words = (uint64_t *)r->stack;
	for (i = 0; i < r->stack_bytes / sizeof(*words) && at == SIZE_MAX; i++)
		if (words[i] == first.ips[2])
			at = i;
	assert_true(at != SIZE_MAX);
	/* another return address (dump_at's recursion returns to one address: one further out) */
	for (i = 3; i < (size_t)first.n && first.ips[i] == first.ips[2]; i++)
		;
	assert_true(i < (size_t)first.n);
	words[at] = first.ips[i];	/* a different, valid walk */
	changed = walk(f->memo, r);
	assert_int_equal(memo_hits(f->memo), 0);
	afresh = walk(f->fresh, r);
	assert_same(&changed, &afresh);
	assert_true(changed.n != first.n || memcmp(changed.ips, first.ips, first.n * sizeof(first.ips[0])));
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_a_repeated_walk_comes_from_the_memo, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_callee_saved_register_is_not_in_the_key, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_word_the_walk_read_makes_a_new_walk, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
#else
int main(void)
{
	/* the dumps are taken as the x86-64 BPF side takes them (tests/self_dump.h) */
	fprintf(stderr, "test_unwind: dumps of this process are taken on x86-64 only\n");
	return 0;
}
#endif

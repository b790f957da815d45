// SPDX-License-Identifier: GPL-2.0
/*
 * The unwinder's input: a stack dump record (bpf/ustack.h) whose registers and stack bytes
 * come from the traced process, so from anyone. The dump is taken to be of this process
 * (pid and tid are replaced by ours), so the walk runs over real mappings and real CFI
 * while the registers, the window and the header are the fuzzer's; the frames found are
 * then normalized and named as a query would. Each input is walked twice by an unwinder
 * that memoizes walks across inputs, as the daemon's does, and once by one that does not:
 * the three must agree.
 *
 * LOCKSCOPE_FUZZ_SEEDS=DIR: instead of fuzzing, write dumps of this process's own stack,
 * taken as the BPF side takes them (registers, then the window above the stack pointer),
 * at several depths and window sizes.
 */
#include <stddef.h>
#include <unistd.h>
#include "decode/unwind.h"
#include "decode/usyms.h"
#include "fuzz.h"
#include "../self_dump.h"

#define FUZZ_MAX_FRAMES 128
#define FUZZ_SEED_DEPTHS 6

static const size_t seed_windows[] = { LS_USTACK_MIN_BYTES, LS_USTACK_DEF_BYTES, 8192 };

#if defined(SELF_DUMP)
static void __attribute__((noinline)) write_dump(unsigned int *n)
{
	size_t i;

	for (i = 0; i < sizeof(seed_windows) / sizeof(seed_windows[0]); i++) {
		struct ls_ustack_rec *r = self_dump(seed_windows[i]);
		FILE *f = fuzz_seed_open("unwind", (*n)++);

		if (!r || !f)
			exit(1);
		fwrite(r, 1, r->hdr.size, f);
		fclose(f);
		free(r);
	}
}

static void __attribute__((noinline)) write_seeds(unsigned int depth, unsigned int *n)
{
	volatile char frame[64];	/* frames of different sizes on the way down */

	frame[0] = depth;
	if (depth)
		write_seeds(depth - 1, n);
	else
		write_dump(n);
	write_dump(n);
	(void)frame[0];
}
#else
static void write_seeds(unsigned int depth, unsigned int *n)
{
	(void)depth;
	(void)n;
	fprintf(stderr, "fuzz_unwind: seeds are written on x86-64 only\n");
}
#endif

/* One walk's answer, to compare a memoized walk with a fresh one. */
struct walk_out {
	int n;
	bool truncated, by_cfi;
	uint64_t ips[FUZZ_MAX_FRAMES];
};

static void walk(struct unwind *u, const struct ls_ustack_rec *r, size_t size, struct walk_out *out)
{
	memset(out, 0, sizeof(*out));
	out->n = unwind__stack(u, r, size, out->ips, FUZZ_MAX_FRAMES, &out->truncated, &out->by_cfi);
}

/* A memo must answer exactly what a walk would: else the input is a finding. */
static void same_walk(const struct walk_out *a, const struct walk_out *b, const char *what)
{
	if (a->n == b->n && a->truncated == b->truncated && a->by_cfi == b->by_cfi &&
	    (a->n <= 0 || !memcmp(a->ips, b->ips, a->n * sizeof(a->ips[0]))))
		return;
	fprintf(stderr, "fuzz_unwind: %s: %d frames (truncated %d) against %d (truncated %d) walked afresh\n",
		what, a->n, a->truncated, b->n, b->truncated);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct usyms *usyms;
	static struct unwind *unwind, *fresh;
	static struct walk_out first, again, afresh;
	uint64_t codes[FUZZ_MAX_FRAMES];
	struct ls_ustack_rec *r;
	int i;

	if (fuzz_seed_dir()) {
		unsigned int seeds = 0;

		write_seeds(FUZZ_SEED_DEPTHS, &seeds);
		fprintf(stderr, "fuzz_unwind: %u seeds written\n", seeds);
		_exit(0);	/* libFuzzer takes exit() for a finding */
	}
	/* @unwind memoizes across inputs, as the daemon's does; @fresh walks every time */
	if (!unwind) {
		if (usyms__new(&(struct usyms_opts){ .max_procs = 4 }, &usyms) ||
		    unwind__new(usyms, 4, &unwind) || unwind__new(usyms, 4, &fresh))
			exit(1);
		unwind__memo(fresh, false);
	}
	/* as the ring gives it: aligned, and with the record's own room */
	r = calloc(1, size > sizeof(*r) ? size : sizeof(*r));
	if (!r)
		return 0;
	memcpy(r, data, size);
	if (size >= offsetof(struct ls_ustack_rec, nregs))
		r->pid = r->tid = getpid();
	walk(unwind, r, size, &first);
	walk(unwind, r, size, &again);
	walk(fresh, r, size, &afresh);
	same_walk(&first, &afresh, "first walk");
	same_walk(&again, &afresh, "second walk (memo)");
	if (first.n > 0) {
		usyms__normalize(usyms, getpid(), first.ips, first.n, codes);
		for (i = 0; i < first.n; i++) {
			struct uframe f;

			usyms__frame(usyms, codes[i], &f);
		}
	}
	free(r);
	return 0;
}

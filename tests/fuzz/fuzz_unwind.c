// SPDX-License-Identifier: GPL-2.0
/*
 * The unwinder's input: a stack dump record (bpf/ustack.h) whose registers and stack bytes
 * come from the traced process, so from anyone. The dump is taken to be of this process
 * (pid and tid are replaced by ours), so the walk runs over real mappings and real CFI
 * while the registers, the window and the header are the fuzzer's; the frames found are
 * then normalized and named as a query would.
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

#define FUZZ_MAX_FRAMES 128
#define FUZZ_SEED_DEPTHS 6

static const size_t seed_windows[] = { LS_USTACK_MIN_BYTES, LS_USTACK_DEF_BYTES, 8192 };

#if defined(__x86_64__)
/* The end of the main thread's stack, from /proc/self/maps. */
static uint64_t stack_end(void)
{
	unsigned long lo, hi = 0;
	char line[512];
	FILE *f = fopen("/proc/self/maps", "re");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			break;
	if (f)
		fclose(f);
	return hi;
}

/* The raw stack as BPF reads it, redzones included: not a read the sanitizer should check. */
static void __attribute__((no_sanitize("address"))) copy_stack(uint8_t *dst, uint64_t src, size_t n)
{
	const volatile uint8_t *p = (const volatile uint8_t *)src;
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = p[i];
}

static void __attribute__((noinline)) write_dump(unsigned int *n)
{
	uint64_t regs[LS_UREGS_X86_64] = {}, end = stack_end();
	size_t i;

	/* DWARF numbering: rbx 3, rbp 6, rsp 7, r12..r15 12..15, rip 16 */
	__asm__ volatile("mov %%rbx, %0; mov %%rbp, %1; mov %%rsp, %2; mov %%r12, %3; mov %%r13, %4;"
			 "mov %%r14, %5; mov %%r15, %6; lea 0(%%rip), %7"
			 : "=m"(regs[3]), "=m"(regs[6]), "=m"(regs[7]), "=m"(regs[12]), "=m"(regs[13]),
			   "=m"(regs[14]), "=m"(regs[15]), "=r"(regs[16]));
	for (i = 0; i < sizeof(seed_windows) / sizeof(seed_windows[0]); i++) {
		size_t bytes = seed_windows[i] < end - regs[7] ? seed_windows[i] : end - regs[7];
		struct ls_ustack_rec *r = calloc(1, sizeof(*r) + bytes);
		FILE *f = fuzz_seed_open("unwind", (*n)++);

		if (!r || !f)
			exit(1);
		r->hdr.type = LS_REC_USTACK;
		r->hdr.size = sizeof(*r) + bytes;
		r->pid = r->tid = getpid();
		r->nregs = LS_UREGS_X86_64;
		r->stack_bytes = bytes;
		memcpy(r->regs, regs, sizeof(regs));
		copy_stack(r->stack, regs[7], bytes);
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct usyms *usyms;
	static struct unwind *unwind;
	uint64_t ips[FUZZ_MAX_FRAMES], codes[FUZZ_MAX_FRAMES];
	struct ls_ustack_rec *r;
	bool truncated, by_cfi;
	int i, n;

	if (fuzz_seed_dir()) {
		unsigned int seeds = 0;

		write_seeds(FUZZ_SEED_DEPTHS, &seeds);
		fprintf(stderr, "fuzz_unwind: %u seeds written\n", seeds);
		_exit(0);	/* libFuzzer takes exit() for a finding */
	}
	if (!unwind && (usyms__new(&(struct usyms_opts){ .max_procs = 4 }, &usyms) ||
			unwind__new(usyms, 4, &unwind)))
		exit(1);
	/* as the ring gives it: aligned, and with the record's own room */
	r = calloc(1, size > sizeof(*r) ? size : sizeof(*r));
	if (!r)
		return 0;
	memcpy(r, data, size);
	if (size >= offsetof(struct ls_ustack_rec, nregs))
		r->pid = r->tid = getpid();
	n = unwind__stack(unwind, r, size, ips, FUZZ_MAX_FRAMES, &truncated, &by_cfi);
	if (n > 0) {
		usyms__normalize(usyms, getpid(), ips, n, codes);
		for (i = 0; i < n; i++) {
			struct uframe f;

			usyms__frame(usyms, codes[i], &f);
		}
	}
	free(r);
	return 0;
}

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A user stack dump of the calling thread, taken as the BPF side takes one (bpf/ustack.h:
 * the registers, then the window above the stack pointer), for the unwinder's tests and
 * its fuzz target's seeds. x86-64 only.
 */
#ifndef __LS_TESTS_SELF_DUMP_H
#define __LS_TESTS_SELF_DUMP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ustack.h"

#if defined(__x86_64__)
#define SELF_DUMP 1

/* The end of the main thread's stack, from /proc/self/maps. */
static uint64_t self_stack_end(void)
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
static void __attribute__((no_sanitize("address"))) self_copy_stack(uint8_t *dst, uint64_t src, size_t n)
{
	const volatile uint8_t *p = (const volatile uint8_t *)src;
	size_t i;

	for (i = 0; i < n; i++)
		dst[i] = p[i];
}

/*
 * A dump of this function's frame and its callers' with a window of at most @window bytes
 * (less where the stack ends first); NULL without memory. The caller frees it.
 */
static __attribute__((noinline, unused)) struct ls_ustack_rec *self_dump(size_t window)
{
	uint64_t regs[LS_UREGS_X86_64] = {}, end = self_stack_end();
	struct ls_ustack_rec *r;
	size_t bytes;

	/* DWARF numbering: rbx 3, rbp 6, rsp 7, r12..r15 12..15, rip 16 */
	__asm__ volatile("mov %%rbx, %0; mov %%rbp, %1; mov %%rsp, %2; mov %%r12, %3; mov %%r13, %4;"
			 "mov %%r14, %5; mov %%r15, %6; lea 0(%%rip), %7"
			 : "=m"(regs[3]), "=m"(regs[6]), "=m"(regs[7]), "=m"(regs[12]), "=m"(regs[13]),
			   "=m"(regs[14]), "=m"(regs[15]), "=r"(regs[16]));
	bytes = window < end - regs[7] ? window : end - regs[7];
	r = calloc(1, sizeof(*r) + bytes);
	if (!r)
		return NULL;
	r->hdr.type = LS_REC_USTACK;
	r->hdr.size = sizeof(*r) + bytes;
	r->pid = r->tid = getpid();
	r->nregs = LS_UREGS_X86_64;
	r->stack_bytes = bytes;
	memcpy(r->regs, regs, sizeof(regs));
	self_copy_stack(r->stack, regs[7], bytes);
	return r;
}
#endif

#endif

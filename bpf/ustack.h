/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ustack: user stacks for code without frame pointers. Distro glibc, libuv and most
 * production binaries omit them, so a frame-pointer walk from a futex wait ends in libc.
 * Instead a program copies the thread's user registers and a bounded window of its stack
 * into a dump record; the daemon unwinds it with the binaries' .eh_frame/.debug_frame CFI
 * (libdwfl) and names the record that asked for it by the dump's id.
 *
 * Shared by the BPF helper (ustack.bpf.h) and the daemon (unwind.c).
 */
#ifndef __USTACK_H
#define __USTACK_H

#include "lockscope.h"

/*
 * Registers in the architecture's DWARF numbering, as libdwfl's initial frame wants them:
 * x86-64 rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip (0..16); arm64 x0..x30 sp pc (0..32).
 * The record has room for the larger set.
 */
#define LS_UREGS_MAX		33
#define LS_UREGS_X86_64		17
#define LS_UREGS_ARM64		33

enum ls_ustack_limits {
	LS_USTACK_MIN_BYTES	= 1024,
	/* hdr.size is 16 bits and a ring must hold many dumps: 32 KiB is perf's order too */
	LS_USTACK_MAX_BYTES	= 32768,
	LS_USTACK_DEF_BYTES	= 4096,		/* see README: the caller frames are the innermost */
	LS_USTACK_DEF_RATE	= 200,		/* dumps/s per CPU before waits go unstacked */
	LS_USTACK_PAGE		= 4096,
};

enum ls_ustack_flags {
	LS_USTACK_F_SHORT	= 1U << 0,	/* a page of the window could not be read (not
						 * present, or past the stack's end): zeroed */
};

/*
 * A dump id is unique per daemon run: the CPU that took it and that CPU's dump count.
 * The record that names it may arrive first, through another CPU's ring.
 */
#define LS_USTACK_ID_CPU_SHIFT	40

struct ls_ustack_rec {
	struct ls_rec_hdr hdr;
	__u64 id;
	__u32 pid;
	__u32 tid;
	__u32 nregs;		/* registers filled, LS_UREGS_* of the architecture */
	__u32 stack_bytes;	/* bytes of stack from regs[sp] up, <= the configured window */
	__u32 flags;		/* enum ls_ustack_flags */
	__u32 pad;
	__u64 regs[LS_UREGS_MAX];
	__u8 stack[];		/* the configured window's size is reserved */
};

#endif /* __USTACK_H */

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Unwinds user stack dumps (bpf/ustack.h) with the CFI of the binaries the process maps:
 * .eh_frame, or .debug_frame from a separate debug file, through elfutils' libdwfl, which
 * falls back to frame pointers for code without CFI. One libdwfl session per process is
 * kept (least recently used first out), so each binary's CFI is parsed once, not per dump;
 * and a walk that repeats one done before is not walked again (unwind__memo).
 */
#ifndef __LS_UNWIND_H
#define __LS_UNWIND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "ustack.h"

struct unwind;
struct usyms;

struct unwind_stats {
	uint64_t stacks;	/* dumps unwound */
	uint64_t frames;	/* frames they gave */
	uint64_t truncated;	/* ended before the outermost frame (window, CFI, depth) */
	uint64_t window;	/* of those, ended because the frame lay past the window */
	uint64_t failed;	/* gave no frame at all */
	uint64_t bytes_used;	/* sum over the stacks of the window bytes their walk read */
	uint64_t bytes_used_max;
	uint64_t sessions;	/* libdwfl sessions opened (one per process and maps reload) */
	uint64_t frame_pointers;	/* of the stacks, walked by frame pointers (Go code) */
	uint64_t memo_hits;	/* of the stacks, a walk done before at the same registers and words */
	uint64_t ns;		/* time spent unwinding */
};

/* @usyms provides each process's mappings; it must outlive the unwinder. */
int unwind__new(struct usyms *usyms, size_t max_procs, struct unwind **out);
void unwind__free(struct unwind *u);
/*
 * Unwinds dump @r (@size bytes as received) into at most @max absolute addresses in @ips,
 * innermost first (return addresses past the first, as frame-pointer walks give them).
 * Returns the count, or a negative errno when not even the first frame is known.
 * *truncated says the walk stopped before the thread's outermost frame; *by_cfi that it
 * followed CFI (libdw), not frame pointers (code Go built, whose CFI costs more than it adds).
 */
int unwind__stack(struct unwind *u, const struct ls_ustack_rec *r, size_t size, uint64_t *ips,
		  int max, bool *truncated, bool *by_cfi);
/*
 * Whether walks are memoized (on from unwind__new): a dump with the registers (but the
 * program's callee-saved ones) and window size of one unwound before, whose window holds
 * the same words where that walk read, gets that walk's frames without a new walk.
 */
void unwind__memo(struct unwind *u, bool on);
void unwind__stats(const struct unwind *u, struct unwind_stats *out);

#endif

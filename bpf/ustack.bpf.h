/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Copies the current thread's user registers and the top of its user stack into a ring
 * record (struct ls_ustack_rec) for the daemon to unwind with CFI. A frame-pointer walk
 * (bpf_get_stackid) costs ~0.7 us and stops at the first function built without frame
 * pointers; a dump costs about as much again for an 8 KiB window and unwinds through
 * anything that has .eh_frame. Callers decide when a stack is wanted (sampling.bpf.h);
 * this file only decides how.
 *
 * Works for the current task only: its user memory is the one mapped, and
 * bpf_task_pt_regs() holds the registers it entered the kernel with, from a syscall or
 * from an interrupt (a cpu-clock sample that hit user code).
 */
#ifndef __LS_USTACK_BPF_H
#define __LS_USTACK_BPF_H

#include "ustack.h"
#include "common.bpf.h"

/*
 * Bytes of stack per dump, a multiple of 8; 0: frame-pointer stacks only. Read-only after
 * load, so the verifier knows each as a constant, which the ring reservation needs.
 */
const volatile __u32 ustack_bytes = 0;		/* a wait's and its releaser's */
/*
 * The dump window of yield sites, spin samples and bursts: event loops keep large arrays
 * on the stack (libuv's uv__io_poll has 12 KiB of epoll events between a yield and
 * uv_run), and these dumps are few.
 */
const volatile __u32 spin_stack_bytes = 0;

/* Which of the two windows a dump copies. */
enum ustack_window {
	USTACK_WAIT,	/* ustack_bytes */
	USTACK_SPIN,	/* spin_stack_bytes */
};

#if defined(__TARGET_ARCH_x86)
/* pt_regs in DWARF register order (see ustack.h) */
static __always_inline __u32 ustack_regs(__u64 *out, const struct pt_regs *r)
{
	out[0] = r->ax; out[1] = r->dx; out[2] = r->cx; out[3] = r->bx;
	out[4] = r->si; out[5] = r->di; out[6] = r->bp; out[7] = r->sp;
	out[8] = r->r8; out[9] = r->r9; out[10] = r->r10; out[11] = r->r11;
	out[12] = r->r12; out[13] = r->r13; out[14] = r->r14; out[15] = r->r15;
	out[16] = r->ip;
	return LS_UREGS_X86_64;
}
#define USTACK_SP(r) ((r)->sp)
#elif defined(__TARGET_ARCH_arm64)
static __always_inline __u32 ustack_regs(__u64 *out, const struct pt_regs *r)
{
	int i;

	for (i = 0; i < 31; i++)
		out[i] = r->regs[i];
	out[31] = r->sp;
	out[32] = r->pc;
	return LS_UREGS_ARM64;
}
#define USTACK_SP(r) ((r)->sp)
#else
#error "ustack reads user registers: only x86 and arm64 are supported"
#endif

/*
 * Where a window is assembled page by page when one read of it fails. Room for a page
 * past the largest window: the verifier cannot tie a page's offset to the window's end.
 * One per CPU, in a plain array the daemon sizes to the CPU count (a per-CPU array's
 * values are limited to 32 KiB). A program that interrupts another on the same CPU (a
 * cpu-clock sample during sched_waking) can overwrite a window being assembled: that
 * needs both to take the slow path at once, and costs one wrong stack.
 */
struct ustack_scratch {
	__u8 data[LS_USTACK_MAX_BYTES + LS_USTACK_PAGE];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct ustack_scratch);
} ustack_scratch SEC(".maps");

/*
 * Reads the window above @sp into @dst. One read usually does it. When it fails, some
 * page of the window is not there: never touched (the unused part of a large local
 * array: libuv's uv__io_poll keeps 12 KiB of epoll events on the stack) or past the end
 * of a main thread's stack. Then the window is read a page at a time; a page that cannot
 * be read stays zeroed (the helper clears on failure, and the unwinder finds no return
 * address in zeros) and the window ends after the last page read. Returns the bytes of
 * window, 0 when not even @sp's page could be read.
 */
static __always_inline __u32 ustack_copy(void *dst, __u64 sp, __u32 *flags, __u32 bytes)
{
	/* 64-bit: a bound checked on a 32-bit value does not carry over to the helper's arg */
	__u64 off = 0, len = LS_USTACK_PAGE - (sp & (LS_USTACK_PAGE - 1)), end = 0;
	struct ustack_scratch *scratch;
	__u32 cpu = bpf_get_smp_processor_id();
	int i;

	if (!bpf_probe_read_user(dst, bytes, (void *)sp))
		return bytes;
	*flags |= LS_USTACK_F_SHORT;
	scratch = bpf_map_lookup_elem(&ustack_scratch, &cpu);
	if (!scratch)
		return 0;
	for (i = 0; i < LS_USTACK_MAX_BYTES / LS_USTACK_PAGE + 1; i++) {
		if (off >= bytes || off >= LS_USTACK_MAX_BYTES)
			break;
		if (len > LS_USTACK_PAGE)
			len = LS_USTACK_PAGE;
		if (!bpf_probe_read_user(scratch->data + off, len, (void *)(sp + off)))
			end = off + len;
		else if (!off)
			return 0;
		off += len;
		len = LS_USTACK_PAGE;
	}
	if (end > bytes)
		end = bytes;
	bpf_probe_read_kernel(dst, bytes, scratch->data);
	return end;
}

/*
 * Writes a dump of the current thread with the window @which and returns its id, or 0
 * when there is none (dumps off, kernel thread, ring full, stack not readable; the last
 * two are counted). A sampler's dump is @lazy: it does not wake the reader
 * (ls_submit_lazy()). A global function, verified once: every dump is sampled and copies
 * kilobytes, so the call costs nothing that shows, and inlined at sched_switch's places
 * that dump, its page-by-page copy was a tenth of what the verifier walked there.
 */
__noinline __u64 ustack_dump(enum ustack_window which, bool lazy)
{
	/* a constant on each path: an argument would not be one */
	__u32 bytes = which == USTACK_SPIN ? spin_stack_bytes : ustack_bytes;
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *uregs = (struct pt_regs *)bpf_task_pt_regs(task);
	__u32 key = LS_CNT_UDUMPS, flags = 0, copied;
	struct ls_ustack_rec *r;
	const struct pt_regs *tmp;
	__u64 *seq, id;
	void *rb;

	if (!bytes || !task->mm)
		return 0;
	seq = bpf_map_lookup_elem(&counters, &key);
	rb = ls_ringbuf();
	if (!seq || !rb)
		return 0;
	r = bpf_ringbuf_reserve(rb, sizeof(*r) + bytes, 0);
	if (!r) {
		ls_count(LS_DROP_RINGBUF);
		return 0;
	}
	/* the stack window is scratch space for the registers first: no room on the BPF stack */
	tmp = (const struct pt_regs *)r->stack;
	if (bpf_probe_read_kernel(r->stack, sizeof(*tmp), uregs))
		goto discard;
	r->nregs = ustack_regs(r->regs, tmp);
	copied = ustack_copy(r->stack, USTACK_SP(tmp), &flags, bytes);
	if (!copied)
		goto discard;
	*seq += 1;	/* per-CPU slot: the sequence part of the id */
	id = ((__u64)bpf_get_smp_processor_id() << LS_USTACK_ID_CPU_SHIFT) | *seq;
	ls_hdr_init(&r->hdr, LS_REC_USTACK, sizeof(*r) + bytes);
	r->id = id;
	r->pid = task->tgid;
	r->tid = task->pid;
	r->stack_bytes = copied;
	r->flags = flags;
	r->pad = 0;
	if (flags & LS_USTACK_F_SHORT)
		ls_count(LS_CNT_UDUMP_SHORT);
	if (lazy)
		ls_submit_lazy(rb, r);
	else
		ls_submit(rb, r);
	return id;
discard:
	bpf_ringbuf_discard(r, BPF_RB_NO_WAKEUP);
	ls_count(LS_DROP_UDUMP_FAILED);
	return 0;
}

#endif /* __LS_USTACK_BPF_H */

// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <elfutils/libdwfl.h>
#include "decode/unwind.h"
#include "decode/usyms.h"
#include "lib/clock.h"
#include "lib/log.h"

/* Architecture's DWARF register numbers (ustack.h): the stack pointer and how many regs. */
#if defined(__x86_64__)
#define DW_REG_FP	6	/* rbp */
#define DW_REG_SP	7
#define DW_NREGS	17	/* rax..r15, rip: rip is the return-address column */
#elif defined(__aarch64__)
#define DW_REG_FP	29
#define DW_REG_SP	31
#define DW_NREGS	32	/* x0..x30, sp: the pc is passed separately */
#else
#error "unwind: only x86-64 and arm64 dumps are understood"
#endif

/*
 * The registers a memo's key leaves out: the callee-saved ones other than the frame
 * pointer, which hold the program's own values (a loop's counter, a pointer) and differ
 * from one wait to the next at the same call site. Compilers compute a frame's CFA from
 * the stack pointer, the frame pointer or a scratch register (a realigning prologue's),
 * never from these; the copies outer frames restore are read from the window, and reads
 * are compared. Every other register is part of the key.
 */
#if defined(__x86_64__)
#define DW_CALLEE_SAVED ((1ULL << 3) | (0xfULL << 12))		/* rbx, r12..r15 */
#else
#define DW_CALLEE_SAVED (0x3ffULL << 19)			/* x19..x28 */
#endif

/*
 * A memo of one walk, so that a thread that waits again at the same call site is not
 * unwound again (libdw costs 5-15 us a walk): the walk is a function of the dump's
 * registers, its window's size, the depth asked for and the words of the window it read,
 * and the memo keeps all of them. Go's frame-pointer walks are cheap and are not kept.
 */
enum {
	UW_MEMO_SLOTS	= 16,		/* per process, direct-mapped by the key's hash */
	UW_MEMO_FRAMES	= 48,		/* deeper walks are not kept */
	UW_MEMO_READS	= 96,		/* nor walks that read more words */
};

struct uw_read {
	uint32_t off;			/* from the stack pointer */
	uint64_t val;
};

struct uw_memo {
	uint64_t regs[DW_NREGS + 1];	/* the callee-saved ones zeroed */
	uint32_t nregs, stack_bytes;
	uint16_t max, n, nreads;	/* n 0: slot free */
	bool truncated, window;
	uint64_t used;
	struct uw_read reads[UW_MEMO_READS];
	uint64_t ips[UW_MEMO_FRAMES];
};

struct uw_proc {
	Dwfl *dwfl;			/* NULL: slot free */
	uint32_t pid;
	uint64_t maps_ns;		/* usyms maps the session was built from */
	uint64_t lru;			/* LRU clock */
	/* the dump being unwound: the callbacks read it */
	const struct ls_ustack_rec *cur;
	bool read_outside;		/* CFI asked for memory outside the window */
	uint64_t used;			/* bytes of the window the walk read up to */
	/* the words the walk read, for its memo; more than UW_MEMO_READS: none kept */
	struct uw_read reads[UW_MEMO_READS];
	uint32_t nreads;
	struct uw_memo *memos;		/* UW_MEMO_SLOTS, made at the process's first walk */
};

struct unwind {
	struct usyms *usyms;
	struct uw_proc *procs;
	size_t nr_procs;
	uint64_t clock;
	bool memo;			/* walks are memoized (unwind__memo) */
	struct unwind_stats st;
};

struct walk {
	struct uw_proc *p;
	uint64_t *ips;
	int n, max;
	bool bogus;		/* ended at an address no code can have */
};

#define UNWIND_MIN_PC 4096

static char *debuginfo_path;	/* libdwfl's default search path for separate debug files */

static const Dwfl_Callbacks dwfl_callbacks = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.debuginfo_path = &debuginfo_path,
};

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_argp)
{
	struct uw_proc *p = arg;

	(void)dwfl;
	if (*thread_argp)	/* one thread per walk: the dump's */
		return 0;
	*thread_argp = p;
	return p->cur->tid;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct uw_proc *p = arg;
	const struct ls_ustack_rec *r = p->cur;
	uint64_t sp = r->regs[DW_REG_SP];

	(void)dwfl;
	/* the registers are the traced process's: addr - sp + 8 must not wrap to a small offset */
	if (addr < sp || addr - sp > r->stack_bytes || r->stack_bytes - (addr - sp) < sizeof(*result)) {
		p->read_outside = true;
		return false;
	}
	memcpy(result, r->stack + (addr - sp), sizeof(*result));
	if (p->nreads < UW_MEMO_READS)
		p->reads[p->nreads] = (struct uw_read){ .off = addr - sp, .val = *result };
	p->nreads++;
	if (addr - sp + sizeof(*result) > p->used)
		p->used = addr - sp + sizeof(*result);
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	const struct ls_ustack_rec *r = ((struct uw_proc *)arg)->cur;

	dwfl_thread_state_register_pc(thread, r->regs[r->nregs - 1]);
	/* Dwarf_Word and __u64 are both 64-bit unsigned, spelt differently */
	return dwfl_thread_state_registers(thread, 0, DW_NREGS, (const Dwarf_Word *)r->regs);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

int unwind__new(struct usyms *usyms, size_t max_procs, struct unwind **out)
{
	struct unwind *u = calloc(1, sizeof(*u));

	if (!u)
		return -ENOMEM;
	u->usyms = usyms;
	u->memo = true;
	u->nr_procs = max_procs;
	u->procs = calloc(max_procs, sizeof(*u->procs));
	if (!u->procs) {
		free(u);
		return -ENOMEM;
	}
	*out = u;
	return 0;
}

static void proc_close(struct uw_proc *p)
{
	dwfl_end(p->dwfl);
	free(p->memos);
	memset(p, 0, sizeof(*p));
}

void unwind__free(struct unwind *u)
{
	size_t i;

	if (!u)
		return;
	for (i = 0; i < u->nr_procs; i++)
		proc_close(&u->procs[i]);
	free(u->procs);
	free(u);
}

static int report_module(void *ctx, const char *path, uint64_t bias)
{
	/* a file that is not ELF (or has gone) just has no CFI: not an error */
	dwfl_report_elf(ctx, path, path, -1, bias, false);
	return 0;
}

/* A session for @pid's current maps: the cached one, or a new one in the LRU slot. */
static struct uw_proc *proc_get(struct unwind *u, uint32_t pid)
{
	uint64_t maps_ns = usyms__maps_time(u->usyms, pid);
	struct uw_proc *p = NULL, *lru = &u->procs[0];
	size_t i;

	for (i = 0; i < u->nr_procs && !p; i++) {
		if (u->procs[i].dwfl && u->procs[i].pid == pid)
			p = &u->procs[i];
		else if (u->procs[i].lru < lru->lru)
			lru = &u->procs[i];
	}
	if (p && p->maps_ns == maps_ns)
		goto found;
	if (!p)
		p = lru;
	proc_close(p);
	p->dwfl = dwfl_begin(&dwfl_callbacks);
	if (!p->dwfl)
		return NULL;
	dwfl_report_begin(p->dwfl);
	usyms__modules(u->usyms, pid, report_module, p->dwfl);
	if (dwfl_report_end(p->dwfl, NULL, NULL) ||
	    !dwfl_attach_state(p->dwfl, NULL, pid, &thread_callbacks, p)) {
		pr_debug("unwind: pid %u: %s\n", pid, dwfl_errmsg(-1));
		proc_close(p);
		return NULL;
	}
	p->pid = pid;
	p->maps_ns = maps_ns;
	u->st.sessions++;
found:
	p->lru = ++u->clock;
	return p;
}

static int frame_cb(Dwfl_Frame *state, void *arg)
{
	struct walk *w = arg;
	Dwarf_Addr pc;

	if (!dwfl_frame_pc(state, &pc, NULL))
		return DWARF_CB_ABORT;
	/*
	 * No code lives in the first page: a return address there is a frame-pointer guess
	 * that read a saved register, not a frame. The walk ends, truncated.
	 */
	if (pc < UNWIND_MIN_PC) {
		w->bogus = true;
		return DWARF_CB_ABORT;
	}
	w->ips[w->n++] = pc;
	return w->n < w->max ? DWARF_CB_OK : DWARF_CB_ABORT;
}

/*
 * Go code: its compiler keeps a frame pointer in every function on x86-64 and arm64, and
 * its CFI is a compressed .debug_frame that libdw inflates again with every session (a
 * large Go server costs tens of ms a stack that way, and its waits are many). A frame
 * record is {caller's frame pointer, return address} at the frame pointer; the walk
 * follows them up the dump while they lie in it and climb. It misses the caller of a
 * frameless leaf (the runtime's syscall stubs), as every frame-pointer unwinder does.
 */
static int fp_walk(const struct ls_ustack_rec *r, uint64_t *ips, int max, bool *truncated, uint64_t *used)
{
	uint64_t sp = r->regs[DW_REG_SP], fp = r->regs[DW_REG_FP], rec[2];
	int n = 0;

	ips[n++] = r->regs[r->nregs - 1];
	*truncated = true;
	while (n < max) {
		if (!fp) {		/* the outermost frame's */
			*truncated = false;
			break;
		}
		if (fp < sp || fp - sp > r->stack_bytes || r->stack_bytes - (fp - sp) < sizeof(rec))
			break;		/* past the window */
		memcpy(rec, r->stack + (fp - sp), sizeof(rec));
		if (fp - sp + sizeof(rec) > *used)
			*used = fp - sp + sizeof(rec);
		if (rec[1] < UNWIND_MIN_PC) {
			*truncated = rec[1] != 0;
			break;
		}
		ips[n++] = rec[1];
		if (rec[0] && rec[0] <= fp)	/* frames climb the stack; anything else is not one */
			break;
		fp = rec[0];
	}
	return n;
}

/* @r's registers as a memo's key: the callee-saved ones (DW_CALLEE_SAVED) zeroed. */
static uint32_t memo_key(const struct ls_ustack_rec *r, uint64_t key[DW_NREGS + 1])
{
	uint64_t h = r->stack_bytes;
	uint32_t i;

	for (i = 0; i < r->nregs; i++) {
		key[i] = (DW_CALLEE_SAVED >> i) & 1 ? 0 : r->regs[i];
		h = (h ^ key[i]) * 0x100000001b3ULL;	/* FNV-1a's prime, a word at a time */
	}
	return (uint32_t)(h ^ (h >> 32)) % UW_MEMO_SLOTS;
}

/* The memo of a walk @r repeats exactly, or NULL. */
static const struct uw_memo *memo_find(const struct uw_proc *p, const struct ls_ustack_rec *r,
				       const uint64_t *key, uint32_t slot, int max)
{
	const struct uw_memo *m = p->memos ? &p->memos[slot] : NULL;
	uint32_t i;

	if (!m || !m->n || m->nregs != r->nregs || m->stack_bytes != r->stack_bytes || m->max != max ||
	    memcmp(m->regs, key, r->nregs * sizeof(*key)))
		return NULL;
	/* the same window size: every word the walk read lies in this one too */
	for (i = 0; i < m->nreads; i++)
		if (memcmp(r->stack + m->reads[i].off, &m->reads[i].val, sizeof(m->reads[i].val)))
			return NULL;
	return m;
}

/* Keeps the walk of @r just done (its words read are in @p) in its slot, if small enough. */
static void memo_keep(struct uw_proc *p, const struct ls_ustack_rec *r, const uint64_t *key, uint32_t slot,
		      int max, const uint64_t *ips, int n, bool truncated, bool window, uint64_t used)
{
	struct uw_memo *m;

	if (n <= 0 || n > UW_MEMO_FRAMES || p->nreads > UW_MEMO_READS || max > UINT16_MAX)
		return;
	if (!p->memos && !(p->memos = calloc(UW_MEMO_SLOTS, sizeof(*p->memos))))
		return;		/* no memo: every walk is unwound */
	m = &p->memos[slot];
	memcpy(m->regs, key, r->nregs * sizeof(*key));
	m->nregs = r->nregs;
	m->stack_bytes = r->stack_bytes;
	m->max = max;
	m->n = n;
	m->nreads = p->nreads;
	m->truncated = truncated;
	m->window = window;
	m->used = used;
	memcpy(m->reads, p->reads, p->nreads * sizeof(*p->reads));
	memcpy(m->ips, ips, n * sizeof(*ips));
}

int unwind__stack(struct unwind *u, const struct ls_ustack_rec *r, size_t size, uint64_t *ips,
		  int max, bool *truncated, bool *by_cfi)
{
	struct walk w = { .ips = ips, .max = max };
	uint64_t t0 = ls_now_ns(), used = 0, key[DW_NREGS + 1];
	const struct uw_memo *m;
	uint32_t slot;
	bool window = false;
	int ret;

	*truncated = false;
	*by_cfi = false;
	if (size < sizeof(*r) || r->stack_bytes > size - sizeof(*r) ||
	    (r->nregs != DW_NREGS && r->nregs != DW_NREGS + 1) || max <= 0)
		return -EINVAL;
	/* the maps must be the process's: see them (once, cached) before it can exit */
	usyms__see(u->usyms, r->pid);
	if (usyms__go_code(u->usyms, r->pid, r->regs[r->nregs - 1])) {
		w.n = fp_walk(r, ips, max, truncated, &used);
		window = *truncated && used + 2 * sizeof(uint64_t) > r->stack_bytes;
		u->st.frame_pointers++;
	} else {
		*by_cfi = true;
		w.p = proc_get(u, r->pid);
		if (!w.p) {
			u->st.failed++;
			return -ENOENT;
		}
		slot = memo_key(r, key);
		if ((m = memo_find(w.p, r, key, slot, max))) {
			memcpy(ips, m->ips, m->n * sizeof(*ips));
			w.n = m->n;
			*truncated = m->truncated;
			window = m->window;
			used = m->used;
			u->st.memo_hits++;
		} else {
			w.p->cur = r;
			w.p->read_outside = false;
			w.p->used = 0;
			w.p->nreads = 0;
			ret = dwfl_getthread_frames(w.p->dwfl, r->tid, frame_cb, &w);
			/*
			 * 0: the outermost frame (its CFI leaves the return address undefined)
			 * was reached. Anything else ended early: the window, missing CFI and a
			 * frame-pointer guess that led nowhere, or the depth limit.
			 */
			*truncated = ret != 0 || w.p->read_outside || w.bogus;
			window = *truncated && w.p->read_outside;
			used = w.p->used;
			w.p->cur = NULL;
			if (u->memo)
				memo_keep(w.p, r, key, slot, max, ips, w.n, *truncated, window, used);
		}
	}
	u->st.ns += ls_now_ns() - t0;
	if (!w.n) {
		u->st.failed++;
		return -ENOENT;
	}
	u->st.stacks++;
	u->st.frames += w.n;
	u->st.truncated += *truncated;
	u->st.window += window;
	u->st.bytes_used += used;
	if (used > u->st.bytes_used_max)
		u->st.bytes_used_max = used;
	return w.n;
}

void unwind__memo(struct unwind *u, bool on)
{
	size_t i;

	u->memo = on;
	for (i = 0; !on && i < u->nr_procs; i++) {
		free(u->procs[i].memos);
		u->procs[i].memos = NULL;
	}
}

void unwind__stats(const struct unwind *u, struct unwind_stats *out)
{
	*out = u->st;
}

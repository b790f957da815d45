// SPDX-License-Identifier: GPL-2.0
/*
 * The decoder (see records.h): ring records and wait-table entries into store events,
 * with their stacks read, unwound and interned and their owners checked.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "collect/collector.h"
#include "decode/dumps.h"
#include "decode/ksyms.h"
#include "decode/records.h"
#include "decode/stackids.h"
#include "decode/unwind.h"
#include "decode/usyms.h"
#include "lib/clock.h"
#include "lib/htab.h"
#include "store/stacks.h"
#include "klock.h"
#include "scheduler.h"
#include "ustack.h"

/* A thread named as a lock owner is checked in /proc again after this long. */
#define OWNER_CHECK_NS (10 * NSEC_PER_SEC)
#define OWNER_CACHE_MAX 65536

struct owner_key {
	uint32_t pid, tid;
};

struct owner_info {
	uint64_t checked_ns;
	bool valid;		/* a live thread of pid */
	char comm[LS_COMM_LEN];
};

/*
 * A record whose stack dump has not arrived yet (it went through another CPU's ring),
 * kept until the next drain of every ring has run.
 */
struct parked {
	struct parked *next;
	uint64_t pass;		/* the drain it arrived in */
	size_t size;
	uint64_t data[];	/* the record, 8-byte aligned like the ring's */
};

struct decoder {
	struct decoder_opts opts;
	struct stack_ids *kstacks, *ustacks;
	struct htab *owners;		/* owner_key -> owner_info */
	struct parked *parked;
	uint64_t pass;			/* drains so far */
	bool last_chance;		/* resolving parked records whose dumps are lost */
	uint64_t now_ns;		/* at the last tick: cheap time for the record path */
	struct decoder_stats st;
};

static uint32_t normalize_flags(uint32_t flags)
{
	/* a mutex that spun first and then slept is one mutex wait */
	if (flags & KLOCK_F_MUTEX)
		return KLOCK_F_MUTEX;
	return flags;
}

static int handle_klock(struct decoder *d, const struct klock_wait_rec *r, size_t size)
{
	struct agg_event ev = {};

	if (size < KLOCK_WAIT_REC_MIN_SIZE) {
		d->st.bad_records++;
		return 0;
	}
	/* a sampled wait: its figures are in the exact entry already, its stacks are here */
	ev.key.sampled = 1;
	ev.key.lock = r->lock_addr;
	ev.key.pid = r->pid;
	ev.key.tid = r->tid;
	ev.key.flags = normalize_flags(r->lcb_flags);
	ev.key.name = r->rec_flags & KLOCK_RF_MMAP_LOCK ? LS_NAME_MMAP_LOCK :
		      r->rec_flags & KLOCK_RF_SIGLOCK ? LS_NAME_SIGLOCK : LS_NAME_NONE;
	if (r->rec_flags & KLOCK_RF_STACK)
		ev.key.stack = stack_ids__intern(d->kstacks, r->stack_id, 0, d->now_ns, &d->st.stack_read_failed);
	else if (r->rec_flags & KLOCK_RF_SAMPLED)
		ev.key.stack = LS_STACK_MISSING;
	if (r->rec_flags & KLOCK_RF_OWNER) {
		ev.key.owner_pid = r->owner_pid;
		ev.key.owner_tid = r->owner_tid;
		ev.owner_comm = r->owner_comm;
	}
	if ((r->rec_flags & KLOCK_RF_OWNER_STACK) && size >= sizeof(*r) && r->owner_nr &&
	    r->owner_nr <= KLOCK_OWNER_STACK_DEPTH &&
	    stacks__intern(d->opts.stacks, (const uint64_t *)r->owner_ips, r->owner_nr, 0,
			   &ev.key.owner_stack))
		ev.key.owner_stack = LS_STACK_NONE;
	ev.wait_ns = r->wait_ns;
	ev.comm = r->comm;
	d->opts.sink.event(d->opts.sink.ctx, &ev);
	return 0;
}

/*
 * The owner a futex word names, verified: it must be a live thread of the waiter's own
 * process (glibc writes __owner in the same process; any other number there is not a tid).
 */
static bool owner_lookup(struct decoder *d, uint32_t pid, uint32_t tid, const char **comm)
{
	struct owner_key k = { pid, tid };
	struct owner_info *oi;
	char path[64];
	int created = 0;
	FILE *f;

	oi = htab__upsert(d->owners, &k, &created, NULL);
	if (!oi) {		/* full: start over rather than stop naming owners */
		htab__clear(d->owners);
		oi = htab__upsert(d->owners, &k, &created, NULL);
		if (!oi)
			return false;
	}
	if (created || d->now_ns - oi->checked_ns >= OWNER_CHECK_NS) {
		snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, tid);
		f = fopen(path, "re");
		oi->valid = f && fgets(oi->comm, sizeof(oi->comm), f);
		if (f)
			fclose(f);
		oi->comm[strcspn(oi->comm, "\n")] = 0;
		/* a thread that exited keeps the name it had when we last saw it */
		if (!oi->valid && !created && oi->comm[0])
			oi->valid = true;
		oi->checked_ns = d->now_ns;
	}
	*comm = oi->comm;
	return oi->valid;
}

/* Where a user lock lives: (object, offset) for shared futexes, else the address. */
static void ulock_where(struct decoder *d, struct agg_key *k, uint32_t pid, uint64_t uaddr, bool shared)
{
	if (shared && !usyms__shared_key(d->opts.usyms, pid, uaddr, &k->object, &k->lock))
		return;
	k->object = 0;
	k->lock = uaddr;
}

/* The owner a futex word named (@owner, 0: none), if it is a thread of the waiter's process. */
static void ulock_owner(struct decoder *d, uint32_t pid, uint32_t tid, uint32_t owner, struct agg_event *ev)
{
	if (!owner || owner == tid || !owner_lookup(d, pid, owner, &ev->owner_comm))
		return;
	ev->key.owner_pid = pid;
	ev->key.owner_tid = owner;
}

/* The owner a sampled wait's words name, as the BPF side reads them for the table. */
static uint32_t word_owner(const struct ulock_wait_rec *r, uint32_t type)
{
	if (!(r->rec_flags & ULOCK_RF_WORDS))
		return 0;
	if (type == LS_UTYPE_PI)
		return r->word0 & ULOCK_FUTEX_TID_MASK;
	return type == LS_UTYPE_MUTEX ? r->word8 : 0;
}

/* What waits and holder samples share: the process seen, the lock placed, the thread. */
static void ulock_event_init(struct decoder *d, struct agg_event *ev, uint32_t pid, uint32_t tid,
			     uint64_t uaddr, bool shared, const char *comm)
{
	usyms__see(d->opts.usyms, pid);
	ulock_where(d, &ev->key, pid, uaddr, shared);
	ev->key.pid = pid;
	ev->key.tid = tid;
	ev->comm = comm;
}

/* A stack dump: unwound now, while the process's maps are surely the ones it ran with. */
static int handle_ustack(struct decoder *d, const struct ls_ustack_rec *r, size_t size)
{
	uint64_t ips[LS_MAX_STACK_DEPTH];
	uint32_t sid = LS_STACK_MISSING;
	bool truncated, by_cfi;
	int n;

	if (size < sizeof(*r)) {
		d->st.bad_records++;
		return 0;
	}
	n = unwind__stack(d->opts.unwind, r, size, ips, d->opts.max_stack, &truncated, &by_cfi);
	if (n > 0) {
		usyms__normalize(d->opts.usyms, r->pid, ips, n, ips);
		if (stacks__intern(d->opts.stacks, ips, n, (by_cfi ? LS_STACK_F_DWARF : 0) |
				   (truncated ? LS_STACK_F_TRUNCATED : 0), &sid))
			sid = LS_STACK_MISSING;
	}
	if (dumps__put(d->opts.dumps, r->id, sid, d->now_ns))
		d->st.dump_table_full++;
	return 0;
}

/* Whether dump @id is here to be taken (or never will be: then it is counted missing). */
static bool dump_ready(struct decoder *d, uint32_t flags, uint32_t flag, uint64_t id)
{
	uint32_t sid;

	return !(flags & flag) || dumps__find(d->opts.dumps, id, &sid) || d->last_chance;
}

/* The stack dump @id unwound to; LS_STACK_MISSING when it never arrived. */
static uint32_t dump_stack(struct decoder *d, uint64_t id)
{
	uint32_t sid;

	if (dumps__take(d->opts.dumps, id, &sid))
		return sid;
	d->st.dump_missing++;
	return LS_STACK_MISSING;
}

/* A user stack of a record: a dump unwound, a frame-pointer stack, or missing. */
static uint32_t user_stack(struct decoder *d, uint32_t flags, uint32_t dump_flag, uint64_t dump,
			   uint32_t fp_flag, int32_t stack_id, uint32_t pid)
{
	if (flags & dump_flag)
		return dump_stack(d, dump);
	if (flags & fp_flag)
		return stack_ids__intern(d->ustacks, stack_id, pid, d->now_ns, &d->st.stack_read_failed);
	return LS_STACK_MISSING;
}

static int handle_ulock(struct decoder *d, const struct ulock_wait_rec *r, size_t size)
{
	struct agg_event ev = {};

	if (size < sizeof(*r)) {
		d->st.bad_records++;
		return 0;
	}
	if (!dump_ready(d, r->rec_flags, ULOCK_RF_DUMP, r->stack_dump) ||
	    !dump_ready(d, r->rec_flags, ULOCK_RF_RELEASER_DUMP, r->releaser_dump))
		return -EAGAIN;
	ulock_event_init(d, &ev, r->pid, r->tid, r->uaddr, r->rec_flags & ULOCK_RF_SHARED, r->comm);
	/* a sampled wait: its figures are in the exact entry already, its stacks are here */
	ev.key.sampled = 1;
	ev.key.flags = LS_KIND_USER | (r->rec_flags & ULOCK_RF_BLOCKCALL ? LS_UTYPE_BLOCK + r->op :
				       ls_futex_type(r->op, r->val));
	ev.key.stack = user_stack(d, r->rec_flags, ULOCK_RF_DUMP, r->stack_dump,
				  ULOCK_RF_STACK, r->stack_id, r->pid);
	ulock_owner(d, r->pid, r->tid, word_owner(r, ev.key.flags & ~LS_KIND_USER), &ev);
	if (r->rec_flags & ULOCK_RF_RELEASER) {
		ev.key.releaser_pid = r->releaser_pid;
		ev.key.releaser_tid = r->releaser_tid;
		ev.releaser_comm = r->releaser_comm;
		if (r->rec_flags & (ULOCK_RF_RELEASER_DUMP | ULOCK_RF_RELEASER_STACK))
			ev.key.releaser_stack = user_stack(d, r->rec_flags, ULOCK_RF_RELEASER_DUMP,
							   r->releaser_dump, ULOCK_RF_RELEASER_STACK,
							   r->releaser_stack_id, r->releaser_pid);
	}
	ev.key.unwatched = !!(r->rec_flags & ULOCK_RF_UNWATCHED);
	/* precise mode: a call that returned without sleeping is not a wait */
	if ((r->rec_flags & ULOCK_RF_PRECISE) && !(r->rec_flags & ULOCK_RF_BLOCKED))
		ev.nonblocking = 1;
	else
		ev.wait_ns = r->wait_ns;
	d->opts.sink.event(d->opts.sink.ctx, &ev);
	return 0;
}

/* A holder sample is an event of type LS_UTYPE_HOLD: one per sample, no wait time. */
static int handle_uhold(struct decoder *d, const struct ulock_hold_rec *r, size_t size)
{
	struct agg_event ev = {};

	if (size < sizeof(*r)) {
		d->st.bad_records++;
		return 0;
	}
	if (!dump_ready(d, r->rec_flags, ULOCK_RF_DUMP, r->stack_dump))
		return -EAGAIN;
	ulock_event_init(d, &ev, r->pid, r->tid, r->uaddr, r->rec_flags & ULOCK_RF_SHARED, r->comm);
	ev.key.flags = LS_KIND_USER | LS_UTYPE_HOLD;
	ev.key.stack = user_stack(d, r->rec_flags, ULOCK_RF_DUMP, r->stack_dump, ULOCK_RF_STACK,
				  r->stack_id, r->pid);
	d->opts.sink.event(d->opts.sink.ctx, &ev);
	return 0;
}

/*
 * A wait-table entry, or the one wait that found its table full, as the aggregator keys
 * it: exact figures, no stack (the samples carry those).
 */
static int wait_key(struct decoder *d, const struct ls_wait_key *k, const char *owner_comm,
		    struct agg_event *ev)
{
	bool shared = k->flags & LS_WF_SHARED;

	memset(ev, 0, sizeof(*ev));
	ev->key.lock = k->lock;
	ev->key.pid = k->pid;
	ev->key.tid = k->tid;
	switch (k->class) {
	case LS_WAIT_KLOCK:
		ev->key.flags = normalize_flags(k->type);
		ev->key.name = k->flags & LS_WF_MMAP_LOCK ? LS_NAME_MMAP_LOCK :
			       k->flags & LS_WF_SIGLOCK ? LS_NAME_SIGLOCK : LS_NAME_NONE;
		ev->key.owner_pid = k->owner_pid;
		ev->key.owner_tid = k->owner_tid;
		ev->owner_comm = owner_comm;
		return 0;
	case LS_WAIT_KPREEMPT:	/* a kernel address: global, no mapping */
		ev->key.flags = LS_KIND_KPREEMPT | normalize_flags(k->type);
		return 0;
	case LS_WAIT_FUTEX:
		usyms__see(d->opts.usyms, k->pid);
		ulock_where(d, &ev->key, k->pid, k->lock, shared);
		ev->key.flags = LS_KIND_USER | k->type;
		ulock_owner(d, k->pid, k->tid, k->owner_tid, ev);
		ev->key.releaser_pid = k->releaser_pid;
		ev->key.releaser_tid = k->releaser_tid;
		ev->key.chain_pid = k->flags >> LS_WF_CHAIN_SHIFT;
		ev->key.unwatched = !!(k->flags & LS_WF_UNWATCHED);
		return 0;
	case LS_WAIT_BLOCK:	/* the lock is the descriptor the call named */
		if (!k->type || k->type >= LS_BTYPE_MAX)
			break;
		usyms__see(d->opts.usyms, k->pid);
		ev->key.flags = LS_KIND_USER | (LS_UTYPE_BLOCK + k->type);
		ev->key.releaser_pid = k->releaser_pid;
		ev->key.releaser_tid = k->releaser_tid;
		ev->key.chain_pid = k->flags >> LS_WF_CHAIN_SHIFT;
		ev->key.unwatched = !!(k->flags & LS_WF_UNWATCHED);
		return 0;
	case LS_WAIT_UPREEMPT:
		usyms__see(d->opts.usyms, k->pid);
		ulock_where(d, &ev->key, k->pid, k->lock, shared);
		ev->key.flags = LS_KIND_USER | LS_UTYPE_PREEMPT;
		return 0;
	default:
		break;
	}
	d->st.bad_records++;
	return -EINVAL;
}

/* The names, process and cgroup of a wait-table entry or a wait that found no room in one. */
static void wait_origin(struct agg_event *ev, const struct ls_wait_origin *who)
{
	ev->comm = who->comm;
	ev->releaser_comm = who->releaser_comm;
	ev->proc_start_ns = who->start_ns;
	ev->cgroup_id = who->cgroup_id;
}

/* The waits status counts per source: the tables are where they are counted. */
static void count_class(struct decoder *d, const struct ls_wait_key *k, uint64_t n)
{
	if (k->class == LS_WAIT_KLOCK)
		d->st.kernel_waits += n;
	else if (k->class == LS_WAIT_FUTEX)
		d->st.futex_waits += n;
	else if (k->class == LS_WAIT_BLOCK)
		d->st.block_waits += n;
	if (k->flags & LS_WF_UNWATCHED)
		d->st.unwatched_waits += n;
}

int decoder__wait_entry(void *ctx, const struct ls_wait_key *k, const struct ls_wait_val *v)
{
	struct decoder *d = ctx;
	struct agg_event ev;
	struct agg_stat st;
	int i;

	if (wait_key(d, k, v->who.owner_comm, &ev))
		return 0;
	st.count = v->count;
	st.total_ns = v->total_ns;
	st.max_ns = v->max_ns;
	st.min_ns = v->count ? v->min_ns : 0;
	for (i = 0; i < LS_HIST_BUCKETS; i++)
		st.hist[i] = v->hist[i];
	ev.stat = &st;
	ev.nonblocking = v->nonblocking;
	wait_origin(&ev, &v->who);
	d->opts.sink.event(d->opts.sink.ctx, &ev);
	count_class(d, k, v->count);
	d->st.wait_entries++;
	return 0;
}

static int handle_wait(struct decoder *d, const struct ls_wait_rec *r, size_t size)
{
	struct agg_event ev;

	if (size < sizeof(*r)) {
		d->st.bad_records++;
		return 0;
	}
	if (wait_key(d, &r->key, r->who.owner_comm, &ev))
		return 0;
	if (r->nonblocking)
		ev.nonblocking = 1;
	else
		ev.wait_ns = r->wait_ns;
	wait_origin(&ev, &r->who);
	d->opts.sink.event(d->opts.sink.ctx, &ev);
	if (!r->nonblocking)
		count_class(d, &r->key, 1);
	return 0;
}

/* The schedstat records each carry at most one stack, always a dump (SCHED_RF_DUMP). */
static int sched_stack(struct decoder *d, uint32_t flags, uint64_t dump, uint32_t pid, uint32_t *stack)
{
	if (!dump_ready(d, flags, SCHED_RF_DUMP, dump))
		return -EAGAIN;
	usyms__see(d->opts.usyms, pid);
	*stack = user_stack(d, flags, SCHED_RF_DUMP, dump, 0, -1, pid);
	return 0;
}

static int handle_sched(struct decoder *d, const struct ls_rec_hdr *h, size_t size)
{
	static const size_t sizes[] = {
		[LS_REC_SCHED_YIELD] = sizeof(struct sched_yield_rec),
		[LS_REC_SCHED_SPIN] = sizeof(struct sched_spin_rec),
		[LS_REC_SCHED_RESUME] = sizeof(struct sched_resume_rec),
	};
	const struct sched_yield_rec *y = (const void *)h;
	const struct sched_spin_rec *sp = (const void *)h;
	const struct sched_resume_rec *rs = (const void *)h;
	uint32_t stack;

	if (size < sizes[h->type]) {
		d->st.bad_records++;
		return 0;
	}
	switch (h->type) {
	case LS_REC_SCHED_YIELD:
		if (sched_stack(d, y->rec_flags, y->stack_dump, y->pid, &stack))
			return -EAGAIN;
		d->opts.sink.yield_site(d->opts.sink.ctx, y, stack);
		break;
	case LS_REC_SCHED_SPIN:
		if (sched_stack(d, sp->rec_flags, sp->stack_dump, sp->pid, &stack))
			return -EAGAIN;
		d->opts.sink.spin_sample(d->opts.sink.ctx, sp, stack);
		break;
	default:
		if (sched_stack(d, rs->rec_flags, rs->stack_dump, rs->pid, &stack))
			return -EAGAIN;
		d->opts.sink.resume(d->opts.sink.ctx, rs, stack);
		break;
	}
	return 0;
}

/* Returns -EAGAIN for a record to be parked until its stack dump arrives. */
static int dispatch(struct decoder *d, const void *data, size_t size)
{
	const struct ls_rec_hdr *h = data;

	if (size < sizeof(*h)) {
		d->st.bad_records++;
		return 0;
	}
	switch (h->type) {
	case LS_REC_KLOCK_WAIT:
		return handle_klock(d, data, size);
	case LS_REC_ULOCK_WAIT:
		return handle_ulock(d, data, size);
	case LS_REC_ULOCK_HOLD:
		return handle_uhold(d, data, size);
	case LS_REC_USTACK:
		return handle_ustack(d, data, size);
	case LS_REC_WAIT:
		return handle_wait(d, data, size);
	case LS_REC_SCHED_YIELD:
	case LS_REC_SCHED_SPIN:
	case LS_REC_SCHED_RESUME:
		return handle_sched(d, h, size);
	case LS_REC_WAKER_WANTED:
		if (size < sizeof(struct ls_waker_rec)) {
			d->st.bad_records++;
			return 0;
		}
		d->opts.sink.waker_wanted(d->opts.sink.ctx, ((const struct ls_waker_rec *)data)->waits,
					  ((const struct ls_waker_rec *)data)->span_ns);
		return 0;
	default:
		d->st.bad_records++;
		return 0;
	}
}

int decoder__record(void *ctx, void *data, size_t size)
{
	struct decoder *d = ctx;
	struct parked *p;

	if (dispatch(d, data, size) != -EAGAIN)
		return 0;
	p = malloc(sizeof(*p) + size);
	if (!p) {		/* cannot wait for the dump: count it as missing now */
		d->last_chance = true;
		dispatch(d, data, size);
		d->last_chance = false;
		return 0;
	}
	p->pass = d->pass;
	p->size = size;
	memcpy(p->data, data, size);
	p->next = d->parked;
	d->parked = p;
	return 0;
}

/*
 * Retries parked records. A dump is submitted before the record that names it, so once a
 * drain that began after the record was read has run, a dump still absent is lost.
 */
static void resolve_parked(struct decoder *d)
{
	struct parked **pp = &d->parked, *p;

	while ((p = *pp)) {
		d->last_chance = p->pass < d->pass;
		if (dispatch(d, p->data, p->size) == -EAGAIN) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		free(p);
	}
	d->last_chance = false;
}

int decoder__new(const struct decoder_opts *opts, struct decoder **out)
{
	struct decoder *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->opts = *opts;
	d->now_ns = ls_now_ns();
	d->owners = htab__new(sizeof(struct owner_key), sizeof(struct owner_info), OWNER_CACHE_MAX);
	if (!d->owners ||
	    stack_ids__new(&(struct stack_ids_opts){ .kind = COLL_KSTACK, .entries = opts->kstack_entries,
						     .coll = opts->coll, .stacks = opts->stacks,
						     .ksyms = opts->ksyms }, &d->kstacks) ||
	    stack_ids__new(&(struct stack_ids_opts){ .kind = COLL_USTACK, .entries = opts->ustack_entries,
						     .coll = opts->coll, .stacks = opts->stacks,
						     .usyms = opts->usyms }, &d->ustacks)) {
		decoder__free(d);
		return -ENOMEM;
	}
	*out = d;
	return 0;
}

void decoder__free(struct decoder *d)
{
	if (!d)
		return;
	while (d->parked) {
		struct parked *p = d->parked;

		d->parked = p->next;
		free(p);
	}
	htab__free(d->owners);
	stack_ids__free(d->kstacks);
	stack_ids__free(d->ustacks);
	free(d);
}

void decoder__pass_begin(struct decoder *d)
{
	d->pass++;
}

bool decoder__pass_end(struct decoder *d)
{
	resolve_parked(d);
	return d->parked != NULL;
}

void decoder__tick(struct decoder *d, uint64_t now)
{
	d->now_ns = now;
}

void decoder__gc(struct decoder *d, uint64_t now)
{
	stack_ids__gc(d->kstacks, now);
	stack_ids__gc(d->ustacks, now);
	d->st.dumps_expired += dumps__gc(d->opts.dumps, now);
}

struct decoder_stats decoder__stats(const struct decoder *d)
{
	struct decoder_stats st = d->st;

	st.stack_ids_freed = stack_ids__freed(d->kstacks) + stack_ids__freed(d->ustacks);
	return st;
}

// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/resource.h>
#include <unistd.h>
#include "agg.h"
#include "dumps.h"
#include "engine.h"
#include "export.h"
#include "htab.h"
#include "klock.h"
#include "ksyms.h"
#include "log.h"
#include "probe.h"
#include "prom.h"
#include "query.h"
#include "scheduler.h"
#include "server.h"
#include "spin.h"
#include "stacks.h"
#include "threads.h"
#include "unwind.h"
#include "usyms.h"
#include "ustack.h"

/* gcc says so with a macro, clang with a feature test */
#if defined(__SANITIZE_ADDRESS__)
#define LS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LS_ASAN 1
#endif
#endif
#ifndef LS_ASAN
#define LS_ASAN 0
#endif
#if LS_ASAN
/* sanitizer/allocator_interface.h's, declared here: gcc ships the runtime, not the header */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#define NSEC_PER_SEC 1000000000ULL
#define NSEC_PER_MSEC 1000000ULL
/* A scan longer than a day is a mistake, not a scan. */
#define SCAN_MAX_MS (24ULL * 3600 * 1000)
#define RATE_SECONDS 10

/* The figures status gives per second: each source's events, the records read, our CPU. */
enum rate_id {
	RATE_KERNEL_WAITS,	/* klock: kernel lock waits */
	RATE_FUTEX_WAITS,	/* ulock: futex waits */
	RATE_HOLDER_SAMPLES,	/* ulock: holder samples */
	RATE_SPIN_SAMPLES,	/* schedstat: spin-loop samples */
	RATE_RECORDS,		/* ring records the daemon read */
	RATE_CPU_NS,		/* the daemon's own CPU time */
	RATE_MAX,
};

static const char *const rate_names[RATE_MAX] = {
	[RATE_KERNEL_WAITS] = "kernel_waits", [RATE_FUTEX_WAITS] = "futex_waits",
	[RATE_HOLDER_SAMPLES] = "holder_samples", [RATE_SPIN_SAMPLES] = "spin_samples",
	[RATE_RECORDS] = "records", [RATE_CPU_NS] = "cpu_ns",
};
/* how often open waits of exited threads and idle kernel stacks are swept from BPF maps */
#define GC_INTERVAL_NS (10 * NSEC_PER_SEC)
/*
 * A kernel stack id unseen this long is deleted from the stack map, so a daemon that runs
 * for weeks keeps room for new stacks. No record in the rings can still name it: they are
 * drained every tick.
 */
#define STACK_IDLE_NS (300 * NSEC_PER_SEC)
/* Holder sampling stays on this long after the last holder was noted. */
#define HOLD_QUIET_NS (5 * NSEC_PER_SEC)
/* sched_waking stays attached this long after futex waits fell below waker-min-rate */
#define WAKER_QUIET_NS (10 * NSEC_PER_SEC)

/* A hook attached (or a sampler enabled) only while what it serves keeps happening. */
struct on_demand {
	uint64_t last;		/* the counter it follows, at the last tick */
	uint64_t busy_ns;	/* when that last grew fast enough; 0: never */
};
/* A thread named as a lock owner is checked in /proc again after this long. */
#define OWNER_CHECK_NS (10 * NSEC_PER_SEC)
#define OWNER_CACHE_MAX 65536
#define USYMS_MAX_PROCS 4096
/* libdwfl sessions kept: one per process whose stacks are being unwound */
#define UNWIND_MAX_PROCS 64
/* unwound dumps waiting for their record: seconds of dumps at the highest rates */
#define DUMPS_MAX (128 * 1024)

/*
 * Kernel stack-map ids -> interned stacks. Ids are stable until freed (the maps are
 * written without BPF_F_REUSE_STACKID); an id unseen for STACK_IDLE_NS is freed so a
 * daemon that runs for weeks keeps room for new stacks. User stacks also remember the
 * process they were normalized for: the same addresses mean other code elsewhere.
 */
struct stack_cache {
	enum collector_stack_kind kind;
	uint32_t n;
	uint32_t *sid;		/* 0: not read yet */
	uint32_t *pid;
	uint64_t *seen;
	uint64_t freed;
};

struct owner_key {
	uint32_t pid, tid;
};

struct owner_info {
	uint64_t checked_ns;
	bool valid;		/* a live thread of pid */
	char comm[LS_COMM_LEN];
};

/* What a report or an export asks for besides the query: the format, the profile's view. */
struct export_req {
	bool wanted;			/* a scan answers with rows unless a format was asked */
	enum ls_export_format format;
	enum ls_profile profile;
};

struct scan {
	struct scan *next;
	struct export_req x;
	uint64_t client;
	uint32_t pid;
	uint64_t start_ns, deadline_ns;
	struct agg *agg;
	struct query q;
	uint64_t counters0[LS_CNT_MAX];
	bool precise;		/* the pid is in the collector's precise set */
	bool kernel_addrs;	/* the client may see raw kernel addresses */
	/*
	 * The process itself, not its number: readable the moment it exits, so the scan ends
	 * (its waits drained) before a new process can take the pid and add to it. -1 on
	 * kernels without pidfd_open (5.3): the pid is checked at each tick instead.
	 */
	int pidfd;
	bool exited;
	uint64_t start_ticks;	/* the process's start time: with the pid, its identity */
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

struct engine {
	struct engine_opts opts;
	cJSON *config;			/* the daemon's config in force, for status */
	int epfd;			/* the rings' epoll fd and the scanned processes' pidfds */
	struct collector *coll;
	struct ksyms *ksyms;
	struct stacks *stacks;
	struct agg *agg;
	struct stack_cache kstacks, ustacks;
	struct usyms *usyms;
	struct unwind *unwind;
	struct dumps *dumps;
	struct threads *threads;
	struct spin *spin;
	struct parked *parked;
	uint64_t pass;			/* drains of the rings so far */
	bool last_chance;		/* resolving parked records whose dumps are lost */
	uint64_t dump_missing;		/* records whose dump never arrived */
	uint64_t dumps_expired;		/* dumps no record took */
	uint64_t dump_table_full;
	struct htab *owners;		/* owner_key -> owner_info */
	struct on_demand holders;	/* the holder sampler, by LS_CNT_HOLDERS */
	struct on_demand releasers;	/* sched_waking, by futex_waits */
	struct scan *scans;
	engine_reply_fn reply;
	void *reply_ctx;
	uint64_t start_ns;
	uint64_t bad_records;
	uint64_t stack_read_failed;
	/* per-second snapshots of what status shows as rates, over the last RATE_SECONDS */
	uint64_t rate_v[RATE_SECONDS + 1][RATE_MAX];
	uint64_t rate_ns[RATE_SECONDS + 1];
	int rate_head, rate_filled;
	uint64_t records;		/* ring records consumed */
	uint64_t last_rate_ns;
	uint64_t last_gc_ns;
	uint64_t now_ns;		/* at the last tick: cheap time for the record path */
	uint64_t stale_slots;		/* open waits of exited threads, swept */
	uint64_t wait_entries;		/* wait-table entries drained */
	uint64_t kernel_waits, futex_waits;	/* waits drained (and by ring), counted per class */
	uint64_t switches_at_start;		/* host context switches when the programs attached */
};

uint64_t ls_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

uint64_t ls_now_ns(void)
{
	/* the clock bpf_ktime_get_ns() reads */
	return ls_clock_ns(CLOCK_MONOTONIC);
}

void engine_opts__init(struct engine_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->collector.max_threads = KLOCK_DEF_MAX_THREADS;
	o->collector.stack_entries = KLOCK_DEF_STACK_ENTRIES;
	o->collector.max_locks = LS_DEF_MAX_LOCKS;
	o->collector.owner_stacks = KLOCK_DEF_OWNER_STACKS;
	o->collector.max_stack = 32;
	o->collector.ringbuf_bytes = 256 * 1024;
	o->collector.wait_keys = LS_DEF_WAIT_KEYS;
	o->collector.stack_rate = LS_DEF_STACK_RATE;
	o->collector.cpu_stack_rate = 10 * LS_DEF_STACK_RATE;
	o->collector.user_locks = 1;
	o->collector.uthreads = ULOCK_DEF_MAX_THREADS;
	o->collector.ustack_entries = ULOCK_DEF_STACK_ENTRIES;
	o->collector.max_holders = ULOCK_DEF_MAX_HOLDERS;
	o->collector.hold_freq = ULOCK_DEF_HOLD_FREQ;
	o->collector.waker_min_rate = ULOCK_DEF_WAKER_MIN_RATE;
	o->collector.ustack_bytes = LS_USTACK_DEF_BYTES;
	o->collector.udump_rate = LS_USTACK_DEF_RATE;
	o->collector.sched_threads = SCHED_DEF_MAX_THREADS;
	o->collector.spin_freq = SCHED_DEF_SPIN_FREQ;
	o->collector.spin_stack_bytes = SCHED_DEF_STACK_BYTES;
	o->collector.spin_dump_rate = SCHED_DEF_SPIN_DUMP_RATE;
	o->max_keys = 200000;
	o->max_stacks = 100000;
	o->windows = true;
	o->spin = (struct spin_thresholds){
		.yield_min = SPIN_DEF_YIELD_MIN, .yield_min_rate = SPIN_DEF_YIELD_MIN_RATE,
		.pause_min_samples = SPIN_DEF_PAUSE_MIN_SAMPLES, .pause_min_share_pct = SPIN_DEF_PAUSE_MIN_SHARE_PCT,
		.burst_min_events = SPIN_DEF_BURST_MIN_EVENTS, .burst_factor = SPIN_DEF_BURST_FACTOR,
	};
	diag_thresholds__init(&o->diag);
	snprintf(o->debuginfod_cache, sizeof(o->debuginfod_cache), "%s", LS_DEF_DEBUGINFOD_CACHE);
}

cJSON *engine__error(const char *fmt, ...)
{
	cJSON *o = cJSON_CreateObject();
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cJSON_AddNumberToObject(o, "schema_version", LS_SCHEMA_VERSION);
	cJSON_AddStringToObject(o, "error", msg);
	return o;
}

static int stack_cache_init(struct stack_cache *c, enum collector_stack_kind kind, uint32_t n)
{
	c->kind = kind;
	c->n = n;
	c->sid = calloc(n, sizeof(*c->sid));
	c->pid = calloc(n, sizeof(*c->pid));
	c->seen = calloc(n, sizeof(*c->seen));
	return c->sid && c->pid && c->seen ? 0 : -ENOMEM;
}

static void stack_cache_free(struct stack_cache *c)
{
	free(c->sid);
	free(c->pid);
	free(c->seen);
}

/* Reads, cleans up and interns kernel stack @id, or user stack @id of process @pid. */
static uint32_t intern_stack(struct engine *e, struct stack_cache *c, int32_t id, uint32_t pid)
{
	uint64_t ips[LS_MAX_STACK_DEPTH];
	uint32_t sid;
	int n, skip = 0;

	if (id < 0 || (uint32_t)id >= c->n)
		return LS_STACK_MISSING;
	c->seen[id] = e->now_ns;
	if (c->sid[id] && c->pid[id] == pid)
		return c->sid[id];
	n = collector__stack(e->coll, c->kind, id, ips, LS_MAX_STACK_DEPTH);
	if (c->kind == COLL_USTACK && n > 0)
		usyms__normalize(e->usyms, pid, ips, n, ips);
	/* the BPF program and the tracepoint glue are not the waiter's stack */
	while (c->kind == COLL_KSTACK && e->ksyms && skip < n - 1 &&
	       ksyms__is_tracing_func(e->ksyms, ips[skip]))
		skip++;
	if (n <= 0 || stacks__intern(e->stacks, ips + skip, n - skip, 0, &sid)) {
		e->stack_read_failed++;
		return LS_STACK_MISSING;
	}
	c->sid[id] = sid;
	c->pid[id] = pid;
	return sid;
}

static void free_idle_stacks(struct engine *e, struct stack_cache *c)
{
	uint32_t id;

	for (id = 0; id < c->n; id++) {
		if (!c->sid[id] || e->now_ns - c->seen[id] < STACK_IDLE_NS)
			continue;
		if (!collector__stack_free(e->coll, c->kind, id))
			c->freed++;
		c->sid[id] = 0;
	}
}

static uint32_t normalize_flags(uint32_t flags)
{
	/* a mutex that spun first and then slept is one mutex wait */
	if (flags & KLOCK_F_MUTEX)
		return KLOCK_F_MUTEX;
	return flags;
}

static void add_event(struct engine *e, const struct agg_event *ev)
{
	struct scan *s;

	if (e->agg)
		agg__add(e->agg, ev);
	for (s = e->scans; s; s = s->next)
		if (s->pid == ev->key.pid)
			agg__add(s->agg, ev);
}

static int handle_klock(struct engine *e, const struct klock_wait_rec *r, size_t size)
{
	struct agg_event ev = {};

	if (size < KLOCK_WAIT_REC_MIN_SIZE) {
		e->bad_records++;
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
		ev.key.stack = intern_stack(e, &e->kstacks, r->stack_id, 0);
	else if (r->rec_flags & KLOCK_RF_SAMPLED)
		ev.key.stack = LS_STACK_MISSING;
	if (r->rec_flags & KLOCK_RF_OWNER) {
		ev.key.owner_pid = r->owner_pid;
		ev.key.owner_tid = r->owner_tid;
		ev.owner_comm = r->owner_comm;
	}
	if ((r->rec_flags & KLOCK_RF_OWNER_STACK) && size >= sizeof(*r) && r->owner_nr &&
	    r->owner_nr <= KLOCK_OWNER_STACK_DEPTH &&
	    stacks__intern(e->stacks, (const uint64_t *)r->owner_ips, r->owner_nr, 0,
			   &ev.key.owner_stack))
		ev.key.owner_stack = LS_STACK_NONE;
	ev.wait_ns = r->wait_ns;
	ev.comm = r->comm;
	add_event(e, &ev);
	return 0;
}

/*
 * The owner a futex word names, verified: it must be a live thread of the waiter's own
 * process (glibc writes __owner in the same process; any other number there is not a tid).
 */
static bool owner_lookup(struct engine *e, uint32_t pid, uint32_t tid, const char **comm)
{
	struct owner_key k = { pid, tid };
	struct owner_info *oi;
	char path[64];
	int created = 0;
	FILE *f;

	oi = htab__upsert(e->owners, &k, &created, NULL);
	if (!oi) {		/* full: start over rather than stop naming owners */
		htab__clear(e->owners);
		oi = htab__upsert(e->owners, &k, &created, NULL);
		if (!oi)
			return false;
	}
	if (created || e->now_ns - oi->checked_ns >= OWNER_CHECK_NS) {
		snprintf(path, sizeof(path), "/proc/%u/task/%u/comm", pid, tid);
		f = fopen(path, "re");
		oi->valid = f && fgets(oi->comm, sizeof(oi->comm), f);
		if (f)
			fclose(f);
		oi->comm[strcspn(oi->comm, "\n")] = 0;
		/* a thread that exited keeps the name it had when we last saw it */
		if (!oi->valid && !created && oi->comm[0])
			oi->valid = true;
		oi->checked_ns = e->now_ns;
	}
	*comm = oi->comm;
	return oi->valid;
}

/* Where a user lock lives: (object, offset) for shared futexes, else the address. */
static void ulock_where(struct engine *e, struct agg_key *k, uint32_t pid, uint64_t uaddr, bool shared)
{
	if (shared && !usyms__shared_key(e->usyms, pid, uaddr, &k->object, &k->lock))
		return;
	k->object = 0;
	k->lock = uaddr;
}

/* The owner a futex word named (@owner, 0: none), if it is a thread of the waiter's process. */
static void ulock_owner(struct engine *e, uint32_t pid, uint32_t tid, uint32_t owner, struct agg_event *ev)
{
	if (!owner || owner == tid || !owner_lookup(e, pid, owner, &ev->owner_comm))
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
static void ulock_event_init(struct engine *e, struct agg_event *ev, uint32_t pid, uint32_t tid,
			     uint64_t uaddr, bool shared, const char *comm)
{
	usyms__see(e->usyms, pid);
	ulock_where(e, &ev->key, pid, uaddr, shared);
	ev->key.pid = pid;
	ev->key.tid = tid;
	ev->comm = comm;
}

/* A stack dump: unwound now, while the process's maps are surely the ones it ran with. */
static int handle_ustack(struct engine *e, const struct ls_ustack_rec *r, size_t size)
{
	uint64_t ips[LS_MAX_STACK_DEPTH];
	uint32_t sid = LS_STACK_MISSING;
	bool truncated;
	int n;

	if (size < sizeof(*r)) {
		e->bad_records++;
		return 0;
	}
	n = unwind__stack(e->unwind, r, size, ips, e->opts.collector.max_stack, &truncated);
	if (n > 0) {
		usyms__normalize(e->usyms, r->pid, ips, n, ips);
		if (stacks__intern(e->stacks, ips, n,
				   LS_STACK_F_DWARF | (truncated ? LS_STACK_F_TRUNCATED : 0), &sid))
			sid = LS_STACK_MISSING;
	}
	if (dumps__put(e->dumps, r->id, sid, e->now_ns))
		e->dump_table_full++;
	return 0;
}

/* Whether dump @id is here to be taken (or never will be: then it is counted missing). */
static bool dump_ready(struct engine *e, uint32_t flags, uint32_t flag, uint64_t id)
{
	uint32_t sid;

	return !(flags & flag) || dumps__find(e->dumps, id, &sid) || e->last_chance;
}

/* The stack dump @id unwound to; LS_STACK_MISSING when it never arrived. */
static uint32_t dump_stack(struct engine *e, uint64_t id)
{
	uint32_t sid;

	if (dumps__take(e->dumps, id, &sid))
		return sid;
	e->dump_missing++;
	return LS_STACK_MISSING;
}

/* A user stack of a record: a dump unwound, a frame-pointer stack, or missing. */
static uint32_t user_stack(struct engine *e, uint32_t flags, uint32_t dump_flag, uint64_t dump,
			   uint32_t fp_flag, int32_t stack_id, uint32_t pid)
{
	if (flags & dump_flag)
		return dump_stack(e, dump);
	if (flags & fp_flag)
		return intern_stack(e, &e->ustacks, stack_id, pid);
	return LS_STACK_MISSING;
}

static int handle_ulock(struct engine *e, const struct ulock_wait_rec *r, size_t size)
{
	struct agg_event ev = {};

	if (size < sizeof(*r)) {
		e->bad_records++;
		return 0;
	}
	if (!dump_ready(e, r->rec_flags, ULOCK_RF_DUMP, r->stack_dump) ||
	    !dump_ready(e, r->rec_flags, ULOCK_RF_RELEASER_DUMP, r->releaser_dump))
		return -EAGAIN;
	ulock_event_init(e, &ev, r->pid, r->tid, r->uaddr, r->rec_flags & ULOCK_RF_SHARED, r->comm);
	/* a sampled wait: its figures are in the exact entry already, its stacks are here */
	ev.key.sampled = 1;
	ev.key.flags = LS_KIND_USER | ls_futex_type(r->op, r->val);
	ev.key.stack = user_stack(e, r->rec_flags, ULOCK_RF_DUMP, r->stack_dump,
				  ULOCK_RF_STACK, r->stack_id, r->pid);
	ulock_owner(e, r->pid, r->tid, word_owner(r, ev.key.flags & ~LS_KIND_USER), &ev);
	if (r->rec_flags & ULOCK_RF_RELEASER) {
		ev.key.releaser_pid = r->releaser_pid;
		ev.key.releaser_tid = r->releaser_tid;
		ev.releaser_comm = r->releaser_comm;
		if (r->rec_flags & (ULOCK_RF_RELEASER_DUMP | ULOCK_RF_RELEASER_STACK))
			ev.key.releaser_stack = user_stack(e, r->rec_flags, ULOCK_RF_RELEASER_DUMP,
							   r->releaser_dump, ULOCK_RF_RELEASER_STACK,
							   r->releaser_stack_id, r->releaser_pid);
	}
	/* precise mode: a call that returned without sleeping is not a wait */
	if ((r->rec_flags & ULOCK_RF_PRECISE) && !(r->rec_flags & ULOCK_RF_BLOCKED))
		ev.nonblocking = 1;
	else
		ev.wait_ns = r->wait_ns;
	add_event(e, &ev);
	return 0;
}

/* A holder sample is an event of type LS_UTYPE_HOLD: one per sample, no wait time. */
static int handle_uhold(struct engine *e, const struct ulock_hold_rec *r, size_t size)
{
	struct agg_event ev = {};

	if (size < sizeof(*r)) {
		e->bad_records++;
		return 0;
	}
	if (!dump_ready(e, r->rec_flags, ULOCK_RF_DUMP, r->stack_dump))
		return -EAGAIN;
	ulock_event_init(e, &ev, r->pid, r->tid, r->uaddr, r->rec_flags & ULOCK_RF_SHARED, r->comm);
	ev.key.flags = LS_KIND_USER | LS_UTYPE_HOLD;
	ev.key.stack = user_stack(e, r->rec_flags, ULOCK_RF_DUMP, r->stack_dump, ULOCK_RF_STACK,
				  r->stack_id, r->pid);
	add_event(e, &ev);
	return 0;
}

/*
 * A wait-table entry, or the one wait that found its table full, as the aggregator keys
 * it: exact figures, no stack (the samples carry those).
 */
static int wait_key(struct engine *e, const struct ls_wait_key *k, const char *owner_comm,
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
		usyms__see(e->usyms, k->pid);
		ulock_where(e, &ev->key, k->pid, k->lock, shared);
		ev->key.flags = LS_KIND_USER | k->type;
		ulock_owner(e, k->pid, k->tid, k->owner_tid, ev);
		ev->key.releaser_pid = k->releaser_pid;
		ev->key.releaser_tid = k->releaser_tid;
		return 0;
	case LS_WAIT_UPREEMPT:
		usyms__see(e->usyms, k->pid);
		ulock_where(e, &ev->key, k->pid, k->lock, shared);
		ev->key.flags = LS_KIND_USER | LS_UTYPE_PREEMPT;
		return 0;
	default:
		e->bad_records++;
		return -EINVAL;
	}
}

/* The waits status counts per source: the tables are where they are counted. */
static void count_class(struct engine *e, const struct ls_wait_key *k, uint64_t n)
{
	if (k->class == LS_WAIT_KLOCK)
		e->kernel_waits += n;
	else if (k->class == LS_WAIT_FUTEX)
		e->futex_waits += n;
}

static int on_wait_entry(void *ctx, const struct ls_wait_key *k, const struct ls_wait_val *v)
{
	struct engine *e = ctx;
	struct agg_event ev;
	struct agg_stat st;
	int i;

	if (e->opts.tap) {
		char entry[sizeof(*k) + sizeof(*v)];

		memcpy(entry, k, sizeof(*k));
		memcpy(entry + sizeof(*k), v, sizeof(*v));
		e->opts.tap(e->opts.tap_ctx, ENGINE_IN_WAIT, entry, sizeof(entry));
	}
	if (wait_key(e, k, v->owner_comm, &ev))
		return 0;
	st.count = v->count;
	st.total_ns = v->total_ns;
	st.max_ns = v->max_ns;
	st.min_ns = v->count ? v->min_ns : 0;
	for (i = 0; i < LS_HIST_BUCKETS; i++)
		st.hist[i] = v->hist[i];
	ev.stat = &st;
	ev.nonblocking = v->nonblocking;
	ev.comm = v->comm;
	ev.releaser_comm = v->releaser_comm;
	add_event(e, &ev);
	count_class(e, k, v->count);
	e->wait_entries++;
	return 0;
}

static int handle_wait(struct engine *e, const struct ls_wait_rec *r, size_t size)
{
	struct agg_event ev;

	if (size < sizeof(*r)) {
		e->bad_records++;
		return 0;
	}
	if (wait_key(e, &r->key, r->owner_comm, &ev))
		return 0;
	if (r->nonblocking)
		ev.nonblocking = 1;
	else
		ev.wait_ns = r->wait_ns;
	ev.comm = r->comm;
	ev.releaser_comm = r->releaser_comm;
	add_event(e, &ev);
	if (!r->nonblocking)
		count_class(e, &r->key, 1);
	return 0;
}

/* The schedstat records each carry at most one stack, always a dump (SCHED_RF_DUMP). */
static int sched_stack(struct engine *e, uint32_t flags, uint64_t dump, uint32_t pid, uint32_t *stack)
{
	if (!dump_ready(e, flags, SCHED_RF_DUMP, dump))
		return -EAGAIN;
	usyms__see(e->usyms, pid);
	*stack = user_stack(e, flags, SCHED_RF_DUMP, dump, 0, -1, pid);
	return 0;
}

static int handle_sched(struct engine *e, const struct ls_rec_hdr *h, size_t size)
{
	static const size_t sizes[] = {
		[LS_REC_SCHED_YIELD] = sizeof(struct sched_yield_rec),
		[LS_REC_SCHED_SPIN] = sizeof(struct sched_spin_rec),
		[LS_REC_SCHED_RESUME] = sizeof(struct sched_resume_rec),
	};
	const struct sched_yield_rec *y = (const void *)h;
	const struct sched_spin_rec *sp = (const void *)h;
	const struct sched_resume_rec *rs = (const void *)h;
	uint64_t base_events, base_ns;
	uint32_t stack;

	if (size < sizes[h->type]) {
		e->bad_records++;
		return 0;
	}
	switch (h->type) {
	case LS_REC_SCHED_YIELD:
		if (sched_stack(e, y->rec_flags, y->stack_dump, y->pid, &stack))
			return -EAGAIN;
		spin__yield_site(e->spin, y, stack);
		break;
	case LS_REC_SCHED_SPIN:
		if (sched_stack(e, sp->rec_flags, sp->stack_dump, sp->pid, &stack))
			return -EAGAIN;
		spin__sample(e->spin, sp, stack);
		break;
	default:
		if (sched_stack(e, rs->rec_flags, rs->stack_dump, rs->pid, &stack))
			return -EAGAIN;
		threads__baseline(e->threads, rs->tid, rs->resume_ns - rs->stop_ns, rs->stop_events,
				  &base_events, &base_ns);
		spin__resume(e->spin, rs, stack, base_events, base_ns);
		break;
	}
	return 0;
}

/* Returns -EAGAIN for a record to be parked until its stack dump arrives. */
static int dispatch(struct engine *e, const void *data, size_t size)
{
	const struct ls_rec_hdr *h = data;

	if (size < sizeof(*h)) {
		e->bad_records++;
		return 0;
	}
	switch (h->type) {
	case LS_REC_KLOCK_WAIT:
		return handle_klock(e, data, size);
	case LS_REC_ULOCK_WAIT:
		return handle_ulock(e, data, size);
	case LS_REC_ULOCK_HOLD:
		return handle_uhold(e, data, size);
	case LS_REC_USTACK:
		return handle_ustack(e, data, size);
	case LS_REC_WAIT:
		return handle_wait(e, data, size);
	case LS_REC_SCHED_YIELD:
	case LS_REC_SCHED_SPIN:
	case LS_REC_SCHED_RESUME:
		return handle_sched(e, h, size);
	case LS_REC_WAKER_WANTED:
		e->releasers.busy_ns = ls_now_ns();
		collector__name_releasers(e->coll, true);
		return 0;
	default:
		e->bad_records++;
		return 0;
	}
}

static int on_record(void *ctx, void *data, size_t size)
{
	struct engine *e = ctx;
	struct parked *p;

	if (e->opts.tap)
		e->opts.tap(e->opts.tap_ctx, ENGINE_IN_RECORD, data, size);
	if (dispatch(e, data, size) != -EAGAIN)
		return 0;
	p = malloc(sizeof(*p) + size);
	if (!p) {		/* cannot wait for the dump: count it as missing now */
		e->last_chance = true;
		dispatch(e, data, size);
		e->last_chance = false;
		return 0;
	}
	p->pass = e->pass;
	p->size = size;
	memcpy(p->data, data, size);
	p->next = e->parked;
	e->parked = p;
	return 0;
}

/*
 * Retries parked records. A dump is submitted before the record that names it, so once a
 * drain that began after the record was read has run, a dump still absent is lost.
 */
static void resolve_parked(struct engine *e)
{
	struct parked **pp = &e->parked, *p;

	while ((p = *pp)) {
		e->last_chance = p->pass < e->pass;
		if (dispatch(e, p->data, p->size) == -EAGAIN) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		free(p);
	}
	e->last_chance = false;
}

int engine__new(const struct engine_opts *opts, engine_reply_fn reply, void *reply_ctx,
		struct engine **out)
{
	struct agg_opts ao = { .windows = opts->windows, .max_keys = opts->max_keys };
	struct collector_opts co = opts->collector;
	struct engine *e = calloc(1, sizeof(*e));
	struct rlimit nofile;
	int err;

	if (!e)
		return -ENOMEM;
	e->epfd = -1;
	/* the symbolizer holds a descriptor per binary mapped anywhere: allow what may be allowed */
	if (!getrlimit(RLIMIT_NOFILE, &nofile) && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	e->opts = *opts;
	e->reply = reply;
	e->reply_ctx = reply_ctx;
	e->start_ns = ls_now_ns();
	ao.start_ns = e->start_ns;
	e->stacks = stacks__new(opts->max_stacks);
	e->agg = agg__new(&ao);
	e->owners = htab__new(sizeof(struct owner_key), sizeof(struct owner_info), OWNER_CACHE_MAX);
	e->now_ns = e->start_ns;
	if (!e->stacks || !e->agg || !e->owners ||
	    stack_cache_init(&e->kstacks, COLL_KSTACK, opts->collector.stack_entries) ||
	    stack_cache_init(&e->ustacks, COLL_USTACK, opts->collector.ustack_entries)) {
		err = -ENOMEM;
		goto cleanup;
	}
	err = usyms__new(&(struct usyms_opts){ .max_procs = USYMS_MAX_PROCS,
					       .debuginfod_dir = opts->debuginfod_cache }, &e->usyms);
	if (err)
		goto cleanup;
	err = unwind__new(e->usyms, UNWIND_MAX_PROCS, &e->unwind);
	if (err)
		goto cleanup;
	e->dumps = dumps__new(DUMPS_MAX);
	if (!e->dumps) {
		err = -ENOMEM;
		goto cleanup;
	}
	err = threads__new(&(struct threads_opts){ .max_exited_procs = THREADS_DEF_MAX_EXITED_PROCS,
						    .max_exited_threads = THREADS_DEF_MAX_EXITED_THREADS },
			   &e->threads);
	if (err)
		goto cleanup;
	err = spin__new(&e->spin);
	if (err)
		goto cleanup;
	/* before anything is attached: the host's switch cost, not the traced one */
	if (opts->collector.sched_threads &&
	    (err = threads__measure_switch_cost(e->threads, THREADS_SWITCH_ROUNDS)))
		pr_warn("cannot measure the context switch cost (%s)\n", strerror(-err));
	co.on_record = on_record;
	co.ctx = e;
	err = collector__new(&co, &e->coll);
	if (err)
		goto cleanup;
	err = collector__attach(e->coll);
	if (err)
		goto cleanup;
	e->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (e->epfd < 0 || epoll_ctl(e->epfd, EPOLL_CTL_ADD, collector__epoll_fd(e->coll),
				     &(struct epoll_event){ .events = EPOLLIN })) {
		err = -errno;
		goto cleanup;
	}
	/* read after loading, so our own programs' frames have names to skip */
	err = ksyms__new(opts->kallsyms, &e->ksyms);
	if (err)
		pr_warn("kernel symbols unavailable (%s): stacks will show addresses; "
			"set kernel.kptr_restrict=0 or run as root\n", strerror(-err));
	if (opts->precise_pid && (err = collector__precise_add(e->coll, opts->precise_pid))) {
		pr_err("precise mode for pid %u: %s\n", opts->precise_pid, strerror(-err));
		goto cleanup;
	}
	collector__start(e->coll);
	e->switches_at_start = threads__host_switches();
	/* the first snapshot: rates are available from the first request on */
	threads__tick(e->threads, e->coll, ls_now_ns());
	*out = e;
	return 0;
cleanup:
	engine__free(e);
	return err;
}

static void scan_free(struct engine *e, struct scan *s)
{
	if (!s)
		return;
	if (s->precise) {
		collector__precise_del(e->coll, s->pid);
		spin__precise_ran(e->spin, s->pid, ls_now_ns() - s->start_ns);
	}
	if (s->pidfd >= 0)
		close(s->pidfd);	/* and out of the epoll set with it */
	agg__free(s->agg);
	free(s);
}

void engine__free(struct engine *e)
{
	struct scan *s, *n;

	if (!e)
		return;
	cJSON_Delete(e->config);
	for (s = e->scans; s; s = n) {
		n = s->next;
		scan_free(e, s);
	}
	if (e->epfd >= 0)
		close(e->epfd);
	collector__free(e->coll);
	while (e->parked) {
		struct parked *p = e->parked;

		e->parked = p->next;
		free(p);
	}
	unwind__free(e->unwind);
	dumps__free(e->dumps);
	threads__free(e->threads);
	spin__free(e->spin);
	agg__free(e->agg);
	stacks__free(e->stacks);
	ksyms__free(e->ksyms);
	usyms__free(e->usyms);
	htab__free(e->owners);
	stack_cache_free(&e->kstacks);
	stack_cache_free(&e->ustacks);
	free(e);
}

int engine__epoll_fd(const struct engine *e)
{
	return e->epfd;
}

static void finish_scans(struct engine *e, uint64_t now);

/* Marks the scans whose process exited; true if any did. */
static bool scans_exited(struct engine *e)
{
	struct epoll_event ev[8];
	bool any = false;
	int i, n;

	do {
		n = epoll_wait(e->epfd, ev, sizeof(ev) / sizeof(ev[0]), 0);
		for (i = 0; i < n; i++) {
			struct scan *s = ev[i].data.ptr;	/* NULL: the rings */

			if (s && !s->exited) {
				s->exited = true;
				any = true;
			}
		}
	} while (n == sizeof(ev) / sizeof(ev[0]));
	return any;
}

int engine__consume(struct engine *e)
{
	bool exited = e->scans && scans_exited(e);
	int n, total = 0, round;

	/* a second drain settles records parked in the first, so callers see every wait */
	for (round = 0; round < 2; round++) {
		e->pass++;
		n = collector__consume(e->coll);
		if (n < 0)
			return n;
		total += n;
		e->records += n;
		resolve_parked(e);
		if (!e->parked)
			break;
	}
	if (exited)
		finish_scans(e, ls_now_ns());
	return total;
}

void engine__feed(struct engine *e, enum engine_input kind, const void *data, size_t size)
{
	struct ls_wait_key k;
	struct ls_wait_val v;
	void *copy;

	switch (kind) {
	case ENGINE_IN_RECORD:
		/* a ring's records are 8-byte aligned and writable; the caller's bytes may be neither */
		copy = malloc(size ? size : 1);
		if (!copy)
			return;
		memcpy(copy, data, size);
		e->pass++;
		on_record(e, copy, size);
		resolve_parked(e);
		free(copy);
		break;
	case ENGINE_IN_WAIT:
		if (size != sizeof(k) + sizeof(v)) {
			e->bad_records++;
			break;
		}
		memcpy(&k, data, sizeof(k));
		memcpy(&v, (const char *)data + sizeof(k), sizeof(v));
		on_wait_entry(e, &k, &v);
		break;
	}
}

/* ---- responses ---- */

static cJSON *response(const char *cmd)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "schema_version", LS_SCHEMA_VERSION);
	cJSON_AddStringToObject(o, "cmd", cmd);
	return o;
}

static cJSON *dropped_json(struct engine *e, const uint64_t *base)
{
	struct collector_prog progs[COLLECTOR_PROG_MAX];
	uint64_t cnt[LS_CNT_MAX], misses = 0;
	cJSON *d = cJSON_CreateObject();
	int i, n;

	collector__counters(e->coll, cnt);
	for (i = LS_DROP_FIRST; i < LS_DROP_LAST; i++)
		cJSON_AddNumberToObject(d, ls_counter_name(i), cnt[i] - (base ? base[i] : 0));
	n = collector__progs(e->coll, progs, COLLECTOR_PROG_MAX);
	for (i = 0; i < n; i++)
		misses += progs[i].recursion_misses;
	/* the kernel skips a program that fires while it already runs on that CPU */
	cJSON_AddNumberToObject(d, "prog_recursion", misses);
	cJSON_AddNumberToObject(d, "agg_full", agg__dropped(e->agg));
	cJSON_AddNumberToObject(d, "stack_table_full", stacks__dropped(e->stacks));
	cJSON_AddNumberToObject(d, "stack_read_failed", e->stack_read_failed);
	cJSON_AddNumberToObject(d, "bad_records", e->bad_records);
	cJSON_AddNumberToObject(d, "stale_thread_slots", e->stale_slots);
	/* a wait whose stack dump was lost in a full ring (counted there too) */
	cJSON_AddNumberToObject(d, "stack_dump_missing", e->dump_missing);
	cJSON_AddNumberToObject(d, "stack_dump_unclaimed", e->dumps_expired);
	cJSON_AddNumberToObject(d, "stack_dump_table_full", e->dump_table_full);
	/* a wait table drained while a preempted program still used it: its wait may be lost */
	cJSON_AddNumberToObject(d, "wait_drain_raced", collector__drain_races(e->coll));
	/* an exited process whose threads aged out of the windows, with no room for its summary */
	cJSON_AddNumberToObject(d, "exited_summary_full", threads__dropped(e->threads));
	cJSON_AddNumberToObject(d, "exited_threads_folded", threads__folded_early(e->threads));
	return d;
}

static cJSON *window_json(const char *name, uint64_t start, uint64_t end)
{
	cJSON *w = cJSON_CreateObject();

	cJSON_AddStringToObject(w, "name", name);
	cJSON_AddNumberToObject(w, "start_ns", start);
	cJSON_AddNumberToObject(w, "end_ns", end);
	return w;
}

/* Figure @id per second over the snapshots kept (up to RATE_SECONDS). */
static double rate(const struct engine *e, enum rate_id id)
{
	int newest, oldest;

	if (e->rate_filled < 2)
		return 0;
	newest = (e->rate_head + RATE_SECONDS) % (RATE_SECONDS + 1);
	oldest = (e->rate_head + RATE_SECONDS + 1 - e->rate_filled) % (RATE_SECONDS + 1);
	if (e->rate_ns[newest] <= e->rate_ns[oldest])
		return 0;
	return (double)(e->rate_v[newest][id] - e->rate_v[oldest][id]) * NSEC_PER_SEC /
	       (e->rate_ns[newest] - e->rate_ns[oldest]);
}

/* Resident set size from /proc/self/statm (pages), in bytes. */
static uint64_t rss_bytes(void)
{
	unsigned long size, resident = 0;
	FILE *f = fopen("/proc/self/statm", "re");

	if (f) {
		if (fscanf(f, "%lu %lu", &size, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return (uint64_t)resident * getpagesize();
}

/* Bytes the allocator has handed out and not had back: the daemon's own growth, without what
 * malloc keeps cached for reuse (and, under ASan, without its quarantine of freed memory,
 * which makes RSS meaningless there). */
static uint64_t heap_bytes(void)
{
#if LS_ASAN
	return __sanitizer_get_current_allocated_bytes();
#else
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
#endif
}

/* A module whose frames stay unnamed: what `status` tells the user to install. */
static void add_missing_json(void *ctx, const struct usyms_missing *m)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "module", m->module);
	cJSON_AddStringToObject(o, "path", m->path);
	cJSON_AddStringToObject(o, "build_id", m->build_id);
	cJSON_AddNumberToObject(o, "unnamed_frames", m->unnamed);
	cJSON_AddStringToObject(o, "debuginfod", m->debuginfod);
	cJSON_AddItemToArray(ctx, o);
}

/* The daemon itself: what it costs, and how well it names user frames. */
static cJSON *self_json(const struct engine *e)
{
	cJSON *o = cJSON_CreateObject(), *r, *sym;
	struct usyms_stats us;
	int i;

	r = cJSON_AddObjectToObject(o, "per_s");
	for (i = 0; i < RATE_MAX; i++)
		if (i != RATE_CPU_NS)
			cJSON_AddNumberToObject(r, rate_names[i], rate(e, i));
	/* ns of CPU per ns of wall time: a share of one CPU */
	cJSON_AddNumberToObject(o, "cpu_pct", rate(e, RATE_CPU_NS) / NSEC_PER_SEC * 100);
	cJSON_AddNumberToObject(o, "cpu_ns", ls_clock_ns(CLOCK_PROCESS_CPUTIME_ID));
	cJSON_AddNumberToObject(o, "rss_bytes", rss_bytes());
	cJSON_AddNumberToObject(o, "heap_bytes", heap_bytes());
	cJSON_AddNumberToObject(o, "records", e->records);
	usyms__stats(e->usyms, &us);
	sym = cJSON_AddObjectToObject(o, "user_symbols");
	cJSON_AddNumberToObject(sym, "symbolized", us.symbolized);
	cJSON_AddNumberToObject(sym, "cache_hits", us.cache_hits);
	cJSON_AddNumberToObject(sym, "unresolved", us.unresolved);
	cJSON_AddNumberToObject(sym, "cached", us.cached);
	if (usyms__debuginfod_urls(e->usyms))
		cJSON_AddStringToObject(sym, "debuginfod", usyms__debuginfod_urls(e->usyms));
	else
		cJSON_AddNullToObject(sym, "debuginfod");
	usyms__missing(e->usyms, add_missing_json, cJSON_AddArrayToObject(sym, "missing"));
	cJSON_AddNumberToObject(o, "kernel_symbols", e->ksyms ? ksyms__count(e->ksyms) : 0);
	return o;
}

/*
 * What program on @hook handled, counted without bpf_stats: by the wait tables, the kernel
 * (every context switch runs the sched_switch program) or the thread store. Programs on
 * the hottest hooks keep no counter of their own: it would cost every event.
 */
static void add_program_events(struct engine *e, cJSON *p, const char *hook)
{
	if (strstr(hook, "contention_begin") || strstr(hook, "contention_end"))
		cJSON_AddNumberToObject(p, "events", e->kernel_waits);
	else if (strstr(hook, "sched_switch"))
		cJSON_AddNumberToObject(p, "events", threads__host_switches() - e->switches_at_start);
	else if (strstr(hook, "sched_process_exit"))
		cJSON_AddNumberToObject(p, "events", threads__exits(e->threads));
	else
		cJSON_AddNullToObject(p, "events");
}

/* Whether the kernel times every BPF program run (run_cnt, run_time_ns): off by default. */
static bool bpf_stats_enabled(void)
{
	char c = '0';
	FILE *f = fopen("/proc/sys/kernel/bpf_stats_enabled", "re");

	if (f) {
		if (fread(&c, 1, 1, f) != 1)
			c = '0';
		fclose(f);
	}
	return c == '1';
}

static cJSON *programs_json(struct engine *e)
{
	struct collector_prog progs[COLLECTOR_PROG_MAX];
	cJSON *arr = cJSON_CreateArray();
	int i, n = collector__progs(e->coll, progs, COLLECTOR_PROG_MAX);

	for (i = 0; i < n; i++) {
		cJSON *p = cJSON_CreateObject();

		cJSON_AddStringToObject(p, "name", progs[i].name);
		cJSON_AddStringToObject(p, "source", progs[i].source);
		cJSON_AddStringToObject(p, "hook", progs[i].hook);
		cJSON_AddBoolToObject(p, "attached", progs[i].attached);
		cJSON_AddBoolToObject(p, "on_demand", progs[i].on_demand);
		cJSON_AddNumberToObject(p, "run_cnt", progs[i].run_cnt);
		cJSON_AddNumberToObject(p, "run_time_ns", progs[i].run_time_ns);
		add_program_events(e, p, progs[i].hook);
		cJSON_AddItemToArray(arr, p);
	}
	return arr;
}

/* How user stacks are walked, and how well: the figures to tune user-stack-bytes by. */
static cJSON *unwind_json(struct engine *e, const uint64_t *cnt)
{
	const struct collector_features *f = collector__features(e->coll);
	cJSON *u = cJSON_CreateObject();
	struct unwind_stats us;

	unwind__stats(e->unwind, &us);
	cJSON_AddStringToObject(u, "method", f->user_unwind ? f->user_unwind : "none");
	cJSON_AddNumberToObject(u, "stack_bytes", e->opts.collector.ustack_bytes);
	cJSON_AddNumberToObject(u, "dump_rate", e->opts.collector.udump_rate);
	cJSON_AddNumberToObject(u, "dumps", cnt[LS_CNT_UDUMPS]);
	cJSON_AddNumberToObject(u, "dumps_short", cnt[LS_CNT_UDUMP_SHORT]);
	cJSON_AddNumberToObject(u, "unwound", us.stacks);
	cJSON_AddNumberToObject(u, "frames", us.frames);
	cJSON_AddNumberToObject(u, "truncated", us.truncated);
	cJSON_AddNumberToObject(u, "truncated_by_window", us.window);
	cJSON_AddNumberToObject(u, "failed", us.failed);
	/* how much of the window the walks needed: what user-stack-bytes could be */
	cJSON_AddNumberToObject(u, "avg_bytes_used", us.stacks ? us.bytes_used / us.stacks : 0);
	cJSON_AddNumberToObject(u, "max_bytes_used", us.bytes_used_max);
	cJSON_AddNumberToObject(u, "sessions", us.sessions);
	cJSON_AddNumberToObject(u, "avg_us", us.stacks + us.failed ?
				(double)us.ns / 1000 / (us.stacks + us.failed) : 0);
	return u;
}

static cJSON *handle_status(struct engine *e);
static void drain_waits(struct engine *e);

/* An answer covers every wait up to now: the rings' records and the tables' entries. */
static void catch_up(struct engine *e)
{
	engine__consume(e);
	drain_waits(e);
}

static cJSON *degraded_json(const struct engine *e)
{
	const struct collector_note *notes;
	cJSON *arr = cJSON_CreateArray();
	int i, n = collector__notes(e->coll, &notes);

	for (i = 0; i < n; i++) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "component", notes[i].component);
		cJSON_AddStringToObject(o, "reason", notes[i].reason);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

int engine__degraded(const struct engine *e)
{
	const struct collector_note *notes;

	return collector__notes(e->coll, &notes);
}

void engine__reconfigure(struct engine *e, const struct engine_opts *opts)
{
	e->opts.expose_kernel_addrs = opts->expose_kernel_addrs;
	e->opts.spin = opts->spin;
	e->opts.diag = opts->diag;
}

void engine__set_config(struct engine *e, cJSON *config)
{
	cJSON_Delete(e->config);
	e->config = config;
}

cJSON *engine__status(struct engine *e)
{
	return handle_status(e);
}

static cJSON *handle_status(struct engine *e)
{
	const struct collector_features *f = collector__features(e->coll);
	uint64_t cnt[LS_CNT_MAX], now;
	cJSON *o = response("status"), *ev, *st, *feat, *wins, *agg;
	struct usyms_stats syms;
	int w;

	/* the waits counted per source are the tables' */
	catch_up(e);
	now = ls_now_ns();
	collector__counters(e->coll, cnt);
	usyms__stats(e->usyms, &syms);
	cJSON_AddStringToObject(o, "version", LS_VERSION);
	cJSON_AddNumberToObject(o, "pid", getpid());
	cJSON_AddNumberToObject(o, "uptime_ns", now - e->start_ns);
	feat = cJSON_AddObjectToObject(o, "features");
	cJSON_AddStringToObject(feat, "attach_mode", f->attach_mode);
	cJSON_AddBoolToObject(feat, "tp_btf", f->tp_btf);
	cJSON_AddBoolToObject(feat, "task_from_pid", f->task_from_pid);
	cJSON_AddBoolToObject(feat, "owner_stacks", f->owner_stacks);
	cJSON_AddBoolToObject(feat, "kernel_symbols", e->ksyms != NULL);
	cJSON_AddBoolToObject(feat, "user_locks", f->ulock);
	cJSON_AddBoolToObject(feat, "holder_sampling", f->holder_sampling);
	cJSON_AddBoolToObject(feat, "precise_futex", f->precise);
	cJSON_AddStringToObject(feat, "user_unwind", f->user_unwind ? f->user_unwind : "none");
	cJSON_AddBoolToObject(feat, "sched", f->sched);
	cJSON_AddBoolToObject(feat, "spin_sampling", f->spin_sampling);
	cJSON_AddItemToObject(o, "probes", ls_probes_json(collector__probes(e->coll)));
	cJSON_AddItemToObject(o, "degraded", degraded_json(e));
	cJSON_AddItemToObject(o, "self", self_json(e));
	cJSON_AddNumberToObject(o, "switch_cost_ns", threads__switch_cost_ns(e->threads));
	cJSON_AddItemToObject(o, "programs", programs_json(e));
	cJSON_AddBoolToObject(o, "bpf_stats_enabled", bpf_stats_enabled());
	ev = cJSON_AddObjectToObject(o, "events");
	cJSON_AddNumberToObject(ev, "waits", e->kernel_waits);
	cJSON_AddNumberToObject(ev, "continued", cnt[LS_CNT_CONTINUED]);
	/* mutex waits whose spin called schedule(), found on the CPU they left */
	cJSON_AddNumberToObject(ev, "spin_rescheduled", cnt[LS_CNT_SPIN_RESCHED]);
	cJSON_AddNumberToObject(ev, "nested", cnt[LS_CNT_NESTED]);
	cJSON_AddNumberToObject(ev, "waits_per_s", rate(e, RATE_KERNEL_WAITS));
	cJSON_AddNumberToObject(ev, "ringbuf_wakeups", cnt[LS_CNT_RB_WAKEUPS]);
	cJSON_AddNumberToObject(ev, "futex_waits", e->futex_waits);
	cJSON_AddNumberToObject(ev, "futex_nonblocking", cnt[LS_CNT_UNONBLOCK]);
	cJSON_AddNumberToObject(ev, "futex_releasers", cnt[LS_CNT_URELEASER]);
	cJSON_AddNumberToObject(ev, "holders_noted", cnt[LS_CNT_HOLDERS]);
	cJSON_AddNumberToObject(ev, "holder_samples", cnt[LS_CNT_HOLD_SAMPLES]);
	cJSON_AddNumberToObject(ev, "holder_released", cnt[LS_CNT_HOLD_RELEASED]);
	cJSON_AddNumberToObject(ev, "holder_throttled", cnt[LS_CNT_HOLD_THROTTLED]);
	cJSON_AddNumberToObject(ev, "holder_preemptions", cnt[LS_CNT_HOLDER_PREEMPT]);
	cJSON_AddNumberToObject(ev, "kernel_holders_noted", cnt[LS_CNT_KHOLDERS]);
	cJSON_AddNumberToObject(ev, "kernel_holder_preemptions", cnt[LS_CNT_KHOLDER_PREEMPT]);
	cJSON_AddNumberToObject(ev, "spin_samples", cnt[LS_CNT_SPIN_SAMPLES]);
	cJSON_AddNumberToObject(ev, "spin_samples_unstacked", cnt[LS_CNT_SPIN_UNSTACKED]);
	cJSON_AddNumberToObject(ev, "yield_sites", cnt[LS_CNT_YIELD_SITES]);
	cJSON_AddNumberToObject(ev, "resumes", cnt[LS_CNT_RESUMES]);
	st = cJSON_AddObjectToObject(o, "stacks");
	cJSON_AddNumberToObject(st, "stacked", cnt[LS_CNT_STACKED]);
	cJSON_AddNumberToObject(st, "sampled_out", e->kernel_waits > cnt[LS_CNT_SAMPLED] ?
				e->kernel_waits - cnt[LS_CNT_SAMPLED] : 0);
	cJSON_AddNumberToObject(st, "share", e->kernel_waits > cnt[LS_CNT_STACKED] ?
				(double)cnt[LS_CNT_STACKED] / e->kernel_waits : !!e->kernel_waits);
	cJSON_AddNumberToObject(st, "owner_stacked", cnt[LS_CNT_OWNER_STACKED]);
	cJSON_AddNumberToObject(st, "owner_on_cpu", cnt[LS_CNT_OWNER_ON_CPU]);
	cJSON_AddNumberToObject(st, "user_stacked", cnt[LS_CNT_USTACKED]);
	cJSON_AddNumberToObject(st, "user_sampled_out", e->futex_waits > cnt[LS_CNT_USAMPLED] ?
				e->futex_waits - cnt[LS_CNT_USAMPLED] : 0);
	cJSON_AddNumberToObject(st, "user_unresolved_frames", syms.unresolved);
	cJSON_AddNumberToObject(st, "interned", stacks__count(e->stacks));
	cJSON_AddNumberToObject(st, "kernel_ids_freed", e->kstacks.freed + e->ustacks.freed);
	cJSON_AddNumberToObject(st, "stack_rate", e->opts.collector.stack_rate);
	cJSON_AddNumberToObject(st, "cpu_stack_rate", e->opts.collector.cpu_stack_rate);
	cJSON_AddItemToObject(o, "unwind", unwind_json(e, cnt));
	cJSON_AddItemToObject(o, "dropped", dropped_json(e, NULL));
	wins = cJSON_AddArrayToObject(o, "windows");
	for (w = 0; w < LS_WIN_MAX; w++)
		cJSON_AddItemToArray(wins, window_json(ls_window_name(w), agg__window_start(e->agg, w), now));
	agg = cJSON_AddObjectToObject(o, "aggregator");
	cJSON_AddNumberToObject(agg, "keys", agg__keys(e->agg));
	cJSON_AddNumberToObject(agg, "folded_keys", agg__folded(e->agg));
	cJSON_AddNumberToObject(agg, "mem_bytes", agg__mem_bytes(e->agg) + stacks__mem_bytes(e->stacks) +
				usyms__mem_bytes(e->usyms));
	cJSON_AddNumberToObject(o, "rings", collector__nr_rings(e->coll));
	if (e->config)
		cJSON_AddItemToObject(o, "config", cJSON_Duplicate(e->config, true));
	return o;
}

/*
 * Raw kernel addresses go to clients with CAP_SYSLOG (kptr_restrict=1's rule), to every
 * client when expose-kernel-addresses is set, and in-process (no @peer) to the user who
 * loaded the programs.
 */
static bool kernel_addrs_allowed(const struct engine *e, const struct ls_peer *peer)
{
	return !peer || peer->cap_syslog || e->opts.expose_kernel_addrs;
}

static struct query_ctx query_ctx(const struct engine *e, bool kernel_addrs)
{
	return (struct query_ctx){ .stacks = e->stacks, .ksyms = e->ksyms, .usyms = e->usyms,
				   .hide_kernel_addrs = !kernel_addrs };
}

static cJSON *rows_response(struct engine *e, const char *cmd, struct agg *agg, const struct query *q,
			    uint64_t now, const uint64_t *counters0, bool kernel_addrs)
{
	struct query_ctx qc = query_ctx(e, kernel_addrs);
	uint64_t start;
	struct agg_view *t = agg__view(agg, q->window, &start);
	cJSON *o, *rows;

	if (!t)
		return engine__error("out of memory building the window");
	rows = query__rows(t, q, &qc);
	agg_view__free(t);
	if (!rows)
		return engine__error("out of memory building rows");
	o = response(cmd);
	cJSON_AddItemToObject(o, "window", window_json(ls_window_name(q->window), start, now));
	cJSON_AddStringToObject(o, "group", query__group_name(q->group));
	cJSON_AddItemToObject(o, "rows", rows);
	cJSON_AddItemToObject(o, "dropped", dropped_json(e, counters0));
	return o;
}

/*
 * When process @pid started (/proc/PID/stat's starttime, clock ticks since boot); 0: gone,
 * or exited and not yet reaped (a zombie: its parent has not waited for it).
 */
static uint64_t proc_start_ticks(uint32_t pid)
{
	char path[64], buf[1024], *p, state;
	unsigned long long start;
	size_t n;
	FILE *f;
	int i;

	snprintf(path, sizeof(path), "/proc/%u/stat", pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	p = strrchr(buf, ')');	/* the comm may hold spaces and parentheses */
	if (!p || sscanf(p + 1, " %c", &state) != 1 || state == 'Z' || state == 'X')
		return 0;
	/* field 22, starttime; the text after ')' starts at field 3 */
	for (i = 3; p && i <= 22; i++)
		p = strchr(p + 1, ' ');
	if (!p || sscanf(p, " %llu", &start) != 1)
		return 0;
	return start;
}

static bool pid_alive(uint32_t pid)
{
	return !kill(pid, 0) || errno == EPERM;
}

static cJSON *precise_error(int err, uint32_t pid)
{
	if (err == -EOPNOTSUPP)
		return engine__error("precise mode needs the syscalls:sys_enter_futex tracepoints "
				     "(CONFIG_FTRACE_SYSCALLS) and user-lock tracing; scan without it");
	if (err == -EBUSY)
		return engine__error("a precise scan of pid %u is already running; wait for it", pid);
	if (err == -E2BIG || err == -ENOSPC)
		return engine__error("too many precise scans at once (%d); retry later",
				     ULOCK_DEF_PRECISE_PIDS);
	return engine__error("precise mode for pid %u: %s", pid, strerror(-err));
}

/* /proc/PID/status's "Uid:" or "Gid:" line: real, effective, saved and filesystem ids. */
static int proc_ids(uint32_t pid, const char *field, unsigned int ids[4])
{
	char path[64], line[256];
	size_t len = strlen(field);
	int ret = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (ret && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, len) &&
		    sscanf(line + len, "%u %u %u %u", &ids[0], &ids[1], &ids[2], &ids[3]) == 4)
			ret = 0;
	fclose(f);
	return ret;
}

/*
 * ptrace's rule (__ptrace_may_access): CAP_SYS_PTRACE, or the target's real, effective
 * and saved uids and gids are all the peer's. A scan observes a process closely (its
 * futex calls one by one in precise mode), so it needs what a debugger would.
 */
static bool peer_may_scan(const struct ls_peer *peer, uint32_t pid)
{
	unsigned int uid[4], gid[4];
	int i;

	if (!peer || peer->cap_sys_ptrace)
		return true;
	if (proc_ids(pid, "Uid:", uid) || proc_ids(pid, "Gid:", gid))
		return false;
	for (i = 0; i < 3; i++)
		if (uid[i] != peer->uid || gid[i] != peer->gid)
			return false;
	return true;
}

static cJSON *handle_scan(struct engine *e, uint64_t client, const struct ls_peer *peer,
			  const cJSON *req, struct query *q, const struct export_req *x)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(req, "duration_ms");
	const cJSON *precise = cJSON_GetObjectItemCaseSensitive(req, "precise");
	int err;
	struct agg_opts ao = { .windows = false, .max_keys = e->opts.max_keys };
	struct scan *s;

	if (!q->pid)
		return engine__error("scan needs 'pid'");
	if (!d || !cJSON_IsNumber(d) || d->valuedouble < 1 || d->valuedouble > SCAN_MAX_MS)
		return engine__error("'duration_ms' must be a number from 1 to %llu", SCAN_MAX_MS);
	if (precise && !cJSON_IsBool(precise))
		return engine__error("'precise' must be true or false");
	if (!pid_alive(q->pid))
		return engine__error("no process with pid %u", q->pid);
	if (!peer_may_scan(peer, q->pid))
		return engine__error("permission denied: pid %u belongs to another user; scan your own "
				     "processes, or run as root or with CAP_SYS_PTRACE", q->pid);
	s = calloc(1, sizeof(*s));
	if (!s)
		return engine__error("out of memory");
	s->client = client;
	s->start_ticks = proc_start_ticks(q->pid);
	s->pidfd = syscall(SYS_pidfd_open, q->pid, 0);
	if (s->pidfd < 0 && errno == ESRCH) {
		free(s);
		return engine__error("no process with pid %u", q->pid);
	}
	if (s->pidfd >= 0 && epoll_ctl(e->epfd, EPOLL_CTL_ADD, s->pidfd,
				       &(struct epoll_event){ .events = EPOLLIN, .data.ptr = s })) {
		close(s->pidfd);
		s->pidfd = -1;
	}
	s->x = *x;
	s->kernel_addrs = kernel_addrs_allowed(e, peer);
	s->pid = q->pid;
	/* its mappings now, while it lives: a target that exits before the first drain of its
	 * waits still has its locks and frames named. Read again if cached: what a record of
	 * its pid cached may predate its exec (the forked parent's maps) */
	usyms__reload(e->usyms, s->pid);
	s->start_ns = ls_now_ns();
	s->deadline_ns = s->start_ns + (uint64_t)d->valuedouble * NSEC_PER_MSEC;
	s->q = *q;
	s->q.window = LS_WIN_ALL;
	ao.start_ns = s->start_ns;
	s->agg = agg__new(&ao);
	if (!s->agg) {
		scan_free(e, s);
		return engine__error("out of memory");
	}
	if (cJSON_IsTrue(precise)) {
		err = collector__precise_add(e->coll, s->pid);
		if (err) {
			scan_free(e, s);
			return precise_error(err, q->pid);
		}
		s->precise = true;
	}
	/* waits already in the rings predate the scan */
	engine__consume(e);
	collector__counters(e->coll, s->counters0);
	s->next = e->scans;
	e->scans = s;
	return NULL;
}

/* `lockscope threads`: per-thread switches and times, like pidstat -w with the cost added. */
static cJSON *handle_threads(struct engine *e, const cJSON *req)
{
	enum ls_window w = THREADS_LIVE;
	uint64_t pid = 0, limit = 0, now;
	const char *why = NULL;
	bool measure = false;
	char err[256];
	cJSON *o;
	int ret;

	if (query__uint_field(req, "pid", INT32_MAX, &pid, err, sizeof(err)) ||
	    query__uint_field(req, "limit", 1000000, &limit, err, sizeof(err)) ||
	    query__bool_field(req, "measure", &measure, err, sizeof(err)) ||
	    query__window_field(req, &w, err, sizeof(err)))
		return engine__error("%s", err);
	/* on demand, with tracing on: what a switch costs now, tracer included */
	if (measure && (ret = threads__measure_switch_cost(e->threads, THREADS_SWITCH_ROUNDS)))
		return engine__error("cannot measure the switch cost: %s", strerror(-ret));
	o = response("threads");
	now = ls_now_ns();
	threads__refresh(e->threads, e->coll, now);	/* up to now, not the last tick */
	if (w != THREADS_LIVE)
		cJSON_AddItemToObject(o, "window", window_json(ls_window_name(w), threads__window_start(e->threads, w, now),
							       now));
	if (threads__json(e->threads, e->coll, pid, limit, w, now, o, &why)) {
		cJSON_Delete(o);
		return engine__error("%s", why);
	}
	return o;
}

/* `lockscope spin`: yield storms, spin loops, bursts after stops and preempted holders. */
static cJSON *handle_spin(struct engine *e, const struct ls_peer *peer, const cJSON *req)
{
	struct query_ctx qc = query_ctx(e, kernel_addrs_allowed(e, peer));
	uint64_t pid = 0, max_stack = LS_QUERY_DEF_MAX_STACK, now, start;
	enum ls_window w = LS_WIN_ALL;	/* since the daemon started, exited threads included */
	const char *why = NULL;
	struct agg_view *t;
	char err[256];
	cJSON *o;
	int ret;

	if (query__uint_field(req, "pid", INT32_MAX, &pid, err, sizeof(err)) ||
	    query__uint_field(req, "max_stack", LS_MAX_STACK_DEPTH, &max_stack, err, sizeof(err)) ||
	    query__window_field(req, &w, err, sizeof(err)))
		return engine__error("%s", err);
	catch_up(e);
	now = ls_now_ns();
	threads__refresh(e->threads, e->coll, now);
	/* the threads' figures and the holder preemptions, both inside the window */
	t = agg__view(e->agg, w, &start);
	if (!t)
		return engine__error("out of memory building the window");
	o = response("spin");
	cJSON_AddItemToObject(o, "window", window_json(ls_window_name(w), start, now));
	ret = spin__json(e->spin, e->coll, e->threads, w, t, (double)(now - start) / NSEC_PER_SEC, &qc, &e->opts.spin,
			 pid, max_stack, o, &why);
	agg_view__free(t);
	if (ret) {
		cJSON_Delete(o);
		return engine__error("%s", why);
	}
	return o;
}

/* ---- report and exports ---- */

/* What the report shows of each part: the top rows, frames per stack, threads. */
#define REPORT_ROWS		20
#define REPORT_MAX_STACK	16
#define REPORT_THREADS		20
#define REPORT_FUTEX_CALLERS	50

static int parse_export_req(const cJSON *req, bool need_format, struct export_req *x, char *err, size_t len)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(req, "format");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(req, "profile");

	x->wanted = f != NULL;
	x->format = LS_EXPORT_JSON;
	x->profile = LS_PROFILE_BLOCK;
	if (!f && need_format) {
		snprintf(err, len, "export needs 'format' (json, prometheus, pprof, folded)");
		return -EINVAL;
	}
	if (f && (!cJSON_IsString(f) || ls_export_format_parse(f->valuestring, &x->format))) {
		snprintf(err, len, "'format' must be json, prometheus, pprof or folded");
		return -EINVAL;
	}
	if (p && (!cJSON_IsString(p) || ls_profile_parse(p->valuestring, &x->profile))) {
		snprintf(err, len, "'profile' must be block (waiters' stacks) or mutex (releasers' and owners' stacks)");
		return -EINVAL;
	}
	return 0;
}

static void add_file_line(cJSON *o, const char *name, const char *path)
{
	char line[128] = "";
	FILE *f = fopen(path, "re");

	if (f) {
		if (!fgets(line, sizeof(line), f))
			line[0] = 0;
		fclose(f);
	}
	line[strcspn(line, "\n")] = 0;
	cJSON_AddStringToObject(o, name, line);
}

/* The host the figures come from. */
static cJSON *host_json(void)
{
	cJSON *h = cJSON_CreateObject();
	struct utsname u;

	if (!uname(&u)) {
		cJSON_AddStringToObject(h, "hostname", u.nodename);
		cJSON_AddStringToObject(h, "kernel", u.release);
		cJSON_AddStringToObject(h, "machine", u.machine);
	}
	cJSON_AddNumberToObject(h, "cpus", sysconf(_SC_NPROCESSORS_ONLN));
	add_file_line(h, "boot_id", "/proc/sys/kernel/random/boot_id");
	cJSON_AddStringToObject(h, "lockscope_version", LS_VERSION);
	return h;
}

/* How long @pid has run, from /proc/PID/stat's start time (CLOCK_BOOTTIME); 0: unknown. */
static uint64_t process_age_ns(uint32_t pid)
{
	uint64_t start = proc_start_ticks(pid);

	return start ? ls_clock_ns(CLOCK_BOOTTIME) - start * (NSEC_PER_SEC / sysconf(_SC_CLK_TCK)) : 0;
}

/* The rows of @t for @base, grouped and cut as the report shows them. */
static cJSON *report_rows(const struct agg_view *t, const struct query *base, const struct query_ctx *qc,
			  enum ls_group group, enum ls_kind kind, int limit)
{
	struct query q = *base;

	q.group = group;
	q.kind = kind;
	q.limit = limit;
	q.max_stack = REPORT_MAX_STACK;
	q.stacks = group == LS_GROUP_CALLER;
	q.owners = group == LS_GROUP_LOCK;
	q.holders = group == LS_GROUP_LOCK;
	q.sort = LS_SORT_TOTAL;
	return query__rows(t, &q, qc) ?: cJSON_CreateArray();
}

static cJSON *thresholds_json(const struct engine *e)
{
	const struct diag_thresholds *th = &e->opts.diag;
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "report-min-wait", th->min_wait_pct);
	cJSON_AddNumberToObject(o, "report-contended-rate", th->contended_rate);
	cJSON_AddNumberToObject(o, "report-avg-wait-us", th->avg_wait_us);
	cJSON_AddNumberToObject(o, "report-jitter-factor", th->jitter_factor);
	cJSON_AddNumberToObject(o, "report-jitter-min-us", th->jitter_min_us);
	cJSON_AddNumberToObject(o, "report-jitter-tail", th->jitter_tail_pct);
	cJSON_AddNumberToObject(o, "report-futex-wake", th->futex_wake_pct);
	cJSON_AddNumberToObject(o, "report-work-min", th->work_min_pct);
	return o;
}

/*
 * The full report over table @t (covering @start..@now): locks, callers, threads, spin,
 * drops, and the findings. Thread and spin figures are the daemon's since each thread was
 * first seen, whatever the window.
 */
static cJSON *report_json(struct engine *e, const char *cmd, const struct agg_view *t, const struct query *q,
			  uint64_t start, uint64_t now, const uint64_t *counters0, bool kernel_addrs)
{
	struct query_ctx qc = query_ctx(e, kernel_addrs);
	uint64_t span = now > start ? now - start : 1, age;
	struct diag_input in = { .th = &e->opts.diag };
	cJSON *o = response(cmd), *locks, *callers, *futex_callers, *part;
	const char *why = NULL;

	/* a process younger than the window: its rates are over its life */
	if (q->pid && (age = process_age_ns(q->pid)) && age < span)
		span = age;
	cJSON_AddItemToObject(o, "host", host_json());
	cJSON_AddItemToObject(o, "window", window_json(ls_window_name(q->window), start, now));
	cJSON_AddNumberToObject(o, "span_s", (double)span / NSEC_PER_SEC);
	if (q->pid)
		cJSON_AddNumberToObject(o, "pid", q->pid);
	else
		cJSON_AddNullToObject(o, "pid");
	locks = report_rows(t, q, &qc, LS_GROUP_LOCK, q->kind, REPORT_ROWS);
	callers = report_rows(t, q, &qc, LS_GROUP_CALLER, q->kind, REPORT_ROWS);
	futex_callers = report_rows(t, q, &qc, LS_GROUP_CALLER, LS_KIND_KERNEL_ONLY, REPORT_FUTEX_CALLERS);
	cJSON_AddItemToObject(o, "locks", locks);
	cJSON_AddItemToObject(o, "callers", callers);
	part = cJSON_AddObjectToObject(o, "threads");
	threads__refresh(e->threads, e->coll, now);
	if (threads__json(e->threads, e->coll, q->pid, REPORT_THREADS, q->window, now, part, &why)) {
		cJSON_AddStringToObject(part, "error", why);
		why = NULL;
	}
	part = cJSON_AddObjectToObject(o, "spin");
	if (spin__json(e->spin, e->coll, e->threads, q->window, t, (double)span / NSEC_PER_SEC, &qc, &e->opts.spin,
		       q->pid, REPORT_MAX_STACK, part, &why))
		cJSON_AddStringToObject(part, "error", why);
	cJSON_AddItemToObject(o, "dropped", dropped_json(e, counters0));
	cJSON_AddItemToObject(o, "thresholds", thresholds_json(e));
	in.lock_rows = locks;
	in.kernel_callers = futex_callers;
	in.spin_findings = cJSON_GetObjectItemCaseSensitive(part, "findings");
	in.span_s = (double)span / NSEC_PER_SEC;
	cJSON_AddItemToObject(o, "findings", diagnose(&in));
	cJSON_Delete(futex_callers);
	return o;
}

/* A text or binary export: binary goes as base64 in the JSON response. */
static cJSON *export_data(const char *cmd, const struct export_req *x, const struct query *q,
			  uint64_t start, uint64_t now, struct export_buf *buf)
{
	cJSON *o = response(cmd);
	char *b64 = NULL;

	cJSON_AddStringToObject(o, "format", ls_export_format_name(x->format));
	if (x->format == LS_EXPORT_PPROF || x->format == LS_EXPORT_FOLDED)
		cJSON_AddStringToObject(o, "profile", ls_profile_name(x->profile));
	cJSON_AddItemToObject(o, "window", window_json(ls_window_name(q->window), start, now));
	if (x->format == LS_EXPORT_PPROF) {
		b64 = export__base64(buf->data, buf->len);
		if (!b64) {
			cJSON_Delete(o);
			return engine__error("out of memory encoding the profile");
		}
		cJSON_AddStringToObject(o, "encoding", "base64");
		cJSON_AddStringToObject(o, "data", b64);
	} else {
		cJSON_AddStringToObject(o, "encoding", "text");
		cJSON_AddStringToObject(o, "data", buf->data ? buf->data : "");
	}
	free(b64);
	return o;
}

/*
 * Lock metrics over everything since @agg started (counters never go back), with the
 * daemon's health first unless this is a scan's.
 */
static int prometheus_text(struct engine *e, struct agg *agg, const struct query *q, bool health,
			   struct export_buf *out)
{
	uint64_t start;
	struct agg_view *t = agg__view(agg, LS_WIN_ALL, &start);
	FILE *f = open_memstream(&out->data, &out->len);
	cJSON *st;
	int err = -ENOMEM;

	if (t && f) {
		if (health) {
			st = handle_status(e);
			prom_write_status(f, st);
			cJSON_Delete(st);
		}
		err = prom_write_locks(f, t, q);
	}
	if (f && fclose(f))
		err = -ENOMEM;
	agg_view__free(t);
	return err;
}

static cJSON *export_response(struct engine *e, const char *cmd, struct agg *agg, const struct query *q,
			      const struct export_req *x, uint64_t now, const uint64_t *counters0,
			      bool kernel_addrs)
{
	struct query_ctx qc = query_ctx(e, kernel_addrs);
	struct export_span span;
	struct export_buf buf = {};
	uint64_t start;
	struct agg_view *t;
	cJSON *o = NULL;
	int err = 0;

	if (x->format == LS_EXPORT_PROMETHEUS) {
		if (prometheus_text(e, agg, q, !counters0, &buf))
			return engine__error("out of memory writing the metrics");
		o = export_data(cmd, x, q, agg__window_start(agg, LS_WIN_ALL), now, &buf);
		free(buf.data);
		return o;
	}
	t = agg__view(agg, q->window, &start);
	if (!t)
		return engine__error("out of memory building the window");
	span.duration_ns = now - start;
	span.start_unix_ns = ls_clock_ns(CLOCK_REALTIME) - (ls_now_ns() - start);
	switch (x->format) {
	case LS_EXPORT_JSON:
		o = report_json(e, cmd, t, q, start, now, counters0, kernel_addrs);
		break;
	case LS_EXPORT_PPROF:
		err = export__pprof(t, q, &qc, x->profile, &span, &buf);
		break;
	case LS_EXPORT_FOLDED:
	default:
		err = export__folded(t, q, &qc, x->profile, &buf);
		break;
	}
	agg_view__free(t);
	if (x->format == LS_EXPORT_JSON)
		return o;
	if (err)
		return engine__error("cannot build the %s export: %s", ls_export_format_name(x->format),
				     strerror(-err));
	o = export_data(cmd, x, q, start, now, &buf);
	free(buf.data);
	return o;
}

char *engine__metrics(struct engine *e, size_t *len)
{
	struct export_buf buf = {};
	struct query q;

	query__init(&q);
	q.type_mask = 0;	/* every type, event waits too: the labels tell them apart */
	catch_up(e);
	if (prometheus_text(e, e->agg, &q, true, &buf)) {
		free(buf.data);
		return NULL;
	}
	*len = buf.len;
	return buf.data;
}

cJSON *engine__handle(struct engine *e, uint64_t client, const struct ls_peer *peer, const cJSON *req)
{
	const cJSON *cmd = cJSON_GetObjectItemCaseSensitive(req, "cmd");
	struct export_req x;
	char err[256] = "";
	struct query q;

	if (!cJSON_IsObject(req))
		return engine__error("a request is a JSON object with a 'cmd'");
	if (!cJSON_IsString(cmd))
		return engine__error("missing 'cmd' (one of: " ENGINE_CMDS ")");
	if (!strcmp(cmd->valuestring, "status"))
		return handle_status(e);
	if (!strcmp(cmd->valuestring, "threads"))
		return handle_threads(e, req);
	if (!strcmp(cmd->valuestring, "spin"))
		return handle_spin(e, peer, req);
	query__init(&q);
	if (strcmp(cmd->valuestring, "top") && strcmp(cmd->valuestring, "scan") &&
	    strcmp(cmd->valuestring, "report") && strcmp(cmd->valuestring, "export"))
		return engine__error("unknown cmd '%s' (one of: " ENGINE_CMDS ")", cmd->valuestring);
	if (query__from_json(req, &q, err, sizeof(err)) ||
	    parse_export_req(req, !strcmp(cmd->valuestring, "export"), &x, err, sizeof(err)))
		return engine__error("%s", err);
	if (x.wanted && strcmp(cmd->valuestring, "export") && strcmp(cmd->valuestring, "scan"))
		return engine__error("'format' applies to export and scan; %s has its own output", cmd->valuestring);
	if (!strcmp(cmd->valuestring, "scan"))
		return handle_scan(e, client, peer, req, &q, &x);
	catch_up(e);
	if (!strcmp(cmd->valuestring, "report") || !strcmp(cmd->valuestring, "export"))
		return export_response(e, cmd->valuestring, e->agg, &q, &x, ls_now_ns(), NULL,
				       kernel_addrs_allowed(e, peer));
	return rows_response(e, "top", e->agg, &q, ls_now_ns(), NULL, kernel_addrs_allowed(e, peer));
}

static void finish_scan(struct engine *e, struct scan *s, uint64_t now, bool exited)
{
	cJSON *resp = s->x.wanted ?
		export_response(e, "scan", s->agg, &s->q, &s->x, now, s->counters0, s->kernel_addrs) :
		rows_response(e, "scan", s->agg, &s->q, now, s->counters0, s->kernel_addrs);

	cJSON_AddBoolToObject(resp, "process_exited", exited);
	cJSON_AddBoolToObject(resp, "precise", s->precise);
	e->reply(e->reply_ctx, s->client, resp);
}

static void sample_rate(struct engine *e, uint64_t now, const uint64_t *cnt)
{
	uint64_t *v = e->rate_v[e->rate_head];

	v[RATE_KERNEL_WAITS] = e->kernel_waits;
	v[RATE_FUTEX_WAITS] = e->futex_waits;
	v[RATE_HOLDER_SAMPLES] = cnt[LS_CNT_HOLD_SAMPLES];
	v[RATE_SPIN_SAMPLES] = cnt[LS_CNT_SPIN_SAMPLES];
	v[RATE_RECORDS] = e->records;
	v[RATE_CPU_NS] = ls_clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	e->rate_ns[e->rate_head] = now;
	e->rate_head = (e->rate_head + 1) % (RATE_SECONDS + 1);
	if (e->rate_filled < RATE_SECONDS + 1)
		e->rate_filled++;
	e->last_rate_ns = now;
}

/*
 * Whether an on-demand hook is wanted, once a second: @count (a counter that only grows)
 * grew by at least @min_per_s per second over the last @elapsed_ns (by anything, at 0),
 * now or within @quiet_ns.
 */
static bool on_demand_tick(struct on_demand *d, uint64_t count, uint32_t min_per_s, uint64_t now,
			   uint64_t elapsed_ns, uint64_t quiet_ns)
{
	uint64_t n = count - d->last;

	d->last = count;
	/* in doubles: the first tick's elapsed is the whole uptime */
	if (n && (double)n * NSEC_PER_SEC >= (double)min_per_s * elapsed_ns)
		d->busy_ns = now;
	return d->busy_ns && now - d->busy_ns < quiet_ns;
}

/* Brings the aggregator up to date with the wait tables: every wait ended by now is in it. */
static void drain_waits(struct engine *e)
{
	int n = collector__waits_drain(e->coll, on_wait_entry, e);

	if (n < 0)
		pr_warn("wait table: cannot drain: %s\n", strerror(-n));
}

/* Scans that ended (deadline or exit) are answered, with every wait up to now. */
static void finish_scans(struct engine *e, uint64_t now)
{
	struct scan **pp, *s;
	bool drained = false;

	for (pp = &e->scans; (s = *pp);) {
		/*
		 * Gone, by its pidfd, or (without one) by its pid no longer naming the process
		 * that started at start_ticks. A pidfd's word is checked the same way: CI saw a
		 * scan end 23 us after it began, its process alive (cause not found).
		 */
		bool exited = (s->exited || s->pidfd < 0) && proc_start_ticks(s->pid) != s->start_ticks;

		if (s->exited && !exited) {
			pr_warn("scan of pid %u: its pidfd reported an exit, but it runs on; "
				"checking it by start time from now on\n", s->pid);
			close(s->pidfd);	/* out of the epoll set: level-triggered, it would repeat */
			s->pidfd = -1;
			s->exited = false;
		}

		if (now < s->deadline_ns && !exited) {
			pp = &s->next;
			continue;
		}
		if (!drained) {
			drain_waits(e);
			drained = true;
		}
		*pp = s->next;
		finish_scan(e, s, now, exited);
		scan_free(e, s);
	}
}

/* Once a second: one read of the counters feeds the rate and the on-demand hooks. */
static void per_second(struct engine *e, uint64_t now)
{
	uint64_t cnt[LS_CNT_MAX], elapsed = now - e->last_rate_ns;

	if (elapsed < NSEC_PER_SEC)
		return;
	collector__counters(e->coll, cnt);
	sample_rate(e, now, cnt);
	/* holder samples while contended user locks have holders to sample */
	collector__hold_sampling(e->coll, on_demand_tick(&e->holders, cnt[LS_CNT_HOLDERS], 0, now, elapsed,
							 HOLD_QUIET_NS));
	threads__tick(e->threads, e->coll, now);
	drain_waits(e);
	/* releasers named while futex waits come fast (the BPF side asks at once when they start) */
	collector__name_releasers(e->coll, on_demand_tick(&e->releasers, e->futex_waits,
							  e->opts.collector.waker_min_rate, now, elapsed,
							  WAKER_QUIET_NS));
}

void engine__tick(struct engine *e)
{
	uint64_t now;

	engine__consume(e);
	now = e->now_ns = ls_now_ns();
	usyms__poll(e->usyms);
	agg__rotate(e->agg, now);
	per_second(e, now);
	if (now - e->last_gc_ns >= GC_INTERVAL_NS) {
		e->stale_slots += collector__gc(e->coll);
		free_idle_stacks(e, &e->kstacks);
		free_idle_stacks(e, &e->ustacks);
		e->dumps_expired += dumps__gc(e->dumps, now);
		e->last_gc_ns = now;
	}
	finish_scans(e, now);
}

void engine__client_gone(struct engine *e, uint64_t client)
{
	struct scan **pp, *s;

	for (pp = &e->scans; (s = *pp);) {
		if (s->client != client) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		scan_free(e, s);
	}
}

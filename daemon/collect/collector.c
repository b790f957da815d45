// SPDX-License-Identifier: GPL-2.0
/*
 * The collector (collector.h): loading. The kernel-lock and scheduler skeletons are
 * opened, sized from the options, loaded (the best kernel-lock variant the kernel takes)
 * and given their rings and wait tables; what cannot be loaded is a degraded component.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "collect/collector.h"
#include "collect/collector_int.h"
#include "collect/probe.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "klock.h"
#include "klock.skel.h"
#include "scheduler.h"
#include "scheduler.skel.h"
#include "ustack.h"

#define PROG_GETTER(p) \
	static struct bpf_program *get_##p(struct klock_bpf *s) { return s->progs.p; }
PROG_GETTER(contention_begin_btf_owner_stack)
PROG_GETTER(contention_begin_btf)
PROG_GETTER(contention_end_btf)
PROG_GETTER(contention_begin_tp)
PROG_GETTER(contention_end_tp)

static const struct klock_variant klock_variants[] = {
	{ "tp_btf+owner_stack", true, true, get_contention_begin_btf_owner_stack, get_contention_end_btf },
	{ "tp_btf", true, false, get_contention_begin_btf, get_contention_end_btf },
	{ "tracepoint", false, false, get_contention_begin_tp, get_contention_end_tp },
};

/* A component turned off at load or attach: logged once and kept for status. */
void collector_degrade(struct collector *c, const char *component, const char *fmt, ...)
{
	struct collector_note *n;
	va_list ap;

	if (c->nr_notes == COLLECTOR_NOTES_MAX)
		return;
	n = &c->notes[c->nr_notes++];
	snprintf(n->component, sizeof(n->component), "%s", component);
	va_start(ap, fmt);
	vsnprintf(n->reason, sizeof(n->reason), fmt, ap);
	va_end(ap);
	pr_warn("%s: %s\n", component, n->reason);
}

static const char *const counter_names[LS_CNT_MAX] = {

	[LS_CNT_STACKED] = "stacked",
	[LS_CNT_SAMPLED] = "sampled",
	[LS_CNT_OWNER_STACKED] = "owner_stacked",
	[LS_CNT_CONTINUED] = "continued",
	[LS_CNT_SPIN_RESCHED] = "spin_rescheduled",
	[LS_CNT_QUEUED_AT_DRAIN] = "queued_at_drain",
	[LS_CNT_RB_WAKEUPS] = "ringbuf_wakeups",
	[LS_CNT_OWNER_ON_CPU] = "owner_on_cpu",
	[LS_CNT_NESTED] = "nested",

	[LS_CNT_USTACKED] = "futex_stacked",
	[LS_CNT_USAMPLED] = "futex_sampled",
	[LS_CNT_URELEASER] = "futex_releasers",
	[LS_CNT_UNONBLOCK] = "futex_nonblocking",
	[LS_CNT_HOLDERS] = "holders_noted",
	[LS_CNT_HOLD_SAMPLES] = "holder_samples",
	[LS_CNT_HOLD_RELEASED] = "holder_released",
	[LS_CNT_HOLD_THROTTLED] = "holder_throttled",
	[LS_CNT_UDUMPS] = "user_stack_dumps",
	[LS_CNT_UDUMP_SHORT] = "user_stack_dumps_short",
	[LS_CNT_SPIN_SAMPLES] = "spin_samples",
	[LS_CNT_SPIN_UNSTACKED] = "spin_samples_unstacked",
	[LS_CNT_YIELD_SITES] = "yield_sites",
	[LS_CNT_RESUMES] = "resumes",
	[LS_CNT_HOLDER_PREEMPT] = "holder_preemptions",
	[LS_CNT_KHOLDERS] = "kernel_holders_noted",
	[LS_CNT_KHOLDER_PREEMPT] = "kernel_holder_preemptions",
	[LS_DROP_RINGBUF] = "ringbuf_full",
	[LS_DROP_SLOT_FULL] = "wait_map_full",
	[LS_DROP_NEST_DEPTH] = "nest_too_deep",
	[LS_DROP_UNMATCHED_END] = "unmatched_end",
	[LS_DROP_STACK_COLLISION] = "stack_collision",
	[LS_DROP_STACK_FAILED] = "stack_failed",
	[LS_DROP_OWNER_STACK] = "owner_stack_failed",
	[LS_DROP_MISSED_END] = "missed_end",
	[LS_DROP_USLOT_FULL] = "futex_wait_map_full",
	[LS_DROP_USTACK_FAILED] = "user_stack_failed",
	[LS_DROP_UNREADABLE] = "futex_word_unreadable",
	[LS_DROP_UDUMP_FAILED] = "user_stack_dump_failed",
	[LS_DROP_SCHED_FULL] = "sched_thread_map_full",
	[LS_DROP_STOPS_FULL] = "stopped_thread_map_full",
	[LS_DROP_SELF_LOCK] = "self_lock",
	[LS_DROP_WAIT_TABLE] = "wait_table_full",
	[LS_DROP_EXITED_FULL] = "exited_thread_map_full",
	[LS_CNT_TABLE_FULL] = "table_overflow_records",
	[LS_CNT_BLOCK_WAKERS] = "block_wakers",
	[LS_CNT_WAIT_SHARED] = "shared_table_waits",
	[LS_CNT_UNSEEN_SWITCH_IN] = "unseen_switch_ins",
	[LS_CNT_UWORDS] = "futex_words_read",
	[LS_CNT_STACK_NS] = "stack_ns",
};

const char *ls_counter_name(enum ls_counter c)
{
	return c < LS_CNT_MAX && counter_names[c] ? counter_names[c] : "unknown";
}

static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list args)
{
	if (level == LIBBPF_DEBUG && ls_log_max < LS_LOG_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, args);
}

static void probe_features(struct collector *c)
{
	c->feat.tp_btf = ls_probe_ok(&c->probes, LS_PROBE_TP_BTF);
	c->feat.task_from_pid = ls_probe_ok(&c->probes, LS_PROBE_TASK_FROM_PID);
}

/*
 * The load-time settings of common.bpf.h and sampling.bpf.h, which every component's
 * skeleton has under the same names (each skeleton has its own rodata type).
 * A half-full ring wakes the reader: the timer drains well before that unless the rate is
 * extreme. Each wakeup costs more than the records it saves the timer: on the 2-CPU guest
 * of docs/performance.md, a reader woken 20 times a second on the other CPU cost a
 * ping-pong pinned to one 2 points (DWARF dumps filled a quarter of the ring that often).
 */
#define SET_SHARED_RODATA(rodata, o) do {						\
	(rodata)->targ_tgid = (o)->tgid;						\
	(rodata)->wakeup_bytes = (o)->ringbuf_bytes / 2;				\
	(rodata)->lock_stack_cost_ns = (o)->stack_rate ? NSEC_PER_SEC / (o)->stack_rate : 0; \
	(rodata)->cpu_stack_cost_ns = (o)->cpu_stack_rate ? NSEC_PER_SEC / (o)->cpu_stack_rate : 0; \
	(rodata)->stack_budget_ppm = (o)->stack_budget_us;				\
	(rodata)->lock_bucket_mask = (o)->max_locks - 1;				\
} while (0)

/* Dumps of @bytes of stack; 0 turns them off (frame pointers where a component has them). */
#define SET_DUMP_RODATA(rodata, o, bytes) do {						\
	(rodata)->ustack_bytes = (bytes);						\
	if (bytes) {									\
		(rodata)->cpu_stack_cost_ns = (o)->udump_rate ? NSEC_PER_SEC / (o)->udump_rate : 0; \
		(rodata)->cpu_burst_ns = collector_dump_burst_ns(o, bytes, (rodata)->cpu_stack_cost_ns); \
	}										\
} while (0)

/*
 * CO-RE against the kernel's own BTF only. Every type the programs read is vmlinux's; the
 * ones they probe for and may not find (PREEMPT_RT's rwbase_rt) would otherwise send
 * libbpf through the module BTFs, and listing those (BPF_BTF_GET_NEXT_ID) needs
 * CAP_SYS_ADMIN: with this, CAP_BPF and CAP_PERFMON are enough.
 */
static const struct bpf_object_open_opts open_opts = {
	.sz = sizeof(struct bpf_object_open_opts),
	.btf_custom_path = "/sys/kernel/btf/vmlinux",
};

/* The mask of a direct-mapped array for @n entries: @n rounded down to a power of 2, less 1. */
static __u32 pow2_mask(__u32 n)
{
	return (1U << (31 - __builtin_clz(n))) - 1;
}

static bool variant_usable(const struct collector *c, const struct klock_variant *v)
{
	if (v->needs_tp_btf && (!c->feat.tp_btf || c->opts.force_tp))
		return false;
	if (v->needs_task_from_pid && (!c->feat.task_from_pid || c->opts.no_owner_stack))
		return false;
	return true;
}

static int configure(struct collector *c, const struct klock_variant *v)
{
	const struct collector_opts *o = &c->opts;
	struct klock_bpf *s = c->skel;
	size_t i;
	int err;

	SET_SHARED_RODATA(s->rodata, o);

	/* the array takes as many threads as the hash does at most, so max-threads bounds both */
	s->rodata->slot_cache_mask = pow2_mask(o->max_threads < KLOCK_SLOT_CACHE ? o->max_threads : KLOCK_SLOT_CACHE);
	s->rodata->kholders_mask = pow2_mask(o->max_holders);
	if ((err = bpf_map__set_max_entries(s->maps.ringbufs, c->nr_cpus)) ||
	    (err = bpf_map__set_max_entries(s->maps.slot_cache, s->rodata->slot_cache_mask + 1)) ||
	    (err = bpf_map__set_max_entries(s->maps.thread_slots, o->max_threads)) ||
	    (err = bpf_map__set_max_entries(s->maps.stacks, o->stack_entries)) ||
	    (err = bpf_map__set_value_size(s->maps.stacks, o->max_stack * sizeof(__u64))) ||
	    (err = bpf_map__set_max_entries(s->maps.lock_buckets, o->max_locks)) ||
	    (err = bpf_map__set_max_entries(s->maps.owner_stacks, o->owner_stacks)) ||
	    (err = bpf_map__set_max_entries(s->maps.kholders, s->rodata->kholders_mask + 1)))
		return err;
	/* ulock's switch program reads the owners noted (setup_ulock needs tp_btf) */
	s->rodata->note_holders = o->user_locks && c->feat.tp_btf;
	s->rodata->nr_cpus = c->nr_cpus;

	for (i = 0; i < sizeof(klock_variants) / sizeof(klock_variants[0]); i++) {
		bpf_program__set_autoload(klock_variants[i].begin(s), false);
		bpf_program__set_autoload(klock_variants[i].end(s), false);
	}
	c->progs[0] = v->begin(s);
	c->progs[1] = v->end(s);
	bpf_program__set_autoload(c->progs[0], true);
	bpf_program__set_autoload(c->progs[1], true);
	return 0;
}

/* klock's skeleton for variant @v, opened and configured; loaded later (load_klock()). */
static int open_variant(struct collector *c, const struct klock_variant *v)
{
	int err;

	c->skel = klock_bpf__open_opts(&open_opts);
	if (!c->skel)
		return -errno;
	err = configure(c, v);
	if (err) {
		klock_bpf__destroy(c->skel);
		c->skel = NULL;
		return err;
	}
	c->variant = v;
	return 0;
}

/*
 * The maps klock and the scheduler share: one set of rings for all records, one place
 * where all counters sum, one pair of wait tables to drain, the kernel-lock holders that
 * the scheduler's switch reads. The collector makes them, like klock's definitions, so
 * that neither object has to be loaded before the other: both load (the kernel verifies
 * their programs, 0.3 and 0.4 s here) at once. SHARED_OF(s, m): skeleton @s's maps that
 * are the shared ones (each skeleton's type is its own, the names are the same).
 */
#define SHARED_OF(s, m)							\
	do {								\
		(m)[SHARED_RINGBUFS] = (s)->maps.ringbufs;		\
		(m)[SHARED_WAIT_TABLES] = (s)->maps.wait_tables;	\
		(m)[SHARED_COUNTERS] = (s)->maps.counters;		\
		(m)[SHARED_WAIT_CACHE] = (s)->maps.wait_cache;		\
		(m)[SHARED_WAIT_WRITERS] = (s)->maps.wait_writers;		\
		(m)[SHARED_KHOLDERS] = (s)->maps.kholders;		\
	} while (0)

/* The objects' maps @m use the shared ones instead of making their own. */
static int reuse_shared(const struct collector *c, struct bpf_map *m[SHARED_MAPS])
{
	int i, err;

	for (i = 0; i < SHARED_MAPS; i++)
		if ((err = bpf_map__reuse_fd(m[i], c->shared_fds[i])))
			return err;
	return 0;
}

/* A map as @m defines it (its configured size); @inner_fd: an inner map's template, or -1. */
static int create_like(const struct bpf_map *m, int inner_fd)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = bpf_map__map_flags(m));
	int fd;

	if (inner_fd >= 0)
		o.inner_map_fd = inner_fd;
	fd = bpf_map_create(bpf_map__type(m), bpf_map__name(m), bpf_map__key_size(m), bpf_map__value_size(m),
			    bpf_map__max_entries(m), &o);
	return fd < 0 ? -errno : fd;
}

/* @n maps in the slots of outer map @outer_fd. */
static int fill_outer(int outer_fd, const int *fds, int n)
{
	__u32 key;

	for (key = 0; key < (__u32)n; key++)
		if (bpf_map_update_elem(outer_fd, &key, &fds[key], BPF_ANY))
			return -errno;
	return 0;
}

/* A ring per CPU, and the manager that polls them all. */
static int create_rings(struct collector *c)
{
	int i, err;

	c->ring_fds = calloc(c->nr_cpus, sizeof(int));
	if (!c->ring_fds)
		return -ENOMEM;
	for (i = 0; i < c->nr_cpus; i++)
		c->ring_fds[i] = -1;
	for (i = 0; i < c->nr_cpus; i++) {
		c->ring_fds[i] = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "ls_ring", 0, 0, c->opts.ringbuf_bytes, NULL);
		if (c->ring_fds[i] < 0)
			return -errno;
		c->nr_rings++;
	}
	for (i = 0; i < c->nr_cpus; i++) {
		if (!c->rb)
			c->rb = ring_buffer__new(c->ring_fds[i], c->opts.on_record, c->opts.ctx, NULL);
		else if ((err = ring_buffer__add(c->rb, c->ring_fds[i], c->opts.on_record, c->opts.ctx)))
			return err;
		if (!c->rb)
			return -errno;
	}
	return 0;
}

/* The wait tables every component adds to (waits.bpf.h): two hashes of the configured size. */
static int create_wait_tables(struct collector *c)
{
	int i;

	for (i = 0; i < LS_WAIT_TABLES; i++)
		c->table_fds[i] = -1;
	for (i = 0; i < LS_WAIT_TABLES; i++) {
		c->table_fds[i] = bpf_map_create(BPF_MAP_TYPE_HASH, "ls_waits", sizeof(struct ls_wait_key),
						 sizeof(struct ls_wait_val), c->opts.wait_keys, NULL);
		if (c->table_fds[i] < 0)
			return -errno;
	}
	return 0;
}

/* The shared maps, as the configured klock skeleton defines them; the rings and tables in theirs. */
static int create_shared(struct collector *c)
{
	struct bpf_map *m[SHARED_MAPS];
	int i, err;

	for (i = 0; i < SHARED_MAPS; i++)
		c->shared_fds[i] = -1;
	if ((err = create_rings(c)) || (err = create_wait_tables(c)))
		return err;
	SHARED_OF(c->skel, m);
	for (i = 0; i < SHARED_MAPS; i++) {
		int inner = i == SHARED_RINGBUFS ? c->ring_fds[0] : i == SHARED_WAIT_TABLES ? c->table_fds[0] : -1;

		c->shared_fds[i] = create_like(m[i], inner);
		if (c->shared_fds[i] < 0)
			return c->shared_fds[i];
	}
	if ((err = fill_outer(c->shared_fds[SHARED_RINGBUFS], c->ring_fds, c->nr_cpus)) ||
	    (err = fill_outer(c->shared_fds[SHARED_WAIT_TABLES], c->table_fds, LS_WAIT_TABLES)))
		return err;
	return 0;
}

struct bpf_program *sched_prog_variant(struct scheduler_bpf *s, int i, bool direct)
{
	struct bpf_program *progs[SCHED_PROGS][2] = {
		[SCHED_SWITCH] = { s->progs.sched_switch, s->progs.sched_switch_direct },
		[SCHED_WAKING] = { s->progs.sched_waking, s->progs.sched_waking_direct },
	};

	return progs[i][direct];
}

static void sched_autoload(struct scheduler_bpf *s, bool precise, bool spin, bool direct)
{
	int i;

	for (i = 0; i < SCHED_PROGS; i++) {
		bpf_program__set_autoload(sched_prog_variant(s, i, !direct), false);
		bpf_program__set_autoload(sched_prog_variant(s, i, direct), true);
	}
	/* the precise programs load with the rest but attach only on demand */
	bpf_program__set_autoload(s->progs.sched_enter_futex, precise);
	bpf_program__set_autoload(s->progs.sched_exit_futex, precise);
	bpf_program__set_autoload(s->progs.sched_enter_futex_waitv, precise);
	bpf_program__set_autoload(s->progs.sched_exit_futex_waitv, precise);
	bpf_program__set_autoload(s->progs.spin_sample, spin);
	bpf_program__set_autoload(s->progs.dump_tasks, spin);
	/* the writer count is one map for both objects: klock's barrier asks it (drain.c) */
	bpf_program__set_autoload(s->progs.wait_barrier, false);
}

/*
 * The scheduler component: futex waits (user-locks), and yields, stops, spin samples and
 * the per-thread counters (sched-threads). Its user stacks are the waits' dumps; yield
 * sites, spin samples and bursts have their own window (spin-stack-bytes) but the same
 * per-CPU budget. Opened and configured here, on the shared maps; loaded by sched_load().
 */
static int open_sched(struct collector *c)
{
	const struct collector_opts *o = &c->opts;
	struct bpf_map *shared[SHARED_MAPS];
	struct scheduler_bpf *s;
	int err;

	s = c->sskel = scheduler_bpf__open_opts(&open_opts);
	if (!s)
		return -errno;
	SET_SHARED_RODATA(s->rodata, o);
	SET_DUMP_RODATA(s->rodata, o, o->ustack_bytes);
	s->rodata->spin_stack_bytes = o->ustack_bytes ? o->spin_stack_bytes : 0;
	s->rodata->spin_dump_cost_ns = o->spin_dump_rate ? NSEC_PER_SEC / o->spin_dump_rate : 0;
	s->rodata->futex_waits = o->user_locks;
	s->rodata->block_waits = o->user_locks && o->block_waits;
	s->rodata->waker_min_blocks = o->waker_min_rate;
	s->rodata->spin_source = o->sched_threads != 0;
	s->rodata->rq_clock_global = ls_sched_clock_global();
	/* holders is indexed by the tid's low bits: the largest power of 2 the setting allows */
	s->rodata->holders_mask = pow2_mask(o->max_holders);
	s->rodata->kholders_mask = pow2_mask(o->max_holders);	/* as klock's (configure()) */
	c->feat.switch_clock = s->rodata->rq_clock_global ? "run_queue" : "monotonic";
	SHARED_OF(s, shared);
	if ((err = reuse_shared(c, shared)) ||
	    (err = bpf_map__set_max_entries(s->maps.thread_slots, o->uthreads)) ||
	    (err = bpf_map__set_max_entries(s->maps.stacks, o->ustack_entries)) ||
	    (err = bpf_map__set_value_size(s->maps.stacks, o->max_stack * sizeof(__u64))) ||
	    (err = bpf_map__set_max_entries(s->maps.lock_buckets, o->max_locks)) ||
	    (err = bpf_map__set_max_entries(s->maps.holders, s->rodata->holders_mask + 1)) ||
	    (err = bpf_map__set_max_entries(s->maps.spinners, o->sched_threads ? SCHED_DEF_MAX_SPINNERS : 1)) ||
	    (err = bpf_map__set_max_entries(s->maps.exited_tasks, o->sched_threads ? SCHED_DEF_MAX_EXITED : 1)) ||
	    (err = bpf_map__set_max_entries(s->maps.exited_cache, o->sched_threads ? SCHED_EXITED_CACHE : 1)) ||
	    (err = bpf_map__set_max_entries(s->maps.spin_cache, o->sched_threads ? SCHED_SPIN_CACHE : 1)) ||
	    (err = bpf_map__set_max_entries(s->maps.ustack_scratch, c->nr_cpus)))
		return err;
	sched_autoload(s, c->feat.precise, o->sched_threads != 0, c->feat.task_from_pid);
	return 0;
}

/*
 * The scheduler's load, beside klock's: its own object, and nothing of the collector's
 * but sched_load_err, which collector__new() reads once it has joined this thread.
 */
static void *sched_load(void *arg)
{
	struct collector *c = arg;

	c->sched_load_err = scheduler_bpf__load(c->sskel);
	return NULL;
}

/*
 * Opens the scheduler component when it is asked for and the kernel can have it, and
 * starts its load in @thread; false when it does not run (said, and the reason kept).
 */
static bool start_sched(struct collector *c, pthread_t *thread)
{
	const char *what = c->opts.user_locks ? "user-space locks and scheduling" : "scheduling";
	int err;

	if (!c->opts.user_locks && !c->opts.sched_threads)
		return false;
	if (!c->feat.tp_btf) {
		collector_degrade(c, "scheduler", "no BTF-enabled tracepoints: %s are not traced", what);
		return false;
	}
	c->feat.precise = c->opts.user_locks && ls_probe_ok(&c->probes, LS_PROBE_SYSCALL_TP);
	err = open_sched(c);
	if (!err) {
		if (!pthread_create(thread, NULL, sched_load, c))
			return true;
		err = scheduler_bpf__load(c->sskel);	/* no thread: loaded here */
	}
	c->sched_load_err = err;
	return false;
}

/* The scheduler component's load is over (@thread joined if it ran): in use, or off and said why. */
static void finish_sched(struct collector *c, bool started, pthread_t thread)
{
	const char *what = c->opts.user_locks ? "user-space locks and scheduling" : "scheduling";

	if (started)
		pthread_join(thread, NULL);
	if (c->sched_load_err) {
		collector_degrade(c, "scheduler", "cannot load (%s): %s are not traced", strerror(-c->sched_load_err),
				  what);
		scheduler_bpf__destroy(c->sskel);
		c->sskel = NULL;
		c->feat.precise = false;
		return;
	}
	if (!c->sskel)
		return;
	c->feat.ulock = c->opts.user_locks;
	c->feat.sched = c->opts.sched_threads != 0;
	if (c->feat.ulock)
		c->feat.user_unwind = c->opts.ustack_bytes ? "dwarf" : "fp";
}

/*
 * klock, in the first variant the kernel takes (opened for @i, the first usable one,
 * already): each on the shared maps.
 */
static int load_klock(struct collector *c, size_t i)
{
	struct bpf_map *shared[SHARED_MAPS];
	int err;

	for (;;) {
		SHARED_OF(c->skel, shared);
		err = reuse_shared(c, shared);
		if (!err && !(err = klock_bpf__load(c->skel)))
			return 0;
		collector_degrade(c, "klock", "variant %s failed to load (%s), trying the next", c->variant->name,
				  strerror(-err));
		klock_bpf__destroy(c->skel);
		c->skel = NULL;
		while (++i < sizeof(klock_variants) / sizeof(klock_variants[0]) && !variant_usable(c, &klock_variants[i]))
			;
		if (i == sizeof(klock_variants) / sizeof(klock_variants[0]))
			return err;
		if ((err = open_variant(c, &klock_variants[i])))
			return err;
	}
}

/* A dump window: 0 (off), or a multiple of 8 in the limits that a ring holds a few of. */
int collector__new(const struct collector_opts *opts, struct collector **out)
{
	bool sched_started = false;
	pthread_t sched_thread;
	struct collector *c;
	size_t i;
	int err = -ENOTSUP;

	char why[256];

	if (collector_opts__check(opts, getpagesize(), why, sizeof(why))) {
		pr_err("%s\n", why);
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->opts = *opts;
	libbpf_set_print(libbpf_print);
	c->nr_cpus = libbpf_num_possible_cpus();
	if (c->nr_cpus < 0) {
		err = c->nr_cpus;
		goto cleanup;
	}
	if (opts->probes)
		c->probes = *opts->probes;
	else
		ls_probes_run(&c->probes);
	probe_features(c);
	/* the first variant this kernel can have: its map definitions make the shared maps */
	for (i = 0; i < sizeof(klock_variants) / sizeof(klock_variants[0]); i++)
		if (variant_usable(c, &klock_variants[i]))
			break;
	if (i == sizeof(klock_variants) / sizeof(klock_variants[0]) || (err = open_variant(c, &klock_variants[i])))
		goto cleanup;
	if ((err = create_shared(c)))
		goto cleanup;
	sched_started = start_sched(c, &sched_thread);
	err = load_klock(c, i);
	finish_sched(c, sched_started, sched_thread);
	if (err)
		goto cleanup;
	c->feat.owner_stacks = c->variant->needs_task_from_pid;
	c->feat.attach_mode = c->variant->needs_tp_btf ? "tp_btf" : "tracepoint";
	*out = c;
	return 0;
cleanup:
	collector__free(c);
	return err;
}

void collector__start(struct collector *c)
{
	c->skel->bss->enabled = true;
	if (c->sskel)
		c->sskel->bss->enabled = true;
}

void collector__stop(struct collector *c)
{
	c->skel->bss->enabled = false;
	if (c->sskel)
		c->sskel->bss->enabled = false;
}

int collector__epoll_fd(const struct collector *c)
{
	return ring_buffer__epoll_fd(c->rb);
}

int collector__consume(struct collector *c)
{
	return ring_buffer__consume(c->rb);
}

const struct collector_features *collector__features(const struct collector *c)
{
	return &c->feat;
}

int collector__notes(const struct collector *c, const struct collector_note **out)
{
	*out = c->notes;
	return c->nr_notes;
}

const struct ls_probes *collector__probes(const struct collector *c)
{
	return &c->probes;
}

struct collector_drain_stats collector__drain_stats(const struct collector *c)
{
	return c->drain;
}

int collector__nr_rings(const struct collector *c)
{
	return c->nr_rings;
}

void collector__free(struct collector *c)
{
	int i;

	if (!c)
		return;
	for (i = 0; i < 2; i++)
		bpf_link__destroy(c->links[i]);
	for (i = 0; c->sskel && i < PRECISE_PROGS; i++)
		bpf_link__destroy(c->precise_links[i]);
	collector_sampler_off(&c->hold, c->nr_cpus);
	collector_sampler_off(&c->spin, c->nr_cpus);
	for (i = 0; i < SCHED_PROGS; i++)
		bpf_link__destroy(c->slinks[i]);
	bpf_link__destroy(c->iter_link);
	scheduler_bpf__destroy(c->sskel);
	for (i = 0; i < LS_WAIT_TABLES; i++)
		if (c->table_fds[i] > 0)
			close(c->table_fds[i]);
	for (i = 0; i < SHARED_MAPS; i++)
		if (c->shared_fds[i] > 0)
			close(c->shared_fds[i]);
	ring_buffer__free(c->rb);
	for (i = 0; c->ring_fds && i < c->nr_cpus; i++)
		if (c->ring_fds[i] >= 0)
			close(c->ring_fds[i]);
	free(c->ring_fds);
	klock_bpf__destroy(c->skel);
	free(c);
}


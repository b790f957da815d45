// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "collect/collector.h"
#include "collect/cpuclock.h"
#include "collect/probe.h"
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/log.h"
#include "klock.h"
#include "klock.skel.h"
#include "scheduler.h"
#include "scheduler.skel.h"
#include "ustack.h"


/*
 * Program variants, best first. One begin and one end program are autoloaded; when a
 * variant cannot be used (feature missing, verifier refuses) the next one is tried.
 */
struct klock_variant {
	const char *name;
	bool needs_tp_btf;
	bool needs_task_from_pid;
	struct bpf_program *(*begin)(struct klock_bpf *);
	struct bpf_program *(*end)(struct klock_bpf *);
};

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

/* The precise-mode programs: attached only while a precise scan runs. */
enum { PRECISE_PROGS = 4 };
/* The scheduler's tracepoint programs, in sched_prog()'s order. */
enum { SCHED_SWITCH, SCHED_WAKING, SCHED_EXIT, SCHED_PROGS };

/* cpu-clock events, one per CPU, each running @prog at @freq samples/s. */
/* A cpu-clock sampler: while on, an event with the program on each CPU; NULL while off. */
struct sampler {
	int *fds;			/* -1 where a CPU has none */
	struct bpf_link **links;
};

struct collector {
	struct collector_opts opts;
	struct collector_features feat;
	const struct klock_variant *variant;
	struct klock_bpf *skel;
	struct bpf_link *links[2];
	struct bpf_program *progs[2];
	struct scheduler_bpf *sskel;
	struct bpf_link *slinks[SCHED_PROGS];
	struct bpf_link *iter_link;		/* the task iterator: per-thread counters */
	struct bpf_link *precise_links[PRECISE_PROGS];
	int precise_pids;
	bool waker_wanted;			/* the engine wants releasers named */
	bool waker_failed;			/* sched_waking would not attach: said once */
	struct sampler hold;			/* the holder sampler */
	int hold_failing;			/* its last try to turn on failed with this */
	struct sampler spin;			/* the spin sampler */
	int table_fds[LS_WAIT_TABLES];		/* the wait tables (lockscope.h) */
	__u32 epoch;				/* the table programs write: table_fds[epoch & 1] */
	uint64_t drain_races;			/* drains that went ahead with a program still on the table */
	struct ring_buffer *rb;
	int *ring_fds;
	int nr_rings;
	int nr_cpus;
	struct ls_probes probes;
	struct collector_note notes[COLLECTOR_NOTES_MAX];
	int nr_notes;
};

/* A component turned off at load or attach: logged once and kept for status. */
static void __attribute__((format(printf, 3, 4)))
degrade(struct collector *c, const char *component, const char *fmt, ...)
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
 * A quarter-full ring wakes the reader: the timer drains well before that unless the
 * rate is extreme.
 */
#define SET_SHARED_RODATA(rodata, o) do {						\
	(rodata)->targ_tgid = (o)->tgid;						\
	(rodata)->wakeup_bytes = (o)->ringbuf_bytes / 4;				\
	(rodata)->lock_stack_cost_ns = (o)->stack_rate ? NSEC_PER_SEC / (o)->stack_rate : 0; \
	(rodata)->cpu_stack_cost_ns = (o)->cpu_stack_rate ? NSEC_PER_SEC / (o)->cpu_stack_rate : 0; \
	(rodata)->lock_bucket_mask = (o)->max_locks - 1;				\
} while (0)

/*
 * A dump costs about what a frame-pointer walk does in BPF, but the daemon then unwinds
 * it (5-11 us measured): with dumps on, the per-CPU stack budget is the dump rate, and a
 * burst fills at most a quarter of the ring (the point the reader is woken).
 */
static __u64 dump_burst_ns(const struct collector_opts *o, __u32 bytes, __u64 cost_ns)
{
	__u64 fit = o->ringbuf_bytes / 4 / (sizeof(struct ls_ustack_rec) + bytes);

	return cost_ns * (fit ? fit : 1);
}

/* Dumps of @bytes of stack; 0 turns them off (frame pointers where a component has them). */
#define SET_DUMP_RODATA(rodata, o, bytes) do {						\
	(rodata)->ustack_bytes = (bytes);						\
	if (bytes) {									\
		(rodata)->cpu_stack_cost_ns = (o)->udump_rate ? NSEC_PER_SEC / (o)->udump_rate : 0; \
		(rodata)->cpu_burst_ns = dump_burst_ns(o, bytes, (rodata)->cpu_stack_cost_ns); \
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

	if ((err = bpf_map__set_max_entries(s->maps.ringbufs, c->nr_cpus)) ||
	    (err = bpf_map__set_max_entries(s->maps.thread_slots, o->max_threads)) ||
	    (err = bpf_map__set_max_entries(s->maps.stacks, o->stack_entries)) ||
	    (err = bpf_map__set_value_size(s->maps.stacks, o->max_stack * sizeof(__u64))) ||
	    (err = bpf_map__set_max_entries(s->maps.lock_buckets, o->max_locks)) ||
	    (err = bpf_map__set_max_entries(s->maps.owner_stacks, o->owner_stacks)) ||
	    (err = bpf_map__set_max_entries(s->maps.kholders, o->max_holders)))
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

static int load_variant(struct collector *c, const struct klock_variant *v)
{
	int err;

	c->skel = klock_bpf__open_opts(&open_opts);
	if (!c->skel)
		return -errno;
	err = configure(c, v);
	if (!err)
		err = klock_bpf__load(c->skel);
	if (err) {
		klock_bpf__destroy(c->skel);
		c->skel = NULL;
		return err;
	}
	c->variant = v;
	return 0;
}

static int create_rings(struct collector *c)
{
	int outer = bpf_map__fd(c->skel->maps.ringbufs), i, err;

	c->ring_fds = calloc(c->nr_cpus, sizeof(int));
	if (!c->ring_fds)
		return -ENOMEM;
	for (i = 0; i < c->nr_cpus; i++)
		c->ring_fds[i] = -1;
	for (i = 0; i < c->nr_cpus; i++) {
		__u32 key = i;

		c->ring_fds[i] = bpf_map_create(BPF_MAP_TYPE_RINGBUF, "ls_ring", 0, 0,
						c->opts.ringbuf_bytes, NULL);
		if (c->ring_fds[i] < 0)
			return -errno;
		if (bpf_map_update_elem(outer, &key, &c->ring_fds[i], BPF_ANY))
			return -errno;
		c->nr_rings++;
	}
	for (i = 0; i < c->nr_cpus; i++) {
		if (!c->rb)
			c->rb = ring_buffer__new(c->ring_fds[i], c->opts.on_record,
						 c->opts.ctx, NULL);
		else if ((err = ring_buffer__add(c->rb, c->ring_fds[i],
						 c->opts.on_record, c->opts.ctx)))
			return err;
		if (!c->rb)
			return -errno;
	}
	return 0;
}

/*
 * The wait tables every component adds to (waits.bpf.h): two hashes of the configured
 * size, in klock's outer map; sched reuses that map.
 */
static int create_wait_tables(struct collector *c)
{
	int outer = bpf_map__fd(c->skel->maps.wait_tables), i;

	for (i = 0; i < LS_WAIT_TABLES; i++)
		c->table_fds[i] = -1;
	for (i = 0; i < LS_WAIT_TABLES; i++) {
		__u32 key = i;

		c->table_fds[i] = bpf_map_create(BPF_MAP_TYPE_HASH, "ls_waits", sizeof(struct ls_wait_key),
						 sizeof(struct ls_wait_val), c->opts.wait_keys, NULL);
		if (c->table_fds[i] < 0)
			return -errno;
		if (bpf_map_update_elem(outer, &key, &c->table_fds[i], BPF_ANY))
			return -errno;
	}
	return 0;
}

/*
 * Components after klock use the rings, counters and wait tables klock created (the same
 * map names in every object): one set of rings for all records, one place where all
 * counters sum, one pair of tables to drain.
 */
#define REUSE_SHARED_MAPS(m, c)								\
	(bpf_map__reuse_fd((m)->ringbufs, bpf_map__fd((c)->skel->maps.ringbufs)) ?:		\
	 bpf_map__reuse_fd((m)->counters, bpf_map__fd((c)->skel->maps.counters)) ?:		\
	 bpf_map__reuse_fd((m)->wait_tables, bpf_map__fd((c)->skel->maps.wait_tables)) ?:	\
	 bpf_map__reuse_fd((m)->wait_cache, bpf_map__fd((c)->skel->maps.wait_cache)) ?:	\
	 bpf_map__reuse_fd((m)->wait_cache_busy, bpf_map__fd((c)->skel->maps.wait_cache_busy)))

static void sched_autoload(struct scheduler_bpf *s, bool precise, bool spin)
{
	/* the precise programs load with the rest but attach only on demand */
	bpf_program__set_autoload(s->progs.sched_enter_futex, precise);
	bpf_program__set_autoload(s->progs.sched_exit_futex, precise);
	bpf_program__set_autoload(s->progs.sched_enter_futex_waitv, precise);
	bpf_program__set_autoload(s->progs.sched_exit_futex_waitv, precise);
	bpf_program__set_autoload(s->progs.spin_sample, spin);
	bpf_program__set_autoload(s->progs.dump_tasks, spin);
}

/*
 * The scheduler component: futex waits (user-locks), and yields, stops, spin samples and
 * the per-thread counters (sched-threads). Its user stacks are the waits' dumps; yield
 * sites, spin samples and bursts have their own window (spin-stack-bytes) but the same
 * per-CPU budget.
 */
static int load_sched(struct collector *c)
{
	const struct collector_opts *o = &c->opts;
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
	s->rodata->waker_min_blocks = o->waker_min_rate;
	s->rodata->spin_source = o->sched_threads != 0;
	if ((err = REUSE_SHARED_MAPS(&s->maps, c)) ||
	    (err = bpf_map__reuse_fd(s->maps.kholders, bpf_map__fd(c->skel->maps.kholders))) ||
	    (err = bpf_map__set_max_entries(s->maps.thread_slots, o->uthreads)) ||
	    (err = bpf_map__set_max_entries(s->maps.stacks, o->ustack_entries)) ||
	    (err = bpf_map__set_value_size(s->maps.stacks, o->max_stack * sizeof(__u64))) ||
	    (err = bpf_map__set_max_entries(s->maps.lock_buckets, o->max_locks)) ||
	    (err = bpf_map__set_max_entries(s->maps.holders, o->max_holders)) ||
	    (err = bpf_map__set_max_entries(s->maps.spinners, o->sched_threads ? SCHED_DEF_MAX_SPINNERS : 1)) ||
	    (err = bpf_map__set_max_entries(s->maps.exited_tasks, o->sched_threads ? SCHED_DEF_MAX_EXITED : 1)) ||
	    (err = bpf_map__set_max_entries(s->maps.ustack_scratch, c->nr_cpus)))
		return err;
	sched_autoload(s, c->feat.precise, o->sched_threads != 0);
	return scheduler_bpf__load(s);
}

static void setup_sched(struct collector *c)
{
	const char *what = c->opts.user_locks ? "user-space locks and scheduling" : "scheduling";
	int err;

	if (!c->opts.user_locks && !c->opts.sched_threads)
		return;
	if (!c->feat.tp_btf) {
		degrade(c, "scheduler", "no BTF-enabled tracepoints: %s are not traced", what);
		return;
	}
	c->feat.precise = c->opts.user_locks && ls_probe_ok(&c->probes, LS_PROBE_SYSCALL_TP);
	err = load_sched(c);
	if (err) {
		degrade(c, "scheduler", "cannot load (%s): %s are not traced", strerror(-err), what);
		scheduler_bpf__destroy(c->sskel);
		c->sskel = NULL;
		c->feat.precise = false;
		return;
	}
	c->feat.ulock = c->opts.user_locks;
	c->feat.sched = c->opts.sched_threads != 0;
	if (c->feat.ulock)
		c->feat.user_unwind = c->opts.ustack_bytes ? "dwarf" : "fp";
}

/* A dump window: 0 (off), or a multiple of 8 in the limits that a ring holds a few of. */
static bool dump_bytes_ok(const struct collector_opts *opts, __u32 bytes)
{
	return !bytes || (bytes >= LS_USTACK_MIN_BYTES && bytes <= LS_USTACK_MAX_BYTES && !(bytes % 8) &&
			  bytes <= opts->ringbuf_bytes / 8);
}

int collector__new(const struct collector_opts *opts, struct collector **out)
{
	struct collector *c;
	size_t i;
	int err = -ENOTSUP;

	if (opts->ringbuf_bytes < (__u32)getpagesize() || (opts->ringbuf_bytes & (opts->ringbuf_bytes - 1)))
		return -EINVAL;
	if (!opts->max_stack || opts->max_stack > LS_MAX_STACK_DEPTH)
		return -EINVAL;
	/* a ring must hold a few dumps besides everything else: say which setting to change */
	if (!dump_bytes_ok(opts, opts->ustack_bytes) ||
	    (opts->ustack_bytes && !dump_bytes_ok(opts, opts->spin_stack_bytes))) {
		__u32 widest = opts->ustack_bytes > opts->spin_stack_bytes ? opts->ustack_bytes :
			       opts->spin_stack_bytes;

		pr_err("ringbuf-kb=%u holds too few stack dumps of user-stack-bytes=%u and spin-stack-bytes=%u: "
		       "raise ringbuf-kb to %u or lower the dump windows\n", opts->ringbuf_bytes / 1024,
		       opts->ustack_bytes, opts->spin_stack_bytes, widest * 8 / 1024);
		return -EINVAL;
	}
	if (!opts->max_locks || (opts->max_locks & (opts->max_locks - 1)))
		return -EINVAL;
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
	for (i = 0; i < sizeof(klock_variants) / sizeof(klock_variants[0]); i++) {
		const struct klock_variant *v = &klock_variants[i];

		if (!variant_usable(c, v))
			continue;
		err = load_variant(c, v);
		if (!err)
			break;
		degrade(c, "klock", "variant %s failed to load (%s), trying the next", v->name, strerror(-err));
	}
	if (err)
		goto cleanup;
	c->feat.owner_stacks = c->variant->needs_task_from_pid;
	c->feat.attach_mode = c->variant->needs_tp_btf ? "tp_btf" : "tracepoint";
	err = create_rings(c);
	if (!err)
		err = create_wait_tables(c);
	if (err)
		goto cleanup;
	setup_sched(c);
	*out = c;
	return 0;
cleanup:
	collector__free(c);
	return err;
}

static int attach_prog(struct bpf_program *prog, struct bpf_link **link)
{
	int err;

	*link = bpf_program__attach(prog);
	if (!*link) {
		err = -errno;
		pr_err("attach %s: %s\n", bpf_program__name(prog), strerror(-err));
		return err;
	}
	return 0;
}

/*
 * A sampler's cpu-clock events exist only while it is on: opened and given @prog on every
 * online CPU by sampler_on(), closed by sampler_off(). An on-demand sampler is not left
 * created and disabled: libbpf enables an event when it attaches a program, so the holder
 * sampler created that way sampled at 997 Hz from the start while believed off; and a
 * disabled event with the holder program on it still skewed the spin sampler's share on a
 * 2-CPU guest (TTAS spinners: +0.06 to +0.32 against `perf record -a` in the same runs;
 * with no such event, within ±0.02), by a mechanism not found.
 */
static int sampler_on(struct sampler *sm, int nr_cpus, struct bpf_program *prog, __u32 freq)
{
	int cpu, n = 0;

	if (sm->fds)
		return 0;
	sm->fds = calloc(nr_cpus, sizeof(int));
	sm->links = calloc(nr_cpus, sizeof(*sm->links));
	if (!sm->fds || !sm->links) {
		free(sm->fds);
		free(sm->links);
		sm->fds = NULL;
		sm->links = NULL;
		return -ENOMEM;
	}
	for (cpu = 0; cpu < nr_cpus; cpu++)
		sm->fds[cpu] = -1;
	for (cpu = 0; cpu < nr_cpus; cpu++) {
		sm->fds[cpu] = ls_cpu_clock_open(cpu, freq, false);
		if (sm->fds[cpu] < 0)
			continue;	/* an offline CPU */
		sm->links[cpu] = bpf_program__attach_perf_event(prog, sm->fds[cpu]);
		if (!sm->links[cpu]) {
			close(sm->fds[cpu]);
			sm->fds[cpu] = -1;
			continue;
		}
		n++;
	}
	return n ? 0 : -ENODEV;
}

static bool sampler_attached(const struct sampler *sm, int nr_cpus)
{
	int cpu;

	for (cpu = 0; sm->links && cpu < nr_cpus; cpu++)
		if (sm->links[cpu])
			return true;
	return false;
}

static void sampler_off(struct sampler *sm, int nr_cpus)
{
	int cpu;

	for (cpu = 0; sm->links && cpu < nr_cpus; cpu++)
		bpf_link__destroy(sm->links[cpu]);
	for (cpu = 0; sm->fds && cpu < nr_cpus; cpu++)
		if (sm->fds[cpu] >= 0)
			close(sm->fds[cpu]);
	free(sm->links);
	free(sm->fds);
	sm->links = NULL;
	sm->fds = NULL;
}

static struct bpf_program *sched_prog(const struct collector *c, int i)
{
	struct bpf_program *progs[SCHED_PROGS] = {
		c->sskel->progs.sched_switch, c->sskel->progs.sched_waking, c->sskel->progs.sched_process_exit,
	};

	return progs[i];
}

/* sched_waking is on demand unless waker-min-rate is 0: see waker_on in scheduler.bpf.c. */
static bool waker_always(const struct collector *c)
{
	return !c->opts.waker_min_rate;
}

static void waker_apply(struct collector *c)
{
	bool on = c->feat.ulock && (waker_always(c) || c->waker_wanted || c->precise_pids);
	struct bpf_link **link = &c->slinks[SCHED_WAKING];
	int err;

	if (on == (*link != NULL))
		return;
	if (!on) {
		c->sskel->bss->waker_on = false;
		bpf_link__destroy(*link);
		*link = NULL;
		return;
	}
	if ((err = attach_prog(sched_prog(c, SCHED_WAKING), link))) {
		if (!c->waker_failed)
			pr_warn("sched_waking: cannot attach (%s): futex releasers are not named\n", strerror(-err));
		c->waker_failed = true;
		return;
	}
	c->sskel->bss->waker_on = true;
}

static void attach_sched(struct collector *c)
{
	int i, err;

	if (!c->sskel)
		return;
	for (i = 0; i < SCHED_PROGS; i++) {
		if (i == SCHED_WAKING && !c->feat.ulock)	/* it names futex releasers only */
			continue;
		if ((err = attach_prog(sched_prog(c, i), &c->slinks[i]))) {
			degrade(c, "scheduler", "cannot attach (%s): user-space locks and scheduling are not traced",
				strerror(-err));
			c->feat.ulock = c->feat.sched = false;
			return;
		}
	}
	/* sched_waking was attached to prove it can be; from now on waker_apply() decides */
	if (c->feat.ulock) {
		c->sskel->bss->waker_on = true;
		waker_apply(c);
	}
	/*
	 * The holder sampler is turned on only while holders are noted (the engine decides),
	 * and not tried here: its program once attached to a cpu-clock event, even one removed
	 * at once, left the spin sampler created after it reading TTAS spinners' shares
	 * +0.06..+0.32 above `perf record -a` of the same runs for the daemon's lifetime (not
	 * so when created after the spin sampler: ±0.02). The probe's cpu-clock event says
	 * whether it can be; a failure to turn it on later is logged and retried.
	 */
	c->feat.holder_sampling = c->feat.ulock && c->opts.hold_freq && ls_probe_ok(&c->probes, LS_PROBE_PERF_EVENT);
	if (c->feat.ulock && c->opts.hold_freq && !c->feat.holder_sampling)
		degrade(c, "scheduler", "no cpu-clock perf events: holder stacks are off");
	if (!c->feat.sched)
		return;
	err = ls_probe_ok(&c->probes, LS_PROBE_TASK_ITER) ? attach_prog(c->sskel->progs.dump_tasks, &c->iter_link)
							 : -EOPNOTSUPP;
	if (err) {
		degrade(c, "scheduler", "no task iterator (%s): per-thread switches are off", strerror(-err));
		c->feat.sched = false;
		return;
	}
	if (!c->opts.spin_freq)
		return;
	err = sampler_on(&c->spin, c->nr_cpus, c->sskel->progs.spin_sample, c->opts.spin_freq);
	if (err)
		degrade(c, "scheduler", "no cpu-clock perf events (%s): spin loops are not sampled", strerror(-err));
	c->feat.spin_sampling = !err;
}

int collector__attach(struct collector *c)
{
	int i, err;

	for (i = 0; i < 2; i++)
		if ((err = attach_prog(c->progs[i], &c->links[i])))
			return err;
	attach_sched(c);
	return 0;
}

/* Entries per batch read: one syscall per batch, not two per entry, every second. */
#define THREADS_BATCH 256

/* A thread's spin figures, and whether the task iterator still found it. */
struct spinner {
	struct sched_spin_thread sp;
	bool alive;
};

/* The spin figures of the threads that have some, by tid (spinners is an LRU hash). */
static struct htab *read_spinners(const struct collector *c)
{
	static __u32 keys[THREADS_BATCH];
	static struct sched_spin_thread vals[THREADS_BATCH];
	struct htab *h = htab__new(sizeof(__u32), sizeof(struct spinner), c->opts.sched_threads);
	int fd = bpf_map__fd(c->sskel->maps.spinners), ret;
	__u32 batch, count, i;
	void *in = NULL;

	if (!h)
		return NULL;
	do {
		count = THREADS_BATCH;
		ret = bpf_map_lookup_batch(fd, in, &batch, keys, vals, &count, NULL);
		if (ret && errno != ENOENT)	/* ENOENT: the last batch */
			break;
		for (i = 0; i < count; i++) {
			struct spinner *sp = htab__upsert(h, &keys[i], NULL, NULL);

			if (sp)
				sp->sp = vals[i];
		}
		in = &batch;
	} while (!ret);
	return h;
}

/* One thread from the kernel's counters and the programs' spin figures. */
static void thread_of(const struct sched_task_rec *r, const struct sched_spin_thread *sp, __u64 now,
		      struct sched_thread *st)
{
	__u64 end = r->end_ns ? r->end_ns : now;
	__u64 life = end > r->start_ns ? end - r->start_ns : 0, off;

	memset(st, 0, sizeof(*st));
	st->tgid = r->tgid;
	memcpy(st->comm, r->comm, sizeof(st->comm));
	st->voluntary = r->nvcsw;
	st->involuntary = r->nivcsw;
	st->oncpu_ns = r->sum_exec_ns;
	st->runq_ns = r->run_delay_ns;
	off = r->sum_exec_ns + r->run_delay_ns;
	st->blocked_ns = life > off ? life - off : 0;
	st->events = r->events;
	st->start_ns = r->start_ns;
	if (!sp)
		return;
	st->yields = sp->yields;
	st->yield_spin_ns = sp->yield_spin_ns;
	st->storm_start_ns = sp->storm_start_ns;
	st->storm_yields = sp->storm_yields;
	st->storm_spin_ns = sp->storm_spin_ns;
	st->last_yield_ns = sp->last_yield_ns;
	st->samples = sp->samples;
	st->spin_samples = sp->spin_samples;
	st->poll_samples = sp->poll_samples;
	st->poll_nr = sp->poll_nr;
	st->storm_via = sp->storm_via;
}

/*
 * Threads that exited since the last read: the kernel's counters as they left
 * (sched_process_exit), with their spin figures.
 */
static int exited_tasks(const struct collector *c, struct htab *spinners, __u64 now, collector_thread_fn fn,
			void *ctx)
{
	static __u32 keys[THREADS_BATCH];
	static struct sched_task_rec vals[THREADS_BATCH];
	int fd = bpf_map__fd(c->sskel->maps.exited_tasks), ret, err = 0;
	struct sched_thread st;
	__u32 batch, count, i;
	void *in = NULL;

	do {
		count = THREADS_BATCH;
		ret = bpf_map_lookup_and_delete_batch(fd, in, &batch, keys, vals, &count, NULL);
		if (ret && errno != ENOENT)	/* ENOENT: the last batch */
			return -errno;
		for (i = 0; i < count && !err; i++) {
			struct spinner *sp = htab__find(spinners, &vals[i].tid);

			if (sp)
				sp->alive = true;	/* reported here, with its counters */
			thread_of(&vals[i], sp ? &sp->sp : NULL, now, &st);
			st.flags |= SCHED_THREAD_EXITED | SCHED_THREAD_FINAL;
			err = fn(ctx, vals[i].tid, &st);
		}
		in = &batch;
	} while (!ret && !err);
	return err;
}

/* Threads that yielded or spun and have exited: their spin figures, until the LRU forgets them. */
static int exited_spinners(struct htab *spinners, __u64 now, collector_thread_fn fn, void *ctx)
{
	struct sched_task_rec r = {};
	struct sched_thread st;
	const void *kp;
	size_t iter = 0;
	void *vp;
	int err = 0;

	while (!err && !htab__next(spinners, &iter, &kp, &vp)) {
		const struct spinner *sp = vp;

		if (sp->alive)
			continue;
		r.tid = *(const __u32 *)kp;
		r.tgid = sp->sp.tgid;
		r.start_ns = now;
		memcpy(r.comm, sp->sp.comm, sizeof(r.comm));
		thread_of(&r, &sp->sp, now, &st);
		st.start_ns = 0;
		st.flags |= SCHED_THREAD_EXITED;
		err = fn(ctx, r.tid, &st);
	}
	return err;
}

int collector__sched_threads(const struct collector *c, collector_thread_fn fn, void *ctx)
{
	struct sched_task_rec recs[THREADS_BATCH];
	struct sched_thread st;
	struct timespec ts;
	struct htab *spinners;
	ssize_t n;
	int fd, err = 0, i;
	__u64 now;

	if (!c->feat.sched)
		return -EOPNOTSUPP;
	spinners = read_spinners(c);
	if (!spinners)
		return -ENOMEM;
	/* one pass of the task iterator: every thread's counters as the kernel keeps them */
	fd = bpf_iter_create(bpf_link__fd(c->iter_link));
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);	/* the clock task start_time is on */
	now = ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
	while (!err && (n = read(fd, recs, sizeof(recs))) > 0) {
		for (i = 0; !err && i < n / (ssize_t)sizeof(recs[0]); i++) {
			struct spinner *sp = htab__find(spinners, &recs[i].tid);

			if (sp)
				sp->alive = true;
			thread_of(&recs[i], sp ? &sp->sp : NULL, now, &st);
			err = fn(ctx, recs[i].tid, &st);
		}
	}
	if (n < 0 && !err)
		err = -errno;
	close(fd);
	if (!err)
		err = exited_tasks(c, spinners, now, fn, ctx);
	if (!err)
		err = exited_spinners(spinners, now, fn, ctx);
out:
	htab__free(spinners);
	return err;
}

#define WAITS_BATCH 256
/*
 * How long to wait for programs still on the old table. They run for microseconds; a vCPU
 * the hypervisor descheduled (or emulates: qemu TCG) can hold one for milliseconds.
 */
#define WAITS_WAIT_MAX_NS (100 * 1000 * 1000ULL)

/* Programs using a wait table now, on every CPU, in every component. */
static bool waits_busy(const struct collector *c)
{
	int cpu;

	for (cpu = 0; cpu < c->nr_cpus && cpu < LS_MAX_CPUS; cpu++) {
		if (__atomic_load_n(&c->skel->bss->wait_writers[cpu], __ATOMIC_SEQ_CST) ||
		    (c->sskel && __atomic_load_n(&c->sskel->bss->wait_writers[cpu], __ATOMIC_SEQ_CST)))
			return true;
	}
	return false;
}

/*
 * Moves the programs on to the other table, then waits until none still uses the old one:
 * programs run for microseconds, but one may be preempted (PREEMPT kernels) or its vCPU
 * descheduled; past the bound the drain goes ahead and the race is counted.
 */
static void waits_flip(struct collector *c)
{
	struct timespec t0, t;

	c->epoch++;
	__atomic_store_n(&c->skel->bss->wait_epoch, c->epoch, __ATOMIC_SEQ_CST);
	if (c->sskel)
		__atomic_store_n(&c->sskel->bss->wait_epoch, c->epoch, __ATOMIC_SEQ_CST);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (waits_busy(c)) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * NSEC_PER_SEC + t.tv_nsec - t0.tv_nsec > WAITS_WAIT_MAX_NS) {
			c->drain_races++;
			return;
		}
		sched_yield();
	}
}


/*
 * The CPUs' cache slots of the half programs left: every CPU's copy of each slot that
 * holds an entry of that epoch. The half is read whole; the next epoch of this parity
 * finds its slots stale and takes them over, so nothing needs clearing.
 */
static int drain_caches(struct collector *c, __u32 epoch, collector_wait_fn fn, void *ctx)
{
	int fd = bpf_map__fd(c->skel->maps.wait_cache), err = 0, n = 0, cpu;
	size_t stride = (sizeof(struct ls_wait_cached) + 7) & ~(size_t)7;
	__u32 first = (epoch & (LS_WAIT_TABLES - 1)) * LS_WAIT_CACHE_SLOTS, key, batch, count, i;
	__u32 keys[LS_WAIT_CACHE_SLOTS];
	void *in = NULL;
	char *vals;
	int ret;

	vals = calloc(LS_WAIT_CACHE_SLOTS, stride * c->nr_cpus);
	if (!vals)
		return -ENOMEM;
	/* lookup_batch walks from a key: start just before the half's first slot */
	key = first - 1;
	if (first)
		in = &key;
	do {
		count = LS_WAIT_CACHE_SLOTS;
		ret = bpf_map_lookup_batch(fd, in, &batch, keys, vals, &count, NULL);
		if (ret && errno != ENOENT) {
			err = -errno;
			break;
		}
		for (i = 0; i < count && !err; i++) {
			if (keys[i] < first || keys[i] >= first + LS_WAIT_CACHE_SLOTS)
				continue;
			for (cpu = 0; cpu < c->nr_cpus && !err; cpu++) {
				const struct ls_wait_cached *e = (const void *)(vals + (i * c->nr_cpus + cpu) * stride);

				if (!e->used || e->epoch != epoch)
					continue;
				err = fn(ctx, &e->key, &e->val);
				n++;
			}
		}
		in = &batch;
	} while (!ret && !err && keys[count ? count - 1 : 0] < first + LS_WAIT_CACHE_SLOTS - 1);
	free(vals);
	return err ?: n;
}

int collector__waits_drain(struct collector *c, collector_wait_fn fn, void *ctx)
{
	static struct ls_wait_key keys[WAITS_BATCH];
	static struct ls_wait_val vals[WAITS_BATCH];
	__u32 batch, count, i;
	void *in = NULL;
	int fd, ret, err = 0, n = 0;

	waits_flip(c);
	fd = c->table_fds[(c->epoch - 1) & (LS_WAIT_TABLES - 1)];

	do {
		count = WAITS_BATCH;
		ret = bpf_map_lookup_and_delete_batch(fd, in, &batch, keys, vals, &count, NULL);
		if (ret && errno != ENOENT)	/* ENOENT: the last batch */
			return -errno;
		for (i = 0; i < count && !err; i++, n++)
			err = fn(ctx, &keys[i], &vals[i]);
		in = &batch;
	} while (!ret && !err);
	if (err)
		return err;
	ret = drain_caches(c, c->epoch - 1, fn, ctx);
	return ret < 0 ? ret : n + ret;
}

int collector__sched_peers(const struct collector *c, collector_peer_fn fn, void *ctx)
{
	struct sched_peer_key key, next, *prev = NULL;
	struct sched_peer val;
	int fd, err;

	if (!c->feat.sched)
		return -EOPNOTSUPP;
	/* at most SCHED_DEF_MAX_PEERS, read only on a query: no batch needed */
	fd = bpf_map__fd(c->sskel->maps.peers);
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &val))
			continue;	/* evicted meanwhile */
		if ((err = fn(ctx, &key, &val)))
			return err;
	}
	return 0;
}

void collector__hold_sampling(struct collector *c, bool on)
{
	int err;

	if (!c->feat.holder_sampling || on == !!c->hold.fds)
		return;
	if (!on) {
		sampler_off(&c->hold, c->nr_cpus);
		return;
	}
	err = sampler_on(&c->hold, c->nr_cpus, c->sskel->progs.hold_sample, c->opts.hold_freq);
	if (err) {	/* said once, and tried again at the next tick while holders are noted */
		sampler_off(&c->hold, c->nr_cpus);
		if (!c->hold_failing)
			pr_warn("holder sampler: cannot turn on (%s); retried every second\n", strerror(-err));
	}
	c->hold_failing = err;
}

void collector__name_releasers(struct collector *c, bool on)
{
	if (!c->sskel)
		return;
	c->waker_wanted = on;
	waker_apply(c);
	/* a new second of futex waits for the program to count while it is off */
	c->sskel->bss->waker_blocks = 0;
}

static struct bpf_program *precise_prog(struct collector *c, int i)
{
	struct bpf_program *progs[PRECISE_PROGS] = {
		c->sskel->progs.sched_enter_futex, c->sskel->progs.sched_exit_futex,
		c->sskel->progs.sched_enter_futex_waitv, c->sskel->progs.sched_exit_futex_waitv,
	};

	return progs[i];
}

static void precise_detach(struct collector *c)
{
	int i;

	for (i = 0; i < PRECISE_PROGS; i++) {
		bpf_link__destroy(c->precise_links[i]);
		c->precise_links[i] = NULL;
	}
}

int collector__precise_add(struct collector *c, __u32 pid)
{
	__u8 one = 1;
	int i, err;

	if (!c->feat.precise)
		return -EOPNOTSUPP;
	if (bpf_map_update_elem(bpf_map__fd(c->sskel->maps.precise_tgids), &pid, &one, BPF_NOEXIST))
		return errno == EEXIST ? -EBUSY : -errno;
	if (c->precise_pids++)
		return 0;
	for (i = 0; i < PRECISE_PROGS; i++) {
		if ((err = attach_prog(precise_prog(c, i), &c->precise_links[i]))) {
			precise_detach(c);
			collector__precise_del(c, pid);
			return err;
		}
	}
	/* a scan names every releaser, at any rate */
	waker_apply(c);
	return 0;
}

void collector__precise_del(struct collector *c, __u32 pid)
{
	if (!c->feat.precise ||
	    bpf_map_delete_elem(bpf_map__fd(c->sskel->maps.precise_tgids), &pid))
		return;
	/* with no process left, every syscall leaves the tracing slow path again */
	if (--c->precise_pids == 0) {
		precise_detach(c);
		waker_apply(c);
	}
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

void collector__counters(const struct collector *c, uint64_t out[LS_CNT_MAX])
{
	int fd = bpf_map__fd(c->skel->maps.counters), cpu;
	__u64 *vals = calloc(c->nr_cpus, sizeof(__u64));
	__u32 key;

	memset(out, 0, sizeof(uint64_t) * LS_CNT_MAX);
	if (!vals)
		return;
	for (key = 0; key < LS_CNT_MAX; key++) {
		if (bpf_map_lookup_elem(fd, &key, vals))
			continue;
		for (cpu = 0; cpu < c->nr_cpus; cpu++)
			out[key] += vals[cpu];
	}
	free(vals);
}

static int stack_map_fd(const struct collector *c, enum collector_stack_kind kind)
{
	if (kind == COLL_USTACK)
		return c->sskel ? bpf_map__fd(c->sskel->maps.stacks) : -ENOENT;
	return bpf_map__fd(c->skel->maps.stacks);
}

int collector__stack(const struct collector *c, enum collector_stack_kind kind, int id,
		     uint64_t *ips, int max)
{
	__u64 buf[LS_MAX_STACK_DEPTH] = {};
	int fd = stack_map_fd(c, kind), n;

	if (id < 0 || fd < 0)
		return -ENOENT;
	if (bpf_map_lookup_elem(fd, &id, buf))
		return -errno;
	for (n = 0; n < (int)c->opts.max_stack && n < max && buf[n]; n++)
		ips[n] = buf[n];
	return n;
}

static bool thread_exists(__u32 tid)
{
	char path[32];

	snprintf(path, sizeof(path), "/proc/%u", tid);
	return !access(path, F_OK);
}

/*
 * Deletes the entries of exited threads from the tid-keyed map @fd (of @max entries): all
 * of them, as a churn of short-lived threads leaves thousands per pass.
 */
static int gc_map(int fd, size_t max)
{
	__u32 key, next, *dead = calloc(max, sizeof(*dead));
	size_t n = 0, i;
	int removed = 0;
	void *prev = NULL;

	if (!dead)
		return 0;	/* the next pass tries again */
	/* collect first: deleting while walking with get_next_key restarts the walk */
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (!thread_exists(key) && n < max)
			dead[n++] = key;
	}
	for (i = 0; i < n; i++)
		removed += !bpf_map_delete_elem(fd, &dead[i]);
	free(dead);
	return removed;
}

static int gc(const struct bpf_map *map)
{
	return gc_map(bpf_map__fd(map), bpf_map__max_entries(map));
}

int collector__gc(struct collector *c)
{
	int removed;

	gc(c->skel->maps.owner_stacks);
	removed = gc(c->skel->maps.thread_slots);
	if (c->sskel)
		removed += gc(c->sskel->maps.thread_slots);
	return removed;
}

int collector__stack_free(struct collector *c, enum collector_stack_kind kind, int id)
{
	int fd = stack_map_fd(c, kind);

	if (fd < 0)
		return fd;
	return bpf_map_delete_elem(fd, &id) ? -errno : 0;
}

static void prog_info(const struct bpf_program *prog, const char *source, bool attached,
		      bool on_demand, struct collector_prog *out)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	memset(out, 0, sizeof(*out));
	out->name = bpf_program__name(prog);
	out->source = source;
	out->hook = bpf_program__section_name(prog);
	out->attached = attached;
	out->on_demand = on_demand;
	if (!bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len)) {
		out->run_time_ns = info.run_time_ns;
		out->run_cnt = info.run_cnt;
		out->recursion_misses = info.recursion_misses;
	}
}

int collector__progs(const struct collector *c, struct collector_prog *out, int max)
{
	int i, n = 0;

	for (i = 0; i < 2 && n < max; i++)
		prog_info(c->progs[i], "klock", c->links[i] != NULL, false, &out[n++]);
	for (i = 0; c->sskel && i < SCHED_PROGS && n < max; i++) {
		if (i == SCHED_WAKING && !c->feat.ulock)
			continue;
		prog_info(sched_prog(c, i), "scheduler", c->slinks[i] != NULL,
			  i == SCHED_WAKING && !waker_always(c), &out[n++]);
	}
	/* its cpu-clock events exist only while holders are noted */
	if (c->feat.ulock && n < max)
		prog_info(c->sskel->progs.hold_sample, "scheduler",
			  sampler_attached(&c->hold, c->nr_cpus), true, &out[n++]);
	if (c->feat.sched && n < max)
		prog_info(c->sskel->progs.spin_sample, "scheduler", sampler_attached(&c->spin, c->nr_cpus),
			  false, &out[n++]);
	for (i = 0; c->feat.precise && i < PRECISE_PROGS && n < max; i++)
		prog_info(precise_prog((struct collector *)c, i), "scheduler", c->precise_links[i] != NULL,
			  true, &out[n++]);
	return n;
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

uint64_t collector__drain_races(const struct collector *c)
{
	return c->drain_races;
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
	sampler_off(&c->hold, c->nr_cpus);
	sampler_off(&c->spin, c->nr_cpus);
	for (i = 0; i < SCHED_PROGS; i++)
		bpf_link__destroy(c->slinks[i]);
	bpf_link__destroy(c->iter_link);
	scheduler_bpf__destroy(c->sskel);
	for (i = 0; i < LS_WAIT_TABLES; i++)
		if (c->table_fds[i] > 0)
			close(c->table_fds[i]);
	ring_buffer__free(c->rb);
	for (i = 0; c->ring_fds && i < c->nr_cpus; i++)
		if (c->ring_fds[i] >= 0)
			close(c->ring_fds[i]);
	free(c->ring_fds);
	klock_bpf__destroy(c->skel);
	free(c);
}

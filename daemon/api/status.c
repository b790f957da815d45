// SPDX-License-Identifier: GPL-2.0
/* `lockscope status`: what runs, what it costs, what was lost, and the rates. */
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "analyze/threads.h"
#include "api/engine_int.h"
#include "decode/cgroups.h"
#include "collect/collector.h"
#include "collect/probe.h"
#include "decode/ksyms.h"
#include "decode/records.h"
#include "decode/unwind.h"
#include "decode/usyms.h"
#include "lib/clock.h"
#include "lib/scratch.h"
#include "store/agg.h"
#include "store/stacks.h"

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

static const char *const rate_names[RATE_MAX] = {
	[RATE_KERNEL_WAITS] = "kernel_waits", [RATE_FUTEX_WAITS] = "futex_waits",
	[RATE_HOLDER_SAMPLES] = "holder_samples", [RATE_SPIN_SAMPLES] = "spin_samples",
	[RATE_RECORDS] = "records", [RATE_CPU_NS] = "cpu_ns",
};

cJSON *status_dropped_json(struct engine *e, const uint64_t *base)
{
	struct decoder_stats ds;
	struct collector_prog progs[COLLECTOR_PROG_MAX];
	uint64_t cnt[LS_CNT_MAX], misses = 0;
	cJSON *d = cJSON_CreateObject();
	int i, n;

	collector__counters(e->coll, cnt);
	ds = decoder__stats(e->dec);
	for (i = LS_DROP_FIRST; i < LS_DROP_LAST; i++)
		cJSON_AddNumberToObject(d, ls_counter_name(i), cnt[i] - (base ? base[i] : 0));
	n = collector__progs(e->coll, progs, COLLECTOR_PROG_MAX);
	for (i = 0; i < n; i++)
		misses += progs[i].recursion_misses;
	/* the kernel skips a program that fires while it already runs on that CPU */
	cJSON_AddNumberToObject(d, "prog_recursion", misses);
	cJSON_AddNumberToObject(d, "agg_full", agg__dropped(e->agg));
	cJSON_AddNumberToObject(d, "stack_table_full", stacks__dropped(e->stacks));
	cJSON_AddNumberToObject(d, "stack_read_failed", ds.stack_read_failed);
	cJSON_AddNumberToObject(d, "bad_records", ds.bad_records + e->bad_records);
	cJSON_AddNumberToObject(d, "stale_thread_slots", e->stale_slots);
	/* a wait whose stack dump was lost in a full ring (counted there too) */
	cJSON_AddNumberToObject(d, "stack_dump_missing", ds.dump_missing);
	cJSON_AddNumberToObject(d, "stack_dump_unclaimed", ds.dumps_expired);
	cJSON_AddNumberToObject(d, "stack_dump_table_full", ds.dump_table_full);
	/* a wait table drained while a preempted program still used it: its wait may be lost */
	cJSON_AddNumberToObject(d, "wait_drain_raced", collector__drain_stats(e->coll).raced);
	/* an exited process whose threads aged out of the windows, with no room for its summary */
	cJSON_AddNumberToObject(d, "exited_summary_full", threads__dropped(e->threads));
	cJSON_AddNumberToObject(d, "exited_threads_folded", threads__folded_early(e->threads));
	/* with a push: spin samples of an interval that found its table full */
	cJSON_AddNumberToObject(d, "push_spin_interval_full", e->push_spin_dropped);
	return d;
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
	cJSON_AddNumberToObject(o, "query_scratch_bytes", scratch__bytes(e->scratch));
	cJSON_AddNumberToObject(o, "records", e->records);
	usyms__stats(e->usyms, &us);
	sym = cJSON_AddObjectToObject(o, "user_symbols");
	cJSON_AddNumberToObject(sym, "symbolized", us.symbolized);
	cJSON_AddNumberToObject(sym, "cache_hits", us.cache_hits);
	cJSON_AddNumberToObject(sym, "unresolved", us.unresolved);
	cJSON_AddNumberToObject(sym, "cached", us.cached);
	cJSON_AddBoolToObject(sym, "symbolizer_loaded", us.loaded);
	cJSON_AddNumberToObject(sym, "symbolizer_releases", us.releases);
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
		cJSON_AddNumberToObject(p, "events", decoder__stats(e->dec).kernel_waits);
	else if (strstr(hook, "sched_switch"))
		cJSON_AddNumberToObject(p, "events", threads__host_switches() - e->switches_at_start);
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

/* Whether tracing is paused (`lockscope pause`), and what pauses took so far. */
cJSON *status_pause_json(const struct engine *e, uint64_t now)
{
	cJSON *p = cJSON_CreateObject();

	cJSON_AddBoolToObject(p, "paused", e->pause.since_ns != 0);
	cJSON_AddNumberToObject(p, "pauses", e->pause.count);
	cJSON_AddNumberToObject(p, "paused_ns", e->pause.total_ns + (e->pause.since_ns ? now - e->pause.since_ns : 0));
	cJSON_AddNumberToObject(p, "in_flight_dropped", e->pause.in_flight);
	return p;
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
	cJSON_AddNumberToObject(u, "frame_pointers", us.frame_pointers);
	cJSON_AddNumberToObject(u, "memo_hits", us.memo_hits);
	cJSON_AddNumberToObject(u, "avg_us", us.stacks + us.failed ?
				(double)us.ns / 1000 / (us.stacks + us.failed) : 0);
	return u;
}

/* sched_waking: whether it names wakers now, and its looks past waker-max-rate. */
static cJSON *waker_json(const struct engine *e)
{
	cJSON *w = cJSON_CreateObject();

	cJSON_AddBoolToObject(w, "attached", collector__naming_releasers(e->coll));
	cJSON_AddBoolToObject(w, "part_time", e->waker.part_time);
	cJSON_AddNumberToObject(w, "period_s", e->waker.period);
	cJSON_AddNumberToObject(w, "look_ms", ENGINE_TICK_MS);
	cJSON_AddNumberToObject(w, "min_rate", e->opts.collector.waker_min_rate);
	cJSON_AddNumberToObject(w, "max_rate", e->opts.collector.waker_max_rate);
	return w;
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


/* Where processes were found to run: the v2 mount, what is remembered, what was lost. */
static cJSON *cgroups_json(const struct cgroups *cg)
{
	cJSON *o = cJSON_CreateObject();
	struct cgroups_stats st;

	cgroups__stats(cg, &st);
	if (*cgroups__mount(cg))
		cJSON_AddStringToObject(o, "mount", cgroups__mount(cg));
	else
		cJSON_AddNullToObject(o, "mount");
	cJSON_AddNumberToObject(o, "processes", st.procs);
	cJSON_AddNumberToObject(o, "cgroups", st.cgroups);
	cJSON_AddNumberToObject(o, "unresolved", st.unresolved);
	cJSON_AddNumberToObject(o, "cleared", st.cleared);
	return o;
}

cJSON *engine__status(struct engine *e)
{
	const struct collector_features *f = collector__features(e->coll);
	uint64_t cnt[LS_CNT_MAX], now;
	cJSON *o = engine_response("status"), *ev, *st, *feat, *wins, *agg;
	struct usyms_stats syms;
	int w;

	struct collector_drain_stats drains;
	struct decoder_stats ds;
	/* the waits counted per source are the tables' */
	engine_catch_up(e);
	drains = collector__drain_stats(e->coll);
	ds = decoder__stats(e->dec);
	now = ls_now_ns();
	collector__counters(e->coll, cnt);
	usyms__stats(e->usyms, &syms);
	cJSON_AddStringToObject(o, "version", LS_VERSION);
	cJSON_AddNumberToObject(o, "pid", getpid());
	cJSON_AddNumberToObject(o, "uptime_ns", now - e->start_ns);
	cJSON_AddItemToObject(o, "pause", status_pause_json(e, now));
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
	if (f->switch_clock)
		cJSON_AddStringToObject(feat, "switch_clock", f->switch_clock);
	cJSON_AddItemToObject(o, "probes", ls_probes_json(collector__probes(e->coll)));
	cJSON_AddItemToObject(o, "waker", waker_json(e));
	cJSON_AddItemToObject(o, "degraded", degraded_json(e));
	cJSON_AddItemToObject(o, "self", self_json(e));
	cJSON_AddNumberToObject(o, "switch_cost_ns", threads__switch_cost_ns(e->threads));
	cJSON_AddItemToObject(o, "programs", programs_json(e));
	cJSON_AddBoolToObject(o, "bpf_stats_enabled", bpf_stats_enabled());
	ev = cJSON_AddObjectToObject(o, "events");
	cJSON_AddNumberToObject(ev, "waits", ds.kernel_waits);
	cJSON_AddNumberToObject(ev, "continued", cnt[LS_CNT_CONTINUED]);
	/* mutex waits whose spin called schedule(), found on the CPU they left */
	cJSON_AddNumberToObject(ev, "spin_rescheduled", cnt[LS_CNT_SPIN_RESCHED]);
	/* CPUs whose queued kernel-lock waits a drain counted (the rest, later begins did) */
	cJSON_AddNumberToObject(ev, "queued_at_drain", cnt[LS_CNT_QUEUED_AT_DRAIN]);
	/* drains of the wait tables, and those that found a program still on the old one */
	cJSON_AddNumberToObject(ev, "wait_drains", drains.flips);
	cJSON_AddNumberToObject(ev, "wait_drains_waited", drains.waited);
	/* slots of exited threads the daemon freed for new ones (kernel locks) */
	cJSON_AddNumberToObject(ev, "thread_slots_freed", collector__slots_freed(e->coll));
	cJSON_AddNumberToObject(ev, "thread_entries_swept", collector__entries_swept(e->coll));
	/* threads whose last counters their final switch out left (sched-threads) */
	cJSON_AddNumberToObject(ev, "thread_exits", threads__exits(e->threads));
	cJSON_AddNumberToObject(ev, "nested", cnt[LS_CNT_NESTED]);
	cJSON_AddNumberToObject(ev, "waits_per_s", rate(e, RATE_KERNEL_WAITS));
	cJSON_AddNumberToObject(ev, "ringbuf_wakeups", cnt[LS_CNT_RB_WAKEUPS]);
	cJSON_AddNumberToObject(ev, "futex_waits", ds.futex_waits);
	cJSON_AddNumberToObject(ev, "block_waits", ds.block_waits);
	cJSON_AddNumberToObject(ev, "futex_nonblocking", cnt[LS_CNT_UNONBLOCK]);
	cJSON_AddNumberToObject(ev, "futex_releasers", cnt[LS_CNT_URELEASER]);
	cJSON_AddNumberToObject(ev, "block_wakers", cnt[LS_CNT_BLOCK_WAKERS]);
	/* user waits that ended with sched_waking detached: their waker was not looked for */
	cJSON_AddNumberToObject(ev, "waits_unwatched", ds.unwatched_waits);
	cJSON_AddNumberToObject(ev, "holders_noted", cnt[LS_CNT_HOLDERS]);
	cJSON_AddNumberToObject(ev, "futex_words_read", cnt[LS_CNT_UWORDS]);
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
	/* waits past the CPU's cache, added to the shared table with atomics (waits.bpf.h) */
	cJSON_AddNumberToObject(ev, "shared_table_waits", cnt[LS_CNT_WAIT_SHARED]);
	/* waits whose end sched_switch never showed, timed from the kernel's accounting */
	cJSON_AddNumberToObject(ev, "unseen_switch_ins", cnt[LS_CNT_UNSEEN_SWITCH_IN]);
	st = cJSON_AddObjectToObject(o, "stacks");
	cJSON_AddNumberToObject(st, "stacked", cnt[LS_CNT_STACKED]);
	cJSON_AddNumberToObject(st, "sampled_out", ds.kernel_waits > cnt[LS_CNT_SAMPLED] ?
				ds.kernel_waits - cnt[LS_CNT_SAMPLED] : 0);
	cJSON_AddNumberToObject(st, "share", ds.kernel_waits > cnt[LS_CNT_STACKED] ?
				(double)cnt[LS_CNT_STACKED] / ds.kernel_waits : !!ds.kernel_waits);
	cJSON_AddNumberToObject(st, "owner_stacked", cnt[LS_CNT_OWNER_STACKED]);
	cJSON_AddNumberToObject(st, "owner_on_cpu", cnt[LS_CNT_OWNER_ON_CPU]);
	cJSON_AddNumberToObject(st, "user_stacked", cnt[LS_CNT_USTACKED]);
	cJSON_AddNumberToObject(st, "user_sampled_out", ds.futex_waits > cnt[LS_CNT_USAMPLED] ?
				ds.futex_waits - cnt[LS_CNT_USAMPLED] : 0);
	cJSON_AddNumberToObject(st, "user_unresolved_frames", syms.unresolved);
	cJSON_AddNumberToObject(st, "interned", stacks__count(e->stacks));
	cJSON_AddNumberToObject(st, "kernel_ids_freed", ds.stack_ids_freed);
	cJSON_AddNumberToObject(st, "stack_rate", e->opts.collector.stack_rate);
	cJSON_AddNumberToObject(st, "cpu_stack_rate", e->opts.collector.cpu_stack_rate);
	/* the time budget, and what kernel-lock stacks took of it (sampling.bpf.h) */
	cJSON_AddNumberToObject(st, "stack_budget_us", e->opts.collector.stack_budget_us);
	cJSON_AddNumberToObject(st, "stack_ns", cnt[LS_CNT_STACK_NS]);
	cJSON_AddItemToObject(o, "unwind", unwind_json(e, cnt));
	cJSON_AddItemToObject(o, "dropped", status_dropped_json(e, NULL));
	wins = cJSON_AddArrayToObject(o, "windows");
	for (w = 0; w < LS_WIN_MAX; w++)
		cJSON_AddItemToArray(wins, engine_window_json(ls_window_name(w), agg__window_start(e->agg, w), now));
	agg = cJSON_AddObjectToObject(o, "aggregator");
	cJSON_AddNumberToObject(agg, "keys", agg__keys(e->agg));
	cJSON_AddNumberToObject(agg, "folded_keys", agg__folded(e->agg));
	cJSON_AddNumberToObject(agg, "view_cache_bytes", agg__view_cache_bytes(e->agg));
	cJSON_AddNumberToObject(agg, "mem_bytes", agg__mem_bytes(e->agg) + stacks__mem_bytes(e->stacks) +
				usyms__mem_bytes(e->usyms) + (e->push_agg ? agg__mem_bytes(e->push_agg) : 0));
	cJSON_AddNumberToObject(o, "rings", collector__nr_rings(e->coll));
	cJSON_AddItemToObject(o, "cgroups", cgroups_json(e->cgroups));
	if (e->config)
		cJSON_AddItemToObject(o, "config", cJSON_Duplicate(e->config, true));
	if (e->status_extra)
		e->status_extra(e->status_extra_ctx, o);
	return o;
}

void status_sample_rate(struct engine *e, uint64_t now, const uint64_t *cnt)
{
	uint64_t *v = e->rate_v[e->rate_head];

	v[RATE_KERNEL_WAITS] = decoder__stats(e->dec).kernel_waits;
	v[RATE_FUTEX_WAITS] = decoder__stats(e->dec).futex_waits;
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

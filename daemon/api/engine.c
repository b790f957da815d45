// SPDX-License-Identifier: GPL-2.0
/*
 * The engine: the stages wired into one pipeline (collect -> decode -> store, queried by
 * analyze), ticked by the caller's loop, and the requests dispatched to their handlers.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <unistd.h>
#include "analyze/spin.h"
#include "analyze/threads.h"
#include "api/engine_int.h"
#include "api/prom.h"
#include "collect/collector.h"
#include "decode/dumps.h"
#include "decode/ksyms.h"
#include "decode/records.h"
#include "decode/unwind.h"
#include "decode/cgroups.h"
#include "decode/pods.h"
#include "decode/usyms.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/scratch.h"
#include "store/agg.h"
#include "store/stacks.h"
#include "klock.h"
#include "scheduler.h"
#include "ustack.h"

/* how often open waits of exited threads and idle kernel stacks are swept from BPF maps */
#define GC_INTERVAL_NS (10 * NSEC_PER_SEC)
/* Holder sampling stays on this long after the last holder was noted. */
#define HOLD_QUIET_NS (5 * NSEC_PER_SEC)
/* sched_waking stays attached this long after futex waits fell below waker-min-rate */
#define WAKER_QUIET_NS (10 * NSEC_PER_SEC)
/*
 * Past waker-max-rate, sched_waking is attached for a look of WAKER_LOOK_NS (an engine tick)
 * every period_s seconds: the fewest that keep the waits it names to about that rate (a
 * look names the rate x 0.2 s of them), and at most this many, so that a 10 s window always
 * holds a look.
 */
#define WAKER_LOOK_NS ((uint64_t)ENGINE_TICK_MS * NSEC_PER_MSEC)
#define WAKER_MAX_PERIOD 10
/* processes whose mappings are kept for symbolization */
#define USYMS_MAX_PROCS 4096
/* processes whose cgroup is remembered (a few MB at most), and distinct cgroups */
#define CGROUPS_MAX_PROCS 65536
#define CGROUPS_MAX_CGROUPS 16384
/* libdwfl sessions kept: one per process whose stacks are being unwound */
#define UNWIND_MAX_PROCS 64
/* unwound dumps waiting for their record: seconds of dumps at the highest rates */
#define DUMPS_MAX (128 * 1024)

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
	o->collector.cpu_stack_rate = LS_DEF_CPU_STACK_RATE;
	o->collector.stack_budget_us = LS_DEF_STACK_BUDGET_US;
	o->collector.user_locks = 1;
	/*
	 * Off until it fits the always-on budget: a wait opened and closed at every sleep in
	 * any syscall, with the waker in looks, costs a pipe ping-pong -7.4 % against -3.5 %
	 * with futex waits alone, stress-ng --switch -7.2 % against -4.9 % (docs/performance.md)
	 */
	o->collector.block_waits = 0;
	o->collector.uthreads = ULOCK_DEF_MAX_THREADS;
	o->collector.ustack_entries = ULOCK_DEF_STACK_ENTRIES;
	o->collector.max_holders = ULOCK_DEF_MAX_HOLDERS;
	o->collector.hold_freq = ULOCK_DEF_HOLD_FREQ;
	o->collector.waker_min_rate = ULOCK_DEF_WAKER_MIN_RATE;
	o->collector.waker_max_rate = ULOCK_DEF_WAKER_MAX_RATE;
	o->collector.ustack_bytes = LS_USTACK_DEF_BYTES;
	o->collector.udump_rate = LS_USTACK_DEF_RATE;
	o->collector.sched_threads = SCHED_DEF_MAX_THREADS;
	o->collector.spin_freq = SCHED_DEF_SPIN_FREQ;
	o->collector.spin_stack_bytes = SCHED_DEF_STACK_BYTES;
	o->collector.spin_dump_rate = SCHED_DEF_SPIN_DUMP_RATE;
	o->max_keys = 200000;
	o->metrics_max_series = LS_DEF_METRICS_MAX_SERIES;
	o->max_stacks = 100000;
	o->windows = true;
	o->spin = (struct spin_thresholds){
		.yield_min = SPIN_DEF_YIELD_MIN, .yield_min_rate = SPIN_DEF_YIELD_MIN_RATE,
		.pause_min_samples = SPIN_DEF_PAUSE_MIN_SAMPLES, .pause_min_share_pct = SPIN_DEF_PAUSE_MIN_SHARE_PCT,
		.burst_min_events = SPIN_DEF_BURST_MIN_EVENTS, .burst_factor = SPIN_DEF_BURST_FACTOR,
	};
	diag_thresholds__init(&o->diag);
	snprintf(o->debuginfod_cache, sizeof(o->debuginfod_cache), "%s", LS_DEF_DEBUGINFOD_CACHE);
	o->cache_idle_s = LS_DEF_CACHE_IDLE_S;
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

/* What the decoder makes of the kernel side: waits go to the store and the scans... */
static void add_event(void *ctx, const struct agg_event *ev)
{
	struct engine *e = ctx;
	struct scan *s;

	cgroups__see(e->cgroups, ev->key.pid, ev->cgroup_id);
	if (e->agg)
		agg__add(e->agg, ev);
	if (e->push_agg)
		agg__add(e->push_agg, ev);
	for (s = e->scans; s; s = s->next)
		if (scan_takes(s, ev))
			agg__add(s->agg, ev);
}

/* ...spin and scheduling records to the spin and thread views... */
static void yield_site(void *ctx, const struct sched_yield_rec *r, uint32_t stack)
{
	struct engine *e = ctx;

	cgroups__see(e->cgroups, r->pid, 0);
	spin__yield_site(e->spin, r, stack);
}

static void spin_sample(void *ctx, const struct sched_spin_rec *r, uint32_t stack)
{
	struct engine *e = ctx;

	cgroups__see(e->cgroups, r->pid, 0);
	spin__sample(e->spin, r, stack);
}

static void resume(void *ctx, const struct sched_resume_rec *r, uint32_t stack)
{
	struct engine *e = ctx;
	uint64_t base_events, base_ns;

	threads__baseline(e->threads, r->tid, r->resume_ns - r->stop_ns, r->stop_events, &base_events, &base_ns);
	spin__resume(e->spin, r, stack, base_events, base_ns);
}

/* Seconds between two looks for waits at @per_s past @max_per_s (see WAKER_LOOK_NS). */
static uint32_t waker_period(double per_s, uint32_t max_per_s)
{
	double p = ceil(per_s * WAKER_LOOK_NS / NSEC_PER_SEC / max_per_s);

	return p < 1 ? 1 : p > WAKER_MAX_PERIOD ? WAKER_MAX_PERIOD : (uint32_t)p;
}

/* Whether user waits at @per_s a second are past waker-max-rate (0: no limit). */
static bool waker_storm(const struct engine *e, double per_s)
{
	return e->opts.collector.waker_max_rate && per_s > e->opts.collector.waker_max_rate;
}

/* sched_waking on for a look, from @now (engine__tick() ends it). */
static void waker_look(struct engine *e, uint64_t now)
{
	e->waker.off = 0;
	e->waker.look_end_ns = now + WAKER_LOOK_NS;
	collector__name_releasers(e->coll, true);
}

/*
 * ...and a request for sched_waking is granted at once: full time, or a look when the
 * waits that made it came past waker-max-rate (the last @waits of them in @span_ns; 0: no
 * rate, full time until the next second says). While a part-time duty runs, the requests
 * (one a second: the waits did not stop) are its to answer.
 */
static void waker_wanted(void *ctx, uint32_t waits, uint64_t span_ns)
{
	struct engine *e = ctx;
	uint64_t now = ls_now_ns();
	double per_s;

	e->releasers.busy_ns = now;
	if (e->waker.part_time)
		return;
	per_s = !waits ? 0 : span_ns ? (double)waits * NSEC_PER_SEC / span_ns : INFINITY;
	if (!waker_storm(e, per_s)) {
		collector__name_releasers(e->coll, true);
		return;
	}
	e->waker.part_time = true;
	e->waker.period = waker_period(per_s, e->opts.collector.waker_max_rate);
	waker_look(e, now);
}

/* The fuzzers' seeds see every record and entry before it is decoded. */
static int on_record(void *ctx, void *data, size_t size)
{
	struct engine *e = ctx;

	if (e->opts.tap)
		e->opts.tap(e->opts.tap_ctx, ENGINE_IN_RECORD, data, size);
	return decoder__record(e->dec, data, size);
}

static int on_wait_entry(void *ctx, const struct ls_wait_key *k, const struct ls_wait_val *v)
{
	struct engine *e = ctx;

	if (e->opts.tap) {
		char entry[sizeof(*k) + sizeof(*v)];

		memcpy(entry, k, sizeof(*k));
		memcpy(entry + sizeof(*k), v, sizeof(*v));
		e->opts.tap(e->opts.tap_ctx, ENGINE_IN_WAIT, entry, sizeof(entry));
	}
	return decoder__wait_entry(e->dec, k, v);
}

static int read_sched_threads(void *c, sched_thread_fn fn, void *ctx)
{
	return collector__sched_threads(c, fn, ctx);
}

static int read_sched_peers(const void *c, sched_peer_fn fn, void *ctx)
{
	return collector__sched_peers(c, fn, ctx);
}

/* What the thread and spin views read of the collector, once it has attached. */
static struct sched_source sched_source(struct collector *c)
{
	const struct collector_features *f = collector__features(c);

	return (struct sched_source){ .sched = f->sched, .spin_sampling = f->spin_sampling,
				      .precise = f->precise, .ulock = f->ulock,
				      .threads = read_sched_threads, .peers = read_sched_peers, .src = c };
}

int engine__new(const struct engine_opts *opts, engine_reply_fn reply, void *reply_ctx,
		struct engine **out)
{
	struct agg_opts ao = { .windows = opts->windows, .max_keys = opts->max_keys,
			       .view_cache_idle_ns = opts->cache_idle_s * NSEC_PER_SEC };
	struct collector_opts co = opts->collector;
	struct engine *e = calloc(1, sizeof(*e));
	struct rlimit nofile;
	int err;

	if (!e)
		return -ENOMEM;
	e->epfd = -1;
	e->waker.period = 1;
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
	e->scratch = scratch__new(opts->cache_idle_s * NSEC_PER_SEC);
	if (opts->push) {
		e->push_agg = agg__new(&(struct agg_opts){ .max_keys = opts->max_keys, .start_ns = e->start_ns });
		e->push_start_unix_ns = ls_clock_ns(CLOCK_REALTIME);
	}
	if (!e->stacks || !e->agg || !e->scratch || (opts->push && !e->push_agg)) {
		err = -ENOMEM;
		goto cleanup;
	}
	err = usyms__new(&(struct usyms_opts){ .max_procs = USYMS_MAX_PROCS,
					       .debuginfod_dir = opts->debuginfod_cache,
					       .idle_ns = opts->cache_idle_s * NSEC_PER_SEC }, &e->usyms);
	if (err)
		goto cleanup;
	err = prom_series__new(opts->metrics_max_series, &e->prom_series);
	if (err)
		goto cleanup;
	err = cgroups__new(&(struct cgroups_opts){ .max_procs = CGROUPS_MAX_PROCS,
						   .max_cgroups = CGROUPS_MAX_CGROUPS }, &e->cgroups);
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
	if (!err && opts->push)
		err = spin__keep_intervals(e->spin);
	if (err)
		goto cleanup;
	/* before anything is attached: the host's switch cost, not the traced one */
	if (opts->collector.sched_threads &&
	    (err = threads__measure_switch_cost(e->threads)))
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
	err = decoder__new(&(struct decoder_opts){
				   .coll = e->coll, .stacks = e->stacks, .usyms = e->usyms, .ksyms = e->ksyms,
				   .unwind = e->unwind, .dumps = e->dumps, .max_stack = opts->collector.max_stack,
				   .kstack_entries = opts->collector.stack_entries,
				   .ustack_entries = opts->collector.ustack_entries,
				   .sink = { .event = add_event, .yield_site = yield_site, .spin_sample = spin_sample,
					     .resume = resume, .waker_wanted = waker_wanted, .ctx = e } },
			   &e->dec);
	if (err)
		goto cleanup;
	if (opts->precise_pid && (err = collector__precise_add(e->coll, opts->precise_pid))) {
		pr_err("precise mode for pid %u: %s\n", opts->precise_pid, strerror(-err));
		goto cleanup;
	}
	collector__start(e->coll);
	e->sched = sched_source(e->coll);
	e->switches_at_start = threads__host_switches();
	/* the first snapshot: rates are available from the first request on */
	threads__tick(e->threads, &e->sched, ls_now_ns());
	*out = e;
	return 0;
cleanup:
	engine__free(e);
	return err;
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
	decoder__free(e->dec);
	unwind__free(e->unwind);
	dumps__free(e->dumps);
	threads__free(e->threads);
	spin__free(e->spin);
	agg__free(e->agg);
	agg__free(e->push_agg);
	stacks__free(e->stacks);
	ksyms__free(e->ksyms);
	usyms__free(e->usyms);
	scratch__free(e->scratch);
	cgroups__free(e->cgroups);
	prom_series__free(e->prom_series);
	free(e);
}

int engine__epoll_fd(const struct engine *e)
{
	return e->epfd;
}

int engine__consume(struct engine *e)
{
	bool exited = e->scans && scans_exited(e);
	int n, total = 0, round;

	/* a second drain settles records parked in the first, so callers see every wait */
	for (round = 0; round < 2; round++) {
		decoder__pass_begin(e->dec);
		n = collector__consume(e->coll);
		if (n < 0)
			return n;
		total += n;
		e->records += n;
		if (!decoder__pass_end(e->dec))
			break;
	}
	if (exited)
		scans_finish(e, ls_now_ns());
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
		decoder__pass_begin(e->dec);
		on_record(e, copy, size);
		decoder__pass_end(e->dec);
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

cJSON *engine_response(const char *cmd)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "schema_version", LS_SCHEMA_VERSION);
	cJSON_AddStringToObject(o, "cmd", cmd);
	return o;
}

cJSON *engine_window_json(const char *name, uint64_t start, uint64_t end)
{
	cJSON *w = cJSON_CreateObject();

	cJSON_AddStringToObject(w, "name", name);
	cJSON_AddNumberToObject(w, "start_ns", start);
	cJSON_AddNumberToObject(w, "end_ns", end);
	return w;
}

/* An answer covers every wait up to now: the rings' records and the tables' entries. */
void engine_catch_up(struct engine *e)
{
	engine__consume(e);
	engine_drain_waits(e);
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

/*
 * Raw kernel addresses go to clients with CAP_SYSLOG (kptr_restrict=1's rule), to every
 * client when expose-kernel-addresses is set, and in-process (no @peer) to the user who
 * loaded the programs.
 */
bool engine_kernel_addrs_allowed(const struct engine *e, const struct ls_peer *peer)
{
	return !peer || peer->cap_syslog || e->opts.expose_kernel_addrs;
}

void engine_query_init(const struct engine *e, struct query *q)
{
	query__init(q);
	q->cgroups = e->cgroups;
}

struct query_ctx engine_query_ctx(const struct engine *e, bool kernel_addrs)
{
	return (struct query_ctx){ .stacks = e->stacks, .ksyms = e->ksyms, .usyms = e->usyms,
				   .cgroups = e->cgroups, .hide_kernel_addrs = !kernel_addrs, .scratch = e->scratch };
}

void engine__set_status_extra(struct engine *e, engine_status_fn fn, void *ctx)
{
	e->status_extra = fn;
	e->status_extra_ctx = ctx;
}

char *engine__metrics(struct engine *e, size_t *len)
{
	struct export_buf buf = {};
	struct query q;

	engine_query_init(e, &q);
	/*
	 * Every lock type, condition variables too (the type label tells them apart); not the
	 * other blocking syscalls: every event loop's epoll_wait would take the series the
	 * limit admits (by wait time) from the locks.
	 */
	q.type_mask = query__lock_types();
	engine_catch_up(e);
	if (report_prometheus_text(e, e->agg, &q, true, &buf)) {
		free(buf.data);
		return NULL;
	}
	*len = buf.len;
	return buf.data;
}

/*
 * `pause`: every event program off its hook, the windows and maps kept, until `resume`
 * (perf's --control disable/enable): to see what tracing costs a service, or to measure it
 * (bench/run.py's interleaved runs). It stops what every client sees, so only the
 * daemon's own user asks for it; and not under a scan, whose figures it would cut.
 */
static cJSON *engine_pause(struct engine *e, const struct ls_peer *peer, bool pause)
{
	const char *cmd = pause ? "pause" : "resume";
	uint64_t now = ls_now_ns();
	cJSON *o;
	int ret;

	if (peer && peer->uid != 0 && peer->uid != geteuid())
		return engine__error("%s: only root (lockscoped's user) may %s tracing; run it with sudo", cmd, cmd);
	if (pause && e->scans)
		return engine__error("pause: a scan of pid %u is running; pause when it is over", e->scans->pid);
	if (pause && !e->pause.since_ns) {
		if ((ret = collector__pause(e->coll)))
			return engine__error("pause: %s", strerror(-ret));
		/* what the programs wrote up to now goes into the windows now */
		engine_catch_up(e);
		e->pause.since_ns = now;
		e->pause.count++;
		pr_info("tracing paused by pid %d\n", peer ? (int)peer->pid : (int)getpid());
	} else if (!pause && e->pause.since_ns) {
		if ((ret = collector__resume(e->coll)) < 0)
			return engine__error("resume: a program cannot attach again (%s); tracing stays paused: "
					     "see lockscoped's log, then resume again", strerror(-ret));
		e->pause.in_flight += ret;
		e->pause.total_ns += now - e->pause.since_ns;
		e->pause.since_ns = 0;
		pr_info("tracing resumed by pid %d\n", peer ? (int)peer->pid : (int)getpid());
	}
	o = engine_response(cmd);
	cJSON_AddItemToObject(o, "pause", status_pause_json(e, now));
	return o;
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
		return engine__status(e);
	if (!strcmp(cmd->valuestring, "threads"))
		return report_threads(e, req);
	if (!strcmp(cmd->valuestring, "spin"))
		return report_spin(e, peer, req);
	if (!strcmp(cmd->valuestring, "pause") || !strcmp(cmd->valuestring, "resume"))
		return engine_pause(e, peer, !strcmp(cmd->valuestring, "pause"));
	engine_query_init(e, &q);
	if (strcmp(cmd->valuestring, "top") && strcmp(cmd->valuestring, "scan") && strcmp(cmd->valuestring, "waits") &&
	    strcmp(cmd->valuestring, "report") && strcmp(cmd->valuestring, "export"))
		return engine__error("unknown cmd '%s' (one of: " ENGINE_CMDS ")", cmd->valuestring);
	/* waits: every user wait, each row with its class, unless the request names types */
	if (!strcmp(cmd->valuestring, "waits")) {
		q.kind = LS_KIND_USER_ONLY;
		q.type_mask = query__user_wait_types();
	}
	if (query__from_json(req, &q, err, sizeof(err)) ||
	    report_parse_export_req(req, !strcmp(cmd->valuestring, "export"), &x, err, sizeof(err)))
		return engine__error("%s", err);
	if (x.wanted && strcmp(cmd->valuestring, "export") && strcmp(cmd->valuestring, "scan"))
		return engine__error("'format' applies to export and scan; %s has its own output", cmd->valuestring);
	if (!strcmp(cmd->valuestring, "scan"))
		return scan_start(e, client, peer, req, &q, &x);
	engine_catch_up(e);
	if (!strcmp(cmd->valuestring, "report") || !strcmp(cmd->valuestring, "export"))
		return report_export_response(e, cmd->valuestring, e->agg, &q, &x, ls_now_ns(), NULL,
				       engine_kernel_addrs_allowed(e, peer));
	return report_rows_response(e, cmd->valuestring, e->agg, &q, ls_now_ns(), NULL,
				    engine_kernel_addrs_allowed(e, peer));
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

/*
 * Once a second, sched_waking for the next one: off when user waits are not @wanted
 * (waker-min-rate), full time at waker-max-rate or less, else a look every period_s
 * seconds. @per_s < 0: not known yet (the first second), the state a request set holds.
 */
static void waker_second(struct engine *e, bool wanted, double per_s, uint64_t now)
{
	struct waker_duty *d = &e->waker;
	bool storm = per_s < 0 ? d->part_time : waker_storm(e, per_s);

	if (!wanted || !storm) {
		*d = (struct waker_duty){ .period = 1 };
		collector__name_releasers(e->coll, wanted);
		return;
	}
	d->part_time = true;
	if (per_s >= 0)
		d->period = waker_period(per_s, e->opts.collector.waker_max_rate);
	if (++d->off >= d->period && !d->look_end_ns)
		waker_look(e, now);
	else	/* a look under way stays on (and the off count starts again) */
		collector__name_releasers(e->coll, d->look_end_ns);
}

/* A look at the wakers ends. */
static void waker_tick(struct engine *e, uint64_t now)
{
	if (!e->waker.look_end_ns || now < e->waker.look_end_ns)
		return;
	e->waker.look_end_ns = 0;
	collector__name_releasers(e->coll, false);	/* part-time still: waker_second() clears it */
}

/* Brings the aggregator up to date with the wait tables: every wait ended by now is in it. */
void engine_drain_waits(struct engine *e)
{
	int n = collector__waits_drain(e->coll, on_wait_entry, e);

	if (n < 0)
		pr_warn("wait table: cannot drain: %s\n", strerror(-n));
}

/* Once a second: one read of the counters feeds the rate and the on-demand hooks. */
static void per_second(struct engine *e, uint64_t now)
{
	uint64_t cnt[LS_CNT_MAX], elapsed = now - e->last_rate_ns, waits, n;
	bool first = !e->last_rate_ns, wanted;
	struct decoder_stats ds;

	if (elapsed < NSEC_PER_SEC)
		return;
	collector__counters(e->coll, cnt);
	status_sample_rate(e, now, cnt);
	/* holder samples while contended user locks have holders to sample */
	collector__hold_sampling(e->coll, on_demand_tick(&e->holders, cnt[LS_CNT_HOLDERS], 0, now, elapsed,
							 HOLD_QUIET_NS));
	threads__tick(e->threads, &e->sched, now);
	engine__consume(e);	/* see engine__tick() */
	cgroups__tick(e->cgroups);
	engine_drain_waits(e);
	/*
	 * releasers named while futex (and other blocking) waits come fast (the BPF side asks
	 * at once when they start)
	 */
	ds = decoder__stats(e->dec);
	waits = ds.futex_waits + ds.block_waits;
	n = waits - e->releasers.last;
	wanted = on_demand_tick(&e->releasers, waits, e->opts.collector.waker_min_rate, now, elapsed,
				WAKER_QUIET_NS);
	/* and past waker-max-rate, part-time (the first tick's span is the host's uptime) */
	waker_second(e, wanted, first ? -1 : (double)n * NSEC_PER_SEC / elapsed, now);
}

void engine__set_pods(struct engine *e, struct pods *pods)
{
	cgroups__set_pods(e->cgroups, pods);
}

int engine__parse_pods(const char *json, size_t len, struct pods **out, size_t *count, size_t *skipped,
		       char *err, size_t err_len)
{
	int ret = pods__parse(json, len, out, skipped, err, err_len);

	*count = ret ? 0 : pods__count(*out);
	return ret;
}

void engine__free_pods(struct pods *pods)
{
	pods__free(pods);
}

bool engine__pods_wanted(struct engine *e)
{
	return cgroups__pods_wanted(e->cgroups);
}

void engine__tick(struct engine *e)
{
	uint64_t now;

	engine__consume(e);
	now = ls_now_ns();
	decoder__tick(e->dec, now);
	usyms__poll(e->usyms);
	scratch__idle(e->scratch, now);
	agg__rotate(e->agg, now);
	waker_tick(e, now);
	per_second(e, now);
	if (now - e->last_gc_ns >= GC_INTERVAL_NS) {
		/*
		 * The rings are drained between the long steps, not only once a tick: the
		 * threads' read and the wait tables' drain take 10-20 ms after a churn of
		 * 10 000 threads on the 2-CPU guest (this sweep 4-12 ms, 28-79 when it asked
		 * procfs per thread), and the sum of them without a drain is what a ring of
		 * dumps at their highest rate must hold (CI lost 23 records once so, with every
		 * count still exact).
		 */
		engine__consume(e);
		e->stale_slots += collector__gc(e->coll);
		decoder__gc(e->dec, now);
		e->last_gc_ns = now;
	}
	scans_finish(e, now);
}

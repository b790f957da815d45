// SPDX-License-Identifier: GPL-2.0
/* The answers made of the store: top's rows, threads, spin, the report and the exports. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "analyze/diagnose.h"
#include "analyze/spin.h"
#include "analyze/threads.h"
#include "api/engine_int.h"
#include "api/prom.h"
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/procfs.h"
#include "store/agg.h"

cJSON *report_rows_response(struct engine *e, const char *cmd, struct agg *agg, const struct query *q,
			    uint64_t now, const uint64_t *counters0, bool kernel_addrs)
{
	struct query_ctx qc = engine_query_ctx(e, kernel_addrs);
	uint64_t start;
	struct agg_view *t = agg__view(agg, q->window, &start);
	cJSON *o, *rows;

	if (!t)
		return engine__error("out of memory building the window");
	rows = query__rows(t, q, &qc);
	agg_view__free(t);
	if (!rows)
		return engine__error("out of memory building rows");
	o = engine_response(cmd);
	cJSON_AddItemToObject(o, "window", engine_window_json(ls_window_name(q->window), start, now));
	cJSON_AddStringToObject(o, "group", query__group_name(q->group));
	cJSON_AddItemToObject(o, "rows", rows);
	cJSON_AddItemToObject(o, "dropped", status_dropped_json(e, counters0));
	return o;
}

/*
 * The cgroup of each item of @arr with a "pid" (threads, findings) that has none yet: a
 * thread that never waited is looked up now.
 */
static void add_cgroups(struct engine *e, const struct query_ctx *qc, const cJSON *arr)
{
	cJSON *it;

	cJSON_ArrayForEach(it, arr) {
		const cJSON *pid = cJSON_GetObjectItemCaseSensitive(it, "pid");

		if (!cJSON_IsNumber(pid) || pid->valuedouble < 1 || cJSON_HasObjectItem(it, "cgroup"))
			continue;
		cgroups__see(e->cgroups, pid->valuedouble, 0);
		query__add_cgroup(it, qc, pid->valuedouble, NULL);
	}
}

static int see_cgroup(void *ctx, uint32_t tid, const struct sched_thread *st, uint64_t exited_ns)
{
	(void)tid, (void)exited_ns;
	cgroups__see(ctx, st->tgid, 0);
	return 0;
}

/* `lockscope threads`: per-thread switches and times, like pidstat -w with the cost added. */
cJSON *report_threads(struct engine *e, const cJSON *req)
{
	struct query_ctx qc = engine_query_ctx(e, false);
	enum ls_window w = THREADS_LIVE;
	uint64_t pid = 0, limit = 0, now;
	char cgroup[LS_CGROUP_PATH_MAX] = "";
	struct proc_filter f = { .cgroup = cgroup, .cgroups = qc.cgroups };
	enum cgroup_by by = CGROUP_BY_MAX;
	const char *why = NULL;
	bool measure = false;
	char err[256];
	cJSON *o;
	int ret;

	if (query__uint_field(req, "pid", INT32_MAX, &pid, err, sizeof(err)) ||
	    query__uint_field(req, "limit", 1000000, &limit, err, sizeof(err)) ||
	    query__bool_field(req, "measure", &measure, err, sizeof(err)) ||
	    query__cgroup_field(req, cgroup, sizeof(cgroup), err, sizeof(err)) ||
	    query__by_field(req, &by, err, sizeof(err)) ||
	    query__window_field(req, &w, err, sizeof(err)))
		return engine__error("%s", err);
	f.pid = pid;
	/* on demand, with tracing on: what a switch costs now, tracer included */
	if (measure && (ret = threads__measure_switch_cost(e->threads)))
		return engine__error("cannot measure the switch cost: %s", strerror(-ret));
	o = engine_response("threads");
	now = ls_now_ns();
	threads__refresh(e->threads, &e->sched, now);	/* up to now, not the last tick */
	if (w != THREADS_LIVE)
		cJSON_AddItemToObject(o, "window", engine_window_json(ls_window_name(w), threads__window_start(e->threads, w, now),
							       now));
	/* -G and --by look every thread's process up, not only those that waited on a lock */
	if ((cgroup[0] || by < CGROUP_BY_MAX) && threads__each(e->threads, w, now, see_cgroup, e->cgroups)) {
		cJSON_Delete(o);
		return engine__error("out of memory");
	}
	if (threads__json(e->threads, &e->sched, &f, by, limit, w, now, o, &why)) {
		cJSON_Delete(o);
		return engine__error("%s", why);
	}
	add_cgroups(e, &qc, cJSON_GetObjectItemCaseSensitive(o, "rows"));
	return o;
}

/* `lockscope spin`: yield storms, spin loops, bursts after stops and preempted holders. */
cJSON *report_spin(struct engine *e, const struct ls_peer *peer, const cJSON *req)
{
	struct query_ctx qc = engine_query_ctx(e, engine_kernel_addrs_allowed(e, peer));
	uint64_t pid = 0, max_stack = LS_QUERY_DEF_MAX_STACK, now, start;
	enum ls_window w = LS_WIN_ALL;	/* since the daemon started, exited threads included */
	char cgroup[LS_CGROUP_PATH_MAX] = "";
	struct proc_filter f = { .cgroup = cgroup, .cgroups = qc.cgroups };
	const char *why = NULL;
	struct agg_view *t;
	char err[256];
	cJSON *o;
	int ret;

	if (query__uint_field(req, "pid", INT32_MAX, &pid, err, sizeof(err)) ||
	    query__uint_field(req, "max_stack", LS_MAX_STACK_DEPTH, &max_stack, err, sizeof(err)) ||
	    query__cgroup_field(req, cgroup, sizeof(cgroup), err, sizeof(err)) ||
	    query__window_field(req, &w, err, sizeof(err)))
		return engine__error("%s", err);
	f.pid = pid;
	engine_catch_up(e);
	now = ls_now_ns();
	threads__refresh(e->threads, &e->sched, now);
	/* the threads' figures and the holder preemptions, both inside the window */
	t = agg__view(e->agg, w, &start);
	if (!t)
		return engine__error("out of memory building the window");
	o = engine_response("spin");
	cJSON_AddItemToObject(o, "window", engine_window_json(ls_window_name(w), start, now));
	ret = spin__json(e->spin, &e->sched, e->threads, w, t, (double)(now - start) / NSEC_PER_SEC, &qc, &e->opts.spin,
			 &f, max_stack, o, &why);
	agg_view__free(t);
	if (ret) {
		cJSON_Delete(o);
		return engine__error("%s", why);
	}
	add_cgroups(e, &qc, cJSON_GetObjectItemCaseSensitive(o, "findings"));
	return o;
}

/* ---- report and exports ---- */

/* What the report shows of each part: the top rows, frames per stack, threads. */
#define REPORT_ROWS		20
#define REPORT_MAX_STACK	16
#define REPORT_THREADS		20
#define REPORT_FUTEX_CALLERS	50

int report_parse_export_req(const cJSON *req, bool need_format, struct export_req *x, char *err, size_t len)
{
	const cJSON *f = cJSON_GetObjectItemCaseSensitive(req, "format");
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(req, "profile");

	x->wanted = f != NULL;
	x->format = LS_EXPORT_JSON;
	x->profile = LS_PROFILE_BLOCK;
	if (!f && need_format) {
		snprintf(err, len, "export needs 'format' (json, prometheus, pprof, folded, dot)");
		return -EINVAL;
	}
	if (f && (!cJSON_IsString(f) || ls_export_format_parse(f->valuestring, &x->format))) {
		snprintf(err, len, "'format' must be json, prometheus, pprof, folded or dot");
		return -EINVAL;
	}
	if (p && (!cJSON_IsString(p) || ls_profile_parse(p->valuestring, &x->profile))) {
		snprintf(err, len, "'profile' must be block (waiters' stacks), mutex (releasers' and owners' stacks) "
			 "or mechanism (waiters' stacks under their class and type)");
		return -EINVAL;
	}
	if (x->profile == LS_PROFILE_MECHANISM && x->format != LS_EXPORT_FOLDED) {
		snprintf(err, len, "'profile' mechanism is for folded stacks and flame graphs: use format folded");
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

	return start ? ls_clock_ns(CLOCK_BOOTTIME) - start * ls_clock_tick_ns() : 0;
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
	struct query_ctx qc = engine_query_ctx(e, kernel_addrs);
	struct proc_filter procs = query__proc_filter(q);
	uint64_t span = now > start ? now - start : 1, age;
	struct diag_input in = { .th = &e->opts.diag };
	cJSON *o = engine_response(cmd), *locks, *callers, *futex_callers, *part;
	const char *why = NULL;

	/* a process younger than the window: its rates are over its life */
	if (q->pid && (age = process_age_ns(q->pid)) && age < span)
		span = age;
	cJSON_AddItemToObject(o, "host", host_json());
	cJSON_AddItemToObject(o, "window", engine_window_json(ls_window_name(q->window), start, now));
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
	threads__refresh(e->threads, &e->sched, now);
	if (threads__json(e->threads, &e->sched, &procs, CGROUP_BY_MAX, REPORT_THREADS, q->window, now, part, &why)) {
		cJSON_AddStringToObject(part, "error", why);
		why = NULL;
	}
	add_cgroups(e, &qc, cJSON_GetObjectItemCaseSensitive(part, "rows"));
	part = cJSON_AddObjectToObject(o, "spin");
	if (spin__json(e->spin, &e->sched, e->threads, q->window, t, (double)span / NSEC_PER_SEC, &qc, &e->opts.spin,
		       &procs, REPORT_MAX_STACK, part, &why))
		cJSON_AddStringToObject(part, "error", why);
	add_cgroups(e, &qc, cJSON_GetObjectItemCaseSensitive(part, "findings"));
	cJSON_AddItemToObject(o, "dropped", status_dropped_json(e, counters0));
	cJSON_AddItemToObject(o, "thresholds", thresholds_json(e));
	in.lock_rows = locks;
	in.kernel_callers = futex_callers;
	in.caller_rows = callers;
	in.spin_findings = cJSON_GetObjectItemCaseSensitive(part, "findings");
	in.span_s = (double)span / NSEC_PER_SEC;
	cJSON_AddItemToObject(o, "findings", diagnose(&in));
	add_cgroups(e, &qc, cJSON_GetObjectItemCaseSensitive(o, "findings"));
	cJSON_Delete(futex_callers);
	return o;
}

/* A text or binary export: binary goes as base64 in the JSON response. */
static cJSON *export_data(const char *cmd, const struct export_req *x, const struct query *q,
			  uint64_t start, uint64_t now, struct export_buf *buf)
{
	cJSON *o = engine_response(cmd);
	char *b64 = NULL;

	cJSON_AddStringToObject(o, "format", ls_export_format_name(x->format));
	if (x->format == LS_EXPORT_PPROF || x->format == LS_EXPORT_FOLDED)
		cJSON_AddStringToObject(o, "profile", ls_profile_name(x->profile));
	cJSON_AddItemToObject(o, "window", engine_window_json(ls_window_name(q->window), start, now));
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
int report_prometheus_text(struct engine *e, struct agg *agg, const struct query *q, bool health,
			   struct export_buf *out)
{
	uint64_t start;
	struct agg_view *t = agg__view(agg, LS_WIN_ALL, &start);
	FILE *f = open_memstream(&out->data, &out->len);
	struct prom_series *once = NULL;
	cJSON *st;
	int err = -ENOMEM;

	/* the daemon's series keep their labels for its life; a scan's are its own */
	if (!health && prom_series__new(e->opts.metrics_max_series, &once))
		goto out;
	if (t && f) {
		if (health) {
			st = engine__status(e);
			prom_write_status(f, st);
			cJSON_Delete(st);
		}
		err = prom_write_locks(f, t, q, health ? e->prom_series : once);
		if (!err && health)
			prom_write_series(f, e->prom_series);
	}
out:
	prom_series__free(once);
	if (f && fclose(f))
		err = -ENOMEM;
	agg_view__free(t);
	return err;
}

cJSON *report_export_response(struct engine *e, const char *cmd, struct agg *agg, const struct query *q,
			      const struct export_req *x, uint64_t now, const uint64_t *counters0,
			      bool kernel_addrs)
{
	struct query_ctx qc = engine_query_ctx(e, kernel_addrs);
	struct export_span span = {};
	struct export_buf buf = {};
	uint64_t start;
	struct agg_view *t;
	cJSON *o = NULL;
	int err = 0;

	if (x->format == LS_EXPORT_PROMETHEUS) {
		if (report_prometheus_text(e, agg, q, !counters0, &buf))
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
	case LS_EXPORT_DOT:
		err = export__dot(t, q, &qc, &buf);
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

static int add_spin_sample(void *ctx, uint32_t pid, uint32_t stack, bool poll, double samples)
{
	struct spin_sample_key k = { .pid = pid, .stack = stack, .poll = poll };
	double *v = htab__upsert(ctx, &k, NULL, NULL);

	if (!v)
		return -ENOMEM;
	*v += samples;
	return 0;
}

int engine__push_profile(struct engine *e, struct export_buf *locks, struct export_buf *spin,
			 uint64_t *start_unix_ns, uint64_t *end_unix_ns)
{
	struct query_ctx qc = engine_query_ctx(e, false);
	uint64_t now_unix = ls_clock_ns(CLOCK_REALTIME), start;
	struct agg_opts ao = { .max_keys = e->opts.max_keys, .start_ns = ls_now_ns() };
	struct export_span span = { .start_unix_ns = e->push_start_unix_ns, .fleet = true };
	uint32_t freq = e->opts.collector.spin_freq;
	uint64_t dropped = 0;
	struct htab *samples;
	int ret = 0;
	struct agg_view *v;
	struct agg *next;
	struct query q;
	int err;

	spin->data = NULL;
	spin->len = 0;
	if (!e->push_agg)
		return -ENOENT;
	engine_catch_up(e);	/* every wait ended by now is in the interval */
	engine_query_init(e, &q);	/* every type but idle waits for an event, as top shows */
	span.duration_ns = now_unix > span.start_unix_ns ? now_unix - span.start_unix_ns : 0;
	if (!(next = agg__new(&ao)) || !(v = agg__view(e->push_agg, LS_WIN_ALL, &start))) {
		agg__free(next);
		return -ENOMEM;
	}
	err = export__pprof(v, &q, &qc, LS_PROFILE_BLOCK, &span, locks);
	agg_view__free(v);
	/* the next interval starts now, whether this one was encoded or not */
	agg__free(e->push_agg);
	e->push_agg = next;
	/* the spin samples of the same interval: none (no profile) when nothing spun */
	threads__refresh(e->threads, &e->sched, ao.start_ns);
	if (!(samples = htab__new(sizeof(struct spin_sample_key), sizeof(double), SIZE_MAX)))
		err = err ? err : -ENOMEM;
	else if (!(ret = spin__take_interval(e->spin, e->threads, ao.start_ns, add_spin_sample, samples, &dropped)) &&
		 !err && htab__count(samples) && freq)
		err = export__spin_pprof(samples, NSEC_PER_SEC / freq, &qc, &span, spin);
	else if (ret && !err)
		err = ret;
	e->push_spin_dropped += dropped;
	htab__free(samples);
	*start_unix_ns = e->push_start_unix_ns;
	*end_unix_ns = e->push_start_unix_ns = now_unix;
	return err;
}

// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/query.h"
#include "api/prom.h"
#include "decode/pods.h"
#include "lib/htab.h"
#include "lib/jsonget.h"
#include "lib/vec.h"

#define NSEC_PER_SEC 1e9

struct prom_series {
	size_t max;
	struct htab *admitted;	/* struct series_key -> nothing: the series with labels of their own */
	size_t folded;		/* label sets folded into "(other)" at the last write */
};

static void head(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* Label values here are our own identifiers (program, feature names): no escaping needed. */
static void sample(FILE *f, const char *name, const char *label, const char *value, double v)
{
	if (label)
		fprintf(f, "%s{%s=\"%s\"} %.15g\n", name, label, value, v);
	else
		fprintf(f, "%s %.15g\n", name, v);
}

static void bool_set(FILE *f, const char *name, const char *help, const cJSON *arr, const char *label,
		     const char *key, const char *flag)
{
	const cJSON *it;

	head(f, name, "gauge", help);
	cJSON_ArrayForEach(it, arr)
		sample(f, name, label, cJSON_GetStringValue(ls_json_get(it, key)), cJSON_IsTrue(ls_json_get(it, flag)));
}

static void programs(FILE *f, const cJSON *progs, int bpf_stats)
{
	const cJSON *p;

	bool_set(f, "lockscope_program_attached", "1 if the BPF program is attached (on-demand ones only while needed)",
		 progs, "program", "name", "attached");
	if (!bpf_stats)		/* run counts and times are zero unless kernel.bpf_stats_enabled=1 */
		return;
	head(f, "lockscope_bpf_runs_total", "counter", "BPF program runs (kernel.bpf_stats_enabled)");
	cJSON_ArrayForEach(p, progs)
		sample(f, "lockscope_bpf_runs_total", "program", cJSON_GetStringValue(ls_json_get(p, "name")), ls_json_num(p, "run_cnt"));
	head(f, "lockscope_bpf_run_seconds_total", "counter", "BPF program run time (kernel.bpf_stats_enabled)");
	cJSON_ArrayForEach(p, progs)
		sample(f, "lockscope_bpf_run_seconds_total", "program", cJSON_GetStringValue(ls_json_get(p, "name")),
		       ls_json_num(p, "run_time_ns") / NSEC_PER_SEC);
}

/* The profiles pushed to each backend (status's "push", when configured), by what became of them. */
static void push(FILE *f, const cJSON *backends)
{
	static const char *const results[] = { "sent", "dropped_queue_full", "dropped_rejected", "dropped_retries" };
	const cJSON *b;
	size_t i;

	if (!cJSON_GetArraySize(backends))
		return;
	head(f, "lockscope_push_profiles_total", "counter",
	     "profiles pushed to a fleet backend, by result: sent, or dropped (queue full, rejected, retries spent)");
	cJSON_ArrayForEach(b, backends)
		for (i = 0; i < sizeof(results) / sizeof(results[0]); i++)
			fprintf(f, "lockscope_push_profiles_total{backend=\"%s\",result=\"%s\"} %.15g\n", b->string,
				results[i] + (i ? strlen("dropped_") : 0), ls_json_num(b, results[i]));
	head(f, "lockscope_push_failed_attempts_total", "counter", "pushes that failed and were tried again");
	cJSON_ArrayForEach(b, backends)
		sample(f, "lockscope_push_failed_attempts_total", "backend", b->string, ls_json_num(b, "attempts_failed"));
	head(f, "lockscope_push_queued", "gauge", "profiles waiting to be pushed");
	cJSON_ArrayForEach(b, backends)
		sample(f, "lockscope_push_queued", "backend", b->string, ls_json_num(b, "queued"));
}

static int bpf_stats_enabled(void)
{
	FILE *f = fopen("/proc/sys/kernel/bpf_stats_enabled", "re");
	int on = 0;

	if (f) {
		if (fscanf(f, "%d", &on) != 1)
			on = 0;
		fclose(f);
	}
	return on;
}

void prom_write_series(FILE *f, const struct prom_series *ps)
{
	head(f, "lockscope_metrics_series", "gauge", "lock series with labels of their own (metrics-max-series at most)");
	sample(f, "lockscope_metrics_series", NULL, NULL, prom_series__count(ps));
	head(f, "lockscope_metrics_series_limit", "gauge", "metrics-max-series: lock series given labels of their own");
	sample(f, "lockscope_metrics_series_limit", NULL, NULL, ps->max);
	head(f, "lockscope_metrics_series_folded", "gauge",
	     "label sets past the limit, summed into comm=\"(other)\" unit=\"(other)\" in this scrape");
	sample(f, "lockscope_metrics_series_folded", NULL, NULL, ps->folded);
}

void prom_write_status(FILE *f, const cJSON *st)
{
	const cJSON *self = ls_json_get(st, "self"), *ev = ls_json_get(st, "events"), *syms = ls_json_get(self, "user_symbols");
	const cJSON *cfg = ls_json_get(st, "config"), *d;

	head(f, "lockscope_build_info", "gauge", "lockscoped's version");
	fprintf(f, "lockscope_build_info{version=\"%s\"} 1\n", cJSON_GetStringValue(ls_json_get(st, "version")));
	head(f, "lockscope_uptime_seconds", "gauge", "time since lockscoped attached");
	sample(f, "lockscope_uptime_seconds", NULL, NULL, ls_json_num(st, "uptime_ns") / NSEC_PER_SEC);
	head(f, "lockscope_tracing_paused", "gauge", "1 while `lockscope pause` keeps every program off its hook: nothing is seen");
	sample(f, "lockscope_tracing_paused", NULL, NULL, cJSON_IsTrue(ls_json_get(ls_json_get(st, "pause"), "paused")));
	head(f, "lockscope_paused_seconds_total", "counter", "time tracing was paused (lockscope pause), the current pause included");
	sample(f, "lockscope_paused_seconds_total", NULL, NULL, ls_json_num(ls_json_get(st, "pause"), "paused_ns") / NSEC_PER_SEC);

	head(f, "lockscope_events_total", "counter", "events recorded in BPF, by source");
	sample(f, "lockscope_events_total", "source", "kernel_waits", ls_json_num(ev, "waits"));
	sample(f, "lockscope_events_total", "source", "futex_waits", ls_json_num(ev, "futex_waits"));
	sample(f, "lockscope_events_total", "source", "holder_samples", ls_json_num(ev, "holder_samples"));
	sample(f, "lockscope_events_total", "source", "spin_samples", ls_json_num(ev, "spin_samples"));
	/*
	 * what the spin findings and the alerts on them are made of: a yield site is a storm's
	 * second yield and every 1024th (SCHED_YIELD_STACK_EVERY)
	 */
	sample(f, "lockscope_events_total", "source", "holder_preemptions", ls_json_num(ev, "holder_preemptions"));
	sample(f, "lockscope_events_total", "source", "kernel_holder_preemptions",
	       ls_json_num(ev, "kernel_holder_preemptions"));
	sample(f, "lockscope_events_total", "source", "yield_sites", ls_json_num(ev, "yield_sites"));
	sample(f, "lockscope_events_total", "source", "resumes", ls_json_num(ev, "resumes"));
	head(f, "lockscope_ring_records_total", "counter", "ring buffer records the daemon read");
	sample(f, "lockscope_ring_records_total", NULL, NULL, ls_json_num(self, "records"));
	head(f, "lockscope_events_dropped_total", "counter", "events or stacks lost, by reason (never silent)");
	cJSON_ArrayForEach(d, ls_json_get(st, "dropped"))
		sample(f, "lockscope_events_dropped_total", "reason", d->string, d->valuedouble);

	push(f, ls_json_get(st, "push"));
	programs(f, ls_json_get(st, "programs"), bpf_stats_enabled());
	bool_set(f, "lockscope_feature_available", "1 if the kernel feature was found at start (lockscoped --check)",
		 ls_json_get(st, "probes"), "feature", "name", "ok");
	head(f, "lockscope_degraded_components", "gauge", "components asked for but off (see lockscope status)");
	sample(f, "lockscope_degraded_components", NULL, NULL, cJSON_GetArraySize(ls_json_get(st, "degraded")));

	head(f, "lockscope_cpu_seconds_total", "counter", "lockscoped's own CPU time, user and system");
	sample(f, "lockscope_cpu_seconds_total", NULL, NULL, ls_json_num(self, "cpu_ns") / NSEC_PER_SEC);
	head(f, "lockscope_resident_memory_bytes", "gauge", "lockscoped's resident set size");
	sample(f, "lockscope_resident_memory_bytes", NULL, NULL, ls_json_num(self, "rss_bytes"));
	head(f, "lockscope_heap_bytes", "gauge", "lockscoped's allocated memory not yet freed (its resident set less the allocator's cache)");
	sample(f, "lockscope_heap_bytes", NULL, NULL, ls_json_num(self, "heap_bytes"));
	head(f, "lockscope_aggregator_keys", "gauge", "aggregation keys kept");
	sample(f, "lockscope_aggregator_keys", NULL, NULL, ls_json_num(ls_json_get(st, "aggregator"), "keys"));
	head(f, "lockscope_aggregator_folded_keys_total", "counter", "idle keys folded into their process's when the key table was full");
	sample(f, "lockscope_aggregator_folded_keys_total", NULL, NULL, ls_json_num(ls_json_get(st, "aggregator"), "folded_keys"));
	head(f, "lockscope_user_frames_total", "counter", "user frames named, by how (blazesym lookup or cache) or left unresolved");
	sample(f, "lockscope_user_frames_total", "result", "symbolized", ls_json_num(syms, "symbolized"));
	sample(f, "lockscope_user_frames_total", "result", "cache_hit", ls_json_num(syms, "cache_hits"));
	sample(f, "lockscope_user_frames_total", "result", "unresolved", ls_json_num(syms, "unresolved"));
	if (cJSON_IsObject(cfg)) {
		head(f, "lockscope_config_reloads_total", "counter", "SIGHUP reloads applied");
		sample(f, "lockscope_config_reloads_total", NULL, NULL, ls_json_num(cfg, "reloads"));
		head(f, "lockscope_config_last_reload_failed", "gauge", "1 if the last reload was rejected (the running config stays)");
		sample(f, "lockscope_config_last_reload_failed", NULL, NULL, cJSON_IsString(ls_json_get(cfg, "reload_error")));
	}
}

/* ---- lock metrics ---- */

struct series_key {
	uint32_t kind_user, type;
	uint32_t unit;		/* cgroups__group(CGROUP_BY_UNIT): 0, none */
	uint32_t pod;		/* cgroups__group(CGROUP_BY_POD): labelled when the pod is named */
	char comm[LS_COMM_LEN];
};

struct series {
	double count, total_ns;
	double hist[LS_HIST_BUCKETS];
	uint32_t pid;		/* one process of the unit: names it */
};

struct series_set {
	struct htab *series;
	const struct cgroups *cgroups;
};

/* The unit of the series the ones past the limit are folded into (cgroups__group is smaller) */
#define PROM_OTHER_UNIT UINT32_MAX
#define PROM_OTHER_LABEL "(other)"


int prom_series__new(size_t max, struct prom_series **out)
{
	struct prom_series *ps = calloc(1, sizeof(*ps));

	if (!ps || !(ps->admitted = htab__new(sizeof(struct series_key), 1, max))) {
		free(ps);
		return -ENOMEM;
	}
	ps->max = max;
	*out = ps;
	return 0;
}

void prom_series__free(struct prom_series *ps)
{
	if (!ps)
		return;
	htab__free(ps->admitted);
	free(ps);
}

size_t prom_series__count(const struct prom_series *ps)
{
	return htab__count(ps->admitted);
}

size_t prom_series__folded(const struct prom_series *ps)
{
	return ps->folded;
}

struct fresh {
	const struct series_key *key;
	const struct series *val;
};

static int cmp_fresh_total(const void *a, const void *b)
{
	const struct series *x = ((const struct fresh *)a)->val, *y = ((const struct fresh *)b)->val;

	return (x->total_ns < y->total_ns) - (x->total_ns > y->total_ns);
}

/*
 * Each series keeps its labels if admitted: the first ones seen (by wait time within a
 * write), up to the limit, for the daemon's life, so that no counter moves from a series
 * to another. The rest are summed into one "(other)" series per kind and type. Returns
 * the table to write (@all itself, or a new one), NULL when out of memory.
 */
static struct htab *admit(struct prom_series *ps, struct htab *all)
{
	struct htab *out = NULL;
	struct fresh *fresh = NULL;
	size_t nr = 0, cap = 0, iter = 0, i;
	const void *kp;
	void *vp;

	ps->folded = 0;
	while (!htab__next(all, &iter, &kp, &vp)) {
		if (htab__find(ps->admitted, kp))
			continue;
		if (ls_vec_reserve(&fresh, &cap, nr, sizeof(*fresh)))
			goto fail;
		fresh[nr++] = (struct fresh){ kp, vp };
	}
	ls_sort(fresh, nr, sizeof(*fresh), cmp_fresh_total);
	for (i = 0; i < nr && htab__count(ps->admitted) < ps->max; i++)
		if (!htab__upsert(ps->admitted, fresh[i].key, NULL, NULL))
			goto fail;
	free(fresh);
	fresh = NULL;
	if (nr == i)
		return all;	/* every series has labels of its own */
	if (!(out = htab__new(sizeof(struct series_key), sizeof(struct series), SIZE_MAX)))
		goto fail;
	iter = 0;
	while (!htab__next(all, &iter, &kp, &vp)) {
		const struct series *sv = vp;
		struct series_key k = *(const struct series_key *)kp;
		struct series *o;
		int b;

		if (!htab__find(ps->admitted, &k)) {
			k.unit = PROM_OTHER_UNIT;
			k.pod = 0;
			snprintf(k.comm, sizeof(k.comm), "%s", PROM_OTHER_LABEL);
			ps->folded++;
		}
		if (!(o = htab__upsert(out, &k, NULL, NULL)))
			goto fail;
		o->count += sv->count;
		o->total_ns += sv->total_ns;
		for (b = 0; b < LS_HIST_BUCKETS; b++)
			o->hist[b] += sv->hist[b];
		o->pid = sv->pid;
	}
	return out;
fail:
	free(fresh);
	htab__free(out);
	return NULL;
}

static int series_add(void *arg, const struct agg_key *k, const struct agg_val *v, uint32_t stack,
		      double fc, double fw, enum ls_wclass cls)
{
	struct series_set *set = arg;
	struct series_key sk = { .kind_user = !!(k->flags & LS_KIND_USER), .type = query__type_index(k->flags) };
	struct series *s;

	(void)cls;
	(void)stack;
	const uint32_t *groups = set->cgroups ? cgroups__groups(set->cgroups, k->pid) : NULL;

	if (groups) {
		sk.unit = groups[CGROUP_BY_UNIT];
		sk.pod = groups[CGROUP_BY_POD];
	}
	snprintf(sk.comm, sizeof(sk.comm), "%s", v->comm);
	s = htab__upsert(set->series, &sk, NULL, NULL);
	if (!s)
		return -ENOMEM;
	s->pid = k->pid;
	s->count += v->st.count * fc;
	s->total_ns += v->st.total_ns * fw;
	agg_hist_add(s->hist, v, fc);
	return 0;
}

/*
 * A thread's name as a label value: \, " and newline escaped as the format wants, and
 * bytes outside printable ASCII as '?' (a name cut at 15 bytes may end inside a UTF-8
 * character, which would make the exposition invalid).
 */
static void label_value(char *out, size_t len, const char *comm)
{
	size_t o = 0;

	for (; *comm && o + 3 < len; comm++) {
		unsigned char c = *comm;

		if (c == '\\' || c == '"') {
			out[o++] = '\\';
			out[o++] = c;
		} else {
			out[o++] = c >= 0x20 && c < 0x7f ? c : '?';
		}
	}
	out[o] = 0;
}

struct series_ref {
	const struct series_key *key;
	const struct series *val;
	char labels[1024];
};

static int cmp_series(const void *a, const void *b)
{
	return strcmp(((const struct series_ref *)a)->labels, ((const struct series_ref *)b)->labels);
}

int prom_write_locks(FILE *f, const struct agg_view *tab, const struct query *q, struct prom_series *ps)
{
	struct htab *all = htab__new(sizeof(struct series_key), sizeof(struct series), SIZE_MAX), *series = all;
	struct series_set set = { all, q->cgroups };
	struct series_ref *refs = NULL;
	size_t nr = 0, cap = 0, iter = 0, i;
	const void *kp;
	void *vp;
	int err, shift, b;

	if (!all)
		return -ENOMEM;
	err = query__for_each_wait(tab, q, QUERY_WAITER, false, series_add, &set);
	if (!err && !(series = admit(ps, all)))
		err = -ENOMEM;
	while (!err && !htab__next(series, &iter, &kp, &vp)) {
		const struct series_key *sk = kp;
		const struct series *sv = vp;
		bool other = sk->unit == PROM_OTHER_UNIT;
		const struct ls_cgroup *cg = (sk->unit || sk->pod) && !other ? cgroups__of(q->cgroups, sv->pid) : NULL;
		const struct ls_pod *pod = cg && sk->pod ? cgroups__pod(q->cgroups, cg) : NULL;
		char comm[LS_COMM_LEN * 2 + 1], unit[sizeof(cg->unit) * 2 + 1], where[sizeof(pod->name) * 2 + 64] = "";

		if (ls_vec_reserve(&refs, &cap, nr, sizeof(*refs))) {
			err = -ENOMEM;
			break;
		}
		label_value(comm, sizeof(comm), sk->comm);
		label_value(unit, sizeof(unit), other ? PROM_OTHER_LABEL : cg && sk->unit ? cg->unit : "");
		/* a named pod's (Kubernetes names are label-safe already) */
		if (pod)
			snprintf(where, sizeof(where), ",namespace=\"%s\",pod=\"%s\"", pod->ns, pod->name);
		refs[nr].key = sk;
		refs[nr].val = vp;
		snprintf(refs[nr++].labels, sizeof(refs->labels), "kind=\"%s\",type=\"%s\",comm=\"%s\",unit=\"%s\"%s",
			 sk->kind_user ? "user" : "kernel", ls_lock_types[sk->type].name, comm, unit, where);
	}
	if (err)
		goto cleanup;
	ls_sort(refs, nr, sizeof(*refs), cmp_series);	/* a stable order scrape after scrape */
	head(f, "lockscope_contentions_total", "counter",
	     "waits for a contended lock (kernel lock slow paths, futex sleeps), by kind, type, waiting thread, its systemd unit and Kubernetes pod");
	for (i = 0; i < nr; i++)
		fprintf(f, "lockscope_contentions_total{%s} %" PRIu64 "\n", refs[i].labels,
			(uint64_t)llround(refs[i].val->count));
	head(f, "lockscope_wait_seconds_total", "counter", "time spent waiting for contended locks");
	for (i = 0; i < nr; i++)
		fprintf(f, "lockscope_wait_seconds_total{%s} %.9f\n", refs[i].labels, refs[i].val->total_ns / NSEC_PER_SEC);
	head(f, "lockscope_wait_duration_seconds", "histogram", "how long each wait for a contended lock lasted");
	for (i = 0; i < nr; i++) {
		const struct series *s = refs[i].val;
		double below = 0;

		b = 0;
		for (shift = PROM_HIST_MIN_SHIFT; shift <= PROM_HIST_MAX_SHIFT; shift += PROM_HIST_STEP) {
			/* aggregator bucket i holds [2^i, 2^(i+1)): those below 2^shift are i < shift */
			for (; b < shift && b < LS_HIST_BUCKETS; b++)
				below += s->hist[b];
			fprintf(f, "lockscope_wait_duration_seconds_bucket{%s,le=\"%.9g\"} %" PRIu64 "\n",
				refs[i].labels, (double)(1ULL << shift) / NSEC_PER_SEC, (uint64_t)llround(below));
		}
		fprintf(f, "lockscope_wait_duration_seconds_bucket{%s,le=\"+Inf\"} %" PRIu64 "\n",
			refs[i].labels, (uint64_t)llround(s->count));
		fprintf(f, "lockscope_wait_duration_seconds_sum{%s} %.9f\n", refs[i].labels, s->total_ns / NSEC_PER_SEC);
		fprintf(f, "lockscope_wait_duration_seconds_count{%s} %" PRIu64 "\n", refs[i].labels,
			(uint64_t)llround(s->count));
	}
cleanup:
	free(refs);
	if (series != all)
		htab__free(series);
	htab__free(all);
	return err;
}

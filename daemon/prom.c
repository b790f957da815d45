// SPDX-License-Identifier: GPL-2.0
#include <stdio.h>
#include <stdlib.h>
#include "prom.h"

#define NSEC_PER_SEC 1e9

static double num(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static const cJSON *obj(const cJSON *o, const char *name)
{
	return cJSON_GetObjectItemCaseSensitive(o, name);
}

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
		sample(f, name, label, cJSON_GetStringValue(obj(it, key)), cJSON_IsTrue(obj(it, flag)));
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
		sample(f, "lockscope_bpf_runs_total", "program", cJSON_GetStringValue(obj(p, "name")), num(p, "run_cnt"));
	head(f, "lockscope_bpf_run_seconds_total", "counter", "BPF program run time (kernel.bpf_stats_enabled)");
	cJSON_ArrayForEach(p, progs)
		sample(f, "lockscope_bpf_run_seconds_total", "program", cJSON_GetStringValue(obj(p, "name")),
		       num(p, "run_time_ns") / NSEC_PER_SEC);
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

char *prom_from_status(const cJSON *st, size_t *len)
{
	const cJSON *self = obj(st, "self"), *ev = obj(st, "events"), *syms = obj(self, "user_symbols");
	const cJSON *cfg = obj(st, "config"), *d;
	char *buf = NULL;
	FILE *f = open_memstream(&buf, len);

	if (!f)
		return NULL;
	head(f, "lockscope_build_info", "gauge", "lockscoped's version");
	fprintf(f, "lockscope_build_info{version=\"%s\"} 1\n", cJSON_GetStringValue(obj(st, "version")));
	head(f, "lockscope_uptime_seconds", "gauge", "time since lockscoped attached");
	sample(f, "lockscope_uptime_seconds", NULL, NULL, num(st, "uptime_ns") / NSEC_PER_SEC);

	head(f, "lockscope_events_total", "counter", "events recorded in BPF, by source");
	sample(f, "lockscope_events_total", "source", "kernel_waits", num(ev, "waits"));
	sample(f, "lockscope_events_total", "source", "futex_waits", num(ev, "futex_waits"));
	sample(f, "lockscope_events_total", "source", "holder_samples", num(ev, "holder_samples"));
	sample(f, "lockscope_events_total", "source", "spin_samples", num(ev, "spin_samples"));
	head(f, "lockscope_ring_records_total", "counter", "ring buffer records the daemon read");
	sample(f, "lockscope_ring_records_total", NULL, NULL, num(self, "records"));
	head(f, "lockscope_events_dropped_total", "counter", "events or stacks lost, by reason (never silent)");
	cJSON_ArrayForEach(d, obj(st, "dropped"))
		sample(f, "lockscope_events_dropped_total", "reason", d->string, d->valuedouble);

	programs(f, obj(st, "programs"), bpf_stats_enabled());
	bool_set(f, "lockscope_feature_available", "1 if the kernel feature was found at start (lockscoped --check)",
		 obj(st, "probes"), "feature", "name", "ok");
	head(f, "lockscope_degraded_components", "gauge", "components asked for but off (see lockscope status)");
	sample(f, "lockscope_degraded_components", NULL, NULL, cJSON_GetArraySize(obj(st, "degraded")));

	head(f, "lockscope_cpu_seconds_total", "counter", "lockscoped's own CPU time, user and system");
	sample(f, "lockscope_cpu_seconds_total", NULL, NULL, num(self, "cpu_ns") / NSEC_PER_SEC);
	head(f, "lockscope_resident_memory_bytes", "gauge", "lockscoped's resident set size");
	sample(f, "lockscope_resident_memory_bytes", NULL, NULL, num(self, "rss_bytes"));
	head(f, "lockscope_aggregator_keys", "gauge", "aggregation keys kept");
	sample(f, "lockscope_aggregator_keys", NULL, NULL, num(obj(st, "aggregator"), "keys"));
	head(f, "lockscope_user_frames_total", "counter", "user frames named, by how (blazesym lookup or cache) or left unresolved");
	sample(f, "lockscope_user_frames_total", "result", "symbolized", num(syms, "symbolized"));
	sample(f, "lockscope_user_frames_total", "result", "cache_hit", num(syms, "cache_hits"));
	sample(f, "lockscope_user_frames_total", "result", "unresolved", num(syms, "unresolved"));
	if (cJSON_IsObject(cfg)) {
		head(f, "lockscope_config_reloads_total", "counter", "SIGHUP reloads applied");
		sample(f, "lockscope_config_reloads_total", NULL, NULL, num(cfg, "reloads"));
		head(f, "lockscope_config_last_reload_failed", "gauge", "1 if the last reload was rejected (the running config stays)");
		sample(f, "lockscope_config_last_reload_failed", NULL, NULL, cJSON_IsString(obj(cfg, "reload_error")));
	}
	if (fclose(f)) {
		free(buf);
		return NULL;
	}
	return buf;
}

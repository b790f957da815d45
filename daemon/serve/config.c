// SPDX-License-Identifier: GPL-2.0
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "serve/config.h"
#include <sys/socket.h>
#include "serve/metrics.h"
#include "serve/server.h"
#include "lockscope.h"
#include "ustack.h"

#define ENG(field) offsetof(struct ls_config, engine.field)
#define CFG(field) offsetof(struct ls_config, field)
#define U32(key, off, lo, hi, fl, sec, help) { key, LS_SET_U32, off, lo, hi, fl, sec, help }
#define STR(key, off, fl, sec, help) { key, LS_SET_STR, off, 0, 0, fl, sec, help }

const struct ls_setting ls_settings[] = {
	STR("socket", CFG(socket), LS_SET_ABSPATH, "access", "the Unix socket lockscope connects to"),
	STR("socket-group", CFG(socket_group), LS_SET_RELOAD, "access",
	    "the socket's group (mode 0660): its members may query; root always may"),
	STR("metrics-listen", CFG(metrics_listen), LS_SET_EMPTY | LS_SET_LISTEN, "access",
	    "ADDR:PORT to serve Prometheus metrics on (GET /metrics), e.g. 127.0.0.1:9464; empty: off"),
	STR("metrics-textfile", CFG(metrics_textfile), LS_SET_EMPTY | LS_SET_ABSPATH | LS_SET_RELOAD, "access",
	    "write the metrics to this node_exporter textfile (*.prom, atomically); empty: off"),
	U32("metrics-textfile-interval", CFG(metrics_textfile_interval), 1, 86400, LS_SET_RELOAD, "access",
	    "seconds between textfile writes"),
	U32("metrics-max-series", ENG(metrics_max_series), 10, 1000000, 0, "access",
	    "lock series (kind, type, comm, unit) with labels of their own in the metrics, the first seen;"
	    " the rest are summed into comm=\"(other)\""),
	U32("expose-kernel-addresses", ENG(expose_kernel_addrs), 0, 1, LS_SET_RELOAD, "access",
	    "1: raw kernel addresses to every client; 0: only to clients with CAP_SYSLOG"),

	U32("user-locks", ENG(collector.user_locks), 0, 1, 0, "sources",
	    "1: futex waits (sched_switch); 0: kernel locks only"),
	U32("block-waits", ENG(collector.block_waits), 0, 1, 0, "sources",
	    "1 (with user-locks): every other blocking syscall too, by family (poll, read, sync...), at a cost per sleep; 0 (default): futex waits only"),
	U32("sched-threads", ENG(collector.sched_threads), 0, 1U << 22, 0, "sources",
	    "threads with per-thread switch counts (BPF map); 0: no scheduling or spin source"),
	U32("spin-freq", ENG(collector.spin_freq), 0, 10000, 0, "sources",
	    "spin-loop samples/s per CPU (cpu-clock); 0: no PAUSE-spin or busy-poll detection"),
	U32("hold-freq", ENG(collector.hold_freq), 0, 10000, 0, "sources",
	    "holder samples/s per CPU; 0: no holder stacks"),
	U32("waker-min-rate", ENG(collector.waker_min_rate), 0, 1000000, 0, "sources",
	    "futex waits/s that attach sched_waking to name releasers (off 10 s after they stop); 0: always attached"),
	U32("waker-max-rate", ENG(collector.waker_max_rate), 0, 100000000, 0, "sources",
	    "user waits/s past which sched_waking is attached part-time, 0.2 s every few seconds (at most 10), to name about"
	    " this many a second; the other waits are counted exactly, their waker not named; 0: no limit"),

	U32("stack-rate", ENG(collector.stack_rate), 0, 1000000, 0, "sampling",
	    "stacks/s per lock per CPU before sampling; 0: none"),
	U32("cpu-stack-rate", ENG(collector.cpu_stack_rate), 1, 1000000, 0, "sampling",
	    "stacks/s per CPU, all locks"),
	U32("stack-budget", ENG(collector.stack_budget_us), 1, 1000000, 0, "sampling",
	    "us per second per CPU that kernel-lock stacks may take, as measured (1000000: no limit)"),
	U32("user-dump-rate", ENG(collector.udump_rate), 1, 1000000, 0, "sampling",
	    "user stack dumps/s per CPU, all locks (a sample with its releaser's: two)"),
	U32("spin-dump-rate", ENG(collector.spin_dump_rate), 0, 1000000, 0, "sampling",
	    "user stack dumps/s per CPU of spin samples (the share counts every sample); 0: none"),
	U32("user-stack-bytes", ENG(collector.ustack_bytes), 0, LS_USTACK_MAX_BYTES, LS_SET_WINDOW, "sampling",
	    "user stack copied per dump for DWARF unwinding (multiple of 8, >= 1024); 0: frame pointers"),
	U32("spin-stack-bytes", ENG(collector.spin_stack_bytes), LS_USTACK_MIN_BYTES, LS_USTACK_MAX_BYTES,
	    LS_SET_WINDOW, "sampling", "user stack copied per yield-site, spin-sample and burst dump (multiple of 8)"),
	STR("debuginfod-cache", ENG(debuginfod_cache), LS_SET_EMPTY | LS_SET_ABSPATH, "sampling",
	    "where debug files fetched from $DEBUGINFOD_URLS are kept; empty: never fetch"),
	U32("max-stack", ENG(collector.max_stack), 1, LS_MAX_STACK_DEPTH, 0, "sampling", "frames kept per stack"),

	U32("max-threads", ENG(collector.max_threads), 64, 1U << 22, 0, "maps",
	    "sleeping kernel-lock waits open at once (BPF map)"),
	U32("stack-entries", ENG(collector.stack_entries), 64, 1U << 22, 0, "maps",
	    "distinct kernel stacks (BPF stack map)"),
	U32("max-locks", ENG(collector.max_locks), 64, 1U << 22, LS_SET_POW2, "maps",
	    "stack sampler buckets (power of 2)"),
	U32("owner-stacks", ENG(collector.owner_stacks), 16, 1U << 20, 0, "maps", "owner stacks in flight"),
	U32("wait-keys", ENG(collector.wait_keys), 64, 1U << 22, 0, "maps",
	    "distinct waits (thread, lock, owner) per second in each of the two wait tables (BPF hash)"),
	U32("ringbuf-kb", ENG(collector.ringbuf_bytes), 4, 1U << 20, LS_SET_POW2 | LS_SET_KIB, "maps",
	    "ring buffer per CPU, KiB (power of 2)"),
	U32("user-threads", ENG(collector.uthreads), 64, 1U << 22, 0, "maps",
	    "threads in a futex wait at once (BPF map)"),
	U32("user-stack-entries", ENG(collector.ustack_entries), 64, 1U << 22, 0, "maps",
	    "distinct user stacks (BPF stack map)"),
	U32("max-holders", ENG(collector.max_holders), 16, 1U << 20, 0, "maps",
	    "lock holders noted for sampling and the preemption check (user and kernel each, rounded down to a power of 2)"),
	U32("max-keys", ENG(max_keys), 1024, 1U << 26, 0, "maps", "aggregation keys per time slot"),
	U32("max-stacks", ENG(max_stacks), 1024, 1U << 26, 0, "maps", "distinct stacks the daemon keeps"),
	U32("cache-idle", ENG(cache_idle_s), 0, 86400, 0, "maps",
	    "seconds unused after which what is kept for the next query (the symbolizer's parsed "
	    "debug files, a window view's references and merged cells, the rows' arrays) is "
	    "given back; 0: kept"),

	U32("yield-min", ENG(spin.yield_min), 1, UINT32_MAX, LS_SET_RELOAD, "thresholds",
	    "yields (or EAGAIN futex waits) in a storm before it is a yield_spin finding"),
	U32("yield-min-rate", ENG(spin.yield_min_rate), 1, UINT32_MAX, LS_SET_RELOAD, "thresholds",
	    "and their rate, per second"),
	U32("pause-min-samples", ENG(spin.pause_min_samples), 1, UINT32_MAX, LS_SET_RELOAD, "thresholds",
	    "spin-loop (or busy-poll) samples of a thread before it is a finding"),
	U32("pause-min-share", ENG(spin.pause_min_share_pct), 1, 100, LS_SET_RELOAD, "thresholds",
	    "and their share of the thread's samples, percent"),
	U32("burst-min-events", ENG(spin.burst_min_events), 1, UINT32_MAX, LS_SET_RELOAD, "thresholds",
	    "events in the 10 ms after a resume before it is a burst finding"),
	U32("burst-factor", ENG(spin.burst_factor), 1, 1000, LS_SET_RELOAD, "thresholds",
	    "and times the thread's own rate before the stop"),
	U32("report-min-wait", ENG(diag.min_wait_pct), 0, 100, LS_SET_RELOAD, "thresholds",
	    "report: a lock's waits must cost this % of one thread's time to be diagnosed"),
	U32("report-contended-rate", ENG(diag.contended_rate), 1, UINT32_MAX, LS_SET_RELOAD, "thresholds",
	    "report: contentions/s that count as high (coarse_lock, redesign)"),
	U32("report-avg-wait-us", ENG(diag.avg_wait_us), 1, UINT32_MAX, LS_SET_RELOAD, "thresholds",
	    "report: an average wait, us, that counts as long (blocking_work, redesign)"),
	U32("report-jitter-factor", ENG(diag.jitter_factor), 2, UINT32_MAX, LS_SET_RELOAD, "thresholds",
	    "report: wait_jitter when the max wait is this many times the average"),
	U32("report-jitter-min-us", ENG(diag.jitter_min_us), 1, UINT32_MAX, LS_SET_RELOAD, "thresholds",
	    "report: and at least this long, us"),
	U32("report-jitter-tail", ENG(diag.jitter_tail_pct), 0, 100, LS_SET_RELOAD, "thresholds",
	    "report: and waits over 16x the average hold this % of the wait time"),
	U32("report-futex-wake", ENG(diag.futex_wake_pct), 1, 100, LS_SET_RELOAD, "thresholds",
	    "report: futex_wake_contention when kernel waits in futex code are this % of futex waiting"),
	U32("report-work-min", ENG(diag.work_min_pct), 1, 100, LS_SET_RELOAD, "thresholds",
	    "report: a kind of holder work (I/O, allocation, formatting...) named at this % of samples"),
	STR("push-parca", CFG(push_parca), LS_SET_EMPTY | LS_SET_URL, "push",
	    "push each interval's profiles to this Parca (http[s]://HOST:7070: its WriteRaw call, as gRPC-web); empty: off"),
	STR("push-pyroscope", CFG(push_pyroscope), LS_SET_EMPTY | LS_SET_URL, "push",
	    "push each interval's profile to this Pyroscope (http[s]://HOST:4040; POST /ingest); empty: off"),
	U32("push-interval", CFG(push_interval), 1, 3600, 0, "push", "seconds each pushed profile covers"),
	U32("push-queue", CFG(push_queue), 1, 1024, 0, "push",
	    "profiles waiting per backend while it is slow or down; the oldest goes first (counted)"),
	U32("push-timeout", CFG(push_timeout), 1, 300, 0, "push", "seconds one push may take, connection included"),
	STR("push-bearer-token-file", CFG(push_bearer_token_file), LS_SET_EMPTY | LS_SET_ABSPATH, "push",
	    "a file whose first line is the bearer token sent to the backends; empty: none"),
	STR("push-basic-auth-file", CFG(push_basic_auth_file), LS_SET_EMPTY | LS_SET_ABSPATH, "push",
	    "a file whose first line is USER:PASSWORD for basic auth; empty: none"),
	STR("push-ca-file", CFG(push_ca_file), LS_SET_EMPTY | LS_SET_ABSPATH, "push",
	    "the CA certificates (PEM) the backends' TLS certificates are checked against; empty: the system's"),
	STR("push-app", CFG(push_app), 0, "push", "Pyroscope's application name and Parca's __name__ label (the spin profile's: this and _spin)"),
	STR("push-host", CFG(push_host), LS_SET_EMPTY, "push", "the host label of the pushed profiles; empty: the host name"),
	STR("kube-pods-url", CFG(kube_pods_url), LS_SET_EMPTY | LS_SET_URL, "kubernetes",
	    "name pods: the kubelet's https://NODE:10250/pods or the API server's https://HOST/api/v1/pods; empty: off"),
	STR("kube-node", CFG(kube_node), LS_SET_EMPTY, "kubernetes",
	    "with the API server: list this node's pods only (the DaemonSet passes spec.nodeName); empty: all"),
	STR("kube-token-file", CFG(kube_token_file), LS_SET_EMPTY | LS_SET_ABSPATH, "kubernetes",
	    "the service account token sent as a bearer token, read at each fetch; empty: none"),
	STR("kube-ca-file", CFG(kube_ca_file), LS_SET_EMPTY | LS_SET_ABSPATH, "kubernetes",
	    "the CA certificates (PEM) the server's certificate is checked against; empty: the system's"),
	U32("kube-insecure-tls", CFG(kube_insecure_tls), 0, 1, 0, "kubernetes",
	    "1: do not check the server's certificate (a kubelet's self-signed one)"),
	U32("kube-pods-interval", CFG(kube_pods_interval), 5, 3600, 0, "kubernetes",
	    "seconds between fetches of the pod list (and 5 s after a pod it lacks is seen)"),
};
const int ls_nr_settings = sizeof(ls_settings) / sizeof(ls_settings[0]);

void ls_config__init(struct ls_config *c)
{
	memset(c, 0, sizeof(*c));
	engine_opts__init(&c->engine);
	snprintf(c->socket, sizeof(c->socket), "%s", LS_DEFAULT_SOCKET);
	snprintf(c->socket_group, sizeof(c->socket_group), "%s", LS_SOCKET_GROUP);
	c->metrics_textfile_interval = LS_DEF_TEXTFILE_INTERVAL;
	c->push_interval = LS_DEF_PUSH_INTERVAL;
	c->push_queue = LS_DEF_PUSH_QUEUE;
	c->push_timeout = LS_DEF_PUSH_TIMEOUT;
	snprintf(c->push_app, sizeof(c->push_app), "%s", LS_DEF_PUSH_APP);
	c->kube_pods_interval = LS_DEF_KUBE_INTERVAL;
}

const struct ls_setting *ls_setting_find(const char *key)
{
	int i;

	for (i = 0; i < ls_nr_settings; i++)
		if (!strcmp(ls_settings[i].key, key))
			return &ls_settings[i];
	return NULL;
}

static uint32_t *u32_field(const struct ls_config *c, const struct ls_setting *s)
{
	return (uint32_t *)((char *)c + s->offset);
}

static char *str_field(const struct ls_config *c, const struct ls_setting *s)
{
	return (char *)c + s->offset;
}

static int apply_str(struct ls_config *c, const struct ls_setting *s, const char *value, char *err,
		     size_t len)
{
	struct sockaddr_storage ss;
	unsigned int sslen;

	if ((!*value && !(s->flags & LS_SET_EMPTY)) || strlen(value) >= LS_CONFIG_STR_MAX) {
		snprintf(err, len, "%s: '%s' is not a string of 1 to %d characters", s->key, value,
			 LS_CONFIG_STR_MAX - 1);
		return -EINVAL;
	}
	if ((s->flags & LS_SET_ABSPATH) && *value && value[0] != '/') {
		snprintf(err, len, "%s: '%s' is not an absolute path", s->key, value);
		return -EINVAL;
	}
	if ((s->flags & LS_SET_LISTEN) && *value && metrics_parse_listen(value, &ss, &sslen)) {
		snprintf(err, len, "%s: '%s' is not ADDR:PORT (127.0.0.1:9464, [::1]:9464)", s->key, value);
		return -EINVAL;
	}
	if ((s->flags & LS_SET_URL) && *value && strncmp(value, "http://", 7) && strncmp(value, "https://", 8)) {
		snprintf(err, len, "%s: '%s' is not an http:// or https:// URL", s->key, value);
		return -EINVAL;
	}
	snprintf(str_field(c, s), LS_CONFIG_STR_MAX, "%s", value);
	return 0;
}

int ls_setting_apply(struct ls_config *c, const char *key, const char *value, char *err, size_t len)
{
	const struct ls_setting *s = ls_setting_find(key);
	unsigned long long v;
	char *end;

	if (!s) {
		snprintf(err, len, "unknown setting '%s' (see lockscoped --help)", key);
		return -EINVAL;
	}
	if (s->type == LS_SET_STR)
		return apply_str(c, s, value, err, len);
	errno = 0;
	v = strtoull(value, &end, 10);
	if (errno || end == value || *end || v < s->min || v > s->max || value[0] == '-') {
		snprintf(err, len, "%s: '%s' is not an integer from %u to %u", key, value, s->min, s->max);
		return -EINVAL;
	}
	if ((s->flags & LS_SET_POW2) && (v & (v - 1))) {
		snprintf(err, len, "%s: '%s' is not a power of two", key, value);
		return -EINVAL;
	}
	if ((s->flags & LS_SET_WINDOW) && v && (v < LS_USTACK_MIN_BYTES || v % 8)) {
		snprintf(err, len, "%s: '%s' is neither 0 nor a multiple of 8 from %u to %u", key, value,
			 LS_USTACK_MIN_BYTES, LS_USTACK_MAX_BYTES);
		return -EINVAL;
	}
	if (s->flags & LS_SET_KIB)
		v *= 1024;
	*u32_field(c, s) = (uint32_t)v;
	return 0;
}

void ls_setting_format(const struct ls_config *c, const struct ls_setting *s, char *buf, size_t len)
{
	uint32_t v;

	if (s->type == LS_SET_STR) {
		snprintf(buf, len, "%s", str_field(c, s));
		return;
	}
	v = *u32_field(c, s);
	snprintf(buf, len, "%u", s->flags & LS_SET_KIB ? v / 1024 : v);
}

void ls_setting_copy(struct ls_config *dst, const struct ls_config *src, const struct ls_setting *s)
{
	if (s->type == LS_SET_STR)
		memcpy(str_field(dst, s), str_field(src, s), LS_CONFIG_STR_MAX);
	else
		*u32_field(dst, s) = *u32_field(src, s);
}

bool ls_setting_equal(const struct ls_config *a, const struct ls_config *b, const struct ls_setting *s)
{
	if (s->type == LS_SET_STR)
		return !strcmp(str_field(a, s), str_field(b, s));
	return *u32_field(a, s) == *u32_field(b, s);
}

void ls_config_dump(const struct ls_config *c, FILE *f)
{
	const char *section = NULL;
	char val[LS_CONFIG_STR_MAX];
	int i;

	fprintf(f, "# lockscoped.conf: KEY = VALUE, '#' starts a comment. Every key with its value in\n"
		   "# force; (reload) marks the keys SIGHUP applies, the others need a restart.\n");
	for (i = 0; i < ls_nr_settings; i++) {
		const struct ls_setting *s = &ls_settings[i];

		if (!section || strcmp(section, s->section))
			fprintf(f, "\n# ---- %s ----\n", section = s->section);
		ls_setting_format(c, s, val, sizeof(val));
		fprintf(f, "# %s%s", s->help, s->flags & LS_SET_RELOAD ? " (reload)" : "");
		if (s->type == LS_SET_U32)
			fprintf(f, " [%u..%u]", s->min, s->max);
		fprintf(f, "\n%s = %s\n", s->key, val);
	}
}

static char *trim(char *s)
{
	char *e;

	while (isspace((unsigned char)*s))
		s++;
	e = s + strlen(s);
	while (e > s && isspace((unsigned char)e[-1]))
		*--e = 0;
	return s;
}

int ls_config_load(struct ls_config *c, const char *path, char *err, size_t len)
{
	struct ls_config tmp = *c;
	char line[512], msg[256];
	int lineno = 0, ret = 0;
	FILE *f = fopen(path, "re");

	if (!f) {
		snprintf(err, len, "%s: %s", path, strerror(errno));
		return -errno;
	}
	while (fgets(line, sizeof(line), f)) {
		char *hash = strchr(line, '#'), *eq, *key;

		lineno++;
		if (hash)
			*hash = 0;
		key = trim(line);
		if (!*key)
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			snprintf(err, len, "%s:%d: expected KEY = VALUE", path, lineno);
			ret = -EINVAL;
			break;
		}
		*eq = 0;
		if (ls_setting_apply(&tmp, trim(key), trim(eq + 1), msg, sizeof(msg))) {
			snprintf(err, len, "%s:%d: %s", path, lineno, msg);
			ret = -EINVAL;
			break;
		}
	}
	fclose(f);
	/* all or nothing: a bad file leaves the settings in force untouched */
	if (!ret)
		*c = tmp;
	return ret;
}

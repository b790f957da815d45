/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The engine: collector + symbols + stacks + aggregator + queries, behind the request
 * protocol. lockscoped serves it over a socket; `lockscope scan` without a daemon runs it
 * in-process. Single-threaded: the caller's loop polls engine__epoll_fd() and calls
 * engine__tick() on a timer.
 */
#ifndef __LS_ENGINE_H
#define __LS_ENGINE_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <cjson/cJSON.h>
#include "analyze/diagnose.h"
#include "analyze/spin.h"
#include "collect/collector.h"

#define LS_SCHEMA_VERSION 1
#define LS_VERSION "0.1.0"

struct engine;

/* What the kernel side hands the engine to decode. */
enum engine_input {
	ENGINE_IN_RECORD,	/* a ring record: struct ls_rec_hdr and its type's body */
	ENGINE_IN_WAIT,		/* a wait-table entry: struct ls_wait_key then struct ls_wait_val */
};

/* Room for a path setting: a Unix socket path's (sun_path). */
#define LS_OPT_PATH_MAX 108

struct engine_opts {
	struct collector_opts collector;
	uint32_t max_keys;		/* aggregation keys per time slot */
	uint32_t max_stacks;		/* distinct interned stacks */
	bool windows;			/* rolling windows (the daemon) or since-start only */
	const char *kallsyms;		/* NULL: /proc/kallsyms */
	uint32_t precise_pid;		/* time this process's futex calls from the syscalls */
	uint32_t expose_kernel_addrs;	/* 1: raw kernel addresses to every client */
	uint32_t metrics_max_series;	/* lock series given labels of their own in the metrics */
	bool push;			/* keep each push interval's waits (engine__push_profile) */
	struct spin_thresholds spin;	/* when spin figures become findings */
	struct diag_thresholds diag;	/* when lock figures become report findings */
	/* debug files fetched from $DEBUGINFOD_URLS go here; "": never fetched */
	char debuginfod_cache[LS_OPT_PATH_MAX];
	/*
	 * what is kept for the next query (the symbolizer's parsed files, a window view's
	 * cells, the rows' arrays) is given back after this long unused; 0: kept
	 */
	uint32_t cache_idle_s;
	/* sees what the kernel side hands over, before it is decoded (the fuzzers' seeds) */
	void (*tap)(void *ctx, enum engine_input kind, const void *data, size_t size);
	void *tap_ctx;
};

/* Sends a deferred response (a scan that finished) to @client; takes @resp. */
typedef void (*engine_reply_fn)(void *ctx, uint64_t client, cJSON *resp);

void engine_opts__init(struct engine_opts *o);
int engine__new(const struct engine_opts *opts, engine_reply_fn reply, void *reply_ctx,
		struct engine **out);
void engine__free(struct engine *e);
int engine__epoll_fd(const struct engine *e);
/* Drains the rings into the aggregator. */
int engine__consume(struct engine *e);
/*
 * Decodes @data as if the kernel side had handed it over, then settles what it parked the
 * way the end of a drain does. The fuzzers' entry point: any bytes are counted as bad
 * records or decoded, never trusted.
 */
void engine__feed(struct engine *e, enum engine_input kind, const void *data, size_t size);
/* Drains, rotates windows, finishes due scans; call every tick_ms. */
void engine__tick(struct engine *e);
/*
 * Handles one request from @client. Returns the response, or NULL when the response is
 * deferred (a scan: it comes later through the reply callback).
 */
struct ls_peer;
/* @peer: who asks over the socket; NULL in-process (the user who loaded the programs). */
cJSON *engine__handle(struct engine *e, uint64_t client, const struct ls_peer *peer, const cJSON *req);
/* The status response: what `lockscope status` and the metrics show. */
cJSON *engine__status(struct engine *e);
/*
 * The waits since the last call (or the start) as a gzip'd pprof profile for a fleet's
 * backend into @locks (waiters' stacks, labels unit, kind and type only), and the spin
 * samples of the same interval as a CPU profile into @spin (export__spin_pprof; empty,
 * len 0, when nothing spun); [*start, *end) in Unix ns. With opts.push only (-ENOENT
 * otherwise).
 */
struct export_buf;
int engine__push_profile(struct engine *e, struct export_buf *locks, struct export_buf *spin,
			 uint64_t *start_unix_ns, uint64_t *end_unix_ns);
/*
 * Kubernetes pods' names from now on (a fetched pod list, decode/pods.h; owned by @e).
 * engine__pods_wanted: whether a pod the list lacks was seen since the last call.
 */
struct pods;
void engine__set_pods(struct engine *e, struct pods *pods);
bool engine__pods_wanted(struct engine *e);
/*
 * A fetched PodList's JSON read into @out, @count pods named and @skipped items without
 * names (decode/pods.h: pure, any thread may call it); -EINVAL with @err when not a PodList.
 */
int engine__parse_pods(const char *json, size_t len, struct pods **out, size_t *count, size_t *skipped,
		       char *err, size_t err_len);
void engine__free_pods(struct pods *pods);
/* Adds the serving side's sections (clients, push) to every status response and the metrics. */
typedef void (*engine_status_fn)(void *ctx, cJSON *status);
void engine__set_status_extra(struct engine *e, engine_status_fn fn, void *ctx);
/* GET /metrics and the textfile: health and lock metrics as Prometheus text (malloc'd). */
char *engine__metrics(struct engine *e, size_t *len);
/* How many components are off although asked for (each logged, and in status). */
int engine__degraded(const struct engine *e);
/* Takes the settings that change without reattaching: thresholds, address exposure. */
void engine__reconfigure(struct engine *e, const struct engine_opts *opts);
/* The config in force as `status` shows it (takes @config). */
void engine__set_config(struct engine *e, cJSON *config);
void engine__client_gone(struct engine *e, uint64_t client);
/* Builds {"schema_version":..,"error":msg}. */
cJSON *engine__error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define ENGINE_TICK_MS 200
/* systemd's StateDirectory=lockscope, where the unit keeps what outlives a restart */
#define LS_DEF_DEBUGINFOD_CACHE "/var/lib/lockscope/debuginfod"
#define LS_DEF_CACHE_IDLE_S 10
/* lock series in the metrics: a busy host has a few hundred (kind, type, thread name, unit) */
#define LS_DEF_METRICS_MAX_SERIES 1000
#define ENGINE_CMDS "status, top, waits, scan, threads, spin, report, export, pause, resume"

#endif

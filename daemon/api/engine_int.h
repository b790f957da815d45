/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The engine's insides, shared by the api layer's files only: engine.c wires the stages
 * and dispatches requests; status.c answers `status`; scan.c runs scans of one process;
 * report.c answers top, threads, spin, report and export.
 */
#ifndef __LS_ENGINE_INT_H
#define __LS_ENGINE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "analyze/query.h"
#include "analyze/threads.h"
#include "api/engine.h"
#include "api/export.h"
#include "api/peer.h"
#include "lockscope.h"

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

/* A hook attached (or a sampler enabled) only while what it serves keeps happening. */
struct on_demand {
	uint64_t last;		/* the counter it follows, at the last tick */
	uint64_t busy_ns;	/* when that last grew fast enough; 0: never */
};

/* sched_waking part-time past waker-max-rate: a look every @period seconds. */
struct waker_duty {
	bool part_time;		/* past waker-max-rate; else full time (or off: on_demand) */
	uint32_t period;	/* seconds from one look to the next; 1 when full time */
	uint32_t off;		/* seconds since the last look began */
	uint64_t look_end_ns;	/* the look under way ends then; 0: none */
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

struct engine {
	struct engine_opts opts;
	cJSON *config;			/* the daemon's config in force, for status */
	int epfd;			/* the rings' epoll fd and the scanned processes' pidfds */
	struct collector *coll;
	struct ksyms *ksyms;
	struct stacks *stacks;
	struct agg *agg;
	struct scratch *scratch;	/* the queries' arrays, kept from one to the next */
	struct usyms *usyms;
	struct cgroups *cgroups;	/* each process's cgroup, unit, container and pod */
	struct prom_series *prom_series;	/* the lock series /metrics labels, for the daemon's life */
	struct agg *push_agg;		/* opts.push: the waits since the last push, no windows */
	uint64_t push_start_unix_ns;	/* when push_agg began */
	uint64_t push_spin_dropped;	/* spin samples an interval had no room for */
	engine_status_fn status_extra;	/* the serving side's status sections */
	void *status_extra_ctx;
	struct unwind *unwind;
	struct dumps *dumps;
	struct threads *threads;
	struct spin *spin;
	struct sched_source sched;	/* the collector, as threads and spin read it */
	struct decoder *dec;
	struct on_demand holders;	/* the holder sampler, by LS_CNT_HOLDERS */
	struct on_demand releasers;	/* sched_waking, by futex_waits */
	struct waker_duty waker;	/* ...and its duty past waker-max-rate */
	struct scan *scans;
	struct {
		uint64_t since_ns;	/* when tracing was paused; 0: it runs */
		uint64_t count, total_ns;
		uint64_t in_flight;	/* kernel-lock waits open at a pause, dropped at its resume */
	} pause;
	engine_reply_fn reply;
	void *reply_ctx;
	uint64_t start_ns;
	uint64_t bad_records;		/* fed wait entries of the wrong size */
	/* per-second snapshots of what status shows as rates, over the last RATE_SECONDS */
	uint64_t rate_v[RATE_SECONDS + 1][RATE_MAX];
	uint64_t rate_ns[RATE_SECONDS + 1];
	int rate_head, rate_filled;
	uint64_t records;		/* ring records consumed */
	uint64_t last_rate_ns;
	uint64_t last_gc_ns;
	uint64_t stale_slots;		/* open waits of exited threads, swept */
	uint64_t switches_at_start;		/* host context switches when the programs attached */
};

/* engine.c */
cJSON *engine_response(const char *cmd);
cJSON *engine_window_json(const char *name, uint64_t start, uint64_t end);
/* An answer covers every wait up to now: the rings' records and the tables' entries. */
void engine_catch_up(struct engine *e);
/* Brings the aggregator up to date with the wait tables: every wait ended by now is in it. */
void engine_drain_waits(struct engine *e);
bool engine_kernel_addrs_allowed(const struct engine *e, const struct ls_peer *peer);
/* query__init(), with the engine's cgroups table for -G and --by unit|cgroup|pod */
void engine_query_init(const struct engine *e, struct query *q);
struct query_ctx engine_query_ctx(const struct engine *e, bool kernel_addrs);

/* status.c */
cJSON *status_dropped_json(struct engine *e, const uint64_t *base);
void status_sample_rate(struct engine *e, uint64_t now, const uint64_t *cnt);
/* status.c: whether tracing is paused, and what pauses took (status and pause/resume) */
cJSON *status_pause_json(const struct engine *e, uint64_t now);

/* scan.c: `scan` starts one (NULL: the answer comes when it ends); ticks end them */
cJSON *scan_start(struct engine *e, uint64_t client, const struct ls_peer *peer, const cJSON *req,
		  struct query *q, const struct export_req *x);
/* Marks the scans whose process exited (their pidfds in the epoll set); true if any did. */
bool scans_exited(struct engine *e);
/* Scans that ended (deadline or exit) are answered, with every wait up to now. */
void scans_finish(struct engine *e, uint64_t now);
void scan_free(struct engine *e, struct scan *s);
/* When process @pid started (clock ticks since boot); 0: gone, or a zombie. */
uint64_t proc_start_ticks(uint32_t pid);
/* Whether @ev is a wait of @s's process (its pid may name another one by now). */
bool scan_takes(struct scan *s, const struct agg_event *ev);

/* report.c */
cJSON *report_rows_response(struct engine *e, const char *cmd, struct agg *agg, const struct query *q,
			    uint64_t now, const uint64_t *counters0, bool kernel_addrs);
cJSON *report_export_response(struct engine *e, const char *cmd, struct agg *agg, const struct query *q,
			      const struct export_req *x, uint64_t now, const uint64_t *counters0,
			      bool kernel_addrs);
int report_parse_export_req(const cJSON *req, bool need_format, struct export_req *x, char *err, size_t len);
int report_prometheus_text(struct engine *e, struct agg *agg, const struct query *q, bool health,
			   struct export_buf *out);
cJSON *report_threads(struct engine *e, const cJSON *req);
cJSON *report_spin(struct engine *e, const struct ls_peer *peer, const cJSON *req);

#endif

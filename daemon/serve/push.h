/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Continuous profiles pushed to a fleet's backends: every push-interval the event loop
 * hands over the interval's profile (push__submit, which never blocks), and one thread per
 * backend sends it with libcurl: Parca (POST /api/profiles/writeraw, the profile base64 in
 * JSON) and Pyroscope (POST /ingest?format=pprof, the profile as the body). A backend that
 * is down never slows the loop: each has a bounded queue (the oldest profile goes when it
 * is full), retries with exponential backoff, and every profile it could not deliver is
 * counted by why.
 */
#ifndef __LS_PUSH_H
#define __LS_PUSH_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>

enum push_sink { PUSH_PARCA, PUSH_PYROSCOPE, PUSH_SINKS };

/* Room for a URL or a file path setting */
#define PUSH_STR_MAX 108

struct push_opts {
	const char *url[PUSH_SINKS];	/* base URL ("http://parca:7070"); "" or NULL: off */
	uint32_t queue;			/* profiles waiting per backend */
	uint32_t timeout_s;		/* one request, connection included */
	const char *bearer_token_file;	/* "Authorization: Bearer" from this file; "": none */
	const char *basic_auth_file;	/* "user:password" from this file; "": none */
	const char *ca_file;		/* the CA bundle that signs the backends' certificates; "": the system's */
	const char *host;		/* the host label; "" or NULL: the host name */
	const char *app;		/* Pyroscope's application name (and Parca's __name__ prefix) */
};

/* What became of the profiles handed to one backend. */
struct push_stats {
	uint64_t sent;			/* delivered (2xx) */
	uint64_t attempts_failed;	/* requests that failed and were retried */
	uint64_t dropped_queue_full;	/* the oldest waiting when a new one came to a full queue */
	uint64_t dropped_rejected;	/* answered 4xx (but 429): sending it again would not help */
	uint64_t dropped_retries;	/* failed PUSH_MAX_ATTEMPTS times */
	uint32_t queued;
	char last_error[160];		/* "" after a success */
};

struct push;

/* Checks the options, reads the credential files and starts a thread per backend. */
int push__new(const struct push_opts *opts, struct push **out, char *err, size_t err_len);
/* Stops the threads (a request in flight is aborted) and frees what is queued. */
void push__free(struct push *p);
/*
 * Queues a gzip'd pprof profile covering [start, end) (Unix ns) for every backend; copies
 * @data. Never blocks on the network.
 */
int push__submit(struct push *p, const void *data, size_t len, uint64_t start_unix_ns, uint64_t end_unix_ns);
void push__stats(struct push *p, enum push_sink s, struct push_stats *st);
/* Whether backend @s is configured. */
int push__enabled(const struct push *p, enum push_sink s);
const char *push_sink_name(enum push_sink s);
/* The "push" object of `status`: each configured backend's counters. */
cJSON *push__json(struct push *p);

#endif

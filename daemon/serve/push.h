/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Continuous profiles pushed to a fleet's backends: every push-interval the event loop
 * hands over the interval's profile (push__submit, which never blocks), and one thread per
 * backend sends it (serve/http.h): Parca (its WriteRaw call as gRPC-web, the profile
 * inside) and Pyroscope (POST /ingest?format=pprof, the profile as the body). A backend that
 * is down never slows the loop: each has a bounded queue (the oldest profile goes when it
 * is full), retries with exponential backoff, and every profile it could not deliver is
 * counted by why.
 */
#ifndef __LS_PUSH_H
#define __LS_PUSH_H

#include <stddef.h>
#include <stdint.h>
#include <cjson/cJSON.h>
#include "serve/http.h"

enum push_sink { PUSH_PARCA, PUSH_PYROSCOPE, PUSH_SINKS };

/* Room for a URL or a file path setting */
#define PUSH_STR_MAX HTTP_STR_MAX

struct push_opts {
	const char *url[PUSH_SINKS];	/* base http[s] URL ("http://parca:7070", checked by the config); "" or NULL: off */
	uint32_t queue;			/* profiles waiting per backend */
	uint32_t timeout_s;		/* one request, connection included */
	const char *bearer_token_file;	/* "Authorization: Bearer" from this file; "": none */
	const char *basic_auth_file;	/* "user:password" from this file; "": none */
	const char *ca_file;		/* the CA bundle that signs the backends' certificates; "": the system's */
	const char *host;		/* the host label; "" or NULL: the host name */
	const char *app;		/* Pyroscope's application name (and Parca's __name__) */
};

struct push;

/* Checks the options, reads the credential files and starts a thread per backend. */
int push__new(const struct push_opts *opts, struct push **out, char *err, size_t err_len);
/* Stops the threads (a request in flight is aborted) and frees what is queued. */
void push__free(struct push *p);
/* What a pushed profile is: its name at the backend is push-app, or push-app + "_spin". */
enum push_profile { PUSH_LOCKS, PUSH_SPIN };
/*
 * Queues a gzip'd pprof profile of kind @kind covering [start, end) (Unix ns) for every
 * backend; copies @data. Never blocks on the network.
 */
int push__submit(struct push *p, enum push_profile kind, const void *data, size_t len, uint64_t start_unix_ns,
		 uint64_t end_unix_ns);
/* The "push" object of `status`: each configured backend's counters (sent, queued, failed
 * attempts, dropped by reason, the last error). */
cJSON *push__json(struct push *p);

#endif

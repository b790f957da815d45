// SPDX-License-Identifier: GPL-2.0
/*
 * The push threads: one per backend, each with its queue, its libcurl handle and its
 * backoff. The event loop only ever takes a queue's mutex for a list operation.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include "api/engine.h"
#include "api/export.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "serve/http.h"
#include "serve/push.h"
#include "parca.pb-c.h"

/* a profile is sent at most this many times, PUSH_BACKOFF_MIN_MS apart and doubling */
#define PUSH_MAX_ATTEMPTS 5
#define PUSH_BACKOFF_MIN_MS 1000
#define PUSH_BACKOFF_MAX_MS 60000
/* a backend's answer kept for the error message */
#define PUSH_ANSWER_MAX 120

/* What became of the profiles handed to one backend. */
struct push_stats {
	uint64_t sent;			/* delivered (2xx) */
	uint64_t attempts_failed;	/* requests that failed and were retried */
	uint64_t dropped_queue_full;	/* the oldest waiting when a new one came to a full queue */
	uint64_t dropped_rejected;	/* answered 4xx (but 429): sending it again would not help */
	uint64_t dropped_retries;	/* failed PUSH_MAX_ATTEMPTS times */
	uint32_t queued;
	uint64_t done_through_unix_ns;	/* every interval ending by then: sent or dropped */
	char last_error[160];		/* "" after a success */
};

struct item {
	struct item *next;
	void *data;
	size_t len;
	enum push_profile kind;
	void *body;		/* Parca's request around it, made at the first try and kept for the next */
	size_t body_len;
	uint64_t start_unix_ns, end_unix_ns;
	uint32_t attempts;
};

struct sink {
	enum push_sink kind;
	struct push *p;
	char url[PUSH_STR_MAX];
	pthread_t thread;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct item *head, *tail;	/* the oldest first */
	struct push_stats st;
};

struct push {
	uint32_t queue;
	struct http_conn conn;		/* timeout, credentials, CA: the same for both backends */
	char host[128], app[64];
	bool stop;			/* under every sink's mutex; read unlocked by curl's progress check */
	struct sink sinks[PUSH_SINKS];
};

static const char *const sink_names[PUSH_SINKS] = { "parca", "pyroscope" };
/* appended to push-app: each kind of profile is a profile type (Parca), an application (Pyroscope) */
static const char *const profile_suffix[] = { [PUSH_LOCKS] = "", [PUSH_SPIN] = "_spin" };

static void item_free(struct item *it)
{
	if (it) {
		free(it->data);
		free(it->body);
		free(it);
	}
}

static bool stopping(const struct push *p)
{
	return __atomic_load_n(&p->stop, __ATOMIC_RELAXED);
}

/* ---- one request ---- */

/* What a backend answered: its body's start for the message, and a gRPC status */
struct answer {
	struct http_answer http;
	long grpc_status;		/* -1: none seen */
	char grpc_message[PUSH_ANSWER_MAX];
};

/* Pyroscope's label values: letters, digits, '.', '-' and '_' (anything else '_'). */
static void label_safe(char *out, size_t len, const char *in)
{
	size_t i;

	for (i = 0; in[i] && i + 1 < len; i++) {
		char c = in[i];

		out[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
			 c == '.' || c == '-' || c == '_' ? c : '_';
	}
	out[i] = 0;
}

enum send_result { SENT, RETRY, REJECTED };

/*
 * Parca: ProfileStoreService.WriteRaw as gRPC-web (HTTP/1.1, so any proxy in between
 * passes it, and what Parca's own UI speaks): one series labelled by app and host, the
 * profile inside as it is. A gRPC-web body is frames of a flag byte, a big-endian length
 * and a message; the request is one data frame.
 */
#define GRPC_FRAME_HEADER 5
#define GRPC_FRAME_TRAILERS 0x80
#define PARCA_WRITE_RAW "/parca.profilestore.v1alpha1.ProfileStoreService/WriteRaw"

static int parca_body(const struct push *p, struct item *it)
{
	Parca__Profilestore__V1alpha1__Label name = PARCA__PROFILESTORE__V1ALPHA1__LABEL__INIT;
	Parca__Profilestore__V1alpha1__Label host = PARCA__PROFILESTORE__V1ALPHA1__LABEL__INIT;
	Parca__Profilestore__V1alpha1__Label *labels[] = { &name, &host };
	Parca__Profilestore__V1alpha1__LabelSet set = PARCA__PROFILESTORE__V1ALPHA1__LABEL_SET__INIT;
	Parca__Profilestore__V1alpha1__RawSample sample = PARCA__PROFILESTORE__V1ALPHA1__RAW_SAMPLE__INIT;
	Parca__Profilestore__V1alpha1__RawSample *samples[] = { &sample };
	Parca__Profilestore__V1alpha1__RawProfileSeries series = PARCA__PROFILESTORE__V1ALPHA1__RAW_PROFILE_SERIES__INIT;
	Parca__Profilestore__V1alpha1__RawProfileSeries *all[] = { &series };
	Parca__Profilestore__V1alpha1__WriteRawRequest req = PARCA__PROFILESTORE__V1ALPHA1__WRITE_RAW_REQUEST__INIT;
	char app[sizeof(p->app) + 8];
	size_t len;
	uint8_t *body;

	/* Parca names the profile type after __name__ and makes series of the other labels */
	snprintf(app, sizeof(app), "%s%s", p->app, profile_suffix[it->kind]);
	name.name = "__name__";
	name.value = app;
	host.name = "host";
	host.value = (char *)p->host;
	set.n_labels = sizeof(labels) / sizeof(labels[0]);
	set.labels = labels;
	sample.raw_profile.data = it->data;
	sample.raw_profile.len = it->len;
	series.labels = &set;
	series.n_samples = 1;
	series.samples = samples;
	req.n_series = 1;
	req.series = all;
	/* our frames are symbolized and our addresses file offsets already */
	req.normalized = true;
	len = parca__profilestore__v1alpha1__write_raw_request__get_packed_size(&req);
	if (len > UINT32_MAX || !(body = malloc(GRPC_FRAME_HEADER + len)))
		return -ENOMEM;
	body[0] = 0;	/* a data frame, uncompressed (the profile inside is gzip'd already) */
	body[1] = len >> 24;
	body[2] = len >> 16;
	body[3] = len >> 8;
	body[4] = len;
	parca__profilestore__v1alpha1__write_raw_request__pack(&req, body + GRPC_FRAME_HEADER);
	it->body = body;
	it->body_len = GRPC_FRAME_HEADER + len;
	return 0;
}

/*
 * gRPC's status codes a retry may cure (the server busy, down, or out of time); the
 * others (invalid argument, unauthenticated, unimplemented...) would fail again.
 */
static bool grpc_retryable(long status)
{
	enum { CANCELLED = 1, UNKNOWN = 2, DEADLINE_EXCEEDED = 4, RESOURCE_EXHAUSTED = 8,
	       ABORTED = 10, INTERNAL = 13, UNAVAILABLE = 14 };

	return status == CANCELLED || status == UNKNOWN || status == DEADLINE_EXCEEDED ||
	       status == RESOURCE_EXHAUSTED || status == ABORTED || status == INTERNAL ||
	       status == UNAVAILABLE;
}

/* One "grpc-status: N" or "grpc-message: M" line (a header or a trailer) into @a. */
static void grpc_field(struct answer *a, const char *line, size_t n)
{
	static const char status[] = "grpc-status:", message[] = "grpc-message:";

	if (n > sizeof(status) - 1 && !strncasecmp(line, status, sizeof(status) - 1)) {
		a->grpc_status = strtol(line + sizeof(status) - 1, NULL, 10);
	} else if (n > sizeof(message) - 1 && !strncasecmp(line, message, sizeof(message) - 1)) {
		line += sizeof(message) - 1;
		n -= sizeof(message) - 1;
		while (n && *line == ' ')
			line++, n--;
		while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			n--;
		snprintf(a->grpc_message, sizeof(a->grpc_message), "%.*s", (int)n, line);
	}
}

/* each header line: a trailers-only gRPC answer has its status among the headers */
static void keep_grpc_header(void *arg, const char *line, size_t len)
{
	grpc_field(arg, line, len);
}

/* The status in the trailer frame of a gRPC-web body (of its first PUSH_ANSWER_MAX bytes). */
static void grpc_trailers(struct answer *a)
{
	const char *text = a->http.body;
	size_t i = 0, len = a->http.len;

	while (i + GRPC_FRAME_HEADER <= len) {
		const uint8_t *f = (const uint8_t *)text + i;
		size_t n = (size_t)f[1] << 24 | f[2] << 16 | f[3] << 8 | f[4], j;

		i += GRPC_FRAME_HEADER;
		/*
		 * Only the answer's first PUSH_ANSWER_MAX bytes are kept: a long grpc-message
		 * cuts the trailer frame, whose grpc-status line comes first
		 */
		if (n > len - i)
			n = len - i;
		/* "name: value\r\n" lines */
		for (j = i; (f[0] & GRPC_FRAME_TRAILERS) && j < i + n;) {
			const char *eol = memchr(text + j, '\n', i + n - j);
			size_t line = eol ? (size_t)(eol - (text + j)) + 1 : i + n - j;

			grpc_field(a, text + j, line);
			j += line;
		}
		i += n;
	}
}

/* A gRPC call answered HTTP 200: what its status says (none at all is no gRPC server). */
static enum send_result grpc_result(struct answer *a, char *err, size_t err_len)
{
	grpc_trailers(a);
	if (a->grpc_status == 0)
		return SENT;
	if (a->grpc_status < 0) {
		snprintf(err, err_len, "no gRPC status in the answer: is this Parca's address?");
		return REJECTED;
	}
	snprintf(err, err_len, "gRPC status %ld: %s", a->grpc_status, a->grpc_message);
	return grpc_retryable(a->grpc_status) ? RETRY : REJECTED;
}

static enum send_result send_one(struct sink *s, struct http_client *c, struct item *it, char *err,
				 size_t err_len)
{
	static const char *const parca_headers[] = { "Content-Type: application/grpc-web+proto", "X-Grpc-Web: 1", NULL };
	static const char *const pyroscope_headers[] = { "Content-Type: application/octet-stream", NULL };
	const struct push *p = s->p;
	struct answer answer = { .http.keep = PUSH_ANSWER_MAX, .grpc_status = -1 };
	struct http_req req = {};
	enum send_result res;
	char url[1024];

	if (s->kind == PUSH_PARCA) {
		snprintf(url, sizeof(url), "%s" PARCA_WRITE_RAW, s->url);
		if (!it->body && parca_body(p, it)) {
			snprintf(err, err_len, "out of memory");
			return RETRY;
		}
		req.headers = parca_headers;
		req.body = it->body;
		req.body_len = it->body_len;
		req.on_header = keep_grpc_header;
		req.header_arg = &answer;
	} else {
		/* name=APP{host=H}, the interval in Unix seconds; the sample types name the series */
		char host[128], name[256], enc[3 * sizeof(name)];

		label_safe(host, sizeof(host), p->host);
		snprintf(name, sizeof(name), "%s%s{host=%s}", p->app, profile_suffix[it->kind], host);
		http__escape(enc, sizeof(enc), name);
		snprintf(url, sizeof(url), "%s/ingest?name=%s&from=%llu&until=%llu&format=pprof&spyName=lockscope",
			 s->url, enc, (unsigned long long)(it->start_unix_ns / NSEC_PER_SEC),
			 (unsigned long long)(it->end_unix_ns / NSEC_PER_SEC));
		req.headers = pyroscope_headers;
		req.body = it->data;
		req.body_len = it->len;
	}
	req.url = url;
	if (http__perform(c, &p->conn, &req, &answer.http, err, err_len)) {
		res = RETRY;
	} else if (answer.http.code < 200 || answer.http.code >= 300) {
		const char *text = answer.http.body ? answer.http.body : "";

		/* too many requests and server errors pass; other refusals would repeat */
		res = answer.http.code == 429 || answer.http.code >= 500 ? RETRY : REJECTED;
		snprintf(err, err_len, "HTTP %ld: %.*s", answer.http.code, (int)strcspn(text, "\r\n"), text);
	} else {
		res = s->kind == PUSH_PARCA ? grpc_result(&answer, err, err_len) : SENT;
	}
	http__answer_free(&answer.http);
	return res;
}

/* ---- the queues ---- */

/* With @s->mu held: @it's fate is counted; the queue is oldest first, so the intervals
 * up to its end are all settled. */
static void settle(struct sink *s, struct item *it)
{
	if (it->end_unix_ns > s->st.done_through_unix_ns)
		s->st.done_through_unix_ns = it->end_unix_ns;
	item_free(it);
}

/* With @s->mu held: @it at the tail (or, retried, at the head); a full queue loses its oldest. */
static void enqueue(struct sink *s, struct item *it, bool front)
{
	if (front) {
		it->next = s->head;
		s->head = it;
		if (!s->tail)
			s->tail = it;
	} else {
		it->next = NULL;
		if (s->tail)
			s->tail->next = it;
		else
			s->head = it;
		s->tail = it;
	}
	if (++s->st.queued > s->p->queue) {
		struct item *old = s->head;

		s->head = old->next;
		if (!s->head)
			s->tail = NULL;
		s->st.queued--;
		s->st.dropped_queue_full++;
		settle(s, old);
	}
}

static struct item *dequeue(struct sink *s)
{
	struct item *it = s->head;

	if (it) {
		s->head = it->next;
		if (!s->head)
			s->tail = NULL;
		s->st.queued--;
	}
	return it;
}

static void *sink_main(void *arg)
{
	struct sink *s = arg;
	struct push *p = s->p;
	uint64_t backoff_ms = 0;
	struct http_client *c = http__client_new();
	char err[sizeof(s->st.last_error)];

	pthread_mutex_lock(&s->mu);
	while (!stopping(p)) {
		struct item *it;
		enum send_result res;

		if (!(it = dequeue(s))) {
			pthread_cond_wait(&s->cv, &s->mu);
			continue;
		}
		pthread_mutex_unlock(&s->mu);
		res = send_one(s, c, it, err, sizeof(err));
		pthread_mutex_lock(&s->mu);
		if (res == SENT) {
			s->st.sent++;
			s->st.last_error[0] = 0;
			backoff_ms = 0;
			settle(s, it);
			continue;
		}
		snprintf(s->st.last_error, sizeof(s->st.last_error), "%s", err);
		if (res == REJECTED) {
			s->st.dropped_rejected++;
			settle(s, it);
			continue;
		}
		s->st.attempts_failed++;
		if (++it->attempts >= PUSH_MAX_ATTEMPTS) {
			s->st.dropped_retries++;
			settle(s, it);
		} else {
			enqueue(s, it, true);
		}
		/* wait before the next try; new profiles queue meanwhile, a stop ends it */
		backoff_ms = backoff_ms ? backoff_ms * 2 : PUSH_BACKOFF_MIN_MS;
		if (backoff_ms > PUSH_BACKOFF_MAX_MS)
			backoff_ms = PUSH_BACKOFF_MAX_MS;
		{
			struct timespec until;
			uint64_t t;

			clock_gettime(CLOCK_MONOTONIC, &until);
			t = until.tv_sec * NSEC_PER_SEC + until.tv_nsec + backoff_ms * NSEC_PER_MSEC;
			until.tv_sec = t / NSEC_PER_SEC;
			until.tv_nsec = t % NSEC_PER_SEC;
			while (!stopping(p) && pthread_cond_timedwait(&s->cv, &s->mu, &until) != ETIMEDOUT)
				;
		}
	}
	pthread_mutex_unlock(&s->mu);
	http__client_free(c);
	return NULL;
}

/* ---- the object ---- */

int push__new(const struct push_opts *opts, struct push **out, char *err, size_t err_len)
{
	struct push *p = calloc(1, sizeof(*p));
	char secret[384];
	pthread_condattr_t ca;
	int i, ret;

	if (!p)
		return -ENOMEM;
	p->queue = opts->queue;
	p->conn.timeout_s = opts->timeout_s;
	p->conn.stop = &p->stop;
	snprintf(p->app, sizeof(p->app), "%s", opts->app && *opts->app ? opts->app : "lockscope");
	if (opts->host && *opts->host)
		snprintf(p->host, sizeof(p->host), "%s", opts->host);
	else if (gethostname(p->host, sizeof(p->host) - 1))
		snprintf(p->host, sizeof(p->host), "unknown");
	if (opts->ca_file)
		snprintf(p->conn.ca_file, sizeof(p->conn.ca_file), "%s", opts->ca_file);
	if (opts->bearer_token_file && *opts->bearer_token_file) {
		if ((ret = http__read_secret(opts->bearer_token_file, secret, sizeof(secret)))) {
			snprintf(err, err_len, "push-bearer-token-file %s: %s (one line: the token)",
				 opts->bearer_token_file, strerror(-ret));
			goto fail;
		}
		snprintf(p->conn.auth_header, sizeof(p->conn.auth_header), "Authorization: Bearer %s", secret);
	}
	if (opts->basic_auth_file && *opts->basic_auth_file) {
		if ((ret = http__read_secret(opts->basic_auth_file, secret, sizeof(secret))) || !strchr(secret, ':')) {
			snprintf(err, err_len, "push-basic-auth-file %s: %s (one line: user:password)",
				 opts->basic_auth_file, ret ? strerror(-ret) : "no ':'");
			ret = ret ? ret : -EINVAL;
			goto fail;
		}
		snprintf(p->conn.userpwd, sizeof(p->conn.userpwd), "%s", secret);
	}
	explicit_bzero(secret, sizeof(secret));
	if ((ret = http__init(err, err_len)))
		goto fail;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	for (i = 0; i < PUSH_SINKS; i++) {
		struct sink *s = &p->sinks[i];
		size_t n;

		s->kind = i;
		s->p = p;
		pthread_mutex_init(&s->mu, NULL);
		pthread_cond_init(&s->cv, &ca);
		if (!opts->url[i] || !*opts->url[i])
			continue;
		snprintf(s->url, sizeof(s->url), "%s", opts->url[i]);
		n = strlen(s->url);
		while (n && s->url[n - 1] == '/')	/* the paths are appended */
			s->url[--n] = 0;
		if ((ret = -pthread_create(&s->thread, NULL, sink_main, s))) {
			snprintf(err, err_len, "cannot start the %s push thread: %s", sink_names[i], strerror(-ret));
			pthread_condattr_destroy(&ca);
			goto fail;
		}
		s->started = true;
	}
	pthread_condattr_destroy(&ca);
	*out = p;
	return 0;
fail:
	explicit_bzero(secret, sizeof(secret));
	push__free(p);
	return ret;
}

void push__free(struct push *p)
{
	int i;

	if (!p)
		return;
	for (i = 0; i < PUSH_SINKS; i++) {
		pthread_mutex_lock(&p->sinks[i].mu);
		__atomic_store_n(&p->stop, true, __ATOMIC_RELAXED);
		pthread_cond_broadcast(&p->sinks[i].cv);
		pthread_mutex_unlock(&p->sinks[i].mu);
	}
	for (i = 0; i < PUSH_SINKS; i++) {
		struct sink *s = &p->sinks[i];
		struct item *it;

		if (s->started)
			pthread_join(s->thread, NULL);
		while ((it = dequeue(s)))
			item_free(it);
		pthread_mutex_destroy(&s->mu);
		pthread_cond_destroy(&s->cv);
	}
	explicit_bzero(&p->conn, sizeof(p->conn));
	free(p);
}

int push__submit(struct push *p, enum push_profile kind, const void *data, size_t len, uint64_t start_unix_ns,
		 uint64_t end_unix_ns)
{
	int i, err = 0;

	for (i = 0; i < PUSH_SINKS; i++) {
		struct sink *s = &p->sinks[i];
		struct item *it;

		if (!s->started)
			continue;
		it = calloc(1, sizeof(*it));
		if (!it || !(it->data = malloc(len ? len : 1))) {
			free(it);
			pthread_mutex_lock(&s->mu);
			s->st.dropped_queue_full++;	/* no room for it, as a full queue */
			pthread_mutex_unlock(&s->mu);
			err = -ENOMEM;
			continue;
		}
		memcpy(it->data, data, len);
		it->len = len;
		it->kind = kind;
		it->start_unix_ns = start_unix_ns;
		it->end_unix_ns = end_unix_ns;
		pthread_mutex_lock(&s->mu);
		enqueue(s, it, false);
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->mu);
	}
	return err;
}

static void push__stats(struct push *p, enum push_sink s, struct push_stats *st)
{
	pthread_mutex_lock(&p->sinks[s].mu);
	*st = p->sinks[s].st;
	pthread_mutex_unlock(&p->sinks[s].mu);
}

cJSON *push__json(struct push *p)
{
	cJSON *o = cJSON_CreateObject();
	int i;

	for (i = 0; p && i < PUSH_SINKS; i++) {
		struct push_stats st;
		cJSON *s;

		if (!p->sinks[i].started)
			continue;
		push__stats(p, i, &st);
		s = cJSON_AddObjectToObject(o, sink_names[i]);
		cJSON_AddStringToObject(s, "url", p->sinks[i].url);
		cJSON_AddNumberToObject(s, "sent", st.sent);
		cJSON_AddNumberToObject(s, "queued", st.queued);
		cJSON_AddNumberToObject(s, "attempts_failed", st.attempts_failed);
		cJSON_AddNumberToObject(s, "dropped_queue_full", st.dropped_queue_full);
		cJSON_AddNumberToObject(s, "dropped_rejected", st.dropped_rejected);
		cJSON_AddNumberToObject(s, "dropped_retries", st.dropped_retries);
		cJSON_AddNumberToObject(s, "done_through_unix_ns", st.done_through_unix_ns);
		if (st.last_error[0])
			cJSON_AddStringToObject(s, "last_error", st.last_error);
		else
			cJSON_AddNullToObject(s, "last_error");
	}
	return o;
}

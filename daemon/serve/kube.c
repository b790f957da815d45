// SPDX-License-Identifier: GPL-2.0
/* The pod list's fetching thread (kube.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "api/engine.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "serve/http.h"
#include "serve/kube.h"

/* a pod that starts makes the list fetched again, but not more often than this */
#define KUBE_MIN_REFETCH_S 5
/* a node's name: a DNS subdomain, as Kubernetes limits it */
#define KUBE_NODE_NAME_MAX 253
/* a node's pod list is some kB per pod and a node runs at most a few hundred */
#define KUBE_ANSWER_MAX (64u << 20)

struct kube_stats {
	uint64_t fetches;		/* lists fetched and read */
	uint64_t failed;		/* fetches that failed: unreachable, refused, not a pod list */
	uint64_t skipped_items;		/* items of the last list without a UID, name or namespace */
	uint64_t pods;			/* named by the last list */
	uint64_t last_ok_ns;		/* when the last list came; 0: none yet */
	char last_error[200];		/* "" after a success */
};

struct kube {
	char url[1024];
	char token_file[HTTP_STR_MAX];
	uint32_t interval_s;
	struct http_conn conn;
	pthread_t thread;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, kick;		/* under mu; stop also read by curl's progress check */
	struct pods *fresh;		/* fetched, not taken yet */
	struct kube_stats st;
};

/* One fetch: the list into @out; -errno with @err saying why (and what to do). */
static int fetch(struct kube *k, struct http_client *c, struct pods **out, size_t *count, size_t *skipped, char *err,
		 size_t err_len)
{
	static const char *const headers[] = { "Accept: application/json", NULL };
	struct http_answer a = { .keep = KUBE_ANSWER_MAX };
	struct http_req req = { .url = k->url, .headers = headers };
	char token[4096];
	int ret;

	/* projected service account tokens are rotated: read at every fetch */
	k->conn.auth_header[0] = 0;
	if (k->token_file[0]) {
		if ((ret = http__read_secret(k->token_file, token, sizeof(token)))) {
			snprintf(err, err_len, "kube-token-file %s: %s (mount the service account token there)", k->token_file,
				 strerror(-ret));
			return ret;
		}
		if (strlen(token) + sizeof("Authorization: Bearer ") > sizeof(k->conn.auth_header)) {
			snprintf(err, err_len, "kube-token-file %s: the token is over %zu bytes", k->token_file,
				 sizeof(k->conn.auth_header) - sizeof("Authorization: Bearer "));
			explicit_bzero(token, sizeof(token));
			return -E2BIG;
		}
		snprintf(k->conn.auth_header, sizeof(k->conn.auth_header), "Authorization: Bearer %s", token);
		explicit_bzero(token, sizeof(token));
	}
	if ((ret = http__perform(c, &k->conn, &req, &a, err, err_len)))
		goto out;
	if (a.code == 401 || a.code == 403) {
		snprintf(err, err_len, "HTTP %ld: the token may not list pods (give the service account get and list on "
			 "pods, or get on nodes/proxy for the kubelet)", a.code);
		ret = -EACCES;
	} else if (a.code != 200) {
		snprintf(err, err_len, "HTTP %ld: %.*s", a.code, a.body ? (int)strcspn(a.body, "\r\n") : 0,
			 a.body ? a.body : "");
		ret = -EIO;
	} else if (a.cut) {
		snprintf(err, err_len, "the pod list is over %u MiB: is the node selector set (kube-node)?",
			 KUBE_ANSWER_MAX >> 20);
		ret = -E2BIG;
	} else {
		ret = engine__parse_pods(a.body ? a.body : "", a.len, out, count, skipped, err, err_len);
	}
out:
	explicit_bzero(k->conn.auth_header, sizeof(k->conn.auth_header));
	http__answer_free(&a);
	return ret;
}

static bool stopping(const struct kube *k)
{
	return __atomic_load_n(&k->stop, __ATOMIC_RELAXED);
}

static void *kube_main(void *arg)
{
	struct kube *k = arg;
	struct http_client *c = http__client_new();
	char err[sizeof(k->st.last_error)];

	pthread_mutex_lock(&k->mu);
	while (!stopping(k)) {
		struct pods *pods = NULL;
		struct timespec until;
		size_t count = 0, skipped = 0;
		uint64_t t;
		int ret;

		k->kick = false;
		pthread_mutex_unlock(&k->mu);
		ret = fetch(k, c, &pods, &count, &skipped, err, sizeof(err));
		pthread_mutex_lock(&k->mu);
		if (ret) {
			if (!stopping(k)) {
				k->st.failed++;
				if (strcmp(k->st.last_error, err))
					pr_warn("kubernetes: cannot read the pod list from %s: %s\n", k->url, err);
				snprintf(k->st.last_error, sizeof(k->st.last_error), "%s", err);
			}
		} else {
			if (k->st.last_error[0])
				pr_info("kubernetes: the pod list is read again from %s\n", k->url);
			k->st.fetches++;
			k->st.pods = count;
			k->st.skipped_items = skipped;
			k->st.last_ok_ns = ls_now_ns();
			k->st.last_error[0] = 0;
			engine__free_pods(k->fresh);
			k->fresh = pods;
		}
		/* the interval, or a kick past the minimum, or the stop */
		clock_gettime(CLOCK_MONOTONIC, &until);
		t = until.tv_sec * NSEC_PER_SEC + until.tv_nsec;
		{
			uint64_t soon = t + KUBE_MIN_REFETCH_S * NSEC_PER_SEC, late = t + k->interval_s * NSEC_PER_SEC;
			struct timespec ts = { .tv_sec = soon / NSEC_PER_SEC, .tv_nsec = soon % NSEC_PER_SEC };

			/* first the minimum gap: kicks only accumulate */
			while (!stopping(k) && pthread_cond_timedwait(&k->cv, &k->mu, &ts) != ETIMEDOUT)
				;
			ts = (struct timespec){ .tv_sec = late / NSEC_PER_SEC, .tv_nsec = late % NSEC_PER_SEC };
			while (!stopping(k) && !k->kick && late > soon &&
			       pthread_cond_timedwait(&k->cv, &k->mu, &ts) != ETIMEDOUT)
				;
		}
	}
	pthread_mutex_unlock(&k->mu);
	http__client_free(c);
	return NULL;
}

int kube__new(const struct kube_opts *opts, struct kube **out, char *err, size_t err_len)
{
	struct kube *k = calloc(1, sizeof(*k));
	pthread_condattr_t ca;
	int ret;

	if (!k)
		return -ENOMEM;
	pthread_mutex_init(&k->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&k->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (opts->node && *opts->node) {
		/* the API server's list: this node's pods only (the kubelet's has no others) */
		char node[3 * KUBE_NODE_NAME_MAX + 1];

		http__escape(node, sizeof(node), opts->node);
		snprintf(k->url, sizeof(k->url), "%s%sfieldSelector=spec.nodeName%%3D%s", opts->pods_url,
			 strchr(opts->pods_url, '?') ? "&" : "?", node);
	} else {
		snprintf(k->url, sizeof(k->url), "%s", opts->pods_url);
	}
	snprintf(k->token_file, sizeof(k->token_file), "%s", opts->token_file ? opts->token_file : "");
	k->interval_s = opts->interval_s;
	k->conn.timeout_s = opts->timeout_s;
	k->conn.insecure_tls = opts->insecure_tls;
	k->conn.stop = &k->stop;
	snprintf(k->conn.ca_file, sizeof(k->conn.ca_file), "%s", opts->ca_file ? opts->ca_file : "");
	if ((ret = http__init(err, err_len)))
		goto fail;
	if ((ret = -pthread_create(&k->thread, NULL, kube_main, k))) {
		snprintf(err, err_len, "cannot start the pod list thread: %s", strerror(-ret));
		goto fail;
	}
	k->started = true;
	*out = k;
	return 0;
fail:
	kube__free(k);
	return ret;
}

void kube__free(struct kube *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->mu);
	__atomic_store_n(&k->stop, true, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&k->cv);
	pthread_mutex_unlock(&k->mu);
	if (k->started)
		pthread_join(k->thread, NULL);
	engine__free_pods(k->fresh);
	pthread_mutex_destroy(&k->mu);
	pthread_cond_destroy(&k->cv);
	free(k);
}

struct pods *kube__take(struct kube *k)
{
	struct pods *p;

	pthread_mutex_lock(&k->mu);
	p = k->fresh;
	k->fresh = NULL;
	pthread_mutex_unlock(&k->mu);
	return p;
}

void kube__kick(struct kube *k)
{
	pthread_mutex_lock(&k->mu);
	k->kick = true;
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
}

cJSON *kube__json(struct kube *k)
{
	cJSON *o = cJSON_CreateObject();
	struct kube_stats st;

	pthread_mutex_lock(&k->mu);
	st = k->st;
	pthread_mutex_unlock(&k->mu);
	cJSON_AddStringToObject(o, "url", k->url);
	cJSON_AddNumberToObject(o, "pods", st.pods);
	cJSON_AddNumberToObject(o, "fetches", st.fetches);
	cJSON_AddNumberToObject(o, "failed", st.failed);
	cJSON_AddNumberToObject(o, "skipped_items", st.skipped_items);
	if (st.last_ok_ns)
		cJSON_AddNumberToObject(o, "last_fetch_ago_s", (double)(ls_now_ns() - st.last_ok_ns) / NSEC_PER_SEC);
	else
		cJSON_AddNullToObject(o, "last_fetch_ago_s");
	if (st.last_error[0])
		cJSON_AddStringToObject(o, "last_error", st.last_error);
	else
		cJSON_AddNullToObject(o, "last_error");
	return o;
}

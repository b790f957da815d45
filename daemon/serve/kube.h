/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kubernetes pods' names: a thread fetches the node's pod list (the kubelet's /pods, or
 * the API server's /api/v1/pods for this node) every kube-pods-interval seconds, and
 * sooner when a pod the list lacks starts, and hands it to the event loop, which gives it
 * to the cgroups table (decode/pods.h). Optional and off by default: it needs a service
 * account token the cluster lets read pods. A server that is down or refuses only leaves
 * the pods unnamed (their UIDs still show); every failure is counted.
 */
#ifndef __LS_KUBE_H
#define __LS_KUBE_H

#include <stdint.h>
#include <cjson/cJSON.h>

struct pods;

struct kube_opts {
	const char *pods_url;		/* http[s]://.../pods or .../api/v1/pods; "" or NULL: off */
	const char *node;		/* with the API server: only this node's pods; "": all */
	const char *token_file;		/* "Authorization: Bearer" from this file, read at each fetch; "": none */
	const char *ca_file;		/* the CA of the server's certificate; "": the system's */
	uint32_t insecure_tls;		/* 1: the certificate is not checked (a kubelet's self-signed one) */
	uint32_t interval_s;		/* between fetches */
	uint32_t timeout_s;		/* one fetch */
};

struct kube;

/* Starts the fetching thread; its first fetch is under way when this returns. */
int kube__new(const struct kube_opts *opts, struct kube **out, char *err, size_t err_len);
void kube__free(struct kube *k);
/* The list fetched since the last call, for cgroups__set_pods; NULL: none new. */
struct pods *kube__take(struct kube *k);
/* A pod the list lacks was seen: fetch again now (at most every KUBE_MIN_REFETCH_S). */
void kube__kick(struct kube *k);
/* The "kubernetes" object of `status`: the URL, pods named, fetches, failures, last error. */
cJSON *kube__json(struct kube *k);

#endif

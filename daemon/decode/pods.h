/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kubernetes pods by UID: their namespace and name, read from a PodList (what the
 * kubelet's /pods and the API server's /api/v1/pods answer). A cgroup's path gives a
 * pod's UID only (cgroups.h); this names it. The list is fetched by serve/kube.c, off the
 * event loop, and handed over whole.
 */
#ifndef __LS_PODS_H
#define __LS_PODS_H

#include <stddef.h>
#include "decode/cgroups.h"

/* Kubernetes' own limits: a namespace is a DNS label, a pod's name a DNS subdomain */
#define LS_K8S_NAMESPACE_MAX 63
#define LS_K8S_NAME_MAX 253

struct ls_pod {
	char uid[LS_POD_UID_LEN + 1];
	char ns[LS_K8S_NAMESPACE_MAX + 1];
	char name[LS_K8S_NAME_MAX + 1];
};

struct pods;

/*
 * The pods of a PodList's JSON text (@len bytes). Items without a UID, name or namespace,
 * or with one past Kubernetes' limits, are skipped and counted in @skipped. -EINVAL (with
 * @err saying why) when @json is not a PodList.
 */
int pods__parse(const char *json, size_t len, struct pods **out, size_t *skipped, char *err, size_t err_len);
void pods__free(struct pods *p);
/* The pod with @uid; NULL when the list lacks it. */
const struct ls_pod *pods__find(const struct pods *p, const char *uid);
size_t pods__count(const struct pods *p);

#endif

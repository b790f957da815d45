// SPDX-License-Identifier: GPL-2.0
/* Kubernetes pods by UID, from a PodList (pods.h): a sorted array, looked up by bsearch. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "decode/pods.h"

struct pods {
	struct ls_pod *v;
	size_t n;
};

static int by_uid(const void *a, const void *b)
{
	return strcmp(((const struct ls_pod *)a)->uid, ((const struct ls_pod *)b)->uid);
}

/* @item's metadata.@key when it is a string of 1..@max bytes; NULL otherwise. */
static const char *meta_str(const cJSON *meta, const char *key, size_t max)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, key);
	size_t n;

	if (!cJSON_IsString(v))
		return NULL;
	n = strlen(v->valuestring);
	return n && n <= max ? v->valuestring : NULL;
}

int pods__parse(const char *json, size_t len, struct pods **out, size_t *skipped, char *err, size_t err_len)
{
	cJSON *root = cJSON_ParseWithLength(json, len);
	const cJSON *items = cJSON_GetObjectItemCaseSensitive(root, "items"), *item;
	const cJSON *kind = cJSON_GetObjectItemCaseSensitive(root, "kind");
	struct pods *p;
	size_t n = 0;

	*skipped = 0;
	if (!root) {
		snprintf(err, err_len, "the pod list is not JSON");
		return -EINVAL;
	}
	/* the kubelet's /pods leaves kind empty at times; the API server always sets it */
	if (!cJSON_IsArray(items) || (cJSON_IsString(kind) && *kind->valuestring && strcmp(kind->valuestring, "PodList"))) {
		snprintf(err, err_len, "the answer is not a PodList (is the URL the kubelet's /pods or the API's /api/v1/pods?)");
		cJSON_Delete(root);
		return -EINVAL;
	}
	if (!(p = calloc(1, sizeof(*p))) ||
	    !(p->v = calloc(cJSON_GetArraySize(items) ? cJSON_GetArraySize(items) : 1, sizeof(*p->v)))) {
		free(p);
		cJSON_Delete(root);
		return -ENOMEM;
	}
	cJSON_ArrayForEach(item, items) {
		const cJSON *meta = cJSON_GetObjectItemCaseSensitive(item, "metadata");
		/*
		 * A static pod's containers run under the UID the kubelet hashed from its
		 * manifest; the API server shows its mirror pod, with a UID of its own and that
		 * hash in this annotation (the kubelet's own list has the hash as the UID)
		 */
		const char *mirror = meta_str(cJSON_GetObjectItemCaseSensitive(meta, "annotations"),
					      "kubernetes.io/config.mirror", LS_POD_UID_LEN);
		const char *uid = mirror ? mirror : meta_str(meta, "uid", LS_POD_UID_LEN);
		const char *ns = meta_str(meta, "namespace", LS_K8S_NAMESPACE_MAX);
		const char *name = meta_str(meta, "name", LS_K8S_NAME_MAX);

		if (!uid || !ns || !name) {
			(*skipped)++;
			continue;
		}
		snprintf(p->v[n].uid, sizeof(p->v[n].uid), "%s", uid);
		snprintf(p->v[n].ns, sizeof(p->v[n].ns), "%s", ns);
		snprintf(p->v[n].name, sizeof(p->v[n].name), "%s", name);
		n++;
	}
	cJSON_Delete(root);
	p->n = n;
	qsort(p->v, n, sizeof(*p->v), by_uid);
	*out = p;
	return 0;
}

void pods__free(struct pods *p)
{
	if (p) {
		free(p->v);
		free(p);
	}
}

const struct ls_pod *pods__find(const struct pods *p, const char *uid)
{
	struct ls_pod key;

	if (!p || !*uid)
		return NULL;
	snprintf(key.uid, sizeof(key.uid), "%s", uid);
	return bsearch(&key, p->v, p->n, sizeof(*p->v), by_uid);
}

size_t pods__count(const struct pods *p)
{
	return p ? p->n : 0;
}

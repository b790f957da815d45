/* SPDX-License-Identifier: GPL-2.0 */
/*
 * lockscoped's settings: one table names every setting once, with its type, range and the
 * field it fills, for both the command line (--KEY=VALUE) and the config file (KEY = VALUE
 * lines, /etc/lockscope/lockscoped.conf). The defaults are struct ls_config's after
 * ls_config__init(); `lockscoped --dump-config` prints them.
 */
#ifndef __LS_CONFIG_H
#define __LS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include "api/engine.h"

#define LS_DEFAULT_CONFIG "/etc/lockscope/lockscoped.conf"
#define LS_CONFIG_STR_MAX LS_OPT_PATH_MAX

struct ls_config {
	struct engine_opts engine;
	char socket[LS_CONFIG_STR_MAX];		/* the Unix socket served */
	char socket_group[LS_CONFIG_STR_MAX];	/* its group: members may query */
	char metrics_listen[LS_CONFIG_STR_MAX];	/* ADDR:PORT of the metrics listener; "": off */
	char metrics_textfile[LS_CONFIG_STR_MAX]; /* node_exporter textfile written; "": off */
	uint32_t metrics_textfile_interval;	/* seconds between its writes */
	/* profiles pushed to a fleet's backends (serve/push.h) */
	char push_parca[LS_CONFIG_STR_MAX];	/* base URL; "": off */
	char push_pyroscope[LS_CONFIG_STR_MAX];
	uint32_t push_interval;			/* seconds each profile covers */
	uint32_t push_queue;			/* profiles waiting per backend */
	uint32_t push_timeout;			/* seconds per request */
	char push_bearer_token_file[LS_CONFIG_STR_MAX];
	char push_basic_auth_file[LS_CONFIG_STR_MAX];
	char push_ca_file[LS_CONFIG_STR_MAX];
	char push_app[LS_CONFIG_STR_MAX];	/* Pyroscope's application name, Parca's __name__ */
	char push_host[LS_CONFIG_STR_MAX];	/* the host label; "": the host name */
	/* Kubernetes pods' names (serve/kube.h) */
	char kube_pods_url[LS_CONFIG_STR_MAX];	/* the kubelet's /pods or the API's /api/v1/pods; "": off */
	char kube_node[LS_CONFIG_STR_MAX];	/* the API server's list: this node's pods */
	char kube_token_file[LS_CONFIG_STR_MAX];
	char kube_ca_file[LS_CONFIG_STR_MAX];
	uint32_t kube_insecure_tls;
	uint32_t kube_pods_interval;		/* seconds between fetches */
};

#define LS_DEF_TEXTFILE_INTERVAL 15	/* node_exporter's usual scrape interval */
/* a push every 15 s (Parca's and Pyroscope's agents' default), 16 of them (4 min) queued */
#define LS_DEF_PUSH_INTERVAL 15
#define LS_DEF_PUSH_QUEUE 16
#define LS_DEF_PUSH_TIMEOUT 10
#define LS_DEF_PUSH_APP "lockscope"
/* the pod list every 30 s, and 5 s after a pod it lacks is seen; 10 s for one fetch */
#define LS_DEF_KUBE_INTERVAL 30
#define LS_DEF_KUBE_TIMEOUT 10

enum ls_setting_type {
	LS_SET_U32,
	LS_SET_STR,
};

enum ls_setting_flags {
	LS_SET_RELOAD	= 1 << 0,	/* SIGHUP applies it; the others need a restart */
	LS_SET_POW2	= 1 << 1,	/* a power of two */
	LS_SET_KIB	= 1 << 2,	/* given in KiB, kept in bytes */
	LS_SET_WINDOW	= 1 << 3,	/* 0, or a stack window: a multiple of 8 from LS_USTACK_MIN_BYTES */
	LS_SET_ABSPATH	= 1 << 4,	/* an absolute path */
	LS_SET_EMPTY	= 1 << 5,	/* may be empty: off */
	LS_SET_LISTEN	= 1 << 6,	/* ADDR:PORT */
	LS_SET_URL	= 1 << 7,	/* http:// or https:// */
};

struct ls_setting {
	const char *key;
	enum ls_setting_type type;
	size_t offset;		/* in struct ls_config: a uint32_t or a char[LS_CONFIG_STR_MAX] */
	uint32_t min, max;	/* LS_SET_U32 */
	unsigned int flags;	/* enum ls_setting_flags */
	const char *section;	/* where --help and --dump-config list it */
	const char *help;
};

extern const struct ls_setting ls_settings[];
extern const int ls_nr_settings;

void ls_config__init(struct ls_config *c);
const struct ls_setting *ls_setting_find(const char *key);
/* Sets @key from @value; on error fills @err with a line saying what is accepted. */
int ls_setting_apply(struct ls_config *c, const char *key, const char *value, char *err, size_t len);
/* @s's value in @c as the config file spells it ("256" for ringbuf-kb, not bytes). */
void ls_setting_format(const struct ls_config *c, const struct ls_setting *s, char *buf, size_t len);
void ls_setting_copy(struct ls_config *dst, const struct ls_config *src, const struct ls_setting *s);
bool ls_setting_equal(const struct ls_config *a, const struct ls_config *b, const struct ls_setting *s);
/*
 * Reads KEY = VALUE lines ('#' comments) into @c, all or nothing: on error @c is
 * untouched and @err names the file, line and key.
 */
int ls_config_load(struct ls_config *c, const char *path, char *err, size_t len);
/* Every setting as a commented config file: what --dump-config prints. */
void ls_config_dump(const struct ls_config *c, FILE *f);

#endif

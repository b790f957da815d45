/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Which cgroup a process runs in, and what the cgroup's path says of it: the systemd unit,
 * the container and the Kubernetes pod. Resolved in user space, once per process when its
 * first wait is decoded (and again every CGROUPS_REFRESH_TICKS while it lives), from the
 * cgroup v2 line of /proc/PID/cgroup: nothing is added to the BPF programs' per-event
 * cost. Pure cgroup v2 (mounted at /sys/fs/cgroup) and hybrid hosts (v1 controllers with
 * v2 at /sys/fs/cgroup/unified) read the same: the "0::" line and the cgroup2 mount from
 * /proc/self/mountinfo, whose directory inode is the cgroup id bpf_get_current_cgroup_id()
 * would give.
 *
 * A process keeps its cgroup after it exits (its rows still say where it ran); the table
 * of processes is bounded, and cleared whole when full, like usyms (counted).
 */
#ifndef __LS_CGROUPS_H
#define __LS_CGROUPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A cgroup path longer than this is cut (and still matched by its prefix) */
#define LS_CGROUP_PATH_MAX 512
/* 64 hex digits: Docker's, containerd's, CRI-O's and Podman's container ids */
#define LS_CONTAINER_ID_LEN 64
/* a Kubernetes UID: 8-4-4-4-12 hex digits */
#define LS_POD_UID_LEN 36
/* a static pod's UID: the MD5 of its manifest, 32 hex digits */
#define LS_POD_HASH_LEN 32

/* What a cgroup's path says; "" where it says nothing. */
struct ls_cgroup {
	uint64_t id;				/* the v2 cgroup's id; 0: not found */
	char path[LS_CGROUP_PATH_MAX];		/* "/system.slice/nginx.service" */
	char unit[256];				/* "nginx.service" */
	char container[LS_CONTAINER_ID_LEN + 1];
	char pod[LS_POD_UID_LEN + 1];
};

/* The groups rows can be made of. */
enum cgroup_by { CGROUP_BY_CGROUP, CGROUP_BY_UNIT, CGROUP_BY_POD, CGROUP_BY_MAX };

struct cgroups_opts {
	size_t max_procs;	/* processes remembered */
	size_t max_cgroups;	/* distinct cgroups remembered */
	/* for tests: where /proc is ("/proc"), and mountinfo's text instead of the file's */
	const char *proc;
	const char *mountinfo;
};

struct cgroups_stats {
	uint64_t procs, cgroups;	/* remembered now */
	uint64_t unresolved;		/* processes gone before their cgroup was read */
	uint64_t cleared;		/* times a full table was cleared */
};

struct cgroups;

int cgroups__new(const struct cgroups_opts *opts, struct cgroups **out);
void cgroups__free(struct cgroups *cg);
/* The cgroup v2 mount the ids are read under; "" on a host without cgroup v2. */
const char *cgroups__mount(const struct cgroups *cg);
/*
 * @pid waited: its cgroup is read if it is new, was read CGROUPS_REFRESH_TICKS ago, or
 * @kernel_id (the cgroup id the kernel side read with the wait; 0: none) is not the one
 * its last wait named: it moved, or the pid is another process's now.
 */
void cgroups__see(struct cgroups *cg, uint32_t pid, uint64_t kernel_id);
/* A second passed (refreshes are counted in ticks, not read from a clock per event). */
void cgroups__tick(struct cgroups *cg);
/* @pid's cgroup; NULL if it was never seen or exited before it could be read. */
const struct ls_cgroup *cgroups__of(const struct cgroups *cg, uint32_t pid);
/*
 * A number naming @pid's group of kind @by among those of the other processes: equal for
 * two processes in the same cgroup (unit, pod); 0 when it has none (no unit, no pod).
 */
uint32_t cgroups__group(const struct cgroups *cg, uint32_t pid, enum cgroup_by by);
/* All of @pid's groups at once, indexed by enum cgroup_by (one lookup); NULL: not known. */
const uint32_t *cgroups__groups(const struct cgroups *cg, uint32_t pid);
/*
 * Whether @pid is in what -G @filter names: see ls_cgroup_matches, and a pod's
 * "NAMESPACE/NAME" when the pods' names are known.
 */
bool cgroups__matches(const struct cgroups *cg, uint32_t pid, const char *filter);

/* ---- Kubernetes pods' names (decode/pods.h), when the daemon fetches a pod list ---- */

struct pods;
struct ls_pod;
/* The pods' names from now on: @pods is owned by @cg (the list before is freed). */
void cgroups__set_pods(struct cgroups *cg, struct pods *pods);
/* The pod @c is part of, by its UID; NULL when it is none or the list lacks it. */
const struct ls_pod *cgroups__pod(const struct cgroups *cg, const struct ls_cgroup *c);
/*
 * Whether a cgroup of a pod the list lacks was seen since the last call (a pod started
 * since the list was fetched): the list is fetched again sooner than its interval.
 */
bool cgroups__pods_wanted(struct cgroups *cg);
void cgroups__stats(const struct cgroups *cg, struct cgroups_stats *st);

/* ---- the parsing, pure (unit-tested without /proc) ---- */

/* The v2 path in /proc/PID/cgroup's text (the "0::" line); -ENOENT when there is none. */
int ls_cgroup_v2_path(const char *proc_cgroup, char *path, size_t len);
/* The first cgroup2 mount point in /proc/self/mountinfo's text; -ENOENT when none. */
int ls_cgroup_v2_mount(const char *mountinfo, char *mount, size_t len);
/* Fills @c's unit, container and pod from c->path. */
void ls_cgroup_names(struct ls_cgroup *c);
/*
 * -G: @filter is a cgroup path (with or without its leading '/'), matching that cgroup
 * and every one below it, or a unit's name ("nginx.service", "user.slice"), a container
 * id (or its first 12 digits, as `docker ps` shows it) or a pod UID.
 */
bool ls_cgroup_matches(const struct ls_cgroup *c, const char *filter);

#endif

// SPDX-License-Identifier: GPL-2.0
/*
 * Processes to cgroups, and a cgroup's path to its unit, container and pod. Two tables:
 * the distinct cgroups (by path), and the processes (pid -> cgroup index, and when read).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "decode/cgroups.h"
#include "decode/pods.h"
#include "lib/htab.h"
#include "lib/log.h"

/* a process's cgroup is read again after this many ticks (seconds) while it waits */
#define CGROUPS_REFRESH_TICKS 10
/*
 * ...and at once when the kernel side names another cgroup for it, at most this many
 * times a tick: a process moved (or a reused pid) takes one read, while threads that live
 * in cgroups of their own (threaded cgroups), whose waits name them in turn, cannot make
 * one read per wait-table entry
 */
#define CGROUPS_MOVED_READS 2
/* /proc/PID/cgroup: one line per v1 hierarchy and the v2 one, each short */
#define PROC_CGROUP_MAX 4096
/* the container ids `docker ps` shows are its first 12 digits */
#define CONTAINER_SHORT_ID 12

struct cg_proc {
	uint32_t index;		/* into cgroups; 0: unresolved */
	uint32_t tick;		/* when it was read */
	uint64_t kernel_id;	/* the cgroup id its last wait-table entry named; 0: none yet */
	uint32_t reads;		/* in that tick */
};

struct cgroups {
	struct cgroups_opts opts;
	char mount[LS_CGROUP_PATH_MAX];
	struct htab *procs;	/* pid -> struct cg_proc */
	struct htab *paths;	/* hash of the path -> struct cg_entry (index 0: none) */
	uint32_t tick;
	uint32_t last_pid;	/* the last pid seen, fresh: waits come in runs of one process */
	uint64_t last_kernel_id;	/* and the cgroup id the kernel side named for it */
	uint64_t unresolved, cleared;
	struct pods *pods;	/* the Kubernetes pods' names, when a pod list is fetched */
	bool pods_wanted;	/* a cgroup of a pod the list lacks was seen since the last ask */
};

/*
 * One distinct cgroup; keyed by its path's hash, a collision (two paths, one hash) keeps
 * the first and reads the second as unresolved rather than naming it wrongly.
 */
struct cg_entry {
	struct ls_cgroup cg;
	uint32_t group[CGROUP_BY_MAX];	/* per kind: the index of the first entry sharing it */
};

/* ---- parsing ---- */

int ls_cgroup_v2_path(const char *text, char *path, size_t len)
{
	const char *line = text;

	while (line && *line) {
		const char *end = strchr(line, '\n');
		size_t n = end ? (size_t)(end - line) : strlen(line);

		if (n >= 3 && !strncmp(line, "0::", 3)) {
			n -= 3;
			if (n >= len)
				n = len - 1;
			memcpy(path, line + 3, n);
			path[n] = 0;
			return 0;
		}
		line = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

/* mountinfo escapes space, tab, newline and backslash as \ooo */
static void unescape_octal(char *s)
{
	char *o = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*o++ = (char)((s[1] - '0') << 6 | (s[2] - '0') << 3 | (s[3] - '0'));
			s += 3;
		} else {
			*o++ = *s;
		}
	}
	*o = 0;
}

/* One mountinfo line's mount point (unescaped) and type; false if it does not parse. */
static bool mount_line(const char *line, size_t n, char *point, size_t point_len, char *type, size_t type_len)
{
	char buf[1024], fmt[32];
	const char *sep;

	/* "36 25 0:30 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw": point 5, type after " - " */
	if (n >= sizeof(buf))
		return false;
	memcpy(buf, line, n);
	buf[n] = 0;
	sep = strstr(buf, " - ");
	snprintf(fmt, sizeof(fmt), "%%*s %%*s %%*s %%*s %%%zus", point_len - 1);
	if (!sep || sscanf(buf, fmt, point) != 1)
		return false;
	snprintf(fmt, sizeof(fmt), "%%%zus", type_len - 1);
	if (sscanf(sep + 3, fmt, type) != 1)
		return false;
	unescape_octal(point);
	return true;
}

/* Whether mount point @below is @above or inside it. */
static bool covers(const char *above, const char *below)
{
	size_t n = strlen(above);

	if (!strcmp(above, "/"))
		return true;
	return !strncmp(above, below, n) && (below[n] == '/' || !below[n]);
}

/*
 * The first cgroup2 mount no later mount hides: a mount namespace may mount over the
 * host's (a tmpfs on /sys/fs/cgroup hides /sys/fs/cgroup/unified; a cgroup2 on it hides
 * everything below), and mountinfo still lists what is hidden, in mount order.
 */
int ls_cgroup_v2_mount(const char *text, char *mount, size_t len)
{
	const char *line = text;

	while (line && *line) {
		const char *end = strchr(line, '\n'), *later;
		char point[LS_CGROUP_PATH_MAX], other[LS_CGROUP_PATH_MAX], type[32];
		size_t n = end ? (size_t)(end - line) : strlen(line);
		bool hidden = false;

		if (mount_line(line, n, point, sizeof(point), type, sizeof(type)) && !strcmp(type, "cgroup2")) {
			for (later = end ? end + 1 : NULL; !hidden && later && *later;) {
				const char *e = strchr(later, '\n');
				size_t m = e ? (size_t)(e - later) : strlen(later);

				hidden = mount_line(later, m, other, sizeof(other), type, sizeof(type)) && covers(other, point);
				later = e ? e + 1 : NULL;
			}
			if (!hidden) {
				if (strlen(point) >= len)
					return -ENAMETOOLONG;
				strcpy(mount, point);
				return 0;
			}
		}
		line = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

static bool ends_with(const char *s, size_t n, const char *suffix)
{
	size_t m = strlen(suffix);

	return n >= m && !memcmp(s + n - m, suffix, m);
}

static bool is_unit(const char *s, size_t n)
{
	static const char *const suffixes[] = { ".service", ".scope", ".socket", ".mount", ".swap", ".target" };
	size_t i;

	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (ends_with(s, n, suffixes[i]))
			return true;
	return false;
}

static bool all_hex(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

/*
 * A container id in one path component: the systemd driver's "docker-ID.scope",
 * "cri-containerd-ID.scope", "crio-ID.scope", "libpod-ID.scope", or the cgroupfs driver's
 * bare ID (/docker/ID, /kubepods/burstable/podUID/ID).
 */
static bool container_in(const char *s, size_t n, char *out)
{
	const char *dash;

	if (ends_with(s, n, ".scope"))
		n -= strlen(".scope");
	dash = memrchr(s, '-', n);
	if (dash) {
		n -= dash + 1 - s;
		s = dash + 1;
	}
	if (n != LS_CONTAINER_ID_LEN || !all_hex(s, n))
		return false;
	memcpy(out, s, n);
	out[n] = 0;
	return true;
}

/*
 * A pod UID in one component: the cgroupfs driver's "pod<uid>", the systemd driver's
 * "kubepods-<qos>-pod<uid with '_' for '-'>.slice". A static pod's UID is the hash of its
 * manifest the kubelet made, 32 hex digits without dashes.
 */
static bool pod_in(const char *s, size_t n, char *out)
{
	const char *p = NULL;
	size_t i, m;

	for (i = 0; i + 3 <= n; i++)
		if (!memcmp(s + i, "pod", 3) && (i == 0 || s[i - 1] == '-'))
			p = s + i + 3;
	if (!p)
		return false;
	m = n - (p - s);
	if (ends_with(p, m, ".slice"))
		m -= strlen(".slice");
	if (m != LS_POD_UID_LEN && m != LS_POD_HASH_LEN)
		return false;
	for (i = 0; i < m; i++) {
		char c = p[i] == '_' ? '-' : p[i];

		if (!(isxdigit((unsigned char)c) || c == '-'))
			return false;
		out[i] = c;
	}
	out[m] = 0;
	return true;
}

void ls_cgroup_names(struct ls_cgroup *c)
{
	const char *s = c->path, *slice = NULL, *unit = NULL;
	size_t slice_n = 0, unit_n = 0;

	c->unit[0] = c->container[0] = c->pod[0] = 0;
	while (*s) {
		size_t n;

		while (*s == '/')
			s++;
		n = strcspn(s, "/");
		if (!n)
			break;
		/* the deepest unit names the service; a slice only when no unit is below it */
		if (is_unit(s, n)) {
			unit = s;
			unit_n = n;
		} else if (ends_with(s, n, ".slice")) {
			slice = s;
			slice_n = n;
		}
		if (!c->container[0])
			container_in(s, n, c->container);
		if (!c->pod[0])
			pod_in(s, n, c->pod);
		s += n;
	}
	if (!unit) {
		unit = slice;
		unit_n = slice_n;
	}
	if (unit) {
		if (unit_n >= sizeof(c->unit))
			unit_n = sizeof(c->unit) - 1;
		memcpy(c->unit, unit, unit_n);
		c->unit[unit_n] = 0;
	}
}

/* Whether @filter is one whole component of @path. */
static bool component_of(const char *path, const char *filter)
{
	size_t n = strlen(filter);
	const char *s = path;

	while ((s = strstr(s, filter))) {
		if ((s == path || s[-1] == '/') && (s[n] == '/' || !s[n]))
			return true;
		s++;
	}
	return false;
}

bool ls_cgroup_matches(const struct ls_cgroup *c, const char *filter)
{
	size_t n;

	if (!*filter)
		return true;
	if (strchr(filter, '/')) {
		/* a path: that cgroup and every cgroup below it */
		const char *p = c->path;

		while (*filter == '/')
			filter++;
		while (*p == '/')
			p++;
		n = strlen(filter);
		while (n && filter[n - 1] == '/')
			n--;
		return !n || (!strncmp(p, filter, n) && (p[n] == '/' || !p[n]));
	}
	n = strlen(filter);
	if (c->container[0] && n >= CONTAINER_SHORT_ID && !strncmp(c->container, filter, n))
		return true;
	if (c->pod[0] && !strcmp(c->pod, filter))
		return true;
	return component_of(c->path, filter);
}

/* ---- the tables ---- */

int cgroups__new(const struct cgroups_opts *opts, struct cgroups **out)
{
	struct cgroups *cg = calloc(1, sizeof(*cg));
	char *text = NULL;
	uint64_t zero = 0;
	size_t cap = 0;
	FILE *f;
	int err = -ENOMEM;

	if (!cg)
		return -ENOMEM;
	cg->opts = *opts;
	if (!cg->opts.proc)
		cg->opts.proc = "/proc";
	cg->procs = htab__new(sizeof(uint32_t), sizeof(struct cg_proc), opts->max_procs);
	cg->paths = htab__new(sizeof(uint64_t), sizeof(struct cg_entry), opts->max_cgroups + 1);
	if (!cg->procs || !cg->paths || !htab__upsert(cg->paths, &zero, NULL, NULL))
		goto fail;
	if (opts->mountinfo) {
		ls_cgroup_v2_mount(opts->mountinfo, cg->mount, sizeof(cg->mount));
	} else if ((f = fopen("/proc/self/mountinfo", "re"))) {
		/* getdelim reads the whole file: it is small, and read once */
		if (getdelim(&text, &cap, 0, f) > 0)
			ls_cgroup_v2_mount(text, cg->mount, sizeof(cg->mount));
		free(text);
		fclose(f);
	}
	if (!cg->mount[0])
		pr_warn("cgroups: no cgroup v2 mount in /proc/self/mountinfo: rows carry the cgroup path without its id\n");
	*out = cg;
	return 0;
fail:
	cgroups__free(cg);
	return err;
}

void cgroups__free(struct cgroups *cg)
{
	if (!cg)
		return;
	htab__free(cg->procs);
	htab__free(cg->paths);
	pods__free(cg->pods);
	free(cg);
}

const char *cgroups__mount(const struct cgroups *cg)
{
	return cg->mount;
}

/* The index of the first entry whose @by names the same group as @e (itself if none). */
static uint32_t first_sharing(const struct cgroups *cg, const struct cg_entry *e, uint32_t self, enum cgroup_by by)
{
	const char *want = by == CGROUP_BY_UNIT ? e->cg.unit : e->cg.pod;
	uint32_t i;

	if (by == CGROUP_BY_CGROUP)
		return self;
	if (!*want)
		return 0;
	for (i = 1; i < self; i++) {
		const struct cg_entry *o = htab__at(cg->paths, i, NULL);

		if (!strcmp(by == CGROUP_BY_UNIT ? o->cg.unit : o->cg.pod, want))
			return o->group[by];
	}
	return self;
}

/* The entry of @path, made if new: 0 when the table is full or two paths share a hash. */
static uint32_t entry_of(struct cgroups *cg, const char *path)
{
	uint64_t h = ls_hash_bytes(path, strlen(path)) | 1;	/* 0 is the empty entry's */
	struct cg_entry *e;
	uint32_t index;
	int created = 0, by;
	char full[2 * LS_CGROUP_PATH_MAX];
	struct stat st;

	if (!(e = htab__upsert_at(cg->paths, &h, &index, &created, NULL)))
		return 0;
	if (!created)
		return strcmp(e->cg.path, path) ? 0 : index;
	snprintf(e->cg.path, sizeof(e->cg.path), "%s", path);
	ls_cgroup_names(&e->cg);
	snprintf(full, sizeof(full), "%s%s", cg->mount, path);
	/*
	 * In a cgroup namespace of its own (a pod's), the daemon sees other processes' paths
	 * relative to its root ("/../../system.slice/..."): their names still say the unit,
	 * container and pod, but they are not under its mount
	 */
	if (cg->mount[0] && !strstr(path, "/..") && !stat(full, &st))
		e->cg.id = st.st_ino;	/* kernfs: a cgroup directory's inode is its id */
	for (by = 0; by < CGROUP_BY_MAX; by++)
		e->group[by] = first_sharing(cg, e, index, by);
	if (e->cg.pod[0] && !pods__find(cg->pods, e->cg.pod))
		cg->pods_wanted = true;
	return index;
}

static void read_proc(struct cgroups *cg, uint32_t pid, struct cg_proc *p)
{
	char file[64], text[PROC_CGROUP_MAX], path[LS_CGROUP_PATH_MAX];
	size_t n;
	FILE *f;

	p->reads = p->tick == cg->tick ? p->reads + 1 : 1;
	p->tick = cg->tick;
	snprintf(file, sizeof(file), "%s/%u/cgroup", cg->opts.proc, pid);
	if (!(f = fopen(file, "re"))) {
		if (!p->index)
			cg->unresolved++;
		return;		/* gone: it keeps what was read */
	}
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = 0;
	if (!ls_cgroup_v2_path(text, path, sizeof(path)))
		p->index = entry_of(cg, path);
}

void cgroups__see(struct cgroups *cg, uint32_t pid, uint64_t kernel_id)
{
	struct cg_proc *p;
	int created = 0, err = 0;
	bool moved;

	if (!pid || (pid == cg->last_pid && (!kernel_id || kernel_id == cg->last_kernel_id)))
		return;
	p = htab__upsert(cg->procs, &pid, &created, &err);
	if (!p && err == -ENOSPC) {
		/* full: start again; the processes still waiting are read again as they come */
		htab__clear(cg->procs);
		cg->cleared++;
		p = htab__upsert(cg->procs, &pid, &created, NULL);
	}
	if (!p)
		return;
	moved = kernel_id && kernel_id != p->kernel_id && !created &&
		(p->tick != cg->tick || p->reads < CGROUPS_MOVED_READS);
	if (kernel_id)
		p->kernel_id = kernel_id;
	if (created || moved || cg->tick - p->tick >= CGROUPS_REFRESH_TICKS)
		read_proc(cg, pid, p);
	cg->last_pid = pid;
	cg->last_kernel_id = p->kernel_id;
}

void cgroups__tick(struct cgroups *cg)
{
	cg->tick++;
	cg->last_pid = 0;	/* so that a process waiting without a break is refreshed too */
	/* distinct cgroups are few; when they are not, start again as with the processes */
	if (htab__count(cg->paths) > cg->opts.max_cgroups) {
		htab__clear(cg->paths);
		htab__clear(cg->procs);
		cg->cleared++;
		htab__upsert(cg->paths, &(uint64_t){ 0 }, NULL, NULL);
	}
}

static const struct cg_entry *entry_of_pid(const struct cgroups *cg, uint32_t pid)
{
	const struct cg_proc *p = htab__find(cg->procs, &pid);

	return p && p->index ? htab__at(cg->paths, p->index, NULL) : NULL;
}

const struct ls_cgroup *cgroups__of(const struct cgroups *cg, uint32_t pid)
{
	const struct cg_entry *e = entry_of_pid(cg, pid);

	return e ? &e->cg : NULL;
}

const uint32_t *cgroups__groups(const struct cgroups *cg, uint32_t pid)
{
	const struct cg_entry *e = entry_of_pid(cg, pid);

	return e ? e->group : NULL;
}

uint32_t cgroups__group(const struct cgroups *cg, uint32_t pid, enum cgroup_by by)
{
	const uint32_t *g = cgroups__groups(cg, pid);

	return g && by < CGROUP_BY_MAX ? g[by] : 0;
}

bool cgroups__matches(const struct cgroups *cg, uint32_t pid, const char *filter)
{
	const struct cg_entry *e = entry_of_pid(cg, pid);
	const struct ls_pod *pod;
	size_t n;

	if (!e)
		return false;
	/* "NAMESPACE/NAME" names a pod before it names a path */
	if ((pod = pods__find(cg->pods, e->cg.pod)) && (n = strlen(pod->ns)) && !strncmp(filter, pod->ns, n) &&
	    filter[n] == '/' && !strcmp(filter + n + 1, pod->name))
		return true;
	return ls_cgroup_matches(&e->cg, filter);
}

void cgroups__set_pods(struct cgroups *cg, struct pods *pods)
{
	pods__free(cg->pods);
	cg->pods = pods;
}

const struct ls_pod *cgroups__pod(const struct cgroups *cg, const struct ls_cgroup *c)
{
	return c ? pods__find(cg->pods, c->pod) : NULL;
}

bool cgroups__pods_wanted(struct cgroups *cg)
{
	bool want = cg->pods_wanted;

	cg->pods_wanted = false;
	return want;
}

void cgroups__stats(const struct cgroups *cg, struct cgroups_stats *st)
{
	st->procs = htab__count(cg->procs);
	st->cgroups = htab__count(cg->paths) - 1;
	st->unresolved = cg->unresolved;
	st->cleared = cg->cleared;
}

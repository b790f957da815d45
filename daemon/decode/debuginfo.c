// SPDX-License-Identifier: GPL-2.0
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <elfutils/debuginfod.h>
#include "decode/debuginfo.h"
#include "lib/log.h"

/*
 * Build ids asked for in the daemon's life: one per distinct module that lacks symbols,
 * so a few dozen on a real host. Past the bound nothing more is queued (and counted).
 */
#define DEBUGINFO_MAX 1024
#define BUILD_ID_HEX_MAX 64	/* 2 x the longest build id (SHA-256 as some linkers write) */

/*
 * libdebuginfod is opened when debug files are to be fetched, as elfutils' own libdw does:
 * linked, it would bring libcurl, a TLS stack and Kerberos into every start of the daemon
 * and of the CLI (thirty libraries, most of the CLI's start-up time), needed or not.
 */
#define LIBDEBUGINFOD "libdebuginfod.so.1"

static struct {
	debuginfod_client *(*begin)(void);
	void (*end)(debuginfod_client *);
	int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int, char **);
	void (*set_progressfn)(debuginfod_client *, debuginfod_progressfn_t);
	void (*set_user_data)(debuginfod_client *, void *);
	void *(*get_user_data)(debuginfod_client *);
} dfn;

static int open_libdebuginfod(void)
{
	void *h;

	if (dfn.begin)
		return 0;
	h = dlopen(LIBDEBUGINFOD, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return -ENOENT;
	dfn.end = dlsym(h, "debuginfod_end");
	dfn.find_debuginfo = dlsym(h, "debuginfod_find_debuginfo");
	dfn.set_progressfn = dlsym(h, "debuginfod_set_progressfn");
	dfn.set_user_data = dlsym(h, "debuginfod_set_user_data");
	dfn.get_user_data = dlsym(h, "debuginfod_get_user_data");
	dfn.begin = dlsym(h, "debuginfod_begin");
	if (!dfn.begin || !dfn.end || !dfn.find_debuginfo || !dfn.set_progressfn || !dfn.set_user_data ||
	    !dfn.get_user_data) {
		dfn.begin = NULL;
		dlclose(h);
		return -ENOSYS;
	}
	return 0;	/* kept open for the process's life */
}

enum fetch_state { FETCH_QUEUED, FETCH_RUNNING, FETCH_DONE };

struct fetch {
	char build_id[BUILD_ID_HEX_MAX + 1];
	enum fetch_state state;
	int err;
	bool reported;
};

struct debuginfo {
	char *dir;
	char *urls;
	pthread_t worker;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;		/* under mu; also read by the progress callback to cancel */
	struct fetch fetches[DEBUGINFO_MAX];
	int nr;
	struct debuginfo_stats stats;
};

static int mkdir_p(const char *path, mode_t mode)
{
	char buf[PATH_MAX], *p;

	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	for (p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(buf, mode) && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(buf, mode) && errno != EEXIST)
		return -errno;
	return 0;
}

/* DIR/.build-id/xx/yyyy.debug -> the file libdebuginfod cached. */
static int link_debug_file(const struct debuginfo *d, const char *build_id, const char *target)
{
	char sub[PATH_MAX], link[PATH_MAX];
	int err;

	if (strlen(build_id) < 3)
		return -EINVAL;
	if (snprintf(sub, sizeof(sub), "%s/.build-id/%.2s", d->dir, build_id) >= (int)sizeof(sub) ||
	    snprintf(link, sizeof(link), "%s/%s.debug", sub, build_id + 2) >= (int)sizeof(link))
		return -ENAMETOOLONG;
	err = mkdir_p(sub, 0755);
	if (err)
		return err;
	unlink(link);
	return symlink(target, link) ? -errno : 0;
}

/* libdebuginfod calls this while it downloads: nonzero cancels (the daemon is stopping). */
static int progress(debuginfod_client *client, long a, long b)
{
	struct debuginfo *d = dfn.get_user_data(client);
	bool stop;

	(void)a, (void)b;
	pthread_mutex_lock(&d->mu);
	stop = d->stop;
	pthread_mutex_unlock(&d->mu);
	return stop;
}

static int fetch_one(struct debuginfo *d, debuginfod_client *client, const char *build_id)
{
	char *path = NULL;
	int fd, err;

	/* a build id given as hex: length 0 */
	fd = dfn.find_debuginfo(client, (const unsigned char *)build_id, 0, &path);
	if (fd < 0)
		return fd;
	close(fd);
	err = link_debug_file(d, build_id, path);
	free(path);
	return err;
}

static struct fetch *next_queued(struct debuginfo *d)
{
	int i;

	for (i = 0; i < d->nr; i++)
		if (d->fetches[i].state == FETCH_QUEUED)
			return &d->fetches[i];
	return NULL;
}

static void *worker_main(void *arg)
{
	struct debuginfo *d = arg;
	debuginfod_client *client = dfn.begin();
	char build_id[BUILD_ID_HEX_MAX + 1];
	struct fetch *f;
	int err;

	if (client) {
		dfn.set_user_data(client, d);
		dfn.set_progressfn(client, progress);
	}
	pthread_mutex_lock(&d->mu);
	for (;;) {
		while (!d->stop && !(f = next_queued(d)))
			pthread_cond_wait(&d->cv, &d->mu);
		if (d->stop)
			break;
		f->state = FETCH_RUNNING;
		memcpy(build_id, f->build_id, sizeof(build_id));
		pthread_mutex_unlock(&d->mu);
		err = client ? fetch_one(d, client, build_id) : -ENOMEM;
		pthread_mutex_lock(&d->mu);
		f->state = FETCH_DONE;
		f->err = err;
		d->stats.pending--;
		if (err) {
			d->stats.failed++;
			pr_warn("debuginfod: no debug file for build id %s from %s: %s\n", build_id, d->urls,
				strerror(-err));
		} else {
			d->stats.fetched++;
		}
	}
	pthread_mutex_unlock(&d->mu);
	if (client)
		dfn.end(client);
	return NULL;
}

/*
 * The cache holds files the daemon parses with root's privileges: if another user may
 * write it, they could plant one. Only this user (or root) may write @dir.
 */
static int private_dir(const char *dir)
{
	struct stat st;

	if (stat(dir, &st))
		return -errno;
	if ((st.st_uid && st.st_uid != geteuid()) || (st.st_mode & (S_IWGRP | S_IWOTH))) {
		pr_warn("debuginfod: %s (mode %04o, uid %u) may be written by other users, who could plant "
			"debug files: not fetching; chmod go-w it or set debuginfod-cache elsewhere\n",
			dir, st.st_mode & 07777, st.st_uid);
		return -EPERM;
	}
	return 0;
}

int debuginfo__new(const struct debuginfo_opts *opts, struct debuginfo **out)
{
	const char *urls = opts->urls ? opts->urls : getenv("DEBUGINFOD_URLS");
	char cache[PATH_MAX];
	struct debuginfo *d;
	int err;

	*out = NULL;
	if (!urls || !*urls || !opts->dir || !*opts->dir)
		return -ENOENT;
	if ((err = open_libdebuginfod())) {
		pr_warn("debuginfod: cannot use %s (%s): debug files are not fetched from %s; install "
			"libdebuginfod1\n", LIBDEBUGINFOD, err == -ENOENT ? dlerror() : "symbols missing", urls);
		return err;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	d->dir = strdup(opts->dir);
	d->urls = strdup(urls);
	if (!d->dir || !d->urls) {
		err = -ENOMEM;
		goto cleanup;
	}
	err = snprintf(cache, sizeof(cache), "%s/cache", d->dir) >= (int)sizeof(cache) ? -ENAMETOOLONG :
	      mkdir_p(cache, 0755);
	if (err) {
		pr_warn("debuginfod: cannot create %s: %s\n", cache, strerror(-err));
		goto cleanup;
	}
	if ((err = private_dir(d->dir)) || (err = private_dir(cache)))
		goto cleanup;
	/*
	 * libdebuginfod reads these at every fetch; set once here, before the worker exists,
	 * so no thread reads the environment while it changes.
	 */
	setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
	setenv("DEBUGINFOD_URLS", d->urls, 1);
	err = -pthread_create(&d->worker, NULL, worker_main, d);
	if (err)
		goto cleanup;
	d->started = true;
	*out = d;
	return 0;
cleanup:
	debuginfo__free(d);
	return err;
}

void debuginfo__free(struct debuginfo *d)
{
	if (!d)
		return;
	if (d->started) {
		pthread_mutex_lock(&d->mu);
		d->stop = true;
		pthread_cond_signal(&d->cv);
		pthread_mutex_unlock(&d->mu);
		pthread_join(d->worker, NULL);
	}
	pthread_cond_destroy(&d->cv);
	pthread_mutex_destroy(&d->mu);
	free(d->dir);
	free(d->urls);
	free(d);
}

const char *debuginfo__dir(const struct debuginfo *d)
{
	return d->dir;
}

const char *debuginfo__urls(const struct debuginfo *d)
{
	return d->urls;
}

void debuginfo__want(struct debuginfo *d, const char *build_id)
{
	size_t len = strlen(build_id);
	int i;

	if (!len || len > BUILD_ID_HEX_MAX)
		return;
	pthread_mutex_lock(&d->mu);
	for (i = 0; i < d->nr; i++)
		if (!strcmp(d->fetches[i].build_id, build_id))
			goto out;
	if (d->nr == DEBUGINFO_MAX) {
		d->stats.failed++;	/* not asked: counted with the fetches that failed */
		goto out;
	}
	memcpy(d->fetches[d->nr].build_id, build_id, len + 1);
	d->fetches[d->nr++].state = FETCH_QUEUED;
	d->stats.requested++;
	d->stats.pending++;
	pthread_cond_signal(&d->cv);
out:
	pthread_mutex_unlock(&d->mu);
}

int debuginfo__poll(struct debuginfo *d, debuginfo_done_fn fn, void *ctx)
{
	struct fetch done[16];
	int i, n, total = 0;

	do {	/* callbacks run without the lock: they may ask for more */
		n = 0;
		pthread_mutex_lock(&d->mu);
		for (i = 0; i < d->nr && n < (int)(sizeof(done) / sizeof(done[0])); i++) {
			if (d->fetches[i].state != FETCH_DONE || d->fetches[i].reported)
				continue;
			d->fetches[i].reported = true;
			done[n++] = d->fetches[i];
		}
		pthread_mutex_unlock(&d->mu);
		for (i = 0; i < n; i++)
			fn(ctx, done[i].build_id, done[i].err);
		total += n;
	} while (n == (int)(sizeof(done) / sizeof(done[0])));
	return total;
}

void debuginfo__stats(struct debuginfo *d, struct debuginfo_stats *out)
{
	pthread_mutex_lock(&d->mu);
	*out = d->stats;
	pthread_mutex_unlock(&d->mu);
}

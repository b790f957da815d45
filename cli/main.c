// SPDX-License-Identifier: GPL-2.0
/* lockscope: the command-line client of lockscoped. */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lib/jsonget.h"
#include "serve/server.h"
#include "cli.h"
#include "client.h"
#include "progress.h"
#include "render.h"

/* ---- a scan through the daemon: its progress from a second connection ---- */

struct scan_watch {
	struct progress *progress;
	const char *socket;
	int timeout_ms;
	uint32_t pid;
	int64_t base;		/* the process's waits the daemon held when the scan began */
};

/* The waits of @pid the daemon holds (top's rows over its all window), -1 if unknown. */
static int64_t daemon_waits(const char *socket, int timeout_ms, uint32_t pid)
{
	cJSON *req = cJSON_CreateObject(), *resp = NULL, *row;
	int fd = client_connect(socket), err;
	int64_t n = -1;

	if (fd >= 0 && req) {
		cJSON_AddStringToObject(req, "cmd", "top");
		cJSON_AddNumberToObject(req, "pid", pid);
		cJSON_AddStringToObject(req, "window", "all");
		cJSON_AddStringToObject(req, "group", "thread");
		resp = client_call(fd, req, timeout_ms, &err);
	}
	if (cJSON_IsArray(cJSON_GetObjectItem(resp, "rows"))) {
		n = 0;
		cJSON_ArrayForEach(row, cJSON_GetObjectItem(resp, "rows"))
			n += ls_json_u64(row, "contended");
	}
	if (fd >= 0)
		close(fd);
	cJSON_Delete(req);
	cJSON_Delete(resp);
	return n;
}

static void scan_idle(void *ctx)
{
	struct scan_watch *w = ctx;
	int64_t n = daemon_waits(w->socket, w->timeout_ms, w->pid);

	progress__update(w->progress, n >= 0 && w->base >= 0 ? n - w->base : -1);
}

/* A whole response from @f (one JSON document). */
static cJSON *read_response(FILE *f)
{
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);
	cJSON *resp = NULL;
	size_t n;

	while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += n;
		if (len + 1 >= cap) {
			char *b = realloc(buf, cap *= 2);

			if (!b)
				break;
			buf = b;
		}
	}
	if (buf) {
		buf[len] = 0;
		resp = cJSON_Parse(buf);
	}
	if (!resp)
		fprintf(stderr, "lockscope: __render: standard input is not a JSON response\n");
	free(buf);
	return resp;
}

/* $LOCKSCOPE_TIMEOUT (seconds, 0: no limit) into @c; 0, or an exit code after saying why */
static int read_timeout(struct cli *c)
{
	const char *env = getenv("LOCKSCOPE_TIMEOUT");
	char *end;
	long s;

	c->timeout_ms = DEFAULT_TIMEOUT_S * 1000;
	if (!env || !*env)
		return 0;
	errno = 0;
	s = strtol(env, &end, 10);
	if (errno || *end || s < 0 || s > INT_MAX / 1000) {
		fprintf(stderr, "lockscope: LOCKSCOPE_TIMEOUT=%s: give whole seconds to wait for lockscoped's "
			"answer (0: no limit)\n", env);
		return EXIT_USAGE;
	}
	c->timeout_ms = (int)s * 1000;
	return 0;
}

static int no_daemon(const struct cli *c, int err)
{
	struct stat st;
	struct group *gr;

	/* the daemon is there: the socket's mode keeps us out, so name the group it allows */
	if (err == -EACCES && !stat(c->socket, &st)) {
		gr = getgrgid(st.st_gid);
		fprintf(stderr, "lockscope: permission denied on %s: join group %s ('sudo usermod -aG %s "
			"$USER', then log in again) or run as root\n", c->socket,
			gr ? gr->gr_name : LS_SOCKET_GROUP, gr ? gr->gr_name : LS_SOCKET_GROUP);
		return 1;
	}
	fprintf(stderr, "lockscope: cannot reach lockscoped at %s: %s. Start it with "
		"'sudo systemctl start lockscoped' (or 'sudo lockscoped &'), or pass --socket%s\n",
		c->socket, strerror(-err),
		!strcmp(c->cmd, "scan") ? "; 'sudo lockscope scan' collects without a daemon" : "");
	return 1;
}

int main(int argc, char **argv)
{
	struct cli c = { .duration_ms = DEFAULT_SCAN_MS };
	cJSON *resp;
	int fd, err, ret, timeout_ms;

	c.socket = getenv("LOCKSCOPE_SOCKET") ? getenv("LOCKSCOPE_SOCKET") : LS_DEFAULT_SOCKET;
	c.req = cJSON_CreateObject();
	if (!c.req)
		return 1;
	/*
	 * `lockscope __render COMMAND [OPTION]... < RESPONSE.json`: a saved response printed as
	 * COMMAND would print it live (docs/samples.py keeps the docs' samples this way)
	 */
	if (argc > 2 && !strcmp(argv[1], "__render")) {
		if (cli_parse_args(argc - 1, argv + 1, &c)) {
			cJSON_Delete(c.req);
			return EXIT_USAGE;
		}
		resp = read_response(stdin);
		ret = resp ? cli_print_response(&c, resp) : 1;
		cJSON_Delete(resp);
		cJSON_Delete(c.req);
		return ret;
	}
	if (cli_parse_args(argc, argv, &c) || read_timeout(&c)) {
		cJSON_Delete(c.req);
		return EXIT_USAGE;
	}
	fd = client_connect(c.socket);
	if (fd < 0) {
		if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c.req, "cmd")), "scan") &&
		    (fd == -ENOENT || fd == -ECONNREFUSED) && geteuid() == 0)
			ret = cli_scan_embedded(&c);
		else
			ret = no_daemon(&c, fd);
		cJSON_Delete(c.req);
		return ret;
	}
	timeout_ms = c.timeout_ms;
	if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c.req, "cmd")), "scan")) {
		struct scan_watch w = { .socket = c.socket, .timeout_ms = c.timeout_ms };
		char what[64];

		/* the daemon answers when the scan is over */
		if (timeout_ms)
			timeout_ms = c.duration_ms < (uint64_t)(INT_MAX - timeout_ms) ? timeout_ms + (int)c.duration_ms : 0;

		w.pid = (uint32_t)cJSON_GetObjectItem(c.req, "pid")->valuedouble;
		snprintf(what, sizeof(what), "scan of pid %u", w.pid);
		w.progress = progress__new(what, c.duration_ms, c.quiet);
		w.base = w.progress ? daemon_waits(c.socket, c.timeout_ms, w.pid) : -1;
		resp = client_call_idle(fd, c.req, timeout_ms, &err, w.progress ? scan_idle : NULL, &w, PROGRESS_MS);
		progress__free(w.progress);
	} else {
		resp = client_call(fd, c.req, timeout_ms, &err);
	}
	close(fd);
	cJSON_Delete(c.req);
	if (!resp && err == -ETIMEDOUT) {
		fprintf(stderr, "lockscope: lockscoped at %s did not answer in %d s: it may be stuck (see its log: "
			"'journalctl -u lockscoped'); LOCKSCOPE_TIMEOUT=SECONDS waits longer, 0 without a limit\n",
			c.socket, timeout_ms / 1000);
		return 1;
	}
	if (!resp) {
		fprintf(stderr, "lockscope: no response from lockscoped at %s: %s\n", c.socket, strerror(-err));
		return 1;
	}
	ret = cli_print_response(&c, resp);
	cJSON_Delete(resp);
	return ret;
}


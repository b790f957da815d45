// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <linux/capability.h>
#include <unistd.h>
#include "engine.h"
#include "log.h"
#include "loop.h"
#include "server.h"

/* A request is small; a line longer than this is an error, not a buffer to grow. */
#define MAX_REQUEST_BYTES (64 * 1024)
#define MAX_CLIENTS 64

struct client {
	struct client *next;
	struct server *srv;
	uint64_t id;
	struct ls_peer peer;
	int fd;
	struct watch *watch;
	char in[MAX_REQUEST_BYTES];
	size_t in_len;
	bool discarding;	/* inside an overlong line: skip to its newline */
	char *out;
	size_t out_len, out_cap;
	bool closing;
};

struct server {
	struct server_opts opts;
	char *path;
	struct loop *loop;
	int fd;
	struct watch *watch;
	struct client *clients;
	int nr_clients;
	uint64_t next_id;
	gid_t gid;
	bool have_group;
};

static void client_free(struct client *c)
{
	struct server *s = c->srv;
	struct client **pp;

	for (pp = &s->clients; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	s->nr_clients--;
	if (s->opts.on_gone)
		s->opts.on_gone(s->opts.ctx, c->id);
	loop__del(s->loop, c->watch);
	close(c->fd);
	free(c->out);
	free(c);
}

static int flush(struct client *c)
{
	while (c->out_len) {
		ssize_t n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return -errno;
		}
		memmove(c->out, c->out + n, c->out_len - n);
		c->out_len -= n;
	}
	loop__mod(c->srv->loop, c->watch, EPOLLIN | (c->out_len ? EPOLLOUT : 0));
	return 0;
}

static int queue(struct client *c, cJSON *resp)
{
	char *text = cJSON_PrintUnformatted(resp);
	size_t len;

	cJSON_Delete(resp);
	if (!text)
		return -ENOMEM;
	len = strlen(text);
	if (c->out_len + len + 1 > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		char *n;

		while (cap < c->out_len + len + 1)
			cap *= 2;
		n = realloc(c->out, cap);
		if (!n) {
			free(text);
			return -ENOMEM;
		}
		c->out = n;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, text, len);
	c->out[c->out_len + len] = '\n';
	c->out_len += len + 1;
	free(text);
	return flush(c);
}

cJSON *server__request(const struct server_opts *o, uint64_t client, const struct ls_peer *peer,
		       const char *line)
{
	cJSON *req, *resp;

	req = cJSON_Parse(line);
	if (!req)
		return engine__error("malformed JSON request near byte %ld; send one JSON object per line",
				     (long)(cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() - line : 0));
	resp = o->on_request(o->ctx, client, peer, req);
	cJSON_Delete(req);
	return resp;
}

static void handle_line(struct client *c, char *line)
{
	cJSON *resp;

	if (!*line)
		return;
	resp = server__request(&c->srv->opts, c->id, &c->peer, line);
	if (resp)
		queue(c, resp);
}

static void client_read(struct client *c)
{
	ssize_t n = recv(c->fd, c->in + c->in_len, sizeof(c->in) - c->in_len, 0);
	char *nl, *start;

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		client_free(c);
		return;
	}
	if (n < 0)
		return;
	c->in_len += n;
	start = c->in;
	while ((nl = memchr(start, '\n', c->in + c->in_len - start))) {
		*nl = 0;
		if (!c->discarding)
			handle_line(c, start);
		c->discarding = false;
		start = nl + 1;
	}
	c->in_len -= start - c->in;
	memmove(c->in, start, c->in_len);
	if (c->in_len == sizeof(c->in)) {
		if (!c->discarding)
			queue(c, engine__error("request longer than %d bytes", MAX_REQUEST_BYTES));
		c->discarding = true;
		c->in_len = 0;
	}
}

static void client_event(void *ctx, uint32_t events)
{
	struct client *c = ctx;

	if (events & EPOLLOUT && flush(c)) {
		client_free(c);
		return;
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		client_read(c);
}

/*
 * The peer's supplementary groups and effective capabilities, from /proc/PID/status. The
 * pid is SO_PEERCRED's, taken at connect(): the process is blocked in or past connect()
 * and still holds the socket, so the pid names it while we look.
 */
static int peer_status(struct ls_peer *p, gid_t group, bool *in_group)
{
	char path[64], line[1024];
	unsigned long long caps;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", p->pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char *tok, *save = NULL;

		if (sscanf(line, "CapEff: %llx", &caps) == 1) {
			p->cap_sys_ptrace = caps & (1ULL << CAP_SYS_PTRACE);
			p->cap_syslog = caps & (1ULL << CAP_SYSLOG);
		}
		if (strncmp(line, "Groups:", 7))
			continue;
		for (tok = strtok_r(line + 7, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save))
			if ((gid_t)atol(tok) == group)
				*in_group = true;
	}
	fclose(f);
	return 0;
}

/* Root, the socket's group, or a supplementary member of it. */
static bool peer_allowed(const struct server *s, struct ls_peer *p)
{
	bool in_group = s->have_group && p->gid == s->gid;

	if (peer_status(p, s->have_group ? s->gid : (gid_t)-1, &in_group))
		return false;
	return p->uid == 0 || (s->have_group && in_group);
}

static void __attribute__((format(printf, 2, 3))) refuse(int fd, const char *fmt, ...)
{
	char why[256];
	cJSON *resp;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	resp = engine__error("%s", why);
	char *text = cJSON_PrintUnformatted(resp);

	if (text) {
		dprintf(fd, "%s\n", text);
		free(text);
	}
	cJSON_Delete(resp);
	close(fd);
}

static void accept_one(void *ctx, uint32_t events)
{
	struct server *s = ctx;
	struct ucred cr;
	socklen_t len = sizeof(cr);
	struct ls_peer peer = {};
	struct client *c;
	int fd;

	(void)events;
	fd = accept4(s->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len))
		peer = (struct ls_peer){ .pid = cr.pid, .uid = cr.uid, .gid = cr.gid };
	if (!peer.pid || !peer_allowed(s, &peer)) {
		pr_info("refused client uid %d pid %d: not root nor in group %s\n", peer.uid, peer.pid,
			s->opts.group);
		refuse(fd, "permission denied: run as root or join group %s", s->opts.group);
		return;
	}
	if (s->nr_clients >= MAX_CLIENTS) {
		refuse(fd, "too many clients; try again later");
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->srv = s;
	c->fd = fd;
	c->peer = peer;
	c->id = ++s->next_id;
	c->watch = loop__add(s->loop, fd, EPOLLIN, client_event, c);
	if (!c->watch) {
		close(fd);
		free(c);
		return;
	}
	c->next = s->clients;
	s->clients = c;
	s->nr_clients++;
}

/* A socket file left by a daemon that died is replaced; one that answers is not. */
static int claim_path(const struct sockaddr_un *addr)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), err = 0;

	if (fd < 0)
		return -errno;
	if (!connect(fd, (const struct sockaddr *)addr, sizeof(*addr)))
		err = -EADDRINUSE;
	else if (errno == ECONNREFUSED)
		unlink(addr->sun_path);
	close(fd);
	return err;
}

static void make_parent_dir(const char *path)
{
	char *dir = strdup(path), *slash;

	if (!dir)
		return;
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		mkdir(dir, 0755);
	}
	free(dir);
}

int server__set_group(struct server *s, const char *group)
{
	struct group *gr = getgrnam(group);

	if (!gr)
		return -ENOENT;
	if (s->have_group && gr->gr_gid == s->gid)
		return 0;
	if (chown(s->path, 0, gr->gr_gid))
		return -errno;
	s->gid = gr->gr_gid;
	s->have_group = true;
	return 0;
}

static int set_owner(struct server *s)
{
	int err = s->opts.group ? server__set_group(s, s->opts.group) : 0;

	if (err == -ENOENT)
		pr_warn("no group %s: only root may query (create it: systemd-sysusers, or groupadd %s)\n",
			s->opts.group, s->opts.group);
	else if (err)
		return err;
	return chmod(s->path, s->opts.mode) ? -errno : 0;
}

int server__new(const struct server_opts *opts, struct loop *loop, struct server **out)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct server *s;
	int err;

	if (strlen(opts->path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	strcpy(addr.sun_path, opts->path);
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->opts = *opts;
	s->loop = loop;
	s->path = strdup(opts->path);
	s->fd = -1;
	make_parent_dir(opts->path);
	if ((err = claim_path(&addr)))
		goto cleanup;
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&addr, sizeof(addr)) || listen(s->fd, 16)) {
		err = -errno;
		goto cleanup;
	}
	if ((err = set_owner(s)))
		goto cleanup;
	s->watch = loop__add(loop, s->fd, EPOLLIN, accept_one, s);
	if (!s->watch) {
		err = -errno;
		goto cleanup;
	}
	*out = s;
	return 0;
cleanup:
	server__free(s);
	return err;
}

void server__reply(struct server *s, uint64_t client, cJSON *resp)
{
	struct client *c;

	for (c = s->clients; c; c = c->next) {
		if (c->id == client) {
			queue(c, resp);
			return;
		}
	}
	cJSON_Delete(resp);
}

void server__free(struct server *s)
{
	if (!s)
		return;
	while (s->clients)
		client_free(s->clients);
	loop__del(s->loop, s->watch);
	if (s->fd >= 0) {
		close(s->fd);
		unlink(s->path);
	}
	free(s->path);
	free(s);
}

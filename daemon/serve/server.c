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
#include "api/engine.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "serve/loop.h"
#include "serve/server.h"

/* A request is small; a line longer than this is an error, not a buffer to grow. */
#define MAX_REQUEST_BYTES (64 * 1024)
#define IN_BUF_MIN 4096
/*
 * Connections: enough for every user's tools and dashboards at once; one user who is not
 * root may hold a share only, so that no member can lock the others out by holding idle
 * connections open (root is trusted: it can stop the daemon anyway).
 */
#define MAX_CLIENTS 1024
#define MAX_CLIENTS_PER_UID 32
/*
 * A client reads each response before the next request is read (one is pending at most);
 * one that reads nothing of it for this long is cut off, so a stuck client costs one
 * response of memory for a bounded time.
 */
#define STALL_NS (10 * 1000000000ULL)

struct client {
	struct client *next;
	struct server *srv;
	uint64_t id;
	struct ls_peer peer;
	int fd;
	struct watch *watch;
	char *in;		/* read, not yet handled; grows to MAX_REQUEST_BYTES */
	size_t in_len, in_cap;
	bool discarding;	/* inside an overlong line: skip to its newline */
	bool read_closed;	/* the client shut its side down: answer what it asked, then close */
	unsigned int deferred;	/* responses the engine still owes (scans running) */
	char *out;
	size_t out_len, out_cap;
	uint64_t out_since_ns;	/* when the pending output last moved */
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
	struct server_stats stats;
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
	free(c->in);
	free(c->out);
	free(c);
}

/* Reads only while nothing is pending out and the client may still send. */
static void client_watch(struct client *c)
{
	loop__mod(c->srv->loop, c->watch, (c->out_len ? EPOLLOUT : 0) |
		  (!c->out_len && !c->read_closed ? EPOLLIN : 0));
}

/* A half-closed client is done once everything it asked for is sent. */
static bool client_done(const struct client *c)
{
	return c->read_closed && !c->out_len && !c->deferred;
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
		c->out_since_ns = ls_now_ns();
	}
	client_watch(c);
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
	if (!c->out_len)
		c->out_since_ns = ls_now_ns();
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
	if (!resp) {
		c->deferred++;
		return;
	}
	if (queue(c, resp))
		c->read_closed = true;	/* cannot answer: take no more, close when done */
}

/* Handles the complete lines read, one at a time: the next only once its answer is sent. */
static void handle_lines(struct client *c)
{
	char *nl;
	size_t used = 0;

	while (!c->out_len && (nl = memchr(c->in + used, '\n', c->in_len - used))) {
		*nl = 0;
		if (!c->discarding)
			handle_line(c, c->in + used);
		c->discarding = false;
		used = nl + 1 - c->in;
	}
	c->in_len -= used;
	memmove(c->in, c->in + used, c->in_len);
}

/* Room for the next read: the buffer grows to MAX_REQUEST_BYTES, a longer line is refused. */
static bool in_room(struct client *c)
{
	size_t cap = c->in_cap ? c->in_cap * 2 : IN_BUF_MIN;
	char *n;

	if (c->in_len < c->in_cap)
		return true;
	if (c->in_cap >= MAX_REQUEST_BYTES) {
		if (!c->discarding) {
			c->srv->stats.overlong++;
			queue(c, engine__error("request longer than %d bytes", MAX_REQUEST_BYTES));
		}
		c->discarding = true;
		c->in_len = 0;
		return true;
	}
	n = realloc(c->in, cap);
	if (!n)
		return false;
	c->in = n;
	c->in_cap = cap;
	return true;
}

static void client_read(struct client *c, uint32_t events)
{
	ssize_t n;

	if (!in_room(c)) {
		client_free(c);
		return;
	}
	n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0 || (n == 0 && events & EPOLLHUP)) {
		client_free(c);		/* gone both ways: nothing it asked for can reach it */
		return;
	}
	if (n == 0) {
		c->read_closed = true;	/* shutdown(SHUT_WR): the requests so far still get answers */
		if (client_done(c))
			client_free(c);
		else
			client_watch(c);
		return;
	}
	c->in_len += n;
	handle_lines(c);
	if (client_done(c))
		client_free(c);
}

static void client_event(void *ctx, uint32_t events)
{
	struct client *c = ctx;

	if (client_done(c)) {
		client_free(c);
		return;
	}
	if (c->out_len) {
		if (flush(c) || (events & (EPOLLHUP | EPOLLERR) && c->out_len)) {
			client_free(c);
			return;
		}
		if (c->out_len)
			return;
		/* answered: the lines read meanwhile are next */
		handle_lines(c);
		if (client_done(c))
			client_free(c);
		return;
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		client_read(c, events);
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
	/*
	 * Closing a Unix socket with unread data resets the connection, and the client may read
	 * the reset before the reason: say it is the end, and take what was already sent.
	 */
	shutdown(fd, SHUT_WR);
	while (recv(fd, why, sizeof(why), MSG_DONTWAIT) > 0)
		;
	close(fd);
}

static int uid_clients(const struct server *s, uid_t uid)
{
	const struct client *c;
	int n = 0;

	for (c = s->clients; c; c = c->next)
		n += c->peer.uid == uid;
	return n;
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
		s->stats.refused_access++;
		refuse(fd, "permission denied: run as root or join group %s", s->opts.group);
		return;
	}
	if (peer.uid && uid_clients(s, peer.uid) >= MAX_CLIENTS_PER_UID) {
		s->stats.refused_busy++;
		refuse(fd, "uid %u already has %d connections open; close idle ones and try again",
		       peer.uid, MAX_CLIENTS_PER_UID);
		return;
	}
	if (s->nr_clients >= MAX_CLIENTS) {
		s->stats.refused_busy++;
		refuse(fd, "%d clients connected, the most served at once; try again later", MAX_CLIENTS);
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
	s->stats.accepted++;
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
	/* the owner stays whoever runs the daemon (root, or a user with capabilities only) */
	if (chown(s->path, -1, gr->gr_gid))
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
	/*
	 * Not root, not in the group and without CAP_CHOWN (a daemon given only the tracing
	 * capabilities): it serves its own user and root; the group's members are refused.
	 */
	else if (err == -EPERM)
		pr_warn("cannot give the socket to group %s (not a member, no CAP_CHOWN): only uid %u and root "
			"may query\n", s->opts.group, geteuid());
	else if (err)
		return err;
	return chmod(s->path, s->opts.mode) ? -errno : 0;
}

/*
 * Whoever may write the socket's directory may replace the socket with one of their own
 * and read what root's tools send it: only this user (or root) may, or the sticky bit
 * (as on /tmp) must keep others from renaming it.
 */
static int check_dir(const char *path)
{
	char *dir = strdup(path), *slash;
	struct stat st;
	int err = 0;

	if (!dir)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash)
		*(slash == dir ? slash + 1 : slash) = 0;
	if (stat(slash ? dir : ".", &st))
		err = -errno;
	else if ((st.st_uid && st.st_uid != geteuid()) ||
		 ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))) {
		pr_err("socket directory %s (mode %04o, uid %u) may be written by other users, who could "
		       "replace the socket: use one only root writes, e.g. the default /run/lockscope\n",
		       slash ? dir : ".", st.st_mode & 07777, st.st_uid);
		err = -EPERM;
	}
	free(dir);
	return err;
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
	if ((err = check_dir(opts->path)) || (err = claim_path(&addr)))
		goto cleanup;
	s->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->fd < 0 || bind(s->fd, (struct sockaddr *)&addr, sizeof(addr)) || listen(s->fd, SOMAXCONN)) {
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
			if (c->deferred)
				c->deferred--;
			if (queue(c, resp))
				c->read_closed = true;
			/*
			 * A scan may end while this client's own request is being handled: the
			 * loop closes it, on the EPOLLOUT an empty socket raises at once.
			 */
			if (client_done(c))
				loop__mod(s->loop, c->watch, EPOLLOUT);
			return;
		}
	}
	cJSON_Delete(resp);
}

void server__tick(struct server *s, uint64_t now_ns)
{
	struct client *c, *next;

	for (c = s->clients; c; c = next) {
		next = c->next;
		if (c->out_len && now_ns - c->out_since_ns > STALL_NS) {
			pr_info("client uid %d pid %d read nothing of its response for %llu s: cut off\n",
				c->peer.uid, c->peer.pid, STALL_NS / 1000000000ULL);
			s->stats.cut_off++;
			client_free(c);
		}
	}
}

void server__stats(const struct server *s, struct server_stats *out)
{
	*out = s->stats;
	out->connected = s->nr_clients;
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

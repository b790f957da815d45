// SPDX-License-Identifier: GPL-2.0
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>
#include "lib/log.h"
#include "serve/loop.h"
#include "serve/metrics.h"

/* A scrape request is a few hundred bytes; a client that sends more is not a scraper. */
#define REQUEST_MAX 4096
/* Scrapers are few; when full, the oldest connection (likely idle) makes room. */
#define CONNS_MAX 16

struct conn {
	struct metrics *m;
	int fd;
	struct watch *watch;
	char req[REQUEST_MAX];
	size_t req_len;
	char *out;		/* the response, headers included */
	size_t out_len, out_off;
	unsigned long seq;	/* accept order: the smallest is the oldest */
};

struct metrics {
	struct loop *loop;
	int fd;
	struct watch *watch;
	metrics_produce_fn produce;
	void *ctx;
	struct conn *conns[CONNS_MAX];
	unsigned long seq;
};

int metrics_parse_listen(const char *s, void *storage, unsigned int *len)
{
	struct sockaddr_in *in4 = storage;
	struct sockaddr_in6 *in6 = storage;
	char host[64];
	const char *colon = strrchr(s, ':');
	unsigned long port;
	char *end;
	size_t n;

	if (!colon || colon == s)
		return -EINVAL;
	port = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || !port || port > 65535)
		return -EINVAL;
	n = colon - s;
	if (s[0] == '[') {	/* [v6]:port */
		if (n < 3 || s[n - 1] != ']' || n - 2 >= sizeof(host))
			return -EINVAL;
		memcpy(host, s + 1, n - 2);
		host[n - 2] = 0;
		memset(in6, 0, sizeof(*in6));
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		*len = sizeof(*in6);
		return inet_pton(AF_INET6, host, &in6->sin6_addr) == 1 ? 0 : -EINVAL;
	}
	if (n >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = 0;
	memset(in4, 0, sizeof(*in4));
	in4->sin_family = AF_INET;
	in4->sin_port = htons(port);
	*len = sizeof(*in4);
	return inet_pton(AF_INET, host, &in4->sin_addr) == 1 ? 0 : -EINVAL;
}

static void conn_free(struct conn *c)
{
	int i;

	for (i = 0; i < CONNS_MAX; i++)
		if (c->m->conns[i] == c)
			c->m->conns[i] = NULL;
	loop__del(c->m->loop, c->watch);
	close(c->fd);
	free(c->out);
	free(c);
}

/* HEAD gets GET's headers, Content-Length included, without the body. */
static void respond(struct conn *c, const char *status, const char *type, const char *body, size_t len,
		    bool head)
{
	FILE *f = open_memstream(&c->out, &c->out_len);

	if (!f)
		return;
	fprintf(f, "HTTP/1.0 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
		status, type, len);
	if (!head)
		fwrite(body, 1, len, f);
	fclose(f);
}

/* The request line decides; headers are read to their end and ignored. */
static void handle_request(struct conn *c)
{
	bool head = !strncmp(c->req, "HEAD ", 5);
	const char *path = c->req + (head ? 5 : 4);
	char *body;
	size_t len;

	if (!head && strncmp(c->req, "GET ", 4)) {
		respond(c, "405 Method Not Allowed", "text/plain", "GET /metrics\n", 13, false);
		return;
	}
	if (strncmp(path, "/metrics ", 9) && strncmp(path, "/metrics?", 9)) {
		respond(c, "404 Not Found", "text/plain", "lockscoped serves /metrics\n", 27, head);
		return;
	}
	body = c->m->produce(c->m->ctx, &len);
	if (!body) {
		respond(c, "500 Internal Server Error", "text/plain", "out of memory\n", 14, head);
		return;
	}
	respond(c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", body, len, head);
	free(body);
}

static void conn_event(void *ctx, uint32_t events)
{
	struct conn *c = ctx;
	ssize_t n;

	if (!c->out && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
		n = recv(c->fd, c->req + c->req_len, sizeof(c->req) - 1 - c->req_len, 0);
		if (n <= 0) {
			if (n == 0 || (errno != EAGAIN && errno != EINTR))
				conn_free(c);
			return;
		}
		c->req_len += n;
		c->req[c->req_len] = 0;
		if (!strstr(c->req, "\r\n\r\n") && !strstr(c->req, "\n\n")) {
			if (c->req_len == sizeof(c->req) - 1)
				conn_free(c);
			return;
		}
		handle_request(c);
		if (!c->out || loop__mod(c->m->loop, c->watch, EPOLLOUT)) {
			conn_free(c);
			return;
		}
	}
	while (c->out && c->out_off < c->out_len) {
		n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			break;
		}
		c->out_off += n;
	}
	if (c->out)
		conn_free(c);
}

static void accept_one(void *ctx, uint32_t events)
{
	struct metrics *m = ctx;
	struct conn *c;
	int fd, i, slot = -1, oldest = -1;

	(void)events;
	fd = accept4(m->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (fd < 0)
		return;
	for (i = 0; i < CONNS_MAX && slot < 0; i++) {
		if (!m->conns[i])
			slot = i;
		else if (oldest < 0 || m->conns[i]->seq < m->conns[oldest]->seq)
			oldest = i;
	}
	if (slot < 0) {
		conn_free(m->conns[oldest]);
		slot = oldest;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return;
	}
	c->m = m;
	c->fd = fd;
	c->seq = ++m->seq;
	c->watch = loop__add(m->loop, fd, EPOLLIN, conn_event, c);
	if (!c->watch) {
		close(fd);
		free(c);
		return;
	}
	m->conns[slot] = c;
}

int metrics__new(const char *listen_at, struct loop *loop, metrics_produce_fn produce, void *ctx,
		 struct metrics **out)
{
	struct sockaddr_storage ss;
	unsigned int len;
	struct metrics *m;
	int one = 1, err;

	if ((err = metrics_parse_listen(listen_at, &ss, &len)))
		return err;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->loop = loop;
	m->produce = produce;
	m->ctx = ctx;
	m->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (m->fd < 0 || setsockopt(m->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(m->fd, (struct sockaddr *)&ss, len) || listen(m->fd, CONNS_MAX)) {
		err = -errno;
		goto cleanup;
	}
	m->watch = loop__add(loop, m->fd, EPOLLIN, accept_one, m);
	if (!m->watch) {
		err = -errno;
		goto cleanup;
	}
	*out = m;
	return 0;
cleanup:
	metrics__free(m);
	return err;
}

void metrics__free(struct metrics *m)
{
	int i;

	if (!m)
		return;
	for (i = 0; i < CONNS_MAX; i++)
		if (m->conns[i])
			conn_free(m->conns[i]);
	loop__del(m->loop, m->watch);
	if (m->fd >= 0)
		close(m->fd);
	free(m);
}

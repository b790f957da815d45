// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "client.h"

int client_connect(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr))) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

static int send_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= n;
	}
	return 0;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * One line from @fd, waiting @timeout_ms at most (0: no limit) and calling @idle(@ctx)
 * every @idle_ms meanwhile (when set).
 */
static char *read_line(int fd, int timeout_ms, int *err, void (*idle)(void *ctx), void *ctx, int idle_ms)
{
	int64_t deadline = timeout_ms ? now_ms() + timeout_ms : 0;
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap), *nl;

	while (buf) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int wait_ms = idle ? idle_ms : -1, ready;
		ssize_t n;

		if (deadline) {
			int64_t left = deadline - now_ms();

			if (left <= 0) {
				*err = -ETIMEDOUT;
				free(buf);
				return NULL;
			}
			if (wait_ms < 0 || left < wait_ms)
				wait_ms = (int)left;
		}
		ready = poll(&pfd, 1, wait_ms);
		if (ready < 0 && errno != EINTR) {
			*err = -errno;
			free(buf);
			return NULL;
		}
		if (ready <= 0) {
			if (idle && ready == 0)
				idle(ctx);
			continue;
		}
		if (len + 1 >= cap) {
			char *b = realloc(buf, cap * 2);

			if (!b)
				break;
			buf = b;
			cap *= 2;
		}
		n = recv(fd, buf + len, cap - len - 1, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			*err = n ? -errno : -ECONNRESET;
			free(buf);
			return NULL;
		}
		len += n;
		buf[len] = 0;
		if ((nl = strchr(buf, '\n'))) {
			*nl = 0;
			return buf;
		}
	}
	free(buf);
	*err = -ENOMEM;
	return NULL;
}

cJSON *client_call(int fd, const cJSON *req, int timeout_ms, int *err)
{
	return client_call_idle(fd, req, timeout_ms, err, NULL, NULL, 0);
}

cJSON *client_call_idle(int fd, const cJSON *req, int timeout_ms, int *err, void (*idle)(void *ctx), void *ctx,
			int idle_ms)
{
	char *text = cJSON_PrintUnformatted(req), *line;
	cJSON *resp;
	size_t len;

	if (!text) {
		*err = -ENOMEM;
		return NULL;
	}
	len = strlen(text);
	text[len] = '\n';	/* overwrite the NUL: send length-delimited */
	*err = send_all(fd, text, len + 1);
	free(text);
	/* a daemon that refuses a client answers and closes before reading: read its reason */
	if (*err && *err != -EPIPE)
		return NULL;
	line = read_line(fd, timeout_ms, err, idle, ctx, idle_ms);
	if (!line)
		return NULL;
	resp = cJSON_Parse(line);
	free(line);
	if (!resp)
		*err = -EPROTO;
	return resp;
}

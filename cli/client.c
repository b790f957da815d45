// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static char *read_line(int fd, int *err, void (*idle)(void *ctx), void *ctx, int idle_ms)
{
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap), *nl;

	while (buf) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (idle && !poll(&pfd, 1, idle_ms)) {
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

cJSON *client_call(int fd, const cJSON *req, int *err)
{
	return client_call_idle(fd, req, err, NULL, NULL, 0);
}

cJSON *client_call_idle(int fd, const cJSON *req, int *err, void (*idle)(void *ctx), void *ctx, int idle_ms)
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
	line = read_line(fd, err, idle, ctx, idle_ms);
	if (!line)
		return NULL;
	resp = cJSON_Parse(line);
	free(line);
	if (!resp)
		*err = -EPROTO;
	return resp;
}

// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include "serve/notify.h"

struct notify {
	int fd;
	struct sockaddr_un addr;
	socklen_t addr_len;
	unsigned int watchdog_ms;
};

/* $WATCHDOG_USEC applies to us only if $WATCHDOG_PID is unset or names this process. */
static unsigned int watchdog_ms(void)
{
	const char *usec = getenv("WATCHDOG_USEC"), *pid = getenv("WATCHDOG_PID");
	unsigned long long us;
	char *end;

	if (!usec || (pid && strtol(pid, NULL, 10) != getpid()))
		return 0;
	errno = 0;
	us = strtoull(usec, &end, 10);
	if (errno || *end || !us)
		return 0;
	/* half the timeout, as sd_watchdog_enabled(3) advises; at least 1 ms */
	return us / 2000 ? us / 2000 : 1;
}

int notify__new(struct notify **out)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct notify *n;
	size_t len;

	*out = NULL;
	if (!path || !*path)
		return 0;
	len = strlen(path);
	/* a path, or an abstract name written with a leading '@' */
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(n->addr.sun_path))
		return -EINVAL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return -ENOMEM;
	n->addr.sun_family = AF_UNIX;
	memcpy(n->addr.sun_path, path, len);
	if (path[0] == '@')
		n->addr.sun_path[0] = '\0';
	n->addr_len = offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/');
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (n->fd < 0) {
		int err = -errno;

		free(n);
		return err;
	}
	n->watchdog_ms = watchdog_ms();
	*out = n;
	return 0;
}

void notify__free(struct notify *n)
{
	if (!n)
		return;
	close(n->fd);
	free(n);
}

int notify__send(struct notify *n, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int len;

	if (!n)
		return 0;
	va_start(ap, fmt);
	len = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (len < 0 || (size_t)len >= sizeof(msg))
		return -EMSGSIZE;
	if (sendto(n->fd, msg, len, MSG_NOSIGNAL, (struct sockaddr *)&n->addr, n->addr_len) < 0)
		return -errno;
	return 0;
}

unsigned int notify__watchdog_ms(const struct notify *n)
{
	return n ? n->watchdog_ms : 0;
}

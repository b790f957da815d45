// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include "serve/loop.h"

enum { LOOP_MAX_EVENTS = 32 };

struct watch {
	int fd;
	watch_fn fn;
	void *ctx;
	bool dead;
	struct watch *prev, *next;	/* in the loop's live list, or next in its dead one */
};

struct loop {
	int epfd;
	bool stop;
	bool dispatching;
	struct watch *live;	/* every watch not deleted: freed with the loop */
	struct watch *dead;	/* freed after the batch that may still point at them */
};

struct loop *loop__new(void)
{
	struct loop *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (l->epfd < 0) {
		free(l);
		return NULL;
	}
	return l;
}

static void free_list(struct watch *w)
{
	while (w) {
		struct watch *next = w->next;

		free(w);
		w = next;
	}
}

static void reap(struct loop *l)
{
	free_list(l->dead);
	l->dead = NULL;
}

/* Frees the loop and every watch still in it; their fds are their owners' to close. */
void loop__free(struct loop *l)
{
	if (!l)
		return;
	reap(l);
	free_list(l->live);
	close(l->epfd);
	free(l);
}

struct watch *loop__add(struct loop *l, int fd, uint32_t events, watch_fn fn, void *ctx)
{
	struct epoll_event ev = { .events = events };
	struct watch *w = calloc(1, sizeof(*w));

	if (!w)
		return NULL;
	w->fd = fd;
	w->fn = fn;
	w->ctx = ctx;
	ev.data.ptr = w;
	if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, fd, &ev)) {
		free(w);
		return NULL;
	}
	w->next = l->live;
	if (l->live)
		l->live->prev = w;
	l->live = w;
	return w;
}

int loop__mod(struct loop *l, struct watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };

	return epoll_ctl(l->epfd, EPOLL_CTL_MOD, w->fd, &ev) ? -errno : 0;
}

void loop__del(struct loop *l, struct watch *w)
{
	if (!w)
		return;
	epoll_ctl(l->epfd, EPOLL_CTL_DEL, w->fd, NULL);
	if (w->prev)
		w->prev->next = w->next;
	else
		l->live = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->dead = true;
	w->prev = NULL;
	w->next = l->dead;
	l->dead = w;
	if (!l->dispatching)
		reap(l);
}

int loop__run(struct loop *l)
{
	struct epoll_event evs[LOOP_MAX_EVENTS];
	int n, i;

	l->stop = false;
	while (!l->stop) {
		n = epoll_wait(l->epfd, evs, LOOP_MAX_EVENTS, -1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		l->dispatching = true;
		for (i = 0; i < n; i++) {
			struct watch *w = evs[i].data.ptr;

			if (!w->dead)
				w->fn(w->ctx, evs[i].events);
		}
		l->dispatching = false;
		reap(l);
	}
	return 0;
}

void loop__stop(struct loop *l)
{
	l->stop = true;
}

int ls_timerfd(unsigned int period_ms)
{
	struct itimerspec its = {
		.it_interval = { period_ms / 1000, (period_ms % 1000) * 1000000L },
		.it_value = { period_ms / 1000, (period_ms % 1000) * 1000000L },
	};
	int fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);

	if (fd < 0)
		return -errno;
	if (timerfd_settime(fd, 0, &its, NULL)) {
		int err = -errno;

		close(fd);
		return err;
	}
	return fd;
}

void ls_timerfd_ack(int fd)
{
	uint64_t expirations;

	if (read(fd, &expirations, sizeof(expirations)) < 0) {
		/* EAGAIN: nothing to acknowledge */
	}
}

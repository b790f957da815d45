/* SPDX-License-Identifier: GPL-2.0 */
/* One epoll loop: every fd the daemon waits on (rings, sockets, timer, signals) is a watch. */
#ifndef __LS_LOOP_H
#define __LS_LOOP_H

#include <stdbool.h>
#include <stdint.h>

struct loop;
struct watch;

typedef void (*watch_fn)(void *ctx, uint32_t events);

struct loop *loop__new(void);
void loop__free(struct loop *l);
/* Watches @fd for @events (EPOLLIN...); the loop does not own @fd. */
struct watch *loop__add(struct loop *l, int fd, uint32_t events, watch_fn fn, void *ctx);
int loop__mod(struct loop *l, struct watch *w, uint32_t events);
void loop__del(struct loop *l, struct watch *w);
/* Runs until loop__stop(); returns 0 or a negative errno from epoll_wait. */
int loop__run(struct loop *l);
void loop__stop(struct loop *l);

/* A periodic timerfd; returns the fd (caller closes) or -errno. */
int ls_timerfd(unsigned int period_ms);
/* Drains a timerfd's expiration count. */
void ls_timerfd_ack(int fd);

#endif

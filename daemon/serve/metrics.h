/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The metrics listener (metrics-listen = ADDR:PORT, off by default): a minimal HTTP/1.0
 * server in the daemon's loop answering GET /metrics with Prometheus text, for scrapers
 * (a Kubernetes pod's metrics port). One response per connection, then close.
 */
#ifndef __LS_METRICS_H
#define __LS_METRICS_H

#include <stddef.h>

struct loop;
struct metrics;

/* Returns the exposition text in a malloc'd buffer (*len bytes), or NULL. */
typedef char *(*metrics_produce_fn)(void *ctx, size_t *len);

/* Parses "ADDR:PORT" ("127.0.0.1:9464", "[::1]:9464", "0.0.0.0:9464"); -EINVAL if not one. */
int metrics_parse_listen(const char *s, void *sockaddr_storage, unsigned int *len);
int metrics__new(const char *listen, struct loop *loop, metrics_produce_fn produce, void *ctx,
		 struct metrics **out);
void metrics__free(struct metrics *m);

#endif

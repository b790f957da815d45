/* SPDX-License-Identifier: GPL-2.0 */
/* The CLI's side of the socket: connect, one request line out, one response line in. */
#ifndef __LS_CLIENT_H
#define __LS_CLIENT_H

#include <cjson/cJSON.h>

/* Returns a connected fd or -errno (-ENOENT/-ECONNREFUSED: no daemon there). */
int client_connect(const char *path);
/*
 * Sends @req and waits for the response, @timeout_ms at most (0: as long as it takes);
 * returns it or NULL with *err set (-ETIMEDOUT: no answer in time).
 */
cJSON *client_call(int fd, const cJSON *req, int timeout_ms, int *err);
/* The same, calling @idle(@ctx) every @idle_ms while the response has not come. */
cJSON *client_call_idle(int fd, const cJSON *req, int timeout_ms, int *err, void (*idle)(void *ctx), void *ctx,
			int idle_ms);

#endif

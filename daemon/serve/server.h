/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The Unix-socket server: one JSON request per line in, one JSON response per line out.
 * Peers are checked with SO_PEERCRED. Responses may be deferred (a scan answers when it
 * ends) and are then sent with server__reply().
 */
#ifndef __LS_SERVER_H
#define __LS_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <cjson/cJSON.h>
#include "api/peer.h"

#define LS_DEFAULT_SOCKET "/run/lockscope/lockscope.sock"
#define LS_SOCKET_GROUP "lockscope"

struct server;
struct loop;

/* Returns the response (the server frees it), or NULL when it will come later. */
typedef cJSON *(*server_request_fn)(void *ctx, uint64_t client, const struct ls_peer *peer,
				    const cJSON *req);
typedef void (*server_gone_fn)(void *ctx, uint64_t client);

struct server_opts {
	const char *path;
	const char *group;	/* socket group when it exists; members may query */
	mode_t mode;
	server_request_fn on_request;
	server_gone_fn on_gone;
	void *ctx;
};

int server__new(const struct server_opts *opts, struct loop *loop, struct server **out);
/*
 * One request line (without its newline) to its response, NULL when it comes later: what
 * the socket does with each line it reads, and the request fuzzer's entry point.
 */
cJSON *server__request(const struct server_opts *o, uint64_t client, const struct ls_peer *peer,
		       const char *line);
/* Sends a deferred response; drops it when the client has gone. Takes @resp. */
void server__reply(struct server *s, uint64_t client, cJSON *resp);

/* What happened to connections since start: `status` shows it. */
struct server_stats {
	uint64_t connected;	/* open now */
	uint64_t accepted;
	uint64_t refused_access;	/* not root, not in the group */
	uint64_t refused_busy;	/* the connection limits: per user, and in all */
	uint64_t cut_off;	/* read nothing of a response for the stall limit */
	uint64_t overlong;	/* request lines over the size limit */
};

/* Cuts off clients that read nothing of their response for too long; call from a timer. */
void server__tick(struct server *s, uint64_t now_ns);
void server__stats(const struct server *s, struct server_stats *out);
/*
 * Gives the socket to @group (a SIGHUP's new socket-group); -ENOENT if there is none,
 * -EPERM if this process may not (not a member, no CAP_CHOWN).
 */
int server__set_group(struct server *s, const char *group);
void server__free(struct server *s);

#endif

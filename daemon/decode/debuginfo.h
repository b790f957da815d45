/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Separate debug files fetched from debuginfod servers (elfutils' libdebuginfod), for the
 * modules whose symbols the machine lacks: glibc's internals (__lll_lock_wait,
 * start_thread) are unnamed without libc6-dbg. The servers are the ones DEBUGINFOD_URLS
 * names, as for every elfutils tool; without it nothing is fetched.
 *
 * Downloads run on a worker thread, never on the caller's event loop: debuginfo__want()
 * queues a build id, debuginfo__poll() reports the fetches that finished. A fetched file
 * is linked as DIR/.build-id/xx/yyyy.debug, the layout symbolizers search, so the caller
 * adds DIR to its debug directories.
 */
#ifndef __LS_DEBUGINFO_H
#define __LS_DEBUGINFO_H

#include <stdbool.h>
#include <stdint.h>

struct debuginfo;

struct debuginfo_opts {
	const char *dir;	/* state directory: libdebuginfod's cache and the .build-id links */
	const char *urls;	/* NULL: $DEBUGINFOD_URLS; "" or unset: off */
};

struct debuginfo_stats {
	uint64_t requested;	/* build ids queued */
	uint64_t fetched;	/* debug files now in the directory */
	uint64_t failed;	/* servers had none, or were unreachable */
	uint64_t pending;	/* queued or downloading */
};

/* Fetch results, for debuginfo__poll(): @err is 0 or the fetch's negative errno. */
typedef void (*debuginfo_done_fn)(void *ctx, const char *build_id, int err);

/*
 * -ENOENT when no server is configured (*out stays NULL: symbols come from the machine
 * only); another negative errno when the directory cannot be made or the thread started.
 */
int debuginfo__new(const struct debuginfo_opts *opts, struct debuginfo **out);
void debuginfo__free(struct debuginfo *d);
/* The directory to search for DIR/.build-id/xx/yyyy.debug. */
const char *debuginfo__dir(const struct debuginfo *d);
/* The servers asked, as configured. */
const char *debuginfo__urls(const struct debuginfo *d);
/* Queues a fetch of @build_id (lowercase hex) unless it was asked for before. */
void debuginfo__want(struct debuginfo *d, const char *build_id);
/* Calls @fn for each fetch finished since the last poll; returns how many. */
int debuginfo__poll(struct debuginfo *d, debuginfo_done_fn fn, void *ctx);
void debuginfo__stats(struct debuginfo *d, struct debuginfo_stats *out);

#endif

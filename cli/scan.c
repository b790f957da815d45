// SPDX-License-Identifier: GPL-2.0
/*
 * `lockscope scan` without a daemon: the engine runs in-process (the api layer), on a
 * loop of its own, until the deadline or the process's exit, with a progress line.
 */
#include <signal.h>
#include <sys/epoll.h>
#include "api/engine.h"
#include "lib/log.h"
#include "serve/loop.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "lib/clock.h"
#include "lib/jsonget.h"
#include "cli.h"
#include "progress.h"
#include "render.h"

/* ---- scan without a daemon: the same engine, in this process ---- */

struct embedded {
	struct engine *engine;
	struct loop *loop;
	int timerfd, sigfd;
	uint64_t deadline_ns, shown_ns;
	uint32_t pid;
	bool exited;
	struct progress *progress;
};

/* The waits this engine counted (it sees only the scanned process). */
static int64_t embedded_waits(struct engine *e)
{
	cJSON *req = cJSON_CreateObject(), *resp, *ev;
	int64_t n = -1;

	if (!req)
		return -1;
	cJSON_AddStringToObject(req, "cmd", "status");
	resp = engine__handle(e, 0, NULL, req);
	ev = cJSON_GetObjectItem(resp, "events");
	if (ev)
		n = (int64_t)(ls_json_num(ev, "waits") + ls_json_num(ev, "futex_waits"));
	cJSON_Delete(resp);
	cJSON_Delete(req);
	return n;
}

static void emb_tick(void *ctx, uint32_t events)
{
	struct embedded *em = ctx;

	(void)events;
	ls_timerfd_ack(em->timerfd);
	engine__tick(em->engine);
	if (em->progress && ls_now_ns() - em->shown_ns >= PROGRESS_MS * 1000000ULL) {
		em->shown_ns = ls_now_ns();
		progress__update(em->progress, embedded_waits(em->engine));
	}
	em->exited = kill(em->pid, 0) && errno == ESRCH;
	if (em->exited || ls_now_ns() >= em->deadline_ns)
		loop__stop(em->loop);
}

static void emb_rings(void *ctx, uint32_t events)
{
	(void)events;
	engine__consume(((struct embedded *)ctx)->engine);
}

static void emb_reply(void *ctx, uint64_t client, cJSON *resp)
{
	(void)ctx;
	(void)client;
	cJSON_Delete(resp);
}

int cli_scan_embedded(struct cli *c)
{
	struct embedded em = { .timerfd = -1 };
	struct engine_opts eo;
	char what[64];
	cJSON *resp = NULL, *top;
	int err, ret = 1;

	em.pid = (uint32_t)cJSON_GetObjectItem(c->req, "pid")->valuedouble;
	if (kill(em.pid, 0) && errno == ESRCH) {
		fprintf(stderr, "lockscope: no process with pid %u\n", em.pid);
		return 1;
	}
	engine_opts__init(&eo);
	eo.windows = false;
	eo.collector.tgid = em.pid;
	eo.precise_pid = c->precise ? em.pid : 0;
	ls_log_max = LS_LOG_WARN;
	err = engine__new(&eo, emb_reply, NULL, &em.engine);
	if (err) {
		fprintf(stderr, "lockscope: cannot load the BPF collector: %s\n", strerror(-err));
		return 1;
	}
	fprintf(stderr, "lockscope: no daemon at %s; collecting in-process for %llu ms\n",
		c->socket, (unsigned long long)c->duration_ms);
	em.loop = loop__new();
	em.timerfd = ls_timerfd(ENGINE_TICK_MS);
	em.deadline_ns = ls_now_ns() + c->duration_ms * 1000000ULL;
	if (!em.loop || em.timerfd < 0 ||
	    !loop__add(em.loop, em.timerfd, EPOLLIN, emb_tick, &em) ||
	    !loop__add(em.loop, engine__epoll_fd(em.engine), EPOLLIN, emb_rings, &em)) {
		fprintf(stderr, "lockscope: cannot set up the event loop\n");
		goto cleanup;
	}
	snprintf(what, sizeof(what), "scan of pid %u", em.pid);
	em.progress = progress__new(what, c->duration_ms, c->quiet);
	loop__run(em.loop);
	progress__free(em.progress);
	engine__consume(em.engine);
	/* the report is the daemon's "top" over everything this engine saw */
	top = cJSON_Duplicate(c->req, true);
	cJSON_ReplaceItemInObject(top, "cmd", cJSON_CreateString(cJSON_GetObjectItem(top, "format") ? "export" : "top"));
	cJSON_DeleteItemFromObject(top, "duration_ms");
	cJSON_DeleteItemFromObject(top, "precise");
	cJSON_DeleteItemFromObject(top, "window");
	cJSON_AddStringToObject(top, "window", "all");
	resp = engine__handle(em.engine, 0, NULL, top);
	cJSON_Delete(top);
	if (resp) {
		cJSON_ReplaceItemInObject(resp, "cmd", cJSON_CreateString("scan"));
		cJSON_AddBoolToObject(resp, "process_exited", em.exited);
		cJSON_AddBoolToObject(resp, "embedded", true);
		cJSON_AddBoolToObject(resp, "precise", c->precise);
		ret = cli_print_response(c, resp);
	}
cleanup:
	cJSON_Delete(resp);
	if (em.timerfd >= 0)
		close(em.timerfd);
	loop__free(em.loop);
	engine__free(em.engine);
	return ret;
}

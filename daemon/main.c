// SPDX-License-Identifier: GPL-2.0
/* lockscoped: load the lock probes, aggregate, serve the socket. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include "config.h"
#include "engine.h"
#include "log.h"
#include "loop.h"
#include "notify.h"
#include "server.h"

struct daemon {
	struct loop *loop;
	struct engine *engine;
	struct server *server;
	struct notify *notify;
	int sigfd, timerfd, watchdogfd;
};

enum {
	OPT_SETTING = 0x100,	/* --KEY=VALUE for any entry of ls_settings */
	OPT_FORCE_TP,
	OPT_NO_OWNER_STACK,
};

static void usage(FILE *f)
{
	int i;

	fprintf(f,
		"Usage: lockscoped [OPTION]...\n"
		"Trace kernel lock contention with BPF and serve it to `lockscope` over a Unix socket.\n\n"
		"  -s, --socket PATH      socket to serve (default " LS_DEFAULT_SOCKET ")\n"
		"  -c, --config FILE      read KEY = VALUE settings from FILE\n"
		"      --force-tp         use classic tracepoints even where tp_btf works\n"
		"      --no-owner-stack   never take lock owners' stacks\n"
		"  -v, --verbose          debug logging, libbpf's included\n"
		"  -h, --help             this text\n\n"
		"Settings (--KEY=VALUE or in the config file):\n");
	for (i = 0; i < ls_nr_settings; i++)
		fprintf(f, "      --%-16s %s [%u..%u]\n", ls_settings[i].key, ls_settings[i].help,
			ls_settings[i].min, ls_settings[i].max);
	fprintf(f, "\nExamples:\n"
		"  lockscoped                                  # serve " LS_DEFAULT_SOCKET "\n"
		"  lockscoped --socket /tmp/ls.sock --stack-rate=50\n");
}

static int parse_args(int argc, char **argv, struct engine_opts *eo, const char **socket_path)
{
	struct option longopts[32] = {
		{ "socket", required_argument, NULL, 's' },
		{ "config", required_argument, NULL, 'c' },
		{ "force-tp", no_argument, NULL, OPT_FORCE_TP },
		{ "no-owner-stack", no_argument, NULL, OPT_NO_OWNER_STACK },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
	};
	int nfixed = 6, i, c, idx;
	char err[256];

	for (i = 0; i < ls_nr_settings; i++)
		longopts[nfixed + i] = (struct option){ ls_settings[i].key, required_argument, NULL, OPT_SETTING };
	while ((c = getopt_long(argc, argv, "s:c:vh", longopts, &idx)) != -1) {
		switch (c) {
		case 's': *socket_path = optarg; break;
		case 'c':
			if (ls_config_load(eo, optarg, err, sizeof(err))) {
				fprintf(stderr, "lockscoped: %s\n", err);
				return -EINVAL;
			}
			break;
		case OPT_FORCE_TP: eo->collector.force_tp = true; break;
		case OPT_NO_OWNER_STACK: eo->collector.no_owner_stack = true; break;
		case 'v': ls_log_max = LS_LOG_DEBUG; break;
		case 'h': usage(stdout); exit(0);
		case OPT_SETTING:
			if (ls_setting_apply(eo, longopts[idx].name, optarg, err, sizeof(err))) {
				fprintf(stderr, "lockscoped: --%s\n", err);
				return -EINVAL;
			}
			break;
		default:
			fprintf(stderr, "lockscoped: see --help for the options\n");
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "lockscoped: unexpected argument '%s'; see --help\n", argv[optind]);
		return -EINVAL;
	}
	return 0;
}

static void on_signal(void *ctx, uint32_t events)
{
	struct daemon *d = ctx;
	struct signalfd_siginfo si;

	(void)events;
	if (read(d->sigfd, &si, sizeof(si)) != sizeof(si))
		return;
	pr_info("signal %u: detaching and exiting\n", si.ssi_signo);
	notify__send(d->notify, "STOPPING=1\nSTATUS=detaching");
	loop__stop(d->loop);
}

/* From the main loop, so that a loop that hangs stops the pings and systemd restarts us. */
static void on_watchdog(void *ctx, uint32_t events)
{
	struct daemon *d = ctx;

	(void)events;
	ls_timerfd_ack(d->watchdogfd);
	notify__send(d->notify, "WATCHDOG=1");
}

static void on_tick(void *ctx, uint32_t events)
{
	struct daemon *d = ctx;

	(void)events;
	ls_timerfd_ack(d->timerfd);
	engine__tick(d->engine);
}

static void on_rings(void *ctx, uint32_t events)
{
	struct daemon *d = ctx;

	(void)events;
	engine__consume(d->engine);
}

static cJSON *on_request(void *ctx, uint64_t client, const struct ls_peer *peer, const cJSON *req)
{
	struct daemon *d = ctx;

	return engine__handle(d->engine, client, peer, req);
}

static void on_gone(void *ctx, uint64_t client)
{
	struct daemon *d = ctx;

	engine__client_gone(d->engine, client);
}

static void on_reply(void *ctx, uint64_t client, cJSON *resp)
{
	struct daemon *d = ctx;

	server__reply(d->server, client, resp);
}

static int setup_signals(struct daemon *d)
{
	sigset_t mask;

	sigemptyset(&mask);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGTERM);
	if (sigprocmask(SIG_BLOCK, &mask, NULL))
		return -errno;
	signal(SIGPIPE, SIG_IGN);
	d->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	return d->sigfd < 0 ? -errno : 0;
}

int main(int argc, char **argv)
{
	struct daemon d = { .sigfd = -1, .timerfd = -1, .watchdogfd = -1 };
	struct server_opts so = { .path = LS_DEFAULT_SOCKET, .group = LS_SOCKET_GROUP, .mode = 0660,
				  .on_request = on_request, .on_gone = on_gone, .ctx = &d };
	struct engine_opts eo;
	int err;

	engine_opts__init(&eo);
	if (parse_args(argc, argv, &eo, &so.path))
		return 2;
	if ((err = notify__new(&d.notify))) {
		pr_err("NOTIFY_SOCKET: %s (a path or an @abstract name)\n", strerror(-err));
		goto cleanup;
	}
	if ((err = setup_signals(&d)))
		goto cleanup;
	notify__send(d.notify, "STATUS=loading and attaching the BPF programs");
	d.loop = loop__new();
	if (!d.loop) {
		err = -ENOMEM;
		goto cleanup;
	}
	err = engine__new(&eo, on_reply, &d, &d.engine);
	if (err) {
		pr_err("cannot start the BPF collector: %s%s\n", strerror(-err),
		       err == -EPERM ? " (run as root or with CAP_BPF and CAP_PERFMON)" : "");
		goto cleanup;
	}
	err = server__new(&so, d.loop, &d.server);
	if (err) {
		pr_err("cannot serve %s: %s%s\n", so.path, strerror(-err),
		       err == -EADDRINUSE ? " (another lockscoped is serving it)" : "");
		goto cleanup;
	}
	d.timerfd = ls_timerfd(ENGINE_TICK_MS);
	if (d.timerfd < 0 ||
	    !loop__add(d.loop, d.sigfd, EPOLLIN, on_signal, &d) ||
	    !loop__add(d.loop, d.timerfd, EPOLLIN, on_tick, &d) ||
	    !loop__add(d.loop, engine__epoll_fd(d.engine), EPOLLIN, on_rings, &d)) {
		err = d.timerfd < 0 ? d.timerfd : -errno;
		pr_err("cannot set up the event loop: %s\n", strerror(-err));
		goto cleanup;
	}
	if (notify__watchdog_ms(d.notify) &&
	    ((d.watchdogfd = ls_timerfd(notify__watchdog_ms(d.notify))) < 0 ||
	     !loop__add(d.loop, d.watchdogfd, EPOLLIN, on_watchdog, &d))) {
		err = d.watchdogfd < 0 ? d.watchdogfd : -errno;
		pr_err("cannot set up the watchdog timer: %s\n", strerror(-err));
		goto cleanup;
	}
	pr_info("lockscoped %s: attached, serving %s\n", LS_VERSION, so.path);
	notify__send(d.notify, "READY=1\nSTATUS=attached, serving %s", so.path);
	err = loop__run(d.loop);
cleanup:
	if (err)
		notify__send(d.notify, "STATUS=failed: %s\nERRNO=%d", strerror(-err), -err);
	server__free(d.server);
	engine__free(d.engine);
	loop__free(d.loop);
	if (d.timerfd >= 0)
		close(d.timerfd);
	if (d.watchdogfd >= 0)
		close(d.watchdogfd);
	notify__free(d.notify);
	if (d.sigfd >= 0)
		close(d.sigfd);
	return err ? 1 : 0;
}

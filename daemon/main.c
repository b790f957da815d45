// SPDX-License-Identifier: GPL-2.0
/* lockscoped: load the lock probes, aggregate, serve the socket. */
#include <errno.h>
#include <malloc.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include "api/engine.h"
#include "api/export.h"
#include "api/prom.h"
#include "collect/probe.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "serve/config.h"
#include "serve/loop.h"
#include "serve/metrics.h"
#include "serve/notify.h"
#include "serve/kube.h"
#include "serve/push.h"
#include "serve/server.h"

/* A --KEY=VALUE from the command line: it wins over the file, at start and on reload. */
struct override {
	const char *key, *value;
};

#define MAX_OVERRIDES 64

struct daemon {
	uint64_t textfile_ns;		/* the metrics textfile's last write */
	int textfile_err;		/* and its error, logged once */
	struct push *push;		/* profiles to Parca and Pyroscope; NULL: off */
	struct kube *kube;		/* Kubernetes pods' names; NULL: off */
	uint64_t push_ns;		/* the last push */
	struct loop *loop;
	struct engine *engine;
	struct server *server;
	struct notify *notify;
	struct metrics *metrics;
	int sigfd, timerfd, watchdogfd;
	struct ls_config base;		/* defaults and the flags' choices: what the file adds to */
	struct ls_config cfg;		/* in force */
	const char *config_path;	/* NULL: none (the default file is absent) */
	struct override overrides[MAX_OVERRIDES];
	int nr_overrides;
	unsigned int reloads;
	char reload_error[320];		/* the last rejected reload, "" if none */
	bool dump_config;
	bool check;		/* probe, print, exit */
	bool strict;		/* a missing feature is fatal */
	struct ls_probes probes;
};

enum {
	OPT_SETTING = 0x100,	/* --KEY=VALUE for any entry of ls_settings */
	OPT_FORCE_TP,
	OPT_NO_OWNER_STACK,
	OPT_DUMP_CONFIG,
	OPT_CHECK,
	OPT_STRICT,
	OPT_VERSION,
};

static void usage(FILE *f)
{
	int i;

	fprintf(f,
		"Usage: lockscoped [OPTION]...\n"
		"Trace kernel lock contention with BPF and serve it to `lockscope` over a Unix socket.\n\n"
		"  -s, --socket PATH      socket to serve (default " LS_DEFAULT_SOCKET "); same as --socket=PATH\n"
		"  -c, --config FILE      read KEY = VALUE settings from FILE (default " LS_DEFAULT_CONFIG
		" if it exists);\n"
		"                         SIGHUP reads it again; --KEY=VALUE options win over it\n"
		"      --dump-config      print every setting as a config file, with the values in force, and exit\n"
		"      --check            probe the kernel's features, print what each enables, and exit\n"
		"                         (1 if lockscoped cannot run; with --strict, if anything is missing)\n"
		"      --strict           refuse to start when a feature is missing or a component fails,\n"
		"                         rather than run without what needs it\n"
		"      --force-tp         use classic tracepoints even where tp_btf works\n"
		"      --no-owner-stack   never take lock owners' stacks\n"
		"  -v, --verbose          debug logging, libbpf's included\n"
		"  -h, --help             this text\n"
		"      --version          the version\n\n"
		"Settings (--KEY=VALUE or in the config file):\n");
	for (i = 0; i < ls_nr_settings; i++) {
		const struct ls_setting *st = &ls_settings[i];

		fprintf(f, "      --%-22s %s", st->key, st->help);
		if (st->type == LS_SET_U32)
			fprintf(f, " [%u..%u]", st->min, st->max);
		fprintf(f, "%s\n", st->flags & LS_SET_RELOAD ? " (SIGHUP reloads)" : "");
	}
	fprintf(f, "\nExamples:\n"
		"  lockscoped                                  # serve " LS_DEFAULT_SOCKET "\n"
		"  lockscoped --socket /tmp/ls.sock --stack-rate=50\n");
}

static int add_override(struct daemon *d, const char *key, const char *value)
{
	char err[256];
	struct ls_config scratch;

	ls_config__init(&scratch);
	/* checked now, so a bad option fails at once rather than after the file is read */
	if (ls_setting_apply(&scratch, key, value, err, sizeof(err))) {
		fprintf(stderr, "lockscoped: --%s\n", err);
		return -EINVAL;
	}
	if (d->nr_overrides == MAX_OVERRIDES) {
		fprintf(stderr, "lockscoped: more than %d settings on the command line\n", MAX_OVERRIDES);
		return -E2BIG;
	}
	d->overrides[d->nr_overrides++] = (struct override){ key, value };
	return 0;
}

static int parse_args(int argc, char **argv, struct daemon *d)
{
	static const struct option fixed[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "force-tp", no_argument, NULL, OPT_FORCE_TP },
		{ "no-owner-stack", no_argument, NULL, OPT_NO_OWNER_STACK },
		{ "dump-config", no_argument, NULL, OPT_DUMP_CONFIG },
		{ "check", no_argument, NULL, OPT_CHECK },
		{ "strict", no_argument, NULL, OPT_STRICT },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
	};
	const int nfixed = sizeof(fixed) / sizeof(fixed[0]);
	/* the fixed options, one per setting, and the zeroed end */
	struct option *longopts = calloc(nfixed + ls_nr_settings + 1, sizeof(*longopts));
	int i, c, idx, ret = -EINVAL;

	if (!longopts)
		return -ENOMEM;
	memcpy(longopts, fixed, sizeof(fixed));
	for (i = 0; i < ls_nr_settings; i++)
		longopts[nfixed + i] = (struct option){ ls_settings[i].key, required_argument, NULL, OPT_SETTING };
	while ((c = getopt_long(argc, argv, "s:c:vh", longopts, &idx)) != -1) {
		switch (c) {
		case 's':
			if (add_override(d, "socket", optarg))
				goto out;
			break;
		case 'c': d->config_path = optarg; break;
		case OPT_FORCE_TP: d->base.engine.collector.force_tp = true; break;
		case OPT_NO_OWNER_STACK: d->base.engine.collector.no_owner_stack = true; break;
		case OPT_DUMP_CONFIG: d->dump_config = true; break;
		case OPT_CHECK: d->check = true; break;
		case OPT_STRICT: d->strict = true; break;
		case 'v': ls_log_max = LS_LOG_DEBUG; break;
		case 'h':
			usage(stdout);
			free(longopts);
			exit(0);
		case OPT_VERSION:
			printf("lockscoped %s\n", LS_VERSION);
			free(longopts);
			exit(0);
		case OPT_SETTING:
			/* the name is the setting's key, which outlives longopts */
			if (add_override(d, longopts[idx].name, optarg))
				goto out;
			break;
		default:
			fprintf(stderr, "lockscoped: see --help for the options\n");
			goto out;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "lockscoped: unexpected argument '%s'; see --help\n", argv[optind]);
		goto out;
	}
	ret = 0;
out:
	free(longopts);
	if (ret)
		return ret;
	if (!d->config_path && !access(LS_DEFAULT_CONFIG, F_OK))
		d->config_path = LS_DEFAULT_CONFIG;
	return 0;
}

/*
 * The settings as they would be now: the defaults with the flags' choices, the file, then
 * the command line's --KEY=VALUE. All or nothing: on error @out is untouched.
 */
static int read_config(const struct daemon *d, struct ls_config *out, char *err, size_t len)
{
	struct ls_config c = d->base;
	int i, ret;

	if (d->config_path && (ret = ls_config_load(&c, d->config_path, err, len)))
		return ret;
	for (i = 0; i < d->nr_overrides; i++)
		if ((ret = ls_setting_apply(&c, d->overrides[i].key, d->overrides[i].value, err, len)))
			return ret;
	*out = c;
	return 0;
}

/* The config in force, for `lockscope status`: where it came from and every value. */
static cJSON *config_json(const struct daemon *d, const struct ls_config *pending)
{
	cJSON *o = cJSON_CreateObject(), *set, *restart;
	char val[LS_CONFIG_STR_MAX];
	int i;

	if (d->config_path)
		cJSON_AddStringToObject(o, "path", d->config_path);
	else
		cJSON_AddNullToObject(o, "path");
	cJSON_AddNumberToObject(o, "reloads", d->reloads);
	if (d->reload_error[0])
		cJSON_AddStringToObject(o, "reload_error", d->reload_error);
	else
		cJSON_AddNullToObject(o, "reload_error");
	restart = cJSON_AddArrayToObject(o, "pending_restart");
	set = cJSON_AddObjectToObject(o, "settings");
	for (i = 0; i < ls_nr_settings; i++) {
		const struct ls_setting *s = &ls_settings[i];

		ls_setting_format(&d->cfg, s, val, sizeof(val));
		if (s->type == LS_SET_STR)
			cJSON_AddStringToObject(set, s->key, val);
		else
			cJSON_AddNumberToObject(set, s->key, strtod(val, NULL));
		if (pending && !ls_setting_equal(&d->cfg, pending, s))
			cJSON_AddItemToArray(restart, cJSON_CreateString(s->key));
	}
	return o;
}

/*
 * SIGHUP: read the file again. What can change without reattaching changes now; the rest
 * is logged and listed as pending a restart. A bad file changes nothing.
 */
static void reload(struct daemon *d)
{
	struct ls_config next;
	char val[LS_CONFIG_STR_MAX], now[LS_CONFIG_STR_MAX];
	int i, err;

	notify__send(d->notify, "RELOADING=1\nSTATUS=reloading %s", d->config_path ? d->config_path : "(no file)");
	if (read_config(d, &next, d->reload_error, sizeof(d->reload_error))) {
		pr_err("reload: %s; the running config stays\n", d->reload_error);
		engine__set_config(d->engine, config_json(d, NULL));
		notify__send(d->notify, "READY=1\nSTATUS=attached, serving %s (reload rejected: %s)",
			     d->cfg.socket, d->reload_error);
		return;
	}
	d->reload_error[0] = 0;
	d->reloads++;
	for (i = 0; i < ls_nr_settings; i++) {
		const struct ls_setting *s = &ls_settings[i];

		if (ls_setting_equal(&d->cfg, &next, s))
			continue;
		ls_setting_format(&d->cfg, s, now, sizeof(now));
		ls_setting_format(&next, s, val, sizeof(val));
		if (!(s->flags & LS_SET_RELOAD)) {
			pr_warn("reload: %s = %s needs a restart; %s stays in force\n", s->key, val, now);
			continue;
		}
		pr_info("reload: %s = %s (was %s)\n", s->key, val, now);
		ls_setting_copy(&d->cfg, &next, s);
	}
	engine__reconfigure(d->engine, &d->cfg.engine);
	if ((err = server__set_group(d->server, d->cfg.socket_group)))
		pr_warn("reload: socket-group %s: %s\n", d->cfg.socket_group, strerror(-err));
	engine__set_config(d->engine, config_json(d, &next));
	notify__send(d->notify, "READY=1\nSTATUS=attached, serving %s (config reloaded)", d->cfg.socket);
}

static void on_signal(void *ctx, uint32_t events)
{
	struct daemon *d = ctx;
	struct signalfd_siginfo si;

	(void)events;
	if (read(d->sigfd, &si, sizeof(si)) != sizeof(si))
		return;
	if (si.ssi_signo == SIGHUP) {
		reload(d);
		return;
	}
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

/* The node_exporter textfile, every metrics-textfile-interval seconds; errors logged once. */
static void write_textfile(struct daemon *d)
{
	uint64_t now = ls_now_ns();
	char *text;
	size_t len;
	int err;

	if (!d->cfg.metrics_textfile[0] ||
	    now - d->textfile_ns < (uint64_t)d->cfg.metrics_textfile_interval * 1000000000ULL)
		return;
	d->textfile_ns = now;
	text = engine__metrics(d->engine, &len);
	err = text ? export__write_file(d->cfg.metrics_textfile, text, len) : -ENOMEM;
	free(text);
	if (err && err != d->textfile_err)
		pr_warn("cannot write the metrics textfile %s: %s (the directory must exist and be "
			"writable; systemd: ReadWritePaths=)\n", d->cfg.metrics_textfile, strerror(-err));
	else if (!err && d->textfile_err)
		pr_info("metrics textfile %s written again\n", d->cfg.metrics_textfile);
	d->textfile_err = err;
}

/*
 * Every push-interval seconds, the interval's profiles to the push threads (never blocks):
 * the waits, and the spin samples when anything spun.
 */
static void push_profile(struct daemon *d)
{
	struct export_buf locks = {}, spin = {};
	uint64_t now = ls_now_ns(), start, end;
	int err;

	if (!d->push || now - d->push_ns < (uint64_t)d->cfg.push_interval * NSEC_PER_SEC)
		return;
	d->push_ns = now;
	err = engine__push_profile(d->engine, &locks, &spin, &start, &end);
	if (!err)
		err = push__submit(d->push, PUSH_LOCKS, locks.data, locks.len, start, end);
	if (!err && spin.len)
		err = push__submit(d->push, PUSH_SPIN, spin.data, spin.len, start, end);
	if (err)
		pr_warn("push: cannot make the interval's profiles: %s\n", strerror(-err));
	free(locks.data);
	free(spin.data);
}

static void on_tick(void *ctx, uint32_t events)
{
	struct daemon *d = ctx;

	(void)events;
	ls_timerfd_ack(d->timerfd);
	engine__tick(d->engine);
	server__tick(d->server, ls_now_ns());
	write_textfile(d);
	push_profile(d);
	if (d->kube) {
		struct pods *pods = kube__take(d->kube);

		if (pods)
			engine__set_pods(d->engine, pods);
		if (engine__pods_wanted(d->engine))
			kube__kick(d->kube);
	}
}

static void on_rings(void *ctx, uint32_t events)
{
	struct daemon *d = ctx;

	(void)events;
	engine__consume(d->engine);
}

/*
 * The serving side of `status` and the metrics: connections served, refused and cut off;
 * the profiles pushed and lost.
 */
static void add_status_extra(void *ctx, cJSON *status)
{
	struct daemon *d = ctx;
	struct server_stats st;
	cJSON *o;

	if (d->push)
		cJSON_AddItemToObject(status, "push", push__json(d->push));
	if (d->kube)
		cJSON_AddItemToObject(status, "kubernetes", kube__json(d->kube));
	if (!d->server)
		return;
	o = cJSON_AddObjectToObject(status, "clients");

	server__stats(d->server, &st);
	cJSON_AddNumberToObject(o, "connected", st.connected);
	cJSON_AddNumberToObject(o, "accepted", st.accepted);
	cJSON_AddNumberToObject(o, "refused_access", st.refused_access);
	cJSON_AddNumberToObject(o, "refused_busy", st.refused_busy);
	cJSON_AddNumberToObject(o, "cut_off", st.cut_off);
	cJSON_AddNumberToObject(o, "overlong", st.overlong);
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

static char *on_metrics(void *ctx, size_t *len)
{
	struct daemon *d = ctx;

	return engine__metrics(d->engine, len);
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
	sigaddset(&mask, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &mask, NULL))
		return -errno;
	signal(SIGPIPE, SIG_IGN);
	d->sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	return d->sigfd < 0 ? -errno : 0;
}

/* --check: the probe table, then whether lockscoped can run here. */
static int check(const struct daemon *d)
{
	int required = ls_probes_missing(&d->probes, true), all = ls_probes_missing(&d->probes, false);

	ls_probes_print(&d->probes, stdout);
	if (required)
		printf("lockscoped cannot run here: %d required feature(s) missing\n", required);
	else if (all)
		printf("lockscoped can run; %d feature(s) missing, and what needs them is off%s\n", all,
		       d->strict ? " (--strict: refused)" : "");
	else
		printf("lockscoped can run with every feature\n");
	return required || (d->strict && all) ? 1 : 0;
}

/* At start: one line per missing feature; fatal when required, or any with --strict. */
static int report_probes(const struct daemon *d)
{
	int i, fatal = 0;

	for (i = 0; i < LS_PROBE_MAX; i++) {
		const struct ls_probe *p = &d->probes.p[i];
		bool stop = p->required || d->strict;

		if (p->ok)
			continue;
		if (stop)
			pr_err("%s missing: %s; %s\n", p->name, p->detail, p->required ?
			       "cannot run without it" : "refused by --strict");
		else
			pr_warn("%s missing: %s; off: %s\n", p->name, p->detail, p->needs);
		fatal += stop;
	}
	return fatal ? -ENOTSUP : 0;
}

enum { MMAP_THRESHOLD_BYTES = 128 * 1024 };

int main(int argc, char **argv)
{
	struct daemon d = { .sigfd = -1, .timerfd = -1, .watchdogfd = -1 };
	struct server_opts so = { .mode = 0660, .on_request = on_request, .on_gone = on_gone, .ctx = &d };
	char msg[320];
	int err;

	/*
	 * A fixed threshold (glibc raises its own after every large free): the megabytes a
	 * query over 100 k keys takes for a moment are mapped, and unmapped when it is done,
	 * instead of staying in the heap
	 */
	mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES);
	ls_config__init(&d.base);
	if (parse_args(argc, argv, &d))
		return 2;
	if (read_config(&d, &d.cfg, msg, sizeof(msg))) {
		fprintf(stderr, "lockscoped: %s\n", msg);
		return 2;
	}
	if (d.dump_config) {
		ls_config_dump(&d.cfg, stdout);
		return 0;
	}
	ls_probes_run(&d.probes);
	if (d.check)
		return check(&d);
	if ((err = report_probes(&d)))
		return 1;
	d.cfg.engine.collector.probes = &d.probes;
	d.cfg.engine.push = d.cfg.push_parca[0] || d.cfg.push_pyroscope[0];
	so.path = d.cfg.socket;
	so.group = d.cfg.socket_group;
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
	if (d.cfg.engine.push &&
	    (err = push__new(&(struct push_opts){ .url = { d.cfg.push_parca, d.cfg.push_pyroscope },
						  .queue = d.cfg.push_queue, .timeout_s = d.cfg.push_timeout,
						  .bearer_token_file = d.cfg.push_bearer_token_file,
						  .basic_auth_file = d.cfg.push_basic_auth_file,
						  .ca_file = d.cfg.push_ca_file, .host = d.cfg.push_host,
						  .app = d.cfg.push_app }, &d.push, msg, sizeof(msg)))) {
		pr_err("cannot push profiles: %s\n", msg);
		goto cleanup;
	}
	err = engine__new(&d.cfg.engine, on_reply, &d, &d.engine);
	if (err) {
		pr_err("cannot start the BPF collector: %s%s\n", strerror(-err),
		       err == -EPERM ? " (run as root or with CAP_BPF and CAP_PERFMON)" : "");
		goto cleanup;
	}
	if (d.strict && engine__degraded(d.engine)) {
		pr_err("--strict: %d component(s) failed to load or attach (above); not starting\n",
		       engine__degraded(d.engine));
		err = -ENOTSUP;
		goto cleanup;
	}
	if (d.cfg.kube_pods_url[0] &&
	    (err = kube__new(&(struct kube_opts){ .pods_url = d.cfg.kube_pods_url, .node = d.cfg.kube_node,
						  .token_file = d.cfg.kube_token_file, .ca_file = d.cfg.kube_ca_file,
						  .insecure_tls = d.cfg.kube_insecure_tls,
						  .interval_s = d.cfg.kube_pods_interval,
						  .timeout_s = LS_DEF_KUBE_TIMEOUT }, &d.kube, msg, sizeof(msg)))) {
		pr_err("cannot name Kubernetes pods: %s\n", msg);
		goto cleanup;
	}
	engine__set_status_extra(d.engine, add_status_extra, &d);
	d.push_ns = ls_now_ns();
	err = server__new(&so, d.loop, &d.server);
	if (err) {
		pr_err("cannot serve %s: %s%s\n", so.path, strerror(-err),
		       err == -EADDRINUSE ? " (another lockscoped is serving it)" : "");
		goto cleanup;
	}
	if (d.cfg.metrics_listen[0] &&
	    (err = metrics__new(d.cfg.metrics_listen, d.loop, on_metrics, &d, &d.metrics))) {
		pr_err("cannot serve metrics on %s: %s%s\n", d.cfg.metrics_listen, strerror(-err),
		       err == -EAFNOSUPPORT ? " (systemd's RestrictAddressFamilies: add AF_INET/AF_INET6)" : "");
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
	engine__set_config(d.engine, config_json(&d, NULL));
	/* loading parsed the kernel's BTF, since freed: give those pages back */
	malloc_trim(0);
	pr_info("lockscoped %s: attached, serving %s%s%s\n", LS_VERSION, so.path,
		d.config_path ? ", config " : "", d.config_path ? d.config_path : "");
	notify__send(d.notify, "READY=1\nSTATUS=attached, serving %s", so.path);
	err = loop__run(d.loop);
cleanup:
	if (err)
		notify__send(d.notify, "STATUS=failed: %s\nERRNO=%d", strerror(-err), -err);
	metrics__free(d.metrics);
	server__free(d.server);
	push__free(d.push);
	kube__free(d.kube);
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

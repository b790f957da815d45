// SPDX-License-Identifier: GPL-2.0
/*
 * `lockscope scan -p PID`: one process's waits from now to a deadline or its exit, in an
 * aggregator of its own, answered when it ends. Who may scan whom: ptrace's rule.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "analyze/spin.h"
#include "api/engine_int.h"
#include "collect/collector.h"
#include "decode/usyms.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/procfs.h"
#include "store/agg.h"

/* A scan longer than a day is a mistake, not a scan. */
#define SCAN_MAX_MS (24ULL * 3600 * 1000)

void scan_free(struct engine *e, struct scan *s)
{
	if (!s)
		return;
	if (s->precise) {
		collector__precise_del(e->coll, s->pid);
		spin__precise_ran(e->spin, s->pid, ls_now_ns() - s->start_ns);
	}
	if (s->pidfd >= 0)
		close(s->pidfd);	/* and out of the epoll set with it */
	agg__free(s->agg);
	free(s);
}

/* Marks the scans whose process exited; true if any did. */
bool scans_exited(struct engine *e)
{
	struct epoll_event ev[8];
	bool any = false;
	int i, n;

	do {
		n = epoll_wait(e->epfd, ev, sizeof(ev) / sizeof(ev[0]), 0);
		for (i = 0; i < n; i++) {
			struct scan *s = ev[i].data.ptr;	/* NULL: the rings */

			if (s && !s->exited) {
				s->exited = true;
				any = true;
			}
		}
	} while (n == sizeof(ev) / sizeof(ev[0]));
	return any;
}

/*
 * When process @pid started (/proc/PID/stat's starttime, clock ticks since boot); 0: gone,
 * or exited and not yet reaped (a zombie: its parent has not waited for it).
 */
uint64_t proc_start_ticks(uint32_t pid)
{
	struct ls_proc_stat st;

	if (ls_proc_stat(pid, &st) || st.state == 'Z' || st.state == 'X')
		return 0;
	return st.start_ticks;
}

/* Whether @s's process is gone, by its pidfd (or its pid's start time, without one). */
static bool scan_process_gone(struct scan *s)
{
	struct pollfd p = { .fd = s->pidfd, .events = POLLIN };

	if (s->exited)
		return true;
	if (s->pidfd < 0)
		return proc_start_ticks(s->pid) != s->start_ticks;
	return poll(&p, 1, 0) > 0;
}

bool scan_takes(struct scan *s, const struct agg_event *ev)
{
	if (ev->key.pid != s->pid)
		return false;
	/* a wait-table entry (every exact figure): its process's start, as the kernel read it */
	if (ev->proc_start_ns)
		return !s->start_ticks || ls_boot_ns_to_ticks(ev->proc_start_ns) == s->start_ticks;
	/*
	 * A sampled record, which says only the pid: its process's while it runs. Once it is
	 * gone the pid may be another's, and its last samples are left out with the new one's
	 * (their waits are counted by the entries above all the same).
	 */
	return !scan_process_gone(s);
}

static bool pid_alive(uint32_t pid)
{
	return !kill(pid, 0) || errno == EPERM;
}

static cJSON *precise_error(int err, uint32_t pid)
{
	if (err == -EOPNOTSUPP)
		return engine__error("precise mode needs the syscalls:sys_enter_futex tracepoints "
				     "(CONFIG_FTRACE_SYSCALLS) and user-lock tracing; scan without it");
	if (err == -EBUSY)
		return engine__error("a precise scan of pid %u is already running; wait for it", pid);
	if (err == -E2BIG || err == -ENOSPC)
		return engine__error("too many precise scans at once (%d); retry later",
				     ULOCK_DEF_PRECISE_PIDS);
	return engine__error("precise mode for pid %u: %s", pid, strerror(-err));
}

/* /proc/PID/status's "Uid:" or "Gid:" line: real, effective, saved and filesystem ids. */
static int proc_ids(uint32_t pid, const char *field, unsigned int ids[4])
{
	char path[64], line[256];
	size_t len = strlen(field);
	int ret = -ENOENT;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%u/status", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (ret && fgets(line, sizeof(line), f))
		if (!strncmp(line, field, len) &&
		    sscanf(line + len, "%u %u %u %u", &ids[0], &ids[1], &ids[2], &ids[3]) == 4)
			ret = 0;
	fclose(f);
	return ret;
}

/*
 * ptrace's rule (__ptrace_may_access): CAP_SYS_PTRACE, or the target's real, effective
 * and saved uids and gids are all the peer's. A scan observes a process closely (its
 * futex calls one by one in precise mode), so it needs what a debugger would.
 */
static bool peer_may_scan(const struct ls_peer *peer, uint32_t pid)
{
	unsigned int uid[4], gid[4];
	int i;

	if (!peer || peer->cap_sys_ptrace)
		return true;
	if (proc_ids(pid, "Uid:", uid) || proc_ids(pid, "Gid:", gid))
		return false;
	for (i = 0; i < 3; i++)
		if (uid[i] != peer->uid || gid[i] != peer->gid)
			return false;
	return true;
}

cJSON *scan_start(struct engine *e, uint64_t client, const struct ls_peer *peer,
			  const cJSON *req, struct query *q, const struct export_req *x)
{
	const cJSON *d = cJSON_GetObjectItemCaseSensitive(req, "duration_ms");
	const cJSON *precise = cJSON_GetObjectItemCaseSensitive(req, "precise");
	int err;
	struct agg_opts ao = { .windows = false, .max_keys = e->opts.max_keys };
	struct scan *s;

	if (!q->pid)
		return engine__error("scan needs 'pid'");
	if (e->pause.since_ns)
		return engine__error("tracing is paused: a scan would see nothing (lockscope resume, then scan)");
	if (!d || !cJSON_IsNumber(d) || d->valuedouble < 1 || d->valuedouble > SCAN_MAX_MS)
		return engine__error("'duration_ms' must be a number from 1 to %llu", SCAN_MAX_MS);
	if (precise && !cJSON_IsBool(precise))
		return engine__error("'precise' must be true or false");
	if (!pid_alive(q->pid))
		return engine__error("no process with pid %u", q->pid);
	if (!peer_may_scan(peer, q->pid))
		return engine__error("permission denied: pid %u belongs to another user; scan your own "
				     "processes, or run as root or with CAP_SYS_PTRACE", q->pid);
	s = calloc(1, sizeof(*s));
	if (!s)
		return engine__error("out of memory");
	s->client = client;
	s->start_ticks = proc_start_ticks(q->pid);
	s->pidfd = syscall(SYS_pidfd_open, q->pid, 0);
	if (s->pidfd < 0 && errno == ESRCH) {
		free(s);
		return engine__error("no process with pid %u", q->pid);
	}
	if (s->pidfd >= 0 && epoll_ctl(e->epfd, EPOLL_CTL_ADD, s->pidfd,
				       &(struct epoll_event){ .events = EPOLLIN, .data.ptr = s })) {
		close(s->pidfd);
		s->pidfd = -1;
	}
	s->x = *x;
	s->kernel_addrs = engine_kernel_addrs_allowed(e, peer);
	s->pid = q->pid;
	/* its mappings now, while it lives: a target that exits before the first drain of its
	 * waits still has its locks and frames named. Read again if cached: what a record of
	 * its pid cached may predate its exec (the forked parent's maps) */
	usyms__reload(e->usyms, s->pid);
	s->start_ns = ls_now_ns();
	s->deadline_ns = s->start_ns + (uint64_t)d->valuedouble * NSEC_PER_MSEC;
	s->q = *q;
	s->q.window = LS_WIN_ALL;
	ao.start_ns = s->start_ns;
	s->agg = agg__new(&ao);
	if (!s->agg) {
		scan_free(e, s);
		return engine__error("out of memory");
	}
	if (cJSON_IsTrue(precise)) {
		err = collector__precise_add(e->coll, s->pid);
		if (err) {
			scan_free(e, s);
			return precise_error(err, q->pid);
		}
		s->precise = true;
	}
	/* waits already in the rings predate the scan */
	engine__consume(e);
	collector__counters(e->coll, s->counters0);
	s->next = e->scans;
	e->scans = s;
	return NULL;
}

static void finish_scan(struct engine *e, struct scan *s, uint64_t now, bool exited)
{
	cJSON *resp = s->x.wanted ?
		report_export_response(e, "scan", s->agg, &s->q, &s->x, now, s->counters0, s->kernel_addrs) :
		report_rows_response(e, "scan", s->agg, &s->q, now, s->counters0, s->kernel_addrs);

	cJSON_AddBoolToObject(resp, "process_exited", exited);
	cJSON_AddBoolToObject(resp, "precise", s->precise);
	e->reply(e->reply_ctx, s->client, resp);
}

/* Scans that ended (deadline or exit) are answered, with every wait up to now. */
void scans_finish(struct engine *e, uint64_t now)
{
	struct scan **pp, *s;
	bool drained = false;

	for (pp = &e->scans; (s = *pp);) {
		/*
		 * Gone, by its pidfd, or (without one) by its pid no longer naming the process
		 * that started at start_ticks. A pidfd's word is checked the same way: CI saw a
		 * scan end 23 us after it began, its process alive (cause not found).
		 */
		bool exited = (s->exited || s->pidfd < 0) && proc_start_ticks(s->pid) != s->start_ticks;

		if (s->exited && !exited) {
			pr_warn("scan of pid %u: its pidfd reported an exit, but it runs on; "
				"checking it by start time from now on\n", s->pid);
			close(s->pidfd);	/* out of the epoll set: level-triggered, it would repeat */
			s->pidfd = -1;
			s->exited = false;
		}

		if (now < s->deadline_ns && !exited) {
			pp = &s->next;
			continue;
		}
		if (!drained) {
			engine_drain_waits(e);
			drained = true;
		}
		*pp = s->next;
		finish_scan(e, s, now, exited);
		scan_free(e, s);
	}
}

void engine__client_gone(struct engine *e, uint64_t client)
{
	struct scan **pp, *s;

	for (pp = &e->scans; (s = *pp);) {
		if (s->client != client) {
			pp = &s->next;
			continue;
		}
		*pp = s->next;
		scan_free(e, s);
	}
}

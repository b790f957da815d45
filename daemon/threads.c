// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "collector.h"
#include "engine.h"
#include "htab.h"
#include "scheduler.h"
#include "threads.h"
#include "vec.h"

#define NSEC_PER_SEC 1000000000ULL
#define MAX_THREADS (1U << 22)

/* (time on the boot clock, events) points of a thread's history, newest first */
#define REF_POINTS 4

struct snap {
	uint64_t voluntary, involuntary;
	/*
	 * The thread's event count (nvcsw and I/O syscalls) at the starts of its last baseline
	 * periods, newest first: its own rate before a stop, for bursts. A period starts anew
	 * only once the count moved, so a stopped thread keeps the points it had before the
	 * stop; a few points, as the first after the resume comes before the stop's record.
	 */
	uint64_t ref_ns[REF_POINTS], ref_events[REF_POINTS];
};

struct threads {
	struct htab *old, *cur;		/* tid -> struct snap: a second ago, now */
	uint64_t old_ns, cur_ns;
	uint64_t ctxt_old, ctxt_cur;	/* /proc/stat ctxt at old_ns and cur_ns */
	uint64_t switch_cost_ns;
};

int threads__new(struct threads **out)
{
	struct threads *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->old = htab__new(sizeof(uint32_t), sizeof(struct snap), MAX_THREADS);
	t->cur = htab__new(sizeof(uint32_t), sizeof(struct snap), MAX_THREADS);
	if (!t->old || !t->cur) {
		threads__free(t);
		return -ENOMEM;
	}
	*out = t;
	return 0;
}

void threads__free(struct threads *t)
{
	if (!t)
		return;
	htab__free(t->old);
	htab__free(t->cur);
	free(t);
}

/* The host's switches since boot, as vmstat reads them. */
static uint64_t proc_ctxt(void)
{
	unsigned long long v = 0;
	char line[256];
	FILE *f = fopen("/proc/stat", "re");

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "ctxt %llu", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

struct snapping {
	struct threads *t;
	uint64_t boot_ns;
};

/* Starts a new baseline period once one has passed and the thread did something since. */
static void baseline(struct snap *s, const struct snap *old, uint64_t events, uint64_t now)
{
	if (old) {
		memcpy(s->ref_ns, old->ref_ns, sizeof(s->ref_ns));
		memcpy(s->ref_events, old->ref_events, sizeof(s->ref_events));
	}
	if (s->ref_ns[0] && (now - s->ref_ns[0] < SCHED_BASE_PERIOD_NS || events == s->ref_events[0]))
		return;
	memmove(s->ref_ns + 1, s->ref_ns, (REF_POINTS - 1) * sizeof(s->ref_ns[0]));
	memmove(s->ref_events + 1, s->ref_events, (REF_POINTS - 1) * sizeof(s->ref_events[0]));
	s->ref_ns[0] = now;
	s->ref_events[0] = events;
}

static int snap_one(void *ctx, __u32 tid, const struct sched_thread *st)
{
	struct snapping *sn = ctx;
	struct snap *s = htab__upsert(sn->t->cur, &tid, NULL, NULL);

	if (s) {
		s->voluntary = st->voluntary;
		s->involuntary = st->involuntary;
		baseline(s, htab__find(sn->t->old, &tid), st->events, sn->boot_ns);
	}
	return 0;
}

int threads__baseline(const struct threads *t, uint32_t tid, uint64_t stop_boot_ns, uint64_t stop_events,
		      uint64_t *events, uint64_t *ns)
{
	const struct snap *s = htab__find(t->cur, &tid);
	int i, pick = -1;

	*events = *ns = 0;
	/* the newest point a baseline period before the stop, else the oldest before it */
	for (i = 0; s && i < REF_POINTS && s->ref_ns[i]; i++) {
		if (s->ref_ns[i] >= stop_boot_ns || stop_events < s->ref_events[i])
			continue;
		pick = i;
		if (stop_boot_ns - s->ref_ns[i] >= SCHED_BASE_PERIOD_NS)
			break;
	}
	if (pick < 0)
		return -ENOENT;
	*events = stop_events - s->ref_events[pick];
	*ns = stop_boot_ns - s->ref_ns[pick];
	return 0;
}

void threads__tick(struct threads *t, const struct collector *c, uint64_t now)
{
	struct htab *h = t->old;

	if (!collector__features(c)->sched)
		return;
	/* the older snapshot's table is reused for the new one */
	t->old = t->cur;
	t->old_ns = t->cur_ns;
	t->ctxt_old = t->ctxt_cur;
	htab__clear(h);
	t->cur = h;
	t->cur_ns = now;
	t->ctxt_cur = proc_ctxt();
	collector__sched_threads(c, snap_one, &(struct snapping){ t, ls_clock_ns(CLOCK_BOOTTIME) });
}

struct row {
	uint32_t tid;
	struct sched_thread st;
	double vol_per_s, invol_per_s;
};

struct rows {
	const struct htab *base;	/* the snapshot rates are against */
	uint32_t pid;
	double secs;		/* since the older snapshot */
	struct row *v;
	size_t n, cap;
};

static int collect(void *ctx, __u32 tid, const struct sched_thread *st)
{
	struct rows *rs = ctx;
	const struct snap *old;
	struct row *r;

	if (rs->pid && st->tgid != rs->pid)
		return 0;
	if (ls_vec_reserve(&rs->v, &rs->cap, rs->n, sizeof(*rs->v)))
		return -ENOMEM;
	r = &rs->v[rs->n++];
	r->tid = tid;
	r->st = *st;
	old = htab__find(rs->base, &tid);
	r->vol_per_s = r->invol_per_s = 0;
	/* a thread missing from the snapshot had not switched yet: all its switches are new */
	if (rs->secs > 0) {
		r->vol_per_s = (st->voluntary - (old ? old->voluntary : 0)) / rs->secs;
		r->invol_per_s = (st->involuntary - (old ? old->involuntary : 0)) / rs->secs;
	}
	return 0;
}

static int by_rate(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	double dx = x->vol_per_s + x->invol_per_s, dy = y->vol_per_s + y->invol_per_s;
	uint64_t tx = x->st.voluntary + x->st.involuntary, ty = y->st.voluntary + y->st.involuntary;

	if (dx != dy)
		return dx < dy ? 1 : -1;
	return tx < ty ? 1 : tx > ty ? -1 : (x->tid > y->tid) - (x->tid < y->tid);
}

static cJSON *row_json(const struct threads *t, const struct row *r)
{
	cJSON *o = cJSON_CreateObject();
	uint64_t switches = r->st.voluntary + r->st.involuntary;

	cJSON_AddNumberToObject(o, "pid", r->st.tgid);
	cJSON_AddNumberToObject(o, "tid", r->tid);
	cJSON_AddStringToObject(o, "comm", r->st.comm);
	cJSON_AddNumberToObject(o, "voluntary", r->st.voluntary);
	cJSON_AddNumberToObject(o, "involuntary", r->st.involuntary);
	cJSON_AddNumberToObject(o, "voluntary_per_s", r->vol_per_s);
	cJSON_AddNumberToObject(o, "involuntary_per_s", r->invol_per_s);
	cJSON_AddNumberToObject(o, "oncpu_ns", r->st.oncpu_ns);
	cJSON_AddNumberToObject(o, "offcpu_blocked_ns", r->st.blocked_ns);
	cJSON_AddNumberToObject(o, "runqueue_wait_ns", r->st.runq_ns);
	/* each switch out and back in costs the thread about one measured switch */
	cJSON_AddNumberToObject(o, "switch_cost_ns", switches * t->switch_cost_ns);
	return o;
}

int threads__json(struct threads *t, const struct collector *c, uint32_t pid, uint32_t limit,
		  uint64_t now, cJSON *o, const char **err)
{
	struct rows rs = { .pid = pid };
	cJSON *arr;
	size_t i;

	if (!collector__features(c)->sched) {
		*err = "per-thread scheduling is off (sched-threads=0, or the kernel lacks tp_btf)";
		return -EOPNOTSUPP;
	}
	/* against the older snapshot (1-2 s back), or the only one there is yet */
	uint64_t base_ns = t->old_ns ? t->old_ns : t->cur_ns;
	uint64_t base_ctxt = t->old_ns ? t->ctxt_old : t->ctxt_cur;

	rs.base = t->old_ns ? t->old : t->cur;
	rs.secs = base_ns && now > base_ns ? (double)(now - base_ns) / NSEC_PER_SEC : 0;
	if (collector__sched_threads(c, collect, &rs)) {
		free(rs.v);
		*err = "cannot read the per-thread scheduling map";
		return -EIO;
	}
	qsort(rs.v, rs.n, sizeof(*rs.v), by_rate);
	cJSON_AddNumberToObject(o, "switch_cost_ns_per_switch", t->switch_cost_ns);
	cJSON_AddNumberToObject(o, "system_switches_per_s",
				rs.secs > 0 ? (proc_ctxt() - base_ctxt) / rs.secs : 0);
	cJSON_AddNumberToObject(o, "rate_window_s", rs.secs);
	arr = cJSON_AddArrayToObject(o, "rows");
	for (i = 0; i < rs.n && (!limit || i < limit); i++)
		cJSON_AddItemToArray(arr, row_json(t, &rs.v[i]));
	free(rs.v);
	return 0;
}

/* ---- the cost of a context switch (lmbench lat_ctx) ---- */

struct pingpong {
	int to[2], from[2];
	uint32_t rounds;
	int cpu;
};

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) ? -EINVAL : 0;
}

static void *echo(void *arg)
{
	struct pingpong *p = arg;
	char b;
	uint32_t i;

	pin(p->cpu);
	for (i = 0; i < p->rounds; i++)
		if (read(p->to[0], &b, 1) != 1 || write(p->from[1], &b, 1) != 1)
			break;
	return NULL;
}

/* Nanoseconds for @rounds of write+read through one pipe by one thread: no switch. */
static uint64_t pipe_overhead(int fd[2], uint32_t rounds)
{
	uint64_t t0 = ls_now_ns();
	char b = 0;
	uint32_t i;

	for (i = 0; i < rounds; i++)
		if (write(fd[1], &b, 1) != 1 || read(fd[0], &b, 1) != 1)
			break;
	return ls_now_ns() - t0;
}

int threads__measure_switch_cost(struct threads *t, uint32_t rounds)
{
	struct pingpong p = { .rounds = rounds, .cpu = sched_getcpu() };
	uint64_t t0, pp, ovh;
	cpu_set_t saved;
	pthread_t th;
	char b = 0;
	uint32_t i;
	int err = 0;

	if (pipe(p.to) || pipe(p.from))
		return -errno;
	pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved);
	if (p.cpu < 0 || pin(p.cpu) || pthread_create(&th, NULL, echo, &p)) {
		err = -EINVAL;
		goto cleanup;
	}
	t0 = ls_now_ns();
	for (i = 0; i < rounds; i++)
		if (write(p.to[1], &b, 1) != 1 || read(p.from[0], &b, 1) != 1)
			break;
	pp = ls_now_ns() - t0;
	pthread_join(th, NULL);
	ovh = pipe_overhead(p.to, rounds);
	/* a round trip is two switches, each with one write and one read around it */
	t->switch_cost_ns = pp / (2ULL * rounds) > ovh / rounds ? pp / (2ULL * rounds) - ovh / rounds : 0;
cleanup:
	pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
	close(p.to[0]);
	close(p.to[1]);
	close(p.from[0]);
	close(p.from[1]);
	return err;
}

uint64_t threads__switch_cost_ns(const struct threads *t)
{
	return t->switch_cost_ns;
}

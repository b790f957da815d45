// SPDX-License-Identifier: GPL-2.0
/* `lockscope threads` (threads.h): the rows of a window or of the live view, as JSON. */
#include <errno.h>
#include <stdlib.h>
#include "analyze/threads.h"
#include "analyze/threads_int.h"
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/vec.h"

/* ---- threads: rows ---- */

struct row {
	uint32_t tid;
	struct sched_thread st;
	uint64_t exited_ns;
	double vol_per_s, invol_per_s;
};

struct rows {
	const struct threads *t;
	enum ls_window w;
	uint64_t now;
	const struct proc_filter *f;
	double secs;		/* what rates are over (live: since the tick before) */
	struct row *v;
	size_t n, cap;
};

static int collect(void *ctx, uint32_t tid, const struct sched_thread *st, uint64_t exited_ns)
{
	struct rows *rs = ctx;
	struct row *r;

	if (!query__proc_wanted(rs->f, st->tgid))
		return 0;
	if (ls_vec_reserve(&rs->v, &rs->cap, rs->n, sizeof(*rs->v)))
		return -ENOMEM;
	r = &rs->v[rs->n++];
	r->tid = tid;
	r->st = *st;
	r->exited_ns = exited_ns;
	r->vol_per_s = r->invol_per_s = 0;
	if (rs->secs <= 0)
		return 0;
	if (rs->w == THREADS_LIVE) {
		const struct thread *th = htab__find(rs->t->by_tid, &tid);

		/* since the read before the last tick; a thread first seen since: all its switches are new */
		if (th && th->prev_ns && rs->now > th->prev_ns) {
			double secs = (double)(rs->now - th->prev_ns) / NSEC_PER_SEC;

			r->vol_per_s = (st->voluntary - th->prev_voluntary) / secs;
			r->invol_per_s = (st->involuntary - th->prev_involuntary) / secs;
		} else {
			r->vol_per_s = st->voluntary / rs->secs;
			r->invol_per_s = st->involuntary / rs->secs;
		}
	} else {
		r->vol_per_s = st->voluntary / rs->secs;
		r->invol_per_s = st->involuntary / rs->secs;
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

static cJSON *row_json(const struct threads *t, const struct row *r, uint64_t now)
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
	if (r->exited_ns)
		cJSON_AddNumberToObject(o, "exited_ago_s", (double)(now - r->exited_ns) / NSEC_PER_SEC);
	else
		cJSON_AddNullToObject(o, "exited_ago_s");
	return o;
}

/* ---- threads: rows grouped by unit, cgroup or pod ---- */

struct group {
	struct row sum;			/* the group's threads added up (sum.st.tgid: one of them) */
	uint32_t threads;
	bool many_pids;
	struct cgroup_mix cgroups;
};

/* @rs's rows folded into one per group of kind @by, sorted as the threads are; -ENOMEM. */
static int group_rows(const struct rows *rs, enum cgroup_by by, struct group **out, size_t *nr)
{
	struct htab *index = htab__new(sizeof(uint32_t), sizeof(uint32_t), SIZE_MAX);
	struct group *v = NULL;
	size_t n = 0, cap = 0, i;

	if (!index)
		return -ENOMEM;
	for (i = 0; i < rs->n; i++) {
		const struct row *r = &rs->v[i];
		uint32_t key = cgroups__group(rs->f->cgroups, r->st.tgid, by), *at;
		int created = 0;
		struct group *g;

		if (!(at = htab__upsert(index, &key, &created, NULL)) ||
		    (created && ls_vec_reserve(&v, &cap, n, sizeof(*v)))) {
			htab__free(index);
			free(v);
			return -ENOMEM;
		}
		if (created) {
			*at = n++;
			v[*at] = (struct group){ .sum = { .st = { .tgid = r->st.tgid } } };
		}
		g = &v[*at];
		g->threads++;
		g->many_pids |= g->sum.st.tgid != r->st.tgid;
		query__cgroup_mix(rs->f->cgroups, r->st.tgid, &g->cgroups);
		g->sum.st.voluntary += r->st.voluntary;
		g->sum.st.involuntary += r->st.involuntary;
		g->sum.st.oncpu_ns += r->st.oncpu_ns;
		g->sum.st.blocked_ns += r->st.blocked_ns;
		g->sum.st.runq_ns += r->st.runq_ns;
		g->sum.vol_per_s += r->vol_per_s;
		g->sum.invol_per_s += r->invol_per_s;
	}
	htab__free(index);
	ls_sort(v, n, sizeof(*v), by_rate);	/* struct row first: compared as the threads */
	*out = v;
	*nr = n;
	return 0;
}

static cJSON *group_json(const struct threads *t, const struct group *g, const struct proc_filter *f)
{
	struct query_ctx ctx = { .cgroups = f->cgroups };
	cJSON *o = cJSON_CreateObject();

	cJSON_AddNumberToObject(o, "threads", g->threads);
	if (!g->many_pids)
		cJSON_AddNumberToObject(o, "pid", g->sum.st.tgid);
	cJSON_AddNumberToObject(o, "voluntary", g->sum.st.voluntary);
	cJSON_AddNumberToObject(o, "involuntary", g->sum.st.involuntary);
	cJSON_AddNumberToObject(o, "voluntary_per_s", g->sum.vol_per_s);
	cJSON_AddNumberToObject(o, "involuntary_per_s", g->sum.invol_per_s);
	cJSON_AddNumberToObject(o, "oncpu_ns", g->sum.st.oncpu_ns);
	cJSON_AddNumberToObject(o, "offcpu_blocked_ns", g->sum.st.blocked_ns);
	cJSON_AddNumberToObject(o, "runqueue_wait_ns", g->sum.st.runq_ns);
	cJSON_AddNumberToObject(o, "switch_cost_ns",
				(g->sum.st.voluntary + g->sum.st.involuntary) * t->switch_cost_ns);
	query__add_cgroup(o, &ctx, g->sum.st.tgid, g->cgroups.many);
	return o;
}

int threads__json(struct threads *t, const struct sched_source *src, const struct proc_filter *f, enum cgroup_by by,
		  uint32_t limit, enum ls_window w, uint64_t now, cJSON *o, const char **err)
{
	struct rows rs = { .t = t, .w = w, .f = f, .now = now };
	uint64_t base_ns, base_ctxt, start;
	cJSON *arr;
	size_t i;

	if (!src->sched) {
		*err = "per-thread scheduling is off (sched-threads=0, or the kernel lacks tp_btf)";
		return -EOPNOTSUPP;
	}
	if (w == THREADS_LIVE) {
		/* against the tick before (1-2 s back), or the only one there is yet */
		base_ns = t->prev_ns ? t->prev_ns : t->cur_ns;
		base_ctxt = t->prev_ns ? t->ctxt_prev : t->ctxt_cur;
		start = base_ns;
	} else {
		start = threads__window_start(t, w, now);
		base_ns = t->prev_ns ? t->prev_ns : t->cur_ns;	/* the host's rate: as live */
		base_ctxt = t->prev_ns ? t->ctxt_prev : t->ctxt_cur;
	}
	rs.secs = start && now > start ? (double)(now - start) / NSEC_PER_SEC : 0;
	if (threads__each(t, w, now, collect, &rs)) {
		free(rs.v);
		*err = "out of memory";
		return -ENOMEM;
	}
	ls_sort(rs.v, rs.n, sizeof(*rs.v), by_rate);
	cJSON_AddNumberToObject(o, "switch_cost_ns_per_switch", t->switch_cost_ns);
	cJSON_AddNumberToObject(o, "system_switches_per_s",
				base_ns && now > base_ns ? (threads__host_switches() - base_ctxt) / ((double)(now - base_ns) / NSEC_PER_SEC) : 0);
	cJSON_AddNumberToObject(o, "rate_window_s", rs.secs);
	arr = cJSON_AddArrayToObject(o, "rows");
	if (by < CGROUP_BY_MAX && f->cgroups) {
		struct group *groups;
		size_t n;

		if (group_rows(&rs, by, &groups, &n)) {
			free(rs.v);
			*err = "out of memory";
			return -ENOMEM;
		}
		for (i = 0; i < n && (!limit || i < limit); i++)
			cJSON_AddItemToArray(arr, group_json(t, &groups[i], f));
		free(groups);
	} else {
		for (i = 0; i < rs.n && (!limit || i < limit); i++)
			cJSON_AddItemToArray(arr, row_json(t, &rs.v[i], now));
	}
	free(rs.v);
	return 0;
}

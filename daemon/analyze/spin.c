// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "analyze/query.h"
#include "analyze/spin.h"
#include "analyze/spin_int.h"
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/vec.h"
#include "store/agg.h"
#include "store/stacks.h"

int spin__new(struct spin **out)
{
	struct spin *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->sites = htab__new(sizeof(uint32_t), sizeof(struct yield_site), SPIN_MAX_SITES);
	s->samples = htab__new(sizeof(struct sample_key), sizeof(uint64_t), SPIN_MAX_SAMPLE_STACKS);
	s->precise = htab__new(sizeof(uint32_t), sizeof(uint64_t), SPIN_MAX_SITES);
	if (!s->sites || !s->samples || !s->precise) {
		spin__free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

void spin__free(struct spin *s)
{
	if (!s)
		return;
	htab__free(s->sites);
	htab__free(s->samples);
	htab__free(s->precise);
	htab__free(s->interval);
	htab__free(s->pushed);
	free(s);
}

/* An upsert that starts the table over when it is full: these tables are caches. */
static void *upsert(struct htab *h, const void *key)
{
	void *v = htab__upsert(h, key, NULL, NULL);

	if (!v) {
		htab__clear(h);
		v = htab__upsert(h, key, NULL, NULL);
	}
	return v;
}

void spin__yield_site(struct spin *s, const struct sched_yield_rec *r, uint32_t stack)
{
	struct yield_site *y = upsert(s->sites, &r->tid);

	if (y)
		y->stack = stack;
}

void spin__sample(struct spin *s, const struct sched_spin_rec *r, uint32_t stack)
{
	struct sample_key k = { .tid = r->tid, .stack = stack, .poll = !!(r->rec_flags & SCHED_RF_POLL) };
	uint64_t *n = upsert(s->samples, &k);

	if (n)
		(*n)++;
	if (s->interval) {
		/* not a cache: a full table loses the stacked sample, counted */
		struct interval_key ik = { .pid = r->pid, .tid = r->tid, .stack = stack, .poll = k.poll };

		if ((n = htab__upsert(s->interval, &ik, NULL, NULL)))
			(*n)++;
		else
			s->interval_dropped++;
	}
}

static struct htab *interval_new(void)
{
	return htab__new(sizeof(struct interval_key), sizeof(uint64_t), SPIN_MAX_SAMPLE_STACKS);
}

int spin__keep_intervals(struct spin *s)
{
	if (!s->interval)
		s->interval = interval_new();
	if (!s->pushed)
		s->pushed = htab__new(sizeof(uint32_t), sizeof(struct pushed_counts), SIZE_MAX);
	return s->interval && s->pushed ? 0 : -ENOMEM;
}

/* A thread's samples since the last take, per loop: what it counted less what was pushed. */
struct interval_delta {
	uint32_t pid;
	uint64_t counts[2];		/* exact, by loop (0: PAUSE, 1: busy poll) */
	uint64_t stacked[2];		/* of the interval's stacked samples */
};

struct take {
	struct spin *s;
	struct htab *deltas;		/* tid -> struct interval_delta */
};

static int take_thread(void *ctx, uint32_t tid, const struct sched_thread *st, uint64_t exited_ns)
{
	struct take *tk = ctx;
	const uint64_t now[2] = { st->spin_samples, st->poll_samples };
	struct pushed_counts *pc;
	struct interval_delta *d;
	int i;

	(void)exited_ns;
	if (!tid)	/* exited threads folded together: each was taken while it had its own row */
		return 0;
	pc = htab__upsert(tk->s->pushed, &tid, NULL, NULL);	/* zeroed when new */
	if (!pc)
		return -ENOMEM;
	pc->gen = tk->s->pushed_gen;
	if (now[0] == pc->counts[0] && now[1] == pc->counts[1])
		return 0;
	if (!(d = htab__upsert(tk->deltas, &tid, NULL, NULL)))
		return -ENOMEM;
	d->pid = st->tgid;
	for (i = 0; i < 2; i++) {
		/* a count below the last pushed is a new thread of the same tid */
		d->counts[i] = now[i] >= pc->counts[i] ? now[i] - pc->counts[i] : now[i];
		pc->counts[i] = now[i];
	}
	return 0;
}

/* Threads this take did not see are gone for good: what was pushed of them is forgotten. */
static int forget_gone(struct spin *s)
{
	struct htab *kept = htab__new(sizeof(uint32_t), sizeof(struct pushed_counts), SIZE_MAX);
	size_t it = 0;
	const void *kp;
	void *vp, *v;

	if (!kept)
		return -ENOMEM;
	while (!htab__next(s->pushed, &it, &kp, &vp)) {
		if (((struct pushed_counts *)vp)->gen != s->pushed_gen)
			continue;
		if (!(v = htab__upsert(kept, kp, NULL, NULL))) {
			htab__free(kept);
			return -ENOMEM;
		}
		memcpy(v, vp, sizeof(struct pushed_counts));
	}
	htab__free(s->pushed);
	s->pushed = kept;
	return 0;
}

int spin__take_interval(struct spin *s, const struct threads *thr, uint64_t now, spin_interval_fn fn, void *ctx,
			uint64_t *dropped)
{
	struct take tk = { .s = s };
	struct htab *done = s->interval;
	struct interval_delta *d;
	size_t it = 0;
	const void *kp;
	void *vp;
	int err = -ENOMEM, i;

	*dropped = 0;
	if (!done)
		return -ENOENT;
	s->pushed_gen++;
	if (!(tk.deltas = htab__new(sizeof(uint32_t), sizeof(struct interval_delta), SIZE_MAX)) ||
	    !(s->interval = interval_new()))
		goto out;
	*dropped = s->interval_dropped;
	s->interval_dropped = 0;
	if ((err = threads__each(thr, LS_WIN_ALL, now, take_thread, &tk)))
		goto out;
	if ((err = forget_gone(s)))
		goto out;
	/* each thread's count over its stacked samples, as the samples fell */
	it = 0;
	while (!htab__next(done, &it, &kp, &vp)) {
		const struct interval_key *k = kp;

		if ((d = htab__find(tk.deltas, &k->tid)))
			d->stacked[k->poll] += *(uint64_t *)vp;
	}
	it = 0;
	while (!err && !htab__next(done, &it, &kp, &vp)) {
		const struct interval_key *k = kp;

		if ((d = htab__find(tk.deltas, &k->tid)) && d->counts[k->poll])
			err = fn(ctx, k->pid, k->stack, k->poll, (double)d->counts[k->poll] * *(uint64_t *)vp /
				 d->stacked[k->poll]);
	}
	/* samples of threads whose stacks the sampler skipped all interval */
	it = 0;
	while (!err && !htab__next(tk.deltas, &it, &kp, &vp)) {
		d = vp;
		for (i = 0; i < 2 && !err; i++)
			if (d->counts[i] && !d->stacked[i])
				err = fn(ctx, d->pid, LS_STACK_MISSING, i, d->counts[i]);
	}
out:
	if (!s->interval)
		s->interval = done;	/* out of memory: this interval's samples go to the next */
	else
		htab__free(done);
	htab__free(tk.deltas);
	return err;
}

void spin__precise_ran(struct spin *s, uint32_t pid, uint64_t ns)
{
	uint64_t *t = upsert(s->precise, &pid);

	if (t)
		*t += ns;
}

void spin__resume(struct spin *s, const struct sched_resume_rec *r, uint32_t stack, uint64_t base_events,
		  uint64_t base_ns)
{
	struct resume *slot = &s->resumes[s->head];

	slot->base_events = base_events;
	slot->base_ns = base_ns;
	slot->r = *r;
	slot->r.comm[LS_COMM_LEN - 1] = 0;
	slot->stack = stack;
	s->head = (s->head + 1) % SPIN_RESUMES_KEPT;
	if (s->nr_resumes < SPIN_RESUMES_KEPT)
		s->nr_resumes++;
}

static int snap_thread(void *ctx, uint32_t tid, const struct sched_thread *st, uint64_t exited_ns)
{
	struct snapshot *sn = ctx;
	uint32_t *idx;

	(void)exited_ns;	/* an exited thread's findings read as a running one's */
	if (ls_vec_reserve(&sn->threads, &sn->cap_threads, sn->nr_threads, sizeof(*sn->threads)))
		return -ENOMEM;
	idx = htab__upsert(sn->by_tid, &tid, NULL, NULL);
	if (!idx)
		return -ENOMEM;
	*idx = sn->nr_threads;
	sn->threads[sn->nr_threads++] = (struct thread){ tid, *st };
	return 0;
}

static int snap_peer(void *ctx, const struct sched_peer_key *k, const struct sched_peer *v)
{
	struct snapshot *sn = ctx;

	if (ls_vec_reserve(&sn->peers, &sn->cap_peers, sn->nr_peers, sizeof(*sn->peers)))
		return -ENOMEM;
	sn->peers[sn->nr_peers++] = (struct peer){ *k, *v };
	return 0;
}

const struct sched_thread *spin_thread_of(const struct snapshot *sn, uint32_t tid)
{
	const uint32_t *idx = htab__find(sn->by_tid, &tid);

	return idx ? &sn->threads[*idx].st : NULL;
}

int spin__json(struct spin *s, const struct sched_source *feat, const struct threads *thr, enum ls_window w,
	       const struct agg_view *tab, double secs, const struct query_ctx *ctx,
	       const struct spin_thresholds *th, const struct proc_filter *f, int max_stack, cJSON *o,
	       const char **err)
{
	uint64_t now = ls_now_ns();
	struct snapshot sn = { .f = f, .th = th };
	cJSON *arr, *src;
	int ret = -ENOMEM;

	if (!feat->sched) {
		*err = "spin detection is off (sched-threads=0, or the kernel lacks tp_btf)";
		return -EOPNOTSUPP;
	}
	sn.by_tid = htab__new(sizeof(uint32_t), sizeof(uint32_t), SIZE_MAX);
	if (w != THREADS_LIVE)
		sn.start = threads__window_start(thr, w, now);
	if (!sn.by_tid || threads__each(thr, w, now, snap_thread, &sn) ||
	    feat->peers(feat->src, snap_peer, &sn)) {
		*err = "cannot read the scheduler maps";
		ret = -EIO;
		goto cleanup;
	}
	src = cJSON_AddObjectToObject(o, "sources");
	cJSON_AddBoolToObject(src, "yield", true);
	cJSON_AddBoolToObject(src, "pause_sampling", feat->spin_sampling);
	cJSON_AddBoolToObject(src, "busy_poll_sampling", feat->spin_sampling);
	cJSON_AddBoolToObject(src, "futex_eagain", feat->precise);
	cJSON_AddBoolToObject(src, "stops", true);
	cJSON_AddBoolToObject(src, "holder_preemption", feat->ulock);
	arr = cJSON_AddArrayToObject(o, "findings");
	spin_yield_findings(s, &sn, ctx, max_stack, now, arr);
	spin_sample_findings(s, &sn, ctx, max_stack, true, arr);
	ret = spin_futex_findings(s, tab, &sn, ctx, max_stack, arr);
	spin_sample_findings(s, &sn, ctx, max_stack, false, arr);
	spin_burst_findings(s, &sn, ctx, max_stack, arr);
	ret = ret ?: spin_preempt_findings(tab, secs, &sn, ctx, arr);
	if (ret)
		*err = "out of memory";
cleanup:
	htab__free(sn.by_tid);
	free(sn.threads);
	free(sn.peers);
	return ret;
}


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
	       const struct spin_thresholds *th, uint32_t pid, int max_stack, cJSON *o, const char **err)
{
	uint64_t now = ls_now_ns();
	struct snapshot sn = { .pid = pid, .th = th };
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


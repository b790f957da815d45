// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "analyze/query.h"
#include "analyze/spin.h"
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/vec.h"
#include "store/agg.h"
#include "store/stacks.h"

/* tables of stacks by thread: when one fills, it starts over (sites are recorded again) */
#define SPIN_MAX_SITES 16384
#define SPIN_MAX_SAMPLE_STACKS 65536
#define SPIN_STACKS_SHOWN 5

struct yield_site {
	uint32_t stack;		/* the latest stack of the site */
};

struct sample_key {
	uint32_t tid;
	uint32_t stack;
	uint32_t poll;		/* a busy-poll sample (SCHED_RF_POLL), else a PAUSE loop's */
};

struct resume {
	struct sched_resume_rec r;
	uint32_t stack;
	uint64_t base_events, base_ns;	/* the thread's events before the stop, and over how long */
};

struct spin {
	struct htab *sites;		/* tid -> struct yield_site, the latest */
	struct htab *samples;		/* struct sample_key -> uint64_t spin samples with a stack */
	struct htab *precise;		/* pid -> uint64_t ns its precise scans ran */
	struct resume resumes[SPIN_RESUMES_KEPT];	/* a ring, newest at head - 1 */
	unsigned int head, nr_resumes;
};

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

/* ---- findings ---- */

struct thread {
	uint32_t tid;
	struct sched_thread st;
};

struct peer {
	struct sched_peer_key k;
	struct sched_peer v;
};

/* Everything a query reads, once: the window's threads and the BPF side's yield peers. */
struct snapshot {
	uint32_t pid;
	uint64_t start;			/* the window's start (live: 0) */
	const struct spin_thresholds *th;
	struct thread *threads;
	size_t nr_threads, cap_threads;
	struct htab *by_tid;		/* tid -> index in threads */
	struct peer *peers;
	size_t nr_peers, cap_peers;
};

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

static const struct sched_thread *thread_of(const struct snapshot *sn, uint32_t tid)
{
	const uint32_t *idx = htab__find(sn->by_tid, &tid);

	return idx ? &sn->threads[*idx].st : NULL;
}

static cJSON *finding_new(const char *kind, uint32_t pid, uint32_t tid, const char *comm)
{
	cJSON *f = cJSON_CreateObject();

	cJSON_AddStringToObject(f, "kind", kind);
	cJSON_AddNumberToObject(f, "pid", pid);
	cJSON_AddNumberToObject(f, "tid", tid);
	cJSON_AddStringToObject(f, "comm", comm);
	return f;
}

/* Whether a frame of finding @f's stack names @needle (symbol or module). */
static bool stack_in(const cJSON *f, const char *needle)
{
	const cJSON *stack = cJSON_GetObjectItemCaseSensitive(f, "stack"), *fr;

	cJSON_ArrayForEach(fr, stack) {
		const cJSON *sym = cJSON_GetObjectItemCaseSensitive(fr, "sym");
		const cJSON *mod = cJSON_GetObjectItemCaseSensitive(fr, "module");

		if ((cJSON_IsString(sym) && strstr(sym->valuestring, needle)) ||
		    (cJSON_IsString(mod) && strstr(mod->valuestring, needle)))
			return true;
	}
	return false;
}

/* The thread the storm yielded to most: the one it most likely waits for. */
static cJSON *peer_json(const struct snapshot *sn, uint32_t tid, cJSON *evidence)
{
	const struct peer *best = NULL;
	const struct sched_thread *pst;
	cJSON *p, *all = cJSON_AddArrayToObject(evidence, "peers");
	size_t i;

	for (i = 0; i < sn->nr_peers; i++) {
		const struct peer *pe = &sn->peers[i];
		cJSON *o;

		if (pe->k.tid != tid)
			continue;
		if (!best || pe->v.yields > best->v.yields)
			best = pe;
		o = cJSON_CreateObject();
		cJSON_AddNumberToObject(o, "tid", pe->k.peer);
		pst = thread_of(sn, pe->k.peer);
		cJSON_AddStringToObject(o, "comm", pst ? pst->comm : pe->v.comm);
		cJSON_AddNumberToObject(o, "yields_to", pe->v.yields);
		cJSON_AddNumberToObject(o, "preempted", pe->v.preempted);
		cJSON_AddItemToArray(all, o);
	}
	/* a storm whose yields never switched ran nothing else: no peer */
	if (!best)
		return cJSON_CreateNull();
	p = cJSON_CreateObject();
	pst = thread_of(sn, best->k.peer);
	cJSON_AddNumberToObject(p, "tid", best->k.peer);
	cJSON_AddStringToObject(p, "comm", pst ? pst->comm : best->v.comm);
	cJSON_AddBoolToObject(p, "preempted", best->v.preempted > 0);
	cJSON_AddNumberToObject(p, "preempted_share", (double)best->v.preempted / best->v.yields);
	return p;
}

static void yield_findings(struct spin *s, const struct snapshot *sn, const struct query_ctx *ctx,
			   int max_stack, uint64_t now, cJSON *arr)
{
	size_t i;

	for (i = 0; i < sn->nr_threads; i++) {
		const struct thread *t = &sn->threads[i];
		const struct sched_thread *st = &t->st;
		const struct yield_site *site = htab__find(s->sites, &t->tid);
		double secs = (double)(st->last_yield_ns - st->storm_start_ns) / NSEC_PER_SEC;
		double rate = secs > 0 ? st->storm_yields / secs : 0;
		cJSON *f, *ev;

		if ((sn->pid && st->tgid != sn->pid) || st->storm_yields < sn->th->yield_min ||
		    rate < sn->th->yield_min_rate || st->last_yield_ns < sn->start)
			continue;
		f = finding_new("yield_spin", st->tgid, t->tid, st->comm);
		cJSON_AddNumberToObject(f, "rate_per_s", rate);
		cJSON_AddNumberToObject(f, "cpu_ns", st->storm_spin_ns);
		query__add_stack(f, ctx, site ? site->stack : LS_STACK_NONE, max_stack, true);
		ev = cJSON_CreateObject();
		cJSON_AddNumberToObject(ev, "storm_yields", st->storm_yields);
		cJSON_AddNumberToObject(ev, "storm_s", secs);
		cJSON_AddBoolToObject(ev, "active", now - st->last_yield_ns < SCHED_STORM_GAP_NS);
		cJSON_AddNumberToObject(ev, "last_yield_ago_s", (double)(now - st->last_yield_ns) / NSEC_PER_SEC);
		cJSON_AddNumberToObject(ev, "yields_total", st->yields);
		cJSON_AddNumberToObject(ev, "yield_spin_ns_total", st->yield_spin_ns);
		if (st->storm_via == LS_POLL_SLEEP) {	/* sleeps: nothing ran in its place */
			cJSON_AddStringToObject(ev, "via", "nanosleep");
			cJSON_AddNullToObject(f, "peer");
			cJSON_AddItemToObject(f, "evidence", ev);
			cJSON_AddStringToObject(f, "hint",
				"a zero-length sleep in a loop: each one still switches out and back "
				"(the timer slack) and burns the CPU on the round trip; wait on a futex, "
				"condition variable or eventfd instead");
			cJSON_AddItemToArray(arr, f);
			continue;
		}
		cJSON_AddStringToObject(ev, "via", "sched_yield");
		cJSON_AddItemToObject(f, "peer", peer_json(sn, t->tid, ev));
		cJSON_AddItemToObject(f, "evidence", ev);
		cJSON_AddStringToObject(f, "hint", stack_in(f, "libuv") || stack_in(f, "uv__async") ?
			"libuv 1.40-1.44 uv__async_spin(): the loop thread spins while a uv_async_send() "
			"sender is preempted between its two stores; upgrade to libuv >= 1.45" :
			"a sched_yield() loop burns its CPU while the thread it waits for waits for a "
			"CPU; wait on a futex, condition variable or eventfd instead");
		cJSON_AddItemToArray(arr, f);
	}
}

struct stack_pick {
	uint32_t stack;
	uint64_t n;
};

static int cmp_picks(const void *a, const void *b)
{
	const struct stack_pick *x = a, *y = b;

	return x->n < y->n ? 1 : x->n > y->n ? -1 : 0;
}

/* The thread's spin stacks, most sampled first, each with its share of all the thread's samples. */
static uint32_t spin_stacks(struct spin *s, uint32_t tid, bool poll, double share,
			    const struct query_ctx *ctx, int max_stack, cJSON *ev)
{
	struct stack_pick *picks = NULL;
	size_t nr = 0, cap = 0, iter = 0, i;
	uint64_t total = 0;
	cJSON *arr = cJSON_AddArrayToObject(ev, "stacks");
	uint32_t top = LS_STACK_NONE;
	const void *kp;
	void *vp;

	while (!htab__next(s->samples, &iter, &kp, &vp)) {
		const struct sample_key *k = kp;

		if (k->tid != tid || k->poll != poll)
			continue;
		if (ls_vec_reserve(&picks, &cap, nr, sizeof(*picks)))
			break;
		picks[nr++] = (struct stack_pick){ k->stack, *(uint64_t *)vp };
		total += *(uint64_t *)vp;
	}
	ls_sort(picks, nr, sizeof(*picks), cmp_picks);
	for (i = 0; i < nr && i < SPIN_STACKS_SHOWN; i++) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddNumberToObject(o, "samples", picks[i].n);
		cJSON_AddNumberToObject(o, "share", share * picks[i].n / total);
		query__add_stack(o, ctx, picks[i].stack, max_stack, true);
		cJSON_AddItemToArray(arr, o);
	}
	if (nr)
		top = picks[0].stack;
	free(picks);
	return top;
}

/*
 * The values of @h as an array of pointers sorted by @cmp (which compares two pointers);
 * NULL (and *nr 0) when out of memory. Free with free().
 */
static void **sorted_values(const struct htab *h, int (*cmp)(const void *, const void *), size_t *nr)
{
	void **v = calloc(htab__count(h) + 1, sizeof(*v));
	size_t iter = 0;
	const void *kp;
	void *vp;

	*nr = 0;
	while (v && !htab__next(h, &iter, &kp, &vp))
		v[(*nr)++] = vp;
	if (v)
		ls_sort(v, *nr, sizeof(*v), cmp);
	return v;
}

/* What the busy-poll samples of a thread were last in, by enum ls_poll_call. */
static const char *const poll_calls[] = {
	[LS_POLL_NONE] = "unknown",
	[LS_POLL_POLL] = "poll",
	[LS_POLL_SELECT] = "select",
	[LS_POLL_EPOLL] = "epoll_wait",
	[LS_POLL_SLEEP] = "nanosleep",
};

/*
 * Threads whose cpu-clock samples say they spin: in a PAUSE loop (pause_spin), or in
 * waits that return at once (busy polling, a yield_spin of another call: it has a share,
 * not a rate, since only samples see it).
 */
static void sample_findings(struct spin *s, const struct snapshot *sn, const struct query_ctx *ctx,
			    int max_stack, bool poll, cJSON *arr)
{
	size_t i;

	for (i = 0; i < sn->nr_threads; i++) {
		const struct thread *t = &sn->threads[i];
		const struct sched_thread *st = &t->st;
		uint64_t hits = poll ? st->poll_samples : st->spin_samples;
		double share = st->samples ? (double)hits / st->samples : 0;
		const char *call = poll_calls[st->poll_nr < sizeof(poll_calls) / sizeof(poll_calls[0]) ?
					      st->poll_nr : LS_POLL_NONE];
		char hint[256];
		cJSON *f, *ev;
		uint32_t top;

		if ((sn->pid && st->tgid != sn->pid) || hits < sn->th->pause_min_samples ||
		    share * 100 < sn->th->pause_min_share_pct)
			continue;
		f = finding_new(poll ? "yield_spin" : "pause_spin", st->tgid, t->tid, st->comm);
		cJSON_AddNumberToObject(f, "share", share);
		/* the thread's on-CPU time, in the share its samples say it spun */
		cJSON_AddNumberToObject(f, "cpu_ns", (double)st->oncpu_ns * share);
		ev = cJSON_CreateObject();
		if (poll)
			cJSON_AddStringToObject(ev, "via", call);
		cJSON_AddNumberToObject(ev, "samples", st->samples);
		cJSON_AddNumberToObject(ev, poll ? "poll_samples" : "spin_samples", hits);
		cJSON_AddNumberToObject(ev, "oncpu_ns", st->oncpu_ns);
		top = spin_stacks(s, t->tid, poll, share, ctx, max_stack, ev);
		query__add_stack(f, ctx, top, max_stack, true);
		cJSON_AddNullToObject(f, "peer");
		cJSON_AddItemToObject(f, "evidence", ev);
		if (poll)
			snprintf(hint, sizeof(hint), "busy polling: %s with a zero timeout in a loop returns "
				 "at once and burns the CPU; block with a timeout (or on an eventfd, futex "
				 "or condition variable) until there is work", call);
		else
			snprintf(hint, sizeof(hint), "a spin-wait loop (PAUSE) burns CPU a preempted lock "
				 "holder may need: spin briefly, then block (an adaptive mutex or a futex), "
				 "and keep spinning threads no more than CPUs");
		cJSON_AddStringToObject(f, "hint", hint);
		cJSON_AddItemToArray(arr, f);
	}
}

struct futex_spin {
	struct agg_key rep;	/* the key with most calls */
	uint64_t rep_calls, calls;
	char comm[LS_COMM_LEN];
};

static int cmp_futex_spins(const void *a, const void *b)
{
	const struct futex_spin *x = *(const struct futex_spin **)a, *y = *(const struct futex_spin **)b;

	return x->calls < y->calls ? 1 : x->calls > y->calls ? -1 : 0;
}

/*
 * Threads calling FUTEX_WAIT on words that had already changed (EAGAIN): a loop that
 * spins through the kernel. Only precise scans see calls that do not sleep, so the rate
 * is over the time the process's precise scans ran.
 */
static int futex_findings(struct spin *s, const struct agg_view *tab, const struct snapshot *sn,
			  const struct query_ctx *ctx, int max_stack, cJSON *arr)
{
	struct htab *by = htab__new(sizeof(uint32_t), sizeof(struct futex_spin), SIZE_MAX);
	struct futex_spin **v = NULL;
	size_t nr = 0, i;
	const struct agg_key *k;
	struct agg_val val, *av = &val;

	if (!by)
		return -ENOMEM;
	for (i = 0; tab && !agg_view__get(tab, i, &k, &val); i++) {
		struct futex_spin *fs;
		int created = 0;

		if (!(k->flags & LS_KIND_USER) || !av->nonblocking || (sn->pid && k->pid != sn->pid))
			continue;
		if (!(fs = htab__upsert(by, &k->tid, &created, NULL)))
			continue;
		if (created)
			memcpy(fs->comm, av->comm, sizeof(fs->comm));
		/*
		 * The calls are the exact entries'; the caller shown is the sampled one with most
		 * calls, among those with a stack if any has one
		 */
		if (created || (k->stack > LS_STACK_MISSING) > (fs->rep.stack > LS_STACK_MISSING) ||
		    ((k->stack > LS_STACK_MISSING) == (fs->rep.stack > LS_STACK_MISSING) &&
		     av->nonblocking > fs->rep_calls)) {
			fs->rep = *k;
			fs->rep_calls = av->nonblocking;
		}
		if (!k->sampled)
			fs->calls += av->nonblocking;
	}
	v = (void *)sorted_values(by, cmp_futex_spins, &nr);
	for (i = 0; i < nr; i++) {
		const uint64_t *ns = htab__find(s->precise, &v[i]->rep.pid);
		double secs = ns ? (double)*ns / NSEC_PER_SEC : 0;
		double rate = secs > 0 ? v[i]->calls / secs : 0;
		cJSON *f, *ev;

		if (v[i]->calls < sn->th->yield_min || rate < sn->th->yield_min_rate)
			continue;
		f = finding_new("yield_spin", v[i]->rep.pid, v[i]->rep.tid, v[i]->comm);
		cJSON_AddNumberToObject(f, "rate_per_s", rate);
		cJSON_AddNullToObject(f, "cpu_ns");
		query__add_stack(f, ctx, v[i]->rep.stack, max_stack, true);
		cJSON_AddNullToObject(f, "peer");
		cJSON_AddItemToObject(f, "lock", query__lock_json(ctx, &v[i]->rep));
		ev = cJSON_CreateObject();
		cJSON_AddStringToObject(ev, "via", "futex");
		cJSON_AddNumberToObject(ev, "nonblocking", v[i]->calls);
		cJSON_AddNumberToObject(ev, "precise_s", secs);
		cJSON_AddItemToObject(f, "evidence", ev);
		cJSON_AddStringToObject(f, "hint",
			"FUTEX_WAIT keeps returning EAGAIN: the word changes between the load and the "
			"wait, so the loop spins through the kernel; wait for the value last seen, "
			"and re-check the condition once before waiting again");
		cJSON_AddItemToArray(arr, f);
	}
	free(v);
	htab__free(by);
	return 0;
}

static void burst_findings(struct spin *s, const struct snapshot *sn, const struct query_ctx *ctx,
			   int max_stack, cJSON *arr)
{
	uint64_t boot = ls_clock_ns(CLOCK_BOOTTIME);
	unsigned int i;

	for (i = 0; i < s->nr_resumes; i++) {
		const struct resume *rs = &s->resumes[(s->head + SPIN_RESUMES_KEPT - 1 - i) % SPIN_RESUMES_KEPT];
		const struct sched_resume_rec *r = &rs->r;
		double window_s = (double)SCHED_BURST_WINDOW_NS / NSEC_PER_SEC;
		/* the thread's own events per window before the stop */
		double base = rs->base_ns ? (double)rs->base_events * SCHED_BURST_WINDOW_NS / rs->base_ns : 0;
		cJSON *f, *ev;

		if ((sn->pid && r->pid != sn->pid) || r->window_events < sn->th->burst_min_events ||
		    r->window_events < sn->th->burst_factor * (base > 1 ? base : 1))
			continue;
		f = finding_new("burst", r->pid, r->tid, r->comm);
		cJSON_AddNumberToObject(f, "rate_per_s", r->window_events / window_s);
		cJSON_AddNullToObject(f, "cpu_ns");
		query__add_stack(f, ctx, rs->stack, max_stack, true);
		cJSON_AddNullToObject(f, "peer");
		ev = cJSON_CreateObject();
		cJSON_AddNumberToObject(ev, "stop_ns", r->stop_ns);
		cJSON_AddNumberToObject(ev, "events_first_100ms", r->window_events);
		cJSON_AddNumberToObject(ev, "baseline_per_100ms", base);
		cJSON_AddNumberToObject(ev, "ratio", base > 0 ? r->window_events / base : 0);
		cJSON_AddNumberToObject(ev, "counted_ns", r->window_ns);
		cJSON_AddNumberToObject(ev, "resumed_ago_s",
					boot > r->resume_ns ? (double)(boot - r->resume_ns) / NSEC_PER_SEC : 0);
		cJSON_AddStringToObject(ev, "events", "read/write syscalls + sleeps");
		cJSON_AddItemToObject(f, "evidence", ev);
		cJSON_AddStringToObject(f, "hint",
			"catch-up burst: a periodic timer fired every tick it missed while stopped. "
			"tokio: interval.set_missed_tick_behavior(MissedTickBehavior::Skip) or Delay "
			"(the default, Burst, fires them all at once); elsewhere, schedule the next "
			"tick from now, not from the missed deadline");
		cJSON_AddItemToArray(arr, f);
	}
}

/* Holder preemptions, per lock and holder thread. */
struct preempt_key {
	uint64_t lock;
	uint32_t object, pid, tid, pad;
};

struct preempt_val {
	struct agg_key rep;
	uint64_t count, total_ns, max_ns;
	char comm[LS_COMM_LEN];
};

static int cmp_preempts(const void *a, const void *b)
{
	const struct preempt_val *x = *(const struct preempt_val *const *)a;
	const struct preempt_val *y = *(const struct preempt_val *const *)b;

	return x->total_ns < y->total_ns ? 1 : x->total_ns > y->total_ns ? -1 : 0;
}

static int preempt_findings(const struct agg_view *tab, double secs, const struct snapshot *sn,
			    const struct query_ctx *ctx, cJSON *arr)
{
	struct htab *by = htab__new(sizeof(struct preempt_key), sizeof(struct preempt_val), SIZE_MAX);
	struct preempt_val **v = NULL;
	size_t nr = 0, i;
	const struct agg_key *k;
	struct agg_val val, *av = &val;

	if (!by)
		return -ENOMEM;
	for (i = 0; tab && !agg_view__get(tab, i, &k, &val); i++) {
		struct preempt_key pk = { .lock = k->lock, .object = k->object, .pid = k->pid, .tid = k->tid };
		struct preempt_val *pv;
		int created = 0;

		if (!query__is_preempt(k->flags) || (sn->pid && k->pid != sn->pid))
			continue;
		if (!(pv = htab__upsert(by, &pk, &created, NULL)))
			continue;
		if (created) {
			pv->rep = *k;
			memcpy(pv->comm, av->comm, sizeof(pv->comm));
		}
		pv->count += av->st.count;
		pv->total_ns += av->st.total_ns;
		if (av->st.max_ns > pv->max_ns)
			pv->max_ns = av->st.max_ns;
	}
	v = (void *)sorted_values(by, cmp_preempts, &nr);
	for (i = 0; i < nr; i++) {
		cJSON *f = finding_new("holder_preempted", v[i]->rep.pid, v[i]->rep.tid, v[i]->comm), *ev;

		cJSON_AddNumberToObject(f, "rate_per_s", secs > 0 ? v[i]->count / secs : 0);
		cJSON_AddNullToObject(f, "cpu_ns");
		cJSON_AddNullToObject(f, "stack");
		cJSON_AddNullToObject(f, "peer");
		cJSON_AddItemToObject(f, "lock", query__lock_json(ctx, &v[i]->rep));
		if (v[i]->rep.flags & LS_KIND_KPREEMPT) {
			int type = query__type_index(v[i]->rep.flags & ~LS_KIND_KPREEMPT);

			cJSON_AddStringToObject(f, "lock_kind", "kernel");
			cJSON_AddStringToObject(f, "lock_type", ls_lock_types[type].name);
		} else {
			cJSON_AddStringToObject(f, "lock_kind", "user");
		}
		ev = cJSON_CreateObject();
		cJSON_AddNumberToObject(ev, "preemptions", v[i]->count);
		cJSON_AddNumberToObject(ev, "preempted_ns", v[i]->total_ns);
		cJSON_AddNumberToObject(ev, "max_preempted_ns", v[i]->max_ns);
		cJSON_AddNumberToObject(ev, "window_s", secs);
		cJSON_AddItemToObject(f, "evidence", ev);
		cJSON_AddStringToObject(f, "hint",
			"the lock's holder lost its CPU while others waited, and they waited for its "
			"turn in the run queue too: shorten the critical section, run fewer runnable "
			"threads than CPUs, or give the holder's threads their own CPUs");
		cJSON_AddItemToArray(arr, f);
	}
	free(v);
	htab__free(by);
	return 0;
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
	yield_findings(s, &sn, ctx, max_stack, now, arr);
	sample_findings(s, &sn, ctx, max_stack, true, arr);
	ret = futex_findings(s, tab, &sn, ctx, max_stack, arr);
	sample_findings(s, &sn, ctx, max_stack, false, arr);
	burst_findings(s, &sn, ctx, max_stack, arr);
	ret = ret ?: preempt_findings(tab, secs, &sn, ctx, arr);
	if (ret)
		*err = "out of memory";
cleanup:
	htab__free(sn.by_tid);
	free(sn.threads);
	free(sn.peers);
	return ret;
}

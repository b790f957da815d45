// SPDX-License-Identifier: GPL-2.0
/*
 * The spin findings made of the threads' own figures (spin.h): yield storms, spin loops
 * and busy polls by their sampled share, and bursts after stops, each with its stacks.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/query.h"
#include "analyze/spin.h"
#include "analyze/spin_int.h"
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/vec.h"
#include "store/agg.h"
#include "store/stacks.h"

cJSON *spin_finding_new(const char *kind, uint32_t pid, uint32_t tid, const char *comm)
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
		pst = spin_thread_of(sn, pe->k.peer);
		cJSON_AddStringToObject(o, "comm", pst ? pst->comm : pe->v.comm);
		cJSON_AddNumberToObject(o, "yields_to", pe->v.yields);
		cJSON_AddNumberToObject(o, "preempted", pe->v.preempted);
		cJSON_AddItemToArray(all, o);
	}
	/* a storm whose yields never switched ran nothing else: no peer */
	if (!best)
		return cJSON_CreateNull();
	p = cJSON_CreateObject();
	pst = spin_thread_of(sn, best->k.peer);
	cJSON_AddNumberToObject(p, "tid", best->k.peer);
	cJSON_AddStringToObject(p, "comm", pst ? pst->comm : best->v.comm);
	cJSON_AddBoolToObject(p, "preempted", best->v.preempted > 0);
	cJSON_AddNumberToObject(p, "preempted_share", (double)best->v.preempted / best->v.yields);
	return p;
}

void spin_yield_findings(struct spin *s, const struct snapshot *sn, const struct query_ctx *ctx,
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

		if (!query__proc_wanted(sn->f, st->tgid) || st->storm_yields < sn->th->yield_min ||
		    rate < sn->th->yield_min_rate || st->last_yield_ns < sn->start)
			continue;
		f = spin_finding_new("yield_spin", st->tgid, t->tid, st->comm);
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
void **spin_sorted_values(const struct htab *h, int (*cmp)(const void *, const void *), size_t *nr)
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
void spin_sample_findings(struct spin *s, const struct snapshot *sn, const struct query_ctx *ctx,
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

		if (!query__proc_wanted(sn->f, st->tgid) || hits < sn->th->pause_min_samples ||
		    share * 100 < sn->th->pause_min_share_pct)
			continue;
		f = spin_finding_new(poll ? "yield_spin" : "pause_spin", st->tgid, t->tid, st->comm);
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

void spin_burst_findings(struct spin *s, const struct snapshot *sn, const struct query_ctx *ctx,
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

		if (!query__proc_wanted(sn->f, r->pid) || r->window_events < sn->th->burst_min_events ||
		    r->window_events < sn->th->burst_factor * (base > 1 ? base : 1))
			continue;
		f = spin_finding_new("burst", r->pid, r->tid, r->comm);
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

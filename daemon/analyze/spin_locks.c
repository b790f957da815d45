// SPDX-License-Identifier: GPL-2.0
/*
 * The spin findings made of the lock table (spin.h): futex waits that returned at once
 * (EAGAIN storms, seen by precise scans) and lock holders preempted while others waited.
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
int spin_futex_findings(struct spin *s, const struct agg_view *tab, const struct snapshot *sn,
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

		if (!(k->flags & LS_KIND_USER) || !av->nonblocking || !query__proc_wanted(sn->f, k->pid))
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
	v = (void *)spin_sorted_values(by, cmp_futex_spins, &nr);
	for (i = 0; i < nr; i++) {
		const uint64_t *ns = htab__find(s->precise, &v[i]->rep.pid);
		double secs = ns ? (double)*ns / NSEC_PER_SEC : 0;
		double rate = secs > 0 ? v[i]->calls / secs : 0;
		cJSON *f, *ev;

		if (v[i]->calls < sn->th->yield_min || rate < sn->th->yield_min_rate)
			continue;
		f = spin_finding_new("yield_spin", v[i]->rep.pid, v[i]->rep.tid, v[i]->comm);
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

int spin_preempt_findings(const struct agg_view *tab, double secs, const struct snapshot *sn,
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

		if (!query__is_preempt(k->flags) || !query__proc_wanted(sn->f, k->pid))
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
	v = (void *)spin_sorted_values(by, cmp_preempts, &nr);
	for (i = 0; i < nr; i++) {
		cJSON *f = spin_finding_new("holder_preempted", v[i]->rep.pid, v[i]->rep.tid, v[i]->comm), *ev;

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

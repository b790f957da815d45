// SPDX-License-Identifier: GPL-2.0
/*
 * Reading what the programs wrote: the rings (to the decoder's callback), the two wait
 * tables flipped each second, the scheduler maps, kernel and user stacks, the counters;
 * and sweeping what exited threads left in the maps.
 */
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "collect/collector.h"
#include "collect/collector_int.h"
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/log.h"
#include "lib/procfs.h"
#include "klock.h"
#include "klock.skel.h"
#include "scheduler.h"
#include "scheduler.skel.h"

/* Entries per batch read: one syscall per batch, not two per entry, every second. */
#define THREADS_BATCH 256

#define WAITS_BATCH 256
/*
 * How long to wait for programs still on the old table. They run for microseconds; a vCPU
 * the hypervisor descheduled (or emulates: qemu TCG) can hold one for milliseconds.
 */
#define WAITS_WAIT_MAX_NS (100 * 1000 * 1000ULL)
/* Tries per CPU to count the waits that ended there uncounted (klock_count_done()). */
#define DONE_TRIES 8

/* A thread's spin figures, and whether the task iterator still found it. */
struct spinner {
	struct sched_spin_thread sp;
	bool alive;
};

/*
 * A BPF_F_MMAPABLE array of entries of @elem bytes, mapped for one pass over it (*n
 * entries); NULL on failure. Unmapped after the pass (unmap_array()): a mapping kept would
 * add the array's pages to the daemon's RSS.
 */
static void *map_array(const struct bpf_map *m, size_t elem, __u32 *n)
{
	void *p;

	*n = bpf_map__max_entries(m);
	p = mmap(NULL, *n * elem, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(m), 0);
	return p == MAP_FAILED ? NULL : p;
}

static void unmap_array(void *p, size_t elem, __u32 n)
{
	munmap(p, n * elem);
}

/*
 * The spin figures of the threads that have some, by tid: spin_cache's entries, then the
 * spinners map's (an LRU hash), so that an entry a thread's exit moved from the one to
 * the other in between is found in the map, as it is now.
 */
static struct htab *read_spinners(const struct collector *c)
{
	static __u32 keys[THREADS_BATCH];
	static struct sched_spin_thread vals[THREADS_BATCH];
	struct htab *h = htab__new(sizeof(__u32), sizeof(struct spinner), c->opts.sched_threads + SCHED_SPIN_CACHE);
	int fd = bpf_map__fd(c->sskel->maps.spinners), ret;
	struct sched_spin_cached *sc;
	__u32 batch, count, i, n;
	void *in = NULL;

	if (!h)
		return NULL;
	sc = map_array(c->sskel->maps.spin_cache, sizeof(*sc), &n);
	if (!sc) {
		htab__free(h);
		return NULL;
	}
	for (i = 0; i < n; i++) {
		__u32 tid = __atomic_load_n(&sc[i].owner, __ATOMIC_ACQUIRE);
		struct spinner *sp;

		if (tid && (sp = htab__upsert(h, &tid, NULL, NULL)))
			sp->sp = sc[i].sp;
	}
	unmap_array(sc, sizeof(*sc), n);
	do {
		count = THREADS_BATCH;
		ret = bpf_map_lookup_batch(fd, in, &batch, keys, vals, &count, NULL);
		if (ret && errno != ENOENT)	/* ENOENT: the last batch */
			break;
		for (i = 0; i < count; i++) {
			struct spinner *sp = htab__upsert(h, &keys[i], NULL, NULL);

			if (sp)
				sp->sp = vals[i];
		}
		in = &batch;
	} while (!ret);
	return h;
}

/* One thread from the kernel's counters and the programs' spin figures. */
static void thread_of(const struct sched_task_rec *r, const struct sched_spin_thread *sp, __u64 now,
		      struct sched_thread *st)
{
	__u64 end = r->end_ns ? r->end_ns : now;
	__u64 life = end > r->start_ns ? end - r->start_ns : 0, off;

	memset(st, 0, sizeof(*st));
	st->tgid = r->tgid;
	memcpy(st->comm, r->comm, sizeof(st->comm));
	st->voluntary = r->nvcsw;
	st->involuntary = r->nivcsw;
	st->oncpu_ns = r->sum_exec_ns;
	st->runq_ns = r->run_delay_ns;
	off = r->sum_exec_ns + r->run_delay_ns;
	st->blocked_ns = life > off ? life - off : 0;
	st->events = r->events;
	st->start_ns = r->start_ns;
	if (!sp)
		return;
	st->yields = sp->yields;
	st->yield_spin_ns = sp->yield_spin_ns;
	st->storm_start_ns = sp->storm_start_ns;
	st->storm_yields = sp->storm_yields;
	st->storm_spin_ns = sp->storm_spin_ns;
	st->last_yield_ns = sp->last_yield_ns;
	st->samples = sp->samples;
	st->spin_samples = sp->spin_samples;
	st->poll_samples = sp->poll_samples;
	st->poll_nr = sp->poll_nr;
	st->storm_via = sp->storm_via;
}

/* One thread that exited: the kernel's counters as it left, with its spin figures. */
static int report_exited(const struct sched_task_rec *r, struct htab *spinners, __u64 now, collector_thread_fn fn,
			 void *ctx)
{
	struct spinner *sp = htab__find(spinners, &r->tid);
	struct sched_thread st;

	if (sp)
		sp->alive = true;	/* reported here, with its counters */
	thread_of(r, sp ? &sp->sp : NULL, now, &st);
	st.flags |= SCHED_THREAD_EXITED | SCHED_THREAD_FINAL;
	return fn(ctx, r->tid, &st);
}

/*
 * The exited_cache array's published entries, reported and freed: the record cleared,
 * then the entry marked free.
 */
static int exited_cached(const struct collector *c, struct htab *spinners, __u64 now, collector_thread_fn fn,
			 void *ctx)
{
	struct sched_exited *x;
	int err = 0;
	__u32 n, i;

	x = map_array(c->sskel->maps.exited_cache, sizeof(*x), &n);
	if (!x)
		return -errno;
	for (i = 0; i < n && !err; i++) {
		if (!__atomic_load_n(&x[i].ready, __ATOMIC_ACQUIRE))
			continue;
		err = report_exited(&x[i].rec, spinners, now, fn, ctx);
		memset(&x[i].rec, 0, sizeof(x[i].rec));
		x[i].ready = 0;
		__atomic_store_n(&x[i].owner, 0, __ATOMIC_RELEASE);
	}
	unmap_array(x, sizeof(*x), n);
	return err;
}

/*
 * Threads that exited since the last read: the kernel's counters as they left
 * (at their last switch out), with their spin figures; the array's, then the hash's.
 */
static int exited_tasks(const struct collector *c, struct htab *spinners, __u64 now, collector_thread_fn fn,
			void *ctx)
{
	static __u32 keys[THREADS_BATCH];
	static struct sched_task_rec vals[THREADS_BATCH];
	int fd = bpf_map__fd(c->sskel->maps.exited_tasks), ret, err;
	__u32 batch, count, i;
	void *in = NULL;

	err = exited_cached(c, spinners, now, fn, ctx);
	if (err)
		return err;
	do {
		count = THREADS_BATCH;
		ret = bpf_map_lookup_and_delete_batch(fd, in, &batch, keys, vals, &count, NULL);
		if (ret && errno != ENOENT)	/* ENOENT: the last batch */
			return -errno;
		for (i = 0; i < count && !err; i++)
			err = report_exited(&vals[i], spinners, now, fn, ctx);
		in = &batch;
	} while (!ret && !err);
	return err;
}

/* Threads that yielded or spun and have exited: their spin figures, until the LRU forgets them. */
static int exited_spinners(struct htab *spinners, __u64 now, collector_thread_fn fn, void *ctx)
{
	struct sched_task_rec r = {};
	struct sched_thread st;
	const void *kp;
	size_t iter = 0;
	void *vp;
	int err = 0;

	while (!err && !htab__next(spinners, &iter, &kp, &vp)) {
		const struct spinner *sp = vp;

		if (sp->alive)
			continue;
		r.tid = *(const __u32 *)kp;
		r.tgid = sp->sp.tgid;
		r.start_ns = now;
		memcpy(r.comm, sp->sp.comm, sizeof(r.comm));
		thread_of(&r, &sp->sp, now, &st);
		st.start_ns = 0;
		st.flags |= SCHED_THREAD_EXITED;
		err = fn(ctx, r.tid, &st);
	}
	return err;
}

int collector__sched_threads(struct collector *c, collector_thread_fn fn, void *ctx)
{
	struct sched_task_rec recs[THREADS_BATCH];
	struct sched_thread st;
	struct timespec ts;
	struct htab *spinners;
	__u32 mode = c->iter_passes++ % SCHED_ITER_FULL_EVERY ? SCHED_ITER_CHANGED : SCHED_ITER_ALL;
	ssize_t n;
	int fd, err = 0, i;
	__u64 now;

	if (!c->feat.sched)
		return -EOPNOTSUPP;
	spinners = read_spinners(c);
	if (!spinners)
		return -ENOMEM;
	/* one pass of the task iterator: the threads' counters as the kernel keeps them */
	clock_gettime(CLOCK_MONOTONIC, &ts);	/* the clock task start_time is on */
	now = ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
	c->sskel->bss->iter_mode = mode;
	c->sskel->bss->iter_since_ns = c->iter_began_ns;
	fd = bpf_iter_create(bpf_link__fd(c->iter_link));
	if (fd < 0) {
		err = -errno;
		goto out;
	}
	while (!err && (n = read(fd, recs, sizeof(recs))) > 0) {
		for (i = 0; !err && i < n / (ssize_t)sizeof(recs[0]); i++) {
			struct spinner *sp = htab__find(spinners, &recs[i].tid);

			if (sp)
				sp->alive = true;
			thread_of(&recs[i], sp ? &sp->sp : NULL, now, &st);
			err = fn(ctx, recs[i].tid, &st);
		}
	}
	if (n < 0 && !err)
		err = -errno;
	close(fd);
	if (!err) {
		c->iter_began_ns = now;	/* the next partial pass writes what ran since */
		err = exited_tasks(c, spinners, now, fn, ctx);
	}
	/* a spinner a partial pass did not write may only have slept */
	if (!err && mode == SCHED_ITER_ALL)
		err = exited_spinners(spinners, now, fn, ctx);
out:
	if (err)
		c->iter_passes = 0;	/* the store may have missed some: the next pass writes all */
	htab__free(spinners);
	return err ? err : (int)mode;
}

/*
 * Whether one of our programs is inside a wait table on @cpu now: wait_barrier, run on
 * that CPU. 1 busy, 0 not, -ENXIO offline (nothing runs there), else -errno.
 */
static int waits_busy_on(int fd, int cpu)
{
	LIBBPF_OPTS(bpf_test_run_opts, opts, .flags = BPF_F_TEST_RUN_ON_CPU, .cpu = cpu);

	if (bpf_prog_test_run_opts(fd, &opts))
		return -errno;
	return opts.retval == LS_WAIT_BARRIER_BUSY;
}

/*
 * A kernel that cannot run the barrier on a CPU: an update of a map-in-map returns only
 * after every BPF program running when it began has finished (the kernel waits for an RCU
 * grace period, maybe_wait_bpf_programs(), so that user space knows none still uses the
 * old inner map). Writing a wait table's slot with the same table does nothing else. It
 * takes a grace period (8-16 ms here), not microseconds: the fallback only.
 */
static int waits_grace_period(const struct collector *c)
{
	__u32 key = 0;

	return bpf_map_update_elem(c->shared_fds[SHARED_WAIT_TABLES], &key, &c->table_fds[0], BPF_ANY) ? -errno : 0;
}

/*
 * klock's ends leave their waits on their CPU for the next begin there (they run inside
 * the critical section; see klock.bpf.c): each CPU's ended waits go into the table being
 * written, so the window drained now has every wait that ended in it. A CPU where one of
 * our programs runs at that instant says so (KLOCK_DRAIN_BUSY) and is asked again; one
 * still busy after that, or offline, keeps its waits for its next begin, which counts them in the next
 * window. A kernel that refuses the test run is named once: its waits are then counted
 * at the next begin on their CPU, in whatever window that falls.
 */
static void klock_count_done(struct collector *c)
{
	int fd = bpf_program__fd(c->skel->progs.count_done_waits), cpu, tries, err;
	static bool warned;

	for (cpu = 0; fd >= 0 && cpu < c->nr_cpus; cpu++) {
		LIBBPF_OPTS(bpf_test_run_opts, opts, .flags = BPF_F_TEST_RUN_ON_CPU, .cpu = cpu);

		for (tries = 0; tries < DONE_TRIES; tries++) {
			err = bpf_prog_test_run_opts(fd, &opts) ? -errno : 0;
			if (err || opts.retval != KLOCK_DRAIN_BUSY)
				break;
			sched_yield();
		}
		if (err && err != -ENXIO && !warned) {	/* ENXIO: an offline CPU */
			pr_warn("klock: cannot count the waits noted on CPU %d (%s): they count at its next "
				"kernel-lock wait, maybe in a later window\n", cpu, strerror(-err));
			warned = true;
		}
	}
}

/*
 * Asks each CPU, there, until no program of ours is inside a table on it (lockscope.h):
 * programs run for microseconds with preemption off, but the hypervisor may hold a vCPU in
 * the middle of one; past the bound the drain goes ahead and the race is counted. 0, or
 * the -errno of a CPU the kernel cannot run the barrier on.
 */
static int waits_barrier(struct collector *c)
{
	int fd = bpf_program__fd(c->skel->progs.wait_barrier), cpu, busy;
	uint64_t t0 = ls_now_ns();
	bool waited = false;

	for (cpu = 0; cpu < c->nr_cpus; cpu++) {
		while ((busy = waits_busy_on(fd, cpu)) == 1) {
			if (!waited)
				c->drain.waited++;
			waited = true;
			if (ls_now_ns() - t0 > WAITS_WAIT_MAX_NS) {
				c->drain.raced++;
				return 0;
			}
			sched_yield();
		}
		if (busy < 0 && busy != -ENXIO)		/* ENXIO: an offline CPU, where nothing runs */
			return busy;
	}
	return 0;
}

/* Moves the programs on to the other table, then waits until none still uses the old one. */
static void waits_flip(struct collector *c)
{
	static bool warned;
	int err;

	klock_count_done(c);
	c->epoch++;
	__atomic_store_n(&c->skel->bss->wait_epoch, c->epoch, __ATOMIC_SEQ_CST);
	if (c->sskel)
		__atomic_store_n(&c->sskel->bss->wait_epoch, c->epoch, __ATOMIC_SEQ_CST);
	c->drain.flips++;
	if (!(err = waits_barrier(c)))
		return;
	if (!warned) {
		pr_warn("wait tables: cannot ask each CPU whether a program still uses the old table (%s): "
			"waiting for a grace period at each drain instead\n", strerror(-err));
		warned = true;
	}
	if ((err = waits_grace_period(c))) {
		pr_warn("wait tables: cannot wait for a grace period (%s): a wait may be lost to this drain\n",
			strerror(-err));
		c->drain.raced++;
	}
}

/*
 * The CPUs' cache slots of the half programs left: every CPU's copy of each slot that
 * holds an entry of that epoch. The half is read whole; the next epoch of this parity
 * finds its slots stale and takes them over, so nothing needs clearing.
 */
static int drain_caches(struct collector *c, __u32 epoch, collector_wait_fn fn, void *ctx)
{
	int fd = bpf_map__fd(c->skel->maps.wait_cache), err = 0, n = 0, cpu;
	size_t stride = (sizeof(struct ls_wait_cached) + 7) & ~(size_t)7;
	__u32 first = (epoch & (LS_WAIT_TABLES - 1)) * LS_WAIT_CACHE_SLOTS, key, batch, count, i;
	__u32 keys[LS_WAIT_CACHE_SLOTS];
	void *in = NULL;
	char *vals;
	int ret;

	vals = calloc(LS_WAIT_CACHE_SLOTS, stride * c->nr_cpus);
	if (!vals)
		return -ENOMEM;
	/* lookup_batch walks from a key: start just before the half's first slot */
	key = first - 1;
	if (first)
		in = &key;
	do {
		count = LS_WAIT_CACHE_SLOTS;
		ret = bpf_map_lookup_batch(fd, in, &batch, keys, vals, &count, NULL);
		if (ret && errno != ENOENT) {
			err = -errno;
			break;
		}
		for (i = 0; i < count && !err; i++) {
			if (keys[i] < first || keys[i] >= first + LS_WAIT_CACHE_SLOTS)
				continue;
			for (cpu = 0; cpu < c->nr_cpus && !err; cpu++) {
				const struct ls_wait_cached *e = (const void *)(vals + (i * c->nr_cpus + cpu) * stride);

				if (!e->used || e->epoch != epoch)
					continue;
				err = fn(ctx, &e->key, &e->val);
				n++;
			}
		}
		in = &batch;
	} while (!ret && !err && keys[count ? count - 1 : 0] < first + LS_WAIT_CACHE_SLOTS - 1);
	free(vals);
	return err ?: n;
}

int collector__waits_drain(struct collector *c, collector_wait_fn fn, void *ctx)
{
	static struct ls_wait_key keys[WAITS_BATCH];
	static struct ls_wait_val vals[WAITS_BATCH];
	__u32 batch, count, i;
	void *in = NULL;
	int fd, ret, err = 0, n = 0;

	waits_flip(c);
	fd = c->table_fds[(c->epoch - 1) & (LS_WAIT_TABLES - 1)];

	do {
		count = WAITS_BATCH;
		ret = bpf_map_lookup_and_delete_batch(fd, in, &batch, keys, vals, &count, NULL);
		if (ret && errno != ENOENT)	/* ENOENT: the last batch */
			return -errno;
		for (i = 0; i < count && !err; i++, n++)
			err = fn(ctx, &keys[i], &vals[i]);
		in = &batch;
	} while (!ret && !err);
	if (err)
		return err;
	ret = drain_caches(c, c->epoch - 1, fn, ctx);
	return ret < 0 ? ret : n + ret;
}

/* Adds @v into the pair @k of @pairs: a pair may be in a spinner's entry and in the map both. */
static int peer_add(struct htab *pairs, const struct sched_peer_key *k, const struct sched_peer *v)
{
	struct sched_peer *sum;
	int created, err;

	sum = htab__upsert(pairs, k, &created, &err);
	if (!sum)
		return err;
	sum->yields += v->yields;
	sum->preempted += v->preempted;
	if (created || v->comm[0])
		memcpy(sum->comm, v->comm, sizeof(sum->comm));
	return 0;
}

/*
 * The (yielder, peer) pairs: a spinner's first SCHED_SPIN_PEERS in its own entry, the
 * rest in the peers map; one pair in both (a spinner the LRU forgot and made anew) is
 * summed.
 */
int collector__sched_peers(const struct collector *c, collector_peer_fn fn, void *ctx)
{
	struct sched_peer_key key, next, *prev = NULL;
	struct htab *spinners, *pairs = NULL;
	struct sched_peer val;
	const void *kp;
	size_t iter = 0;
	void *vp;
	int fd, err = 0, i;

	if (!c->feat.sched)
		return -EOPNOTSUPP;
	spinners = read_spinners(c);
	if (spinners)
		pairs = htab__new(sizeof(key), sizeof(val), SCHED_DEF_MAX_PEERS + SCHED_SPIN_PEERS * SCHED_DEF_MAX_SPINNERS);
	if (!pairs) {
		err = -ENOMEM;
		goto out;
	}
	while (!err && !htab__next(spinners, &iter, &kp, &vp)) {
		const struct spinner *sp = vp;

		for (i = 0; !err && i < SCHED_SPIN_PEERS && sp->sp.peers[i].tid; i++) {
			key = (struct sched_peer_key){ .tid = *(const __u32 *)kp, .peer = sp->sp.peers[i].tid };
			err = peer_add(pairs, &key, &sp->sp.peers[i].v);
		}
	}
	/* at most SCHED_DEF_MAX_PEERS, read only on a query: no batch needed */
	fd = bpf_map__fd(c->sskel->maps.peers);
	while (!err && !bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &val))
			continue;	/* evicted meanwhile */
		err = peer_add(pairs, &key, &val);
	}
	iter = 0;
	while (!err && !htab__next(pairs, &iter, &kp, &vp))
		err = fn(ctx, kp, vp);
out:
	htab__free(pairs);
	htab__free(spinners);
	return err;
}

void collector__counters(const struct collector *c, uint64_t out[LS_CNT_MAX])
{
	int fd = bpf_map__fd(c->skel->maps.counters), cpu;
	__u64 *vals = calloc(c->nr_cpus, sizeof(__u64));
	__u32 key;

	memset(out, 0, sizeof(uint64_t) * LS_CNT_MAX);
	if (!vals)
		return;
	for (key = 0; key < LS_CNT_MAX; key++) {
		if (bpf_map_lookup_elem(fd, &key, vals))
			continue;
		for (cpu = 0; cpu < c->nr_cpus; cpu++)
			out[key] += vals[cpu];
	}
	free(vals);
}

static int stack_map_fd(const struct collector *c, enum collector_stack_kind kind)
{
	if (kind == COLL_USTACK)
		return c->sskel ? bpf_map__fd(c->sskel->maps.stacks) : -ENOENT;
	return bpf_map__fd(c->skel->maps.stacks);
}

int collector__stack(const struct collector *c, enum collector_stack_kind kind, int id,
		     uint64_t *ips, int max)
{
	__u64 buf[LS_MAX_STACK_DEPTH] = {};
	int fd = stack_map_fd(c, kind), n;

	if (id < 0 || fd < 0)
		return -ENOENT;
	if (bpf_map_lookup_elem(fd, &id, buf))
		return -errno;
	for (n = 0; n < (int)c->opts.max_stack && n < max && buf[n]; n++)
		ips[n] = buf[n];
	return n;
}

static bool thread_exists(__u32 tid)
{
	char path[32];

	snprintf(path, sizeof(path), "/proc/%u", tid);
	return !access(path, F_OK);
}

/*
 * What one procfs lookup of a tid costs in tasks of the iterator's pass: 4.7-6.2 us
 * against 0.7 us a task (20 000 threads parked on the 2-CPU guest).
 */
#define PROCFS_PER_TASK 7

/*
 * The threads alive now, as a set of tids, from one pass of the task iterator, for a
 * sweep of @keys entries; NULL where procfs is to be asked per key instead: where that is
 * cheaper (few keys on a host of many threads), or there is no iterator (no scheduler
 * component, or out of memory), or it lists one process only (a scan's own collector:
 * other processes' threads would seem gone). After a churn of 10 000 threads a map's
 * sweep took 30 ms asking procfs (three maps a sweep, the rings undrained meanwhile).
 */
static struct htab *live_tids(const struct collector *c, size_t keys)
{
	struct sched_task_rec recs[THREADS_BATCH];
	struct htab *live;
	ssize_t n;
	int fd, i;

	if (!c->feat.sched || !c->iter_link || c->opts.tgid || keys * PROCFS_PER_TASK < ls_host_threads())
		return NULL;
	c->sskel->bss->iter_mode = SCHED_ITER_ALL;	/* every thread */
	fd = bpf_iter_create(bpf_link__fd(c->iter_link));
	if (fd < 0)
		return NULL;
	live = htab__new(sizeof(__u32), 0, SIZE_MAX);
	while (live && (n = read(fd, recs, sizeof(recs))) > 0) {
		for (i = 0; i < n / (ssize_t)sizeof(recs[0]); i++) {
			if (!htab__upsert(live, &recs[i].tid, NULL, NULL)) {
				n = -1;
				break;
			}
		}
	}
	if (live && n < 0) {
		htab__free(live);
		live = NULL;
	}
	close(fd);
	return live;
}

/* Whether thread @tid is alive: in @live, or where there is none, in procfs. */
static bool thread_alive(const struct htab *live, __u32 tid)
{
	return live ? htab__find(live, &tid) != NULL : thread_exists(tid);
}

/* Whether an exited thread's slot held a wait (or for the scheduler, anything) open. */
typedef bool (*slot_open_fn)(const void *value);

static bool klock_slot_open(const void *value)
{
	return ((const struct klock_slot *)value)->depth > 0;
}

static bool sched_slot_open(const void *value)
{
	const struct sched_slot *e = value;

	return e->state != SLOT_IDLE || e->preempt_ns || e->stop.stop_ns;
}

/*
 * One tid-keyed map a sweep empties of exited threads: the keys it had before the threads
 * were listed, then the dead among them and whether each held something open.
 */
struct sweep {
	const struct bpf_map *map;
	slot_open_fn open;	/* NULL: none of its entries counts as a missed end */
	struct htab *before;	/* the keys read before the threads were listed */
	const struct htab *live;	/* the threads alive then; NULL: ask procfs */
	__u32 *dead;
	bool *held;
	__u32 nr_dead;
};

/*
 * Reads @map's entries, a batch a syscall, calling @fn with each (key, value) (a thread's
 * entry may come or go meanwhile). Returns 0 or -errno.
 */
static int read_entries(const struct bpf_map *map, int (*fn)(struct sweep *sw, __u32 key, const void *val),
			struct sweep *sw)
{
	__u32 keys[THREADS_BATCH], size = bpf_map__value_size(map), batch, count, i;
	unsigned char *vals = malloc((size_t)size * THREADS_BATCH);
	int fd = bpf_map__fd(map), ret, err = 0;
	void *in = NULL;

	if (!vals)
		return -ENOMEM;
	do {
		count = THREADS_BATCH;
		ret = bpf_map_lookup_batch(fd, in, &batch, keys, vals, &count, NULL);
		if (ret && errno != ENOENT) {	/* ENOENT: the last batch */
			err = -errno;
			break;
		}
		for (i = 0; i < count && !err; i++)
			err = fn(sw, keys[i], vals + (size_t)i * size);
		in = &batch;
	} while (!ret && !err);
	free(vals);
	return err;
}

static int note_key(struct sweep *sw, __u32 key, const void *val)
{
	(void)val;
	return htab__upsert(sw->before, &key, NULL, NULL) ? 0 : -ENOMEM;
}

/* An entry read after the threads were listed: its thread's, if that was there before and is gone. */
static int note_dead(struct sweep *sw, __u32 key, const void *val)
{
	if (!htab__find(sw->before, &key) || thread_alive(sw->live, key) ||
	    sw->nr_dead >= bpf_map__max_entries(sw->map))
		return 0;
	sw->dead[sw->nr_dead] = key;
	sw->held[sw->nr_dead++] = sw->open && sw->open(val);
	return 0;
}

/*
 * Deletes the entries of @sw's dead, a batch a syscall, and returns how many held something
 * open: ends that were missed. Only keys read before the threads were listed are candidates
 * (a thread that began since is not among them, and alive); what they held is read after,
 * once they had exited. A thread that exited after the listing keeps its entry until the
 * next sweep. (A tid a new thread took between the two reads would lose its entry, as it
 * did when procfs was asked per key: pid numbers wrap after millions.)
 */
static int sweep_dead(struct sweep *sw, uint64_t *deleted)
{
	int fd = bpf_map__fd(sw->map), removed = 0, ret;
	__u32 max = bpf_map__max_entries(sw->map), i, done, count;

	sw->dead = calloc(max, sizeof(*sw->dead));
	sw->held = calloc(max, sizeof(*sw->held));
	if (!sw->dead || !sw->held || read_entries(sw->map, note_dead, sw))
		return 0;	/* the next sweep tries again */
	for (done = 0; done < sw->nr_dead; done += count) {
		count = sw->nr_dead - done;
		ret = bpf_map_delete_batch(fd, sw->dead + done, &count, NULL);
		for (i = done; i < done + count; i++)
			removed += sw->held[i];
		*deleted += count;
		if (ret && done + count < sw->nr_dead) {
			/*
			 * it stopped at an entry it could not delete: one gone meanwhile (ENOENT),
			 * or where batches are refused, deleted alone
			 */
			if (!bpf_map_delete_elem(fd, &sw->dead[done + count])) {
				removed += sw->held[done + count];
				*deleted += 1;
			}
			count++;
		}
	}
	return removed;
}

/*
 * Frees klock's slot_cache entries of exited threads: cleared first, then marked free, so
 * a thread that claims one (a compare-and-swap of owner from 0) finds it empty. Returns
 * the open waits they held.
 */
static int gc_slot_cache(struct collector *c, const struct htab *live)
{
	struct klock_slot *slots;
	int removed = 0;
	__u32 n, i, tid;

	slots = map_array(c->skel->maps.slot_cache, sizeof(*slots), &n);
	if (!slots)
		return 0;	/* the next sweep tries again */
	for (i = 0; i < n; i++) {
		tid = __atomic_load_n(&slots[i].owner, __ATOMIC_ACQUIRE);
		if (!tid || thread_alive(live, tid))
			continue;
		removed += klock_slot_open(&slots[i]);
		memset(&slots[i], 0, offsetof(struct klock_slot, owner));
		memset(slots[i].e, 0, sizeof(slots[i].e));
		__atomic_store_n(&slots[i].owner, 0, __ATOMIC_RELEASE);
		c->kslots_freed++;
	}
	unmap_array(slots, sizeof(*slots), n);
	return removed;
}

/*
 * Empties klock's slots while none of its programs is on a hook (collector__resume()): a
 * wait open when they came off lost its end, or will, and left in a thread's slot it would
 * lie under every later wait of that thread. The CPUs' ended waits are counted first.
 * Returns the open waits dropped (each was counted as begun, never as a wait).
 */
int collector_klock_reset(struct collector *c)
{
	int fd = bpf_map__fd(c->skel->maps.thread_slots), n_cpu = libbpf_num_possible_cpus(), dropped = 0, i, ret;
	__u32 key = 0, n, keys[THREADS_BATCH], batch, count;
	struct klock_slot *slots;
	void *in = NULL;

	_Static_assert(sizeof(struct klock_slot) % 8 == 0, "a per-CPU value is padded to 8 bytes");

	klock_count_done(c);
	if (n_cpu > 0 && (slots = calloc(n_cpu, sizeof(*slots)))) {
		/* a per-CPU value is rounded up to 8 bytes, as struct klock_slot is */
		if (!bpf_map__lookup_elem(c->skel->maps.cpu_slots, &key, sizeof(key), slots, n_cpu * sizeof(*slots), 0)) {
			for (i = 0; i < n_cpu; i++)
				dropped += slots[i].depth;
			memset(slots, 0, n_cpu * sizeof(*slots));
			bpf_map__update_elem(c->skel->maps.cpu_slots, &key, sizeof(key), slots,
					     n_cpu * sizeof(*slots), BPF_ANY);
		}
		free(slots);
	}
	slots = map_array(c->skel->maps.slot_cache, sizeof(*slots), &n);
	for (i = 0; slots && i < (int)n; i++) {
		dropped += slots[i].depth;
		slots[i].depth = 0;	/* its owner keeps it */
	}
	if (slots)
		unmap_array(slots, sizeof(*slots), n);
	/* the hash holds every thread that waited on a sleeping lock, read a batch a call:
	 * only the open are written */
	if (!(slots = malloc(sizeof(*slots) * THREADS_BATCH)))
		return dropped;
	do {
		count = THREADS_BATCH;
		ret = bpf_map_lookup_batch(fd, in, &batch, keys, slots, &count, NULL);
		for (i = 0; i < (int)count && (!ret || errno == ENOENT); i++) {
			if (!slots[i].depth)
				continue;
			dropped += slots[i].depth;
			slots[i].depth = 0;
			bpf_map_update_elem(fd, &keys[i], &slots[i], BPF_EXIST);
		}
		in = &batch;
	} while (!ret);
	free(slots);
	return dropped;
}

/*
 * The maps' keys are read first and the threads alive after: a key whose thread is not
 * among them had exited by then. The slot_cache is read after the threads: its owners are
 * claimed by live threads, and one that claimed a slot since is not in @live only if it
 * exited too.
 */
int collector__gc(struct collector *c)
{
	struct sweep sw[] = {
		{ .map = c->skel->maps.owner_stacks },
		{ .map = c->skel->maps.thread_slots, .open = klock_slot_open },
		{ .map = c->sskel ? c->sskel->maps.thread_slots : NULL, .open = sched_slot_open },
	};
	const size_t nr = sizeof(sw) / sizeof(sw[0]);
	struct htab *live = NULL;
	size_t i, keys = 0;
	int removed = 0;

	for (i = 0; i < nr; i++) {
		if (!sw[i].map)
			continue;
		sw[i].before = htab__new(sizeof(__u32), 0, SIZE_MAX);
		if (!sw[i].before || read_entries(sw[i].map, note_key, &sw[i]))
			goto out;	/* the next sweep tries again */
		keys += htab__count(sw[i].before);
	}
	live = live_tids(c, keys);
	for (i = 0; i < nr; i++) {
		sw[i].live = live;
		if (sw[i].map)
			removed += sweep_dead(&sw[i], &c->entries_swept);
	}
	removed += gc_slot_cache(c, live);
out:
	htab__free(live);
	for (i = 0; i < nr; i++) {
		htab__free(sw[i].before);
		free(sw[i].dead);
		free(sw[i].held);
	}
	return removed;
}

uint64_t collector__slots_freed(const struct collector *c)
{
	return c->kslots_freed;
}

uint64_t collector__entries_swept(const struct collector *c)
{
	return c->entries_swept;
}

int collector__stack_free(struct collector *c, enum collector_stack_kind kind, int id)
{
	int fd = stack_map_fd(c, kind);

	if (fd < 0)
		return fd;
	return bpf_map_delete_elem(fd, &id) ? -errno : 0;
}

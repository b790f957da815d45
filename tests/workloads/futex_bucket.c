// SPDX-License-Identifier: GPL-2.0
/*
 * futex_bucket: seed 004's "futex wake path contention". Every futex(2) call on a word
 * takes the spinlock of the kernel hash bucket that word hashes to, and a wake walks every
 * waiter queued in that bucket while holding it. Here one event word is crowded: a notifier
 * pool signals work on it (each round a thread bumps the word, wakes one waiter of the
 * WORK event, then waits for the next round with the value it saw, which by then is often
 * stale: FUTEX_WAIT returns EAGAIN after taking the bucket lock), while a pool of idle
 * workers sleeps on the same word for a different event (SHUTDOWN; futex bitsets let one
 * word carry several). Every wake walks past all the idle sleepers under the bucket lock,
 * and the notifiers spin on it in futex_wait_setup and futex_wake. The user-space side
 * barely waits. With --fixed every notifier has an event word of its own, on its own cache
 * line, and the idle workers block in read(2) on a shutdown pipe: no bucket is crowded.
 *
 * Prints the rounds done as JSON at exit.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "workload.h"

enum {
	MAX_THREADS = 64,
	MAX_IDLE = 1024,
	CACHELINE = 64,
	/* the events one word carries: a waiter sleeps for one, a wake names one */
	EVENT_WORK = 1 << 0,
	EVENT_SHUTDOWN = 1 << 1,
};

/* a notifier sleeps at most this long, so a lost wake-up costs a round, not the run */
#define WAIT_TIMEOUT_NS 1000000L
/* an idle worker rechecks for shutdown this often, should it sleep past the final wake */
#define IDLE_TIMEOUT_NS 100000000L

static struct {
	double seconds;
	int threads;
	int idle;
	int fixed;
} opts = { .seconds = 3, .threads = 4, .idle = 128 };

struct event_word {
	_Alignas(CACHELINE) _Atomic uint32_t seq;
};

static struct event_word words[MAX_THREADS];
static volatile int stop;
static int shutdown_pipe[2];

struct notifier {
	pthread_t thread;
	struct event_word *own, *next;
	long rounds;
};

/* FUTEX_WAIT_BITSET's timeout is absolute (CLOCK_MONOTONIC) */
static long futex_wait_event(_Atomic uint32_t *uaddr, uint32_t val, uint32_t event, long timeout_ns)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_nsec += timeout_ns;
	t.tv_sec += t.tv_nsec / 1000000000L;
	t.tv_nsec %= 1000000000L;
	return syscall(SYS_futex, uaddr, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, val, &t, NULL, event);
}

static long futex_wake_event(_Atomic uint32_t *uaddr, int nr, uint32_t event)
{
	return syscall(SYS_futex, uaddr, FUTEX_WAKE_BITSET | FUTEX_PRIVATE_FLAG, nr, NULL, NULL, event);
}

/* noinline: the kernel lock's callers must show the user frames by name */
__attribute__((noinline)) static void notify_round(struct event_word *own, struct event_word *next)
{
	uint32_t seen = atomic_load_explicit(&own->seq, memory_order_acquire);

	atomic_fetch_add_explicit(&next->seq, 1, memory_order_release);
	futex_wake_event(&next->seq, 1, EVENT_WORK);
	futex_wait_event(&own->seq, seen, EVENT_WORK, WAIT_TIMEOUT_NS);
}

static void *notifier_main(void *arg)
{
	struct notifier *n = arg;

	while (!stop) {
		notify_round(n->own, n->next);
		n->rounds++;
	}
	return NULL;
}

/* An idle worker: sleeps until shutdown, on the shared word or (fixed) on a pipe. */
static void *idle_main(void *arg)
{
	char c;

	(void)arg;
	if (opts.fixed) {
		while (read(shutdown_pipe[0], &c, 1) < 0)
			;
		return NULL;
	}
	while (!stop) {
		uint32_t seen = atomic_load_explicit(&words[0].seq, memory_order_acquire);

		futex_wait_event(&words[0].seq, seen, EVENT_SHUTDOWN, IDLE_TIMEOUT_NS);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' },
		{ "idle", required_argument, NULL, 'i' },
		{ "fixed", no_argument, NULL, 'f' },
		{ "wait", no_argument, NULL, 'w' },
		{},
	};
	static pthread_t idle[MAX_IDLE];
	struct notifier n[MAX_THREADS] = {};
	int c, i, wait = 0;
	long rounds = 0;
	double start;

	while ((c = getopt_long(argc, argv, "s:t:i:fw", longopts, NULL)) != -1) {
		switch (c) {
		case 's': opts.seconds = atof(optarg); break;
		case 't': opts.threads = atoi(optarg); break;
		case 'i': opts.idle = atoi(optarg); break;
		case 'f': opts.fixed = 1; break;
		case 'w': wait = 1; break;
		default:
			goto usage;
		}
	}
	if (opts.threads < 1 || opts.threads > MAX_THREADS || opts.idle < 0 || opts.idle > MAX_IDLE)
		goto usage;
	if (pipe(shutdown_pipe)) {
		perror("futex_bucket: pipe");
		return 1;
	}
	if (wait && workload_wait_for_go())
		return 1;
	for (i = 0; i < opts.idle; i++)
		pthread_create(&idle[i], NULL, idle_main, NULL);
	start = workload_now_s();
	for (i = 0; i < opts.threads; i++) {
		n[i].own = &words[opts.fixed ? i : 0];
		n[i].next = &words[opts.fixed ? (i + 1) % opts.threads : 0];
		pthread_create(&n[i].thread, NULL, notifier_main, &n[i]);
	}
	while (workload_now_s() - start < opts.seconds)
		usleep(10000);
	stop = 1;
	for (i = 0; i < opts.threads; i++) {
		pthread_join(n[i].thread, NULL);
		rounds += n[i].rounds;
	}
	/* the idle workers: closing the pipe ends their read, a wake of their event their sleep */
	close(shutdown_pipe[1]);
	atomic_fetch_add_explicit(&words[0].seq, 1, memory_order_release);
	futex_wake_event(&words[0].seq, MAX_IDLE, EVENT_SHUTDOWN);
	for (i = 0; i < opts.idle; i++)
		pthread_join(idle[i], NULL);
	printf("{\"rounds\": %ld, \"per_s\": %.0f}\n", rounds, rounds / (workload_now_s() - start));
	return 0;
usage:
	fprintf(stderr, "usage: futex_bucket [--seconds S] [--threads 1..%d] [--idle 0..%d] [--fixed] [--wait]\n",
		MAX_THREADS, MAX_IDLE);
	return 2;
}

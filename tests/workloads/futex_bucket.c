// SPDX-License-Identifier: GPL-2.0
/*
 * futex_bucket: seed 004's "futex wake path contention". Every futex(2) call on a word
 * takes the spinlock of the kernel hash bucket that word hashes to. Here the threads of a
 * notifier pool all signal one shared event word: each round a thread bumps the word, wakes
 * a waiter (FUTEX_WAKE), then waits for the next round with the value it saw, which by then
 * is often stale (FUTEX_WAIT returns EAGAIN after taking the bucket lock). The user-space
 * side barely waits; the time goes to the bucket's spinlock inside futex_wake and
 * futex_wait_setup. With --fixed every thread has an event word of its own, on its own
 * cache line, hashing to its own bucket.
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

enum { MAX_THREADS = 64, CACHELINE = 64 };

/* a waiter sleeps at most this long, so a lost wake-up costs a round, not the run */
static const struct timespec wait_timeout = { .tv_nsec = 1000000 };

static struct {
	double seconds;
	int threads;
	int fixed;
} opts = { .seconds = 3, .threads = 4 };

struct event_word {
	_Alignas(CACHELINE) _Atomic uint32_t seq;
};

static struct event_word words[MAX_THREADS];
static volatile int stop;

struct notifier {
	pthread_t thread;
	struct event_word *own, *next;
	long rounds;
};

static long futex(_Atomic uint32_t *uaddr, int op, uint32_t val, const struct timespec *timeout)
{
	return syscall(SYS_futex, uaddr, op | FUTEX_PRIVATE_FLAG, val, timeout, NULL, 0);
}

/* noinline: the kernel lock's callers must show the user frames by name */
__attribute__((noinline)) static void notify_round(struct event_word *own, struct event_word *next)
{
	uint32_t seen = atomic_load_explicit(&own->seq, memory_order_acquire);

	atomic_fetch_add_explicit(&next->seq, 1, memory_order_release);
	futex(&next->seq, FUTEX_WAKE, 1, NULL);
	futex(&own->seq, FUTEX_WAIT, seen, &wait_timeout);
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

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' },
		{ "fixed", no_argument, NULL, 'f' },
		{ "wait", no_argument, NULL, 'w' },
		{},
	};
	struct notifier n[MAX_THREADS] = {};
	int c, i, wait = 0;
	long rounds = 0;
	double start;

	while ((c = getopt_long(argc, argv, "s:t:fw", longopts, NULL)) != -1) {
		switch (c) {
		case 's': opts.seconds = atof(optarg); break;
		case 't': opts.threads = atoi(optarg); break;
		case 'f': opts.fixed = 1; break;
		case 'w': wait = 1; break;
		default:
			goto usage;
		}
	}
	if (opts.threads < 1 || opts.threads > MAX_THREADS)
		goto usage;
	if (wait && workload_wait_for_go())
		return 1;
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
	printf("{\"rounds\": %ld, \"per_s\": %.0f}\n", rounds, rounds / (workload_now_s() - start));
	return 0;
usage:
	fprintf(stderr, "usage: futex_bucket [--seconds S] [--threads 1..%d] [--fixed] [--wait]\n", MAX_THREADS);
	return 2;
}

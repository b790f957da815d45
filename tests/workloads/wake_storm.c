// SPDX-License-Identifier: GPL-2.0
/*
 * wake_storm: many threads woken at once, over and over (a thread pool fed by broadcasts,
 * a barrier). Each round the main thread bumps a generation word and wakes every worker
 * (FUTEX_WAKE, all); each worker does a little work, checks in on a countdown, and the last
 * one wakes the main thread. Every round is a burst of wakeups, switches and runqueue-lock
 * traffic across the CPUs.
 *
 * Prints the rounds and wakeups per second as JSON at exit. --progress FILE notes the
 * clock and the rounds every PROGRESS_EVERY rounds (main's, between two rounds), as
 * pingpong does.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "workload.h"

enum { MAX_THREADS = 256, WORK_ITERS = 2000,
       PROGRESS_EVERY = 16 };	/* rounds: ~10 000 a second here, marks ~2 ms apart */

static struct {
	double seconds;
	int threads;
	const char *progress;	/* --progress FILE */
} opts = { .seconds = 3, .threads = 16 };

static struct workload_progress marks;

static _Atomic uint32_t generation;	/* bumped per round: the workers' wake word */
static _Atomic uint32_t pending;	/* workers still to check in this round: main's wake word */
static volatile int stop;

static long futex(_Atomic uint32_t *uaddr, int op, uint32_t val)
{
	return syscall(SYS_futex, uaddr, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

static void *worker_main(void *arg)
{
	uint32_t seen = 0;

	(void)arg;
	for (;;) {
		volatile unsigned long x = 0;
		int i;

		while (atomic_load(&generation) == seen)
			futex(&generation, FUTEX_WAIT, seen);
		seen = atomic_load(&generation);
		if (stop)
			return NULL;
		for (i = 0; i < WORK_ITERS; i++)
			x++;
		if (atomic_fetch_sub(&pending, 1) == 1)
			futex(&pending, FUTEX_WAKE, 1);
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' },
		{ "progress", required_argument, NULL, 'P' },
		{},
	};
	pthread_t t[MAX_THREADS];
	long rounds = 0;
	double start, elapsed;
	uint32_t left;
	int c, i;

	while ((c = getopt_long(argc, argv, "s:t:", longopts, NULL)) != -1) {
		switch (c) {
		case 's': opts.seconds = atof(optarg); break;
		case 't': opts.threads = atoi(optarg); break;
		case 'P': opts.progress = optarg; break;
		default:
			goto usage;
		}
	}
	if (opts.threads < 1 || opts.threads > MAX_THREADS || opts.seconds <= 0)
		goto usage;
	for (i = 0; i < opts.threads; i++)
		pthread_create(&t[i], NULL, worker_main, NULL);
	start = workload_now_s();
	while (workload_now_s() - start < opts.seconds) {
		if (opts.progress && !(rounds % PROGRESS_EVERY))
			workload_progress_mark(&marks, workload_now_s(), rounds);
		atomic_store(&pending, opts.threads);
		atomic_fetch_add(&generation, 1);
		futex(&generation, FUTEX_WAKE, INT_MAX);
		while ((left = atomic_load(&pending)) != 0)
			futex(&pending, FUTEX_WAIT, left);
		rounds++;
	}
	elapsed = workload_now_s() - start;
	stop = 1;
	atomic_fetch_add(&generation, 1);
	futex(&generation, FUTEX_WAKE, INT_MAX);
	for (i = 0; i < opts.threads; i++)
		pthread_join(t[i], NULL);
	printf("{\"threads\": %d, \"rounds\": %ld, \"wakeups_per_s\": %.0f, \"per_s\": %.0f}\n", opts.threads,
	       rounds, rounds * opts.threads / elapsed, rounds / elapsed);
	fflush(stdout);
	return opts.progress && workload_progress_write(&marks, opts.progress, "wake_storm");
usage:
	fprintf(stderr, "usage: wake_storm [--seconds S] [--threads 1..%d] [--progress FILE]\n", MAX_THREADS);
	return 2;
}

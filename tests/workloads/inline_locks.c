// SPDX-License-Identifier: GPL-2.0
/*
 * Threads taking one mutex from a function the compiler inlines twice over: the call to
 * pthread_mutex_lock sits in take_lock, inlined into handle_request, inlined into
 * worker_main. Only the symbolizer's inline information (DWARF) can name take_lock; the
 * Makefile builds this without frame pointers, so only CFI unwinding reaches it at all.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "workload.h"

#define MAX_WORKERS 64

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long served;
static volatile int stop;

static inline __attribute__((always_inline)) void take_lock(void)
{
	pthread_mutex_lock(&mu);
}

static inline __attribute__((always_inline)) void handle_request(void)
{
	take_lock();
	served++;
	pthread_mutex_unlock(&mu);
}

static void *worker_main(void *arg)
{
	(void)arg;
	while (!stop)
		handle_request();
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "workers", required_argument, NULL, 'w' },
		{ "seconds", required_argument, NULL, 's' },
		{ "wait", no_argument, NULL, 'W' },
		{},
	};
	pthread_t threads[MAX_WORKERS];
	int c, i, workers = 4, wait_go = 0;
	double seconds = 2, start;

	while ((c = getopt_long(argc, argv, "w:s:W", longopts, NULL)) != -1) {
		switch (c) {
		case 'w': workers = atoi(optarg); break;
		case 's': seconds = atof(optarg); break;
		case 'W': wait_go = 1; break;
		default:
			fprintf(stderr, "usage: inline_locks [--workers N] [--seconds S] [--wait]\n");
			return 2;
		}
	}
	if (workers < 1 || workers > MAX_WORKERS || seconds <= 0) {
		fprintf(stderr, "inline_locks: --workers must be 1..%d and --seconds > 0\n", MAX_WORKERS);
		return 2;
	}
	if (wait_go && workload_wait_for_go())
		return 1;
	start = workload_now_s();
	for (i = 0; i < workers; i++)
		pthread_create(&threads[i], NULL, worker_main, NULL);
	while (workload_now_s() - start < seconds)
		usleep(10000);
	stop = 1;
	for (i = 0; i < workers; i++)
		pthread_join(threads[i], NULL);
	printf("{\"mutex\": \"%p\", \"served\": %lu}\n", (void *)&mu, served);
	return 0;
}

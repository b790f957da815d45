// SPDX-License-Identifier: GPL-2.0
/*
 * condvar_pc: consumers that sleep on a condition variable for work a slow producer hands
 * out. Nearly every futex wait here is a consumer idling, not lock contention; lockscope
 * must report it as a condvar wait. Prints the items handed out as JSON at exit.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "workload.h"

enum { MAX_CONSUMERS = 64 };

static struct {
	int consumers;
	int items;
	int interval_us;
	int wait_go;
} opts = { .consumers = 4, .items = 2000, .interval_us = 500 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int pending, done;

static void *consumer(void *arg)
{
	long got = 0;

	(void)arg;
	pthread_mutex_lock(&mu);
	for (;;) {
		while (!pending && !done)
			pthread_cond_wait(&cv, &mu);
		if (!pending && done)
			break;
		pending--;
		got++;
	}
	pthread_mutex_unlock(&mu);
	return (void *)got;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "consumers", required_argument, NULL, 'c' },
		{ "items", required_argument, NULL, 'n' },
		{ "interval-us", required_argument, NULL, 'i' },
		{ "wait", no_argument, NULL, 'W' },
		{},
	};
	pthread_t t[MAX_CONSUMERS];
	long got = 0;
	void *ret;
	int c, i;

	while ((c = getopt_long(argc, argv, "c:n:i:W", longopts, NULL)) != -1) {
		switch (c) {
		case 'c': opts.consumers = atoi(optarg); break;
		case 'n': opts.items = atoi(optarg); break;
		case 'i': opts.interval_us = atoi(optarg); break;
		case 'W': opts.wait_go = 1; break;
		default:
			fprintf(stderr, "usage: condvar_pc [--consumers N] [--items N] [--interval-us U] [--wait]\n");
			return 2;
		}
	}
	if (opts.consumers < 1 || opts.consumers > MAX_CONSUMERS) {
		fprintf(stderr, "condvar_pc: --consumers must be 1..%d\n", MAX_CONSUMERS);
		return 2;
	}
	if (opts.wait_go && workload_wait_for_go())
		return 1;
	for (i = 0; i < opts.consumers; i++)
		pthread_create(&t[i], NULL, consumer, NULL);
	for (i = 0; i < opts.items; i++) {
		usleep(opts.interval_us);
		pthread_mutex_lock(&mu);
		pending++;
		pthread_cond_signal(&cv);
		pthread_mutex_unlock(&mu);
	}
	pthread_mutex_lock(&mu);
	done = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
	for (i = 0; i < opts.consumers; i++) {
		pthread_join(t[i], &ret);
		got += (long)ret;
	}
	printf("{\"items\": %d, \"consumed\": %ld, \"mutex\": \"%p\", \"cond\": \"%p\"}\n",
	       opts.items, got, (void *)&mu, (void *)&cv);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * Thread churn: --threads N short-lived threads, --batch B alive at a time, each taking one
 * shared mutex --rounds R times and exiting; every thread id is new, so whatever a tracer
 * keeps per thread must be freed again. Prints a JSON line: threads created, its pid.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include "workload.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long shared;
static int rounds = 20;

static void *churn(void *arg)
{
	int i;

	(void)arg;
	for (i = 0; i < rounds; i++) {
		pthread_mutex_lock(&lock);
		shared++;
		pthread_mutex_unlock(&lock);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "threads", required_argument, NULL, 'n' },
		{ "batch", required_argument, NULL, 'b' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "wait", no_argument, NULL, 'w' },
		{}
	};
	int threads = 10000, batch = 50, wait = 0, c, done = 0, i;
	pthread_t *tids;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'n': threads = atoi(optarg); break;
		case 'b': batch = atoi(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'w': wait = 1; break;
		default:
			fprintf(stderr, "usage: thread_churn [--threads N] [--batch B] [--rounds R] [--wait]\n");
			return 2;
		}
	}
	if (threads < 1 || batch < 1 || rounds < 0 || !(tids = calloc(batch, sizeof(*tids))))
		return 2;
	if (wait && workload_wait_for_go())
		return 1;
	while (done < threads) {
		int n = threads - done < batch ? threads - done : batch;

		for (i = 0; i < n; i++)
			if (pthread_create(&tids[i], NULL, churn, NULL))
				return 1;
		for (i = 0; i < n; i++)
			pthread_join(tids[i], NULL);
		done += n;
	}
	printf("{\"pid\": %d, \"threads\": %d, \"locked\": %lu}\n", getpid(), done, shared);
	free(tids);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * Thread churn: --threads N short-lived threads, --batch B alive at a time, each taking one
 * shared mutex --rounds R times and exiting; every thread id is new, so whatever a tracer
 * keeps per thread must be freed again. With --kernel each round also maps and unmaps a
 * page: a write of the process's mmap_lock, a kernel sleeping lock the batch contends.
 * Each thread adds its own switch counts (getrusage(RUSAGE_THREAD), as it ends) to a
 * total. Prints a JSON line: threads created, its pid, the threads' switches.
 */
#define _GNU_SOURCE	/* RUSAGE_THREAD */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include "workload.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long shared;
static unsigned long switches;	/* the churned threads' own, voluntary and not */
static int rounds = 20;
static int kernel;

/* One mmap_lock write each way: mmap and munmap of a page. */
static void map_page(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p != MAP_FAILED)
		munmap(p, 4096);
}

static void *churn(void *arg)
{
	struct rusage ru;
	int i;

	(void)arg;
	for (i = 0; i < rounds; i++) {
		pthread_mutex_lock(&lock);
		shared++;
		pthread_mutex_unlock(&lock);
		if (kernel)
			map_page();
	}
	if (!getrusage(RUSAGE_THREAD, &ru))
		__atomic_fetch_add(&switches, ru.ru_nvcsw + ru.ru_nivcsw, __ATOMIC_RELAXED);
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "threads", required_argument, NULL, 'n' },
		{ "batch", required_argument, NULL, 'b' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "wait", no_argument, NULL, 'w' },
		{ "kernel", no_argument, NULL, 'k' },
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
		case 'k': kernel = 1; break;
		default:
			fprintf(stderr, "usage: thread_churn [--threads N] [--batch B] [--rounds R] [--kernel] [--wait]\n");
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
	printf("{\"pid\": %d, \"threads\": %d, \"locked\": %lu, \"switches\": %lu}\n", getpid(), done, shared,
	       switches);
	free(tids);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * Thread churn: --threads N short-lived threads, --batch B alive at a time, each taking one
 * shared mutex --rounds R times and exiting; every thread id is new (until the ids pass
 * pid_max and wrap), so whatever a tracer keeps per thread must be freed again. With
 * --kernel each round also maps and unmaps a page: a write of the process's mmap_lock, a
 * kernel sleeping lock the batch contends.
 * Each thread adds its own switch counts (getrusage(RUSAGE_THREAD), as it ends) to a
 * total. Prints a JSON line: threads created, its pid, the threads' switches. --tids-file
 * PATH also writes every churned thread's id there, one a line (a test looks for what a
 * tracer kept of them).
 */
#define _GNU_SOURCE	/* RUSAGE_THREAD */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include "workload.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long shared;
static unsigned long switches;	/* the churned threads' own, voluntary and not */
static int rounds = 20;
static int kernel;
static pid_t *churned;		/* --tids-file: every thread's id, in the order they ran */
static unsigned int nr_churned;

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
	if (churned)
		churned[__atomic_fetch_add(&nr_churned, 1, __ATOMIC_RELAXED)] = gettid();
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
		{ "tids-file", required_argument, NULL, 't' },
		{}
	};
	int threads = 10000, batch = 50, wait = 0, c, done = 0, i;
	const char *tids_file = NULL;
	pthread_t *tids;
	FILE *f;

	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'n': threads = atoi(optarg); break;
		case 'b': batch = atoi(optarg); break;
		case 'r': rounds = atoi(optarg); break;
		case 'w': wait = 1; break;
		case 'k': kernel = 1; break;
		case 't': tids_file = optarg; break;
		default:
			fprintf(stderr, "usage: thread_churn [--threads N] [--batch B] [--rounds R] [--kernel] "
				"[--tids-file PATH] [--wait]\n");
			return 2;
		}
	}
	if (threads < 1 || batch < 1 || rounds < 0 || !(tids = calloc(batch, sizeof(*tids))) ||
	    (tids_file && !(churned = calloc(threads, sizeof(*churned)))))
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
	if (tids_file) {
		if (!(f = fopen(tids_file, "w")))
			return 1;
		for (i = 0; i < (int)nr_churned; i++)
			fprintf(f, "%d\n", churned[i]);
		if (fclose(f))
			return 1;
	}
	printf("{\"pid\": %d, \"threads\": %d, \"locked\": %lu, \"switches\": %lu}\n", getpid(), done, shared,
	       switches);
	free(tids);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * mmap_storm: kernel lock contention inside one process, for lockscope's tests and demo.
 *
 * Writer threads map, touch and unmap anonymous memory (mmap_lock taken for write by
 * mmap/munmap); reader threads advise memory away and ask for residency (madvise and
 * mincore take mmap_lock for read) and fault pages back in (page-table spinlocks). The
 * result is rwsem contention of both kinds on this process's mmap_lock.
 *
 * With --wait the process prints its pid and waits for a line on stdin before starting,
 * so that a tracer can attach first and see every event of the run. With --until N it runs
 * until its threads slept N times (voluntary switches: here, nearly all on mmap_lock), so
 * that a test gets the contention it needs however busy the machine is.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include "workload.h"

enum { PAGES_PER_MAP = 16 };

struct opts {
	int writers;
	int readers;
	long iterations;
	double seconds;
	int wait_go;
	struct workload_span span;	/* --until counts the worker threads' sleeps */
};

static struct opts opts = { .writers = 2, .readers = 2, .iterations = 20000 };
static char *shared_region;
static size_t page_size;
static volatile int stop;
static long total_ops;	/* iterations of all threads, for the rate */

static int done(long i, double start)
{
	if (stop)
		return 1;
	if (opts.span.until)
		return 0;	/* main says when */
	if (opts.seconds > 0)
		return (i & 63) == 0 && workload_now_s() - start >= opts.seconds;
	return i >= opts.iterations;
}

static void *writer(void *arg)
{
	size_t len = PAGES_PER_MAP * page_size;
	double start = workload_now_s();
	long i;

	(void)arg;
	for (i = 0; !done(i, start); i++) {
		char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (p == MAP_FAILED) {
			perror("mmap");
			exit(1);
		}
		for (size_t off = 0; off < len; off += page_size)
			p[off] = (char)i;
		munmap(p, len);
	}
	__atomic_add_fetch(&total_ops, i, __ATOMIC_RELAXED);
	return NULL;
}

static void *reader(void *arg)
{
	size_t len = PAGES_PER_MAP * page_size;
	unsigned char vec[PAGES_PER_MAP];
	double start = workload_now_s();
	long i;

	(void)arg;
	for (i = 0; !done(i, start); i++) {
		madvise(shared_region, len, MADV_DONTNEED);
		mincore(shared_region, len, vec);
		for (size_t off = 0; off < len; off += page_size)
			shared_region[off]++;
	}
	__atomic_add_fetch(&total_ops, i, __ATOMIC_RELAXED);
	return NULL;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: mmap_storm [--writers N] [--readers N] [--iterations N | --seconds S | "
		WORKLOAD_SPAN_USAGE "] [--wait]\n");
}

static int parse_args(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "writers", required_argument, NULL, 'w' },
		{ "readers", required_argument, NULL, 'r' },
		{ "iterations", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 's' },
		{ "wait", no_argument, NULL, 'W' },
		{ "help", no_argument, NULL, 'h' },
		WORKLOAD_SPAN_OPTIONS,
		{},
	};
	int c;

	while ((c = getopt_long(argc, argv, "w:r:n:s:Wh", longopts, NULL)) != -1) {
		if (workload_span_opt(&opts.span, c, optarg))
			continue;
		switch (c) {
		case 'w': opts.writers = atoi(optarg); break;
		case 'r': opts.readers = atoi(optarg); break;
		case 'n': opts.iterations = atol(optarg); break;
		case 's': opts.seconds = atof(optarg); break;
		case 'W': opts.wait_go = 1; break;
		case 'h': usage(stdout); exit(0);
		default: usage(stderr); return -EINVAL;
		}
	}
	if (opts.writers < 0 || opts.readers < 0 || opts.writers + opts.readers == 0) {
		fprintf(stderr, "mmap_storm: need at least one writer or reader thread\n");
		return -EINVAL;
	}
	return 0;
}

/* The worker threads' sleeps so far: the process's voluntary switches less this (main) thread's. */
static unsigned long sleeps_so_far(void *ctx)
{
	struct rusage all, self;

	(void)ctx;
	getrusage(RUSAGE_SELF, &all);
	getrusage(RUSAGE_THREAD, &self);
	return all.ru_nvcsw - self.ru_nvcsw;
}

int main(int argc, char **argv)
{
	int nthreads, i, rc = 0;
	pthread_t *tids;
	double start, elapsed;

	if (parse_args(argc, argv))
		return 2;
	page_size = sysconf(_SC_PAGESIZE);
	shared_region = mmap(NULL, PAGES_PER_MAP * page_size, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (shared_region == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	if (opts.wait_go && workload_wait_for_go())
		return 1;
	nthreads = opts.writers + opts.readers;
	tids = calloc(nthreads, sizeof(*tids));
	start = workload_now_s();
	for (i = 0; i < nthreads; i++)
		pthread_create(&tids[i], NULL, i < opts.writers ? writer : reader, NULL);
	if (opts.span.until) {
		rc = workload_span_wait(&opts.span, start, sleeps_so_far, NULL, "sleeps");
		__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	}
	for (i = 0; i < nthreads; i++)
		pthread_join(tids[i], NULL);
	elapsed = workload_now_s() - start;
	printf("{\"threads\": %d, \"ops\": %ld, \"seconds\": %.3f, \"per_s\": %.0f}\n", nthreads,
	       total_ops, elapsed, total_ops / elapsed);
	free(tids);
	return rc;
}

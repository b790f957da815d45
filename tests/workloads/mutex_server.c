// SPDX-License-Identifier: GPL-2.0
/*
 * mutex_server: the IPC server of seed report 004. Workers share one pthread mutex that
 * guards a message deque; in the default (bad) mode each worker formats a log line with
 * snprintf inside the critical section, with --fixed it formats outside. --log-lines sets
 * how many lines a request formats, and so how long the critical section is. --think-us
 * makes each worker sleep that long between requests (a server waiting for its next one):
 * fewer threads are runnable, so the waits are the lock's queue rather than the CPUs'.
 *
 * The workload counts its own contention independently of any tracer: an acquisition is
 * contended when trylock fails, and getrusage(RUSAGE_THREAD)'s voluntary context switches
 * around the blocking lock count how many times it slept in the kernel for it (each
 * futex sleep is one voluntary switch). Prints its counters and the mutex's address as
 * JSON at exit. --progress FILE notes the clock and the messages handled every
 * PROGRESS_EVERY messages, inside the critical section (where they are counted, one
 * thread at a time): the bench's interleaved runs (workload.h).
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "workload.h"

enum { MAX_WORKERS = 64, QUEUE_LEN = 1024, LOG_LEN = 256, MAX_LOG_LINES = 1024,
       MAX_THINK_US = 1000000,
       PROGRESS_EVERY = 256 };	/* messages: marks well under a millisecond apart */

static struct {
	int workers;
	struct workload_span span;	/* --until counts futex sleeps */
	int fixed;
	int log_lines;
	int think_us;
	int wait_go;
	const char *progress;		/* --progress FILE */
} opts = { .workers = 8, .span.seconds = 3, .log_lines = 4 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	unsigned long msgs[QUEUE_LEN];
	unsigned int head, tail;
	char log[LOG_LEN];	/* the last line: what a real server would write out */
	unsigned long handled;	/* messages so far, for --progress */
} q;
static struct workload_progress marks;
static volatile int stop;

struct worker {
	pthread_t thread;
	int id;
	unsigned long handled;
	unsigned long contended;	/* trylock failed */
	unsigned long sleeps;		/* futex sleeps inside the blocking lock */
	unsigned long wait_ns;		/* time in the blocking lock, contended acquisitions */
	unsigned long slept_wait_ns;	/* the same, acquisitions that slept */
	char buf[LOG_LEN];
};

static unsigned long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000UL + ts.tv_nsec;
}

static long nvcsw(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nvcsw;
}

static void lock_counted(struct worker *w)
{
	unsigned long t0;
	long s0, slept;

	if (!pthread_mutex_trylock(&mu))
		return;
	s0 = nvcsw();
	t0 = now_ns();
	pthread_mutex_lock(&mu);
	w->wait_ns += now_ns() - t0;
	slept = nvcsw() - s0;
	w->contended++;
	w->sleeps += slept;
	if (slept)
		w->slept_wait_ns += now_ns() - t0;
}

/* noinline: the holder's stacks must show it by name */
__attribute__((noinline)) static void format_log(char *buf, int worker, unsigned long seq,
						 double latency)
{
	int i;

	/* a few lines' worth of formatting, as a request log with several fields */
	for (i = 0; i < opts.log_lines; i++)
		snprintf(buf, LOG_LEN, "worker=%d seq=%lu latency=%.6f status=%s bytes=%lu peer=%s:%d",
			 worker, seq, latency * (i + 1), "ok", seq * 64 + i, "10.1.2.3", 40000 + i);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	unsigned long seq, t;

	while (!stop) {
		t = now_ns();
		lock_counted(w);
		q.msgs[q.tail++ % QUEUE_LEN] = t;
		seq = q.msgs[q.head++ % QUEUE_LEN];
		if (opts.progress && !(q.handled++ % PROGRESS_EVERY))
			workload_progress_mark(&marks, workload_now_s(), q.handled - 1);
		if (!opts.fixed)
			format_log(q.log, w->id, seq, (now_ns() - t) / 1e9);
		pthread_mutex_unlock(&mu);
		if (opts.fixed)
			format_log(w->buf, w->id, seq, (now_ns() - t) / 1e9);
		if (opts.think_us)
			usleep(opts.think_us);
		w->handled++;
	}
	return NULL;
}

/* The workers' sleeps so far: read racily, only to know when there are enough. */
static unsigned long sleeps_so_far(void *ctx)
{
	const struct worker *w = ctx;
	unsigned long n = 0;
	int i;

	for (i = 0; i < opts.workers; i++)
		n += __atomic_load_n(&w[i].sleeps, __ATOMIC_RELAXED);
	return n;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "workers", required_argument, NULL, 'w' },
		{ "seconds", required_argument, NULL, 's' },
		{ "fixed", no_argument, NULL, 'f' },
		{ "wait", no_argument, NULL, 'W' },
		{ "log-lines", required_argument, NULL, 'l' },
		{ "think-us", required_argument, NULL, 't' },
		{ "progress", required_argument, NULL, 'P' },
		WORKLOAD_SPAN_OPTIONS,
		{},
	};
	static struct worker workers[MAX_WORKERS];
	unsigned long handled = 0, contended = 0, sleeps = 0, wait_ns = 0, slept_wait_ns = 0;
	double start, elapsed;
	int c, i, rc;

	while ((c = getopt_long(argc, argv, "w:s:fWl:t:", longopts, NULL)) != -1) {
		if (workload_span_opt(&opts.span, c, optarg))
			continue;
		switch (c) {
		case 'w': opts.workers = atoi(optarg); break;
		case 's': opts.span.seconds = atof(optarg); break;
		case 'f': opts.fixed = 1; break;
		case 'W': opts.wait_go = 1; break;
		case 'l': opts.log_lines = atoi(optarg); break;
		case 't': opts.think_us = atoi(optarg); break;
		case 'P': opts.progress = optarg; break;
		default:
			fprintf(stderr, "usage: mutex_server [--workers N] [--seconds S] %s [--fixed] [--log-lines N] [--think-us N] [--wait] [--progress FILE]\n",
				WORKLOAD_SPAN_USAGE);
			return 2;
		}
	}
	if (opts.workers < 1 || opts.workers > MAX_WORKERS || opts.span.seconds <= 0 ||
	    opts.log_lines < 1 || opts.log_lines > MAX_LOG_LINES || opts.think_us < 0 ||
	    opts.think_us > MAX_THINK_US) {
		fprintf(stderr, "mutex_server: --workers must be 1..%d, --log-lines 1..%d, --think-us 0..%d "
			"and --seconds > 0\n", MAX_WORKERS, MAX_LOG_LINES, MAX_THINK_US);
		return 2;
	}
	if (opts.wait_go && workload_wait_for_go())
		return 1;
	start = workload_now_s();
	for (i = 0; i < opts.workers; i++) {
		workers[i].id = i;
		pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
	}
	rc = workload_span_wait(&opts.span, start, sleeps_so_far, workers, "futex sleeps");
	stop = 1;
	for (i = 0; i < opts.workers; i++) {
		pthread_join(workers[i].thread, NULL);
		handled += workers[i].handled;
		contended += workers[i].contended;
		sleeps += workers[i].sleeps;
		wait_ns += workers[i].wait_ns;
		slept_wait_ns += workers[i].slept_wait_ns;
	}
	elapsed = workload_now_s() - start;
	printf("{\"mutex\": \"%p\", \"messages\": %lu, \"per_s\": %.0f, \"seconds\": %.3f, "
	       "\"contended\": %lu, \"sleeps\": %lu, \"wait_ns\": %lu, \"slept_wait_ns\": %lu}\n",
	       (void *)&mu, handled, handled / elapsed, elapsed, contended, sleeps, wait_ns,
	       slept_wait_ns);
	if (opts.progress && workload_progress_write(&marks, opts.progress, "mutex_server"))
		return 1;
	return rc;
}

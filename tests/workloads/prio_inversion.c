// SPDX-License-Identifier: GPL-2.0
/*
 * prio_inversion: seed 004's "max >> avg", priority inversion. A request thread takes a
 * mutex briefly every 100 us; a background compactor holds the same mutex most of the time
 * in short sections. A batch job of CPU hogs, one per CPU, wakes every 100 ms and runs a
 * 30 ms burst. The request thread outranks the hogs and the hogs outrank the compactor, so
 * most of the request thread's waits last one compactor section (tens of us), but a
 * compactor preempted by the hogs while it holds the mutex keeps it until the burst ends,
 * and the request waits that long: a few waits three orders of magnitude above the
 * average. With --fixed the mutex is a priority-inheritance one (PTHREAD_PRIO_INHERIT), the
 * fix for exactly this: a compactor that holds it while the request waits runs at the
 * request's priority until it lets go, so no wait is longer than a section.
 *
 * The request thread and the hogs are real-time (SCHED_FIFO) so that the inversion, and
 * its absence with --fixed, do not depend on how busy the machine is: no other (normal)
 * task can preempt them, and a PI-boosted compactor none either. Needs root.
 *
 * Prints the requests served as JSON at exit.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "workload.h"

/* real-time priorities: the request thread above the hogs; the compactor is a normal task */
enum { PRIO_REQUEST = 2, PRIO_HOGS = 1, REQUEST_PERIOD_US = 100 };

/* the batch job: bursts of this long every period, so hogs and the rest take turns */
static const double burst_s = 0.03, period_s = 0.1;
/* the compactor's section and its pause between sections, in busy-loop iterations */
static const unsigned long section_iters = 20000, pause_iters = 2000;

static struct {
	double seconds;
	int fixed;
} opts = { .seconds = 3 };

static pthread_mutex_t mu;
static volatile unsigned long shared_state;	/* what the mutex guards */
static volatile int stop;

/* SCHED_FIFO at @prio for the calling thread; the workload is meaningless without it. */
static void set_fifo(int prio)
{
	struct sched_param sp = { .sched_priority = prio };
	int err = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);

	if (err) {
		fprintf(stderr, "prio_inversion: SCHED_FIFO %d: %s (run as root)\n", prio, strerror(err));
		exit(1);
	}
}

static void spin_for(unsigned long n)
{
	volatile unsigned long x = 0;

	while (n--)
		x++;
}

/* noinline: the holders' stacks must show it by name */
__attribute__((noinline)) static void compact_section(void)
{
	pthread_mutex_lock(&mu);
	spin_for(section_iters);
	shared_state++;
	pthread_mutex_unlock(&mu);
}

static void *compactor_main(void *arg)
{
	(void)arg;
	while (!stop) {
		compact_section();
		spin_for(pause_iters);
	}
	return NULL;
}

__attribute__((noinline)) static void serve_request(void)
{
	pthread_mutex_lock(&mu);
	shared_state++;
	pthread_mutex_unlock(&mu);
}

static void *hog_main(void *arg)
{
	(void)arg;
	set_fifo(PRIO_HOGS);
	while (!stop) {
		double start = workload_now_s();

		while (!stop && workload_now_s() - start < burst_s)
			spin_for(pause_iters);
		usleep((period_s - burst_s) * 1e6);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "fixed", no_argument, NULL, 'f' },
		{},
	};
	long cpus = sysconf(_SC_NPROCESSORS_ONLN), requests = 0, i;
	pthread_t compactor, *hogs;
	pthread_mutexattr_t attr;
	double start;
	int c;

	while ((c = getopt_long(argc, argv, "s:f", longopts, NULL)) != -1) {
		switch (c) {
		case 's': opts.seconds = atof(optarg); break;
		case 'f': opts.fixed = 1; break;
		default:
			fprintf(stderr, "usage: prio_inversion [--seconds S] [--fixed]\n");
			return 2;
		}
	}
	hogs = calloc(cpus, sizeof(*hogs));
	if (!hogs)
		return 1;
	pthread_mutexattr_init(&attr);
	if (opts.fixed)
		pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
	pthread_mutex_init(&mu, &attr);
	start = workload_now_s();
	pthread_create(&compactor, NULL, compactor_main, NULL);
	for (i = 0; i < cpus; i++)
		pthread_create(&hogs[i], NULL, hog_main, NULL);
	/* the main thread serves the requests; after the others, which inherit its policy */
	set_fifo(PRIO_REQUEST);
	while (workload_now_s() - start < opts.seconds) {
		serve_request();
		requests++;
		usleep(REQUEST_PERIOD_US);
	}
	stop = 1;
	pthread_join(compactor, NULL);
	for (i = 0; i < cpus; i++)
		pthread_join(hogs[i], NULL);
	free(hogs);
	printf("{\"requests\": %ld, \"per_s\": %.0f}\n", requests, requests / (workload_now_s() - start));
	return 0;
}

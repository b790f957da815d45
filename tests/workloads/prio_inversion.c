// SPDX-License-Identifier: GPL-2.0
/*
 * prio_inversion: seed 004's "max >> avg", priority inversion. A request thread (nice 0)
 * takes a mutex briefly every 100 us; a background compactor at nice 19 holds the same
 * mutex most of the time in short sections. A batch job of CPU hogs at nice 0, one per CPU,
 * wakes every 100 ms and runs a 30 ms burst. Most of the request thread's waits last one
 * compactor section (tens of us), but a compactor preempted by the hogs while it holds the
 * mutex keeps it until the burst ends, and the request waits that long: a few waits three
 * orders of magnitude above the average. With --fixed the priorities are the right way
 * round (the compactor at nice 0, the batch job at nice 19): the same threads, no inversion.
 *
 * Prints the requests served as JSON at exit.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "workload.h"

enum { NICE_LOW = 19, NICE_NORMAL = 0, REQUEST_PERIOD_US = 100 };

/* the batch job: bursts of this long every period, so hogs and the rest take turns */
static const double burst_s = 0.03, period_s = 0.1;
/* the compactor's section and its pause between sections, in busy-loop iterations */
static const unsigned long section_iters = 20000, pause_iters = 2000;

static struct {
	double seconds;
	int fixed;
} opts = { .seconds = 3 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long shared_state;	/* what the mutex guards */
static volatile int stop;

static void set_nice(int nice)
{
	/* per thread: Linux applies PRIO_PROCESS with a tid to that thread alone */
	if (setpriority(PRIO_PROCESS, syscall(SYS_gettid), nice))
		perror("prio_inversion: setpriority");
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
	set_nice(opts.fixed ? NICE_NORMAL : NICE_LOW);
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
	set_nice(opts.fixed ? NICE_LOW : NICE_NORMAL);
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
	start = workload_now_s();
	pthread_create(&compactor, NULL, compactor_main, NULL);
	for (i = 0; i < cpus; i++)
		pthread_create(&hogs[i], NULL, hog_main, NULL);
	/* the main thread serves the requests, at nice 0 */
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

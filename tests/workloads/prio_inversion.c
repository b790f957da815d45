// SPDX-License-Identifier: GPL-2.0
/*
 * prio_inversion: seed 004's "max >> avg", priority inversion. A request thread takes a
 * mutex briefly every 100 us; a background compactor holds the same mutex most of the
 * time, in sections of tens of us. A batch job of CPU hogs, one per CPU, wakes every
 * 100 ms and runs a 30 ms burst, all at once. The request thread outranks the hogs, and
 * the hogs outrank the compactor, a nice-19 background thread: most of the request
 * thread's waits last at most one section, but a compactor preempted by the hogs while it
 * holds the mutex keeps it until the burst ends, and the request waits that long, three
 * orders of magnitude above the average. With --fixed the lock holder is not a
 * low-priority thread: the compactor outranks the hogs, no wait lasts longer than a
 * section.
 *
 * The request thread, the hogs and the fixed compactor are real-time (SCHED_FIFO) so that
 * the inversion, and its absence with --fixed, do not depend on how busy the machine is:
 * no normal task can preempt them. The fixed compactor sleeps between its sections, so
 * that the real-time threads stay below the kernel's real-time CPU limit (95 %); the nice
 * one pauses on the CPU, and so holds the mutex at most of the bursts' starts. Needs root.
 *
 * --until-inversions N: run past --seconds until the request thread has waited N times
 * for a preempted holder (a wait of INVERSION_MS or more, timed here), at most
 * UNTIL_MAX_S: how many bursts catch the compactor holding the mutex depends on the
 * machine, and a test needs a known number of them.
 *
 * Prints the requests served and the inversions seen as JSON at exit.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "workload.h"

/* real-time priorities: the fixed compactor above the request thread above the hogs */
enum { PRIO_COMPACTOR_FIXED = 3, PRIO_REQUEST = 2, PRIO_HOGS = 1 };
enum { NICE_LOW = 19, REQUEST_PERIOD_US = 100, COMPACT_PAUSE_US = 20 };
/* a request wait this long is a burst's: a section lasts tens of us; the bound on a run */
enum { INVERSION_MS = 5, UNTIL_MAX_S = 30 };

/* the batch job: bursts of this long every period, so hogs and the rest take turns */
static const double burst_s = 0.03, period_s = 0.1;
/* the compactor's section and the nice one's pause between sections, in busy-loop iterations */
static const unsigned long section_iters = 20000, pause_iters = 2000, hog_iters = 2000;

static struct {
	double seconds;
	int fixed;
	long until_inversions;
} opts = { .seconds = 3 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
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
	/* its pauses as short as asked: it holds the mutex most of the time, in both modes */
	prctl(PR_SET_TIMERSLACK, 1UL);
	if (opts.fixed)
		set_fifo(PRIO_COMPACTOR_FIXED);
	/* per thread: Linux applies PRIO_PROCESS with a tid to that thread alone */
	else if (setpriority(PRIO_PROCESS, syscall(SYS_gettid), NICE_LOW))
		perror("prio_inversion: setpriority");
	while (!stop) {
		compact_section();
		if (opts.fixed)
			usleep(COMPACT_PAUSE_US);
		else
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

/*
 * The hogs burst together, at the same multiples of the period: a burst on one CPU alone
 * would only push the compactor to the other one, and the inversion would need luck.
 */
static void *hog_main(void *arg)
{
	const struct timespec *base = arg;
	struct timespec next = *base;

	set_fifo(PRIO_HOGS);
	while (!stop) {
		double start;

		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
		start = workload_now_s();
		while (!stop && workload_now_s() - start < burst_s)
			spin_for(hog_iters);
		next.tv_nsec += period_s * 1e9;
		next.tv_sec += next.tv_nsec / 1000000000L;
		next.tv_nsec %= 1000000000L;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "fixed", no_argument, NULL, 'f' },
		{ "until-inversions", required_argument, NULL, 'u' },
		{},
	};
	long cpus = sysconf(_SC_NPROCESSORS_ONLN), requests = 0, inversions = 0, i;
	pthread_t compactor, *hogs;
	struct timespec base;
	double start, elapsed, t0, waited;
	int c;

	while ((c = getopt_long(argc, argv, "s:fu:", longopts, NULL)) != -1) {
		switch (c) {
		case 's': opts.seconds = atof(optarg); break;
		case 'f': opts.fixed = 1; break;
		case 'u': opts.until_inversions = atol(optarg); break;
		default:
			fprintf(stderr, "usage: prio_inversion [--seconds S] [--fixed] [--until-inversions N]\n");
			return 2;
		}
	}
	hogs = calloc(cpus, sizeof(*hogs));
	if (!hogs)
		return 1;
	start = workload_now_s();
	clock_gettime(CLOCK_MONOTONIC, &base);
	pthread_create(&compactor, NULL, compactor_main, NULL);
	for (i = 0; i < cpus; i++)
		pthread_create(&hogs[i], NULL, hog_main, &base);
	/* the main thread serves the requests; after the others, which inherit its policy */
	set_fifo(PRIO_REQUEST);
	for (;;) {
		elapsed = workload_now_s() - start;
		if (elapsed >= UNTIL_MAX_S ||
		    (elapsed >= opts.seconds && inversions >= opts.until_inversions))
			break;
		t0 = workload_now_s();
		serve_request();
		waited = workload_now_s() - t0;
		inversions += waited * 1000 >= INVERSION_MS;
		requests++;
		usleep(REQUEST_PERIOD_US);
	}
	stop = 1;
	pthread_join(compactor, NULL);
	for (i = 0; i < cpus; i++)
		pthread_join(hogs[i], NULL);
	free(hogs);
	printf("{\"requests\": %ld, \"per_s\": %.0f, \"inversions\": %ld}\n", requests,
	       requests / (workload_now_s() - start), inversions);
	return 0;
}

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What every test workload shares: the start handshake, a clock, pinning, progress marks. Included
 * after _GNU_SOURCE is defined (CPU affinity).
 */
#ifndef __LS_WORKLOAD_H
#define __LS_WORKLOAD_H

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * With --wait a workload prints "pid N" and blocks until a line arrives on stdin, so a
 * tracer can attach first and see every event of the run. Returns 0, or -1 on EOF.
 */
static inline int workload_wait_for_go(void)
{
	char line[16];

	printf("pid %d\n", getpid());
	fflush(stdout);
	return fgets(line, sizeof(line), stdin) ? 0 : -1;
}

/* Pins the calling thread to @cpu: threads that must share one CPU (switches, yields). */
static inline void workload_pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static inline double workload_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * --progress FILE: a workload's clock and its count of work done, noted every so often by
 * one thread at a time and written at its end, one "ns count" line each (the monotonic
 * clock): the bench's interleaved runs cut them into slices traced and not.
 */
struct workload_progress {
	double *t;
	unsigned long *n;
	long len, cap;
};

/* Notes (@t, @n); false when out of memory (the run goes on, its marks stop). */
static inline bool workload_progress_mark(struct workload_progress *p, double t, unsigned long n)
{
	if (p->len == p->cap) {
		long cap = p->cap ? p->cap * 2 : 65536;
		double *nt = realloc(p->t, cap * sizeof(*nt));
		unsigned long *nn = nt ? realloc(p->n, cap * sizeof(*nn)) : NULL;

		if (nt)
			p->t = nt;
		if (!nn)
			return false;
		p->n = nn;
		p->cap = cap;
	}
	p->t[p->len] = t;
	p->n[p->len++] = n;
	return true;
}

/* Writes @p's marks to @path; 0, or 1 after saying why (@who: the workload's name). */
static inline int workload_progress_write(const struct workload_progress *p, const char *path, const char *who)
{
	FILE *f = fopen(path, "w");
	long i;

	if (!f) {
		fprintf(stderr, "%s: --progress %s: %s\n", who, path, strerror(errno));
		return 1;
	}
	for (i = 0; i < p->len; i++)
		fprintf(f, "%.0f %lu\n", p->t[i] * 1e9, p->n[i]);
	return fclose(f) ? 1 : 0;
}

/*
 * Whether every thread but the caller sleeps in one syscall on one address (where the
 * workload parks them: a barrier's or a condvar's futex), from /proc/self/task/TID/syscall
 * ("running" while it runs, else its number and first argument: "202 0x55d0c8a4e0c8").
 * A thread that has passed a barrier still has its way to the next sleep ahead of it, and
 * counts taken from outside must not stop before that way is done.
 */
static inline bool workload_all_parked(void)
{
	char path[300], line[256], nr[32], arg[32], first[64] = "", here[64];
	DIR *dir = opendir("/proc/self/task");
	bool parked = dir != NULL;
	struct dirent *d;
	FILE *f;

	while (parked && (d = readdir(dir))) {
		if (d->d_name[0] == '.' || atoi(d->d_name) == gettid())
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/syscall", d->d_name);
		f = fopen(path, "r");
		parked = f && fgets(line, sizeof(line), f) && sscanf(line, "%31s %31s", nr, arg) == 2;
		if (f)
			fclose(f);
		if (!parked)
			break;
		snprintf(here, sizeof(here), "%s %s", nr, arg);
		if (!first[0])
			strcpy(first, here);
		parked = strcmp(here, first) == 0;
	}
	if (dir)
		closedir(dir);
	return parked;
}

enum { WORKLOAD_PARK_MAX_MS = 10000 };

/* Waits until workload_all_parked(); past WORKLOAD_PARK_MAX_MS says so and goes on. */
static inline void workload_wait_parked(void)
{
	const struct timespec ms = { .tv_nsec = 1000000 };
	int waited;

	for (waited = 0; !workload_all_parked(); waited++) {
		if (waited == WORKLOAD_PARK_MAX_MS) {
			fprintf(stderr, "workload: threads not all asleep after %d ms, going on\n", waited);
			return;
		}
		nanosleep(&ms, NULL);
	}
}

/*
 * How long a workload runs: at least --seconds; then, with --until N, on until its own
 * count of what the test compares reaches N, but never past --max-seconds. A loaded
 * machine makes a run longer, never too short for the test; a run that reaches the cap
 * first fails (exit 3) and says how far it got.
 */
struct workload_span {
	double seconds;		/* --seconds: the least it runs */
	unsigned long until;	/* --until: the count it must reach; 0: none */
	double max_seconds;	/* --max-seconds: the cap */
};

enum {
	WORKLOAD_OPT_UNTIL = 0x100,	/* getopt_long codes of the span's options */
	WORKLOAD_OPT_MAX_SECONDS,
	WORKLOAD_EXIT_SHORT = 3,	/* the cap came before the count */
};
#define WORKLOAD_DEF_MAX_SECONDS 120.0
#define WORKLOAD_SPAN_OPTIONS \
	{ "until", required_argument, NULL, WORKLOAD_OPT_UNTIL }, \
	{ "max-seconds", required_argument, NULL, WORKLOAD_OPT_MAX_SECONDS }
#define WORKLOAD_SPAN_USAGE "[--until N] [--max-seconds S]"

/* Takes the span's own options; false for any other. */
static inline int workload_span_opt(struct workload_span *s, int c, const char *arg)
{
	switch (c) {
	case WORKLOAD_OPT_UNTIL: s->until = strtoul(arg, NULL, 10); return 1;
	case WORKLOAD_OPT_MAX_SECONDS: s->max_seconds = atof(arg); return 1;
	default: return 0;
	}
}

/*
 * Waits out the span that began at @start, reading @progress (the count --until is
 * about, @what names it) every 10 ms. Returns 0, or WORKLOAD_EXIT_SHORT after saying so.
 */
static inline int workload_span_wait(const struct workload_span *s, double start,
				     unsigned long (*progress)(void *ctx), void *ctx, const char *what)
{
	double cap = s->max_seconds > 0 ? s->max_seconds : WORKLOAD_DEF_MAX_SECONDS;

	for (;;) {
		double t = workload_now_s() - start;
		unsigned long n = s->until ? progress(ctx) : 0;

		if (t >= s->seconds && n >= s->until)
			return 0;
		if (t >= cap) {
			fprintf(stderr, "workload: only %lu of the %lu %s wanted after %.0f s (--max-seconds)\n",
				n, s->until, what, cap);
			return WORKLOAD_EXIT_SHORT;
		}
		usleep(10000);
	}
}

#endif

// SPDX-License-Identifier: GPL-2.0
/*
 * pingpong: context switches with known causes, for comparing per-thread switch counts
 * with /proc. Two threads pass a byte through two pipes (voluntary switches, as lmbench's
 * lat_ctx does); a spinner pinned to the same CPU gets preempted (involuntary switches).
 * When done, every thread stays alive and parked, the JSON summary names their tids and
 * the program waits for a line on stdin, so a test can read /proc and lockscope at rest.
 * The bench runs it for --seconds without the spinner (--no-spinner): then each round trip
 * is two switches and nothing else, timed by ping itself from its first round to its last
 * (not the process's start, its threads' creation or the parking). --progress FILE writes
 * ping's clock and rounds every PROGRESS_EVERY rounds there ("ns rounds" lines, the
 * monotonic clock): the bench's interleaved runs cut them into slices traced and not.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "workload.h"

static struct {
	long rounds;
	double seconds;		/* 0: --rounds decides */
	int spinner;
	int wait_go;
	const char *progress;	/* --progress FILE */
} opts = { .rounds = 20000, .spinner = 1 };

/* How often ping looks at the clock in a --seconds run: a few times a millisecond. */
#define CLOCK_EVERY 1024
/* How often ping notes its progress for --progress: well under a millisecond apart. */
#define PROGRESS_EVERY 256
/* The byte ping sends last in a --seconds run: pong echoes it and stops too. */
#define STOP_BYTE 1

static int to[2], from[2];
static volatile int spin_stop;
static pthread_barrier_t parked;	/* every worker and main: the run is over */
static pthread_mutex_t exit_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t exit_cv = PTHREAD_COND_INITIALIZER;
static int exiting;
static pid_t tids[3];
static long rounds_done;
static double ran_s;		/* from ping's first round to its last */
static struct workload_progress marks;	/* --progress: ping's clock every PROGRESS_EVERY rounds */

static void park(void)
{
	pthread_barrier_wait(&parked);
	pthread_mutex_lock(&exit_mu);
	while (!exiting)
		pthread_cond_wait(&exit_cv, &exit_mu);
	pthread_mutex_unlock(&exit_mu);
}

static void *ping(void *arg)
{
	double start, now;
	char b = 0;
	long i;

	(void)arg;
	tids[0] = syscall(SYS_gettid);
	workload_pin(0);
	start = now = workload_now_s();
	for (i = 0; i < opts.rounds; i++) {
		if (opts.progress && !(i % PROGRESS_EVERY))
			workload_progress_mark(&marks, workload_now_s(), i);
		if (opts.seconds && !(i % CLOCK_EVERY) && (now = workload_now_s()) - start >= opts.seconds)
			b = STOP_BYTE;
		if (write(to[1], &b, 1) != 1 || read(from[0], &b, 1) != 1 || b == STOP_BYTE)
			break;
	}
	if (!opts.seconds)
		now = workload_now_s();
	rounds_done = i;
	ran_s = now - start;
	spin_stop = 1;
	park();
	return NULL;
}

static void *pong(void *arg)
{
	char b;
	long i;

	(void)arg;
	tids[1] = syscall(SYS_gettid);
	workload_pin(0);
	for (i = 0; i < opts.rounds; i++)
		if (read(to[0], &b, 1) != 1 || write(from[1], &b, 1) != 1 || b == STOP_BYTE)
			break;
	park();
	return NULL;
}

static void *spinner(void *arg)
{
	(void)arg;
	tids[2] = syscall(SYS_gettid);
	workload_pin(0);
	while (!spin_stop)
		;
	park();
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "rounds", required_argument, NULL, 'r' },
		{ "seconds", required_argument, NULL, 's' },
		{ "no-spinner", no_argument, NULL, 'N' },
		{ "wait", no_argument, NULL, 'W' },
		{ "progress", required_argument, NULL, 'P' },
		{},
	};
	void *(*fns[3])(void *) = { ping, pong, spinner };
	pthread_t th[3];
	char line[16];
	int c, i, n;

	while ((c = getopt_long(argc, argv, "r:s:NWP:", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': opts.rounds = atol(optarg); break;
		case 's': opts.seconds = atof(optarg); break;
		case 'N': opts.spinner = 0; break;
		case 'W': opts.wait_go = 1; break;
		case 'P': opts.progress = optarg; break;
		default:
			fprintf(stderr, "usage: pingpong [--rounds N | --seconds S] [--no-spinner] [--wait] "
				"[--progress FILE]\n");
			return 2;
		}
	}
	if (opts.rounds < 1 || opts.seconds < 0) {
		fprintf(stderr, "pingpong: --rounds must be at least 1, --seconds at least 0\n");
		return 2;
	}
	if (opts.seconds)
		opts.rounds = LONG_MAX;
	n = opts.spinner ? 3 : 2;
	if (pipe(to) || pipe(from)) {
		perror("pingpong: pipe");
		return 1;
	}
	if (opts.wait_go && workload_wait_for_go())
		return 1;
	pthread_barrier_init(&parked, NULL, n + 1);
	for (i = 0; i < n; i++)
		pthread_create(&th[i], NULL, fns[i], NULL);
	pthread_barrier_wait(&parked);
	/* the last thread through the barrier still has its way to its condvar sleep ahead */
	workload_wait_parked();
	if (opts.progress && workload_progress_write(&marks, opts.progress, "pingpong"))
		return 1;
	printf("{\"rounds\": %ld, \"seconds\": %.6f, \"per_s\": %.0f, \"tids\": [%d, %d", rounds_done, ran_s,
	       ran_s > 0 ? rounds_done / ran_s : 0, tids[0], tids[1]);
	printf(opts.spinner ? ", %d]}\n" : "]}\n", tids[2]);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		line[0] = 0;
	pthread_mutex_lock(&exit_mu);
	exiting = 1;
	pthread_cond_broadcast(&exit_cv);
	pthread_mutex_unlock(&exit_mu);
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	return 0;
}

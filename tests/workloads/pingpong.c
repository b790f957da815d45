// SPDX-License-Identifier: GPL-2.0
/*
 * pingpong: context switches with known causes, for comparing per-thread switch counts
 * with /proc. Two threads pass a byte through two pipes (voluntary switches, as lmbench's
 * lat_ctx does); a spinner pinned to the same CPU gets preempted (involuntary switches).
 * When done, every thread stays alive and parked, the JSON summary names their tids and
 * the program waits for a line on stdin, so a test can read /proc and lockscope at rest.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "workload.h"

static struct {
	long rounds;
	int wait_go;
} opts = { .rounds = 20000 };

static int to[2], from[2];
static volatile int spin_stop;
static pthread_barrier_t parked;	/* every worker and main: the run is over */
static pthread_mutex_t exit_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t exit_cv = PTHREAD_COND_INITIALIZER;
static int exiting;
static pid_t tids[3];

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
	char b = 0;
	long i;

	(void)arg;
	tids[0] = syscall(SYS_gettid);
	workload_pin(0);
	for (i = 0; i < opts.rounds; i++)
		if (write(to[1], &b, 1) != 1 || read(from[0], &b, 1) != 1)
			break;
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
		if (read(to[0], &b, 1) != 1 || write(from[1], &b, 1) != 1)
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
		{ "wait", no_argument, NULL, 'W' },
		{},
	};
	void *(*fns[3])(void *) = { ping, pong, spinner };
	pthread_t th[3];
	char line[16];
	int c, i;

	while ((c = getopt_long(argc, argv, "r:W", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': opts.rounds = atol(optarg); break;
		case 'W': opts.wait_go = 1; break;
		default:
			fprintf(stderr, "usage: pingpong [--rounds N] [--wait]\n");
			return 2;
		}
	}
	if (opts.rounds < 1) {
		fprintf(stderr, "pingpong: --rounds must be at least 1\n");
		return 2;
	}
	if (pipe(to) || pipe(from)) {
		perror("pingpong: pipe");
		return 1;
	}
	if (opts.wait_go && workload_wait_for_go())
		return 1;
	pthread_barrier_init(&parked, NULL, 4);
	for (i = 0; i < 3; i++)
		pthread_create(&th[i], NULL, fns[i], NULL);
	pthread_barrier_wait(&parked);
	/* give the last thread through the barrier time to reach its condvar sleep */
	usleep(200000);
	printf("{\"rounds\": %ld, \"tids\": [%d, %d, %d]}\n", opts.rounds, tids[0], tids[1], tids[2]);
	fflush(stdout);
	if (!fgets(line, sizeof(line), stdin))
		line[0] = 0;
	pthread_mutex_lock(&exit_mu);
	exiting = 1;
	pthread_cond_broadcast(&exit_cv);
	pthread_mutex_unlock(&exit_mu);
	for (i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * yield_ring: a yield storm with many peers. The main thread and --threads - 1 others are
 * pinned to one CPU; the main thread calls sched_yield() --yields times, and the others
 * spin until it is done, so each of its yields has others to run and switches to one of
 * them, which runs until the scheduler preempts it: the yields go to every peer in turn.
 * With --peers-yield the others yield in their loop too, and every switch on the CPU is
 * a yield (under EEVDF the yielder and one of them then take turns between themselves):
 * what a yield's switch costs a tracer. It counts its yields itself. Prints
 * {"yielder_tid":..., "peer_tids":[...], "yields":...} at the end.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "workload.h"

#define MAX_THREADS 16

static struct {
	int threads;
	long yields;
	int peers_yield;
	int wait_go;
} opts = { .threads = 6, .yields = 300 };

static atomic_int done;
static pthread_barrier_t started;	/* every thread runnable before the main one yields */
static pid_t peer_tids[MAX_THREADS];

static void *peer(void *arg)
{
	peer_tids[(long)arg] = syscall(SYS_gettid);
	workload_pin(0);
	pthread_barrier_wait(&started);
	while (!atomic_load(&done))
		if (opts.peers_yield)
			sched_yield();
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "yields", required_argument, NULL, 'y' },
		{ "peers-yield", no_argument, NULL, 'p' },
		{ "wait", no_argument, NULL, 'W' },
		{},
	};
	pthread_t th[MAX_THREADS];
	long i, n = 0;
	int c;

	while ((c = getopt_long(argc, argv, "t:y:pW", longopts, NULL)) != -1) {
		switch (c) {
		case 't': opts.threads = atoi(optarg); break;
		case 'y': opts.yields = atol(optarg); break;
		case 'p': opts.peers_yield = 1; break;
		case 'W': opts.wait_go = 1; break;
		default:
			fprintf(stderr, "usage: yield_ring [--threads N] [--yields N] [--peers-yield] [--wait]\n");
			return 2;
		}
	}
	if (opts.threads < 2 || opts.threads > MAX_THREADS || opts.yields < 1) {
		fprintf(stderr, "yield_ring: --threads must be 2..%d and --yields at least 1\n", MAX_THREADS);
		return 2;
	}
	if (opts.wait_go && workload_wait_for_go())
		return 1;
	workload_pin(0);
	pthread_barrier_init(&started, NULL, opts.threads);
	for (i = 1; i < opts.threads; i++)
		pthread_create(&th[i], NULL, peer, (void *)i);
	pthread_barrier_wait(&started);
	for (i = 0; i < opts.yields; i++)
		n += sched_yield() == 0;
	atomic_store(&done, 1);
	for (i = 1; i < opts.threads; i++)
		pthread_join(th[i], NULL);
	printf("{\"yielder_tid\": %d, \"peer_tids\": [", getpid());
	for (i = 1; i < opts.threads; i++)
		printf("%s%d", i > 1 ? ", " : "", peer_tids[i]);
	printf("], \"yields\": %ld}\n", n);
	return 0;
}

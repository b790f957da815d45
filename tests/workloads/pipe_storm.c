// SPDX-License-Identifier: GPL-2.0
/*
 * pipe_storm: kernel mutex contention. Writers and readers share one pipe, whose
 * pipe->mutex every read(2) and write(2) takes, so the threads queue on one kernel mutex.
 * Prints the messages moved and the rate as JSON; --wait as in mmap_storm. --hold keeps
 * the threads alive after that until a line on stdin, so that counts taken from outside
 * cover the storm and not the threads' exit: it says "done" once every thread is asleep.
 * --progress FILE notes the clock and the messages written every PROGRESS_EVERY of them,
 * as pingpong does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "workload.h"

enum {
	MSG_BYTES = 64,
	PROGRESS_EVERY = 8192,	/* messages: ~2 million a second here, marks ~4 ms apart */
	PROGRESS_BATCH = 256,	/* a writer adds to the shared count this many at a time */
};

static struct {
	int threads;
	long messages;
	double seconds;
	int wait_go;
	int hold;
	int spread;	/* pin the threads round-robin over the CPUs */
	const char *progress;	/* --progress FILE */
} opts = { .threads = 4, .messages = 200000 };

/* --progress: the messages written by all, and the marks (one writer at a time) */
static _Atomic unsigned long written_so_far;
static pthread_mutex_t marks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct workload_progress marks;

static int fds[2];
static volatile int stop;
/* writers done, readers done (each with main), then everyone released to exit */
static pthread_barrier_t writers_done, readers_done, release;

/* A thread's end: its count kept, main told, and (with --hold) main's word awaited. */
static void *finish(pthread_barrier_t *done, long count)
{
	pthread_barrier_wait(done);
	pthread_barrier_wait(&release);
	return (void *)count;
}

/*
 * A writer's batch of messages, added to the shared count; the one that crosses a
 * multiple of PROGRESS_EVERY notes the count and the clock, both read under the lock so
 * that the marks increase in both.
 */
static void note_progress(void)
{
	unsigned long after = atomic_fetch_add(&written_so_far, PROGRESS_BATCH) + PROGRESS_BATCH;

	if (after % PROGRESS_EVERY >= PROGRESS_BATCH)
		return;
	pthread_mutex_lock(&marks_lock);
	workload_progress_mark(&marks, workload_now_s(), atomic_load(&written_so_far));
	pthread_mutex_unlock(&marks_lock);
}

static void *writer(void *arg)
{
	char msg[MSG_BYTES] = "x";
	long n = (long)arg, i;
	double start = workload_now_s();

	for (i = 0; opts.seconds > 0 ? !stop : i < n; i++) {
		if (write(fds[1], msg, sizeof(msg)) != sizeof(msg)) {
			perror("write");
			exit(1);
		}
		if (opts.progress && (i + 1) % PROGRESS_BATCH == 0)
			note_progress();
		if (opts.seconds > 0 && (i & 255) == 0 && workload_now_s() - start >= opts.seconds)
			stop = 1;
	}
	return finish(&writers_done, i);
}

static void *reader(void *arg)
{
	char msg[MSG_BYTES];
	long got = 0;

	(void)arg;
	/* messages are written whole (PIPE_BUF atomicity) and read whole */
	while (read(fds[0], msg, sizeof(msg)) == sizeof(msg))
		got++;
	return finish(&readers_done, got);
}

/* Thread attributes that pin to @cpu with --spread; NULL (the defaults) without. */
static pthread_attr_t *on_cpu(long cpu)
{
	static pthread_attr_t attr[64 * 2];
	static int n;
	cpu_set_t set;

	if (!opts.spread)
		return NULL;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_attr_init(&attr[n]);
	pthread_attr_setaffinity_np(&attr[n], sizeof(set), &set);
	return &attr[n++];
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "messages", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 's' },
		{ "wait", no_argument, NULL, 'W' },
		{ "hold", no_argument, NULL, 'H' },
		/*
		 * On a busy machine the scheduler wakes a reader on its writer's CPU and the two
		 * take turns instead of colliding on the mutex; pinned, they run side by side
		 */
		{ "spread", no_argument, NULL, 'S' },
		{ "progress", required_argument, NULL, 'P' },
		{},
	};
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	pthread_t w[64], r[64];
	long written = 0, got = 0;
	double start, elapsed;
	char line[16];
	void *ret;
	int c, i;

	while ((c = getopt_long(argc, argv, "t:n:s:W", longopts, NULL)) != -1) {
		switch (c) {
		case 't': opts.threads = atoi(optarg); break;
		case 'n': opts.messages = atol(optarg); break;
		case 's': opts.seconds = atof(optarg); break;
		case 'W': opts.wait_go = 1; break;
		case 'H': opts.hold = 1; break;
		case 'S': opts.spread = 1; break;
		case 'P': opts.progress = optarg; break;
		default:
			fprintf(stderr, "usage: pipe_storm [--threads N] [--messages N | --seconds S] [--spread] [--wait] [--hold] [--progress FILE]\n");
			return 2;
		}
	}
	if (opts.threads < 1 || opts.threads > 64) {
		fprintf(stderr, "pipe_storm: --threads must be 1..64\n");
		return 2;
	}
	if (pipe(fds)) {
		perror("pipe");
		return 1;
	}
	if (opts.wait_go && workload_wait_for_go())
		return 1;
	pthread_barrier_init(&writers_done, NULL, opts.threads + 1);
	pthread_barrier_init(&readers_done, NULL, opts.threads + 1);
	pthread_barrier_init(&release, NULL, 2 * opts.threads + 1);
	start = workload_now_s();
	for (i = 0; i < opts.threads; i++) {
		pthread_create(&r[i], on_cpu(2 * i % cpus), reader, NULL);
		pthread_create(&w[i], on_cpu((2 * i + 1) % cpus), writer, (void *)(opts.messages / opts.threads));
	}
	pthread_barrier_wait(&writers_done);
	elapsed = workload_now_s() - start;
	close(fds[1]);	/* readers see EOF once the pipe drains */
	pthread_barrier_wait(&readers_done);
	if (opts.hold) {
		/* the threads' way from one barrier into the next can wait on a kernel lock (32
		 * entering futex_wait at once contend the futex hash bucket): after it, not before */
		workload_wait_parked();
		printf("done\n");
	}
	fflush(stdout);
	if (opts.hold && !fgets(line, sizeof(line), stdin))
		return 1;
	pthread_barrier_wait(&release);
	for (i = 0; i < opts.threads; i++) {
		pthread_join(w[i], &ret);
		written += (long)ret;
		pthread_join(r[i], &ret);
		got += (long)ret;
	}
	printf("{\"messages\": %ld, \"read\": %ld, \"seconds\": %.3f, \"per_s\": %.0f}\n",
	       written, got, elapsed, written / elapsed);
	fflush(stdout);
	return opts.progress && workload_progress_write(&marks, opts.progress, "pipe_storm");
}

// SPDX-License-Identifier: GPL-2.0
/*
 * file_writers: kernel-lock holders preempted while others wait. Writers pwrite(2) large
 * chunks into one memfd (shmem): each write holds the file's inode rwsem (i_rwsem, taken
 * for write) while it copies, so the writers queue on it. CPU-bound hog threads keep the
 * CPUs oversubscribed: the copy loop's cond_resched() then switches a writer out while it
 * holds the rwsem and the others sleep on it.
 *
 * Prints the writes and bytes moved as JSON at exit; --wait as in mmap_storm.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "workload.h"

enum { MAX_THREADS = 64 };

static struct {
	int writers;
	int hogs;
	size_t chunk;
	double seconds;
	int wait_go;
} opts = { .writers = 3, .hogs = 2, .chunk = 1 << 20, .seconds = 3 };

static int fd;
static volatile int stop;

struct writer {
	pthread_t thread;
	char name[24];
	unsigned long writes;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	char *buf = malloc(opts.chunk);

	if (!buf) {
		perror("malloc");
		exit(1);
	}
	pthread_setname_np(pthread_self(), w->name);	/* "writer-N", under 16 */
	memset(buf, 'x', opts.chunk);
	while (!stop) {
		/* the same range every time: the file stays one chunk, its pages stay put */
		if (pwrite(fd, buf, opts.chunk, 0) != (ssize_t)opts.chunk) {
			perror("pwrite");
			exit(1);
		}
		w->writes++;
	}
	free(buf);
	return NULL;
}

static void *hog_main(void *arg)
{
	volatile unsigned long spins = 0;

	(void)arg;
	pthread_setname_np(pthread_self(), "hog");
	while (!stop)
		spins++;
	return NULL;
}

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s [--writers N] [--hogs N] [--chunk-kb N] [--seconds S] [--wait]\n", prog);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "writers", required_argument, NULL, 'w' },
		{ "hogs", required_argument, NULL, 'H' },
		{ "chunk-kb", required_argument, NULL, 'c' },
		{ "seconds", required_argument, NULL, 's' },
		{ "wait", no_argument, NULL, 'W' },
		{},
	};
	struct writer writers[MAX_THREADS] = {};
	pthread_t hogs[MAX_THREADS];
	unsigned long total = 0;
	int opt, i;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'w': opts.writers = atoi(optarg); break;
		case 'H': opts.hogs = atoi(optarg); break;
		case 'c': opts.chunk = (size_t)atol(optarg) * 1024; break;
		case 's': opts.seconds = atof(optarg); break;
		case 'W': opts.wait_go = 1; break;
		default: usage(argv[0]);
		}
	}
	if (opts.writers < 1 || opts.writers > MAX_THREADS || opts.hogs < 0 ||
	    opts.hogs > MAX_THREADS || !opts.chunk || opts.seconds <= 0)
		usage(argv[0]);
	fd = memfd_create("file_writers", 0);
	if (fd < 0) {
		perror("memfd_create");
		return 1;
	}
	if (opts.wait_go && workload_wait_for_go())
		return 1;
	for (i = 0; i < opts.writers; i++) {
		snprintf(writers[i].name, sizeof(writers[i].name), "writer-%d", i);
		if (pthread_create(&writers[i].thread, NULL, writer_main, &writers[i]))
			return 1;
	}
	for (i = 0; i < opts.hogs; i++)
		if (pthread_create(&hogs[i], NULL, hog_main, NULL))
			return 1;
	usleep(opts.seconds * 1e6);
	stop = 1;
	for (i = 0; i < opts.writers; i++) {
		pthread_join(writers[i].thread, NULL);
		total += writers[i].writes;
	}
	for (i = 0; i < opts.hogs; i++)
		pthread_join(hogs[i], NULL);
	printf("{\"writes\": %lu, \"bytes\": %lu, \"seconds\": %.3f}\n", total,
	       total * (unsigned long)opts.chunk, opts.seconds);
	return 0;
}

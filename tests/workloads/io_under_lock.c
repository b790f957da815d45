// SPDX-License-Identifier: GPL-2.0
/*
 * io_under_lock: the other row of seed 004's table, few contentions but long ones. Two
 * threads append records to one journal file under one mutex; each record is written with
 * pwrite(2) while the mutex is held, and the threads rest between records, so they collide
 * rarely but then wait for a whole write. With --fixed the record is copied under the lock
 * and written after unlocking (to a file of the thread's own).
 *
 * Prints the records written as JSON at exit.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "workload.h"

/*
 * A record is copied into the page cache in RECORD_BYTES writes, at least RECORD_WRITES of
 * them and for at least RECORD_MIN_US (a fast machine copies the 32 MiB in well under a
 * millisecond: then the waits would be too short to be this row of the table); the rest
 * between records is shorter than a record, so a waiter waits for most of one.
 */
enum { THREADS = 2, RECORD_BYTES = 4 << 20, RECORD_WRITES = 8, RECORD_MIN_US = 3000, REST_US = 2000 };

static struct {
	double seconds;
	int fixed;
} opts = { .seconds = 3 };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static char journal[RECORD_BYTES];	/* the shared state the lock guards */
static volatile int stop;

struct writer {
	pthread_t thread;
	int fd;
	long records;
	char *copy;
};

/* noinline: the holder's stacks must show it by name */
__attribute__((noinline)) static void write_record(int fd, const char *buf)
{
	double end = workload_now_s() + RECORD_MIN_US / 1e6;
	int i;

	for (i = 0; i < RECORD_WRITES || workload_now_s() < end; i++)
		if (pwrite(fd, buf, RECORD_BYTES, (off_t)(i % RECORD_WRITES) * RECORD_BYTES) != RECORD_BYTES)
			perror("pwrite");
}

static void *writer_main(void *arg)
{
	struct writer *w = arg;

	while (!stop) {
		pthread_mutex_lock(&mu);
		journal[w->records % RECORD_BYTES]++;
		if (opts.fixed)
			memcpy(w->copy, journal, RECORD_BYTES);
		else
			write_record(w->fd, journal);
		pthread_mutex_unlock(&mu);
		if (opts.fixed)
			write_record(w->fd, w->copy);
		w->records++;
		usleep(REST_US);
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
	struct writer w[THREADS] = {};
	long records = 0;
	double start;
	int c, i;

	while ((c = getopt_long(argc, argv, "s:f", longopts, NULL)) != -1) {
		switch (c) {
		case 's': opts.seconds = atof(optarg); break;
		case 'f': opts.fixed = 1; break;
		default:
			fprintf(stderr, "usage: io_under_lock [--seconds S] [--fixed]\n");
			return 2;
		}
	}
	for (i = 0; i < THREADS; i++) {
		/* one journal (an unnamed file); --fixed writes a file per thread, outside the lock */
		w[i].fd = i && !opts.fixed ? w[0].fd : open("/tmp", O_TMPFILE | O_RDWR, 0600);
		w[i].copy = malloc(RECORD_BYTES);
		if (w[i].fd < 0 || !w[i].copy) {
			perror("io_under_lock: temporary file");
			return 1;
		}
	}
	start = workload_now_s();
	for (i = 0; i < THREADS; i++)
		pthread_create(&w[i].thread, NULL, writer_main, &w[i]);
	while (workload_now_s() - start < opts.seconds)
		usleep(10000);
	stop = 1;
	for (i = 0; i < THREADS; i++) {
		pthread_join(w[i].thread, NULL);
		records += w[i].records;
	}
	printf("{\"records\": %ld, \"per_s\": %.0f}\n", records, records / (workload_now_s() - start));
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * busy_poll: a thread waiting for work in a loop of waits that return at once, the other
 * face of a sched_yield() storm. --mode picks the call: epoll (epoll_wait on an empty
 * set), poll, select, nanosleep, or futex (FUTEX_WAIT on a word that no longer holds the
 * value: EAGAIN). With --timeout-ms N > 0 the same loop waits N ms per call instead and
 * idles (the fixed variant; futex waits N ms too).
 *
 * Measures itself: the calls made, and the polling thread's share of its CPU time spent
 * in the kernel (getrusage(RUSAGE_THREAD)), printed as JSON at exit; --wait as in
 * mmap_storm.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "workload.h"

enum mode { MODE_EPOLL, MODE_POLL, MODE_SELECT, MODE_NANOSLEEP, MODE_FUTEX };

static const char *const mode_names[] = {
	[MODE_EPOLL] = "epoll", [MODE_POLL] = "poll", [MODE_SELECT] = "select",
	[MODE_NANOSLEEP] = "nanosleep", [MODE_FUTEX] = "futex",
};

static struct {
	enum mode mode;
	int timeout_ms;
	double seconds;
	int wait_go;
} opts = { .seconds = 3 };

static volatile int stop;
static unsigned long calls;
static double kernel_share;
static int futex_word;

static void one_call(int ep, int pipe_rd)
{
	struct timespec ts = { opts.timeout_ms / 1000, (opts.timeout_ms % 1000) * 1000000L };
	struct timeval tv = { opts.timeout_ms / 1000, (opts.timeout_ms % 1000) * 1000L };
	struct pollfd pfd = { .fd = pipe_rd, .events = POLLIN };
	struct epoll_event ev;
	fd_set rd;

	switch (opts.mode) {
	case MODE_EPOLL:
		epoll_wait(ep, &ev, 1, opts.timeout_ms);
		break;
	case MODE_POLL:
		poll(&pfd, 1, opts.timeout_ms);
		break;
	case MODE_SELECT:
		FD_ZERO(&rd);
		FD_SET(pipe_rd, &rd);
		select(pipe_rd + 1, &rd, NULL, NULL, &tv);
		break;
	case MODE_NANOSLEEP:
		nanosleep(&ts, NULL);
		break;
	case MODE_FUTEX:
		/* the word is 0: waiting for 1 fails at once; waiting for 0 sleeps */
		syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, opts.timeout_ms ? 0 : 1,
			opts.timeout_ms ? &ts : NULL, NULL, 0);
		break;
	}
}

static double tv_s(struct timeval tv)
{
	return tv.tv_sec + tv.tv_usec / 1e6;
}

static void *poller(void *arg)
{
	int ep = epoll_create1(0), fds[2];
	struct rusage ru;

	(void)arg;
	pthread_setname_np(pthread_self(), "poller");
	if (ep < 0 || pipe(fds)) {
		perror("epoll_create1/pipe");
		exit(1);
	}
	while (!stop) {
		one_call(ep, fds[0]);
		calls++;
	}
	getrusage(RUSAGE_THREAD, &ru);
	kernel_share = tv_s(ru.ru_stime) / (tv_s(ru.ru_utime) + tv_s(ru.ru_stime) + 1e-9);
	return NULL;
}

static void usage(const char *prog)
{
	fprintf(stderr, "usage: %s [--mode epoll|poll|select|nanosleep|futex] [--timeout-ms N] "
		"[--seconds S] [--wait]\n", prog);
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "timeout-ms", required_argument, NULL, 't' },
		{ "seconds", required_argument, NULL, 's' },
		{ "wait", no_argument, NULL, 'W' },
		{},
	};
	pthread_t thread;
	double start;
	size_t i;
	int opt;

	while ((opt = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (opt) {
		case 'm':
			for (i = 0; i < sizeof(mode_names) / sizeof(mode_names[0]); i++)
				if (!strcmp(optarg, mode_names[i]))
					break;
			if (i == sizeof(mode_names) / sizeof(mode_names[0]))
				usage(argv[0]);
			opts.mode = i;
			break;
		case 't': opts.timeout_ms = atoi(optarg); break;
		case 's': opts.seconds = atof(optarg); break;
		case 'W': opts.wait_go = 1; break;
		default: usage(argv[0]);
		}
	}
	if (opts.timeout_ms < 0 || opts.seconds <= 0)
		usage(argv[0]);
	if (opts.wait_go && workload_wait_for_go())
		return 1;
	start = workload_now_s();
	if (pthread_create(&thread, NULL, poller, NULL))
		return 1;
	usleep(opts.seconds * 1e6);
	stop = 1;
	if (opts.mode == MODE_FUTEX && opts.timeout_ms)	/* wake a sleeping wait */
		syscall(SYS_futex, &futex_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
	pthread_join(thread, NULL);
	printf("{\"mode\": \"%s\", \"calls\": %lu, \"seconds\": %.3f, \"kernel_share\": %.4f}\n",
	       mode_names[opts.mode], calls, workload_now_s() - start, kernel_share);
	return 0;
}

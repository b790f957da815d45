// SPDX-License-Identifier: GPL-2.0
/*
 * stack_fanout: a wait under many distinct call stacks, for the benchmark of the daemon's
 * memory and query latency with ~100 k stacks and keys. Wait i descends LEVELS frames,
 * each through path_a() or path_b() as bit d of i says, then sleeps briefly in a futex
 * wait (the switch-out lockscope sees), so each of the first 2^LEVELS waits has a user
 * stack of its own.
 *
 * Prints the waits made as JSON at exit.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <linux/futex.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "workload.h"

enum { LEVELS = 17 };	/* 131072 distinct paths */

static uint32_t word;	/* never changes: every wait times out */
/* long enough that the waiter is asleep before the timer fires */
static const struct timespec nap = { .tv_nsec = 20000 };

static int descend(unsigned int i, int d);

/* noinline, and work after the call: every frame keeps its own return address */
__attribute__((noinline)) static int path_a(unsigned int i, int d)
{
	return descend(i, d + 1) + 1;
}

__attribute__((noinline)) static int path_b(unsigned int i, int d)
{
	return descend(i, d + 1) + 2;
}

__attribute__((noinline)) static int descend(unsigned int i, int d)
{
	if (d == LEVELS)
		return syscall(SYS_futex, &word, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, 0, &nap, NULL, 0) < 0 ? 0 : 1;
	return (i >> d) & 1 ? path_b(i, d) : path_a(i, d);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "waits", required_argument, NULL, 'n' },
		{},
	};
	long waits = 100000, i, sum = 0;
	double start;
	int c;

	while ((c = getopt_long(argc, argv, "n:", longopts, NULL)) != -1) {
		switch (c) {
		case 'n': waits = atol(optarg); break;
		default:
			fprintf(stderr, "usage: stack_fanout [--waits N]\n");
			return 2;
		}
	}
	/* the default 50 us timer slack would make each 20 us nap last 70 us */
	prctl(PR_SET_TIMERSLACK, 1);
	start = workload_now_s();
	for (i = 0; i < waits; i++)
		sum += descend(i, 0);
	printf("{\"waits\": %ld, \"paths\": %ld, \"sum\": %ld, \"per_s\": %.0f}\n", waits,
	       waits < (1L << LEVELS) ? waits : (1L << LEVELS), sum, waits / (workload_now_s() - start));
	return 0;
}

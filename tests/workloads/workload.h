/* SPDX-License-Identifier: GPL-2.0 */
/* What every test workload shares: the start handshake and a clock. */
#ifndef __LS_WORKLOAD_H
#define __LS_WORKLOAD_H

#include <stdio.h>
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

static inline double workload_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

#endif

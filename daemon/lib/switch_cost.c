// SPDX-License-Identifier: GPL-2.0
/*
 * What one context switch costs on this host, measured as lmbench's lat_ctx does: two
 * threads pinned to one CPU pass a byte through two pipes; the same pipe traffic without
 * a switch is subtracted.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>
#include "lib/clock.h"
#include "lib/switch_cost.h"

/* ---- the cost of a context switch (lmbench lat_ctx) ---- */

struct pingpong {
	int to[2], from[2];
	uint32_t rounds;
	int cpu;
};

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) ? -EINVAL : 0;
}

static void *echo(void *arg)
{
	struct pingpong *p = arg;
	char b;
	uint32_t i;

	pin(p->cpu);
	for (i = 0; i < p->rounds; i++)
		if (read(p->to[0], &b, 1) != 1 || write(p->from[1], &b, 1) != 1)
			break;
	return NULL;
}

/* Nanoseconds for @rounds of write+read through one pipe by one thread: no switch. */
static uint64_t pipe_overhead(int fd[2], uint32_t rounds)
{
	uint64_t t0 = ls_now_ns();
	char b = 0;
	uint32_t i;

	for (i = 0; i < rounds; i++)
		if (write(fd[1], &b, 1) != 1 || read(fd[0], &b, 1) != 1)
			break;
	return ls_now_ns() - t0;
}

int ls_measure_switch_cost(uint32_t rounds, uint64_t *ns)
{
	struct pingpong p = { .rounds = rounds, .cpu = sched_getcpu() };
	uint64_t t0, pp, ovh;
	cpu_set_t saved;
	pthread_t th;
	char b = 0;
	uint32_t i;
	int err = 0;

	if (pipe(p.to) || pipe(p.from))
		return -errno;
	pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved);
	if (p.cpu < 0 || pin(p.cpu) || pthread_create(&th, NULL, echo, &p)) {
		err = -EINVAL;
		goto cleanup;
	}
	t0 = ls_now_ns();
	for (i = 0; i < rounds; i++)
		if (write(p.to[1], &b, 1) != 1 || read(p.from[0], &b, 1) != 1)
			break;
	pp = ls_now_ns() - t0;
	pthread_join(th, NULL);
	ovh = pipe_overhead(p.to, rounds);
	/* a round trip is two switches, each with one write and one read around it */
	*ns = pp / (2ULL * rounds) > ovh / rounds ? pp / (2ULL * rounds) - ovh / rounds : 0;
cleanup:
	pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
	close(p.to[0]);
	close(p.to[1]);
	close(p.from[0]);
	close(p.from[1]);
	return err;
}

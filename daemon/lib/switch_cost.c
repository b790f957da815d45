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

/*
 * Nanoseconds for @rounds of a byte written to @wfd and one read from @rfd; UINT64_MAX when
 * a pipe failed. Through one pipe it is the pipe traffic alone; to the echo thread and
 * back, a round trip with two switches.
 */
static uint64_t exchanges(int wfd, int rfd, uint32_t rounds)
{
	uint64_t t0 = ls_now_ns();
	char b = 0;
	uint32_t i;

	for (i = 0; i < rounds; i++)
		if (write(wfd, &b, 1) != 1 || read(rfd, &b, 1) != 1)
			return UINT64_MAX;
	return ls_now_ns() - t0;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/*
 * The least of @runs: an interrupt or another task's turn on the CPU only ever lengthens
 * a run. Here 4 runs of 1000 round trips (30 ms) spread 9 % over ten measurements, one run
 * of 20 000 (150 ms) 21 %.
 */
int ls_measure_switch_cost(uint32_t rounds, uint32_t runs, uint64_t *ns)
{
	struct pingpong p = { .to = { -1, -1 }, .from = { -1, -1 }, .rounds = rounds * runs, .cpu = sched_getcpu() };
	uint64_t pp = UINT64_MAX, ovh = UINT64_MAX, t;
	cpu_set_t saved;
	pthread_t th;
	uint32_t r;
	int err = 0;

	if (!rounds || !runs)
		return -EINVAL;
	if (pipe(p.to) || pipe(p.from)) {
		err = -errno;
		goto cleanup;
	}
	pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved);
	if (p.cpu < 0 || pin(p.cpu) || pthread_create(&th, NULL, echo, &p)) {
		err = -EINVAL;
		goto restore;
	}
	for (r = 0, t = 0; r < runs && t != UINT64_MAX; r++)
		pp = min_u64(pp, t = exchanges(p.to[1], p.from[0], rounds));
	/* the echo thread reads to the end: a failed run ends it early */
	close(p.to[1]);
	p.to[1] = -1;
	pthread_join(th, NULL);
	for (r = 0; r < runs && t != UINT64_MAX; r++)
		ovh = min_u64(ovh, t = exchanges(p.from[1], p.from[0], rounds));
	if (t == UINT64_MAX) {
		err = -EIO;
		goto restore;
	}
	/* a round trip is two switches, each with one write and one read around it */
	*ns = pp / (2ULL * rounds) > ovh / rounds ? pp / (2ULL * rounds) - ovh / rounds : 0;
restore:
	pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
cleanup:
	for (r = 0; r < 2; r++) {
		if (p.to[r] >= 0)
			close(p.to[r]);
		if (p.from[r] >= 0)
			close(p.from[r]);
	}
	return err;
}

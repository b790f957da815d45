// SPDX-License-Identifier: GPL-2.0
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "progress.h"

#define NSEC_PER_SEC 1000000000ULL

struct progress {
	char what[64];
	uint64_t start_ns, total_ns;
};

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

struct progress *progress__new(const char *what, uint64_t total_ms, bool quiet)
{
	struct progress *p;

	if (quiet || !isatty(STDERR_FILENO))
		return NULL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	snprintf(p->what, sizeof(p->what), "%s", what);
	p->start_ns = mono_ns();
	p->total_ns = total_ms * 1000000ULL;
	return p;
}

void progress__update(struct progress *p, int64_t events)
{
	double done, left;

	if (!p)
		return;
	done = (double)(mono_ns() - p->start_ns) / NSEC_PER_SEC;
	left = (double)p->total_ns / NSEC_PER_SEC - done;
	/* \r and erase to the end: the line is redrawn in place */
	fprintf(stderr, "\r\033[K%s: %.0f s of %.0f s, %.0f s left", p->what, done,
		(double)p->total_ns / NSEC_PER_SEC, left > 0 ? left : 0);
	if (events >= 0)
		fprintf(stderr, ", %lld waits so far", (long long)events);
	fflush(stderr);
}

void progress__free(struct progress *p)
{
	if (!p)
		return;
	fprintf(stderr, "\r\033[K");
	fflush(stderr);
	free(p);
}

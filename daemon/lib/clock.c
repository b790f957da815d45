// SPDX-License-Identifier: GPL-2.0
#include "lib/clock.h"

uint64_t ls_clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + ts.tv_nsec;
}

uint64_t ls_now_ns(void)
{
	return ls_clock_ns(CLOCK_MONOTONIC);
}

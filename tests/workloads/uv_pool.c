// SPDX-License-Identifier: GPL-2.0
/*
 * uv_pool: seed report 003. Many tiny uv_queue_work items on the system libuv's thread
 * pool, whose workers take one global mutex (and a condition variable) per item: the
 * contention lockscope must find inside libuv.so.1. Prints the items completed as JSON.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>
#include "workload.h"

static struct {
	long items;
	int batch;
	int wait_go;
} opts = { .items = 200000, .batch = 64 };

static long submitted, completed;
static volatile unsigned long sink;

static void work(uv_work_t *req)
{
	sink += (unsigned long)req;	/* tiny: the queue, not the work, is the cost */
}

static void submit(uv_loop_t *loop);

static void after_work(uv_work_t *req, int status)
{
	uv_loop_t *loop = req->loop;

	(void)status;
	completed++;
	free(req);
	/* keep the pool fed: a batch in flight at all times */
	if (submitted < opts.items && completed % opts.batch == 0)
		submit(loop);
}

static void submit(uv_loop_t *loop)
{
	int i;

	for (i = 0; i < opts.batch && submitted < opts.items; i++, submitted++) {
		uv_work_t *req = malloc(sizeof(*req));

		if (!req || uv_queue_work(loop, req, work, after_work)) {
			fprintf(stderr, "uv_pool: cannot queue work\n");
			exit(1);
		}
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "items", required_argument, NULL, 'n' },
		{ "batch", required_argument, NULL, 'b' },
		{ "wait", no_argument, NULL, 'W' },
		{},
	};
	uv_loop_t *loop = uv_default_loop();
	double start;
	int c;

	while ((c = getopt_long(argc, argv, "n:b:W", longopts, NULL)) != -1) {
		switch (c) {
		case 'n': opts.items = atol(optarg); break;
		case 'b': opts.batch = atoi(optarg); break;
		case 'W': opts.wait_go = 1; break;
		default:
			fprintf(stderr, "usage: uv_pool [--items N] [--batch N] [--wait]\n");
			return 2;
		}
	}
	if (opts.items < 1 || opts.batch < 1) {
		fprintf(stderr, "uv_pool: --items and --batch must be positive\n");
		return 2;
	}
	if (opts.wait_go && workload_wait_for_go())
		return 1;
	start = workload_now_s();
	submit(loop);
	uv_run(loop, UV_RUN_DEFAULT);
	printf("{\"items\": %ld, \"completed\": %ld, \"seconds\": %.3f}\n", opts.items, completed,
	       workload_now_s() - start);
	return 0;
}

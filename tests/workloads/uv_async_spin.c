// SPDX-License-Identifier: GPL-2.0
/*
 * uv_async_spin: seed report 000 on the system libuv (Debian 12: 1.44.2). Sender threads
 * call uv_async_send() in a loop; the event-loop thread handles the wakeups. All of them
 * are pinned to one CPU, so the loop thread, woken by a sender's eventfd write, often
 * preempts that sender between its two stores (pending 0->1, write, 1->2). The loop then
 * finds pending == 1 in uv__async_spin() and spins: 997 PAUSEs, sched_yield(), again,
 * until the sender runs and finishes its store.
 *
 * Threads are named uv-loop and uv-send-N. Prints {"loop_tid":..., "sender_tids":[...],
 * "callbacks":...} at the end. It runs --seconds, and with --until N also until the loop
 * thread was switched out involuntarily N times (its yields that ran another thread, and
 * preemptions), so that a test gets the spinning it needs however busy the machine is.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <uv.h>
#include "workload.h"

#define MAX_SENDERS 8

/* How often the loop thread checks whether its run is over. */
#define CHECK_MS 10

static struct {
	double seconds;
	int senders;
	int cpu;
	int wait_go;
	struct workload_span span;	/* --until counts the loop thread's involuntary switches */
} opts = { .seconds = 3, .senders = 2, .cpu = 0 };
static double start;

static uv_async_t async;
static atomic_bool stop;
static long callbacks;
static int sender_tids[MAX_SENDERS];
static volatile unsigned long sink;

static void *sender(void *arg)
{
	int idx = (int)(long)arg, i;
	char name[16];

	snprintf(name, sizeof(name), "uv-send-%d", idx);
	pthread_setname_np(pthread_self(), name);
	sender_tids[idx] = syscall(SYS_gettid);
	workload_pin(opts.cpu);
	while (!atomic_load(&stop)) {
		uv_async_send(&async);
		for (i = 0; i < 200; i++)	/* a little work between sends */
			sink += i;
	}
	return NULL;
}

static void on_async(uv_async_t *h)
{
	(void)h;
	callbacks++;
}

static unsigned long loop_switches(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nivcsw;
}

/* On the loop thread: the run is over at --seconds and --until, or at --max-seconds. */
static void on_timer(uv_timer_t *t)
{
	double elapsed = workload_now_s() - start;
	double cap = opts.span.max_seconds > 0 ? opts.span.max_seconds : WORKLOAD_DEF_MAX_SECONDS;

	if (elapsed < cap && (elapsed < opts.seconds || loop_switches() < opts.span.until))
		return;
	if (elapsed >= cap && loop_switches() < opts.span.until)
		fprintf(stderr, "uv_async_spin: only %lu of the %lu switches wanted after %.0f s (--max-seconds)\n",
			loop_switches(), opts.span.until, elapsed);
	atomic_store(&stop, true);
	uv_close((uv_handle_t *)&async, NULL);
	uv_close((uv_handle_t *)t, NULL);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "senders", required_argument, NULL, 'n' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "wait", no_argument, NULL, 'w' },
		WORKLOAD_SPAN_OPTIONS,
		{},
	};
	pthread_t th[MAX_SENDERS];
	uv_timer_t timer;
	uv_loop_t *loop;
	int opt, i;

	while ((opt = getopt_long(argc, argv, "s:n:c:w", longopts, NULL)) != -1) {
		if (workload_span_opt(&opts.span, opt, optarg))
			continue;
		switch (opt) {
		case 's': opts.seconds = atof(optarg); break;
		case 'n': opts.senders = atoi(optarg); break;
		case 'c': opts.cpu = atoi(optarg); break;
		case 'w': opts.wait_go = 1; break;
		default: return 2;
		}
	}
	if (opts.senders < 1 || opts.senders > MAX_SENDERS)
		return 2;
	if (opts.wait_go && workload_wait_for_go())
		return 1;
	pthread_setname_np(pthread_self(), "uv-loop");
	workload_pin(opts.cpu);
	loop = uv_default_loop();
	uv_async_init(loop, &async, on_async);
	uv_timer_init(loop, &timer);
	start = workload_now_s();
	uv_timer_start(&timer, on_timer, CHECK_MS, CHECK_MS);
	for (i = 0; i < opts.senders; i++)
		pthread_create(&th[i], NULL, sender, (void *)(long)i);
	uv_run(loop, UV_RUN_DEFAULT);
	for (i = 0; i < opts.senders; i++)
		pthread_join(th[i], NULL);
	printf("{\"loop_tid\": %ld, \"sender_tids\": [", syscall(SYS_gettid));
	for (i = 0; i < opts.senders; i++)
		printf("%s%d", i ? ", " : "", sender_tids[i]);
	printf("], \"callbacks\": %ld, \"libuv\": \"%s\"}\n", callbacks, uv_version_string());
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * spin_locks: threads contending on a spin lock, measuring how much of their own CPU time
 * they spent spinning, for lockscope's PAUSE-spin share to be checked against.
 *
 *   --lock ttas      a hand-written test-and-test-and-set lock spinning on PAUSE
 *   --lock pthread   pthread_spin_lock (glibc's loop spins on PAUSE too)
 *   --lock timed     no lock: each thread spins --inside PAUSEs of its own, then works.
 *                    Nothing hands anything over, so nothing a sampler does to one
 *                    thread (an interrupt, a wakeup of its reader) makes another spin:
 *                    the spin share is the thread's alone, which a sampler must match.
 *                    With a lock, an interrupted holder makes its waiters spin right
 *                    after a sample, and on few CPUs a sampler's own share moves with it.
 *
 * Each thread: lock, work (the critical section), unlock, work outside. When the first
 * try fails, the thread's CPU clock is read before and after the spin: spin_ns is CPU time
 * spent spinning, cpu_ns all the thread's CPU time in the run.
 *
 * With --wait: prints "pid N", waits for a line, runs, prints
 * {"threads":[{"tid":..,"spin_ns":..,"cpu_ns":..,"share":..}...]} and keeps its threads
 * alive (parked) until stdin closes, so a profiler can still read their figures.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "workload.h"

#define MAX_THREADS 16
/*
 * --lock timed spins, each round, for a third of the CPU time --inside work() iterations
 * take. What a PAUSE costs against a work() iteration differs by an order of magnitude
 * between cores, and on one core between a warm loop and a cold one (a start-up calibration
 * measured 69 iterations a PAUSE on a Zen 3 guest where the run itself went at 26: spin
 * shares of 0.02-0.10 instead of ~0.5). So each thread sizes its next spin from its own
 * figures so far: the CPU time its PAUSEs took and the CPU time its work took, both read
 * off the clock reads the run makes anyway.
 */
#define TIMED_SPIN_DIV 3
#define TIMED_FIRST_PAUSES 1000	/* the first round's, before anything is measured */
static const char *const kind_names[] = { "ttas", "pthread", "timed" };

static struct {
	double seconds;
	int threads;
	int inside, outside;	/* busy-loop iterations in and out of the critical section */
	enum lock_kind { LOCK_TTAS, LOCK_PTHREAD, LOCK_TIMED, LOCK_KINDS } kind;
	bool wait_go;
} opts = { .seconds = 3, .threads = 3, .inside = 30000, .outside = 10000 };

struct worker {
	pthread_t th;
	int tid;
	unsigned int seed;	/* jitter()'s */
	uint64_t spin_ns, cpu_ns;
	/* --lock timed: PAUSEs and work() iterations done, the work's CPU time, the last spin's end */
	uint64_t pauses, work_iters, work_ns, spun_ns;
};

static struct worker workers[MAX_THREADS];
static atomic_int ttas;
static pthread_spinlock_t spin;
static atomic_bool stop;
static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cv = PTHREAD_COND_INITIALIZER;
static bool leave;
static volatile unsigned long sink;

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/*
 * Work lives in its own functions, aligned apart from the spin loops: a sample in the
 * work must not land within the sampler's window around a PAUSE.
 */
__attribute__((noinline, aligned(256))) static void work(int n)
{
	int i;

	for (i = 0; i < n; i++)
		sink += i;
}

__attribute__((noinline, aligned(256))) static bool ttas_try(void)
{
	return !atomic_exchange_explicit(&ttas, 1, memory_order_acquire);
}

/* --lock timed: @n PAUSEs, nothing else */
__attribute__((noinline, aligned(256))) static void timed_spin(int n)
{
	int i;

	for (i = 0; i < n; i++)
		__builtin_ia32_pause();
}

/* --lock timed: this round's PAUSEs, from the thread's own figures so far */
static int timed_pauses(const struct worker *w)
{
	double pause_ns, target_ns;

	if (!w->pauses || !w->work_iters)
		return TIMED_FIRST_PAUSES;
	pause_ns = (double)w->spin_ns / w->pauses;
	target_ns = (double)w->work_ns / w->work_iters * opts.inside / TIMED_SPIN_DIV;
	return target_ns / pause_ns > 1 ? (int)(target_ns / pause_ns) : 1;
}

/* test-and-test-and-set: spin on a plain load with PAUSE, then try the exchange */
__attribute__((noinline, aligned(256))) static void ttas_spin(void)
{
	for (;;) {
		while (atomic_load_explicit(&ttas, memory_order_relaxed))
			__builtin_ia32_pause();
		if (!atomic_exchange_explicit(&ttas, 1, memory_order_acquire))
			return;
	}
}

/*
 * @n give or take half, at random: sections of one fixed length lock the threads into a
 * schedule that repeats, and a sampler at a fixed rate can then keep landing in the same
 * phase of it (measured: spin sampled at 1150/s and work at 770/s by a 907 Hz sampler).
 */
static int jitter(unsigned int *seed, int n)
{
	return n / 2 + (n ? (int)(rand_r(seed) % (unsigned int)n) : 0);
}

static void lock(struct worker *w)
{
	uint64_t t0;
	int n;

	if (opts.kind == LOCK_TIMED) {
		n = jitter(&w->seed, timed_pauses(w));
		t0 = thread_cpu_ns();
		if (w->spun_ns)		/* the work since the last spin */
			w->work_ns += t0 - w->spun_ns;
		timed_spin(n);
		w->spun_ns = thread_cpu_ns();
		w->spin_ns += w->spun_ns - t0;
		w->pauses += n;
		return;
	}
	if (opts.kind == LOCK_PTHREAD ? !pthread_spin_trylock(&spin) : ttas_try())
		return;
	t0 = thread_cpu_ns();
	if (opts.kind == LOCK_PTHREAD)
		pthread_spin_lock(&spin);
	else
		ttas_spin();
	w->spin_ns += thread_cpu_ns() - t0;
}

static void unlock(void)
{
	if (opts.kind == LOCK_PTHREAD)
		pthread_spin_unlock(&spin);
	else if (opts.kind == LOCK_TTAS)
		atomic_store_explicit(&ttas, 0, memory_order_release);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint64_t t0;
	int n;

	w->tid = syscall(SYS_gettid);
	w->seed = w->tid;
	pthread_setname_np(pthread_self(), "spinner");
	t0 = thread_cpu_ns();
	while (!atomic_load(&stop)) {
		lock(w);
		if (opts.kind != LOCK_TIMED)
			work(jitter(&w->seed, opts.inside));
		unlock();
		n = jitter(&w->seed, opts.outside);
		work(n);
		w->work_iters += n;
	}
	w->cpu_ns = thread_cpu_ns() - t0;
	pthread_mutex_lock(&park_mu);
	while (!leave)
		pthread_cond_wait(&park_cv, &park_mu);
	pthread_mutex_unlock(&park_mu);
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "seconds", required_argument, NULL, 's' },
		{ "threads", required_argument, NULL, 't' },
		{ "lock", required_argument, NULL, 'l' },
		{ "inside", required_argument, NULL, 'i' },
		{ "outside", required_argument, NULL, 'o' },
		{ "wait", no_argument, NULL, 'w' },
		{},
	};
	char line[16];
	int opt, i;

	while ((opt = getopt_long(argc, argv, "s:t:l:i:o:w", longopts, NULL)) != -1) {
		switch (opt) {
		case 's': opts.seconds = atof(optarg); break;
		case 't': opts.threads = atoi(optarg); break;
		case 'l':
			for (i = 0; i < LOCK_KINDS; i++)
				if (!strcmp(optarg, kind_names[i]))
					break;
			if (i == LOCK_KINDS)
				return 2;
			opts.kind = i;
			break;
		case 'i': opts.inside = atoi(optarg); break;
		case 'o': opts.outside = atoi(optarg); break;
		case 'w': opts.wait_go = true; break;
		default: return 2;
		}
	}
	if (opts.threads < 1 || opts.threads > MAX_THREADS)
		return 2;
	pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
	if (opts.wait_go && workload_wait_for_go())
		return 1;
	for (i = 0; i < opts.threads; i++)
		pthread_create(&workers[i].th, NULL, worker_main, &workers[i]);
	usleep(opts.seconds * 1e6);
	atomic_store(&stop, true);
	/* every worker has stopped counting once its cpu_ns is set */
	for (i = 0; i < opts.threads; i++)
		while (!__atomic_load_n(&workers[i].cpu_ns, __ATOMIC_ACQUIRE))
			usleep(1000);
	printf("{\"lock\": \"%s\", \"threads\": [", kind_names[opts.kind]);
	for (i = 0; i < opts.threads; i++)
		printf("%s{\"tid\": %d, \"spin_ns\": %lu, \"cpu_ns\": %lu, \"share\": %.4f}", i ? ", " : "",
		       workers[i].tid, (unsigned long)workers[i].spin_ns, (unsigned long)workers[i].cpu_ns,
		       (double)workers[i].spin_ns / workers[i].cpu_ns);
	printf("]}\n");
	fflush(stdout);
	/* parked until told to go: their figures stay readable */
	if (opts.wait_go)
		while (fgets(line, sizeof(line), stdin))
			;
	pthread_mutex_lock(&park_mu);
	leave = true;
	pthread_cond_broadcast(&park_cv);
	pthread_mutex_unlock(&park_mu);
	for (i = 0; i < opts.threads; i++)
		pthread_join(workers[i].th, NULL);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * blocking_waits: the ways servers block besides a mutex, each with known truth.
 *
 *   --mode pool    a thread pool on an eventfd: workers block in read(2) until a producer
 *                  posts a job every 200 us (--period-us: another period), a worker
 *                  waiting for work: idle capacity
 *   --mode pipe    a pipeline: each stage blocks in read(2) on the pipe from the stage before
 *   --mode latch   a latch: consumers block in epoll_wait(2) on an eventfd a producer sets
 *                  when it has pushed to a mutex-protected queue (PostgreSQL's latches)
 *   --mode fsync   writers take one mutex and fdatasync(2) inside it: the others sleep on
 *                  the mutex while the holder waits for the disk ("I/O inside the lock")
 *   --mode chain   three processes: this one reads a pipe a relay process writes each
 *                  message it reads from another pipe, which a source process fills every
 *                  200 us. Each wait here ends when the relay writes, and the relay had been
 *                  waiting for the source meanwhile: a chain (waiter -> relay -> source).
 *
 * Each thread counts its own blocking waits independently of any tracer: the voluntary
 * context switches getrusage(RUSAGE_THREAD) shows across the blocking call (each time it
 * slept is one), the time the calls that slept took, and of that the time the thread was
 * off its CPU (the call's time less the thread's CPU time across it). Prints them per
 * mechanism as JSON at exit, with the file descriptors' inodes (the object a wait is on).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "workload.h"

enum { MAX_THREADS = 64, QUEUE_LEN = 1024 };

enum mode { MODE_POOL, MODE_PIPE, MODE_LATCH, MODE_FSYNC, MODE_CHAIN, MODE_MAX };
static const char *const mode_names[MODE_MAX] = { "pool", "pipe", "latch", "fsync", "chain" };
/* the mechanism each mode's waiting threads block in, as lockscope names it */
static const char *const mode_mechanism[MODE_MAX] = { "read", "read", "poll", "futex", "read" };

/* chain: the source's period, and the processes (the relay wakes us, the source it) */
enum { CHAIN_PERIOD_US = 200 };
static pid_t chain_relay, chain_source;

static struct {
	enum mode mode;
	int threads;
	struct workload_span span;	/* --until counts the waiting threads' sleeps */
	int wait_go;
	const char *dir;		/* fsync: where the file goes */
	unsigned int period_us;		/* pool: the producer's period (0: its own, 200 us) */
} opts = { .threads = 4, .span.seconds = 3, .dir = "/tmp" };

static volatile int stop;

/*
 * The sleeps of a kind of call and their time: the calls' time (wall), of that the time
 * the thread was off its CPU (wall less its CPU time), and of that, in calls where it was
 * also preempted, its run-queue wait (which bounds from above the time it was runnable
 * after a preemption: off its CPU, yet not waiting for the call's event).
 */
struct tally {
	unsigned long sleeps, wall_ns, off_ns, preempt_rq_ns;
};

struct thread {
	pthread_t thread;
	int id;
	pid_t tid;			/* the feeder's: the thread that wakes the waiters */
	int in_fd, out_fd;		/* pipe: the stage's ends; pool, latch: the eventfd */
	unsigned long items;		/* jobs, messages, records handled */
	struct tally wait;		/* the blocking call the mode is about */
	struct tally sync;		/* fsync: fdatasync, inside the lock */
};

/* A blocking call's start: the clock, the thread's CPU time, switches and run-queue wait. */
struct call {
	unsigned long t0, cpu0, rq0;
	long s0, p0;
};

static struct thread threads[MAX_THREADS + 1];
static int efd, epfd, file_fd;
static int pipes[MAX_THREADS + 1][2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	unsigned long items[QUEUE_LEN];
	unsigned int head, tail;
} q;

static unsigned long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000UL + ts.tv_nsec;
}

/* The thread's voluntary switches (sleeps), and its involuntary ones in @preempted. */
static long nvcsw(long *preempted)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	*preempted = ru.ru_nivcsw;
	return ru.ru_nvcsw;
}

static unsigned long thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1000000000UL + ts.tv_nsec;
}

/* The thread's run-queue wait so far (schedstat's second field); 0 where there is none. */
static unsigned long run_delay_ns(void)
{
	static __thread int fd = -1;
	unsigned long on_cpu, delay;
	char buf[96];
	ssize_t n;

	if (fd < 0)
		fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	if (fd < 0 || (n = pread(fd, buf, sizeof(buf) - 1, 0)) <= 0)
		return 0;
	buf[n] = 0;
	return sscanf(buf, "%lu %lu", &on_cpu, &delay) == 2 ? delay : 0;
}

static struct call call_begin(void)
{
	struct call c = { .t0 = now_ns(), .cpu0 = thread_cpu_ns(), .rq0 = run_delay_ns() };

	c.s0 = nvcsw(&c.p0);
	return c;
}

/* Counts the sleeps of the call begun at @c into @t. */
static void counted(struct tally *t, const struct call *c)
{
	long preempted, slept = nvcsw(&preempted) - c->s0;
	unsigned long wall, cpu, rq;

	if (slept <= 0)
		return;
	cpu = thread_cpu_ns() - c->cpu0;
	rq = run_delay_ns() - c->rq0;
	wall = now_ns() - c->t0;
	t->sleeps += slept;
	t->wall_ns += wall;
	t->off_ns += wall > cpu ? wall - cpu : 0;
	if (preempted != c->p0)
		t->preempt_rq_ns += rq;
}

static void tally_add(struct tally *sum, const struct tally *t)
{
	sum->sleeps += t->sleeps;
	sum->wall_ns += t->wall_ns;
	sum->off_ns += t->off_ns;
	sum->preempt_rq_ns += t->preempt_rq_ns;
}

static void tally_print(const char *name, const struct tally *t)
{
	printf("\"%s\": {\"sleeps\": %lu, \"wall_ns\": %lu, \"off_ns\": %lu, \"preempt_rq_ns\": %lu}, ",
	       name, t->sleeps, t->wall_ns, t->off_ns, t->preempt_rq_ns);
}

/* ---- pool: workers read(2) an eventfd for jobs ---- */

static void *pool_worker(void *arg)
{
	struct thread *t = arg;

	while (!stop) {
		struct call c = call_begin();
		unsigned long jobs;

		ssize_t n = read(efd, &jobs, sizeof(jobs));

		/* every sleep counts, whatever the call returned */
		counted(&t->wait, &c);
		if (n != sizeof(jobs))
			continue;
		if (stop)	/* the wake that ends the run, not a job */
			break;
		t->items += jobs;
	}
	return NULL;
}

/* The producer: one job every 200 us (--period-us), so the workers mostly wait for work. */
static void *pool_producer(void *arg)
{
	struct thread *t = arg;
	uint64_t one = 1;

	t->tid = gettid();
	while (!stop) {
		if (write(efd, &one, sizeof(one)) == sizeof(one))
			t->items++;
		usleep(opts.period_us ? opts.period_us : 200);
	}
	return NULL;
}

/* ---- pipe: stage i reads pipes[i], writes pipes[i + 1] ---- */

static void *pipe_stage(void *arg)
{
	struct thread *t = arg;
	char buf[64];

	while (!stop) {
		struct call c = call_begin();
		ssize_t n = read(t->in_fd, buf, sizeof(buf));

		counted(&t->wait, &c);	/* the read that found EOF too */
		if (n <= 0)
			break;
		t->items++;
		if (t->out_fd >= 0 && write(t->out_fd, buf, n) != n)
			break;
	}
	if (t->out_fd >= 0)
		close(t->out_fd);	/* the next stage ends at EOF too */
	return NULL;
}

/* The source: a 64-byte message every 100 us into the first stage. */
static void *pipe_source(void *arg)
{
	struct thread *t = arg;
	char msg[64] = "message";

	t->tid = gettid();
	while (!stop) {
		if (write(t->out_fd, msg, sizeof(msg)) == sizeof(msg))
			t->items++;
		usleep(100);
	}
	close(t->out_fd);	/* the stages end at EOF, one after the other */
	return NULL;
}

/* ---- latch: consumers epoll_wait(2) on an eventfd set after each push ---- */

static void *latch_consumer(void *arg)
{
	struct thread *t = arg;
	struct epoll_event ev;

	while (!stop) {
		struct call c = call_begin();
		unsigned long drained = 0;
		uint64_t v;

		int ready = epoll_wait(epfd, &ev, 1, 100);

		counted(&t->wait, &c);	/* a wait that timed out too */
		if (ready <= 0)
			continue;
		/* reset the latch, then take what is queued */
		if (read(efd, &v, sizeof(v)) != sizeof(v))
			continue;
		pthread_mutex_lock(&mu);
		while (q.head != q.tail) {
			q.head = (q.head + 1) % QUEUE_LEN;
			drained++;
		}
		pthread_mutex_unlock(&mu);
		t->items += drained;
	}
	return NULL;
}

static void *latch_producer(void *arg)
{
	struct thread *t = arg;
	uint64_t one = 1;

	t->tid = gettid();
	while (!stop) {
		pthread_mutex_lock(&mu);
		if ((q.tail + 1) % QUEUE_LEN != q.head) {
			q.items[q.tail] = t->items++;
			q.tail = (q.tail + 1) % QUEUE_LEN;
		}
		pthread_mutex_unlock(&mu);
		if (write(efd, &one, sizeof(one)) != sizeof(one))
			break;
		usleep(150);
	}
	return NULL;
}

/* ---- fsync: a record and fdatasync(2) under one mutex ---- */

static void *fsync_writer(void *arg)
{
	struct thread *t = arg;
	char rec[128];

	memset(rec, 'r', sizeof(rec));
	while (!stop) {
		struct call c = call_begin();

		pthread_mutex_lock(&mu);
		counted(&t->wait, &c);
		if (write(file_fd, rec, sizeof(rec)) == sizeof(rec)) {
			c = call_begin();
			fdatasync(file_fd);
			counted(&t->sync, &c);
			t->items++;
		}
		pthread_mutex_unlock(&mu);
	}
	return NULL;
}

/* ---- chain: source -> pipes[0] -> relay -> pipes[1] -> this process ---- */

static void chain_source_main(void)
{
	char msg[64] = "message";

	for (;;) {
		usleep(CHAIN_PERIOD_US);
		if (write(pipes[0][1], msg, sizeof(msg)) != sizeof(msg))
			_exit(0);
	}
}

static void chain_relay_main(void)
{
	char buf[64];
	ssize_t n;

	while ((n = read(pipes[0][0], buf, sizeof(buf))) > 0)
		if (write(pipes[1][1], buf, n) != n)
			break;
	_exit(0);	/* the source is gone: our reader sees the end */
}

/* The two other processes, each with only its own pipe ends; this one keeps its read end. */
static int chain_start(void)
{
	if ((chain_source = fork()) < 0)
		return -1;
	if (!chain_source) {
		close(pipes[0][0]);
		close(pipes[1][0]);
		close(pipes[1][1]);
		chain_source_main();
	}
	if ((chain_relay = fork()) < 0)
		return -1;
	if (!chain_relay) {
		close(pipes[0][1]);
		close(pipes[1][0]);
		chain_relay_main();
	}
	close(pipes[0][0]);
	close(pipes[0][1]);
	close(pipes[1][1]);
	return 0;
}

static void chain_stop(void)
{
	kill(chain_source, SIGKILL);
	waitpid(chain_source, NULL, 0);
	waitpid(chain_relay, NULL, 0);
}

/* ---- the run ---- */

static unsigned long sleeps_so_far(void *ctx)
{
	unsigned long n = 0;
	int i;

	(void)ctx;
	for (i = 0; i < opts.threads; i++)
		n += __atomic_load_n(&threads[i].wait.sleeps, __ATOMIC_RELAXED);
	return n;
}

static unsigned long inode_of(int fd)
{
	struct stat st;

	return fd >= 0 && !fstat(fd, &st) ? (unsigned long)st.st_ino : 0;
}

static int setup(void)
{
	char path[4096];
	int i;

	switch (opts.mode) {
	case MODE_POOL:
		/* a job wakes one worker, as a pool's queue does */
		efd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
		return efd < 0 ? -1 : 0;
	case MODE_PIPE:
	case MODE_CHAIN:
		for (i = 0; i <= opts.threads; i++)
			if (pipe2(pipes[i], O_CLOEXEC))
				return -1;
		return 0;
	case MODE_LATCH: {
		struct epoll_event ev = { .events = EPOLLIN };

		/* non-blocking: a consumer another beat to the latch must not sleep in read */
		efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		epfd = epoll_create1(EPOLL_CLOEXEC);
		return efd < 0 || epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &ev) ? -1 : 0;
	}
	case MODE_FSYNC:
		snprintf(path, sizeof(path), "%s/blocking_waits.XXXXXX", opts.dir);
		file_fd = mkstemp(path);
		if (file_fd < 0)
			return -1;
		unlink(path);
		return 0;
	default:
		return -1;
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "threads", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 's' },
		{ "dir", required_argument, NULL, 'd' },
		{ "wait", no_argument, NULL, 'w' },
		{ "period-us", required_argument, NULL, 'p' },
		WORKLOAD_SPAN_OPTIONS,
		{}
	};
	void *(*waiter)(void *) = NULL, *(*feeder)(void *) = NULL;
	struct tally wait = {}, sync = {};
	unsigned long items = 0;
	double start;
	int c, i, rc;

	opts.mode = MODE_MAX;
	while ((c = getopt_long(argc, argv, "m:n:s:d:wp:", longopts, NULL)) != -1) {
		if (workload_span_opt(&opts.span, c, optarg))
			continue;
		switch (c) {
		case 'm':
			for (i = 0; i < MODE_MAX; i++)
				if (!strcmp(optarg, mode_names[i]))
					opts.mode = i;
			break;
		case 'n': opts.threads = atoi(optarg); break;
		case 's': opts.span.seconds = atof(optarg); break;
		case 'd': opts.dir = optarg; break;
		case 'w': opts.wait_go = 1; break;
		case 'p': opts.period_us = strtoul(optarg, NULL, 10); break;
		default:
			fprintf(stderr, "usage: blocking_waits --mode pool|pipe|latch|fsync|chain [--threads N] [--seconds S] "
				"%s [--dir DIR] [--period-us US] [--wait]\n", WORKLOAD_SPAN_USAGE);
			return 2;
		}
	}
	if (opts.mode == MODE_MAX || opts.threads < 1 || opts.threads > MAX_THREADS || opts.span.seconds <= 0) {
		fprintf(stderr, "blocking_waits: --mode pool|pipe|latch|fsync|chain, --threads 1..%d and --seconds > 0\n",
			MAX_THREADS);
		return 2;
	}
	if (opts.mode == MODE_CHAIN)
		opts.threads = 1;	/* one waiter at the chain's end */
	if (setup()) {
		perror("blocking_waits: setup");
		return 1;
	}
	if (opts.wait_go && workload_wait_for_go())
		return 1;
	switch (opts.mode) {
	case MODE_POOL: waiter = pool_worker; feeder = pool_producer; break;
	case MODE_PIPE: waiter = pipe_stage; feeder = pipe_source; break;
	case MODE_LATCH: waiter = latch_consumer; feeder = latch_producer; break;
	case MODE_CHAIN: waiter = pipe_stage; break;
	default: waiter = fsync_writer; break;
	}
	if (opts.mode == MODE_CHAIN && chain_start()) {
		perror("blocking_waits: fork");
		return 1;
	}
	start = workload_now_s();
	for (i = 0; i < opts.threads; i++) {
		threads[i].id = i;
		threads[i].in_fd = opts.mode == MODE_PIPE ? pipes[i][0] : opts.mode == MODE_CHAIN ? pipes[1][0] : efd;
		threads[i].out_fd = opts.mode == MODE_PIPE && i + 1 < opts.threads ? pipes[i + 1][1] : -1;
		pthread_create(&threads[i].thread, NULL, waiter, &threads[i]);
	}
	if (feeder) {
		threads[opts.threads].out_fd = opts.mode == MODE_PIPE ? pipes[0][1] : efd;
		pthread_create(&threads[opts.threads].thread, NULL, feeder, &threads[opts.threads]);
	}
	rc = workload_span_wait(&opts.span, start, sleeps_so_far, NULL, "blocking sleeps");
	stop = 1;
	if (opts.mode == MODE_CHAIN)
		chain_stop();	/* the source dies, the relay sees the end, then our reader */
	if (feeder)
		pthread_join(threads[opts.threads].thread, NULL);
	/* wake whoever still waits, so every thread ends */
	if (opts.mode == MODE_POOL || opts.mode == MODE_LATCH) {
		uint64_t many = opts.threads;

		for (i = 0; i < opts.threads; i++)
			if (write(efd, &many, sizeof(many)) < 0)
				break;
	}
	for (i = 0; i < opts.threads; i++) {
		pthread_join(threads[i].thread, NULL);
		items += threads[i].items;
		tally_add(&wait, &threads[i].wait);
		tally_add(&sync, &threads[i].sync);
	}
	printf("{\"mode\": \"%s\", \"mechanism\": \"%s\", \"threads\": %d, \"items\": %lu, ",
	       mode_names[opts.mode], mode_mechanism[opts.mode], opts.threads, items);
	tally_print("wait", &wait);
	tally_print("sync", &sync);
	printf("\"relay_pid\": %d, \"source_pid\": %d, ", chain_relay, chain_source);
	printf("\"feeder_tid\": %d, \"seconds\": %.3f, \"inode\": %lu}\n", threads[opts.threads].tid,
	       workload_now_s() - start,
	       inode_of(opts.mode == MODE_PIPE ? pipes[0][0] : opts.mode == MODE_FSYNC ? file_fd : efd));
	return rc;
}

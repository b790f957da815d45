// SPDX-License-Identifier: GPL-2.0
/*
 * Processes contending on one PTHREAD_PROCESS_SHARED mutex in a shared memory file, as
 * multi-process servers do (PostgreSQL's LWLocks, nginx's accept mutex). The futex word
 * has a different address in every process; lockscope must see one lock, keyed by the
 * file and the offset in it.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "workload.h"

#define MAX_PROCS 32
#define SHM_SIZE 4096
/* not at the start of the file: the key must carry the offset */
#define MUTEX_OFF 64
#define LOG_LEN 256

struct shared {
	char pad[MUTEX_OFF];
	pthread_mutex_t mu;
	unsigned long served;
	unsigned long sleeps;	/* futex sleeps in lock(), every process, by getrusage */
	int stop;		/* set by the parent when the span is over */
	char log[LOG_LEN];
};

static int child(struct shared *sh, int id)
{
	unsigned long n = 0;

	while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED)) {
		if (pthread_mutex_trylock(&sh->mu)) {
			struct rusage r0, r1;

			/* a futex sleep is one voluntary switch: the independent count */
			getrusage(RUSAGE_SELF, &r0);
			pthread_mutex_lock(&sh->mu);
			getrusage(RUSAGE_SELF, &r1);
			__atomic_fetch_add(&sh->sleeps, r1.ru_nvcsw - r0.ru_nvcsw, __ATOMIC_RELAXED);
		}
		/* a little work inside the critical section, so others queue behind it */
		snprintf(sh->log, LOG_LEN, "proc=%d n=%lu served=%lu", id, n++, sh->served++);
		pthread_mutex_unlock(&sh->mu);
	}
	return 0;
}

static unsigned long sleeps_so_far(void *ctx)
{
	return __atomic_load_n(&((struct shared *)ctx)->sleeps, __ATOMIC_RELAXED);
}

static struct shared *map_shared(const char *name)
{
	pthread_mutexattr_t attr;
	struct shared *sh;
	int fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);

	if (fd < 0 || ftruncate(fd, SHM_SIZE)) {
		perror("shm_mutex: shm_open");
		return NULL;
	}
	sh = mmap(NULL, SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (sh == MAP_FAILED) {
		perror("shm_mutex: mmap");
		return NULL;
	}
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	pthread_mutex_init(&sh->mu, &attr);
	return sh;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "procs", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 's' },
		{ "wait", no_argument, NULL, 'W' },
		WORKLOAD_SPAN_OPTIONS,
		{},
	};
	struct workload_span span = { .seconds = 2 };	/* --until counts futex sleeps */
	int c, i, procs = 4, wait_go = 0, status, failed = 0, rc;
	pid_t pids[MAX_PROCS];
	struct shared *sh;
	char name[64];

	while ((c = getopt_long(argc, argv, "n:s:W", longopts, NULL)) != -1) {
		if (workload_span_opt(&span, c, optarg))
			continue;
		switch (c) {
		case 'n': procs = atoi(optarg); break;
		case 's': span.seconds = atof(optarg); break;
		case 'W': wait_go = 1; break;
		default:
			fprintf(stderr, "usage: shm_mutex [--procs N] [--seconds S] %s [--wait]\n", WORKLOAD_SPAN_USAGE);
			return 2;
		}
	}
	if (procs < 2 || procs > MAX_PROCS || span.seconds <= 0) {
		fprintf(stderr, "shm_mutex: --procs must be 2..%d and --seconds > 0\n", MAX_PROCS);
		return 2;
	}
	snprintf(name, sizeof(name), "/lockscope-shm-%d", getpid());
	sh = map_shared(name);
	if (!sh)
		return 1;
	if (wait_go && workload_wait_for_go()) {
		shm_unlink(name);
		return 1;
	}
	fflush(stdout);
	for (i = 0; i < procs; i++) {
		pids[i] = fork();
		if (pids[i] == 0)
			_exit(child(sh, i));
	}
	rc = workload_span_wait(&span, workload_now_s(), sleeps_so_far, sh, "futex sleeps");
	__atomic_store_n(&sh->stop, 1, __ATOMIC_RELAXED);
	for (i = 0; i < procs; i++)
		if (pids[i] < 0 || waitpid(pids[i], &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			failed = 1;
	shm_unlink(name);
	printf("{\"path\": \"/dev/shm%s\", \"offset\": %zu, \"served\": %lu, \"sleeps\": %lu, \"pids\": [",
	       name, offsetof(struct shared, mu), sh->served, sh->sleeps);
	for (i = 0; i < procs; i++)
		printf("%s%d", i ? ", " : "", pids[i]);
	printf("]}\n");
	return failed ? 1 : rc;
}

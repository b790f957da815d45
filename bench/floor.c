// SPDX-License-Identifier: GPL-2.0
/*
 * floor: loads bench/floor.bpf.c (empty programs on lockscoped's hooks), attaches every
 * program, the two cpu-clock samplers at lockscoped's default rates, prints "ready" and
 * holds them until stdin closes or a signal comes. Each line on stdin asks for the
 * programs' run counts and times (kernel.bpf_stats_enabled), one JSON line back.
 * bench/run.py's `floor` configuration.
 * The holder sampler runs all the time here; lockscoped enables it only while user-lock
 * holders are being noted, so the floor is the upper bound of that hook's cost.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "cpuclock.h"
#include "floor.skel.h"

/* lockscoped's defaults: spin-freq and hold-freq */
enum { SPIN_FREQ = 173, HOLD_FREQ = 997, MAX_CPUS = 1024 };

struct sampler {
	int fds[MAX_CPUS];
	struct bpf_link *links[MAX_CPUS];
};

static int sampler_attach(struct sampler *sm, int nr_cpus, struct bpf_program *prog, unsigned int freq)
{
	int cpu;

	for (cpu = 0; cpu < nr_cpus && cpu < MAX_CPUS; cpu++) {
		sm->fds[cpu] = ls_cpu_clock_open(cpu, freq, false);
		if (sm->fds[cpu] < 0)
			continue;	/* an offline CPU */
		sm->links[cpu] = bpf_program__attach_perf_event(prog, sm->fds[cpu]);
		if (!sm->links[cpu])
			return -errno;
	}
	return 0;
}

static void sampler_free(struct sampler *sm, int nr_cpus)
{
	int cpu;

	for (cpu = 0; cpu < nr_cpus && cpu < MAX_CPUS; cpu++) {
		bpf_link__destroy(sm->links[cpu]);
		if (sm->fds[cpu] > 0)
			close(sm->fds[cpu]);
	}
}

static void print_stats(struct bpf_object *obj)
{
	struct bpf_program *prog;
	const char *sep = "";

	printf("[");
	bpf_object__for_each_program(prog, obj) {
		struct bpf_prog_info info = {};
		__u32 len = sizeof(info);

		if (bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len))
			continue;
		printf("%s{\"name\": \"%s\", \"hook\": \"%s\", \"run_cnt\": %llu, \"run_time_ns\": %llu}", sep,
		       bpf_program__name(prog), bpf_program__section_name(prog),
		       (unsigned long long)info.run_cnt, (unsigned long long)info.run_time_ns);
		sep = ", ";
	}
	printf("]\n");
	fflush(stdout);
}

static void on_signal(int sig)
{
	(void)sig;
}

int main(void)
{
	static struct sampler spin, hold;
	int nr_cpus = libbpf_num_possible_cpus(), err;
	struct sigaction sa = { .sa_handler = on_signal };
	struct floor_bpf *skel;
	char line[16];

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	skel = floor_bpf__open_and_load();
	if (!skel) {
		fprintf(stderr, "floor: cannot load the empty programs: %s\n", strerror(errno));
		return 1;
	}
	err = floor_bpf__attach(skel);
	if (!err)
		err = sampler_attach(&spin, nr_cpus, skel->progs.scheduler_spin_sample, SPIN_FREQ);
	if (!err)
		err = sampler_attach(&hold, nr_cpus, skel->progs.scheduler_hold_sample, HOLD_FREQ);
	if (err) {
		fprintf(stderr, "floor: cannot attach: %s\n", strerror(-err));
	} else {
		printf("ready\n");
		fflush(stdout);
		/* until stdin closes, or a signal interrupts the read */
		while (fgets(line, sizeof(line), stdin))
			print_stats(skel->obj);
	}
	sampler_free(&hold, nr_cpus);
	sampler_free(&spin, nr_cpus);
	floor_bpf__destroy(skel);
	return err ? 1 : 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * floor [--all]: loads bench/floor.bpf.c (empty programs on lockscoped's hooks), attaches
 * the programs lockscoped keeps attached and the spin sampler at its default rate, prints
 * "ready" and holds them until stdin closes or a signal comes. Each line on stdin asks for
 * the programs' run counts and times (kernel.bpf_stats_enabled), one JSON line back;
 * "off" and "on" take every program off its hook and back, answered "ok" (lockscoped's
 * pause and resume: bench/run.py's interleaved runs).
 * --all adds what lockscoped attaches on demand (sched_waking while futex waits come
 * fast, the holder sampler while holders are noted), for per-event costs on every hook.
 * bench/run.py's `floor` and `floor_all` configurations.
 *
 * floor --helpers: bench/helpers.bpf.c instead, one program per helper call or map lookup
 * on sched_switch, all attached, served the same way: what each operation costs here.
 *
 * floor --switch: only the empty sched_switch program, the one hook no futex timing can do
 * without here (without kprobes or fentry, nothing else sees a futex wait end but the
 * syscall tracepoints, which put every syscall on the slow path).
 *
 * floor --waking: the default hooks and the empty sched_waking program: what the hook the
 * waker of each wait needs (block-waits, fast futex waits) costs a load by being attached.
 *
 * floor --lock-begin, --lock-end: only the empty contention_begin or contention_end
 * program. The end runs inside the critical section it ends and the begin before the
 * waiter spins, so a lock storm's throughput answers to each differently: apart, they say
 * which of the two hooks costs what on a storm, whatever runs on them.
 *
 * floor --bound: bench/bound.bpf.c instead, the least work that counts and times every
 * wait exactly, on the same hooks, with the same spin sampler.
 *
 * floor --samplers: only the empty samplers, at lockscoped's default rates, to run beside
 * lockscoped: at 47 and 199 samples/s per CPU nothing a program touches stays cached from
 * one of its runs to the next, so what any program costs there is what else ran since
 * (an almost empty one: ~150 ns beside nothing, 600-730 ns beside lockscoped). It is
 * still not the empty program in lockscoped's place, which costs 2-3x as much again for
 * reasons not found (docs/performance.md): a ratio against it overstates a sampler's work.
 */
#include <errno.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "collect/cpuclock.h"
#include "scheduler.h"
#include "floor.skel.h"
#include "helpers.skel.h"
#include "bound.skel.h"

/* lockscoped's defaults: spin-freq and hold-freq */
enum { SPIN_FREQ = SCHED_DEF_SPIN_FREQ, HOLD_FREQ = ULOCK_DEF_HOLD_FREQ, MAX_CPUS = 1024 };

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
		sm->links[cpu] = NULL;	/* freed again at the end, or attached again ("on") */
		sm->fds[cpu] = 0;
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
		/* recursion_misses: events the kernel skipped, the program already running on that CPU */
		printf("%s{\"name\": \"%s\", \"hook\": \"%s\", \"run_cnt\": %llu, \"run_time_ns\": %llu, "
		       "\"recursion_misses\": %llu}", sep, bpf_program__name(prog), bpf_program__section_name(prog),
		       (unsigned long long)info.run_cnt, (unsigned long long)info.run_time_ns,
		       (unsigned long long)info.recursion_misses);
		sep = ", ";
	}
	printf("]\n");
	fflush(stdout);
}

static void on_signal(int sig)
{
	(void)sig;
}

/*
 * The bound's waits so far, summed over the CPUs, as {"klock": [waits, ns], "futex": [...]}:
 * what a test checks against an independent count, so that the bound is known to do the
 * work it stands for.
 */
static void print_totals(struct bpf_object *obj)
{
	struct bpf_map *map = bpf_object__find_map_by_name(obj, "totals");
	int nr_cpus = libbpf_num_possible_cpus(), cpu;
	__u64 sum[2][2] = {};
	__u32 key;

	for (key = 0; map && nr_cpus > 0 && key < 2; key++) {
		__u64 vals[nr_cpus][2];

		if (bpf_map__lookup_elem(map, &key, sizeof(key), vals, sizeof(vals), 0))
			break;
		for (cpu = 0; cpu < nr_cpus; cpu++) {
			sum[key][0] += vals[cpu][0];
			sum[key][1] += vals[cpu][1];
		}
	}
	printf("{\"klock\": [%llu, %llu], \"futex\": [%llu, %llu]}\n", (unsigned long long)sum[0][0],
	       (unsigned long long)sum[0][1], (unsigned long long)sum[1][0], (unsigned long long)sum[1][1]);
	fflush(stdout);
}

/*
 * What "off" and "on" do in a mode: its programs off their hooks and back, as lockscoped's
 * pause and resume do (the bench's interleaved runs). NULL where a mode has none.
 */
struct toggle {
	void (*off)(void *ctx);
	int (*on)(void *ctx);
	void *ctx;
};

/*
 * "ready", then for each line on stdin the programs' figures ("totals": the bound's
 * waits), or "off"/"on" answered "ok" once done, until it closes or a signal comes.
 */
static void serve_stats(struct bpf_object *obj, const struct toggle *t)
{
	char line[16];

	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		if (t && !strcmp(line, "off\n")) {
			t->off(t->ctx);
			printf("ok\n");
			fflush(stdout);
		} else if (t && !strcmp(line, "on\n")) {
			printf(t->on(t->ctx) ? "failed\n" : "ok\n");
			fflush(stdout);
		} else if (!strcmp(line, "totals\n")) {
			print_totals(obj);
		} else {
			print_stats(obj);
		}
	}
}

static int helpers(void)
{
	struct helpers_bpf *skel = helpers_bpf__open_and_load();
	int err;

	if (!skel) {
		fprintf(stderr, "floor: cannot load the helper programs: %s\n", strerror(errno));
		return 1;
	}
	err = helpers_bpf__attach(skel);
	if (err)
		fprintf(stderr, "floor: cannot attach the helper programs: %s\n", strerror(-err));
	else
		serve_stats(skel->obj, NULL);
	helpers_bpf__destroy(skel);
	return err ? 1 : 0;
}

struct bound_run {
	struct bound_bpf *skel;
	struct sampler spin;
	int nr_cpus;
};

static void bound_off(void *ctx)
{
	struct bound_run *r = ctx;

	bound_bpf__detach(r->skel);
	sampler_free(&r->spin, r->nr_cpus);
}

static int bound_on(void *ctx)
{
	struct bound_run *r = ctx;

	return bound_bpf__attach(r->skel) ?:
	       sampler_attach(&r->spin, r->nr_cpus, r->skel->progs.scheduler_spin_sample, SPIN_FREQ);
}

static int bound(int nr_cpus)
{
	static struct bound_run r;
	struct bound_bpf *skel = r.skel = bound_bpf__open_and_load();
	struct toggle t = { bound_off, bound_on, &r };
	int err;

	if (!skel) {
		fprintf(stderr, "floor: cannot load the bound's programs: %s\n", strerror(errno));
		return 1;
	}
	r.nr_cpus = nr_cpus;
	err = bound_on(&r);
	if (err)
		fprintf(stderr, "floor: cannot attach the bound's programs: %s\n", strerror(-err));
	else
		serve_stats(skel->obj, &t);
	sampler_free(&r.spin, nr_cpus);
	bound_bpf__destroy(skel);
	return err ? 1 : 0;
}

/* The program a single-hook mode attaches alone; NULL for the other modes. */
static struct bpf_program *single_program(struct floor_bpf *skel, const char *mode)
{
	if (!strcmp(mode, "--switch"))
		return skel->progs.scheduler_switch;
	if (!strcmp(mode, "--lock-begin"))
		return skel->progs.klock_begin;
	if (!strcmp(mode, "--lock-end"))
		return skel->progs.klock_end;
	return NULL;
}

/* The empty programs' modes: the skeleton's programs, and the samplers the mode has. */
struct floor_run {
	struct floor_bpf *skel;
	struct sampler spin, hold;
	bool spin_on, hold_on;
	int nr_cpus;
};

static void floor_off(void *ctx)
{
	struct floor_run *r = ctx;

	floor_bpf__detach(r->skel);
	sampler_free(&r->spin, r->nr_cpus);
	sampler_free(&r->hold, r->nr_cpus);
}

static int floor_on(void *ctx)
{
	struct floor_run *r = ctx;
	int err = floor_bpf__attach(r->skel);

	if (!err && r->spin_on)
		err = sampler_attach(&r->spin, r->nr_cpus, r->skel->progs.scheduler_spin_sample, SPIN_FREQ);
	if (!err && r->hold_on)
		err = sampler_attach(&r->hold, r->nr_cpus, r->skel->progs.scheduler_hold_sample, HOLD_FREQ);
	return err;
}

int main(int argc, char **argv)
{
	static struct floor_run r;
	struct toggle t = { floor_off, floor_on, &r };
	int nr_cpus = libbpf_num_possible_cpus(), err = 0;
	const char *mode = argc > 1 ? argv[1] : "";
	bool all = !strcmp(mode, "--all"), waking = !strcmp(mode, "--waking"), samplers = !strcmp(mode, "--samplers");
	struct sigaction sa = { .sa_handler = on_signal };
	struct bpf_program *prog, *only;
	struct floor_bpf *skel;

	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	if (!strcmp(mode, "--helpers"))
		return helpers();
	if (!strcmp(mode, "--bound"))
		return bound(nr_cpus);
	skel = floor_bpf__open();
	if (!skel) {
		fprintf(stderr, "floor: cannot open the empty programs: %s\n", strerror(errno));
		return 1;
	}
	only = single_program(skel, mode);
	if (argc > 2 || (*mode && !all && !waking && !samplers && !only)) {
		fprintf(stderr, "usage: floor [--all | --waking | --switch | --lock-begin | --lock-end | --samplers | "
				"--bound | --helpers]\n");
		floor_bpf__destroy(skel);
		return 2;
	}
	if (only) {
		bpf_object__for_each_program(prog, skel->obj)
			bpf_program__set_autoload(prog, prog == only);
	} else if (samplers) {
		bpf_object__for_each_program(prog, skel->obj)
			bpf_program__set_autoload(prog, prog == skel->progs.scheduler_spin_sample ||
							prog == skel->progs.scheduler_hold_sample);
	} else if (!all) {
		bpf_program__set_autoload(skel->progs.scheduler_waking, waking);
		bpf_program__set_autoload(skel->progs.scheduler_hold_sample, false);
	}
	if (floor_bpf__load(skel)) {
		fprintf(stderr, "floor: cannot load the empty programs: %s\n", strerror(errno));
		floor_bpf__destroy(skel);
		return 1;
	}
	r = (struct floor_run){ .skel = skel, .spin_on = !only, .hold_on = all || samplers, .nr_cpus = nr_cpus };
	err = floor_on(&r);
	if (err) {
		fprintf(stderr, "floor: cannot attach: %s\n", strerror(-err));
	} else {
		serve_stats(skel->obj, &t);
	}
	sampler_free(&r.hold, nr_cpus);
	sampler_free(&r.spin, nr_cpus);
	floor_bpf__destroy(skel);
	return err ? 1 : 0;
}

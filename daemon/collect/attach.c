// SPDX-License-Identifier: GPL-2.0
/*
 * Attaching: the kernel-lock pair, the scheduler programs, the task iterator, and what is
 * attached only while it has something to see (sched_waking, the holder sampler, the
 * precise scans' syscall tracepoints).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "collect/collector.h"
#include "collect/collector_int.h"
#include "collect/cpuclock.h"
#include "lib/log.h"
#include "scheduler.h"
#include "scheduler.skel.h"

static int attach_prog(struct bpf_program *prog, struct bpf_link **link)
{
	int err;

	*link = bpf_program__attach(prog);
	if (!*link) {
		err = -errno;
		pr_err("attach %s: %s\n", bpf_program__name(prog), strerror(-err));
		return err;
	}
	return 0;
}

/*
 * A sampler's cpu-clock events exist only while it is on: opened and given @prog on every
 * online CPU by sampler_on(), closed by collector_sampler_off(). An on-demand sampler is not left
 * created and disabled: libbpf enables an event when it attaches a program, so the holder
 * sampler created that way sampled at 997 Hz from the start while believed off; and a
 * disabled event with the holder program on it still skewed the spin sampler's share on a
 * 2-CPU guest (TTAS spinners: +0.06 to +0.32 against `perf record -a` in the same runs;
 * with no such event, within ±0.02), by a mechanism not found.
 */
static int sampler_on(struct sampler *sm, int nr_cpus, struct bpf_program *prog, __u32 freq)
{
	int cpu, n = 0;

	if (sm->fds)
		return 0;
	sm->fds = calloc(nr_cpus, sizeof(int));
	sm->links = calloc(nr_cpus, sizeof(*sm->links));
	if (!sm->fds || !sm->links) {
		free(sm->fds);
		free(sm->links);
		sm->fds = NULL;
		sm->links = NULL;
		return -ENOMEM;
	}
	for (cpu = 0; cpu < nr_cpus; cpu++)
		sm->fds[cpu] = -1;
	for (cpu = 0; cpu < nr_cpus; cpu++) {
		sm->fds[cpu] = ls_cpu_clock_open(cpu, freq, false);
		if (sm->fds[cpu] < 0)
			continue;	/* an offline CPU */
		sm->links[cpu] = bpf_program__attach_perf_event(prog, sm->fds[cpu]);
		if (!sm->links[cpu]) {
			close(sm->fds[cpu]);
			sm->fds[cpu] = -1;
			continue;
		}
		n++;
	}
	return n ? 0 : -ENODEV;
}

static bool sampler_attached(const struct sampler *sm, int nr_cpus)
{
	int cpu;

	for (cpu = 0; sm->links && cpu < nr_cpus; cpu++)
		if (sm->links[cpu])
			return true;
	return false;
}

void collector_sampler_off(struct sampler *sm, int nr_cpus)
{
	int cpu;

	for (cpu = 0; sm->links && cpu < nr_cpus; cpu++)
		bpf_link__destroy(sm->links[cpu]);
	for (cpu = 0; sm->fds && cpu < nr_cpus; cpu++)
		if (sm->fds[cpu] >= 0)
			close(sm->fds[cpu]);
	free(sm->links);
	free(sm->fds);
	sm->links = NULL;
	sm->fds = NULL;
}

static struct bpf_program *sched_prog(const struct collector *c, int i)
{
	return sched_prog_variant(c->sskel, i, c->feat.task_from_pid);
}

/* sched_waking is on demand unless waker-min-rate is 0: see waker_on in scheduler.bpf.c. */
static bool waker_always(const struct collector *c)
{
	return !c->opts.waker_min_rate;
}

static void waker_apply(struct collector *c)
{
	bool on = c->feat.ulock && !c->paused && (waker_always(c) || c->waker_wanted || c->precise_pids);
	struct bpf_link **link = &c->slinks[SCHED_WAKING];
	int err;

	if (on == (*link != NULL))
		return;
	if (!on) {
		c->sskel->bss->waker_on = false;
		bpf_link__destroy(*link);
		*link = NULL;
		return;
	}
	if ((err = attach_prog(sched_prog(c, SCHED_WAKING), link))) {
		if (!c->waker_failed)
			pr_warn("sched_waking: cannot attach (%s): futex releasers are not named\n", strerror(-err));
		c->waker_failed = true;
		return;
	}
	c->sskel->bss->waker_on = true;
}

static void attach_sched(struct collector *c)
{
	int i, err;

	if (!c->sskel)
		return;
	for (i = 0; i < SCHED_PROGS; i++) {
		if (i == SCHED_WAKING && !c->feat.ulock)	/* it names futex releasers only */
			continue;
		if ((err = attach_prog(sched_prog(c, i), &c->slinks[i]))) {
			collector_degrade(c, "scheduler", "cannot attach (%s): user-space locks and scheduling are not traced",
				strerror(-err));
			c->feat.ulock = c->feat.sched = false;
			return;
		}
	}
	/* sched_waking was attached to prove it can be; from now on waker_apply() decides */
	if (c->feat.ulock) {
		c->sskel->bss->waker_on = true;
		waker_apply(c);
	}
	/*
	 * The holder sampler is turned on only while holders are noted (the engine decides),
	 * and not tried here: its program once attached to a cpu-clock event, even one removed
	 * at once, left the spin sampler created after it reading TTAS spinners' shares
	 * +0.06..+0.32 above `perf record -a` of the same runs for the daemon's lifetime (not
	 * so when created after the spin sampler: ±0.02). The probe's cpu-clock event says
	 * whether it can be; a failure to turn it on later is logged and retried.
	 */
	c->feat.holder_sampling = c->feat.ulock && c->opts.hold_freq && ls_probe_ok(&c->probes, LS_PROBE_PERF_EVENT);
	if (c->feat.ulock && c->opts.hold_freq && !c->feat.holder_sampling)
		collector_degrade(c, "scheduler", "no cpu-clock perf events: holder stacks are off");
	if (!c->feat.sched)
		return;
	err = ls_probe_ok(&c->probes, LS_PROBE_TASK_ITER) ? attach_prog(c->sskel->progs.dump_tasks, &c->iter_link)
							 : -EOPNOTSUPP;
	if (err) {
		collector_degrade(c, "scheduler", "no task iterator (%s): per-thread switches are off", strerror(-err));
		c->feat.sched = false;
		return;
	}
	if (!c->opts.spin_freq)
		return;
	err = sampler_on(&c->spin, c->nr_cpus, c->sskel->progs.spin_sample, c->opts.spin_freq);
	if (err)
		collector_degrade(c, "scheduler", "no cpu-clock perf events (%s): spin loops are not sampled", strerror(-err));
	c->feat.spin_sampling = !err;
}

/*
 * The kernel-lock pair, each where it is not attached yet: at start, and at a resume. The
 * end first (and a pause takes the begin off first): a wait whose begin is seen always has
 * its end seen, where the other order left the waits begun between the two attaches open
 * in their slots, to be dropped later as missed_end.
 */
static int attach_klock(struct collector *c)
{
	int i, err;

	for (i = 2; i-- > 0;)
		if (!c->links[i] && (err = attach_prog(c->progs[i], &c->links[i])))
			return err;
	return 0;
}

int collector__attach(struct collector *c)
{
	int err = attach_klock(c);

	if (!err)
		attach_sched(c);
	return err;
}

void collector__hold_sampling(struct collector *c, bool on)
{
	int err;

	c->hold_wanted = on;
	if (!c->feat.holder_sampling || c->paused || on == !!c->hold.fds)
		return;
	if (!on) {
		collector_sampler_off(&c->hold, c->nr_cpus);
		return;
	}
	err = sampler_on(&c->hold, c->nr_cpus, c->sskel->progs.hold_sample, c->opts.hold_freq);
	if (err) {	/* said once, and tried again at the next tick while holders are noted */
		collector_sampler_off(&c->hold, c->nr_cpus);
		if (!c->hold_failing)
			pr_warn("holder sampler: cannot turn on (%s); retried every second\n", strerror(-err));
	}
	c->hold_failing = err;
}

/*
 * What is attached for good at start, and taken off by a pause: the kernel-lock pair, the
 * switch program and the spin sampler. The on-demand ones (sched_waking, the holder
 * sampler) follow their own rule, which a pause overrides and a resume applies again.
 */
int collector__pause(struct collector *c)
{
	int i;

	if (c->paused)
		return 0;
	if (c->precise_pids)
		return -EBUSY;
	c->paused = true;
	for (i = 0; i < 2; i++) {
		bpf_link__destroy(c->links[i]);
		c->links[i] = NULL;
	}
	if (c->sskel) {
		bpf_link__destroy(c->slinks[SCHED_SWITCH]);
		c->slinks[SCHED_SWITCH] = NULL;
		waker_apply(c);
		collector_sampler_off(&c->hold, c->nr_cpus);
		collector_sampler_off(&c->spin, c->nr_cpus);
	}
	return 0;
}

int collector__resume(struct collector *c)
{
	int err, dropped = 0;

	if (!c->paused)
		return 0;
	/* no klock program runs (not even after a resume that failed half-way): its slots can
	 * be emptied of what the pause cut off */
	if (!c->links[0] && !c->links[1])
		dropped = collector_klock_reset(c);
	if ((err = attach_klock(c)))
		return err;
	/* what attach_sched() attached at start: nothing of it after a failure there */
	if (c->sskel && (c->feat.ulock || c->feat.sched)) {
		if (!c->slinks[SCHED_SWITCH] && (err = attach_prog(sched_prog(c, SCHED_SWITCH), &c->slinks[SCHED_SWITCH])))
			return err;
		if (c->feat.spin_sampling && (err = sampler_on(&c->spin, c->nr_cpus, c->sskel->progs.spin_sample,
							       c->opts.spin_freq)))
			return err;
	}
	c->paused = false;
	/* the on-demand hooks as the engine last asked, not as the pause left them: the holder
	 * sampler would otherwise wait for the engine's next second (a bench's slices of 50 ms
	 * would run without it) */
	if (c->sskel) {
		waker_apply(c);
		collector__hold_sampling(c, c->hold_wanted);
	}
	return dropped;
}

void collector__name_releasers(struct collector *c, bool on)
{
	if (!c->sskel)
		return;
	c->waker_wanted = on;
	waker_apply(c);
	/* a new second of futex waits for the program to count while it is off */
	c->sskel->bss->waker_blocks = 0;
}

bool collector__naming_releasers(const struct collector *c)
{
	return c->sskel && c->slinks[SCHED_WAKING];
}

static struct bpf_program *precise_prog(struct collector *c, int i)
{
	struct bpf_program *progs[PRECISE_PROGS] = {
		c->sskel->progs.sched_enter_futex, c->sskel->progs.sched_exit_futex,
		c->sskel->progs.sched_enter_futex_waitv, c->sskel->progs.sched_exit_futex_waitv,
	};

	return progs[i];
}

static void precise_detach(struct collector *c)
{
	int i;

	for (i = 0; i < PRECISE_PROGS; i++) {
		bpf_link__destroy(c->precise_links[i]);
		c->precise_links[i] = NULL;
	}
}

int collector__precise_add(struct collector *c, __u32 pid)
{
	__u8 one = 1;
	int i, err;

	if (!c->feat.precise)
		return -EOPNOTSUPP;
	if (bpf_map_update_elem(bpf_map__fd(c->sskel->maps.precise_tgids), &pid, &one, BPF_NOEXIST))
		return errno == EEXIST ? -EBUSY : -errno;
	if (c->precise_pids++)
		return 0;
	for (i = 0; i < PRECISE_PROGS; i++) {
		if ((err = attach_prog(precise_prog(c, i), &c->precise_links[i]))) {
			precise_detach(c);
			collector__precise_del(c, pid);
			return err;
		}
	}
	/* a scan names every releaser, at any rate */
	waker_apply(c);
	return 0;
}

void collector__precise_del(struct collector *c, __u32 pid)
{
	if (!c->feat.precise ||
	    bpf_map_delete_elem(bpf_map__fd(c->sskel->maps.precise_tgids), &pid))
		return;
	/* with no process left, every syscall leaves the tracing slow path again */
	if (--c->precise_pids == 0) {
		precise_detach(c);
		waker_apply(c);
	}
}

static void prog_info(const struct bpf_program *prog, const char *source, bool attached,
		      bool on_demand, struct collector_prog *out)
{
	struct bpf_prog_info info = {};
	__u32 len = sizeof(info);

	memset(out, 0, sizeof(*out));
	out->name = bpf_program__name(prog);
	out->source = source;
	out->hook = bpf_program__section_name(prog);
	out->attached = attached;
	out->on_demand = on_demand;
	if (!bpf_obj_get_info_by_fd(bpf_program__fd(prog), &info, &len)) {
		out->run_time_ns = info.run_time_ns;
		out->run_cnt = info.run_cnt;
		out->recursion_misses = info.recursion_misses;
	}
}

int collector__progs(const struct collector *c, struct collector_prog *out, int max)
{
	int i, n = 0;

	for (i = 0; i < 2 && n < max; i++)
		prog_info(c->progs[i], "klock", c->links[i] != NULL, false, &out[n++]);
	for (i = 0; c->sskel && i < SCHED_PROGS && n < max; i++) {
		if (i == SCHED_WAKING && !c->feat.ulock)
			continue;
		prog_info(sched_prog(c, i), "scheduler", c->slinks[i] != NULL,
			  i == SCHED_WAKING && !waker_always(c), &out[n++]);
	}
	/* its cpu-clock events exist only while holders are noted */
	if (c->feat.ulock && n < max)
		prog_info(c->sskel->progs.hold_sample, "scheduler",
			  sampler_attached(&c->hold, c->nr_cpus), true, &out[n++]);
	if (c->feat.sched && n < max)
		prog_info(c->sskel->progs.spin_sample, "scheduler", sampler_attached(&c->spin, c->nr_cpus),
			  false, &out[n++]);
	for (i = 0; c->feat.precise && i < PRECISE_PROGS && n < max; i++)
		prog_info(precise_prog((struct collector *)c, i), "scheduler", c->precise_links[i] != NULL,
			  true, &out[n++]);
	return n;
}

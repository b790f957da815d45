// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include "collect/cpuclock.h"
#include "collect/probe.h"

#define VMLINUX_BTF "/sys/kernel/btf/vmlinux"

static const struct ls_probe templates[LS_PROBE_MAX] = {
	[LS_PROBE_BPF] = { "bpf", .required = true, .needs = "everything" },
	[LS_PROBE_BTF] = { "btf", .needs = "user locks, scheduling, spin and owner stacks (classic tracepoints only)" },
	[LS_PROBE_LOCK_TP] = { "lock_tracepoints", .required = true, .needs = "kernel lock contention" },
	[LS_PROBE_TP_BTF] = { "tp_btf", .needs = "user locks, scheduling and spin (classic lock tracepoints instead)" },
	[LS_PROBE_TASK_FROM_PID] = { "task_from_pid", .needs = "owner stacks (owners are still named)" },
	[LS_PROBE_PERF_EVENT] = { "perf_event", .needs = "holder stacks and spin-loop sampling" },
	[LS_PROBE_SYSCALL_TP] = { "syscall_tracepoints", .needs = "precise scans (scan --precise)" },
	[LS_PROBE_TASK_ITER] = { "task_iter", .needs = "per-thread switches and times (lockscope threads)" },
	[LS_PROBE_KALLSYMS] = { "kallsyms", .needs = "kernel symbols (frames and locks shown as addresses)" },
};

static void __attribute__((format(printf, 3, 4)))
set(struct ls_probes *p, enum ls_probe_id id, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(p->p[id].detail, sizeof(p->p[id].detail), fmt, ap);
	va_end(ap);
}

#define TRACEFS "/sys/kernel/tracing"

/*
 * Mounts tracefs where the kernel provides its mount point, when nothing mounted it: boot
 * systems that are not systemd (containers, minimal images) may not, and a classic
 * tracepoint is attached by the id it lists. perf mounts it the same way. Needs
 * CAP_SYS_ADMIN; without it the probe says what to run.
 */
static int tracefs_mount(void)
{
	if (!access(TRACEFS "/events", F_OK))
		return 0;
	if (errno != ENOENT)
		return -errno;		/* mounted, but not for us to read */
	if (access(TRACEFS, F_OK))
		return -ENOENT;		/* no tracefs in this kernel (CONFIG_TRACING) */
	return mount("nodev", TRACEFS, "tracefs", 0, NULL) ? -errno : 0;
}

bool ls_tracepoint_exists(const char *category, const char *name)
{
	static const char *const roots[] = { TRACEFS, "/sys/kernel/debug/tracing" };
	char path[256];
	size_t i;

	for (i = 0; i < sizeof(roots) / sizeof(roots[0]); i++) {
		snprintf(path, sizeof(path), "%s/events/%s/%s/id", roots[i], category, name);
		if (!access(path, F_OK))
			return true;
	}
	return false;
}

static void probe_bpf(struct ls_probes *p)
{
	int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "ls_probe", sizeof(int), sizeof(int), 1, NULL);

	p->p[LS_PROBE_BPF].ok = fd >= 0;
	if (fd >= 0) {
		close(fd);
		set(p, LS_PROBE_BPF, "bpf() allowed");
	} else {
		set(p, LS_PROBE_BPF, "bpf(): %s; run as root or with CAP_BPF and CAP_PERFMON", strerror(errno));
	}
}

/* The BTF types name the kernel's features: a tracepoint's btf_trace_ typedef, a kfunc. */
static void probe_btf(struct ls_probes *p)
{
	struct btf *btf = btf__parse(VMLINUX_BTF, NULL);

	if (!btf) {
		set(p, LS_PROBE_BTF, "%s: %s (CONFIG_DEBUG_INFO_BTF)", VMLINUX_BTF, strerror(errno));
		set(p, LS_PROBE_TP_BTF, "no kernel BTF");
		set(p, LS_PROBE_TASK_FROM_PID, "no kernel BTF");
		set(p, LS_PROBE_TASK_ITER, "no kernel BTF");
		return;
	}
	p->p[LS_PROBE_BTF].ok = true;
	set(p, LS_PROBE_BTF, "%s", VMLINUX_BTF);
	p->p[LS_PROBE_TP_BTF].ok = btf__find_by_name_kind(btf, "btf_trace_contention_begin", BTF_KIND_TYPEDEF) > 0;
	set(p, LS_PROBE_TP_BTF, p->p[LS_PROBE_TP_BTF].ok ? "btf_trace_contention_begin" :
	    "no btf_trace_contention_begin in the kernel's BTF");
	p->p[LS_PROBE_TASK_FROM_PID].ok = btf__find_by_name_kind(btf, "bpf_task_from_pid", BTF_KIND_FUNC) > 0;
	set(p, LS_PROBE_TASK_FROM_PID, p->p[LS_PROBE_TASK_FROM_PID].ok ? "bpf_task_from_pid kfunc" :
	    "no bpf_task_from_pid kfunc (Linux 6.2+)");
	p->p[LS_PROBE_TASK_ITER].ok = btf__find_by_name_kind(btf, "bpf_iter__task", BTF_KIND_STRUCT) > 0;
	set(p, LS_PROBE_TASK_ITER, p->p[LS_PROBE_TASK_ITER].ok ? "iter/task" :
	    "no task iterator (bpf_iter__task, Linux 5.8+)");
	/* tp_btf needs no tracefs: the BTF type is the tracepoint's presence */
	if (p->p[LS_PROBE_TP_BTF].ok) {
		p->p[LS_PROBE_LOCK_TP].ok = true;
		set(p, LS_PROBE_LOCK_TP, "lock:contention_begin/end (BTF)");
	}
	btf__free(btf);
}

static void probe_tracepoints(struct ls_probes *p)
{
	int mounted = tracefs_mount();

	if (!p->p[LS_PROBE_LOCK_TP].ok) {
		p->p[LS_PROBE_LOCK_TP].ok = ls_tracepoint_exists("lock", "contention_begin") &&
					    ls_tracepoint_exists("lock", "contention_end");
		set(p, LS_PROBE_LOCK_TP, p->p[LS_PROBE_LOCK_TP].ok ? "lock:contention_begin/end (tracefs)" :
		    "no lock:contention_begin/end (Linux 5.19+; or mount tracefs on /sys/kernel/tracing)");
	}
	p->p[LS_PROBE_SYSCALL_TP].ok = ls_tracepoint_exists("syscalls", "sys_enter_futex") &&
				       ls_tracepoint_exists("syscalls", "sys_enter_futex_waitv");
	if (p->p[LS_PROBE_SYSCALL_TP].ok)
		set(p, LS_PROBE_SYSCALL_TP, "syscalls:sys_enter_futex, sys_enter_futex_waitv");
	else if (mounted == -EPERM)
		set(p, LS_PROBE_SYSCALL_TP, "tracefs is not mounted and mounting it needs CAP_SYS_ADMIN: "
		    "mount -t tracefs nodev " TRACEFS);
	else if (mounted && mounted != -ENOENT)
		set(p, LS_PROBE_SYSCALL_TP, TRACEFS ": %s (run as root)", strerror(-mounted));
	else
		set(p, LS_PROBE_SYSCALL_TP, "no syscalls:sys_enter_futex(_waitv) (CONFIG_FTRACE_SYSCALLS)");
}

static void probe_perf_event(struct ls_probes *p)
{
	int fd = ls_cpu_clock_open(0, 1, true);	/* what the samplers open, on CPU 0 */

	p->p[LS_PROBE_PERF_EVENT].ok = fd >= 0;
	if (fd >= 0) {
		close(fd);
		set(p, LS_PROBE_PERF_EVENT, "cpu-clock on every CPU");
	} else {
		set(p, LS_PROBE_PERF_EVENT, "perf_event_open(cpu-clock, all tasks): %s (CAP_PERFMON, "
		    "kernel.perf_event_paranoid)", strerror(errno));
	}
}

/* kptr_restrict and a missing CAP_SYSLOG show every address as 0. */
static void probe_kallsyms(struct ls_probes *p)
{
	FILE *f = fopen("/proc/kallsyms", "re");
	uint64_t addr = 0;
	char line[256];
	int i;

	if (!f) {
		set(p, LS_PROBE_KALLSYMS, "/proc/kallsyms: %s", strerror(errno));
		return;
	}
	for (i = 0; i < 16 && !addr && fgets(line, sizeof(line), f); i++)
		sscanf(line, "%" SCNx64, &addr);
	fclose(f);
	p->p[LS_PROBE_KALLSYMS].ok = addr != 0;
	set(p, LS_PROBE_KALLSYMS, addr ? "/proc/kallsyms with addresses" :
	    "/proc/kallsyms shows no addresses (kernel.kptr_restrict; CAP_SYSLOG)");
}

/* Whether struct @type of @btf has a member @name. */
static bool btf_has_member(const struct btf *btf, const char *type, const char *name)
{
	int id = btf__find_by_name_kind(btf, type, BTF_KIND_STRUCT);
	const struct btf_member *m;
	const struct btf_type *t;
	int i;

	if (id <= 0)
		return false;
	t = btf__type_by_id(btf, id);
	for (i = 0, m = btf_members(t); i < btf_vlen(t); i++, m++)
		if (!strcmp(btf__name_by_offset(btf, m->name_off), name))
			return true;
	return false;
}

/*
 * sched_clock is one clock on every CPU, and a task leads to its run queue's copy of it
 * (group scheduling: se.cfs_rq->rq). On x86 sched_clock is the TSC's, and the kernel
 * marks it unstable when it marks the TSC unstable, which then stops being the
 * clocksource; other architectures have one sched_clock by construction (only x86 selects
 * HAVE_UNSTABLE_SCHED_CLOCK among those lockscope builds for).
 */
bool ls_sched_clock_global(void)
{
	struct btf *btf = btf__parse(VMLINUX_BTF, NULL);
	bool path;

	if (!btf)
		return false;
	path = btf_has_member(btf, "sched_entity", "cfs_rq") && btf_has_member(btf, "cfs_rq", "rq");
	btf__free(btf);
	if (!path)
		return false;
#if defined(__x86_64__) || defined(__i386__)
	{
		FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "re");
		char cs[32] = "";

		if (!f)
			return false;
		if (!fgets(cs, sizeof(cs), f))
			cs[0] = 0;
		fclose(f);
		return !strcmp(cs, "tsc\n");
	}
#else
	return true;
#endif
}

void ls_probes_run(struct ls_probes *out)
{
	memcpy(out->p, templates, sizeof(templates));
	probe_bpf(out);
	probe_btf(out);
	probe_tracepoints(out);
	probe_perf_event(out);
	probe_kallsyms(out);
}

int ls_probes_missing(const struct ls_probes *p, bool required_only)
{
	int i, n = 0;

	for (i = 0; i < LS_PROBE_MAX; i++)
		if (!p->p[i].ok && (p->p[i].required || !required_only))
			n++;
	return n;
}

void ls_probes_print(const struct ls_probes *p, FILE *f)
{
	int i;

	for (i = 0; i < LS_PROBE_MAX; i++) {
		const struct ls_probe *pr = &p->p[i];

		if (pr->ok)
			fprintf(f, "%-20s ok       %s\n", pr->name, pr->detail);
		else
			fprintf(f, "%-20s missing  %s; off: %s\n", pr->name, pr->detail, pr->needs);
	}
}

cJSON *ls_probes_json(const struct ls_probes *p)
{
	cJSON *arr = cJSON_CreateArray();
	int i;

	for (i = 0; i < LS_PROBE_MAX; i++) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddStringToObject(o, "name", p->p[i].name);
		cJSON_AddBoolToObject(o, "ok", p->p[i].ok);
		cJSON_AddBoolToObject(o, "required", p->p[i].required);
		cJSON_AddStringToObject(o, "detail", p->p[i].detail);
		if (!p->p[i].ok)
			cJSON_AddStringToObject(o, "disables", p->p[i].needs);
		cJSON_AddItemToArray(arr, o);
	}
	return arr;
}

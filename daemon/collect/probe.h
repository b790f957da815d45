/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What this kernel and these privileges allow, probed once at start: each feature found
 * or missing with a one-line reason and what goes without it. The collector turns off only
 * what a missing feature needs; `lockscoped --check` prints the table, `--strict` makes
 * any missing feature fatal, `status` shows it.
 */
#ifndef __LS_PROBE_H
#define __LS_PROBE_H

#include <stdbool.h>
#include <stdio.h>
#include <cjson/cJSON.h>

enum ls_probe_id {
	LS_PROBE_BPF,		/* BPF maps and programs may be created */
	LS_PROBE_BTF,		/* /sys/kernel/btf/vmlinux: CO-RE, tp_btf */
	LS_PROBE_LOCK_TP,	/* lock:contention_begin/end (5.19+) */
	LS_PROBE_TP_BTF,	/* BTF-enabled lock tracepoints */
	LS_PROBE_TASK_FROM_PID,	/* bpf_task_from_pid kfunc (6.2+): owner stacks */
	LS_PROBE_PERF_EVENT,	/* cpu-clock perf events: holder and spin sampling */
	LS_PROBE_SYSCALL_TP,	/* syscalls:sys_enter_futex(_waitv): precise scans */
	LS_PROBE_TASK_ITER,	/* iter/task (5.8+): per-thread counters read from the tasks */
	LS_PROBE_KALLSYMS,	/* /proc/kallsyms with addresses: kernel symbols */
	LS_PROBE_MAX,
};

struct ls_probe {
	const char *name;
	bool ok;
	bool required;		/* lockscoped cannot run without it */
	const char *needs;	/* what goes without it */
	char detail[192];	/* found: what; missing: why */
};

struct ls_probes {
	struct ls_probe p[LS_PROBE_MAX];
};

void ls_probes_run(struct ls_probes *out);
static inline bool ls_probe_ok(const struct ls_probes *p, enum ls_probe_id id)
{
	return p->p[id].ok;
}
/* Missing features: all of them, or (@required_only) those lockscoped cannot run without. */
int ls_probes_missing(const struct ls_probes *p, bool required_only);
/* The `--check` table; one line per feature. */
void ls_probes_print(const struct ls_probes *p, FILE *f);
cJSON *ls_probes_json(const struct ls_probes *p);
bool ls_tracepoint_exists(const char *category, const char *name);
/* Whether BPF programs may time switches by the run queue's clock (sched_clock, one for all CPUs). */
bool ls_sched_clock_global(void);

#endif

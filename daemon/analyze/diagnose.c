// SPDX-License-Identifier: GPL-2.0
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/diagnose.h"
#include "lib/jsonget.h"
#include "lib/vec.h"

#define NSEC_PER_USEC 1000.0
#define NSEC_PER_SEC 1e9
/* A wait this many times the average is in the tail (rounded up to a histogram bucket). */
#define TAIL_OF_AVG 16

void diag_thresholds__init(struct diag_thresholds *th)
{
	th->min_wait_pct = DIAG_DEF_MIN_WAIT_PCT;
	th->contended_rate = DIAG_DEF_CONTENDED_RATE;
	th->avg_wait_us = DIAG_DEF_AVG_WAIT_US;
	th->jitter_factor = DIAG_DEF_JITTER_FACTOR;
	th->jitter_min_us = DIAG_DEF_JITTER_MIN_US;
	th->jitter_tail_pct = DIAG_DEF_JITTER_TAIL_PCT;
	th->futex_wake_pct = DIAG_DEF_FUTEX_WAKE_PCT;
	th->work_min_pct = DIAG_DEF_WORK_MIN_PCT;
}

/* ---- what holders do inside the critical section ---- */

/*
 * Work that does not belong inside a critical section, by the function a holder sample
 * was in (seed 004's examples: I/O, allocation, formatting, logging). Names are matched
 * after normalize(): glibc's internal prefixes and 64-bit suffixes stripped.
 */
static const struct work_kind {
	const char *name;
	const char *fix;
	const char *const *funcs;	/* exact names; a trailing '*' matches a prefix */
} work_kinds[] = {
	{ "io", "do the I/O after unlocking (copy what it needs under the lock)",
	  (const char *const[]){ "read", "write", "pread", "pwrite", "readv", "writev", "preadv",
				 "pwritev", "send", "sendto", "sendmsg", "recv", "recvfrom", "recvmsg",
				 "fsync", "fdatasync", "sync_file_range", "open", "openat", "close",
				 "stat", "fstat", "lstat", "fstatat", "statx", "ioctl", "poll", "ppoll",
				 "select", "epoll_wait", "connect", "accept", "accept4", "sendfile",
				 "splice", "copy_file_range", "lseek", "ftruncate", "fallocate", NULL } },
	{ "allocation", "allocate before taking the lock, or use a per-thread pool",
	  (const char *const[]){ "malloc", "calloc", "realloc", "free", "cfree", "memalign",
				 "posix_memalign", "aligned_alloc", "int_malloc", "int_free", "mmap",
				 "munmap", "mremap", "brk", "sbrk", "operator new*", "operator delete*",
				 "je_*", "tc_*", NULL } },
	{ "formatting", "format outside the lock (seed 004: moving the log line out tripled throughput)",
	  (const char *const[]){ "printf", "fprintf", "sprintf", "snprintf", "vprintf", "vfprintf*",
				 "vsprintf*", "vsnprintf*", "asprintf", "vasprintf", "dprintf",
				 "strftime*", "itoa_word", "printf_fp*", "IO_default_xsputn",
				 "IO_padn", "fmt::*", "std::fmt::*", "core::fmt::*", NULL } },
	{ "logging", "log after unlocking, or hand lines to a logging thread",
	  (const char *const[]){ "syslog", "vsyslog", "fwrite", "fputs", "fflush", "puts", "putc",
				 "fputc", "IO_file_write*", "IO_new_file_write*", "IO_do_write*",
				 "log_*", "spdlog::*", "google::LogMessage*", NULL } },
	{ "sleeping", "never sleep holding a lock: wait on a condition variable instead",
	  (const char *const[]){ "nanosleep", "clock_nanosleep", "usleep", "sleep", "sched_yield",
				 "pause", NULL } },
};

#define NR_WORK_KINDS (sizeof(work_kinds) / sizeof(work_kinds[0]))

/* "__GI___libc_pwrite64" -> "pwrite": the name under glibc's aliases. */
static void normalize(const char *sym, char *out, size_t len)
{
	static const char *const prefixes[] = { "__GI_", "__libc_", "__new_", "__IO_", "_IO_" };
	size_t i, n;
	bool again = true;

	while (again) {
		again = false;
		for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
			n = strlen(prefixes[i]);
			if (!strncmp(sym, prefixes[i], n) && sym[n]) {
				/* keep _IO_'s meaning: "IO_default_xsputn" */
				sym += !strcmp(prefixes[i], "_IO_") ? 1 : n;
				again = strcmp(prefixes[i], "_IO_");
				break;
			}
		}
		while (*sym == '_' && sym[1]) {
			sym++;
			again = true;
		}
	}
	snprintf(out, len, "%s", sym);
	n = strlen(out);
	if (n > 2 && !strcmp(out + n - 2, "64"))
		out[n - 2] = 0;
}

static bool name_matches(const char *name, const char *pattern)
{
	size_t n = strlen(pattern);

	if (n && pattern[n - 1] == '*')
		return !strncmp(name, pattern, n - 1);
	return !strcmp(name, pattern);
}

/* The kind of work at the leafmost frame that names one; *at its index. -1: none. */
static int stack_work(const cJSON *stack, int *at)
{
	const cJSON *fr;
	char name[256];
	size_t k, j;
	int i = 0;

	cJSON_ArrayForEach(fr, stack) {
		const char *sym = ls_json_str(fr, "sym");

		if (sym) {
			normalize(sym, name, sizeof(name));
			for (k = 0; k < NR_WORK_KINDS; k++)
				for (j = 0; work_kinds[k].funcs[j]; j++)
					if (name_matches(name, work_kinds[k].funcs[j])) {
						*at = i;
						return k;
					}
		}
		i++;
	}
	return -1;
}

/* The first frame past @at in another module: the code that called into the work. */
static const char *work_caller(const cJSON *stack, int at)
{
	const cJSON *work = cJSON_GetArrayItem(stack, at), *fr;
	const char *mod = ls_json_str(work, "module");
	int i = 0;

	cJSON_ArrayForEach(fr, stack) {
		if (i++ <= at)
			continue;
		if (ls_json_str(fr, "sym") && (!mod || !ls_json_str(fr, "module") || strcmp(ls_json_str(fr, "module"), mod)))
			return ls_json_str(fr, "sym");
	}
	return NULL;
}

struct work_seen {
	int kind;
	double share;		/* of the holder samples */
	const cJSON *pick;	/* the kind's most sampled holder stack */
	int at;			/* and the frame in it that named the kind */
};

static int cmp_work(const void *a, const void *b)
{
	double x = ((const struct work_seen *)a)->share, y = ((const struct work_seen *)b)->share;

	return x < y ? 1 : x > y ? -1 : 0;
}

static cJSON *work_json(const struct work_seen *ws)
{
	const cJSON *stack = ls_json_get(ws->pick, "stack");
	const char *caller = work_caller(stack, ws->at);
	cJSON *w = cJSON_CreateObject();

	cJSON_AddStringToObject(w, "kind", work_kinds[ws->kind].name);
	cJSON_AddNumberToObject(w, "share", ws->share);
	cJSON_AddStringToObject(w, "function", ls_json_str(cJSON_GetArrayItem(stack, ws->at), "sym"));
	if (caller)
		cJSON_AddStringToObject(w, "called_from", caller);
	else
		cJSON_AddNullToObject(w, "called_from");
	cJSON_AddStringToObject(w, "fix", work_kinds[ws->kind].fix);
	cJSON_AddItemToObject(w, "stack", cJSON_Duplicate(stack, true));
	return w;
}

/*
 * What the holders of @row's lock were doing while others waited, by kind of work, for
 * kinds with at least work_min_pct of the samples: [{kind, share, function, called_from,
 * fix, stack}], heaviest first.
 */
static cJSON *holder_work(const cJSON *row, const struct diag_thresholds *th)
{
	struct work_seen seen[NR_WORK_KINDS] = {};
	cJSON *arr = cJSON_CreateArray();
	const cJSON *h;
	size_t k;

	for (k = 0; k < NR_WORK_KINDS; k++)
		seen[k].kind = k;
	cJSON_ArrayForEach(h, ls_json_get(row, "holder_stacks")) {
		double share = ls_json_num(h, "share");
		int at, kind = stack_work(ls_json_get(h, "stack"), &at);

		if (kind < 0)
			continue;
		if (!seen[kind].pick || share > ls_json_num(seen[kind].pick, "share")) {
			seen[kind].pick = h;
			seen[kind].at = at;
		}
		seen[kind].share += share;
	}
	qsort(seen, NR_WORK_KINDS, sizeof(seen[0]), cmp_work);
	for (k = 0; k < NR_WORK_KINDS && seen[k].pick && seen[k].share * 100 >= th->work_min_pct; k++)
		cJSON_AddItemToArray(arr, work_json(&seen[k]));
	return arr;
}

/* ---- lock rules ---- */

static cJSON *finding_new(const char *rule, const char *title, double wasted_ns)
{
	cJSON *f = cJSON_CreateObject();

	cJSON_AddStringToObject(f, "rule", rule);
	cJSON_AddStringToObject(f, "title", title);
	cJSON_AddNumberToObject(f, "wasted_ns", llround(wasted_ns));
	return f;
}

/* The parts of a lock row that name it: kind, type, lock, pid. */
static void add_lock(cJSON *f, const cJSON *row)
{
	static const char *const fields[] = { "kind", "type", "lock", "pid", "comm" };
	size_t i;

	for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		const cJSON *v = ls_json_get(row, fields[i]);

		cJSON_AddItemToObject(f, fields[i], v ? cJSON_Duplicate(v, true) : cJSON_CreateNull());
	}
}

/* The figures of a lock row every lock finding shows. */
static cJSON *lock_evidence(const cJSON *row, double span_s)
{
	cJSON *ev = cJSON_CreateObject();

	cJSON_AddNumberToObject(ev, "contended", ls_json_num(row, "contended"));
	cJSON_AddNumberToObject(ev, "contended_per_s", ls_json_num(row, "contended") / span_s);
	cJSON_AddNumberToObject(ev, "total_wait_ns", ls_json_num(row, "total_wait_ns"));
	cJSON_AddNumberToObject(ev, "avg_wait_ns", ls_json_num(row, "avg_wait_ns"));
	cJSON_AddNumberToObject(ev, "max_wait_ns", ls_json_num(row, "max_wait_ns"));
	/* waiting threads on average: seconds of waiting per second */
	cJSON_AddNumberToObject(ev, "waiters_avg", ls_json_num(row, "total_wait_ns") / NSEC_PER_SEC / span_s);
	cJSON_AddNumberToObject(ev, "span_s", span_s);
	if (ls_json_get(row, "holder_preempted"))
		cJSON_AddItemToObject(ev, "holder_preempted", cJSON_Duplicate(ls_json_get(row, "holder_preempted"), true));
	if (ls_json_get(row, "owner"))
		cJSON_AddItemToObject(ev, "owner", cJSON_Duplicate(ls_json_get(row, "owner"), true));
	if (ls_json_get(row, "releaser"))
		cJSON_AddItemToObject(ev, "releaser", cJSON_Duplicate(ls_json_get(row, "releaser"), true));
	return ev;
}

/* The share of @row's wait time in waits of at least @from_ns (histogram buckets, midpoints). */
static double tail_share(const cJSON *row, double from_ns)
{
	const cJSON *b;
	double tail = 0, all = 0, lo;
	int i = 0;

	cJSON_ArrayForEach(b, ls_json_get(row, "hist")) {
		/* bucket i holds [2^i, 2^(i+1)) ns: 1.5 * 2^i stands for its waits */
		lo = ldexp(1, i);
		all += b->valuedouble * 1.5 * lo;
		if (lo >= from_ns)
			tail += b->valuedouble * 1.5 * lo;
		i++;
	}
	return all > 0 ? tail / all : 0;
}

static void add_work(cJSON *f, cJSON *ev, cJSON *work, const char *fix)
{
	char buf[512];
	const cJSON *w = cJSON_GetArrayItem(work, 0);

	cJSON_AddItemToObject(ev, "holder_work", work);
	if (w)
		snprintf(buf, sizeof(buf), "%s; first: %s (%.0f%% of holder samples in %s%s%s)", fix,
			 ls_json_str(w, "fix"), ls_json_num(w, "share") * 100, ls_json_str(w, "function"),
			 ls_json_str(w, "called_from") ? " from " : "", ls_json_str(w, "called_from") ?: "");
	else
		snprintf(buf, sizeof(buf), "%s", fix);
	cJSON_AddStringToObject(f, "fix", buf);
}

static void wait_jitter(const cJSON *row, const struct diag_input *in, cJSON *out)
{
	const struct diag_thresholds *th = in->th;
	double total = ls_json_num(row, "total_wait_ns"), avg = ls_json_num(row, "avg_wait_ns"), max = ls_json_num(row, "max_wait_ns");
	double share;
	char title[256];
	cJSON *f, *ev;

	if (!ls_json_num(row, "contended") || max < th->jitter_factor * avg || max < th->jitter_min_us * NSEC_PER_USEC)
		return;
	share = tail_share(row, TAIL_OF_AVG * avg);
	if (share * 100 < th->jitter_tail_pct)
		return;
	snprintf(title, sizeof(title), "max wait %.1f ms is %.0fx the average: a long tail", max / 1e6, max / avg);
	f = finding_new("wait_jitter", title, total * share);
	add_lock(f, row);
	ev = lock_evidence(row, in->span_s);
	cJSON_AddNumberToObject(ev, "tail_share", share);
	cJSON_AddNumberToObject(ev, "tail_from_ns", TAIL_OF_AVG * avg);
	cJSON_AddItemToObject(f, "evidence", ev);
	cJSON_AddStringToObject(f, "fix", ls_json_num(ls_json_get(row, "holder_preempted"), "count") > 0 ?
		"holders lost their CPU while others waited (holder_preempted): priority inversion "
		"or an oversubscribed CPU; do not hold locks in low-priority (nice, SCHED_IDLE) threads, "
		"use PI mutexes for real-time ones, keep runnable threads <= CPUs" :
		"rare waits far longer than the rest: scheduling jitter or a rare slow path inside "
		"the critical section; check the owner's stack and CPU contention");
	cJSON_AddItemToArray(out, f);
}

static void lock_rules(const cJSON *row, const struct diag_input *in, cJSON *out)
{
	const struct diag_thresholds *th = in->th;
	double total = ls_json_num(row, "total_wait_ns"), rate = ls_json_num(row, "contended") / in->span_s;
	double avg = ls_json_num(row, "avg_wait_ns");
	bool many = rate >= th->contended_rate, slow = avg >= th->avg_wait_us * NSEC_PER_USEC;
	bool user = ls_json_str(row, "kind") && !strcmp(ls_json_str(row, "kind"), "user");
	const char *rule, *fix;
	char title[256];
	cJSON *f, *ev, *work;

	/* only locks whose waits cost a share of a thread's time */
	if (total / NSEC_PER_SEC / in->span_s * 100 < th->min_wait_pct)
		return;
	wait_jitter(row, in, out);
	if (!many && !slow)
		return;
	work = holder_work(row, th);
	if (many && slow) {
		rule = "redesign";
		fix = "the lock is a bottleneck on both counts: redesign the data flow "
		      "(a lock-free queue, per-thread or sharded state)";
		snprintf(title, sizeof(title), "contended %.0f/s and %.0f us per wait: a serial bottleneck",
			 rate, avg / NSEC_PER_USEC);
	} else if (many) {
		rule = "coarse_lock";
		fix = "the lock is too coarse: split it (one per shard of the data) or go "
		      "lock-free (atomics, per-thread state)";
		snprintf(title, sizeof(title), "contended %.0f/s, %.1f us per wait: many short waits on one lock",
			 rate, avg / NSEC_PER_USEC);
	} else if (user && !cJSON_GetArraySize(work)) {
		/*
		 * Long, rare waits while the holders' samples show no slow work: the waits are
		 * the CPU's (woken waiters queue for it), which wait_jitter and holder_preempted
		 * speak to.
		 */
		cJSON_Delete(work);
		return;
	} else {
		rule = "blocking_work";
		fix = "the critical section blocks or does slow work: move it out of the lock";
		snprintf(title, sizeof(title), "%.0f us per wait at only %.0f/s: the holder blocks or works "
			 "long inside the critical section", avg / NSEC_PER_USEC, rate);
	}
	f = finding_new(rule, title, total);
	add_lock(f, row);
	ev = lock_evidence(row, in->span_s);
	cJSON_AddItemToObject(f, "evidence", ev);
	add_work(f, ev, work, fix);
	cJSON_AddItemToArray(out, f);
}

/* ---- futex hash-bucket contention ---- */

/* A scheduler function: the waits below it are on a runqueue lock, whoever called schedule(). */
static bool is_sched_frame(const char *sym)
{
	return sym && (!strncmp(sym, "schedule", 8) || !strncmp(sym, "__schedule", 10) ||
		       !strncmp(sym, "preempt_schedule", 16));
}

/*
 * The waits of futex(2) itself: the kernel's `caller` (the first frame above the lock and
 * scheduler primitives, as perf names it) is futex code, and the lock is a futex hash
 * bucket's, taken by futex_wake, futex_wait_setup, futex_q_lock and the like. A futex
 * waiter switching out (futex_do_wait -> schedule) waits for its runqueue's lock with the
 * same caller: its sampled stack shows the scheduler below the caller, and it is not counted.
 */
static bool is_futex_bucket_wait(const cJSON *caller)
{
	const char *fn = ls_json_str(caller, "caller");
	const cJSON *frame;
	size_t len;

	if (!fn || (strncmp(fn, "futex_", 6) && strncmp(fn, "__futex_", 8)))
		return false;
	len = strcspn(fn, "+");
	cJSON_ArrayForEach(frame, ls_json_get(caller, "stack")) {
		const char *sym = ls_json_str(frame, "sym");

		if (sym && strlen(sym) == len && !strncmp(sym, fn, len))
			break;
		if (is_sched_frame(sym))
			return false;
	}
	return true;
}

static bool is_futex_lock_type(const char *type)
{
	return type && !strncmp(type, "futex", 5) && strcmp(type, "futex:condvar");
}

static bool same_lock(const cJSON *a, const cJSON *b)
{
	const char *x = ls_json_str(ls_json_get(a, "lock"), "addr"), *y = ls_json_str(ls_json_get(b, "lock"), "addr");

	return x && y && !strcmp(x, y) && ls_json_num(a, "pid") == ls_json_num(b, "pid");
}

/*
 * Fires when the futex hash-bucket locks cost a process a thread's share and a large part
 * of its futex waiting. Returns the bucket lock it names (a caller row) so that the lock rules do
 * not call the same lock `coarse_lock` too, or NULL.
 */
static const cJSON *futex_rule(const struct diag_input *in, cJSON *out)
{
	double kernel_ns = 0, futex_ns = 0, count = 0, share;
	const cJSON *r, *top = NULL;
	char title[256];
	cJSON *f, *ev, *callers;

	/* the process whose waits in futex code are the heaviest (callers come heaviest first) */
	cJSON_ArrayForEach(r, in->kernel_callers)
		if (is_futex_bucket_wait(r) && (top = r))
			break;
	if (!top)
		return NULL;
	cJSON_ArrayForEach(r, in->lock_rows)
		if (is_futex_lock_type(ls_json_str(r, "type")) && ls_json_num(r, "pid") == ls_json_num(top, "pid"))
			futex_ns += ls_json_num(r, "total_wait_ns");
	callers = cJSON_CreateArray();
	cJSON_ArrayForEach(r, in->kernel_callers) {
		if (!is_futex_bucket_wait(r) || ls_json_num(r, "pid") != ls_json_num(top, "pid"))
			continue;
		kernel_ns += ls_json_num(r, "total_wait_ns");
		count += ls_json_num(r, "contended");
		cJSON_AddItemToArray(callers, cJSON_Duplicate(r, true));
	}
	share = kernel_ns / (kernel_ns + futex_ns);
	if (kernel_ns / NSEC_PER_SEC / in->span_s * 100 < in->th->min_wait_pct ||
	    share * 100 < in->th->futex_wake_pct) {
		cJSON_Delete(callers);
		return NULL;
	}
	snprintf(title, sizeof(title), "%.0f%% of futex waiting is on the kernel's futex hash-bucket lock "
		 "(%.0f/s in %s)", share * 100, count / in->span_s, ls_json_str(top, "caller"));
	f = finding_new("futex_wake_contention", title, kernel_ns);
	add_lock(f, top);
	ev = cJSON_CreateObject();
	cJSON_AddNumberToObject(ev, "kernel_wait_ns", kernel_ns);
	cJSON_AddNumberToObject(ev, "kernel_contended", count);
	cJSON_AddNumberToObject(ev, "futex_wait_ns", futex_ns);
	cJSON_AddNumberToObject(ev, "share", share);
	cJSON_AddItemToObject(ev, "callers", callers);
	cJSON_AddItemToObject(f, "evidence", ev);
	cJSON_AddStringToObject(f, "fix", "threads fight over the futex hash bucket itself (futex_wake and "
				"futex_wait take its spinlock): many threads wait on and wake one futex word; "
				"give each waiter a word of its own (per-thread events), wake only when a "
				"waiter is known to sleep, or reduce the contention on the user lock behind it");
	cJSON_AddItemToArray(out, f);
	return top;
}

/* ---- spin findings ---- */

static const char *lock_name(const cJSON *lock)
{
	return ls_json_str(lock, "name") ?: ls_json_str(lock, "addr") ?: "";
}

static void add_num(cJSON *o, const char *name, double v)
{
	cJSON *n = cJSON_GetObjectItemCaseSensitive(o, name);

	if (n)
		cJSON_SetNumberValue(n, n->valuedouble + v);
	else
		cJSON_AddNumberToObject(o, name, v);
}

/*
 * `spin` names each preempted holder thread; the report names the lock once, its threads
 * in the evidence.
 */
static void holder_preempted_rule(const cJSON *sf, cJSON *out)
{
	const cJSON *ev = ls_json_get(sf, "evidence"), *lock = ls_json_get(sf, "lock");
	cJSON *f = NULL, *it, *fev, *t;
	char title[256];

	cJSON_ArrayForEach(it, out)
		if (!strcmp(ls_json_str(it, "rule"), "holder_preempted") && ls_json_num(it, "pid") == ls_json_num(sf, "pid") &&
		    !strcmp(lock_name(ls_json_get(it, "lock")), lock_name(lock)))
			f = it;
	if (!f) {
		f = finding_new("holder_preempted", "", 0);
		cJSON_AddItemToObject(f, "kind", cJSON_Duplicate(ls_json_get(sf, "lock_kind"), true));
		cJSON_AddItemToObject(f, "lock", cJSON_Duplicate(lock, true));
		cJSON_AddNumberToObject(f, "pid", ls_json_num(sf, "pid"));
		cJSON_AddStringToObject(f, "comm", ls_json_str(sf, "comm") ?: "");
		fev = cJSON_AddObjectToObject(f, "evidence");
		cJSON_AddArrayToObject(fev, "threads");
		cJSON_AddNumberToObject(fev, "window_s", ls_json_num(ev, "window_s"));
		cJSON_AddStringToObject(f, "fix", ls_json_str(sf, "hint") ?: "");
		cJSON_AddItemToArray(out, f);
	}
	fev = cJSON_GetObjectItemCaseSensitive(f, "evidence");
	add_num(fev, "preemptions", ls_json_num(ev, "preemptions"));
	add_num(fev, "preempted_ns", ls_json_num(ev, "preempted_ns"));
	if (ls_json_num(ev, "max_preempted_ns") > ls_json_num(fev, "max_preempted_ns"))
		cJSON_DeleteItemFromObject(fev, "max_preempted_ns");
	if (!ls_json_get(fev, "max_preempted_ns"))
		cJSON_AddNumberToObject(fev, "max_preempted_ns", ls_json_num(ev, "max_preempted_ns"));
	t = cJSON_CreateObject();
	cJSON_AddNumberToObject(t, "tid", ls_json_num(sf, "tid"));
	cJSON_AddStringToObject(t, "comm", ls_json_str(sf, "comm") ?: "");
	cJSON_AddNumberToObject(t, "preemptions", ls_json_num(ev, "preemptions"));
	cJSON_AddNumberToObject(t, "preempted_ns", ls_json_num(ev, "preempted_ns"));
	cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(fev, "threads"), t);
	cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(f, "wasted_ns"), ls_json_num(fev, "preempted_ns"));
	snprintf(title, sizeof(title), "holders of %s preempted %.0f times while others waited (%.1f ms)",
		 lock_name(lock), ls_json_num(fev, "preemptions"), ls_json_num(fev, "preempted_ns") / 1e6);
	cJSON_SetValuestring(cJSON_GetObjectItemCaseSensitive(f, "title"), title);
}

/* A spin finding as a report finding: the CPU it burnt, or the time its waiters lost. */
static void spin_rule(const cJSON *sf, cJSON *out)
{
	const cJSON *ev = ls_json_get(sf, "evidence");
	const char *kind = ls_json_str(sf, "kind");
	double wasted = cJSON_IsNumber(ls_json_get(sf, "cpu_ns")) ? ls_json_num(sf, "cpu_ns") : ls_json_num(ev, "counted_ns");
	char title[256];
	cJSON *f;

	if (!strcmp(kind, "holder_preempted")) {
		holder_preempted_rule(sf, out);
		return;
	}
	if (!strcmp(kind, "yield_spin"))
		snprintf(title, sizeof(title), "%s yields %.0f times/s in a spin loop", ls_json_str(sf, "comm"),
			 ls_json_num(sf, "rate_per_s"));
	else if (!strcmp(kind, "burst"))
		snprintf(title, sizeof(title), "%s ran %.0fx its own rate right after a stop (catch-up burst)",
			 ls_json_str(sf, "comm"), ls_json_num(ev, "ratio"));
	else
		snprintf(title, sizeof(title), "%s: %s, %.0f%% of its CPU", ls_json_str(sf, "comm"), kind,
			 ls_json_num(sf, "share") * 100);
	f = finding_new(kind, title, wasted);
	cJSON_AddItemToObject(f, "pid", cJSON_Duplicate(ls_json_get(sf, "pid"), true));
	cJSON_AddItemToObject(f, "tid", cJSON_Duplicate(ls_json_get(sf, "tid"), true));
	cJSON_AddStringToObject(f, "comm", ls_json_str(sf, "comm") ?: "");
	cJSON_AddItemToObject(f, "evidence", cJSON_Duplicate(sf, true));
	cJSON_AddStringToObject(f, "fix", ls_json_str(sf, "hint") ?: "");
	cJSON_AddItemToArray(out, f);
}

static int cmp_wasted(const void *a, const void *b)
{
	double x = ls_json_num(*(const cJSON *const *)a, "wasted_ns"), y = ls_json_num(*(const cJSON *const *)b, "wasted_ns");

	return x < y ? 1 : x > y ? -1 : 0;
}

/*
 * A lock that sleeps in an event mechanism (a semaphore, a condition variable, a latch's
 * poll): the class says its waiters take turns with its wakers (classify.h). Its object
 * is each waiter's own semaphore or descriptor, so it is judged by the caller that waits,
 * across threads and processes, not by the object.
 */
static bool is_evidence_lock(const cJSON *row)
{
	const char *type = ls_json_str(row, "type"), *cls = ls_json_str(row, "class");

	return type && cls && !strcmp(cls, "lock") && (!strcmp(type, "futex:condvar") ||
						      (!strncmp(type, "wait:", 5) && strcmp(type, "wait:flock")));
}

/* The function a caller string names: "ProcSleep" of "ProcSleep+0x314". */
static size_t caller_fn_len(const char *caller)
{
	const char *plus = strchr(caller, '+');

	return plus ? (size_t)(plus - caller) : strlen(caller);
}

/*
 * The evidence-classed lock rows merged by type and calling function: rows by caller are
 * by whole stack, and a lock's waiters reach its wait from many paths (PostgreSQL's row
 * lock from heap_update, heap_lock_tuple...), each a row of its own. A new array of rows
 * with summed figures and no lock or process of their own.
 */
static cJSON *merge_peer_rows(const cJSON *rows)
{
	cJSON *out = cJSON_CreateArray(), *m;
	const cJSON *r;

	cJSON_ArrayForEach(r, rows) {
		const char *caller = ls_json_str(r, "caller"), *type = ls_json_str(r, "type");
		size_t len;

		if (!is_evidence_lock(r) || !caller || caller[0] == '[')
			continue;
		len = caller_fn_len(caller);
		cJSON_ArrayForEach(m, out) {
			const char *mc = ls_json_str(m, "caller");

			if (!strcmp(ls_json_str(m, "type"), type) && caller_fn_len(mc) == len && !strncmp(mc, caller, len))
				break;
		}
		if (!m) {
			char fn[160];

			m = cJSON_CreateObject();
			snprintf(fn, sizeof(fn), "%.*s", (int)len, caller);
			cJSON_AddStringToObject(m, "kind", "user");
			cJSON_AddStringToObject(m, "type", type);
			cJSON_AddStringToObject(m, "class", "lock");
			cJSON_AddStringToObject(m, "caller", fn);
			cJSON_AddNumberToObject(m, "contended", 0);
			cJSON_AddNumberToObject(m, "total_wait_ns", 0);
			cJSON_AddNumberToObject(m, "max_wait_ns", 0);
			cJSON_AddNumberToObject(m, "avg_wait_ns", 0);
			cJSON_AddItemToArray(out, m);
		}
		cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "contended"), ls_json_num(m, "contended") + ls_json_num(r, "contended"));
		cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "total_wait_ns"),
				     ls_json_num(m, "total_wait_ns") + ls_json_num(r, "total_wait_ns"));
		if (ls_json_num(r, "max_wait_ns") > ls_json_num(m, "max_wait_ns"))
			cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "max_wait_ns"), ls_json_num(r, "max_wait_ns"));
		cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(m, "avg_wait_ns"),
				     ls_json_num(m, "total_wait_ns") / ls_json_num(m, "contended"));
	}
	return out;
}

static void peer_wait_rule(const cJSON *row, const struct diag_input *in, cJSON *out)
{
	double total = ls_json_num(row, "total_wait_ns"), waiters = total / NSEC_PER_SEC / in->span_s;
	const char *type = ls_json_str(row, "type"), *caller = ls_json_str(row, "caller");
	char title[256];
	cJSON *f, *ev;

	if (waiters * 100 < in->th->min_wait_pct)
		return;
	snprintf(title, sizeof(title), "%.1f threads on average wait in %s for a peer to release what it holds "
		 "(%s: a lock built on %s)", waiters, caller, type,
		 strcmp(type, "futex:condvar") ? "a latch or a descriptor" : "a semaphore or condition variable");
	f = finding_new("peer_wait", title, total);
	add_lock(f, row);
	cJSON_AddStringToObject(f, "caller", caller);
	ev = lock_evidence(row, in->span_s);
	cJSON_AddItemToObject(f, "evidence", ev);
	cJSON_AddStringToObject(f, "fix", "the waiters wait for their peers (lockscope waits --by edge names who wakes whom): "
				"shorten what the peers do while holding it (in a database: long transactions "
				"holding row locks, many sessions updating the same rows) or spread the hot data");
	cJSON_AddItemToArray(out, f);
}

cJSON *diagnose(const struct diag_input *in)
{
	cJSON *all = cJSON_CreateArray(), *sorted, **v, *peers;
	const cJSON *r, *bucket;
	int n, i;

	bucket = futex_rule(in, all);
	cJSON_ArrayForEach(r, in->lock_rows)
		if ((!bucket || !same_lock(r, bucket)) && !is_evidence_lock(r))
			lock_rules(r, in, all);
	peers = merge_peer_rows(in->caller_rows);
	cJSON_ArrayForEach(r, peers)
		peer_wait_rule(r, in, all);
	cJSON_Delete(peers);
	cJSON_ArrayForEach(r, in->spin_findings)
		spin_rule(r, all);
	n = cJSON_GetArraySize(all);
	v = calloc(n ? n : 1, sizeof(*v));
	sorted = cJSON_CreateArray();
	if (!v)
		return all;
	for (i = 0; i < n; i++)
		v[i] = cJSON_DetachItemFromArray(all, 0);
	ls_sort(v, n, sizeof(*v), cmp_wasted);
	for (i = 0; i < n; i++) {
		cJSON_AddNumberToObject(v[i], "rank", i + 1);
		cJSON_AddItemToArray(sorted, v[i]);
	}
	free(v);
	cJSON_Delete(all);
	return sorted;
}

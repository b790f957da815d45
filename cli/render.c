// SPDX-License-Identifier: GPL-2.0
#include <inttypes.h>
#include <string.h>
#include "lib/jsonget.h"
#include "render.h"

void ls_fmt_ns(char *buf, size_t len, double ns)
{
	static const struct { double div; const char *unit; } units[] = {
		{ 1e9, "s" }, { 1e6, "ms" }, { 1e3, "us" },
	};
	size_t i;

	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (ns >= units[i].div) {
			snprintf(buf, len, "%.2f %s", ns / units[i].div, units[i].unit);
			return;
		}
	}
	snprintf(buf, len, "%.0f ns", ns);
}

/* A null address is a kernel one the daemon hides from this user (expose-kernel-addresses). */
static const char *addr_text(const cJSON *o)
{
	return cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(o, "addr")) ? "[hidden]" : ls_json_str_or(o, "addr", "?");
}

static void frame_text(const cJSON *fr, char *buf, size_t len)
{
	const char *sym = ls_json_str_or(fr, "sym", NULL), *addr = addr_text(fr);
	const char *module = ls_json_str_or(fr, "module", NULL);

	if (sym && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fr, "inlined")))
		snprintf(buf, len, "%s %s (inlined, %s)", addr, sym, module ? module : "?");
	else if (sym && module && strcmp(module, "kernel"))
		snprintf(buf, len, "%s %s+0x%" PRIx64 " (%s)", addr, sym, ls_json_u64(fr, "offset"), module);
	else if (sym)
		snprintf(buf, len, "%s %s+0x%" PRIx64, addr, sym, ls_json_u64(fr, "offset"));
	else if (module)
		snprintf(buf, len, "%s %s+%s", addr, module, addr);
	else
		snprintf(buf, len, "%s", addr);
}

static void print_stack(FILE *f, const cJSON *stack, const char *indent)
{
	const cJSON *fr;
	char buf[256];

	cJSON_ArrayForEach(fr, stack) {
		frame_text(fr, buf, sizeof(buf));
		fprintf(f, "%s%s\n", indent, buf);
	}
}

static void lock_text(const cJSON *row, char *buf, size_t len)
{
	const cJSON *lock = cJSON_GetObjectItemCaseSensitive(row, "lock");

	if (!cJSON_IsObject(lock)) {
		snprintf(buf, len, "%18s  %s", "-", "(many)");
		return;
	}
	snprintf(buf, len, "%18s  %s", addr_text(lock), ls_json_str_or(lock, "name", ""));
}

/* What a wait row waited on: the descriptor's name, the lock's; "(many)", or "-" for none. */
static void object_text(const cJSON *row, char *buf, size_t len)
{
	const cJSON *lock = cJSON_GetObjectItemCaseSensitive(row, "lock");
	const char *name = ls_json_str_or(lock, "name", NULL);

	if (!cJSON_IsObject(lock))
		snprintf(buf, len, "(many)");
	else if (name)
		snprintf(buf, len, "%.40s", name);
	else if (!strcmp(addr_text(lock), "0x0"))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%s", addr_text(lock));
}

/*
 * A row's group of kind @by: the unit, the cgroup path, or the pod (NAMESPACE/NAME when the
 * daemon names pods, else its UID); "-" for the processes in none.
 */
static const char *group_text(const cJSON *row, const char *by, char *buf, size_t len)
{
	const cJSON *cg = cJSON_GetObjectItemCaseSensitive(row, "cgroup");
	const char *ns = ls_json_str_or(cg, "namespace", NULL), *name = ls_json_str_or(cg, "pod_name", NULL);

	if (!strcmp(by, "pod") && ns && name) {
		snprintf(buf, len, "%s/%s", ns, name);
		return buf;
	}
	return ls_json_str_or(cg, strcmp(by, "cgroup") ? by : "path", "-");
}

/* "postgres/812 ProcSleep": a party by name and pid, and its caller when its stack is known. */
static void end_text(const cJSON *o, const char *comm, const char *pid, const char *caller, char *buf, size_t len)
{
	const char *c = caller ? ls_json_str_or(o, caller, NULL) : NULL;

	snprintf(buf, len, "%s/%.0f%s%s", ls_json_str_or(o, comm, "?"), ls_json_num(o, pid),
		 c && c[0] != '[' ? " " : "", c && c[0] != '[' ? c : "");
}

/*
 * An edge of the wait-for graph: "postgres/812 ProcSleep+0x314 -> postgres/977 SetLatch+0x5e"
 * (each end's caller when its stack was sampled); "-> -" when no thread woke the waits; a
 * chain, "a/1 -> b/2 -> c/3 (40%)", when b had itself been waiting (most often on c)
 * during that share of the waits' time.
 */
static const char *edge_text(const cJSON *row, char *buf, size_t len)
{
	const cJSON *w = cJSON_GetObjectItemCaseSensitive(row, "releaser");
	const cJSON *via = cJSON_GetObjectItemCaseSensitive(row, "via");
	double total = ls_json_num(row, "total_wait_ns"), chained = ls_json_num(row, "chained_wait_ns");
	char waiter[128], waker[128];

	end_text(row, "comm", "pid", "caller", waiter, sizeof(waiter));
	if (!cJSON_IsObject(w)) {
		if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(row, "waker_watched")))
			snprintf(buf, len, "%s -> ? (waker not watched: sched_waking was off)", waiter);
		else
			snprintf(buf, len, "%s -> - (no thread: an interrupt, a timer, a signal)", waiter);
		return buf;
	}
	end_text(w, "comm", "pid", NULL, waker, sizeof(waker));
	if (ls_json_str_or(row, "releaser_caller", NULL) && ls_json_str(row, "releaser_caller")[0] != '[')
		snprintf(waker + strlen(waker), sizeof(waker) - strlen(waker), " %s",
			 ls_json_str(row, "releaser_caller"));
	if (cJSON_IsObject(via) && total > 0)	/* a chain: the waker waited too */
		snprintf(buf, len, "%s -> %s -> %s/%.0f (%.0f%%)", waiter, waker, ls_json_str_or(via, "comm", "?"),
			 ls_json_num(via, "pid"), 100 * chained / total);
	else
		snprintf(buf, len, "%s -> %s", waiter, waker);
	return buf;
}

static void party_text(const cJSON *row, const char *role, char *buf, size_t len)
{
	const cJSON *o = cJSON_GetObjectItemCaseSensitive(row, role);

	if (!cJSON_IsObject(o)) {
		snprintf(buf, len, "-");
		return;
	}
	snprintf(buf, len, "%s/%.0f", ls_json_str_or(o, "comm", "?"), ls_json_num(o, "tid"));
}

/* "12x 3.40 ms": a lock's holders preempted while others waited, and for how long. */
static void preempted_text(const cJSON *row, char *buf, size_t len)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(row, "holder_preempted");
	char t[32];

	if (!cJSON_IsObject(p) || !ls_json_num(p, "count")) {
		snprintf(buf, len, "-");
		return;
	}
	ls_fmt_ns(t, sizeof(t), ls_json_num(p, "total_ns"));
	snprintf(buf, len, "%.0fx %s", ls_json_num(p, "count"), t);
}

static void print_party_stack(FILE *f, const cJSON *row, const char *role)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(row, role);
	const cJSON *st = cJSON_IsObject(p) ? cJSON_GetObjectItemCaseSensitive(p, "stack") : NULL;

	if (cJSON_IsArray(st) && cJSON_GetArraySize(st)) {
		if (cJSON_GetObjectItemCaseSensitive(p, "stack_tid"))	/* none of its own was sampled */
			fprintf(f, "\t\t\t%s stack (sampled in thread %.0f):\n", role, ls_json_num(p, "stack_tid"));
		else
			fprintf(f, "\t\t\t%s stack:\n", role);
		print_stack(f, st, "\t\t\t  ");
	}
}

#define RENDER_HOLDER_STACKS 5

/* What the holder was doing while others waited: its sampled stacks and their share. */
static void print_holders(FILE *f, const cJSON *row)
{
	const cJSON *hs = cJSON_GetObjectItemCaseSensitive(row, "holder_stacks"), *h;
	int shown = 0;

	if (!cJSON_IsArray(hs) || !cJSON_GetArraySize(hs))
		return;
	cJSON_ArrayForEach(h, hs) {
		if (shown++ == RENDER_HOLDER_STACKS)
			break;
		fprintf(f, "\t\t\tholder %5.1f%% of %.0f samples:\n", 100 * ls_json_num(h, "share"),
			ls_json_num(row, "holder_samples"));
		print_stack(f, cJSON_GetObjectItemCaseSensitive(h, "stack"), "\t\t\t  ");
	}
}

static void print_header(FILE *f, const struct render_opts *o)
{
	fprintf(f, " %10s %12s %12s %12s %*s", o->waits ? "waits" : "contended", "total wait", "max wait", "avg wait",
		o->waits ? 13 : 12, "type");
	if (o->waits)
		fprintf(f, "  %-5s", "class");
	if (o->waits && !o->threads && !o->locks && !o->by)
		fprintf(f, "   %-32s %s", "object", "caller");
	else if (o->by && !strcmp(o->by, "mechanism"))
		;
	else if (o->threads)
		fprintf(f, " %8s %8s  %-16s", "pid", "tid", "comm");
	else if (o->locks)
		fprintf(f, " %18s  %s", "address", "symbol");
	else if (o->by && !strcmp(o->by, "edge"))
		fprintf(f, "   %s", "waiter -> waker (process)");
	else if (o->by)
		fprintf(f, "   %s", o->by);
	else
		fprintf(f, "   %s", "caller");
	if (o->owners)
		fprintf(f, "   %-22s %-22s %s", "owner", "releaser", "holder preempted");
	fprintf(f, "\n\n");
}

static void print_row(FILE *f, const cJSON *row, const struct render_opts *o)
{
	char total[32], max[32], avg[32], text[256], owner[64], releaser[64];

	ls_fmt_ns(total, sizeof(total), ls_json_num(row, "total_wait_ns"));
	ls_fmt_ns(max, sizeof(max), ls_json_num(row, "max_wait_ns"));
	ls_fmt_ns(avg, sizeof(avg), ls_json_num(row, "avg_wait_ns"));
	fprintf(f, " %10.0f %12s %12s %12s %*s", ls_json_num(row, "contended"), total, max, avg, o->waits ? 13 : 12,
		ls_json_str_or(row, "type", "?"));
	if (o->waits)
		fprintf(f, "  %-5s", ls_json_str_or(row, "class", "?"));
	if (o->waits && !o->threads && !o->locks && !o->by) {
		object_text(row, text, sizeof(text));
		fprintf(f, "   %-32s %s%s", text, ls_json_str_or(row, "caller", "?"),
			cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "estimated")) ? " (est.)" : "");
	} else if (o->by && !strcmp(o->by, "mechanism")) {
		;
	} else if (o->threads) {
		fprintf(f, " %8.0f %8.0f  %-16s", ls_json_num(row, "pid"), ls_json_num(row, "tid"), ls_json_str_or(row, "comm", ""));
	} else if (o->locks) {
		lock_text(row, text, sizeof(text));
		fprintf(f, " %s", text);
	} else if (o->by) {
		char where[320];

		fprintf(f, "   %s", !strcmp(o->by, "edge") ? edge_text(row, where, sizeof(where)) :
			group_text(row, o->by, where, sizeof(where)));
	} else {
		fprintf(f, "   %s%s", ls_json_str_or(row, "caller", "?"),
			cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(row, "estimated")) ? " (est.)" : "");
	}
	if (o->owners) {
		party_text(row, "owner", owner, sizeof(owner));
		party_text(row, "releaser", releaser, sizeof(releaser));
		preempted_text(row, text, sizeof(text));
		fprintf(f, "   %-22s %-22s %s", owner, releaser, text);
	}
	fputc('\n', f);
	if (o->stacks)
		print_stack(f, cJSON_GetObjectItemCaseSensitive(row, "stack"), "\t\t\t");
	if (o->owners && o->stacks) {
		print_party_stack(f, row, "owner");
		print_party_stack(f, row, "releaser");
	}
	if (o->holders)
		print_holders(f, row);
}

static void print_drops(FILE *f, const cJSON *dropped)
{
	const cJSON *d;
	bool any = false;

	cJSON_ArrayForEach(d, dropped) {
		if (cJSON_IsNumber(d) && d->valuedouble > 0) {
			fprintf(f, "%s %s=%.0f", any ? "," : "\n=== dropped:", d->string, d->valuedouble);
			any = true;
		}
	}
	if (any)
		fputc('\n', f);
}

void render_rows(FILE *f, const cJSON *resp, const struct render_opts *o)
{
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(resp, "rows"), *row;
	const cJSON *win = cJSON_GetObjectItemCaseSensitive(resp, "window");
	char span[32];

	print_header(f, o);
	cJSON_ArrayForEach(row, rows)
		print_row(f, row, o);
	if (!cJSON_GetArraySize(rows))
		fprintf(f, o->waits ? " (no waits in this window)\n" : " (no contention in this window)\n");
	ls_fmt_ns(span, sizeof(span), ls_json_num(win, "end_ns") - ls_json_num(win, "start_ns"));
	fprintf(f, "\n=== window %s: %s", ls_json_str_or(win, "name", "?"), span);
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "process_exited")))
		fprintf(f, " (process exited)");
	fputc('\n', f);
	print_drops(f, cJSON_GetObjectItemCaseSensitive(resp, "dropped"));
}

/* Modules whose frames stay unnamed, and what would name them. */
static void render_missing_symbols(FILE *f, const cJSON *syms)
{
	const cJSON *miss = cJSON_GetObjectItemCaseSensitive(syms, "missing"), *m;
	const cJSON *urls = cJSON_GetObjectItemCaseSensitive(syms, "debuginfod");

	cJSON_ArrayForEach(m, miss)
		fprintf(f, "no debug symbols: %s (%s, build id %s): %.0f frames unnamed; debuginfod: %s\n",
			ls_json_str_or(m, "module", "?"), ls_json_str_or(m, "path", "?"),
			ls_json_str_or(m, "build_id", "none"), ls_json_num(m, "unnamed_frames"),
			ls_json_str_or(m, "debuginfod", "off"));
	if (!cJSON_GetArraySize(miss))
		return;
	if (cJSON_IsString(urls))
		fprintf(f, "  -> debug files are asked from %s; or install the modules' debug packages\n",
			urls->valuestring);
	else
		fprintf(f, "  -> install their debug packages (dpkg -S PATH names the package; glibc's is libc6-dbg, "
			"others PACKAGE-dbgsym), or start lockscoped with DEBUGINFOD_URLS set\n");
}

/* The daemon's own cost, what it cannot do here and why, and the config in force. */
static void render_self(FILE *f, const cJSON *resp)
{
	const cJSON *self = cJSON_GetObjectItemCaseSensitive(resp, "self");
	const cJSON *rates = cJSON_GetObjectItemCaseSensitive(self, "per_s");
	const cJSON *syms = cJSON_GetObjectItemCaseSensitive(self, "user_symbols");
	const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(resp, "config"), *p, *r;
	const cJSON *clients = cJSON_GetObjectItemCaseSensitive(resp, "clients");

	fprintf(f, "daemon: %.2f%% of a CPU, %.1f MiB RSS (heap %.1f MiB), %.0f records/s (kernel waits %.0f/s, futex waits "
		"%.0f/s, holder samples %.0f/s, spin samples %.0f/s)\n", ls_json_num(self, "cpu_pct"),
		ls_json_num(self, "rss_bytes") / (1 << 20), ls_json_num(self, "heap_bytes") / (1 << 20),
		ls_json_num(rates, "records"), ls_json_num(rates, "kernel_waits"),
		ls_json_num(rates, "futex_waits"), ls_json_num(rates, "holder_samples"), ls_json_num(rates, "spin_samples"));
	fprintf(f, "symbols: %.0f kernel; user frames %.0f symbolized, %.0f from cache, %.0f unresolved; symbolizer %s "
		"(let go %.0f times, idle)\n",
		ls_json_num(self, "kernel_symbols"), ls_json_num(syms, "symbolized"), ls_json_num(syms, "cache_hits"),
		ls_json_num(syms, "unresolved"), cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(syms, "symbolizer_loaded")) ?
		"held" : "not held", ls_json_num(syms, "symbolizer_releases"));
	render_missing_symbols(f, syms);
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(resp, "probes"))
		if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "ok")))
			fprintf(f, "missing: %s: %s; off: %s\n", ls_json_str_or(p, "name", "?"), ls_json_str_or(p, "detail", ""),
				ls_json_str_or(p, "disables", ""));
	cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(resp, "degraded"))
		fprintf(f, "degraded: %s: %s\n", ls_json_str_or(r, "component", "?"), ls_json_str_or(r, "reason", ""));
	if (cJSON_IsObject(clients))
		fprintf(f, "clients: %.0f connected, %.0f served since start; refused: %.0f not allowed, %.0f over "
			"the connection limits; %.0f cut off (read no answer for 10 s), %.0f overlong requests\n",
			ls_json_num(clients, "connected"), ls_json_num(clients, "accepted"),
			ls_json_num(clients, "refused_access"), ls_json_num(clients, "refused_busy"),
			ls_json_num(clients, "cut_off"), ls_json_num(clients, "overlong"));
	if (!cJSON_IsObject(cfg))
		return;
	fprintf(f, "config: %s, %.0f reloads", ls_json_str_or(cfg, "path", "(no file: defaults and flags)"),
		ls_json_num(cfg, "reloads"));
	if (cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cfg, "reload_error")))
		fprintf(f, "; last reload rejected: %s", ls_json_str_or(cfg, "reload_error", ""));
	if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(cfg, "pending_restart"))) {
		fprintf(f, "; restart to apply:");
		cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(cfg, "pending_restart"))
			fprintf(f, " %s", cJSON_IsString(r) ? r->valuestring : "?");
	}
	fputc('\n', f);
}

void render_status(FILE *f, const cJSON *resp)
{
	const cJSON *feat = cJSON_GetObjectItemCaseSensitive(resp, "features");
	const cJSON *ev = cJSON_GetObjectItemCaseSensitive(resp, "events");
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(resp, "stacks");
	const cJSON *agg = cJSON_GetObjectItemCaseSensitive(resp, "aggregator");
	const cJSON *p, *d, *w, *k;
	char up[32], span[32], avg[64];
	bool stats_on = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "bpf_stats_enabled"));
	int drops = 0;

	ls_fmt_ns(up, sizeof(up), ls_json_num(resp, "uptime_ns"));
	fprintf(f, "lockscoped %s, pid %.0f, up %s, %.0f rings, attach mode %s, owner stacks %s\n",
		ls_json_str_or(resp, "version", "?"), ls_json_num(resp, "pid"), up, ls_json_num(resp, "rings"),
		ls_json_str_or(feat, "attach_mode", "?"),
		cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(feat, "owner_stacks")) ? "on" : "off");
	if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(resp, "pause"), "paused")))
		fprintf(f, "tracing is PAUSED: no program is on its hook (lockscope resume)\n");
	fprintf(f, "\nprograms:\n");
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(resp, "programs")) {
		const cJSON *evs = cJSON_GetObjectItemCaseSensitive(p, "events");
		double cnt = ls_json_num(p, "run_cnt"), t = ls_json_num(p, "run_time_ns");
		bool attached = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "attached"));
		char events[32] = "-";

		/* on-demand programs wait detached until a scan or a rate needs them */
		if (!attached && cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "on_demand"))) {
			fprintf(f, "  %-36s %-9s (attached while needed)\n", ls_json_str_or(p, "name", "?"), "standby");
			continue;
		}
		if (cJSON_IsNumber(evs))
			snprintf(events, sizeof(events), "%.0f", evs->valuedouble);
		else if (cnt)
			snprintf(events, sizeof(events), "%.0f", cnt);
		avg[0] = 0;
		if (stats_on && cnt && t) {
			char ns[32];

			ls_fmt_ns(ns, sizeof(ns), t / cnt);
			snprintf(avg, sizeof(avg), "  %s/event", ns);
		}
		fprintf(f, "  %-36s %-9s events %*s%s\n", ls_json_str_or(p, "name", "?"),
			attached ? "attached" : "DETACHED",
			avg[0] ? -12 : 0, events, avg);
	}
	if (!stats_on)
		fprintf(f, "  (ns per event: sysctl -w kernel.bpf_stats_enabled=1; the kernel then times "
			"every program run, at a few tens of ns each)\n");
	fprintf(f, "\nevents: %.0f waits (%.1f/s), %.0f mutex spin->sleep continuations, %.0f nested\n",
		ls_json_num(ev, "waits"), ls_json_num(ev, "waits_per_s"), ls_json_num(ev, "continued"), ls_json_num(ev, "nested"));
	fprintf(f, "stacks: %.1f%% of waits carried one (%.0f sampled out; limit %.0f/s per lock per CPU, "
		"%.0f/s per CPU, %.0f us/s per CPU), %.0f distinct; kernel stacks took %.1f ms\n",
		100 * ls_json_num(st, "share"), ls_json_num(st, "sampled_out"), ls_json_num(st, "stack_rate"),
		ls_json_num(st, "cpu_stack_rate"), ls_json_num(st, "stack_budget_us"), ls_json_num(st, "interned"),
		ls_json_num(st, "stack_ns") / 1e6);
	fprintf(f, "aggregator: %.0f keys, %.1f MiB", ls_json_num(agg, "keys"), ls_json_num(agg, "mem_bytes") / (1 << 20));
	if (ls_json_num(agg, "folded_keys"))	/* the table filled: idle threads' keys merged */
		fprintf(f, "; %.0f idle keys folded into their processes'", ls_json_num(agg, "folded_keys"));
	fputc('\n', f);
	/* the profiles pushed, and what a backend that is down cost */
	cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(resp, "push"))
		fprintf(f, "push %s %s: %.0f sent, %.0f queued, %.0f failed attempts, dropped %.0f (queue full) "
			"%.0f (rejected) %.0f (retries spent)%s%s\n", p->string, ls_json_str_or(p, "url", "?"),
			ls_json_num(p, "sent"), ls_json_num(p, "queued"), ls_json_num(p, "attempts_failed"),
			ls_json_num(p, "dropped_queue_full"), ls_json_num(p, "dropped_rejected"),
			ls_json_num(p, "dropped_retries"), ls_json_str_or(p, "last_error", NULL) ? "; last error: " : "",
			ls_json_str_or(p, "last_error", ""));
	/* the pod list that names Kubernetes pods */
	if ((k = cJSON_GetObjectItemCaseSensitive(resp, "kubernetes")))
		fprintf(f, "kubernetes %s: %.0f pods named, %.0f fetches, %.0f failed%s%s\n", ls_json_str_or(k, "url", "?"),
			ls_json_num(k, "pods"), ls_json_num(k, "fetches"), ls_json_num(k, "failed"),
			ls_json_str_or(k, "last_error", NULL) ? "; last error: " : "", ls_json_str_or(k, "last_error", ""));
	render_self(f, resp);
	/* only what was dropped; --json has every counter */
	cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(resp, "dropped")) {
		if (!d->valuedouble)
			continue;
		if (!drops++)
			fprintf(f, "\ndropped:\n");
		fprintf(f, "  %-24s %.0f\n", d->string, d->valuedouble);
	}
	if (!drops)
		fprintf(f, "\ndropped: nothing\n");
	fprintf(f, "\nwindows:");
	cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(resp, "windows")) {
		ls_fmt_ns(span, sizeof(span), ls_json_num(w, "end_ns") - ls_json_num(w, "start_ns"));
		fprintf(f, " %s=%s", ls_json_str_or(w, "name", "?"), span);
	}
	fputc('\n', f);
}

/* A threads row's times, formatted */
struct thread_times {
	char on[16], blocked[16], runq[16], lost[16];
};

static void thread_times(const cJSON *r, struct thread_times *t)
{
	ls_fmt_ns(t->on, sizeof(t->on), ls_json_num(r, "oncpu_ns"));
	ls_fmt_ns(t->blocked, sizeof(t->blocked), ls_json_num(r, "offcpu_blocked_ns"));
	ls_fmt_ns(t->runq, sizeof(t->runq), ls_json_num(r, "runqueue_wait_ns"));
	ls_fmt_ns(t->lost, sizeof(t->lost), ls_json_num(r, "switch_cost_ns"));
}

/* one line per thread */
static void render_thread_rows(FILE *f, const cJSON *rows)
{
	struct thread_times t;
	const cJSON *r;

	fprintf(f, "%8s %8s  %-16s %9s %9s %10s %10s %11s %11s %11s %11s\n", "PID", "TID", "COMM",
		"cswch/s", "nvcswch/s", "voluntary", "involuntary", "on-CPU", "blocked", "runq wait",
		"switching");
	cJSON_ArrayForEach(r, rows) {
		const cJSON *exited = cJSON_GetObjectItemCaseSensitive(r, "exited_ago_s");
		char tid[16], gone[32] = "";

		thread_times(r, &t);
		/* tid 0: what is left of an exited process's threads */
		if (ls_json_num(r, "tid"))
			snprintf(tid, sizeof(tid), "%.0f", ls_json_num(r, "tid"));
		else
			snprintf(tid, sizeof(tid), "(all)");
		if (cJSON_IsNumber(exited))
			snprintf(gone, sizeof(gone), "  exited %.0f s ago", exited->valuedouble);
		fprintf(f, "%8.0f %8s  %-16s %9.1f %9.1f %10.0f %10.0f %11s %11s %11s %11s%s\n",
			ls_json_num(r, "pid"), tid, ls_json_str_or(r, "comm", "?"), ls_json_num(r, "voluntary_per_s"),
			ls_json_num(r, "involuntary_per_s"), ls_json_num(r, "voluntary"), ls_json_num(r, "involuntary"), t.on,
			t.blocked, t.runq, t.lost, gone);
	}
}

/* threads --by: one line per unit, cgroup or pod, its threads added up */
static void render_thread_groups(FILE *f, const cJSON *rows, const char *by)
{
	struct thread_times t;
	char where[320];
	const cJSON *r;

	fprintf(f, "%8s %9s %9s %10s %10s %11s %11s %11s %11s   %s\n", "THREADS", "cswch/s", "nvcswch/s", "voluntary",
		"involuntary", "on-CPU", "blocked", "runq wait", "switching", !strcmp(by, "pod") ? "POD" :
		!strcmp(by, "unit") ? "UNIT" : "CGROUP");
	cJSON_ArrayForEach(r, rows) {
		thread_times(r, &t);
		fprintf(f, "%8.0f %9.1f %9.1f %10.0f %10.0f %11s %11s %11s %11s   %s\n", ls_json_num(r, "threads"),
			ls_json_num(r, "voluntary_per_s"), ls_json_num(r, "involuntary_per_s"), ls_json_num(r, "voluntary"),
			ls_json_num(r, "involuntary"), t.on, t.blocked, t.runq, t.lost, group_text(r, by, where, sizeof(where)));
	}
}

/* Like pidstat -w (cswch/s, nvcswch/s), plus where the time off CPU went and what switching cost. */
void render_threads(FILE *f, const cJSON *resp, const char *by)
{
	const cJSON *rows = cJSON_GetObjectItemCaseSensitive(resp, "rows");
	char cost[16];

	ls_fmt_ns(cost, sizeof(cost), ls_json_num(resp, "switch_cost_ns_per_switch"));
	fprintf(f, "host: %.0f switches/s; one switch costs %s (measured)\n",
		ls_json_num(resp, "system_switches_per_s"), cost);
	if (cJSON_GetObjectItemCaseSensitive(resp, "window"))
		fprintf(f, "window %s: figures and rates over the last %.1f s, exited threads included\n",
			ls_json_str_or(cJSON_GetObjectItemCaseSensitive(resp, "window"), "name", "?"),
			ls_json_num(resp, "rate_window_s"));
	fputc('\n', f);
	if (by)
		render_thread_groups(f, rows, by);
	else
		render_thread_rows(f, rows);
	if (!cJSON_GetArraySize(rows))
		fprintf(f, "\n (no threads seen)\n");
}

/* One line per finding, then its evidence, stack and hint, like `perf lock` -v output. */
void render_spin(FILE *f, const cJSON *resp)
{
	const cJSON *fs = cJSON_GetObjectItemCaseSensitive(resp, "findings"), *fd;
	char rate[32], cpu[32], peer[64], a[32];

	fprintf(f, "%-17s %8s %8s  %-16s %12s %11s   %s\n\n", "finding", "pid", "tid", "comm",
		"rate/share", "cpu burnt", "waiting for");
	cJSON_ArrayForEach(fd, fs) {
		const cJSON *ev = cJSON_GetObjectItemCaseSensitive(fd, "evidence");
		const cJSON *p = cJSON_GetObjectItemCaseSensitive(fd, "peer");
		const cJSON *cpu_ns = cJSON_GetObjectItemCaseSensitive(fd, "cpu_ns");
		const char *kind = ls_json_str_or(fd, "kind", "?");

		if (cJSON_GetObjectItemCaseSensitive(fd, "share"))
			snprintf(rate, sizeof(rate), "%.1f%%", 100 * ls_json_num(fd, "share"));
		else
			snprintf(rate, sizeof(rate), "%.1f/s", ls_json_num(fd, "rate_per_s"));
		if (cJSON_IsNumber(cpu_ns))
			ls_fmt_ns(cpu, sizeof(cpu), cpu_ns->valuedouble);
		else
			snprintf(cpu, sizeof(cpu), "-");
		if (cJSON_IsObject(p))
			snprintf(peer, sizeof(peer), "%s/%.0f%s", ls_json_str_or(p, "comm", "?"), ls_json_num(p, "tid"),
				 cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "preempted")) ?
				 " (preempted)" : "");
		else
			snprintf(peer, sizeof(peer), "-");
		fprintf(f, "%-17s %8.0f %8.0f  %-16s %12s %11s   %s\n", kind, ls_json_num(fd, "pid"),
			ls_json_num(fd, "tid"), ls_json_str_or(fd, "comm", "?"), rate, cpu, peer);
		if (!strcmp(kind, "yield_spin") && !strcmp(ls_json_str_or(ev, "via", ""), "futex")) {
			fprintf(f, "\t%.0f FUTEX_WAIT calls returned at once in %.2f s of precise scanning\n",
				ls_json_num(ev, "nonblocking"), ls_json_num(ev, "precise_s"));
		} else if (!strcmp(kind, "yield_spin") && cJSON_GetObjectItemCaseSensitive(fd, "share")) {
			fprintf(f, "\t%.0f of %.0f samples inside %s with a zero timeout\n",
				ls_json_num(ev, "poll_samples"), ls_json_num(ev, "samples"), ls_json_str_or(ev, "via", "?"));
		} else if (!strcmp(kind, "yield_spin")) {
			fprintf(f, "\t%.0f yields in %.2f s%s\n", ls_json_num(ev, "storm_yields"), ls_json_num(ev, "storm_s"),
				cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(ev, "active")) ? ", still going" : "");
		} else if (!strcmp(kind, "pause_spin")) {
			fprintf(f, "\t%.0f of %.0f samples in a spin loop\n", ls_json_num(ev, "spin_samples"),
				ls_json_num(ev, "samples"));
		} else if (!strcmp(kind, "burst")) {
			ls_fmt_ns(a, sizeof(a), ls_json_num(ev, "stop_ns"));
			fprintf(f, "\tstopped %s; %.0f events in the first 100 ms after, %.1f per 100 ms "
				"before (%.0fx)\n", a, ls_json_num(ev, "events_first_100ms"),
				ls_json_num(ev, "baseline_per_100ms"), ls_json_num(ev, "ratio"));
		} else if (!strcmp(kind, "holder_preempted")) {
			const cJSON *lock = cJSON_GetObjectItemCaseSensitive(fd, "lock");

			ls_fmt_ns(a, sizeof(a), ls_json_num(ev, "preempted_ns"));
			const char *name = ls_json_str_or(lock, "name", NULL);

			fprintf(f, "\tpreempted %.0fx holding %s %s%s%s, %s in all\n", ls_json_num(ev, "preemptions"),
				ls_json_str_or(fd, "lock_type", ls_json_str_or(fd, "lock_kind", "a")), name ? name : "",
				name ? " " : "", ls_json_str_or(lock, "addr", ls_json_str_or(fd, "uaddr", "")), a);
		}
		if (cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(fd, "stack"))) {
			fprintf(f, "\tstack:\n");
			print_stack(f, cJSON_GetObjectItemCaseSensitive(fd, "stack"), "\t  ");
		}
		fprintf(f, "\thint: %s\n\n", ls_json_str_or(fd, "hint", ""));
	}
	if (!cJSON_GetArraySize(fs))
		fprintf(f, " (nothing spins, yields, bursts or is preempted holding a lock)\n");
}

/* The figures a lock finding rests on, in one line. */
static void print_lock_evidence(FILE *f, const cJSON *ev)
{
	const cJSON *pre = cJSON_GetObjectItemCaseSensitive(ev, "holder_preempted");
	char avg[32], max[32], tot[32];

	ls_fmt_ns(avg, sizeof(avg), ls_json_num(ev, "avg_wait_ns"));
	ls_fmt_ns(max, sizeof(max), ls_json_num(ev, "max_wait_ns"));
	ls_fmt_ns(tot, sizeof(tot), ls_json_num(ev, "total_wait_ns"));
	fprintf(f, "      evidence: %.0f contended (%.0f/s), avg %s, max %s, total %s, %.1f threads waiting on average",
		ls_json_num(ev, "contended"), ls_json_num(ev, "contended_per_s"), avg, max, tot, ls_json_num(ev, "waiters_avg"));
	if (ls_json_num(pre, "count"))
		fprintf(f, ", holder preempted %.0fx", ls_json_num(pre, "count"));
	fputc('\n', f);
}

/* futex_wake_contention: the bucket lock's waits against the futex waits, and where */
static void print_futex_evidence(FILE *f, const cJSON *ev)
{
	const cJSON *c;
	char kernel[32], user[32];
	int n = 0;

	ls_fmt_ns(kernel, sizeof(kernel), ls_json_num(ev, "kernel_wait_ns"));
	ls_fmt_ns(user, sizeof(user), ls_json_num(ev, "futex_wait_ns"));
	fprintf(f, "      evidence: %.0f contended in futex code, %s waiting there against %s in futex waits, from",
		ls_json_num(ev, "kernel_contended"), kernel, user);
	cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(ev, "callers")) {
		ls_fmt_ns(kernel, sizeof(kernel), ls_json_num(c, "total_wait_ns"));
		fprintf(f, "%s %s (%s)", n++ ? "," : "", ls_json_str_or(c, "caller", "?"), kernel);
	}
	fputc('\n', f);
}

static void print_holder_work(FILE *f, const cJSON *ev)
{
	const cJSON *w;

	cJSON_ArrayForEach(w, cJSON_GetObjectItemCaseSensitive(ev, "holder_work")) {
		fprintf(f, "      holders: %.0f%% of their samples in %s (%s)%s%s\n", 100 * ls_json_num(w, "share"),
			ls_json_str_or(w, "function", "?"), ls_json_str_or(w, "kind", "?"),
			ls_json_str_or(w, "called_from", NULL) ? ", called from " : "", ls_json_str_or(w, "called_from", ""));
	}
}

void render_report(FILE *f, const cJSON *resp)
{
	const cJSON *fs = cJSON_GetObjectItemCaseSensitive(resp, "findings"), *fd;
	const cJSON *host = cJSON_GetObjectItemCaseSensitive(resp, "host");
	const cJSON *win = cJSON_GetObjectItemCaseSensitive(resp, "window");
	const cJSON *pid = cJSON_GetObjectItemCaseSensitive(resp, "pid");
	char wasted[32], lock[256], who[32];

	if (cJSON_IsNumber(pid))
		snprintf(who, sizeof(who), "pid %.0f", pid->valuedouble);
	else
		snprintf(who, sizeof(who), "every process");
	fprintf(f, "lockscope report: %s, %s window (%.1f s), %s, Linux %s\n\n", who,
		ls_json_str_or(win, "name", "?"), ls_json_num(resp, "span_s"), ls_json_str_or(host, "hostname", "?"), ls_json_str_or(host, "kernel", "?"));
	if (!cJSON_GetArraySize(fs)) {
		fprintf(f, "no findings: nothing waited or spun past the thresholds (lockscope report --json "
			"has the figures and the thresholds)\n");
		print_drops(f, cJSON_GetObjectItemCaseSensitive(resp, "dropped"));
		return;
	}
	fprintf(f, "%3s %11s  %s\n\n", "#", "wasted", "finding");
	cJSON_ArrayForEach(fd, fs) {
		const cJSON *ev = cJSON_GetObjectItemCaseSensitive(fd, "evidence");
		const cJSON *lk = cJSON_GetObjectItemCaseSensitive(fd, "lock");

		ls_fmt_ns(wasted, sizeof(wasted), ls_json_num(fd, "wasted_ns"));
		fprintf(f, "%3.0f %11s  %s: %s\n", ls_json_num(fd, "rank"), wasted, ls_json_str_or(fd, "rule", "?"), ls_json_str_or(fd, "title", ""));
		if (cJSON_IsObject(lk)) {
			snprintf(lock, sizeof(lock), "%s %s", ls_json_str_or(fd, "type", ls_json_str_or(fd, "kind", "")),
				 ls_json_str_or(lk, "name", addr_text(lk)));
			fprintf(f, "      lock: %s, pid %.0f%s%s%s\n", lock, ls_json_num(fd, "pid"), ls_json_str_or(fd, "comm", NULL) ? " (" : "",
				ls_json_str_or(fd, "comm", ""), ls_json_str_or(fd, "comm", NULL) ? ")" : "");
		} else if (cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(fd, "tid"))) {
			fprintf(f, "      thread: %s/%.0f, pid %.0f\n", ls_json_str_or(fd, "comm", "?"), ls_json_num(fd, "tid"), ls_json_num(fd, "pid"));
		}
		if (cJSON_GetObjectItemCaseSensitive(ev, "contended"))
			print_lock_evidence(f, ev);
		else if (cJSON_GetObjectItemCaseSensitive(ev, "kernel_contended"))
			print_futex_evidence(f, ev);
		print_holder_work(f, ev);
		fprintf(f, "      fix: %s\n\n", ls_json_str_or(fd, "fix", ""));
	}
	print_drops(f, cJSON_GetObjectItemCaseSensitive(resp, "dropped"));
}

/* pause, resume: the state after it, in one line */
static void render_pause(FILE *f, const cJSON *resp)
{
	const cJSON *p = cJSON_GetObjectItemCaseSensitive(resp, "pause");
	char span[32];

	ls_fmt_ns(span, sizeof(span), ls_json_num(p, "paused_ns"));
	fprintf(f, "tracing %s (%.0f pauses, %s paused in all, %.0f kernel-lock waits open at a pause dropped)\n",
		cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "paused")) ? "paused" : "on",
		ls_json_num(p, "pauses"), span, ls_json_num(p, "in_flight_dropped"));
}

void render_response(FILE *f, const char *cmd, const cJSON *resp, const struct render_opts *o)
{
	if (!strcmp(cmd, "pause") || !strcmp(cmd, "resume"))
		render_pause(f, resp);
	else if (!strcmp(cmd, "status"))
		render_status(f, resp);
	else if (!strcmp(cmd, "threads"))
		render_threads(f, resp, o->by);
	else if (!strcmp(cmd, "spin"))
		render_spin(f, resp);
	else if (!strcmp(cmd, "report"))
		render_report(f, resp);
	else
		render_rows(f, resp, o);
}

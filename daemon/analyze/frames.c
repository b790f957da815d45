// SPDX-License-Identifier: GPL-2.0
/*
 * Frames, stacks and locks as rows show them: a stack's frames symbolized (kernel and
 * user), the caller a row is named by (the first frame out of the locking code), a lock's
 * name, address and mapping.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "analyze/query.h"
#include "analyze/query_int.h"
#include "decode/ksyms.h"
#include "decode/pods.h"
#include "decode/usyms.h"
#include "lib/procfs.h"
#include "store/stacks.h"

static const char *const lock_names[] = {
	[LS_NAME_NONE] = NULL,
	[LS_NAME_MMAP_LOCK] = "mmap_lock",
	[LS_NAME_SIGLOCK] = "siglock",
};

/* Addresses up to this far into a kernel variable are named "var+0xoff": locks sit
 * inside static structs more often than at their start. */
#define LOCK_SYM_MAX_OFF 256

/*
 * A user frame inside the waiting machinery: the C library (its futex, mutex, condvar and
 * syscall wrappers), a thin wrapper around it (libuv's uv_mutex_lock, libstdc++'s
 * __gthread_*, Rust's lock_contended), or a program's own layer that every wait of a kind
 * goes through and that names nothing of the wait. PostgreSQL's: an LWLock sleeps in
 * PGSemaphoreLock, a heavyweight (row) lock in WaitLatch -> WaitEventSetWait; the caller
 * that says what is waited for is the frame above (LWLockAcquire, ProcSleep), as perf's
 * caller is the first frame out of the kernel's lock functions.
 */
static bool is_user_lock_frame(struct usyms *u, uint64_t code)
{
	static const char *const libs[] = { "libc.so", "libpthread.so", "ld-linux" };
	static const char *const syms[] = { "mutex_lock", "mutex_timedlock", "cond_wait",
					    "cond_timedwait", "cond_clockwait", "rwlock_rdlock",
					    "rwlock_wrlock", "sem_wait", "sem_timedwait", "lll_lock",
					    "futex", "gthread_", "lock_contended",
					    /* PostgreSQL */
					    "PGSemaphoreLock", "WaitEventSetWait", "WaitLatch",
					    "ConditionVariableSleep", "ConditionVariableTimedSleep" };
	struct uframe f;
	size_t i;

	/* the C library is machinery whatever its function: no name needed, none looked up */
	if (!usyms__frame_module(u, code, &f))
		return false;
	for (i = 0; f.module && i < sizeof(libs) / sizeof(libs[0]); i++)
		if (strstr(f.module, libs[i]))
			return true;
	if (!usyms__frame(u, code, &f))
		return false;
	for (i = 0; f.sym && i < sizeof(syms) / sizeof(syms[0]); i++)
		if (strstr(f.sym, syms[i]))
			return true;
	return false;
}

static int user_caller_frame(const struct query_ctx *ctx, const uint64_t *ips, uint32_t nr)
{
	uint32_t i;

	if (!ctx->usyms)
		return 0;
	for (i = 0; i < nr; i++)
		if (!is_user_lock_frame(ctx->usyms, ips[i]))
			return i;
	return 0;
}

int query__caller_frame(const struct query_ctx *ctx, const uint64_t *ips, uint32_t nr)
{
	uint32_t i;
	int first_plain = -1;
	bool seen_lock = false;

	if (nr && usyms__is_user(ips[0]))
		return user_caller_frame(ctx, ips, nr);
	if (!ctx->ksyms)
		return 0;
	/* like perf: the first frame after the locking internals (sched and lock text) */
	for (i = 0; i < nr; i++) {
		if (ksyms__is_lock_func(ctx->ksyms, ips[i])) {
			seen_lock = true;
			continue;
		}
		if (seen_lock)
			return i;
		if (first_plain < 0 && !ksyms__is_tracing_func(ctx->ksyms, ips[i]))
			first_plain = i;
	}
	return first_plain < 0 ? 0 : first_plain;
}

/* ---- JSON ---- */

void query_add_hex(cJSON *obj, const char *name, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "0x%" PRIx64, v);
	cJSON_AddStringToObject(obj, name, buf);
}

/*
 * Frame @i of a stack. Past the first, a user frame is a return address: it is looked up
 * one byte back, inside the call instruction, or the inline information would name the
 * code after the call (perf does the same).
 */
void query__frame(const struct query_ctx *ctx, const uint64_t *ips, uint32_t i, struct query_frame *fi)
{
	uint64_t ip = ips[i], back = i && (ip & ((1ULL << USYMS_MOD_SHIFT) - 1)) ? 1 : 0;
	const struct ksym *ks;
	struct uframe uf;

	memset(fi, 0, sizeof(*fi));
	fi->addr = ip;
	fi->kernel = !usyms__is_user(ip);
	if (!fi->kernel) {
		if (!ctx->usyms || !usyms__frame(ctx->usyms, ip - back, &uf))
			return;
		fi->addr = uf.addr + back;
		fi->sym = uf.sym;
		fi->offset = uf.offset + back;
		fi->module = uf.module;
		fi->path = uf.path;
		fi->build_id = uf.build_id;
		fi->inlined = uf.inlined;
		fi->nr_inlined = uf.nr_inlined;
		return;
	}
	ks = ctx->ksyms ? ksyms__func(ctx->ksyms, ip) : NULL;
	if (!ks)
		return;
	fi->sym = ks->name;
	fi->offset = ip - ks->addr;
	fi->module = ks->module ? ks->module : "kernel";
}

static void frame_name(const struct query_ctx *ctx, const uint64_t *ips, uint32_t i, char *buf,
		       size_t len)
{
	struct query_frame fi;

	query__frame(ctx, ips, i, &fi);
	if (fi.nr_inlined)	/* the call was made in the innermost inlined function */
		snprintf(buf, len, "%s (inlined in %s)", fi.inlined[0], fi.sym);
	else if (fi.sym)
		snprintf(buf, len, "%s+0x%" PRIx64, fi.sym, fi.offset);
	else if (fi.module)
		snprintf(buf, len, "%s+0x%" PRIx64, fi.module, fi.addr);
	else if (fi.kernel && ctx->hide_kernel_addrs)
		snprintf(buf, len, "[unknown]");
	else
		snprintf(buf, len, "0x%" PRIx64, fi.addr);
}

static void add_str_or_null(cJSON *o, const char *name, const char *v)
{
	if (v)
		cJSON_AddStringToObject(o, name, v);
	else
		cJSON_AddNullToObject(o, name);
}

/* An address, or null where it is a kernel one the client may not see. */
static void add_addr(cJSON *obj, const struct query_ctx *ctx, uint64_t v, bool kernel)
{
	if (kernel && ctx->hide_kernel_addrs)
		cJSON_AddNullToObject(obj, "addr");
	else
		query_add_hex(obj, "addr", v);
}

static cJSON *frame_json(const struct query_ctx *ctx, const struct query_frame *fi, const char *sym,
			 bool inlined)
{
	cJSON *f = cJSON_CreateObject();

	add_addr(f, ctx, fi->addr, fi->kernel);
	add_str_or_null(f, "sym", sym);
	/* an inlined function has no offset of its own: its code is inside sym's */
	if (sym && !inlined)
		cJSON_AddNumberToObject(f, "offset", fi->offset);
	else
		cJSON_AddNullToObject(f, "offset");
	add_str_or_null(f, "module", fi->module);
	if (fi->build_id && fi->build_id[0])
		cJSON_AddStringToObject(f, "build_id", fi->build_id);
	if (inlined)
		cJSON_AddBoolToObject(f, "inlined", true);
	return f;
}

/* Up to @max frames of stack @id; functions inlined at a frame come before it, as perf shows them. */
static cJSON *stack_json(const struct query_ctx *ctx, uint32_t id, int max)
{
	cJSON *arr = cJSON_CreateArray();
	uint64_t ips[LS_MAX_STACK_DEPTH];
	uint32_t nr, i, j;

	nr = stacks__get(ctx->stacks, id, ips, LS_MAX_STACK_DEPTH);
	for (i = 0; i < nr && (int)i < max; i++) {
		struct query_frame fi;

		query__frame(ctx, ips, i, &fi);
		for (j = 0; j < fi.nr_inlined; j++)
			cJSON_AddItemToArray(arr, frame_json(ctx, &fi, fi.inlined[j], true));
		cJSON_AddItemToArray(arr, frame_json(ctx, &fi, fi.sym, false));
	}
	return arr;
}

/* How stack @id was walked: "dwarf" (dump + CFI), "fp" (frame pointers) or "kernel" (ORC). */
static const char *unwind_method(const struct query_ctx *ctx, uint32_t id)
{
	uint64_t ip;

	if (stacks__flags(ctx->stacks, id) & LS_STACK_F_DWARF)
		return "dwarf";
	return stacks__get(ctx->stacks, id, &ip, 1) && !usyms__is_user(ip) ? "kernel" : "fp";
}

/*
 * Adds "stack" to @o with how it was walked ("unwind", "truncated"). Without a stack:
 * null, or an empty array where the field has always been an array (rows).
 */
void query__add_stack(cJSON *o, const struct query_ctx *ctx, uint32_t id, int max, bool null_if_none)
{
	if (id < LS_STACK_FIRST) {
		if (null_if_none)
			cJSON_AddNullToObject(o, "stack");
		else
			cJSON_AddItemToObject(o, "stack", cJSON_CreateArray());
		return;
	}
	cJSON_AddItemToObject(o, "stack", stack_json(ctx, id, max));
	cJSON_AddStringToObject(o, "unwind", unwind_method(ctx, id));
	cJSON_AddBoolToObject(o, "truncated", stacks__flags(ctx->stacks, id) & LS_STACK_F_TRUNCATED);
}

void query_caller_string(const struct query_ctx *ctx, uint32_t id, char *buf, size_t len)
{
	uint64_t ips[LS_MAX_STACK_DEPTH];
	uint32_t nr;

	if (id == LS_STACK_NONE) {
		snprintf(buf, len, "[not sampled]");
		return;
	}
	nr = stacks__get(ctx->stacks, id, ips, LS_MAX_STACK_DEPTH);
	if (!nr) {
		snprintf(buf, len, "[stack missing]");
		return;
	}
	frame_name(ctx, ips, query__caller_frame(ctx, ips, nr), buf, len);
}

/*
 * A blocking syscall's object: the descriptor it named (the key's lock is it + 1; 0:
 * none, or a set of them), and what it is now (/proc/PID/fd: "pipe:[12345]",
 * "anon_inode:[eventfd]", a path).
 */
static cJSON *blocking_object_json(const struct agg_key *k)
{
	cJSON *lock = cJSON_CreateObject();
	char what[256], buf[300];
	uint64_t fd = k->lock - 1;

	query_add_hex(lock, "addr", k->lock);
	if (!k->lock) {
		cJSON_AddNullToObject(lock, "name");
	} else {
		if (ls_proc_fd(k->pid, fd, what, sizeof(what)))
			snprintf(buf, sizeof(buf), "fd %" PRIu64, fd);
		else
			snprintf(buf, sizeof(buf), "fd %" PRIu64 ": %s", fd, what);
		cJSON_AddStringToObject(lock, "name", buf);
	}
	cJSON_AddBoolToObject(lock, "shared", false);
	return lock;
}

/* A user lock: its address, and where it lies when that is an image's data ("libuv.so.1+0x2f1c0"). */
static cJSON *ulock_json(const struct query_ctx *ctx, const struct agg_key *k)
{
	cJSON *lock;
	const char *module;
	uint64_t vaddr;
	char buf[320];

	if ((k->flags & ~LS_KIND_USER) > LS_UTYPE_BLOCK)	/* LS_UTYPE_BLOCK + enum ls_btype */
		return blocking_object_json(k);
	lock = cJSON_CreateObject();
	query_add_hex(lock, "addr", k->lock);
	if (k->object) {	/* a shared futex: an offset in a file every process maps */
		const char *path = ctx->usyms ? usyms__object_path(ctx->usyms, k->object) : NULL;

		snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, path ? path : "?", k->lock);
		cJSON_AddStringToObject(lock, "name", buf);
		cJSON_AddBoolToObject(lock, "shared", true);
		return lock;
	}
	if (ctx->usyms && !usyms__data(ctx->usyms, k->pid, k->lock, &module, &vaddr)) {
		snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, module, vaddr);
		cJSON_AddStringToObject(lock, "name", buf);
	} else {
		cJSON_AddNullToObject(lock, "name");
	}
	cJSON_AddBoolToObject(lock, "shared", false);
	return lock;
}

/* @v, or NULL (null in the JSON) when the row's processes differ in it or it is "" */
static const char *known(const char *v, bool differ)
{
	return differ || !*v ? NULL : v;
}

void query__add_cgroup(cJSON *o, const struct query_ctx *ctx, uint32_t pid, const bool many[CGROUP_BY_MAX])
{
	const struct ls_cgroup *c = ctx->cgroups ? cgroups__of(ctx->cgroups, pid) : NULL;
	bool by_cgroup = many && many[CGROUP_BY_CGROUP];
	const struct ls_pod *pod;
	cJSON *g;

	if (!c) {
		cJSON_AddNullToObject(o, "cgroup");
		return;
	}
	/* a field the row's processes differ in is null; "" (none: no unit, no pod) too */
	g = cJSON_AddObjectToObject(o, "cgroup");
	if (by_cgroup || !c->id)
		cJSON_AddNullToObject(g, "id");
	else
		cJSON_AddNumberToObject(g, "id", c->id);
	add_str_or_null(g, "path", known(c->path, by_cgroup));
	add_str_or_null(g, "unit", known(c->unit, many && many[CGROUP_BY_UNIT]));
	add_str_or_null(g, "container", known(c->container, by_cgroup));
	add_str_or_null(g, "pod", known(c->pod, many && many[CGROUP_BY_POD]));
	/* the pod's names, when the daemon fetches the pod list and it has this one */
	pod = many && many[CGROUP_BY_POD] ? NULL : cgroups__pod(ctx->cgroups, c);
	add_str_or_null(g, "namespace", pod ? pod->ns : NULL);
	add_str_or_null(g, "pod_name", pod ? pod->name : NULL);
}

void query__cgroup_mix(const struct cgroups *cg, uint32_t pid, struct cgroup_mix *m)
{
	static const uint32_t none[CGROUP_BY_MAX];
	const uint32_t *g = cg ? cgroups__groups(cg, pid) : NULL;
	int by;

	if (!g)
		g = none;
	for (by = 0; by < CGROUP_BY_MAX; by++) {
		if (!m->has)
			m->first[by] = g[by];
		else if (m->first[by] != g[by])
			m->many[by] = true;
	}
	m->has = true;
}

cJSON *query__lock_json(const struct query_ctx *ctx, const struct agg_key *k)
{
	cJSON *lock;
	const struct ksym *s = NULL;
	char buf[160];

	if (k->flags & LS_KIND_USER)
		return ulock_json(ctx, k);
	lock = cJSON_CreateObject();
	add_addr(lock, ctx, k->lock, true);
	if (k->name != LS_NAME_NONE && k->name < sizeof(lock_names) / sizeof(lock_names[0])) {
		cJSON_AddStringToObject(lock, "name", lock_names[k->name]);
		return lock;
	}
	if (ctx->ksyms)
		s = ksyms__data(ctx->ksyms, k->lock, LOCK_SYM_MAX_OFF);
	if (!s) {
		cJSON_AddNullToObject(lock, "name");
		return lock;
	}
	if (k->lock == s->addr)
		snprintf(buf, sizeof(buf), "%s", s->name);
	else
		snprintf(buf, sizeof(buf), "%s+0x%" PRIx64, s->name, k->lock - s->addr);
	cJSON_AddStringToObject(lock, "name", buf);
	return lock;
}

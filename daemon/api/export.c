// SPDX-License-Identifier: GPL-2.0
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <resolv.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include "api/export.h"
#include "api/export_int.h"
#include "decode/usyms.h"
#include "lib/htab.h"
#include "lib/vec.h"
#include "store/stacks.h"
#include "profile.pb-c.h"

static const char *const format_names[LS_EXPORT_MAX] = {
	[LS_EXPORT_JSON] = "json",
	[LS_EXPORT_PROMETHEUS] = "prometheus",
	[LS_EXPORT_PPROF] = "pprof",
	[LS_EXPORT_FOLDED] = "folded",
	[LS_EXPORT_DOT] = "dot",
};

static const char *const profile_names[LS_PROFILE_MAX] = {
	[LS_PROFILE_BLOCK] = "block",
	[LS_PROFILE_MUTEX] = "mutex",
	[LS_PROFILE_MECHANISM] = "mechanism",
};

/* The index of @s in @names (@n of them), or -EINVAL. */
static int name_index(const char *const *names, int n, const char *s)
{
	int i;

	for (i = 0; i < n; i++)
		if (!strcmp(s, names[i]))
			return i;
	return -EINVAL;
}

const char *ls_export_format_name(enum ls_export_format f)
{
	return f < LS_EXPORT_MAX ? format_names[f] : "?";
}

int ls_export_format_parse(const char *s, enum ls_export_format *f)
{
	int i = name_index(format_names, LS_EXPORT_MAX, s);

	if (i < 0)
		return i;
	*f = i;
	return 0;
}

const char *ls_profile_name(enum ls_profile p)
{
	return p < LS_PROFILE_MAX ? profile_names[p] : "?";
}

int ls_profile_parse(const char *s, enum ls_profile *p)
{
	int i = name_index(profile_names, LS_PROFILE_MAX, s);

	if (i < 0)
		return i;
	*p = i;
	return 0;
}

enum query_side export_side_of(enum ls_profile p)
{
	return p == LS_PROFILE_MUTEX ? QUERY_HOLDER : QUERY_WAITER;
}

/* The comm of whoever a wait is drawn under: the waiter, or the releaser/owner. */
const char *export_side_comm(const struct agg_key *k, const struct agg_val *v, enum query_side side)
{
	if (side == QUERY_WAITER)
		return v->comm;
	return k->releaser_tid ? v->releaser_comm : v->owner_comm;
}

void export_side_ids(const struct agg_key *k, enum query_side side, uint32_t *pid, uint32_t *tid)
{
	*pid = side == QUERY_WAITER ? k->pid : k->releaser_tid ? k->releaser_pid : k->owner_pid;
	*tid = side == QUERY_WAITER ? k->tid : k->releaser_tid ? k->releaser_tid : k->owner_tid;
}

/* A function's name: the symbol, else module+offset, else the bare address. */
void export_func_name(const struct query_ctx *ctx, const struct query_frame *fi, char *buf, size_t len)
{
	if (fi->sym)
		snprintf(buf, len, "%s", fi->sym);
	else if (fi->module)
		snprintf(buf, len, "%s+0x%" PRIx64, fi->module, fi->addr);
	else if (fi->kernel && ctx->hide_kernel_addrs)
		snprintf(buf, len, "[unknown]");
	else
		snprintf(buf, len, "0x%" PRIx64, fi->addr);
}

/* ---- folded ---- */

struct fold_key {
	uint32_t stack;
	int32_t type;		/* mechanism: the lock type's index and the class; -1: none */
	int32_t cls;
	char comm[LS_COMM_LEN];
};

struct fold_ctx {
	struct htab *lines;
	enum query_side side;
	bool by_mechanism;
};

static int fold_add(void *arg, const struct agg_key *k, const struct agg_val *v, uint32_t stack,
		    double fc, double fw, enum ls_wclass cls)
{
	struct fold_ctx *fc_ = arg;
	struct fold_key fk = { .stack = stack, .type = -1, .cls = -1 };
	double *w;

	(void)fc;
	if (fc_->by_mechanism) {
		fk.type = query__type_index(k->flags);
		fk.cls = cls;
	}
	snprintf(fk.comm, sizeof(fk.comm), "%s", export_side_comm(k, v, fc_->side));
	w = htab__upsert(fc_->lines, &fk, NULL, NULL);
	if (!w)
		return -ENOMEM;
	*w += v->st.total_ns * fw;
	return 0;
}

/* ';' separates frames and a line ends in " WEIGHT": neither may appear inside a name. */
static void fold_put(FILE *f, const char *name)
{
	for (; *name; name++)
		fputc(*name == ';' ? ':' : (*name == '\n' || *name == '\r') ? ' ' : *name, f);
}

static void fold_line(FILE *f, const struct query_ctx *ctx, const struct fold_key *fk, uint64_t weight)
{
	uint64_t ips[LS_MAX_STACK_DEPTH];
	struct query_frame fi;
	char name[320];
	uint32_t nr = 0, j;
	int i;

	if (fk->type >= 0)	/* the mechanism's root frames: "lock;wait:poll;" */
		fprintf(f, "%s;%s;", classify__name(fk->cls), ls_lock_types[fk->type].name);
	fold_put(f, fk->comm[0] ? fk->comm : "[unknown]");
	if (fk->stack == LS_STACK_NONE || fk->stack == LS_STACK_MISSING) {
		fprintf(f, ";%s", fk->stack == LS_STACK_NONE ? "[not sampled]" : "[stack missing]");
	} else {
		nr = stacks__get(ctx->stacks, fk->stack, ips, LS_MAX_STACK_DEPTH);
		for (i = (int)nr - 1; i >= 0; i--) {	/* root first */
			query__frame(ctx, ips, i, &fi);
			export_func_name(ctx, &fi, name, sizeof(name));
			fputc(';', f);
			fold_put(f, name);
			/* inlined functions are callees of the frame they sit in */
			for (j = fi.nr_inlined; j > 0; j--) {
				fputc(';', f);
				fold_put(f, fi.inlined[j - 1]);
			}
		}
	}
	fprintf(f, " %" PRIu64 "\n", weight);
}

struct fold_pick {
	const struct fold_key *key;
	uint64_t weight;
};

static int cmp_fold(const void *a, const void *b)
{
	const struct fold_pick *x = a, *y = b;

	return x->weight < y->weight ? 1 : x->weight > y->weight ? -1 : 0;
}

int export__folded(const struct agg_view *tab, const struct query *q, const struct query_ctx *ctx,
		   enum ls_profile p, struct export_buf *out)
{
	struct fold_ctx fc = { .side = export_side_of(p), .by_mechanism = p == LS_PROFILE_MECHANISM };
	struct fold_pick *picks = NULL;
	size_t nr = 0, cap = 0, iter = 0, i;
	const void *kp;
	void *vp;
	FILE *f = NULL;
	int err;

	out->data = NULL;
	out->len = 0;
	fc.lines = htab__new(sizeof(struct fold_key), sizeof(double), SIZE_MAX);
	if (!fc.lines)
		return -ENOMEM;
	err = query__for_each_wait(tab, q, fc.side, true, fold_add, &fc);
	while (!err && !htab__next(fc.lines, &iter, &kp, &vp)) {
		uint64_t w = llround(*(double *)vp);

		if (!w)		/* folded weights are positive integers */
			continue;
		if (ls_vec_reserve(&picks, &cap, nr, sizeof(*picks)))
			err = -ENOMEM;
		else
			picks[nr++] = (struct fold_pick){ kp, w };
	}
	if (!err && !(f = open_memstream(&out->data, &out->len)))
		err = -errno;
	if (!err) {
		ls_sort(picks, nr, sizeof(*picks), cmp_fold);
		for (i = 0; i < nr; i++)
			fold_line(f, ctx, picks[i].key, picks[i].weight);
		if (fclose(f))
			err = -ENOMEM;
	}
	free(picks);
	htab__free(fc.lines);
	if (err) {
		free(out->data);
		out->data = NULL;
	}
	return err;
}

char *export__base64(const void *data, size_t len)
{
	size_t cap = (len + 2) / 3 * 4 + 1;
	char *s = malloc(cap);

	if (s && b64_ntop(data, len, s, cap) < 0) {
		free(s);
		return NULL;
	}
	return s;
}

int export__write_file(const char *path, const void *data, size_t len)
{
	char tmp[PATH_MAX];
	const char *p = data;
	int fd, err = 0;
	ssize_t n;

	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (!err && len) {
		n = write(fd, p, len);
		if (n < 0 && errno != EINTR)
			err = -errno;
		else if (n > 0)
			p += n, len -= n;
	}
	/* mkstemp's 0600 would hide the file from node_exporter's user */
	if (!err && fchmod(fd, 0644))
		err = -errno;
	if (close(fd) && !err)
		err = -errno;
	if (!err && rename(tmp, path))
		err = -errno;
	if (err)
		unlink(tmp);
	return err;
}


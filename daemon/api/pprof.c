// SPDX-License-Identifier: GPL-2.0
/*
 * The pprof export (export.h): a window's waits as a gzipped profile.proto, one sample
 * per stack with its labels (pid, tid, comm, kind, type, lock), functions, locations and
 * mappings interned the way pprof expects them, the main binary's mapping first.
 */
#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "api/export.h"
#include "api/export_int.h"
#include "analyze/spin.h"
#include "decode/pods.h"
#include "decode/usyms.h"
#include "lib/htab.h"
#include "lib/vec.h"
#include "store/stacks.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__ValueType pb_value_type;

enum pprof_label { LBL_PID, LBL_TID, LBL_COMM, LBL_KIND, LBL_TYPE, LBL_LOCK, LBL_UNIT, LBL_NAMESPACE, LBL_POD, LBL_MAX };

static const char *const label_keys[LBL_MAX] = { "pid", "tid", "comm", "kind", "type", "lock", "unit",
							       "namespace", "pod" };

/* A profile being built: the string table and one id space per message kind. */
struct pprof {
	const struct query_ctx *ctx;
	enum query_side side;
	bool fleet;			/* export_span's: bounded labels only */
	uint64_t spin_period_ns;	/* a spin profile's (samples of this many ns each); 0: waits */
	char **strings;
	size_t nr_strings, cap_strings;
	struct htab *string_ids;	/* FNV-1a hash -> index (a collision only duplicates) */
	pb_function **funcs;
	size_t nr_funcs, cap_funcs;
	struct htab *func_ids;		/* name index -> id */
	pb_mapping **maps;
	size_t nr_maps, cap_maps;
	struct htab *map_ids;		/* path index -> id */
	pb_location **locs;
	size_t nr_locs, cap_locs;
	struct htab *loc_ids;		/* struct loc_key -> id */
	struct htab *samples;		/* struct sample_key -> struct sample_val */
	int64_t label_key[LBL_MAX];
};

struct loc_key {
	uint64_t code;
	uint32_t back;		/* a return address (looked up one byte back) */
	uint32_t pad;
};

struct sample_key {
	uint64_t lock;
	uint32_t stack, pid, tid, flags, name, object;
	uint32_t unit;		/* fleet: cgroups__group(CGROUP_BY_UNIT), in place of the rest */
	uint32_t pod;		/* fleet: cgroups__group(CGROUP_BY_POD) (cgroupfs pods have no unit) */
};

struct sample_val {
	double count;
	double value;		/* the second sample type's: delay ns (waits), CPU ns (spin) */
	char comm[LS_COMM_LEN];
	char lock_name[160];
	char unit[256];		/* fleet: the unit's name, "" none */
	const struct ls_pod *pod;	/* fleet: its Kubernetes pod, when named; NULL none */
};

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
	return h;
}

/* The string table index of @s; -1 when out of memory. */
static int64_t pp_str(struct pprof *pp, const char *s)
{
	uint64_t h = fnv1a(s);
	int created;
	uint32_t *idx = htab__upsert(pp->string_ids, &h, &created, NULL);

	if (!idx)
		return -1;
	if (!created && !strcmp(pp->strings[*idx], s))
		return *idx;
	if (ls_vec_reserve(&pp->strings, &pp->cap_strings, pp->nr_strings, sizeof(char *)))
		return -1;
	pp->strings[pp->nr_strings] = strdup(s);
	if (!pp->strings[pp->nr_strings])
		return -1;
	if (created)
		*idx = pp->nr_strings;
	return pp->nr_strings++;
}

/* The id of the function named @name. */
static uint64_t pp_func(struct pprof *pp, const char *name)
{
	int64_t n = pp_str(pp, name);
	int created;
	uint64_t *id;
	pb_function *fn;

	if (n < 0 || !(id = htab__upsert(pp->func_ids, &n, &created, NULL)))
		return 0;
	if (!created)
		return *id;
	if (ls_vec_reserve(&pp->funcs, &pp->cap_funcs, pp->nr_funcs, sizeof(*pp->funcs)) ||
	    !(fn = calloc(1, sizeof(*fn))))
		return 0;
	perftools__profiles__function__init(fn);
	fn->id = pp->nr_funcs + 1;
	fn->name = fn->system_name = n;
	pp->funcs[pp->nr_funcs++] = fn;
	return *id = fn->id;
}

/*
 * The mapping of a frame's module. User frames carry file offsets, so a module's mapping
 * starts at 0 with file offset 0: pprof's address arithmetic then yields the offset back.
 * The kernel is one mapping over the kernel half of the address space.
 */
static uint64_t pp_mapping(struct pprof *pp, const struct query_frame *fi)
{
	const char *path = fi->kernel ? "[kernel.kallsyms]" : fi->path ? fi->path : fi->module;
	int64_t n;
	int created;
	uint64_t *id;
	pb_mapping *m;

	if (!path || (n = pp_str(pp, path)) < 0 || !(id = htab__upsert(pp->map_ids, &n, &created, NULL)))
		return 0;
	if (!created)
		return *id;
	if (ls_vec_reserve(&pp->maps, &pp->cap_maps, pp->nr_maps, sizeof(*pp->maps)) ||
	    !(m = calloc(1, sizeof(*m))))
		return 0;
	perftools__profiles__mapping__init(m);
	m->id = pp->nr_maps + 1;
	m->filename = n;
	if (fi->kernel) {
		m->memory_start = USYMS_KERNEL_MIN;
		m->memory_limit = UINT64_MAX;
	} else {
		m->memory_limit = 1ULL << USYMS_MOD_SHIFT;	/* offsets are below this */
		m->build_id = fi->build_id && fi->build_id[0] ? pp_str(pp, fi->build_id) : 0;
	}
	m->has_functions = true;
	m->has_inline_frames = true;
	pp->maps[pp->nr_maps++] = m;
	return *id = m->id;
}

static pb_line *pp_line(struct pprof *pp, const char *name)
{
	pb_line *l = calloc(1, sizeof(*l));

	if (l) {
		perftools__profiles__line__init(l);
		l->function_id = pp_func(pp, name);
	}
	return l;
}

/* A frame's function and the functions inlined into it, innermost first, as the lines. */
static void pp_frame_lines(struct pprof *pp, pb_location *loc, const uint64_t *ips, uint32_t i)
{
	struct query_frame fi;
	char name[320];
	uint32_t j;

	query__frame(pp->ctx, ips, i, &fi);
	export_func_name(pp->ctx, &fi, name, sizeof(name));
	loc->mapping_id = pp_mapping(pp, &fi);
	loc->address = fi.kernel && pp->ctx->hide_kernel_addrs ? 0 : fi.addr;
	loc->line = calloc(fi.nr_inlined + 1, sizeof(*loc->line));
	if (!loc->line)
		return;
	for (j = 0; j < fi.nr_inlined; j++)
		if ((loc->line[loc->n_line] = pp_line(pp, fi.inlined[j])))
			loc->n_line++;
	if ((loc->line[loc->n_line] = pp_line(pp, name)))
		loc->n_line++;
}

/*
 * The location of frame @i of @ips, one per address; with @ips NULL, a frame of its own
 * for waits without a stack (@no_stack: LS_STACK_NONE, not sampled, or _MISSING), so that
 * their time is not lost. No real frame has code 0.
 */
static uint64_t pp_location(struct pprof *pp, const uint64_t *ips, uint32_t i, uint32_t no_stack)
{
	struct loc_key lk = { .code = ips ? ips[i] : 0, .back = ips ? i > 0 : no_stack };
	int created;
	uint64_t *id = htab__upsert(pp->loc_ids, &lk, &created, NULL);
	pb_location *loc;

	if (!id)
		return 0;
	if (!created)
		return *id;
	if (ls_vec_reserve(&pp->locs, &pp->cap_locs, pp->nr_locs, sizeof(*pp->locs)) ||
	    !(loc = calloc(1, sizeof(*loc))))
		return 0;
	perftools__profiles__location__init(loc);
	loc->id = pp->nr_locs + 1;
	if (ips) {
		pp_frame_lines(pp, loc, ips, i);
	} else if ((loc->line = calloc(1, sizeof(*loc->line))) &&
		   (loc->line[0] = pp_line(pp, no_stack == LS_STACK_NONE ? "[not sampled]" : "[stack missing]"))) {
		loc->n_line = 1;
	}
	pp->locs[pp->nr_locs++] = loc;
	return *id = loc->id;
}

/*
 * A fleet's sample (bounded labels): @sk with the unit and pod of process @pid in it, one
 * sample for every thread and lock of the unit; created with the unit's and pod's names
 * (the pods' are kept by the cgroups table while the profile is made).
 */
static struct sample_val *fleet_sample(struct pprof *pp, uint32_t pid, struct sample_key *sk)
{
	const uint32_t *groups = pp->ctx->cgroups ? cgroups__groups(pp->ctx->cgroups, pid) : NULL;
	struct sample_val *sv;
	int created;

	if (groups) {
		sk->unit = groups[CGROUP_BY_UNIT];
		sk->pod = groups[CGROUP_BY_POD];
	}
	sv = htab__upsert(pp->samples, sk, &created, NULL);
	if (sv && created) {
		const struct ls_cgroup *cg = sk->unit || sk->pod ? cgroups__of(pp->ctx->cgroups, pid) : NULL;

		snprintf(sv->unit, sizeof(sv->unit), "%s", cg && sk->unit ? cg->unit : "");
		sv->pod = cg && sk->pod ? cgroups__pod(pp->ctx->cgroups, cg) : NULL;
	}
	return sv;
}

static int pp_add(void *arg, const struct agg_key *k, const struct agg_val *v, uint32_t stack,
		  double fc, double fw, enum ls_wclass cls)
{
	struct pprof *pp = arg;
	struct sample_key sk = { .lock = k->lock, .stack = stack, .flags = k->flags, .name = k->name,
				 .object = k->object };
	struct sample_val *sv;
	int created = 0;

	(void)cls;
	if (pp->fleet) {
		sk = (struct sample_key){ .stack = stack, .flags = k->flags };
		sv = fleet_sample(pp, k->pid, &sk);
	} else {
		export_side_ids(k, pp->side, &sk.pid, &sk.tid);
		sv = htab__upsert(pp->samples, &sk, &created, NULL);
	}
	if (!sv)
		return -ENOMEM;
	if (created) {
		cJSON *lock = query__lock_json(pp->ctx, k);
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(lock, "name"));
		const char *addr = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(lock, "addr"));

		snprintf(sv->comm, sizeof(sv->comm), "%s", export_side_comm(k, v, pp->side));
		snprintf(sv->lock_name, sizeof(sv->lock_name), "%s", name ? name : addr ? addr : "[unknown]");
		cJSON_Delete(lock);
	}
	sv->count += v->st.count * fc;
	sv->value += v->st.total_ns * fw;
	return 0;
}

static pb_label *pp_label(struct pprof *pp, enum pprof_label key, const char *str, int64_t num)
{
	pb_label *l = calloc(1, sizeof(*l));

	if (l) {
		perftools__profiles__label__init(l);
		l->key = pp->label_key[key];
		if (str)
			l->str = pp_str(pp, str);
		else
			l->num = num;
	}
	return l;
}

/* A fleet sample's place: its unit, and its pod's namespace and name when known. */
static void fleet_labels(struct pprof *pp, const struct sample_val *sv, pb_sample *s)
{
	if (sv->unit[0])
		s->label[s->n_label++] = pp_label(pp, LBL_UNIT, sv->unit, 0);
	if (sv->pod) {
		s->label[s->n_label++] = pp_label(pp, LBL_NAMESPACE, sv->pod->ns, 0);
		s->label[s->n_label++] = pp_label(pp, LBL_POD, sv->pod->name, 0);
	}
}

static pb_sample *pp_sample(struct pprof *pp, const struct sample_key *sk, const struct sample_val *sv)
{
	pb_sample *s = calloc(1, sizeof(*s));
	uint64_t ips[LS_MAX_STACK_DEPTH];
	uint32_t nr = 0, i;
	int type = query__type_index(sk->flags);

	if (!s)
		return NULL;
	perftools__profiles__sample__init(s);
	if (sk->stack >= LS_STACK_FIRST)
		nr = stacks__get(pp->ctx->stacks, sk->stack, ips, LS_MAX_STACK_DEPTH);
	s->location_id = calloc(nr ? nr : 1, sizeof(*s->location_id));
	s->value = calloc(2, sizeof(*s->value));
	s->label = calloc(LBL_MAX, sizeof(*s->label));
	if (!s->location_id || !s->value || !s->label)
		return s;
	for (i = 0; i < nr; i++)		/* leaf first, as the stacks are kept */
		s->location_id[s->n_location_id++] = pp_location(pp, ips, i, 0);
	if (!nr)
		s->location_id[s->n_location_id++] = pp_location(pp, NULL, 0, sk->stack);
	s->value[0] = llround(sv->count);
	s->value[1] = llround(sv->value);
	s->n_value = 2;
	if (pp->spin_period_ns) {	/* kind: the loop the samples landed in */
		fleet_labels(pp, sv, s);
		s->label[s->n_label++] = pp_label(pp, LBL_KIND, sk->flags ? "busy_poll" : "pause_spin", 0);
		return s;
	}
	if (pp->fleet) {
		fleet_labels(pp, sv, s);
	} else {
		s->label[s->n_label++] = pp_label(pp, LBL_PID, NULL, sk->pid);
		s->label[s->n_label++] = pp_label(pp, LBL_TID, NULL, sk->tid);
		s->label[s->n_label++] = pp_label(pp, LBL_COMM, sv->comm, 0);
	}
	s->label[s->n_label++] = pp_label(pp, LBL_KIND, sk->flags & LS_KIND_USER ? "user" : "kernel", 0);
	s->label[s->n_label++] = pp_label(pp, LBL_TYPE, ls_lock_types[type].name, 0);
	if (!pp->fleet)
		s->label[s->n_label++] = pp_label(pp, LBL_LOCK, sv->lock_name, 0);
	return s;
}

static pb_value_type *pp_value_type(struct pprof *pp, const char *type, const char *unit)
{
	pb_value_type *vt = calloc(1, sizeof(*vt));

	if (vt) {
		perftools__profiles__value_type__init(vt);
		vt->type = pp_str(pp, type);
		vt->unit = pp_str(pp, unit);
	}
	return vt;
}

static int gzip_buf(const uint8_t *in, size_t len, struct export_buf *out)
{
	z_stream zs = {};
	size_t cap;
	int ret;

	/* windowBits 15 + 16: a gzip stream, which is what pprof files are */
	if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -ENOMEM;
	cap = deflateBound(&zs, len);
	out->data = malloc(cap);
	zs.next_in = (uint8_t *)in;
	zs.avail_in = len;
	zs.next_out = (uint8_t *)out->data;
	zs.avail_out = cap;
	ret = out->data ? deflate(&zs, Z_FINISH) : Z_MEM_ERROR;
	out->len = zs.total_out;
	deflateEnd(&zs);
	if (ret != Z_STREAM_END) {
		free(out->data);
		out->data = NULL;
		return -ENOMEM;
	}
	return 0;
}

static void pp_free(struct pprof *pp, pb_profile *prof)
{
	size_t i, j;

	for (i = 0; i < prof->n_sample; i++) {
		pb_sample *s = prof->sample[i];

		if (!s)
			continue;
		for (j = 0; j < s->n_label; j++)
			free(s->label[j]);
		free(s->label);
		free(s->value);
		free(s->location_id);
		free(s);
	}
	free(prof->sample);
	for (i = 0; i < prof->n_sample_type; i++)
		free(prof->sample_type[i]);
	free(prof->sample_type);
	free(prof->period_type);
	for (i = 0; i < pp->nr_locs; i++) {
		for (j = 0; j < pp->locs[i]->n_line; j++)
			free(pp->locs[i]->line[j]);
		free(pp->locs[i]->line);
		free(pp->locs[i]);
	}
	free(pp->locs);
	for (i = 0; i < pp->nr_funcs; i++)
		free(pp->funcs[i]);
	free(pp->funcs);
	for (i = 0; i < pp->nr_maps; i++)
		free(pp->maps[i]);
	free(pp->maps);
	for (i = 0; i < pp->nr_strings; i++)
		free(pp->strings[i]);
	free(pp->strings);
	htab__free(pp->string_ids);
	htab__free(pp->func_ids);
	htab__free(pp->map_ids);
	htab__free(pp->loc_ids);
	htab__free(pp->samples);
}

/*
 * pprof takes the first mapping for the profiled binary (its "File:" line): with one
 * process asked for, that is its executable.
 */
static void main_mapping_first(struct pprof *pp, uint32_t pid)
{
	char link[64], exe[PATH_MAX];
	pb_mapping *tmp;
	ssize_t n;
	size_t i;

	snprintf(link, sizeof(link), "/proc/%u/exe", pid);
	if (!pid || (n = readlink(link, exe, sizeof(exe) - 1)) < 0)
		return;
	exe[n] = 0;
	for (i = 1; i < pp->nr_maps; i++) {
		if (strcmp(pp->strings[pp->maps[i]->filename], exe))
			continue;
		tmp = pp->maps[0];
		pp->maps[0] = pp->maps[i];
		pp->maps[i] = tmp;
		return;
	}
}

/* The tables a profile is built in, and the labels' names. */
static int pp_begin(struct pprof *pp)
{
	int i;

	pp->string_ids = htab__new(sizeof(uint64_t), sizeof(uint32_t), SIZE_MAX);
	pp->func_ids = htab__new(sizeof(int64_t), sizeof(uint64_t), SIZE_MAX);
	pp->map_ids = htab__new(sizeof(int64_t), sizeof(uint64_t), SIZE_MAX);
	pp->loc_ids = htab__new(sizeof(struct loc_key), sizeof(uint64_t), SIZE_MAX);
	pp->samples = htab__new(sizeof(struct sample_key), sizeof(struct sample_val), SIZE_MAX);
	if (!pp->string_ids || !pp->func_ids || !pp->map_ids || !pp->loc_ids || !pp->samples ||
	    pp_str(pp, "") != 0)	/* index 0 is always the empty string */
		return -ENOMEM;
	for (i = 0; i < LBL_MAX; i++)
		pp->label_key[i] = pp_str(pp, label_keys[i]);
	return 0;
}

/*
 * The samples gathered in @pp as a gzip'd profile into @out, with sample types @types
 * ({type, unit} twice), the first the period's, every @period; frees @pp's tables.
 */
static int pp_encode(struct pprof *pp, const char *const types[2][2], int64_t period,
		     const struct export_span *span, uint32_t main_pid, struct export_buf *out)
{
	pb_profile prof = PERFTOOLS__PROFILES__PROFILE__INIT;
	size_t iter = 0, n = 0, len;
	uint8_t *packed = NULL;
	const void *kp;
	int err = -ENOMEM;
	void *vp;

	prof.sample_type = calloc(2, sizeof(*prof.sample_type));
	prof.period_type = pp_value_type(pp, types[0][0], types[0][1]);
	if (!prof.sample_type || !prof.period_type)
		goto cleanup;
	prof.sample_type[prof.n_sample_type++] = pp_value_type(pp, types[0][0], types[0][1]);
	prof.sample_type[prof.n_sample_type++] = pp_value_type(pp, types[1][0], types[1][1]);
	prof.period = period;
	prof.time_nanos = span->start_unix_ns;
	prof.duration_nanos = span->duration_ns;
	prof.sample = calloc(htab__count(pp->samples) + 1, sizeof(*prof.sample));
	if (!prof.sample)
		goto cleanup;
	while (!htab__next(pp->samples, &iter, &kp, &vp)) {
		if (!(prof.sample[n] = pp_sample(pp, kp, vp)))
			goto cleanup;
		prof.n_sample = ++n;
	}
	main_mapping_first(pp, main_pid);
	prof.location = pp->locs;
	prof.n_location = pp->nr_locs;
	prof.function = pp->funcs;
	prof.n_function = pp->nr_funcs;
	prof.mapping = pp->maps;
	prof.n_mapping = pp->nr_maps;
	prof.string_table = pp->strings;
	prof.n_string_table = pp->nr_strings;
	len = perftools__profiles__profile__get_packed_size(&prof);
	packed = malloc(len ? len : 1);
	if (!packed)
		goto cleanup;
	perftools__profiles__profile__pack(&prof, packed);
	err = gzip_buf(packed, len, out);
cleanup:
	free(packed);
	pp_free(pp, &prof);
	return err;
}

int export__pprof(const struct agg_view *tab, const struct query *q, const struct query_ctx *ctx,
		  enum ls_profile p, const struct export_span *span, struct export_buf *out)
{
	/* Go's contention profiles: [contentions/count, delay/nanoseconds], every event counted */
	static const char *const types[2][2] = { { "contentions", "count" }, { "delay", "nanoseconds" } };
	struct pprof pp = { .ctx = ctx, .side = export_side_of(p), .fleet = span->fleet };
	pb_profile none = PERFTOOLS__PROFILES__PROFILE__INIT;
	int err;

	out->data = NULL;
	out->len = 0;
	if ((err = pp_begin(&pp)) || (err = query__for_each_wait(tab, q, pp.side, true, pp_add, &pp))) {
		pp_free(&pp, &none);
		return err;
	}
	return pp_encode(&pp, types, 1, span, q->pid, out);
}

int export__spin_pprof(const struct htab *samples, uint64_t period_ns, const struct query_ctx *ctx,
		       const struct export_span *span, struct export_buf *out)
{
	/* as a CPU profile: samples, and the CPU time they stand for */
	static const char *const types[2][2] = { { "samples", "count" }, { "cpu", "nanoseconds" } };
	struct pprof pp = { .ctx = ctx, .fleet = true, .spin_period_ns = period_ns };
	pb_profile none = PERFTOOLS__PROFILES__PROFILE__INIT;
	size_t iter = 0;
	const void *kp;
	void *vp;
	int err;

	out->data = NULL;
	out->len = 0;
	if ((err = pp_begin(&pp)))
		goto fail;
	while (!htab__next(samples, &iter, &kp, &vp)) {
		const struct spin_sample_key *k = kp;
		/* one sample per stack, loop and unit */
		struct sample_key sk = { .stack = k->stack, .flags = k->poll };
		struct sample_val *sv = fleet_sample(&pp, k->pid, &sk);

		if (!sv) {
			err = -ENOMEM;
			goto fail;
		}
		sv->count += *(const double *)vp;
		sv->value += *(const double *)vp * period_ns;
	}
	return pp_encode(&pp, types, period_ns, span, 0, out);
fail:
	pp_free(&pp, &none);
	return err;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * User frames named (usyms__frame): blazesym over the module's ELF or its debug file,
 * inlined functions kept, names cached; modules without symbols counted for status and
 * their debug files fetched by debuginfod in the background when configured.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <blazesym.h>
#include "decode/debuginfo.h"
#include "decode/usyms.h"
#include "decode/usyms_int.h"
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/log.h"

void usyms_syms_free(struct htab *syms)
{
	const void *k;
	size_t it = 0;
	void *v;

	while (syms && !htab__next(syms, &it, &k, &v)) {
		struct sym_val *sv = v;
		uint32_t i;

		free(sv->name);
		for (i = 0; i < sv->nr_inlined; i++)
			free(sv->inlined[i]);
		free(sv->inlined);
	}
}

/*
 * A symbolizer that searches the system's debug directories and, with debuginfod on, the
 * directory fetched files are linked into. Made at a cache miss when there is none: at
 * the first, after a fetched debug file landed (blazesym keeps what it found, and did not
 * find, per file) and after an idle one was let go (symbolizer_idle()).
 */
static int symbolizer_new(struct usyms *u)
{
	const char *dirs[NR_SYSTEM_DEBUG_DIRS + 1];
	struct blaze_symbolizer_opts sym_opts = {
		.type_size = sizeof(sym_opts),
		/* line info is what blazesym reads inlined functions from */
		.code_info = true,
		.inlined_fns = true,
		.demangle = true,
	};
	size_t n = NR_SYSTEM_DEBUG_DIRS;

	memcpy(dirs, system_debug_dirs, sizeof(system_debug_dirs));
	if (u->debuginfo) {
		dirs[n++] = debuginfo__dir(u->debuginfo);
		sym_opts.debug_dirs = dirs;
		sym_opts.debug_dirs_len = n;
	}
	u->symbolizer = blaze_symbolizer_new_opts(&sym_opts);
	u->symbolizer_used_ns = ls_now_ns();
	return u->symbolizer ? 0 : -EINVAL;
}

/*
 * Frees the symbolizer once it went idle_ns without a lookup, and gives the heap's free
 * pages back to the system: most of what it held were small allocations (blazesym's parsed
 * DWARF: ~14 MB after naming frames of glibc from its debug file), which free() keeps in
 * the heap.
 */
static void symbolizer_idle(struct usyms *u, uint64_t now_ns)
{
	if (!u->symbolizer || !u->symbolizer_idle_ns || now_ns - u->symbolizer_used_ns < u->symbolizer_idle_ns)
		return;
	blaze_symbolizer_free(u->symbolizer);
	u->symbolizer = NULL;
	u->stats.releases++;
	malloc_trim(0);
}

/* blazesym lists inlined calls outermost first; stacks read innermost first. */
static void keep_inlined(struct sym_val *sv, const struct blaze_sym *sym)
{
	size_t i, n = sym->inlined_cnt;

	if (!n || !(sv->inlined = calloc(n, sizeof(*sv->inlined))))
		return;
	for (i = 0; i < n; i++) {
		const char *name = sym->inlined[n - 1 - i].name;

		if (name && (sv->inlined[sv->nr_inlined] = strndup(name, SYM_NAME_MAX)))
			sv->nr_inlined++;
	}
}

static void symbolize(struct usyms *u, const struct umod *m, uint64_t file_off, struct sym_val *sv)
{
	blaze_symbolize_src_elf src = {
		.type_size = sizeof(src),
		.path = usyms_mod_path(m),
		.debug_syms = true,
	};
	const struct blaze_syms *syms;

	if (!u->symbolizer && symbolizer_new(u))
		return;
	u->symbolizer_used_ns = ls_now_ns();
	syms = blaze_symbolize_elf_file_offsets(u->symbolizer, &src, &file_off, 1);
	if (!syms)
		return;
	if (syms->cnt == 1 && syms->syms[0].name) {
		sv->name = strndup(syms->syms[0].name, SYM_NAME_MAX);
		sv->offset = syms->syms[0].offset;
		keep_inlined(sv, &syms->syms[0]);
	}
	blaze_syms_free(syms);
}

/* A frame of @m stayed unnamed for want of symbols: note it, and ask debuginfod once. */
static void want_symbols(struct usyms *u, struct umod *m)
{
	m->unnamed++;
	if (!u->debuginfo || m->fetch != MOD_FETCH_NONE || !m->build_id[0])
		return;
	m->fetch = MOD_FETCH_PENDING;
	debuginfo__want(u->debuginfo, m->build_id);
}

/* Forgets every frame looked up: the next lookups use the debug files that arrived. */
static void syms_forget(struct usyms *u)
{
	usyms_syms_free(u->syms);
	htab__clear(u->syms);
}

static void on_fetched(void *ctx, const char *build_id, int err)
{
	struct usyms *u = ctx;
	bool landed = false;
	uint32_t i;

	for (i = 0; i < u->nr_mods; i++) {
		struct umod *m = &u->mods[i];

		if (m->fetch != MOD_FETCH_PENDING || strcmp(m->build_id, build_id))
			continue;
		m->fetch = err ? MOD_FETCH_FAILED : MOD_FETCH_DONE;
		if (err)
			continue;
		m->syms = MOD_SYMS_FULL;
		m->unnamed = 0;
		landed = true;
	}
	if (!landed)
		return;
	/* the next frame to name makes a symbolizer that looks in the new file */
	blaze_symbolizer_free(u->symbolizer);
	u->symbolizer = NULL;
	syms_forget(u);
}

void usyms__poll(struct usyms *u)
{
	if (u->debuginfo)
		debuginfo__poll(u->debuginfo, on_fetched, u);
	symbolizer_idle(u, ls_now_ns());
}

static const char *fetch_state(const struct usyms *u, const struct umod *m)
{
	static const char *const names[] = {
		[MOD_FETCH_NONE] = "not asked",
		[MOD_FETCH_PENDING] = "fetching",
		[MOD_FETCH_DONE] = "fetched",
		[MOD_FETCH_FAILED] = "not found",
	};

	return u->debuginfo ? names[m->fetch] : "off";
}

void usyms__missing(struct usyms *u, usyms_missing_fn fn, void *ctx)
{
	uint32_t i;

	for (i = 0; i < u->nr_mods; i++) {
		const struct umod *m = &u->mods[i];
		struct usyms_missing miss = {
			.module = m->name,
			.path = m->path,
			.build_id = m->build_id,
			.unnamed = m->unnamed,
			.debuginfod = fetch_state(u, m),
		};

		if (m->syms == MOD_SYMS_DYNAMIC && m->unnamed)
			fn(ctx, &miss);
	}
}

const char *usyms__debuginfod_urls(const struct usyms *u)
{
	return u->debuginfo ? debuginfo__urls(u->debuginfo) : NULL;
}

/* @code's module and address in it into @f; the module, NULL where it has none. */
static struct umod *frame_module(struct usyms *u, uint64_t code, struct uframe *f)
{
	uint32_t mod = code >> USYMS_MOD_SHIFT;
	struct umod *m;

	memset(f, 0, sizeof(*f));
	if (!usyms__is_user(code))
		return NULL;
	if (code & USYMS_RAW) {
		f->addr = code & ~USYMS_RAW;
		return NULL;
	}
	if (!mod || mod > u->nr_mods)
		return NULL;
	m = &u->mods[mod - 1];
	usyms_read_elf(u, m);
	f->addr = code & ((1ULL << USYMS_MOD_SHIFT) - 1);
	f->module = m->name;
	f->path = m->path;
	f->build_id = m->build_id;
	return m;
}

bool usyms__frame_module(struct usyms *u, uint64_t code, struct uframe *f)
{
	frame_module(u, code, f);
	return usyms__is_user(code);
}

bool usyms__frame(struct usyms *u, uint64_t code, struct uframe *f)
{
	struct umod *m = frame_module(u, code, f);
	struct sym_val *sv;
	int created = 0;

	if (!m)
		return usyms__is_user(code);
	sv = htab__upsert(u->syms, &code, &created, NULL);
	if (sv && created) {
		symbolize(u, m, f->addr, sv);
		u->stats.symbolized++;
		if (!sv->name) {
			u->stats.unresolved++;
			if (m->syms == MOD_SYMS_DYNAMIC)
				want_symbols(u, m);
		}
	} else if (sv) {
		u->stats.cache_hits++;
	}
	if (sv && sv->name) {
		f->sym = sv->name;
		f->offset = sv->offset;
		f->inlined = (const char *const *)sv->inlined;
		f->nr_inlined = sv->nr_inlined;
	} else if (!sv) {
		u->stats.unresolved++;	/* the symbol cache is full */
	}
	return true;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * User symbols (usyms.h): each process's mappings read from /proc and cached, its modules
 * interned by file (device, inode) with their build ids, and addresses normalized to
 * (module, file offset) so stacks of every process share modules.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <blazesym.h>
#include "decode/debuginfo.h"
#include "decode/usyms.h"
#include "decode/usyms_int.h"
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/log.h"

static void procs_free(struct htab *procs)
{
	const void *k;
	size_t it = 0;
	void *v;

	while (procs && !htab__next(procs, &it, &k, &v))
		free(((struct uproc *)v)->vmas);
}

int usyms__new(const struct usyms_opts *opts, struct usyms **out)
{
	struct debuginfo_opts dopts = { .dir = opts->debuginfod_dir };
	struct usyms *u = calloc(1, sizeof(*u));
	int err = -ENOMEM;

	if (!u)
		return -ENOMEM;
	u->max_procs = opts->max_procs;
	u->symbolizer_idle_ns = opts->idle_ns;
	u->procs = htab__new(sizeof(uint32_t), sizeof(struct uproc), opts->max_procs);
	u->mod_index = htab__new(sizeof(struct mod_key), sizeof(uint32_t), MAX_MODULES);
	u->syms = htab__new(sizeof(uint64_t), sizeof(struct sym_val), SYM_CACHE_MAX);
	if (!u->procs || !u->mod_index || !u->syms)
		goto cleanup;
	/* without servers (or a place for their files) symbols come from the machine only */
	err = debuginfo__new(&dopts, &u->debuginfo);
	if (err && err != -ENOENT)
		pr_warn("debuginfod off: %s\n", strerror(-err));
	/* the symbolizer is made at the first frame to name (symbolize.c) */
	elf_version(EV_CURRENT);
	*out = u;
	return 0;
cleanup:
	usyms__free(u);
	return err;
}

void usyms__free(struct usyms *u)
{
	uint32_t i;

	if (!u)
		return;
	procs_free(u->procs);
	htab__free(u->procs);
	htab__free(u->mod_index);
	usyms_syms_free(u->syms);
	htab__free(u->syms);
	for (i = 0; i < u->nr_mods; i++) {
		free(u->mods[i].path);
		if (u->mods[i].fd >= 0)
			close(u->mods[i].fd);
	}
	free(u->mods);
	debuginfo__free(u->debuginfo);
	blaze_symbolizer_free(u->symbolizer);
	free(u);
}

/* @fd is the file (dev, ino) maps named, not another one at the same path. */
static bool same_file(int fd, uint64_t dev, uint64_t ino)
{
	struct stat st;

	return fd >= 0 && !fstat(fd, &st) && st.st_dev == dev && st.st_ino == ino;
}

/*
 * Opens the file a mapping of @pid maps: through the mapping itself (map_files, which needs
 * CAP_SYS_ADMIN), through the process's root (containers), or by the path as maps gives it
 * (the same mount namespace). The one that is the right file (dev, ino) is kept open.
 */
static void mod_open(struct umod *m, uint32_t pid, const struct uvma *v)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "/proc/%u/map_files/%" PRIx64 "-%" PRIx64, pid, v->start, v->end);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (!same_file(fd, m->dev, m->ino)) {
		if (fd >= 0)
			close(fd);
		fd = -1;
		if (snprintf(path, sizeof(path), "/proc/%u/root%s", pid, m->path) < (int)sizeof(path))
			fd = open(path, O_RDONLY | O_CLOEXEC);
	}
	if (!same_file(fd, m->dev, m->ino)) {
		if (fd >= 0)
			close(fd);
		fd = open(m->path, O_RDONLY | O_CLOEXEC);
	}
	if (!same_file(fd, m->dev, m->ino)) {
		if (fd >= 0)
			close(fd);
		return;
	}
	m->fd = fd;
	snprintf(m->open_path, sizeof(m->open_path), "/proc/self/fd/%d", fd);
}

/* The path the module's file opens by: the descriptor held open, else the maps' path. */
const char *usyms_mod_path(const struct umod *m)
{
	return m->fd >= 0 ? m->open_path : m->path;
}

static int mod_intern(struct usyms *u, uint64_t dev, uint64_t ino, const char *path, uint32_t pid,
		      const struct uvma *v, uint32_t *idx)
{
	struct mod_key k = { dev, ino };
	uint32_t *ip;
	int created, err = 0;

	ip = htab__upsert(u->mod_index, &k, &created, &err);
	if (!ip)
		return err;
	if (!created) {
		*idx = *ip;
		return 0;
	}
	if (u->nr_mods == u->cap_mods) {
		uint32_t cap = u->cap_mods ? u->cap_mods * 2 : 64;
		struct umod *n = realloc(u->mods, cap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		u->mods = n;
		u->cap_mods = cap;
	}
	memset(&u->mods[u->nr_mods], 0, sizeof(struct umod));
	u->mods[u->nr_mods].path = strdup(path);
	if (!u->mods[u->nr_mods].path)
		return -ENOMEM;
	u->mods[u->nr_mods].name = strrchr(path, '/') ? strrchr(u->mods[u->nr_mods].path, '/') + 1
						       : u->mods[u->nr_mods].path;
	u->mods[u->nr_mods].dev = dev;
	u->mods[u->nr_mods].ino = ino;
	u->mods[u->nr_mods].fd = -1;
	mod_open(&u->mods[u->nr_mods], pid, v);
	*idx = *ip = u->nr_mods++;
	return 0;
}

static int vma_push(struct uproc *p, uint32_t *cap, const struct uvma *v)
{
	if (p->nr == *cap) {
		uint32_t ncap = *cap ? *cap * 2 : 64;
		struct uvma *n = realloc(p->vmas, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		p->vmas = n;
		*cap = ncap;
	}
	p->vmas[p->nr++] = *v;
	return 0;
}

/*
 * Parses /proc/PID/maps, keeping file-backed mappings (shared memory has an inode too).
 * What was cached stays when the read finds nothing: a process past its exit_mm() still
 * opens its maps, empty, and its waits are named after it is gone.
 */
static int read_maps(struct usyms *u, uint32_t pid, struct uproc *cached)
{
	char path[64], line[4096 + 128], *file;
	struct uproc fresh = {}, *p = &fresh;
	unsigned int maj, min;
	uint32_t cap = 0;
	uint64_t ino;
	int n, err = 0;
	FILE *f;

	/* tried now, found or not: a gone process is asked again at most once per RELOAD_NS */
	cached->loaded_ns = ls_now_ns();
	snprintf(path, sizeof(path), "/proc/%u/maps", pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (!err && fgets(line, sizeof(line), f)) {
		struct uvma v;

		line[strcspn(line, "\n")] = 0;
		char perms[8];

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n",
			   &v.start, &v.end, perms, &v.off, &maj, &min, &ino, &n) < 7)
			continue;
		v.exec = perms[2] == 'x';
		file = line + n;
		if (!ino && !*file && p->nr && p->vmas[p->nr - 1].end == v.start) {
			/* anonymous memory right after an image's last mapping: its .bss */
			const struct uvma *prev = &p->vmas[p->nr - 1];

			v.mod = prev->mod;
			v.off = prev->off + (v.start - prev->start);
			err = vma_push(p, &cap, &v);
			continue;
		}
		if (!ino || *file != '/')
			continue;
		err = mod_intern(u, makedev(maj, min), ino, file, pid, &v, &v.mod);
		if (!err)
			err = vma_push(p, &cap, &v);
	}
	fclose(f);
	if (err || !fresh.nr) {
		free(fresh.vmas);
		return err ?: -ESRCH;
	}
	free(cached->vmas);
	cached->vmas = fresh.vmas;
	cached->nr = fresh.nr;
	return 0;
}

static struct uproc *proc_get(struct usyms *u, uint32_t pid, bool reload)
{
	struct uproc *p;
	int created, err = 0;

	p = htab__upsert(u->procs, &pid, &created, &err);
	if (!p && err == -ENOSPC) {
		/* bounded: forget every cached process (live ones reload on their next record) */
		procs_free(u->procs);
		htab__clear(u->procs);
		p = htab__upsert(u->procs, &pid, &created, &err);
	}
	if (!p)
		return NULL;
	if (created || (reload && ls_now_ns() - p->loaded_ns >= RELOAD_NS))
		read_maps(u, pid, p);	/* a failure keeps what was cached: it exited */
	return p;
}

void usyms__see(struct usyms *u, uint32_t pid)
{
	proc_get(u, pid, false);
}

void usyms__reload(struct usyms *u, uint32_t pid)
{
	struct uproc *p = htab__find(u->procs, &pid);

	if (p)
		read_maps(u, pid, p);
	else
		proc_get(u, pid, false);
}

static const struct uvma *vma_find(const struct uproc *p, uint64_t addr)
{
	uint32_t i;

	for (i = 0; i < p->nr; i++)
		if (addr >= p->vmas[i].start && addr < p->vmas[i].end)
			return &p->vmas[i];
	return NULL;
}

/* The mapping of @addr, rereading the maps once if it is not in the cached ones (dlopen). */
const struct uvma *usyms_lookup(struct usyms *u, uint32_t pid, uint64_t addr)
{
	struct uproc *p = proc_get(u, pid, false);
	const struct uvma *v;

	if (!p)
		return NULL;
	v = vma_find(p, addr);
	if (v)
		return v;
	p = proc_get(u, pid, true);
	return p ? vma_find(p, addr) : NULL;
}

void usyms__normalize(struct usyms *u, uint32_t pid, const uint64_t *ips, uint32_t n, uint64_t *out)
{
	uint32_t i;

	for (i = 0; i < n; i++) {
		const struct uvma *v = usyms_lookup(u, pid, ips[i]);

		if (v)
			out[i] = ((uint64_t)(v->mod + 1) << USYMS_MOD_SHIFT) | (ips[i] - v->start + v->off);
		else
			out[i] = USYMS_RAW | ips[i];
	}
}

int usyms__shared_key(struct usyms *u, uint32_t pid, uint64_t uaddr, uint32_t *object, uint64_t *off)
{
	const struct uvma *v = usyms_lookup(u, pid, uaddr);

	if (!v)
		return -ENOENT;
	*object = v->mod + 1;
	*off = uaddr - v->start + v->off;
	return 0;
}

const char *usyms__object_path(const struct usyms *u, uint32_t object)
{
	return object && object <= u->nr_mods ? u->mods[object - 1].path : NULL;
}

bool usyms__go_code(struct usyms *u, uint32_t pid, uint64_t pc)
{
	const struct uvma *v;

	if (!(v = usyms_lookup(u, pid, pc)) || !v->exec)
		return false;
	usyms_read_elf(u, &u->mods[v->mod]);
	return u->mods[v->mod].go;
}

int usyms__modules(struct usyms *u, uint32_t pid, usyms_module_fn fn, void *ctx)
{
	struct uproc *p = proc_get(u, pid, false);
	uint32_t i, j;
	int err;

	if (!p)
		return -ENOENT;
	for (i = 0; i < p->nr; i++) {
		const struct uvma *v = &p->vmas[i];
		struct umod *m = &u->mods[v->mod];
		bool dup = false;

		for (j = 0; j < i && !dup; j++)
			dup = p->vmas[j].mod == v->mod && p->vmas[j].exec;
		if (!v->exec || dup)
			continue;
		usyms_read_elf(u, m);
		for (j = 0; j < (uint32_t)m->nsegs; j++) {
			const struct seg *sg = &m->segs[j];
			/* segments are mapped from their page-aligned start */
			uint64_t off = sg->off & ~(PAGE_ALIGN_MASK), vaddr = sg->vaddr & ~(PAGE_ALIGN_MASK);

			if (v->off < off || v->off >= sg->off + sg->memsz)
				continue;
			/* where the file's virtual address 0 sits in this process */
			err = fn(ctx, usyms_mod_path(m), v->start - (v->off - off + vaddr));
			if (err)
				return err;
			break;
		}
	}
	return 0;
}

uint64_t usyms__maps_time(struct usyms *u, uint32_t pid)
{
	const struct uproc *p = htab__find(u->procs, &pid);

	return p ? p->loaded_ns : 0;
}

size_t usyms__mem_bytes(const struct usyms *u)
{
	return htab__mem_bytes(u->procs) + htab__mem_bytes(u->mod_index) + htab__mem_bytes(u->syms) +
	       u->cap_mods * sizeof(struct umod);
}

void usyms__stats(const struct usyms *u, struct usyms_stats *out)
{
	*out = u->stats;
	out->cached = htab__count(u->syms);
	out->loaded = u->symbolizer != NULL;
}


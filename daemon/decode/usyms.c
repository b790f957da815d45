// SPDX-License-Identifier: GPL-2.0
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
#include "lib/clock.h"
#include "lib/htab.h"
#include "lib/log.h"

/* A process whose address missed its cached maps rereads them at most this often. */
#define RELOAD_NS NSEC_PER_SEC
#define MAX_SEGS 16		/* PT_LOAD segments kept per module */
#define MAX_MODULES ((1U << (62 - USYMS_MOD_SHIFT)) - 2)
#define SYM_CACHE_MAX (256 * 1024)
#define SYM_NAME_MAX 256
#define BUILD_ID_MAX 20		/* SHA-1, the longest build id ld writes */
#define NT_GNU_BUILD_ID_TYPE 3
/* ELF segments are congruent to their offset modulo the page size (4 KiB and up) */
#define PAGE_ALIGN_MASK 0xfffULL

struct seg {
	uint64_t off, vaddr, memsz;
};

/* Whether the machine has symbols for a module beyond its dynamic ones. */
enum mod_syms {
	MOD_SYMS_FULL,		/* .symtab, or a separate debug file a debugger would find */
	MOD_SYMS_DYNAMIC,	/* .dynsym only: internal functions stay unnamed */
};

/* A debug file asked for from debuginfod, for a MOD_SYMS_DYNAMIC module. */
enum mod_fetch { MOD_FETCH_NONE, MOD_FETCH_PENDING, MOD_FETCH_DONE, MOD_FETCH_FAILED };

struct umod {
	char *path;		/* as /proc/PID/maps names it: for display and debug-file lookups */
	const char *name;	/* into path */
	/*
	 * Where the file is opened: /proc/self/fd/N of a descriptor held open. The maps'
	 * path names it from the reader's root, which in another mount namespace (a container,
	 * a chroot) is not the file: the descriptor is taken through the process itself.
	 */
	char open_path[32];
	int fd;
	uint64_t dev, ino;
	bool elf_read;
	char build_id[2 * BUILD_ID_MAX + 1];
	struct seg segs[MAX_SEGS];
	int nsegs;
	enum mod_syms syms;
	enum mod_fetch fetch;
	uint64_t unnamed;	/* frames looked up without a name */
};

struct uvma {
	uint64_t start, end, off;
	uint32_t mod;
	bool exec;
};

struct uproc {
	struct uvma *vmas;
	uint32_t nr;
	uint64_t loaded_ns;
};

struct mod_key {
	uint64_t dev, ino;
};

struct sym_val {
	char *name;		/* NULL: no symbol */
	uint64_t offset;
	char **inlined;		/* functions inlined at the address, innermost first */
	uint32_t nr_inlined;
};

struct usyms {
	size_t max_procs;
	struct htab *procs;		/* pid -> struct uproc */
	struct htab *mod_index;		/* mod_key -> uint32 index */
	struct umod *mods;
	uint32_t nr_mods, cap_mods;
	struct htab *syms;		/* frame code -> struct sym_val */
	blaze_symbolizer *symbolizer;
	struct debuginfo *debuginfo;	/* NULL: no debuginfod servers */
	struct usyms_stats stats;
};

/* Where debuggers look for separate debug files, and blazesym with them. */
static const char *const system_debug_dirs[] = { "/usr/lib/debug", "/lib/debug" };
#define NR_SYSTEM_DEBUG_DIRS (sizeof(system_debug_dirs) / sizeof(system_debug_dirs[0]))

static void procs_free(struct htab *procs)
{
	const void *k;
	size_t it = 0;
	void *v;

	while (procs && !htab__next(procs, &it, &k, &v))
		free(((struct uproc *)v)->vmas);
}

static void syms_free(struct htab *syms)
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
 * directory fetched files are linked into. Made anew when a fetch lands: blazesym keeps
 * what it found (and did not find) per file.
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
	blaze_symbolizer_free(u->symbolizer);
	u->symbolizer = blaze_symbolizer_new_opts(&sym_opts);
	return u->symbolizer ? 0 : -EINVAL;
}

int usyms__new(const struct usyms_opts *opts, struct usyms **out)
{
	struct debuginfo_opts dopts = { .dir = opts->debuginfod_dir };
	struct usyms *u = calloc(1, sizeof(*u));
	int err = -ENOMEM;

	if (!u)
		return -ENOMEM;
	u->max_procs = opts->max_procs;
	u->procs = htab__new(sizeof(uint32_t), sizeof(struct uproc), opts->max_procs);
	u->mod_index = htab__new(sizeof(struct mod_key), sizeof(uint32_t), MAX_MODULES);
	u->syms = htab__new(sizeof(uint64_t), sizeof(struct sym_val), SYM_CACHE_MAX);
	if (!u->procs || !u->mod_index || !u->syms)
		goto cleanup;
	/* without servers (or a place for their files) symbols come from the machine only */
	err = debuginfo__new(&dopts, &u->debuginfo);
	if (err && err != -ENOENT)
		pr_warn("debuginfod off: %s\n", strerror(-err));
	err = symbolizer_new(u);
	if (err)
		goto cleanup;
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
	syms_free(u->syms);
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
static const char *mod_path(const struct umod *m)
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
static const struct uvma *lookup(struct usyms *u, uint32_t pid, uint64_t addr)
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
		const struct uvma *v = lookup(u, pid, ips[i]);

		if (v)
			out[i] = ((uint64_t)(v->mod + 1) << USYMS_MOD_SHIFT) | (ips[i] - v->start + v->off);
		else
			out[i] = USYMS_RAW | ips[i];
	}
}

int usyms__shared_key(struct usyms *u, uint32_t pid, uint64_t uaddr, uint32_t *object, uint64_t *off)
{
	const struct uvma *v = lookup(u, pid, uaddr);

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

static void read_build_id(struct umod *m, Elf *elf)
{
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(elf, scn))) {
		size_t off = 0, name_off, desc_off;
		GElf_Shdr sh;
		GElf_Nhdr nh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE || !(d = elf_getdata(scn, NULL)))
			continue;
		while ((off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			size_t i;

			if (nh.n_type != NT_GNU_BUILD_ID_TYPE || nh.n_descsz > BUILD_ID_MAX)
				continue;
			for (i = 0; i < nh.n_descsz; i++)
				sprintf(m->build_id + 2 * i, "%02x", ((uint8_t *)d->d_buf)[desc_off + i]);
			return;
		}
	}
}

/* Whether the file the format names exists and is readable (false when too long). */
static bool __attribute__((format(printf, 1, 2))) file_exists(const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return n > 0 && n < (int)sizeof(path) && !access(path, R_OK);
}

/* A separate debug file by build id: DIR/.build-id/xx/yyyy.debug in a debug directory. */
static bool debug_file_by_build_id(const struct usyms *u, const struct umod *m)
{
	size_t i;

	if (strlen(m->build_id) < 3)
		return false;
	for (i = 0; i <= NR_SYSTEM_DEBUG_DIRS; i++) {
		const char *dir = i < NR_SYSTEM_DEBUG_DIRS ? system_debug_dirs[i] :
				  u->debuginfo ? debuginfo__dir(u->debuginfo) : NULL;

		if (dir && file_exists("%s/.build-id/%.2s/%s.debug", dir, m->build_id, m->build_id + 2))
			return true;
	}
	return false;
}

/*
 * A separate debug file by .gnu_debuglink, where gdb looks: beside the module, in .debug/
 * beside it, and under each debug directory by the module's own directory.
 */
static bool debug_file_by_link(const struct umod *m, const char *link)
{
	const char *slash = strrchr(m->path, '/');
	int dir_len;
	size_t i;

	if (!slash || !*link || !strcmp(slash + 1, link))
		return false;
	dir_len = slash - m->path;
	if (file_exists("%.*s/%s", dir_len, m->path, link) ||
	    file_exists("%.*s/.debug/%s", dir_len, m->path, link))
		return true;
	for (i = 0; i < NR_SYSTEM_DEBUG_DIRS; i++)
		if (file_exists("%s%.*s/%s", system_debug_dirs[i], dir_len, m->path, link))
			return true;
	return false;
}

/* The build id, whether the file has a .symtab, and the name its .gnu_debuglink gives. */
static void read_sections(struct umod *m, Elf *elf, bool *symtab, char *link, size_t link_len)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	*symtab = false;
	*link = 0;
	if (elf_getshdrstrndx(elf, &shstrndx))
		return;
	while ((scn = elf_nextscn(elf, scn))) {
		const char *name;
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh))
			continue;
		if (sh.sh_type == SHT_SYMTAB)
			*symtab = true;
		name = elf_strptr(elf, shstrndx, sh.sh_name);
		if (name && !strcmp(name, ".gnu_debuglink") && (d = elf_getdata(scn, NULL)) && d->d_size)
			snprintf(link, link_len, "%.*s", (int)strnlen(d->d_buf, d->d_size), (const char *)d->d_buf);
	}
	read_build_id(m, elf);
}

/*
 * PT_LOAD segments (file offset -> virtual address), the build id and whether the
 * machine has symbols for it, read once.
 */
static void read_elf(struct usyms *u, struct umod *m)
{
	char link[NAME_MAX + 1];
	bool symtab = false;
	size_t i, nph;
	Elf *elf;
	int fd;

	if (m->elf_read)
		return;
	m->elf_read = true;
	m->syms = MOD_SYMS_FULL;	/* not ELF, or unreadable: nothing to ask for */
	fd = open(mod_path(m), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (elf && !elf_getphdrnum(elf, &nph)) {
		for (i = 0; i < nph && m->nsegs < MAX_SEGS; i++) {
			GElf_Phdr ph;

			if (gelf_getphdr(elf, i, &ph) && ph.p_type == PT_LOAD)
				m->segs[m->nsegs++] = (struct seg){ ph.p_offset, ph.p_vaddr, ph.p_memsz };
		}
		read_sections(m, elf, &symtab, link, sizeof(link));
		if (!symtab && !debug_file_by_build_id(u, m) && !debug_file_by_link(m, link))
			m->syms = MOD_SYMS_DYNAMIC;
	}
	elf_end(elf);
	close(fd);
}

int usyms__data(struct usyms *u, uint32_t pid, uint64_t uaddr, const char **module, uint64_t *vaddr)
{
	const struct uvma *v = lookup(u, pid, uaddr);
	uint64_t off;
	struct umod *m;
	int i;

	if (!v)
		return -ENOENT;
	m = &u->mods[v->mod];
	read_elf(u, m);
	off = uaddr - v->start + v->off;
	*module = m->name;
	/* .bss past the file's end sits in the same page-aligned mapping as .data */
	for (i = 0; i < m->nsegs; i++) {
		if (off >= m->segs[i].off && off < m->segs[i].off + m->segs[i].memsz) {
			*vaddr = off - m->segs[i].off + m->segs[i].vaddr;
			return 0;
		}
	}
	*vaddr = off;	/* not ELF, or a mapping no segment covers: the file offset */
	return 0;
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
		read_elf(u, m);
		for (j = 0; j < (uint32_t)m->nsegs; j++) {
			const struct seg *sg = &m->segs[j];
			/* segments are mapped from their page-aligned start */
			uint64_t off = sg->off & ~(PAGE_ALIGN_MASK), vaddr = sg->vaddr & ~(PAGE_ALIGN_MASK);

			if (v->off < off || v->off >= sg->off + sg->memsz)
				continue;
			/* where the file's virtual address 0 sits in this process */
			err = fn(ctx, mod_path(m), v->start - (v->off - off + vaddr));
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
		.path = mod_path(m),
		.debug_syms = true,
	};
	const struct blaze_syms *syms;

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
	syms_free(u->syms);
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
	if (landed && !symbolizer_new(u))
		syms_forget(u);
}

void usyms__poll(struct usyms *u)
{
	if (u->debuginfo)
		debuginfo__poll(u->debuginfo, on_fetched, u);
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

bool usyms__frame(struct usyms *u, uint64_t code, struct uframe *f)
{
	uint32_t mod = code >> USYMS_MOD_SHIFT;
	struct sym_val *sv;
	struct umod *m;
	int created = 0;

	memset(f, 0, sizeof(*f));
	if (!usyms__is_user(code))
		return false;
	if (code & USYMS_RAW) {
		f->addr = code & ~USYMS_RAW;
		return true;
	}
	if (!mod || mod > u->nr_mods)
		return true;
	m = &u->mods[mod - 1];
	read_elf(u, m);
	f->addr = code & ((1ULL << USYMS_MOD_SHIFT) - 1);
	f->module = m->name;
	f->path = m->path;
	f->build_id = m->build_id;
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

size_t usyms__mem_bytes(const struct usyms *u)
{
	return htab__mem_bytes(u->procs) + htab__mem_bytes(u->mod_index) + htab__mem_bytes(u->syms) +
	       u->cap_mods * sizeof(struct umod);
}

void usyms__stats(const struct usyms *u, struct usyms_stats *out)
{
	*out = u->stats;
	out->cached = htab__count(u->syms);
}

// SPDX-License-Identifier: GPL-2.0
/*
 * A module's ELF and its debug file: the build id, the sections that say whether it has
 * symbols and CFI, and the separate debug file by build id or debuglink in the system's
 * debug directories (or fetched by debuginfod into the cache).
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
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

/*
 * The build id, whether the file has a .symtab, the name its .gnu_debuglink gives, and
 * whether Go built it (its linker writes .go.buildinfo, the module's version and settings).
 */
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
		if (name && !strcmp(name, ".go.buildinfo"))
			m->go = true;
		if (name && !strcmp(name, ".gnu_debuglink") && (d = elf_getdata(scn, NULL)) && d->d_size)
			snprintf(link, link_len, "%.*s", (int)strnlen(d->d_buf, d->d_size), (const char *)d->d_buf);
	}
	read_build_id(m, elf);
}

/*
 * PT_LOAD segments (file offset -> virtual address), the build id and whether the
 * machine has symbols for it, read once.
 */
void usyms_read_elf(struct usyms *u, struct umod *m)
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
	fd = open(usyms_mod_path(m), O_RDONLY | O_CLOEXEC);
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
	const struct uvma *v = usyms_lookup(u, pid, uaddr);
	uint64_t off;
	struct umod *m;
	int i;

	if (!v)
		return -ENOENT;
	m = &u->mods[v->mod];
	usyms_read_elf(u, m);
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

/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The user-symbol store's insides, shared by usyms.c (mappings and modules), debugfiles.c
 * (ELF files and their debug files) and symbolize.c (naming frames), and only they.
 */
#ifndef __LS_USYMS_INT_H
#define __LS_USYMS_INT_H

#include <stdbool.h>
#include <stdint.h>
#include "decode/usyms.h"
#include "lib/clock.h"
#include "lib/htab.h"

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

/* Where debuggers look for separate debug files, and blazesym with them. */
static const char *const system_debug_dirs[] = { "/usr/lib/debug", "/lib/debug" };
#define NR_SYSTEM_DEBUG_DIRS (sizeof(system_debug_dirs) / sizeof(system_debug_dirs[0]))

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
	bool go;		/* built by Go: frame pointers in every function (unwind.c) */
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
	blaze_symbolizer *symbolizer;	/* NULL: none now (made at the next cache miss) */
	uint64_t symbolizer_used_ns;	/* its last lookup (ls_now_ns()) */
	uint64_t symbolizer_idle_ns;	/* usyms_opts.idle_ns */
	struct debuginfo *debuginfo;	/* NULL: no debuginfod servers */
	struct usyms_stats stats;
};

/* usyms.c */
const char *usyms_mod_path(const struct umod *m);
/* The mapping of @pid holding @addr (its maps read or reread as needed); NULL if none. */
const struct uvma *usyms_lookup(struct usyms *u, uint32_t pid, uint64_t addr);

/* debugfiles.c: reads module @m's ELF (build id, sections) once */
void usyms_read_elf(struct usyms *u, struct umod *m);

/* symbolize.c */
/* Frees the names a module's symbol cache holds (the cache itself stays the caller's) */
void usyms_syms_free(struct htab *syms);

#endif

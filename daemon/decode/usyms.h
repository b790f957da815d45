/* SPDX-License-Identifier: GPL-2.0 */
/*
 * User-space addresses. Each process's file mappings are read from /proc/PID/maps when it
 * is first seen and kept after it exits, so its stacks still symbolize. Frames are
 * normalized to (module, file offset) when they arrive: the same code in two processes
 * is the same frame, which is what the caller view needs when every process waits on a
 * futex of its own. Symbols come from blazesym (ELF and DWARF, C++/Rust demangling).
 *
 * A frame code is one uint64_t, so user and kernel frames share the stack interner:
 *   kernel address          >= 0xffff800000000000, as is
 *   (module + 1) << 40 | file offset   a normalized user frame (< 2^62)
 *   USYMS_RAW | address      a user address in no file mapping (JIT, anonymous code)
 */
#ifndef __LS_USYMS_H
#define __LS_USYMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define USYMS_MOD_SHIFT	40
#define USYMS_RAW	(1ULL << 62)
#define USYMS_KERNEL_MIN 0xffff800000000000ULL

struct usyms;

struct uframe {
	uint64_t addr;		/* file offset in the module, or the raw address */
	const char *sym;	/* NULL when unknown */
	uint64_t offset;	/* from the symbol's start */
	const char *module;	/* file name of the module, NULL when none */
	const char *path;
	const char *build_id;	/* hex, "" when the module has none */
	const char *const *inlined;	/* functions inlined at addr into sym, innermost first */
	uint32_t nr_inlined;
};

struct usyms_opts {
	size_t max_procs;		/* processes whose maps are cached */
	/*
	 * Where debug files fetched from $DEBUGINFOD_URLS go (debuginfo.h); NULL or no
	 * URLs: symbols come from the machine only (the ELF, /usr/lib/debug).
	 */
	const char *debuginfod_dir;
	/*
	 * The symbolizer is let go after this long without a frame to name (0: never), and
	 * made anew at the next: names stay cached, what it holds (each file's parsed
	 * symbols and DWARF) serves only frames not named yet.
	 */
	uint64_t idle_ns;
};

int usyms__new(const struct usyms_opts *opts, struct usyms **out);
void usyms__free(struct usyms *u);
/*
 * Takes the debug files fetched since the last call: frames of their modules are looked
 * up again, by name this time; frees the symbolizer when it has been idle (names stay
 * cached). Call from the event loop's timer.
 */
void usyms__poll(struct usyms *u);
/* Reads @pid's maps now unless cached: call while the process is surely alive. */
void usyms__see(struct usyms *u, uint32_t pid);
/* Reads @pid's maps now, cached or not (what was cached may predate an exec). */
void usyms__reload(struct usyms *u, uint32_t pid);
/* Normalizes @n addresses of process @pid into frame codes. */
void usyms__normalize(struct usyms *u, uint32_t pid, const uint64_t *ips, uint32_t n, uint64_t *out);
/*
 * A futex word in a shared mapping is the same lock in every process that maps it: names
 * it by (object, offset in the file). -ENOENT when @uaddr is in no file mapping.
 */
int usyms__shared_key(struct usyms *u, uint32_t pid, uint64_t uaddr, uint32_t *object, uint64_t *off);
/* The module and ELF virtual address @uaddr of @pid lies at; -ENOENT on the heap or stack. */
int usyms__data(struct usyms *u, uint32_t pid, uint64_t uaddr, const char **module, uint64_t *vaddr);
/* The module an object id names (shared futexes), or NULL. */
const char *usyms__object_path(const struct usyms *u, uint32_t object);
/*
 * Whether the code at @pc of @pid is in a binary Go built (it keeps frame pointers), by
 * the maps as cached: usyms__see() the process first.
 */
bool usyms__go_code(struct usyms *u, uint32_t pid, uint64_t pc);
/* Called for each executable module of a process with its load bias; nonzero stops. */
typedef int (*usyms_module_fn)(void *ctx, const char *path, uint64_t bias);
/* Calls @fn for every executable file mapping of @pid (one call per module). */
int usyms__modules(struct usyms *u, uint32_t pid, usyms_module_fn fn, void *ctx);
/* When @pid's maps were last read (0: never): cached views of them must be rebuilt after. */
uint64_t usyms__maps_time(struct usyms *u, uint32_t pid);
/* Resolves frame code @code (a user frame); false for kernel frames. */
bool usyms__frame(struct usyms *u, uint64_t code, struct uframe *f);
/*
 * As usyms__frame() but only the module and the address in it, no symbol: a lookup
 * that opens no debug information (naming one frame of glibc parses ~15 MB of its DWARF).
 */
bool usyms__frame_module(struct usyms *u, uint64_t code, struct uframe *f);
size_t usyms__mem_bytes(const struct usyms *u);
struct usyms_stats {
	uint64_t symbolized;	/* frames looked up in the binaries (blazesym): cache misses */
	uint64_t cache_hits;	/* frames answered from the cache */
	uint64_t unresolved;	/* frames no symbol was found for (or the cache was full) */
	uint64_t cached;	/* frames in the cache */
	uint64_t releases;	/* times the symbolizer was let go, idle (usyms_opts.idle_ns) */
	bool loaded;		/* a symbolizer is held now */
};
void usyms__stats(const struct usyms *u, struct usyms_stats *out);

/*
 * A module whose frames stay unnamed because the machine has no symbols for it: no
 * .symtab and no separate debug file where debuggers look (/usr/lib/debug by build id or
 * .gnu_debuglink).
 */
struct usyms_missing {
	const char *module;
	const char *path;
	const char *build_id;
	uint64_t unnamed;		/* frames of it no symbol was found for */
	const char *debuginfod;		/* "off", "fetching", "fetched", "not found" */
};
typedef void (*usyms_missing_fn)(void *ctx, const struct usyms_missing *m);
/* Calls @fn for each module whose frames went unnamed for want of symbols. */
void usyms__missing(struct usyms *u, usyms_missing_fn fn, void *ctx);
/* The debuginfod servers asked for missing debug files; NULL when none are. */
const char *usyms__debuginfod_urls(const struct usyms *u);

static inline bool usyms__is_user(uint64_t code)
{
	return code < USYMS_KERNEL_MIN;
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Internal to daemon/symbols/symbols.c: one ELF file of a target process, loaded
 * lazily with libelf. Owns the file's function symbols, PT_LOAD segments and
 * build id. Loading never fails as such: a file that cannot be opened or read
 * leaves a module without symbols and a reason in load_error.
 */
#ifndef PROFD_ELF_MODULE_H
#define PROFD_ELF_MODULE_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ELF_MODULE_MAX_BUILD_ID 64

enum elf_module_kind {
	ELF_MODULE_FILE,     /* a path in the target's mount namespace */
	ELF_MODULE_VDSO,     /* "[vdso]": read from the target's memory */
	ELF_MODULE_SPECIAL,  /* "[anon]", "[vsyscall]", ...: never has symbols */
};

/* [start, end) in ELF virtual addresses; aliases folded into one entry. */
struct elf_function {
	uint64_t start, end;
	const char *name;
};

struct elf_segment {
	uint64_t vaddr, offset, filesz;
	uint32_t flags;
};

struct elf_module {
	char *path;                      /* as the target maps it */
	enum elf_module_kind kind;
	bool loaded;
	const char *load_error;          /* static string; NULL when symbols loaded */
	const char *symbol_source;       /* ".symtab", ".dynsym", "debug .symtab",
					    "debuglink .symtab" or NULL */

	struct elf_function *functions;  /* sorted by start */
	size_t n_functions;
	char *names;                     /* pool that functions[].name points into */

	struct elf_segment *segments;    /* PT_LOAD, file order */
	size_t n_segments;
	uint64_t load_bias;              /* p_vaddr - p_offset of the executable PT_LOAD */

	uint8_t build_id[ELF_MODULE_MAX_BUILD_ID];
	size_t build_id_len;
	unsigned int refs;               /* its owners: symbolizers, daemon/symbols/module_cache.c */
	/*
	 * The file as the kernel's MMAP2 records named it (device, inode);
	 * 0 and 0: not known, or two mappings of the path disagreed.
	 */
	uint64_t mapped_dev, mapped_ino;
	bool identity_seen;              /* a mapping gave (or withheld) mapped_dev/ino */
};

/* Returns a module for path (not loaded yet), or NULL with errno set. */
struct elf_module *elf_module_new(const char *path);

/*
 * Reads the file: through /proc/PID/root, then the plain path, then
 * /proc/PID/map_files/START-END; "[vdso]" from /proc/PID/mem at map_start
 * (or this process's own vdso). Idempotent; sets loaded.
 */
void elf_module_load(struct elf_module *m, pid_t pid, uint64_t map_start, uint64_t map_end);

/*
 * The file elf_module_load would read (not the vdso), opened: a descriptor,
 * or a negative errno.
 */
int elf_module_open(const struct elf_module *m, pid_t pid, uint64_t map_start, uint64_t map_end);

/* Loads from fd, a file elf_module_open opened (left open); sets loaded. */
void elf_module_load_fd(struct elf_module *m, int fd, pid_t pid);

/* Loads from an ELF image in memory (used for the vdso; exposed for tests). */
void elf_module_load_image(struct elf_module *m, const void *image, size_t len);

/* The function containing ELF address vaddr, or NULL. */
const struct elf_function *elf_module_find_function(const struct elf_module *m, uint64_t vaddr);

/* The section's bytes lie within a file of file_size (never for SHT_NOBITS): what libelf may read. */
bool elf_section_in_file(const GElf_Shdr *sh, uint64_t file_size);

/*
 * Translates a file offset to an ELF virtual address through the PT_LOAD
 * that contains it; without one (no program headers) returns the offset.
 */
uint64_t elf_module_offset_to_vaddr(const struct elf_module *m, uint64_t file_offset);

/* One more owner: m lives until each has called elf_module_free. */
struct elf_module *elf_module_ref(struct elf_module *m);
void elf_module_free(struct elf_module *m);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * The ELF files the DWARF unwinders of one session's processes read
 * (daemon/sampling/dwarf_unwind.h), shared between them: a file is opened
 * once, when a process first maps it, its program headers read once, and
 * one libelf handle on it serves every process's libdwfl session (the
 * .eh_frame libdw reads is then read once). The processes of a tree map
 * the same few files. A file is known by the identity the kernel gives its
 * mapping (device and inode: perf MMAP2, /proc/PID/maps); while a
 * descriptor holds it, that inode names no other file. Files are read with
 * ELF_C_READ, never mmapped (a file truncated underneath cannot SIGBUS the
 * daemon). Not thread-safe: the session's thread only.
 */
#ifndef PROFD_UNWIND_FILES_H
#define PROFD_UNWIND_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <libelf.h>

/* A mapping's file as the kernel names it; dev 0 and ino 0: not known (never shared). */
struct unwind_file_id {
	uint64_t dev; /* major << 32 | minor */
	uint64_t ino;
};

/* A PT_LOAD of the file: what a mapping's load bias and image are computed from. */
struct unwind_load {
	uint64_t vaddr, offset, filesz, memsz, align;
};

struct unwind_file {
	unsigned refs;             /* the unwinders' modules and the cache */
	struct unwind_file_id id;
	int fd;                    /* opened when the file was first mapped */
	int64_t size;              /* its size and modification time then: a file */
	struct timespec mtime;     /* rewritten in place since is not shared */
	Elf *elf;                  /* ELF_C_READ on fd, at the first walk that needs it */
	bool is_exec;              /* ET_EXEC: no load bias */
	struct unwind_load *loads;
	size_t n_loads;
	bool no_debug_file;        /* the search for its .debug_frame found none */
};

struct unwind_files;

struct unwind_files *unwind_files_new(void);
/* Drops the cache's references; files still in use live on with their users. */
void unwind_files_free(struct unwind_files *fs);

/* The file held for id as it was opened (fstat), a new reference; NULL when none (or id unknown). */
struct unwind_file *unwind_files_find(struct unwind_files *fs, const struct unwind_file_id *id);

/*
 * Takes fd (closed on failure): checks it is an x86-64 ELF executable or
 * shared object with PT_LOAD segments and reads them. Returns the file (a
 * reference for the caller), held by fs (may be NULL) for the next
 * processes when id is known and fs has room; NULL with -ENOEXEC or
 * -ENOMEM in *err.
 */
struct unwind_file *unwind_file_open(struct unwind_files *fs, const struct unwind_file_id *id,
				     int fd, int *err);
struct unwind_file *unwind_file_ref(struct unwind_file *f);
void unwind_file_put(struct unwind_file *f);

/*
 * A libelf handle on f for a libdwfl session to own (it elf_ends it): the
 * file's one handle, counted once more. NULL when libelf refuses the file.
 */
Elf *unwind_file_elf(struct unwind_file *f);

#endif

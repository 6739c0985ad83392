/* SPDX-License-Identifier: MIT */
/*
 * ELF modules shared by the processes of a session: a tree runs the same
 * programs and libraries in many processes, and each file's symbols (libc's
 * debug .symtab: tens of thousands, sorted) are read once, not per process.
 * A file is the same when its path, device, inode, size and modification
 * time are: a rebuilt or replaced file is read again. A mapping the kernel
 * named by device and inode (MMAP2) that match a file loaded already takes
 * it without opening anything (a file rewritten in place, its inode kept,
 * is then not read again: perf's own records cannot tell it either).
 * Single-threaded.
 */
#ifndef PROFD_MODULE_CACHE_H
#define PROFD_MODULE_CACHE_H

#include <stdint.h>
#include <sys/types.h>

struct elf_module;
struct module_cache;

struct module_cache *module_cache_new(void);
/* Drops the cache's references (symbolizers keep theirs). */
void module_cache_free(struct module_cache *c);

/*
 * A loaded module for the file m (not loaded yet) names in pid, mapped at
 * [start, end): one another process loaded from the same file, else m,
 * loaded now and kept. The caller owns one reference to the result (and
 * still its own to m, whichever is returned).
 */
struct elf_module *module_cache_load(struct module_cache *c, struct elf_module *m, pid_t pid,
				     uint64_t start, uint64_t end);

#endif

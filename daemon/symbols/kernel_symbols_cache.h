/* SPDX-License-Identifier: MIT */
/*
 * The kernel symbol table kept in a file between daemons: a private profd
 * (one per `profctl run`) read /proc/kallsyms for every session, 60-130 ms
 * of CPU, most of a short run's cost. The copy is keyed by what moves the
 * symbols (the boot's id, for KASLR; /proc/modules, whose lines give the
 * modules' addresses; kernel.kptr_restrict) and kept for root only, in a
 * root-owned directory no one else may write (/run/profd: tmpfs, gone at
 * the next boot). BPF programs and ftrace trampolines come and go without
 * changing the key: their frames may be named as when the copy was made, as
 * with the daemon's copy in memory (server_kernel_symbols). A copy is read
 * as hostile bytes: any inconsistency and it is read from /proc again.
 */
#ifndef PROFD_KERNEL_SYMBOLS_CACHE_H
#define PROFD_KERNEL_SYMBOLS_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct kernel_symbols;

#define KERNEL_SYMBOLS_CACHE_DIR "/run/profd"

/*
 * The table of /proc/kallsyms: from dir's copy when it is current, else
 * read (kernel_symbols_load) and, for root, saved there for the next daemon
 * (dir made 0755 if missing; a copy that cannot be saved is only not kept).
 * NULL with a one-line reason in err, as kernel_symbols_load.
 */
struct kernel_symbols *kernel_symbols_load_cached(const char *dir, char *err, size_t errlen);

/* The key of the running kernel's symbols (FNV-1a; 0 when nothing could be read). */
uint64_t kernel_symbols_cache_key(void);

/* Writes k with key to fd. 0, or a negative errno. */
int kernel_symbols_save(const struct kernel_symbols *k, int fd, uint64_t key);

/* The table saved in fd under key; NULL (errno EINVAL, ESTALE, ENOMEM) if it is not one. */
struct kernel_symbols *kernel_symbols_restore(int fd, uint64_t key);

#endif

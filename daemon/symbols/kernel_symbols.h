/* SPDX-License-Identifier: MIT */
/*
 * Kernel frame symbolization from /proc/kallsyms: the text symbols (types
 * t, T, w, W) of the kernel, named "[kernel.kallsyms]", and of each module,
 * named "[MODULE]" after the module in the line's "[MODULE]" suffix. Refuses
 * a table whose addresses are all zero (kptr_restrict hides them) rather than
 * name every frame after the same symbol. Immutable once loaded.
 */
#ifndef PROFD_KERNEL_SYMBOLS_H
#define PROFD_KERNEL_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "daemon/symbols/symbols.h"

#define KERNEL_SYMBOLS_MAPPING "[kernel.kallsyms]"

struct kernel_symbols;

struct kernel_symbols_stats {
	size_t n_symbols;        /* distinct addresses after folding aliases */
	size_t n_modules;        /* "[kernel.kallsyms]" included */
	uint64_t bad_lines;      /* lines that are not "ADDR TYPE NAME[\t[MODULE]]" */
};

/*
 * Parses kallsyms lines from f. Returns the table, or NULL with errno set and
 * a one-line reason in err: EPERM (every address is zero: the reader may not
 * see them), ENOENT (no text symbol), ENOMEM.
 */
struct kernel_symbols *kernel_symbols_new(FILE *f, char *err, size_t errlen);

/*
 * kernel_symbols_new on path (NULL: /proc/kallsyms). The EPERM reason names
 * kernel.kptr_restrict's value; opening errors come back as their errno.
 */
struct kernel_symbols *kernel_symbols_load(const char *path, char *err, size_t errlen);

/* One more holder of k (the table is immutable: holders may share it); returns k. */
struct kernel_symbols *kernel_symbols_ref(struct kernel_symbols *k);
/* Drops a holder; the last one frees the table. */
void kernel_symbols_free(struct kernel_symbols *k);

/*
 * Resolves a kernel pc into *out, which is filled as symbolizer_lookup does:
 * function and function_offset, mapping_path "[kernel.kallsyms]" or
 * "[MODULE]", map_start/map_end the span of that module's symbols, rel_pc ==
 * pc (kallsyms addresses are the running, KASLR-shifted ones), no build id.
 * Aliases fold as in ELF files (global first, then the shortest name); a
 * symbol reaches the next one of its module, the last one of a module the
 * end of the page after its start. Returns 0, or -ENOENT with function NULL
 * and mapping_path "[kernel.kallsyms]" when no symbol covers pc. Pointers
 * stay valid until kernel_symbols_free. Safe from several threads.
 */
int kernel_symbols_lookup(const struct kernel_symbols *k, uint64_t pc, struct symbol_info *out);

void kernel_symbols_get_stats(const struct kernel_symbols *k, struct kernel_symbols_stats *out);

#endif

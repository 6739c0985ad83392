// SPDX-License-Identifier: MIT
/*
 * The procedure linkage table's entries, named as perf names them
 * ("malloc@plt"): a sample or a frame inside a PLT stub is the call it makes
 * on its way into another module, and without a name it showed as the file
 * and an offset. Read from .rela.plt (which symbol each slot calls) and the
 * layout of .plt.sec or .plt on x86-64 and aarch64.
 */
#ifndef PROFD_ELF_PLT_H
#define PROFD_ELF_PLT_H

#include <gelf.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct elf_plt_entry {
	uint64_t start, size;     /* ELF virtual addresses */
	const char *name;         /* into elf's string table, without "@plt" */
	size_t name_len;          /* up to any "@VERSION" */
};

/*
 * The named PLT entries of elf into *out (malloc'ed, the caller frees);
 * returns their number, 0 when the file has none or a layout this does not
 * know (nothing is guessed), or a negative errno.
 */
ssize_t elf_plt_entries(Elf *elf, uint64_t file_size, struct elf_plt_entry **out);

#endif

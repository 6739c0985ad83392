// SPDX-License-Identifier: MIT
/*
 * PLT entries by name (elf_plt.h). Slot i of .rela.plt is the i-th entry of
 * .plt.sec when the file has one (x86-64 with IBT: the entries the code
 * calls), else the i-th entry of .plt after its header (16 bytes on x86-64,
 * 32 on aarch64). The section sizes must add up exactly; a file that does
 * not (another linker's layout, or a hostile file) gets no PLT names.
 */
#include "daemon/symbols/elf_plt.h"
#include "daemon/symbols/elf_module.h"

#include <elf.h>
#include <errno.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define PLT_ENTRIES_MAX (1u << 20)
#define PLT_ENTRY_DEFAULT 16

struct plt_sections {
	GElf_Shdr rela, plt, plt_sec;
	Elf_Scn *rela_scn;
	bool has_plt, has_plt_sec;
};

static int find_plt_sections(Elf *elf, uint64_t file_size, struct plt_sections *ps)
{
	Elf_Scn *scn = NULL;
	size_t shstrndx;

	memset(ps, 0, sizeof(*ps));
	if (elf_getshdrstrndx(elf, &shstrndx) != 0)
		return -EINVAL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *name;

		if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
			continue;
		if (sh.sh_type == SHT_RELA && !strcmp(name, ".rela.plt") &&
		    elf_section_in_file(&sh, file_size)) {
			ps->rela = sh;
			ps->rela_scn = scn;
		} else if (sh.sh_type == SHT_PROGBITS && !strcmp(name, ".plt")) {
			ps->plt = sh;
			ps->has_plt = true;
		} else if (sh.sh_type == SHT_PROGBITS && !strcmp(name, ".plt.sec")) {
			ps->plt_sec = sh;
			ps->has_plt_sec = true;
		}
	}
	return ps->rela_scn && (ps->has_plt || ps->has_plt_sec) ? 0 : -ENOENT;
}

/* Where entry 0 starts and how big each is, for n slots; false when the sizes do not add up. */
static bool plt_layout(const GElf_Ehdr *eh, const struct plt_sections *ps, size_t n,
		       uint64_t *first, uint64_t *entry_size)
{
	const GElf_Shdr *sh = ps->has_plt_sec ? &ps->plt_sec : &ps->plt;
	uint64_t header = 0;

	if (!ps->has_plt_sec)
		header = eh->e_machine == EM_X86_64 ? 16 : eh->e_machine == EM_AARCH64 ? 32 : 0;
	if (eh->e_machine != EM_X86_64 && eh->e_machine != EM_AARCH64)
		return false;
	*entry_size = sh->sh_entsize ? sh->sh_entsize : PLT_ENTRY_DEFAULT;
	if (*entry_size > 64 || sh->sh_size < header ||
	    (sh->sh_size - header) != (uint64_t)n * *entry_size)
		return false;
	*first = sh->sh_addr + header;
	return true;
}

/* The name of the symbol relocation r calls, or NULL (IRELATIVE and the like). */
static const char *slot_name(Elf *elf, Elf_Data *syms, size_t strtab, const GElf_Rela *r,
			     size_t *len)
{
	GElf_Sym sym;
	const char *name;
	size_t i = GELF_R_SYM(r->r_info);

	if (i == 0 || !gelf_getsym(syms, (int)i, &sym) ||
	    !(name = elf_strptr(elf, strtab, sym.st_name)) || !name[0])
		return NULL;
	*len = strcspn(name, "@");
	return *len ? name : NULL;
}

ssize_t elf_plt_entries(Elf *elf, uint64_t file_size, struct elf_plt_entry **out)
{
	struct plt_sections ps;
	GElf_Shdr sym_sh;
	GElf_Ehdr eh;
	Elf_Scn *sym_scn;
	Elf_Data *rela, *syms;
	uint64_t first, entry_size;
	size_t n, kept = 0, rela_size = gelf_fsize(elf, ELF_T_RELA, 1, EV_CURRENT);

	*out = NULL;
	if (!gelf_getehdr(elf, &eh) || find_plt_sections(elf, file_size, &ps) < 0 || !rela_size)
		return 0;
	sym_scn = elf_getscn(elf, ps.rela.sh_link);
	if (!sym_scn || !gelf_getshdr(sym_scn, &sym_sh) || sym_sh.sh_type != SHT_DYNSYM ||
	    !elf_section_in_file(&sym_sh, file_size))
		return 0;
	rela = elf_getdata(ps.rela_scn, NULL);
	syms = elf_getdata(sym_scn, NULL);
	if (!rela || !rela->d_buf || rela->d_type != ELF_T_RELA || !syms || !syms->d_buf ||
	    syms->d_type != ELF_T_SYM)
		return 0;
	n = rela->d_size / rela_size;
	if (n == 0 || n > PLT_ENTRIES_MAX || !plt_layout(&eh, &ps, n, &first, &entry_size))
		return 0;
	if (!(*out = calloc(n, sizeof(**out))))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct elf_plt_entry *e = &(*out)[kept];
		GElf_Rela r;

		if (!gelf_getrela(rela, (int)i, &r))
			break;
		e->name = slot_name(elf, syms, sym_sh.sh_link, &r, &e->name_len);
		e->start = first + i * entry_size;
		e->size = entry_size;
		kept += e->name != NULL;
	}
	return (ssize_t)kept;
}

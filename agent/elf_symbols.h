/* SPDX-License-Identifier: MIT */
/*
 * Function symbols of one loaded module, read by the agent from the module's
 * file with plain <elf.h> parsing (the agent may not use libelf). .symtab when
 * present, else .dynsym. Defensive: every offset and size is checked against
 * the file, a truncated or malformed ELF returns an error, never a crash.
 */
#ifndef PROFD_ELF_SYMBOLS_H
#define PROFD_ELF_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct elf_function {
	const char *name;   /* points into the owning elf_symbols */
	uint64_t value;     /* st_value: ELF virtual address */
	uint64_t size;      /* st_size */
	/* the lowest address of another function symbol above value (whether a
	   selected load kept it or not), UINT64_MAX when none */
	uint64_t next;
	unsigned char is_ifunc;  /* STT_GNU_IFUNC: value is the resolver */
	unsigned char is_global; /* STB_GLOBAL or STB_WEAK */
	/* aarch64 STO_AARCH64_VARIANT_PCS: SVE/SME vector calling convention */
	unsigned char is_variant_pcs;
};

struct elf_symbols {
	struct elf_function *functions;  /* sorted by value, one entry per distinct address
					    (aliases folded: the global, shortest name wins) */
	size_t n_functions;
	int from_symtab;                 /* 1 when .symtab was present */
	/*
	 * Go code in this module (a .go.buildinfo or .gopclntab section, or a
	 * runtime.buildVersion symbol): Go's runtime reads the return addresses
	 * on goroutine stacks, so none of its functions may be return-hijacked.
	 * go_text_lo..go_text_hi are runtime.text..runtime.etext (ELF addresses),
	 * which bound every Go function; both 0 when the symbols are missing
	 * (stripped): then nothing in the module can be told apart from Go.
	 */
	int has_go;
	uint64_t go_text_lo, go_text_hi;
	/*
	 * Runtimes whose stack walkers read the return addresses of C++ frames
	 * their generated code calls (agent/instrument.c refuses some, and the
	 * enter hook leaves the rest unhijacked when generated code calls them).
	 * has_v8: V8 is linked in (v8::internal symbols). v8_blob_lo..v8_blob_hi:
	 * its embedded builtins, generated code linked into .text
	 * (v8_Default_embedded_blob_code_ and its _size_), ELF addresses; both 0
	 * when the symbols are missing. has_hotspot: HotSpot's libjvm
	 * (gHotSpotVMStructs).
	 */
	int has_v8, has_hotspot;
	uint64_t v8_blob_lo, v8_blob_hi;
	/* the span of the Builtins_ functions (ELF addresses, kept or not); 0, 0 without */
	uint64_t v8_builtins_lo, v8_builtins_hi;
	/* PT_LOAD segments, to check that [value, value+size) is inside an executable one */
	struct elf_segment { uint64_t vaddr, memsz, offset, filesz; uint32_t flags; } *segments;
	size_t n_segments;
	void *storage;                   /* internal */
};

/*
 * Loads the symbols of the ELF file at path (mmap'ed read-only, unmapped
 * before returning). Returns 0, or a negative errno with a one-line reason in
 * err that does not repeat the path ("truncated section header table at
 * 0x...", ...):
 *   -ENOEXEC  not an ELF64 little-endian executable or shared object of our machine,
 *             or a truncated or malformed one
 *   -ENODATA  no .symtab and no .dynsym (a table without functions is not an
 *             error: n_functions is 0)
 *   -ENOMEM, or the negative errno of open/fstat/mmap.
 * On error *out is zeroed (elf_symbols_free on it is harmless). Names are
 * copied: nothing points into the file afterwards. The file must not shrink
 * while it is read (SIGBUS); the result is read-only and may be shared.
 */
int elf_symbols_load(const char *path, struct elf_symbols *out, char *err, size_t errlen);
/* Same from a caller buffer (any alignment); nothing points into buf afterwards. */
int elf_symbols_load_buffer(const uint8_t *buf, size_t len, struct elf_symbols *out, char *err,
			    size_t errlen);

/* Whether a function of that name may be wanted (called once per function symbol). */
typedef bool (*elf_symbols_keep_fn)(void *ctx, const char *name);

/*
 * The same load, keeping only the functions whose name keep() accepts: the
 * result is the full load's minus the other entries (an address is dropped
 * when the alias that names it is not kept), with the same fields, next
 * and the module's markers included. A full load sorts every function of
 * the module; this one only those kept (libc: some 3,000 sorted at each
 * process start for the few a --funcs glob and the unwinders need).
 */
int elf_symbols_load_selected(const char *path, elf_symbols_keep_fn keep, void *ctx,
			      struct elf_symbols *out, char *err, size_t errlen);
int elf_symbols_load_buffer_selected(const uint8_t *buf, size_t len, elf_symbols_keep_fn keep,
				     void *ctx, struct elf_symbols *out, char *err,
				     size_t errlen);
void elf_symbols_free(struct elf_symbols *s);

/* 1 when [value, value + size) may be Go code (see has_go), else 0. */
int elf_symbols_is_go(const struct elf_symbols *s, uint64_t value, uint64_t size);

#endif

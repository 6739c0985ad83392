/* SPDX-License-Identifier: MIT */
/*
 * Symbolization for one target process: its executable mappings (from perf
 * MMAP2 records or /proc/PID/maps) and, per ELF file, the function symbols
 * from .symtab, a separate debug file or .dynsym plus the GNU build id
 * (libelf); anonymous code through the target's perf JIT map. Files are opened
 * through /proc/PID/root so the target's view of paths is used, and each file
 * is loaded once per symbolizer. Every ELF is treated as hostile: truncated
 * or malformed files give a module without symbols, never a crash.
 */
#ifndef PROFD_SYMBOLS_H
#define PROFD_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct symbolizer;

struct symbol_info {
	const char *function;        /* NULL when no symbol covers pc */
	uint64_t function_offset;    /* pc - symbol start */
	uint64_t rel_pc;             /* pc in the ELF's own virtual addresses */
	const char *mapping_path;    /* file path, or "[jit]" / "[anon]" / "[vdso]" / "[unknown]";
					kernel_symbols_lookup: "[kernel.kallsyms]" / "[MODULE]" */
	const uint8_t *build_id;     /* raw bytes or NULL */
	size_t build_id_len;
	uint64_t map_start, map_end, map_pgoff, load_bias;
	const char *symbols_error;   /* why the mapping's file gave no symbols ("cannot open
					file", "not an ELF file", ...), else NULL */
};

/*
 * One symbolizer per target process. Not thread-safe: one thread at a time.
 * ELF files are read lazily (first lookup in them) from /proc/PID/root/PATH,
 * else PATH, else /proc/PID/map_files/START-END; the vdso from /proc/PID/mem.
 * Symbols: .symtab, else /usr/lib/debug/.build-id/xx/yyyy.debug's .symtab,
 * else the .symtab of the .gnu_debuglink file found where gdb looks (DIR/NAME,
 * DIR/.debug/NAME, /usr/lib/debug/DIR/NAME, DIR the file's directory, seen
 * from the target's root first) whose CRC-32 matches (and build id, when both
 * have one), else .dynsym; FUNC and GNU_IFUNC only; aliases fold to one name (global or
 * weak before local, then the shortest, then byte order); a symbol of size 0
 * covers up to the next symbol or the end of its section.
 */
struct symbolizer *symbolizer_new(pid_t pid);
void symbolizer_free(struct symbolizer *s);

/*
 * Files are read through c (daemon/symbols/module_cache.h), shared with the
 * other symbolizers given it: c must outlive their lookups, not them.
 */
struct module_cache;
void symbolizer_share_modules(struct symbolizer *s, struct module_cache *c);

/*
 * Records an executable mapping (later ones replace overlapping earlier ones).
 * path NULL, "", "//anon" or "[anon:...]" is reported as "[anon]". Returns 0,
 * -EINVAL (start >= end) or -ENOMEM.
 */
int symbolizer_add_mapping(struct symbolizer *s, uint64_t start, uint64_t end, uint64_t pgoff,
			   const char *path);

/*
 * The same, with the file's identity from the kernel's MMAP2 record (dev as
 * makedev(maj, min), ino; 0 and 0: not known): a file another process of the
 * session loaded already is then taken without opening it again.
 */
int symbolizer_add_mapping_id(struct symbolizer *s, uint64_t start, uint64_t end, uint64_t pgoff,
			      const char *path, uint64_t dev, uint64_t ino);

/*
 * Reads the executable mappings of /proc/PID/maps (for processes already
 * running): file-backed, [vdso] and the like, and anonymous ones as "[anon]".
 * Returns 0 or the negative errno of opening the file (-ENOENT: no process).
 */
int symbolizer_load_proc_maps(struct symbolizer *s);

/*
 * symbolizer_load_proc_maps from text, a /proc/PID/maps file read already
 * (proc_maps_text_read: read once for the symbolizer and the unwinder).
 * 0 or -ENOMEM.
 */
int symbolizer_load_maps_text(struct symbolizer *s, const char *text, size_t len);

/*
 * Adds from's mappings (their files read when a lookup first needs them): a
 * forked child maps what its parent did (perf reports none of it). 0 or -ENOMEM.
 */
int symbolizer_copy_mappings(struct symbolizer *s, const struct symbolizer *from);

/*
 * Anonymous code is looked up in perf's JIT map, /tmp/perf-NSPID.map inside
 * the target's root (see daemon/symbols/jit_map.h for the checks it must pass). It
 * is read on the first pc in an anonymous mapping, then re-checked (a stat,
 * then only the lines appended since) once every SYMBOLIZER_JIT_RECHECK_MISSES
 * anonymous pcs it does not cover.
 */
#define SYMBOLIZER_JIT_RECHECK_MISSES 64

/*
 * Resolves pc. Always fills *out (with "[unknown]" mapping when pc is in no
 * known mapping) and returns 0 if pc was inside a known mapping, -ENOENT if not.
 * rel_pc goes through the PT_LOAD holding the file offset pc - map_start +
 * map_pgoff; without program headers ([anon], non-ELF) it is that offset.
 * A pc in an anonymous mapping that the JIT map covers gets mapping_path
 * "[jit]" and the map's name (map_* and rel_pc still describe the anonymous
 * mapping); without an entry it stays "[anon]", with symbols_error saying
 * why a map present was refused. Pointers stay valid until symbolizer_free.
 */
int symbolizer_lookup(struct symbolizer *s, uint64_t pc, struct symbol_info *out);

#endif

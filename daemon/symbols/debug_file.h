/* SPDX-License-Identifier: MIT */
/*
 * Where a module's separate debug file is, by gdb's rules: ROOT/.build-id/
 * xx/yyyy.debug, else the .gnu_debuglink name in DIR, DIR/.debug and
 * ROOT/DIR (ROOT normally /usr/lib/debug, DIR the module's directory),
 * checked by CRC-32. Shared by elf_module.c (symbols), dwarf_params.c
 * (parameters) and the unwinder's .debug_frame search. Only paths and
 * checks: it opens nothing but the file whose CRC it is asked for.
 */
#ifndef PROFD_DEBUG_FILE_H
#define PROFD_DEBUG_FILE_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define DEBUG_FILE_ROOT "/usr/lib/debug"
/* Candidates of debug_file_debuglink_path: DIR/NAME, DIR/.debug/NAME, ROOT/DIR/NAME. */
#define DEBUG_FILE_DEBUGLINK_PLACES 3

/*
 * Writes ROOT/.build-id/xx/yyyy.debug (root NULL: DEBUG_FILE_ROOT) for the
 * build id id[0 .. len). Returns 0, -EINVAL (len < 2) or -ENAMETOOLONG.
 */
int debug_file_build_id_path(char *buf, size_t size, const char *root, const uint8_t *id,
			     size_t len);

/*
 * Reads the .gnu_debuglink section of elf (file_size bytes long): the name
 * into name[name_size], the CRC-32 in host order. False without a usable
 * one; a name holding '/' (or "." / "..") is refused, so a hostile file
 * cannot steer the search out of the three directories.
 */
bool debug_file_read_debuglink(Elf *elf, uint64_t file_size, char *name, size_t name_size,
			       uint32_t *crc);

/*
 * Candidate i (0 .. DEBUG_FILE_DEBUGLINK_PLACES - 1) for the debuglink name
 * of the module at module_path (absolute). Returns 0, -EINVAL (relative
 * path, i out of range) or -ENAMETOOLONG.
 */
int debug_file_debuglink_path(char *buf, size_t size, unsigned int i, const char *root,
			      const char *module_path, const char *name);

/*
 * Whether elf's section headers lie inside its file_size bytes. A truncated
 * file keeps its build id and debuglink in its first pages: it must not
 * pull in a debug file (whose contents it no longer matches) either.
 */
bool debug_file_headers_in_file(Elf *elf, uint64_t file_size);

/* CRC-32 (gdb's gnu_debuglink_crc32) of the file behind fd: 0, -EFBIG (> 4 GiB), -EIO, -ENOMEM. */
int debug_file_crc32(int fd, uint32_t *out);

#endif

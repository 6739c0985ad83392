/* SPDX-License-Identifier: MIT */
/*
 * Internal to daemon/symbols/symbols.c: perf's JIT symbol convention, the file
 * /tmp/perf-PID.map a JIT (V8, perf-map-agent, LuaJIT, ...) appends
 * "START SIZE name" lines to (hex, no 0x). The file belongs to the target,
 * so it is hostile: it must be a regular file owned by the target's user and
 * not writable by others, at most JIT_MAP_MAX_FILE_BYTES, and every line is
 * validated (bad ones are skipped and counted). Never follows a final symlink.
 */
#ifndef PROFD_JIT_MAP_H
#define PROFD_JIT_MAP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define JIT_MAP_MAX_FILE_BYTES (64u << 20)
#define JIT_MAP_MAX_SYMBOLS (4u << 20)
#define JIT_MAP_MAX_NAME_LEN 4096

struct jit_map;

/* [start, end) of one JIT'd function. */
struct jit_symbol {
	uint64_t start, end;
	const char *name;   /* valid until jit_map_free, never reused for another name */
};

struct jit_map_stats {
	size_t n_symbols;
	uint64_t bad_lines;     /* lines skipped as malformed, summed over every read */
	uint64_t reads;         /* successful (re)reads of the file, partial ones included */
};

/*
 * A map for target pid, empty until jit_map_refresh. path NULL: the target's
 * own /tmp/perf-NSPID.map, resolved inside /proc/PID/root (NSPID: the pid as
 * the target's namespace numbers it); else path as given (tests). Returns NULL
 * with errno set (ENOMEM). One thread at a time; no global state.
 */
struct jit_map *jit_map_new(pid_t pid, const char *path);
void jit_map_free(struct jit_map *m);

/*
 * Opens the file and, when its identity, size or mtime changed since the
 * last read, reads what is new: only the appended bytes while the file only
 * grew, else all of it. A final line without its newline waits for the next
 * read (the JIT may be writing it). Returns 1 when symbols were (re)read, 0
 * when nothing changed, or a negative errno: -ENOENT (no file), -ELOOP (a
 * symlink), -EPERM (wrong owner, writable by others, not a regular file),
 * -EFBIG (too big, or too many symbols or names), -ESRCH (the target's uid
 * is unknown). When the file cannot be opened or is refused, the symbols
 * already read stay.
 */
int jit_map_refresh(struct jit_map *m);

/*
 * Adds the complete lines of buf[0, len) as if appended to the file; returns
 * the bytes consumed (up to the last newline) or -EFBIG / -ENOMEM. For
 * jit_map_refresh and tests.
 */
long jit_map_parse(struct jit_map *m, const char *buf, size_t len);

/* The symbol covering pc (the latest line wins where lines overlap): 0, or -ENOENT. */
int jit_map_find(const struct jit_map *m, uint64_t pc, struct jit_symbol *out);

/* Why the last refresh failed (static string), or NULL when it did not or the file is absent. */
const char *jit_map_error(const struct jit_map *m);

void jit_map_get_stats(const struct jit_map *m, struct jit_map_stats *out);

#endif

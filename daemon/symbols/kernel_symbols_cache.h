/* SPDX-License-Identifier: MIT */
/*
 * The kernel's symbols shared by the sessions of one profd: /proc/kallsyms
 * read once, not per session (reading and parsing it costs 100-200 ms of
 * CPU on a loaded machine, while the agents of the other sessions wait for
 * profd to read their sockets; eight sessions starting at once lost calls to
 * that). Read again when the module list changed or the table is older than
 * KERNEL_SYMBOLS_CACHE_NS (BPF programs and ftrace trampolines come and go
 * without a module). Whether a session may see kernel frames is still the
 * session's decision (access_may_see_kernel).
 */
#ifndef PROFD_KERNEL_SYMBOLS_CACHE_H
#define PROFD_KERNEL_SYMBOLS_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/symbols/kernel_symbols.h"

#define KERNEL_SYMBOLS_CACHE_NS (10ull * 1000000000ull)

struct kernel_symbols_cache {
	struct kernel_symbols *table; /* the cache's own reference; NULL: none yet */
	uint64_t loaded_ns;           /* CLOCK_MONOTONIC */
	uint64_t modules_hash;        /* of /proc/modules when it was read */
	/* where to read them (NULL: /proc/kallsyms and /proc/modules), for tests */
	const char *kallsyms_path, *modules_path;
};

/*
 * A reference to the current table (kernel_symbols_free it once), read now
 * when the cached one is stale; NULL with a one-line reason in err as
 * kernel_symbols_load gives it.
 */
struct kernel_symbols *kernel_symbols_cache_get(struct kernel_symbols_cache *c, char *err,
						size_t errlen);

/* Drops the cache's reference (sessions keep theirs). */
void kernel_symbols_cache_fini(struct kernel_symbols_cache *c);

#endif

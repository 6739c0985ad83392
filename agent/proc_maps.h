/* SPDX-License-Identifier: MIT */
/*
 * Snapshot of the process's own mappings (/proc/self/maps): where memory is
 * mapped and with which protection, so the patcher can find free space near a module and
 * restore a page's exact protection after writing code.
 */
#ifndef PROFD_PROC_MAPS_H
#define PROFD_PROC_MAPS_H

#include <stddef.h>
#include <stdint.h>

struct proc_map {
	uint64_t start, end;
	int prot; /* PROT_* */
};

struct proc_maps {
	struct proc_map *maps; /* sorted by start */
	size_t n;
};

/* Where proc_maps_load_how takes the mappings from. */
enum proc_maps_source {
	PROC_MAPS_ANY,   /* PROCMAP_QUERY, else the text (kernels before 6.11) */
	PROC_MAPS_TEXT,  /* the text of /proc/self/maps */
	PROC_MAPS_QUERY, /* PROCMAP_QUERY only: -ENOTTY (or -EINVAL) without it */
};

/*
 * Fills m with the process's mappings (proc_maps_free() it). 0, or a
 * negative errno (the open's, the read's or the ioctl's; -ENOMEM) with m
 * empty. Not thread-safe against mappings changing meanwhile (setup only).
 */
int proc_maps_load_how(struct proc_maps *m, enum proc_maps_source how);
/* proc_maps_load_how(m, PROC_MAPS_ANY). */
int proc_maps_load(struct proc_maps *m);
void proc_maps_free(struct proc_maps *m);
/*
 * Adds [start, end) with prot, a range that was free (a mapping we just
 * made): the snapshot stays sorted. 0, or -ENOMEM.
 */
int proc_maps_insert(struct proc_maps *m, uint64_t start, uint64_t end, int prot);
/* The mapping containing addr, or NULL. */
const struct proc_map *proc_maps_find(const struct proc_maps *m, uint64_t addr);
/*
 * The main thread's stack [*lo, *hi) as glibc's pthread_getattr_np finds
 * it (from its stack end, __libc_stack_end, the stack's rlimit and the
 * mapping below the stack's) in the snapshot rather than in a fresh read of
 * /proc/self/maps. 0, or -ENOENT when no mapping holds stack_end.
 */
int proc_maps_main_stack(const struct proc_maps *m, uint64_t libc_stack_end, uint64_t rlimit,
			 uint64_t page, uint64_t *lo, uint64_t *hi);

#endif

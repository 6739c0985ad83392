/* SPDX-License-Identifier: MIT */
/*
 * Snapshot of the process's own /proc/self/maps: where memory is mapped and
 * with which protection, so the patcher can find free space near a module and
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

int proc_maps_load(struct proc_maps *m);
void proc_maps_free(struct proc_maps *m);
/*
 * Adds [start, end) with prot, a range that was free (a mapping we just
 * made): the snapshot stays sorted. 0, or -ENOMEM.
 */
int proc_maps_insert(struct proc_maps *m, uint64_t start, uint64_t end, int prot);
/* The mapping containing addr, or NULL. */
const struct proc_map *proc_maps_find(const struct proc_maps *m, uint64_t addr);

#endif

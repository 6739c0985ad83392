// SPDX-License-Identifier: MIT
/*
 * Parses /proc/self/maps into a sorted array (see proc_maps.h), its lines
 * with common/proc_maps_line.c. Runs only during setup, never on the hot path.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/proc_maps.h"
#include "common/proc_maps_line.h"

int proc_maps_load(struct proc_maps *m)
{
	struct proc_maps_line l;
	const char *line;
	size_t cap = 0, len, off = 0, line_len;
	char *text;
	int err = proc_maps_text_read(0, &text, &len);

	m->maps = NULL;
	m->n = 0;
	if (err)
		return err;
	while (proc_maps_line_next(text, len, &off, &line, &line_len)) {
		if (proc_maps_line_parse(line, line_len, &l))
			continue;
		if (m->n == cap) {
			size_t ncap = cap ? cap * 2 : 256;
			struct proc_map *n = realloc(m->maps, ncap * sizeof(*n));

			if (!n) {
				free(text);
				proc_maps_free(m);
				return -ENOMEM;
			}
			m->maps = n;
			cap = ncap;
		}
		m->maps[m->n++] = (struct proc_map){ l.start, l.end, l.prot };
	}
	free(text);
	return 0;
}

void proc_maps_free(struct proc_maps *m)
{
	free(m->maps);
	m->maps = NULL;
	m->n = 0;
}

int proc_maps_insert(struct proc_maps *m, uint64_t start, uint64_t end, int prot)
{
	struct proc_map *grown = realloc(m->maps, (m->n + 1) * sizeof(*grown));
	size_t at = m->n;

	if (!grown)
		return -ENOMEM;
	m->maps = grown;
	while (at > 0 && m->maps[at - 1].start > start)
		at--;
	memmove(&m->maps[at + 1], &m->maps[at], (m->n - at) * sizeof(*grown));
	m->maps[at] = (struct proc_map){ start, end, prot };
	m->n++;
	return 0;
}

int proc_maps_main_stack(const struct proc_maps *m, uint64_t libc_stack_end, uint64_t rlimit,
			 uint64_t page, uint64_t *lo, uint64_t *hi)
{
	/* glibc 2.36 nptl/pthread_getattr_np.c, the initial thread, line for line */
	uint64_t top = (libc_stack_end & -page) + page, size, last_to = 0;

	for (size_t i = 0; i < m->n; i++) {
		if (m->maps[i].start <= libc_stack_end && libc_stack_end < m->maps[i].end) {
			size = (rlimit - (m->maps[i].end - top)) & -page;
			if (size > top - last_to)
				size = top - last_to;
			*lo = top - size;
			*hi = top;
			return 0;
		}
		last_to = m->maps[i].end;
	}
	return -ENOENT;
}

const struct proc_map *proc_maps_find(const struct proc_maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < m->maps[mid].start)
			hi = mid;
		else if (addr >= m->maps[mid].end)
			lo = mid + 1;
		else
			return &m->maps[mid];
	}
	return NULL;
}

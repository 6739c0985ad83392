// SPDX-License-Identifier: MIT
/*
 * Parses /proc/self/maps into a sorted array (see proc_maps.h). Runs only
 * during setup, never on the hot path.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "agent/proc_maps.h"

static int parse_prot(const char *perms)
{
	return (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
	       (perms[2] == 'x' ? PROT_EXEC : 0);
}

/* A hex number at *p up to stop; 0 when there is none (*p left at the first other byte). */
static int parse_hex(const char **p, char stop, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	for (; *s && *s != stop; s++) {
		int d = *s >= '0' && *s <= '9' ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 : -1;

		if (d < 0 || v >> 60)
			return 0;
		v = v << 4 | (uint64_t)d;
	}
	if (s == *p || *s != stop)
		return 0;
	*p = s + 1;
	*out = v;
	return 1;
}

/* "START-END PERMS ...": what the kernel writes; scanf's cost was a process start's */
static int parse_line(const char *line, uint64_t *start, uint64_t *end, const char **perms)
{
	if (!parse_hex(&line, '-', start) || !parse_hex(&line, ' ', end) || strlen(line) < 4)
		return 0;
	*perms = line;
	return 1;
}

int proc_maps_load(struct proc_maps *m)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[4096];
	const char *perms;
	size_t cap = 0;
	uint64_t start, end;

	m->maps = NULL;
	m->n = 0;
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		if (!parse_line(line, &start, &end, &perms))
			continue;
		if (m->n == cap) {
			size_t ncap = cap ? cap * 2 : 256;
			struct proc_map *n = realloc(m->maps, ncap * sizeof(*n));

			if (!n) {
				fclose(f);
				proc_maps_free(m);
				return -ENOMEM;
			}
			m->maps = n;
			cap = ncap;
		}
		m->maps[m->n++] = (struct proc_map){ start, end, parse_prot(perms) };
	}
	fclose(f);
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

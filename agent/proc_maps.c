// SPDX-License-Identifier: MIT
/*
 * The process's mappings as a sorted array (see proc_maps.h): asked of the
 * kernel one mapping at a time (PROCMAP_QUERY), else read from the text of
 * /proc/self/maps, its lines parsed by common/proc_maps_line.c. Runs only
 * during setup, never on the hot path.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/proc_maps.h"
#include "common/proc_maps_line.h"

/*
 * PROCMAP_QUERY, Linux 6.11 (include/uapi/linux/fs.h), for headers older
 * than it: the layout is the kernel's ABI, extended only at its end.
 */
#ifndef PROCMAP_QUERY
struct procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};
#define PROCMAP_QUERY _IOWR(0x66, 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_READABLE 0x01
#define PROCMAP_QUERY_VMA_WRITABLE 0x02
#define PROCMAP_QUERY_VMA_EXECUTABLE 0x04
#define PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10
#endif
_Static_assert(sizeof(struct procmap_query) == 104, "PROCMAP_QUERY's first layout");

static int maps_append(struct proc_maps *m, size_t *cap, uint64_t start, uint64_t end, int prot)
{
	if (m->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 32;
		struct proc_map *n = realloc(m->maps, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		m->maps = n;
		*cap = ncap;
	}
	m->maps[m->n++] = (struct proc_map){ start, end, prot };
	return 0;
}

/* Appends to m; on failure m may hold part of them (the caller frees it). */
static int maps_load_text(struct proc_maps *m)
{
	struct proc_maps_line l;
	const char *line;
	size_t cap = 0, len, off = 0, line_len;
	char *text;
	int err = proc_maps_text_read(0, &text, &len);

	if (err)
		return err;
	while (!err && proc_maps_line_next(text, len, &off, &line, &line_len))
		if (!proc_maps_line_parse(line, line_len, &l))
			err = maps_append(m, &cap, l.start, l.end, l.prot);
	free(text);
	return err;
}

/*
 * One ioctl per mapping, without its name: in a fresh process 30-40 us
 * less than reading and parsing the text (the kernel writes no paths).
 * It leaves out the gate area ([vsyscall]), which is no mapping of the
 * process's and above any address the agent maps or patches. -ENOTTY from
 * a kernel without it; on failure m may hold part of them.
 */
static int maps_load_query(struct proc_maps *m)
{
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC), err = 0;
	size_t cap = 0;
	uint64_t addr = 0;

	if (fd < 0)
		return -errno;
	for (;;) {
		struct procmap_query q = { .size = sizeof(q),
					   .query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA,
					   .query_addr = addr };

		if (ioctl(fd, PROCMAP_QUERY, &q)) {
			/* ENOENT: no mapping at or above addr, the walk's end */
			err = errno == ENOENT && m->n ? 0 : -errno;
			break;
		}
		err = maps_append(m, &cap, q.vma_start, q.vma_end,
				  (q.vma_flags & PROCMAP_QUERY_VMA_READABLE ? PROT_READ : 0) |
					  (q.vma_flags & PROCMAP_QUERY_VMA_WRITABLE ? PROT_WRITE : 0) |
					  (q.vma_flags & PROCMAP_QUERY_VMA_EXECUTABLE ? PROT_EXEC : 0));
		if (err)
			break;
		addr = q.vma_end;
	}
	close(fd);
	return err;
}

int proc_maps_load_how(struct proc_maps *m, enum proc_maps_source how)
{
	int err;

	m->maps = NULL;
	m->n = 0;
	err = how == PROC_MAPS_TEXT ? maps_load_text(m) : maps_load_query(m);
	if (err && how == PROC_MAPS_ANY) {
		/* before Linux 6.11 (-ENOTTY), or an ioctl a sandbox refuses: the text */
		proc_maps_free(m);
		err = maps_load_text(m);
	}
	if (err)
		proc_maps_free(m);
	return err;
}

int proc_maps_load(struct proc_maps *m)
{
	return proc_maps_load_how(m, PROC_MAPS_ANY);
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

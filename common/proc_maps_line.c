// SPDX-License-Identifier: MIT
/*
 * /proc/PID/maps lines parsed by hand (see common/proc_maps_line.h), the
 * fields in the order and the bases the kernel's show_map_vma writes them.
 * Never logs: the agent and profd each say what a failure means to them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/proc_maps_line.h"
#include "common/proc_text.h"

/* Digits in base (16 or 10) at *p, before end, up to stop (or end when stop is 0). */
static int parse_num(const char **p, const char *end, int base, char stop, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;

	for (; s < end && *s != stop; s++) {
		int d = *s >= '0' && *s <= '9'                  ? *s - '0'
			: base == 16 && *s >= 'a' && *s <= 'f' ? *s - 'a' + 10
							       : -1;

		if (d < 0 || v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
			return -EINVAL;
		v = v * (uint64_t)base + (uint64_t)d;
	}
	if (s == *p || (stop && (s == end || *s != stop)))
		return -EINVAL;
	*p = s < end ? s + 1 : s;
	*out = v;
	return 0;
}

int proc_maps_line_parse(const char *line, size_t len, struct proc_maps_line *l)
{
	const char *p = line, *end = line + len;
	uint64_t major, minor;

	if (parse_num(&p, end, 16, '-', &l->start) || parse_num(&p, end, 16, ' ', &l->end) ||
	    end - p < 5 || p[4] != ' ')
		return -EINVAL;
	l->prot = (p[0] == 'r' ? PROT_READ : 0) | (p[1] == 'w' ? PROT_WRITE : 0) |
		  (p[2] == 'x' ? PROT_EXEC : 0);
	p += 5;
	if (parse_num(&p, end, 16, ' ', &l->pgoff) || parse_num(&p, end, 16, ':', &major) ||
	    parse_num(&p, end, 16, ' ', &minor) || major > UINT32_MAX || minor > UINT32_MAX)
		return -EINVAL;
	l->major = (uint32_t)major;
	l->minor = (uint32_t)minor;
	/* the inode ends the line when there is no path */
	if (parse_num(&p, end, 10, memchr(p, ' ', (size_t)(end - p)) ? ' ' : 0, &l->inode))
		return -EINVAL;
	while (p < end && *p == ' ') /* the kernel pads to the path's column */
		p++;
	l->path = p;
	l->path_len = (size_t)(end - p);
	return 0;
}

int proc_maps_line_next(const char *text, size_t len, size_t *off, const char **line,
			size_t *line_len)
{
	const char *nl;

	if (*off >= len)
		return 0;
	*line = text + *off;
	nl = memchr(*line, '\n', len - *off);
	*line_len = nl ? (size_t)(nl - *line) : len - *off;
	*off += *line_len + (nl != NULL);
	return 1;
}

int proc_maps_line_next_exec(const char *text, size_t len, size_t *off, struct proc_maps_line *l,
			     char *path, size_t path_size)
{
	const char *line;
	size_t line_len;

	while (proc_maps_line_next(text, len, off, &line, &line_len)) {
		if (proc_maps_line_parse(line, line_len, l) || !(l->prot & PROT_EXEC) ||
		    l->path_len >= path_size)
			continue;
		memcpy(path, l->path, l->path_len);
		path[l->path_len] = '\0';
		return 1;
	}
	return 0;
}

int proc_maps_text_read(pid_t pid, char **text, size_t *len)
{
	char path[64];

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/maps");
	return proc_text_read(path, text, len);
}

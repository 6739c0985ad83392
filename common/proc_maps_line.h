/* SPDX-License-Identifier: MIT */
/*
 * The one parser of /proc/PID/maps lines (the agent's own map, profd's
 * symbolizer and DWARF unwinder), by hand: scanf's cost was a measurable
 * share of a process start and of profd's CPU per process. Pure, libc only,
 * no allocation but in proc_maps_text_read; runs inside the agent.
 */
#ifndef PROFD_PROC_MAPS_LINE_H
#define PROFD_PROC_MAPS_LINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* "START-END PERMS OFFSET MAJOR:MINOR INODE [PATH]", as the kernel writes it. */
struct proc_maps_line {
	uint64_t start, end, pgoff, inode;
	uint32_t major, minor;
	int prot;           /* PROT_READ | PROT_WRITE | PROT_EXEC */
	const char *path;   /* in the caller's text, not terminated ("" when none) */
	size_t path_len;    /* up to the line's end; " (deleted)" and blanks inside kept */
};

/*
 * Parses the line at line (len bytes, up to and without its '\n'). The path
 * starts after the blanks that follow the inode. 0, or -EINVAL when the
 * line is not a maps line (a field missing or malformed, a number too
 * large for 64 bits).
 */
int proc_maps_line_parse(const char *line, size_t len, struct proc_maps_line *l);

/*
 * The next line of text[*off, len): its start in *line and its length
 * without the '\n' in *line_len; *off moves past it. 0 at the end.
 */
int proc_maps_line_next(const char *text, size_t len, size_t *off, const char **line,
			size_t *line_len);

/*
 * The next executable mapping of text[*off, len), lines that do not parse
 * skipped: 1 with *l filled and its path copied, NUL-terminated, into path
 * (path_size bytes; a mapping whose path is longer is skipped), 0 at the end.
 */
int proc_maps_line_next_exec(const char *text, size_t len, size_t *off, struct proc_maps_line *l,
			     char *path, size_t path_size);

/*
 * Reads /proc/PID/maps (pid 0: /proc/self/maps) whole, its size unknown
 * until read, into a new NUL-terminated buffer: *text (free() it) and
 * *len. 0, or a negative errno (the open's, -ENOENT: no such process; the
 * read's; -ENOMEM).
 */
int proc_maps_text_read(pid_t pid, char **text, size_t *len);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * A whole /proc file (or any small text file) read into one NUL-terminated
 * malloc'ed buffer: the agent's and profd's maps, profctl's status, stat and
 * maps of a process it attaches to. seq_file hands out at least a page per
 * read, so the buffer keeps a page of room. libc only; runs inside the agent.
 */
#ifndef PROFD_PROC_TEXT_H
#define PROFD_PROC_TEXT_H

#include <stddef.h>

/* 0 with *text (free() it) and *len (may be NULL), or a negative errno. */
int proc_text_read(const char *path, char **text, size_t *len);

#endif

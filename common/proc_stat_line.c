// SPDX-License-Identifier: MIT
/*
 * /proc/PID/stat's line parsed by hand (see common/proc_stat_line.h), in
 * the order the kernel's do_task_stat writes it. Never logs.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/proc_stat_line.h"

/* A decimal number, perhaps negative, at *p before end, then a blank or the end. */
static int parse_num(const char **p, const char *end, long long *out)
{
	const char *s = *p;
	bool neg = s < end && *s == '-';
	unsigned long long v = 0;

	s += neg;
	if (s == end || *s < '0' || *s > '9')
		return -EINVAL;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (v > ((uint64_t)INT64_MAX - (unsigned)(*s - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (unsigned)(*s - '0');
	}
	if (s < end && *s != ' ' && *s != '\n')
		return -EINVAL;
	*out = neg ? -(long long)v : (long long)v;
	*p = s < end ? s + 1 : s;
	return 0;
}

int proc_stat_line_parse(const char *buf, size_t len, struct proc_stat_line *st)
{
	const char *end = buf + len, *p = buf, *open, *close = NULL;
	long long v;
	size_t n;

	open = memchr(buf, '(', len);
	for (const char *c = open; c && c < end; c++) /* the name's end: the last ')' */
		if (*c == ')')
			close = c;
	if (!open || !close || open < buf + 2 || open[-1] != ' ')
		return -EINVAL;
	if (parse_num(&p, open, &v) || p != open || v <= 0 || v > INT32_MAX)
		return -EINVAL;
	st->pid = (int)v;
	n = (size_t)(close - open - 1);
	if (n > PROC_STAT_COMM_MAX)
		n = PROC_STAT_COMM_MAX;
	memcpy(st->comm, open + 1, n);
	st->comm[n] = '\0';
	p = close + 1;
	if (end - p < 3 || p[0] != ' ' || p[2] != ' ')
		return -EINVAL;
	st->state = p[1];
	p += 3;
	if (parse_num(&p, end, &v) || v < 0 || v > INT32_MAX)
		return -EINVAL;
	st->ppid = (int)v;
	for (int field = 5; field <= 22; field++) /* pgrp .. starttime */
		if (parse_num(&p, end, &v))
			return -EINVAL;
	if (v < 0)
		return -EINVAL;
	st->start_time = (unsigned long long)v;
	return 0;
}

int proc_stat_read(pid_t pid, struct proc_stat_line *st)
{
	char path[64], buf[1024];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, sizeof(buf));
	if (n < 0)
		n = -errno;
	close(fd);
	if (n < 0)
		return (int)n;
	return proc_stat_line_parse(buf, (size_t)n, st);
}

/* SPDX-License-Identifier: MIT */
/*
 * /proc/PID/stat, parsed by hand: the fields profd asks of a process (its
 * name, state, parent and start time) at each fork, hello and pid check,
 * several times per process of a tree, where sscanf over the whole line
 * was a visible share of profd's CPU. Pure but for proc_stat_read; libc only.
 */
#ifndef PROFD_PROC_STAT_LINE_H
#define PROFD_PROC_STAT_LINE_H

#include <stddef.h>
#include <sys/types.h>

#define PROC_STAT_COMM_MAX 64 /* TASK_COMM_LEN is 16; a kernel worker's name may be longer */

struct proc_stat_line {
	int pid;
	char comm[PROC_STAT_COMM_MAX + 1]; /* as the kernel has it: any bytes but NUL */
	char state;
	int ppid;
	unsigned long long start_time;     /* field 22: clock ticks after boot */
};

/*
 * Parses "PID (COMM) STATE PPID ... STARTTIME ..." in buf (len bytes). The
 * name may hold blanks, parentheses and newlines: it ends at the line's last
 * ')'. 0, or -EINVAL when a field up to the start time is missing or not a
 * number (a longer name is cut to PROC_STAT_COMM_MAX bytes).
 */
int proc_stat_line_parse(const char *buf, size_t len, struct proc_stat_line *st);

/*
 * Reads and parses /proc/PID/stat. 0, or a negative errno: the open's
 * (-ENOENT: no such process), the read's (-ESRCH: gone meanwhile), -EINVAL.
 */
int proc_stat_read(pid_t pid, struct proc_stat_line *st);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * profctl's subcommands (one file each) and the link to the daemon they share.
 */
#ifndef PROFD_PROFCTL_H
#define PROFD_PROFCTL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

int cmd_run(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_detach(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_open(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_funcs(int argc, char **argv);
int cmd_top(int argc, char **argv);

/* CMD's file as execvp would find it (PATH), in out; 0 or a negative errno. */
int profctl_find_command(const char *cmd, char *out, size_t len);
/*
 * profctl/foreign_arch.c: 1 with arch set when cmd_path is a program of
 * another architecture (its ELF machine, or a qemu-ARCH runner), 0 when it
 * runs natively, or a negative errno.
 */
int foreign_arch_of(const char *cmd_path, char *arch, size_t len);
/* In the child: the agent preloaded in qemu-user's guest only (QEMU_SET_ENV). */
int foreign_arch_preload(const char *agent_path);
/* 1 when cmd_path is an ELF program without a dynamic loader (nothing preloads into it). */
int command_is_static(const char *cmd_path);

struct trace_stream_stats;
struct func_filter;

/* --sort: the key the function tables are ordered by, largest first */
enum profctl_report_sort {
	PROFCTL_SORT_TOTAL = 0, /* the default */
	PROFCTL_SORT_CALLS,
	PROFCTL_SORT_SELF,
	PROFCTL_SORT_AVG,
	PROFCTL_SORT_P99,
};

/* What `profctl report` does, for its command and the tests. */
struct profctl_report_opts {
	bool dump;                        /* --dump: one line per item */
	enum profctl_report_sort sort;
	size_t top;                       /* --top N: rows per table, 0: all */
	bool threads;                     /* --threads: per-thread rows (func_totals, tid != 0) */
	bool percentiles;                 /* --percentiles: p50/p90/p99/max per function */
	const struct func_filter *funcs;  /* --funcs GLOBS: only the functions it selects */
	const char *callers;              /* --callers F: F's callers and callees instead */
	size_t window;                    /* the reader's window in bytes, 0: its default */
	struct trace_stream_stats *stats; /* non-NULL: the reader's figures, filled at the end */
};
/*
 * Streams the trace at path to out, in bounded memory. 0, a negative errno
 * (cannot open or read it, ENOMEM); a damaged trace is not an error.
 */
int profctl_report(const char *path, FILE *out, const struct profctl_report_opts *o);

struct daemon_link {
	int fd;            /* connected to profd */
	pid_t private_pid; /* > 0 when we started a private profd */
	char private_dir[256];
	char socket_path[300];
};

/*
 * Connects to the system profd (PROFD_SOCKET or /run/profd/profd.sock) or,
 * when none answers, starts a private one for this user. Returns 0 or a
 * negative errno after printing a one-line reason.
 */
int daemon_link_open(struct daemon_link *link, bool verbose);
/*
 * Connects to the running profd only ($PROFD_SOCKET, else the system
 * socket; link->socket_path says which): 0 or a negative errno.
 */
int daemon_link_connect(struct daemon_link *link);
/* Closes the connection and waits for a private daemon to exit (bounded). */
void daemon_link_close(struct daemon_link *link);

struct frame_header;
/*
 * One request to the running profd (as daemon_link_connect finds it), with
 * fd passed along when >= 0, and its reply: type and payload (to free).
 * 0, or a negative errno after printing a one-line reason.
 */
int profctl_ask(uint32_t type, const uint8_t *req, size_t len, int fd, struct frame_header *h,
		uint8_t **reply);
/* An ErrorReply from profd: printed as one line; returns -EPERM. */
int profctl_print_refusal(const uint8_t *payload, size_t len);

/* Directory of the running profctl binary (to find profd and the agent). */
int profctl_self_dir(char *buf, size_t len);

/* Samples that were the profiler's own cost (profiling overhead), by part. */
struct profctl_overhead {
	uint64_t samples, of_samples; /* overhead, all samples */
	uint64_t freq_hz;             /* 0: no time estimate */
	uint64_t hooks, flusher, agent;
};

/*
 * One line, the same in run's summary and in report: "PREFIXprofiling
 * overhead: 1234 samples (12.3 % of 10034) ~ 1.23 s: hooks 800, flusher 400,
 * agent 34" (the time is samples / frequency, an estimate).
 */
void profctl_print_overhead(FILE *out, const char *prefix, const struct profctl_overhead *o);

#endif

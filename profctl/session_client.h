/* SPDX-License-Identifier: MIT */
/*
 * What `profctl run` and `profctl attach` share: their options, the output
 * file (opened by profctl with the user's rights, passed to profd), the
 * session handshake with profd, and the closing summary.
 */
#ifndef PROFD_SESSION_CLIENT_H
#define PROFD_SESSION_CLIENT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "profctl/profctl.h"

#define PROFILE_DEFAULT_FREQ 999
/* --max-depth up to the agent's shadow stack (agent/agent_thread.h AGENT_SHADOW_CAPACITY) */
#define PROFILE_MAX_DEPTH 1024

struct profile_options {
	char **patterns;
	size_t n_patterns;
	unsigned freq;
	unsigned duration_s;
	const char *output;
	bool verbose;
	unsigned call_graph; /* 0 auto, 1 fp, 2 dwarf (proto RunRequest.call_graph) */
	unsigned stack_bytes; /* --call-graph dwarf,BYTES; 0 = profd's default */
	unsigned mmap_pages;  /* --mmap-pages: per-CPU ring pages; 0 = profd's default */
	unsigned long long buffer_size; /* --buffer-size: the agent's event buffers; 0 = default */
	unsigned long long min_duration_ns; /* --min-duration: shorter calls off the timeline; 0 = none */
	unsigned max_depth;             /* --max-depth: deeper calls off the timeline; 0 = no limit */
	unsigned trace_compression; /* --trace-compression: 0 profd's default (deflate), 1 none, 2 deflate, 3 zstd */
	unsigned long long ring_size; /* --ring: a flight recorder of this many bytes; 0 = none */
	bool sched_off;               /* --sched off: no scheduler states */
	bool no_inherit;              /* run --no-inherit: the first process only */
	bool children;                /* attach --children: PID's children forked from now on */
	char **arg_specs;             /* --args SPEC, repeatable (common/arg_spec.h) */
	size_t n_arg_specs;
	char **retval_specs;          /* --retval SPEC, repeatable */
	size_t n_retval_specs;
	unsigned args_string_max;     /* --args-string-max: bytes a string is copied up to; 0 = 64 */
	bool auto_args;               /* --auto-args: every parameter, named and typed from DWARF */
};

/*
 * Parses --funcs/--freq/-o/--duration/-v/--call-graph/--mmap-pages/--buffer-size/
 * --trace-compression/--ring/--sched. With stop_at_operand (run: what
 * follows is CMD's) parsing stops at the first operand; otherwise operands
 * are moved to the end. Returns the index of the first operand, or a
 * negative errno after printing why (and usage).
 */
int profile_options_parse(int argc, char **argv, struct profile_options *o, const char *usage,
			  bool stop_at_operand);

/* Checks the --funcs, --args and --retval syntax before anything starts; prints the error. */
int profile_patterns_check(const struct profile_options *o);

struct session_client {
	const struct profile_options *opt;
	struct daemon_link link;
	char output_path[PATH_MAX];
	int out_fd;
	bool sched_told;  /* why there are no scheduler states was said at the start */
	bool quiet;       /* the summary says only what went wrong (profctl top) */
	/* SessionStarted.agent_config in hex (PROFD_AGENT_CONFIG), or NULL: profd sent none */
	char *agent_config_hex;
};

void session_client_init(struct session_client *c, const struct profile_options *opt);

/* Opens -o FILE, or profd-<comm>-<pid>.pftrace; prints why it cannot. */
int session_client_open_output(struct session_client *c, const char *comm, pid_t pid);

/*
 * Connects to profd (or starts a private one) and starts the session: a
 * `run` one, or, with attach_pid > 0, an `attach` one. Gets the agent token
 * (and, for `run`, the agents' config: c->agent_config_hex).
 */
int session_client_start(struct session_client *c, const char *comm, pid_t attach_pid,
			 char *token, size_t token_len);

/* Waits for one frame of type want; prints profd's refusal otherwise. */
int session_client_expect(struct session_client *c, uint32_t want, uint8_t **payload,
			  uint32_t *len, int timeout_ms);

/* Ends the session (the target exited, or profiling stops) and prints the summary. */
int session_client_finish(struct session_client *c, int wait_status);

void session_client_close(struct session_client *c);

#endif

/* SPDX-License-Identifier: MIT */
/*
 * What daemon/session.c (the session: the client, the trace, the sampler,
 * the scheduler view, what spans processes) and daemon/session_process.c
 * (one profiled process: its agent connection, events, call stacks,
 * symbols, exact figures) share. Private to those two files.
 */
#ifndef PROFD_SESSION_INTERNAL_H
#define PROFD_SESSION_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "daemon/auto_args.h"
#include "daemon/events/func_registry.h"
#include "daemon/sampling/sampler.h"
#include "daemon/server.h"
#include "profd.pb-c.h"

enum { CALL_GRAPH_AUTO = 0, CALL_GRAPH_FP = 1, CALL_GRAPH_DWARF = 2 };

#define SAMPLE_HOLD_MAX_NS (2ull * 1000000000ull) /* samples wait this long for events */

struct session;

/* A perf COMM record whose process is not known yet (session.c, session_process_of_record). */
struct held_comm {
	uint64_t ts;
	pid_t pid;
	uint32_t tid;
	char comm[16];
};

struct thread_slot {
	uint32_t tid;          /* 0 = empty */
	uint64_t last_ts;      /* slices on one thread never go back in time */
	uint64_t drops;
	int named_by_kernel;   /* perf COMM names beat the agent's, read earlier */
};

/*
 * One process of the session: what its agent sent (function ids, events,
 * figures) and what profd keeps to make sense of its samples (its mappings,
 * its call stacks, its stubs). Events and samples of a process never meet
 * another's state.
 */
struct session_process {
	/*
	 * What each read of the rings and each tick look at in every process
	 * of the session (a tree's hundreds, most retired): its first line.
	 */
	struct session_process *next;
	/* the session's processes not retired, newest first (what they walk) */
	struct session_process *active_next, *active_prev;
	struct sample_pipeline *samples_out; /* NULL: no sampling */
	struct conn *agent;
	uint64_t exited_ns;              /* when profd read that */
	bool exited;                     /* the kernel said so (perf EXIT) */
	bool retired;                    /* its symbols and unwinder freed: no more samples */
	struct session *s;
	pid_t pid, ppid;
	/*
	 * Processes of its pid before it in the session (the kernel reused the
	 * pid), and its identity in the trace: PERFETTO_PROC(pid, generation).
	 */
	uint32_t generation;
	uint64_t trace_proc;
	unsigned long long start_time;   /* /proc/PID/stat: a reused pid is another process */
	char comm[16];                   /* its program, as the kernel names it */
	char why_not[96];                /* no agent: why (static binary, setuid, ...) */
	uint32_t execs;                  /* agents after the first: programs it exec'd */
	uint64_t start_ts;               /* its fork, or where a reused pid's older one ended; 0: none */
	uint64_t exit_ts;                /* its threads' last EXIT record (CLOCK_MONOTONIC); 0: none */
	struct func_registry funcs;      /* its agents' tables: ids and names */
	struct func_stats *stats;        /* exact per-function figures */
	struct event_hists *hists;       /* the buckets of calls on the timeline, for stats */
	struct event_decoder *decoder;
	struct call_stacks *calls;       /* the agent's shadow stacks, replayed */
	struct stub_map *stubs;          /* where the agent's stubs are */
	struct pid_ns_map *pid_ns;       /* NULL: it numbers its threads as we do */
	pid_t ns_pid;                    /* its pid in its own namespace (0: ours), once read */
	bool ns_pid_read;
	struct symbolizer *symbols;
	struct dwarf_unwinder *unwinder; /* NULL: frame-pointer callchains only */
	uint32_t *trace_ids;             /* its agents' ids (funcs) -> the trace's (session_func_id) */
	uint32_t n_trace_ids;
	struct thread_slot *threads;
	uint32_t n_thread_slots, n_threads; /* a power of two; used */
	uint64_t events, drops, events_invalid;
	uint64_t calls_with_args, args_recorded; /* --args/--retval values written to slices */
	/* --auto-args: its current agent's DWARF descriptions (owned by s->auto_args), or NULL */
	struct auto_args_names *auto_names;
	uint64_t buffer_budget, buffer_peak; /* as the agent reported them at its goodbye */
	int agent_said_goodbye;
	/* its agent's connection closed before its goodbye, after this many events */
	bool agent_cut;
	uint64_t events_at_cut;
	bool agent_said_exit;            /* its goodbye was the process's exit, not an exec or detach */
	bool agent_said_exec;            /* its goodbye was an exec's, which may yet fail */
	bool table_inherited;            /* its agent is a fork's: its table is its parent's */
	int agent_seen;
};

struct session {
	uint64_t id;
	char token[33];
	struct conn *client;
	struct ucred client_cred;  /* SO_PEERCRED of the client: who asks for the target */
	pid_t target;
	int out_fd;
	struct perfetto_writer *writer;
	struct sampler *sampler;
	struct sched_session *sched;     /* NULL: no scheduler states (sched_why says why) */
	bool sched_off;                  /* --sched off */
	char sched_why[192];
	bool kernel_wanted;              /* the client may see kernel frames */
	bool kernel_tried;               /* they were asked for (session_kernel_symbols) */
	struct kernel_symbols *kernel;   /* NULL: none (not wanted, or not readable) */
	uint32_t call_graph;             /* CALL_GRAPH_* */
	uint32_t ring_pages, stack_bytes; /* 0: the sampler's defaults */
	uint64_t buffer_size;            /* the agent's event buffer budget; 0: its default */
	uint64_t min_duration_ns;        /* --min-duration (0: none), and in TSC ticks */
	uint64_t min_duration_ticks;
	uint32_t max_depth;              /* --max-depth (0: none) */
	struct demangle_cache *demangled;
	struct module_cache *modules;    /* ELF files' symbols, read once for all processes */
	struct unwind_files *unwind_files; /* and their unwind tables */
	char *comm;
	char *output_name;     /* as the client named it, for status only */
	uint64_t started_ns;
	uint64_t rate_at_ns, rate_mark, events_per_s; /* status: events over the last second */
	char **patterns;
	size_t n_patterns;
	/* --args/--retval (common/arg_spec.h), checked, handed to every agent */
	char **arg_specs, **retval_specs;
	size_t n_arg_specs, n_retval_specs;
	uint32_t args_string_max;
	struct auto_args *auto_args;     /* --auto-args: NULL when off */
	uint32_t freq;
	char agents_cut_warning[320];    /* the summary's line for agents that stopped early */
	struct session_process *procs;   /* every process of the session, newest first */
	/*
	 * Those not retired, in the same order: each read of the rings, each
	 * tick and each agent frame walk them, not a tree's hundreds gone.
	 */
	struct session_process *active;
	/*
	 * procs by pid, the newest of a reused pid (open addressing, a power of
	 * two, at most half full): every sample and scheduler event looks its
	 * process up. NULL: not allocated, the list is walked.
	 */
	struct session_process **pid_index;
	uint32_t pid_index_slots, pid_index_used;
	bool follow_children;            /* not --no-inherit */
	/*
	 * The process whose agent's hello is being handled, while its rings are
	 * read: its FORK and exec COMM records skip /proc's command line and
	 * program checks, which the hello's word (written after) supersedes.
	 */
	pid_t hello_pid;
	/*
	 * COMM records of a pid whose next process, or the end of its last,
	 * is not read yet; placed by its FORK and EXIT records, in arrival
	 * order (session.c, comm_hold).
	 */
	struct held_comm *held_comms;
	uint32_t n_held_comms, held_comms_cap;
	uint32_t n_procs, n_live;        /* processes seen; followed and not gone */
	uint32_t not_followed;           /* seen past the cap */
	/* function names over the session: one trace id per name, whatever process */
	char **func_names;               /* index = trace id; [0] NULL */
	uint32_t n_func_names, func_names_cap;
	uint32_t *func_hash;             /* open addressing over func_names: ids, 0 = empty */
	uint32_t func_hash_cap;
	uint64_t samples_lost;
	uint64_t agent_deadline_ns;
	uint64_t target_exited_ns, events_at_deadline; /* agents_grace_over */
	unsigned long long target_start_time; /* to refuse an agent from a reused pid */
	int attach_mode;
	int target_exited;
	char error[256];
	char warning[256];
	struct session_live *live;       /* profctl top's last answer (daemon/session_live.c) */
	struct session *next;
};

/* daemon/session.c */
void session_error(struct session *s, const char *fmt, const char *detail);
/* The trace's id of a function name (new ones are named in the trace); 0 when out of memory. */
/* The depth calls are kept on the timeline to: --max-depth, within the viewer's limit. */
uint32_t session_timeline_depth(const struct session *s);
uint32_t session_func_id(struct session *s, const char *name);
const char *session_func_name(const struct session *s, uint32_t id);
void session_send_error(struct conn *c, const char *msg);
struct session *session_by_id(struct server *srv, uint64_t id);
/* Another user's session shows only that it exists (root sees everything). */
bool session_may_see(const struct session *s, const struct conn *c);
/* Drains the perf rings (every process's samples and side records). */
void session_read_samples(struct session *s);
/* The kernel's symbols for the session's samples (a sample_pipeline_config kernel callback). */
const struct kernel_symbols *session_kernel_symbols(void *session);
/* Whether session_kernel_symbols would wait for the table's thread (a kernel_pending callback). */
bool session_kernel_symbols_pending(void *session);

/* daemon/session_summary.c: the summary to the client (st: the trace's; samples: summed). */
struct perfetto_writer_stats;
struct sample_pipeline_stats;
void session_send_summary(struct session *s, const struct perfetto_writer_stats *st,
			  const struct sample_pipeline_stats *samples);

/* daemon/session_process.c */
struct session_process *session_process_new(struct session *s, pid_t pid);
/* Flushes what it holds into the trace (samples, figures); the trace must still be open. */
void session_process_finish(struct session_process *p);
void session_process_free(struct session_process *p);
struct session_process *session_process_find(struct session *s, pid_t pid);
/*
 * The process pid was at ts (CLOCK_MONOTONIC ns; 0: now): the newest of the
 * pid, unless the kernel reused it within the session and the newer one
 * began after ts (perf records read late belong to the older one).
 */
struct session_process *session_process_at(struct session *s, pid_t pid, uint64_t ts);
/*
 * The same, for a record that may be of a process of the pid not known yet:
 * perf's rings are read CPU by CPU, so a thread's COMM can come before its
 * process's FORK record. NULL when the records read so far (and, while the
 * newest's exit is unread, /proc) cannot tell: ts is after the newest's
 * end, or /proc has another process (or none) under the pid. A record at
 * or before the last EXIT of the newest's threads is its own: the kernel
 * gives the pid again only after all of them.
 */
struct session_process *session_process_of_record(struct session *s, pid_t pid, uint64_t ts);
/*
 * Its symbols and unwinder (and, with sampling, its sample pipeline); its
 * mappings those of parent (a forked child's: perf reports none of them),
 * else, with load_maps, read from /proc.
 */
int session_process_start_symbols(struct session_process *p, const struct session_process *parent,
				  bool load_maps, bool sampling);
/* Its parent and command line, as /proc shows them now, into the trace. */
void session_process_describe_detail(struct session_process *p);
/*
 * The same for a process whose start time (p->start_time) was read from
 * /proc just now, in the same turn: /proc/PID is checked to be p's after the
 * command line's read only.
 */
void session_process_describe_found(struct session_process *p);
/* The same with the command line its agent read (NULL: /proc's). */
void session_process_describe_with(struct session_process *p, const uint8_t *cmdline, size_t len);
/* Names its threads as /proc shows them now. */
void session_process_describe_threads(struct session_process *p);
/* Sampler records of this process. */
void session_process_sample(struct session_process *p, const struct sampler_sample *smp);
void session_process_mmap(struct session_process *p, const struct sampler_mmap *m);
void session_process_comm(struct session_process *p, uint32_t tid, const char *comm);
/* Every ring read from `started` on. */
void session_process_rings_read(struct session_process *p, uint64_t started);
/* Periodic: samples and switches held too long go out. */
void session_process_tick(struct session_process *p, uint64_t now);
/* Agent frames: its hello (c becomes its agent), its table, events, goodbye. */
int session_process_agent_hello(struct session_process *p, struct conn *c);
void session_process_agent_frame(struct session_process *p, uint32_t type, const uint8_t *payload,
				 size_t len);
void session_process_agent_gone(struct session_process *p);
/*
 * Once it exited, its agent gone and its last samples written: its unwinder
 * (files held open) and symbols go; its figures stay for the session's end.
 */
void session_process_retire(struct session_process *p);
/* Its exact figures on its totals track. */
void session_process_write_totals(struct session_process *p, uint64_t ts);
/*
 * Why its program cannot take the agent, if it cannot (statically linked,
 * setuid, another architecture): read from /proc/PID/exe into why_not.
 */
void session_process_check_program(struct session_process *p);
/* Functions instrumented by its agents. */
uint32_t session_process_functions(const struct session_process *p);
uint64_t session_process_samples(const struct session_process *p);

#endif

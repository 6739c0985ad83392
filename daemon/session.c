// SPDX-License-Identifier: MIT
/*
 * Sessions (see session.h). Control flow of a `run` session:
 *   client RunRequest(+fd) -> SessionStarted; client TargetForked(pid) -> sampler
 *   armed on exec -> SamplingReady; agent Hello -> Config; agent FunctionTable,
 *   Events..., Goodbye; client TargetExited; agent gone -> trace finalized ->
 *   SessionSummary. A client or agent that disappears mid-way still gets its
 *   trace finalized.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/arg_spec.h"
#include "common/mono_clock.h"
#include "common/proc_stat_line.h"
#include "daemon/access.h"
#include "daemon/sampling/call_stacks.h"
#include "daemon/symbols/demangle.h"
#include "daemon/sampling/dwarf_unwind.h"
#include "daemon/events/event_decoder.h"
#include "daemon/events/func_registry.h"
#include "daemon/events/func_stats.h"
#include "daemon/symbols/kernel_symbols.h"
#include "daemon/symbols/module_cache.h"
#include "daemon/sampling/sample_pipeline.h"
#include "daemon/sampling/sampler.h"
#include "daemon/pid_ns.h"
#include "daemon/session.h"
#include "daemon/session_internal.h"
#include "daemon/session_live.h"
#include "daemon/sampling/stub_map.h"
#include "daemon/sampling/unwind_files.h"
#include "daemon/symbols/symbols.h"
#include "daemon/events/tsc_rate.h"
#include "daemon/sched/sched_session.h"
#include "daemon/sched/sched_tracer.h"
#include "proto/event_wire.h"
#include "profd.pb-c.h"
#include "viewer-export/perfetto_writer.h"

#define AGENT_GRACE_NS (3ull * 1000000000ull)   /* after the target exits, and again while */
#define AGENT_GRACE_MAX_NS (30ull * 1000000000ull) /* its agents' events still come, up to this */
#define RETIRE_AFTER_NS (100ull * 1000000ull)    /* a process's exit to freeing its symbols */
/* Per CPU: 16 MiB. A client must not make a root daemon pin memory without bound. */
#define MAX_RING_PAGES 4096
#define STRINGIFY_VALUE(x) #x
#define STRINGIFY(x) STRINGIFY_VALUE(x)
#define MIN_BUFFER_SIZE (64ull << 10)
#define MAX_BUFFER_SIZE (64ull << 30)
#define MAX_MIN_DURATION_NS (3600ull * 1000000000)
#define MAX_DEPTH 1024
#define HELD_COMMS_MAX 4096 /* COMM records waiting for their process (comm_hold) */
/*
 * About what the Perfetto UI in a browser loads (../shared/perfetto-format.md
 * §6.3: its memory grows with the slice count): past it, the summary names
 * the --min-duration that would have kept the timeline under.
 */

/* Ours to hold, unlike the agent's buffers: a client must not make a root daemon keep more. */
#define MAX_RING_SIZE (4ull << 30)
enum { TRACE_COMPRESSION_DEFAULT = 0, TRACE_COMPRESSION_NONE = 1, TRACE_COMPRESSION_DEFLATE = 2,
       TRACE_COMPRESSION_ZSTD = 3 }; /* RunRequest.trace_compression */

void session_error(struct session *s, const char *fmt, const char *detail)
{
	if (s->error[0] == '\0')
		snprintf(s->error, sizeof(s->error), fmt, detail);
	server_log("session %" PRIu64 ": %s", s->id, s->error);
}

void session_send_error(struct conn *c, const char *msg)
{
	Profd__ErrorReply e = PROFD__ERROR_REPLY__INIT;
	uint8_t buf[512];

	e.message = (char *)msg;
	if (profd__error_reply__get_packed_size(&e) <= sizeof(buf))
		conn_send(c, FRAME_ERROR, buf, profd__error_reply__pack(&e, buf));
	conn_close_later(c);
}

/* ---- function names over the session's processes --------------------------------- */

static uint32_t name_hash(const char *name)
{
	uint32_t h = 2166136261u;

	for (; *name; name++)
		h = (h ^ (uint8_t)*name) * 16777619u;
	return h;
}

static int func_names_grow(struct session *s)
{
	uint32_t cap = s->func_hash_cap ? s->func_hash_cap * 2 : 1024;
	uint32_t *hash = calloc(cap, sizeof(*hash));
	char **names = realloc(s->func_names, (size_t)(cap / 2 + 1) * sizeof(*names));

	if (names)
		s->func_names = names;
	if (!hash || !names) {
		free(hash);
		return -ENOMEM;
	}
	if (!s->func_hash_cap)
		names[0] = NULL;
	for (uint32_t id = 1; id <= s->n_func_names; id++) {
		uint32_t k = name_hash(names[id]) & (cap - 1);

		while (hash[k])
			k = (k + 1) & (cap - 1);
		hash[k] = id;
	}
	free(s->func_hash);
	s->func_hash = hash;
	s->func_hash_cap = cap;
	return 0;
}

/*
 * One id per function name in the trace, whichever process and agent named
 * it: a worker forked from its parent, or the same program run again, adds
 * to the same function's slices and figures. New names are named in the trace.
 */
uint32_t session_timeline_depth(const struct session *s)
{
	/* the importer drops slices at its depth limit, counting an import error: ours are filtered */
	return s->max_depth && s->max_depth < PERFETTO_MAX_SLICE_DEPTH ? s->max_depth :
									 PERFETTO_MAX_SLICE_DEPTH;
}

uint32_t session_func_id(struct session *s, const char *name)
{
	uint32_t k;

	if (!name)
		return 0;
	if ((s->n_func_names + 1) * 2 > s->func_hash_cap && func_names_grow(s))
		return 0;
	for (k = name_hash(name) & (s->func_hash_cap - 1); s->func_hash[k];
	     k = (k + 1) & (s->func_hash_cap - 1))
		if (strcmp(s->func_names[s->func_hash[k]], name) == 0)
			return s->func_hash[k];
	if (!(s->func_names[s->n_func_names + 1] = strdup(name)))
		return 0;
	s->func_hash[k] = ++s->n_func_names;
	perfetto_writer_function(s->writer, s->n_func_names, demangle_cached(s->demangled, name));
	return s->n_func_names;
}

const char *session_func_name(const struct session *s, uint32_t id)
{
	return id && id <= s->n_func_names ? s->func_names[id] : NULL;
}

/* ---- the process tree ---------------------------------------------------------------- */

/* Followed at once, at most: a `make -j` of thousands must not exhaust profd. */
#define MAX_LIVE_PROCESSES 256
/* How far up /proc's parents an agent's process is looked for in the session. */
#define MAX_TREE_DEPTH 64

/* Its parent, from /proc/PID/stat; -1 when it is gone. */
static pid_t proc_parent(pid_t pid)
{
	struct proc_stat_line st;

	return proc_stat_read(pid, &st) ? -1 : st.ppid;
}

/* The process the session was started for: named as the client named it. */
static void session_root_described(struct session *s, struct session_process *p)
{
	p->start_time = s->target_start_time;
	p->ppid = proc_parent(p->pid);
	snprintf(p->comm, sizeof(p->comm), "%s", s->comm);
	s->n_procs = s->n_live = 1;
	perfetto_writer_process(s->writer, p->trace_proc, s->comm);
	if (s->attach_mode) /* run: its program is not exec'd yet; its COMM record says when */
		session_process_describe_detail(p);
}

static void session_follow_sched(struct server *srv, struct session *s, pid_t pid);

/* No longer counts against the cap of processes followed at once. */
static void process_exited(struct session *s, struct session_process *p)
{
	p->exited = true;
	p->exited_ns = mono_clock_ns();
	if (s->n_live)
		s->n_live--;
}

/*
 * When p began, for the trace (perfetto_writer_process_start): its fork
 * (fork_ns, 0: not known). A pid reused within the session: the older
 * process of that pid ends in the trace at p's fork (after the last of its
 * threads, whatever records are still unread), else at its last thread's
 * EXIT record read so far, else now: before anything of p, after all of it.
 */
static void session_process_started(struct session *s, struct session_process *p,
				    const struct session_process *older, uint64_t fork_ns)
{
	uint64_t ts = fork_ns;

	p->start_ts = fork_ns;
	if (p->generation == 0) {
		if (fork_ns)
			perfetto_writer_process_start(s->writer, p->trace_proc, fork_ns);
		return;
	}
	if (!ts && older)
		ts = older->exit_ts;
	if (!ts)
		ts = mono_clock_ns();
	p->start_ts = ts;
	perfetto_writer_process_start(s->writer, p->trace_proc, ts);
}

/*
 * Placed by arrival, a reused pid's new thread went to the old process: its
 * COMM was read before its process's FORK record (in a CPU's ring read
 * later), even after the old one's EXIT. The record's time against the
 * lives of the pid's processes decides; until those records are read, it
 * waits. Past HELD_COMMS_MAX (or out of memory), the newest process at
 * its time takes it.
 */
static void comm_hold(struct session *s, pid_t pid, uint32_t tid, const char *comm, uint64_t ts)
{
	struct held_comm *h;

	if (s->n_held_comms == s->held_comms_cap) {
		uint32_t cap = s->held_comms_cap ? s->held_comms_cap * 2 : 8;

		if (cap > HELD_COMMS_MAX || !(h = realloc(s->held_comms, cap * sizeof(*h)))) {
			session_process_comm(session_process_at(s, pid, ts), tid, comm);
			return;
		}
		s->held_comms = h;
		s->held_comms_cap = cap;
	}
	h = &s->held_comms[s->n_held_comms++];
	*h = (struct held_comm){ .ts = ts, .pid = pid, .tid = tid };
	snprintf(h->comm, sizeof(h->comm), "%s", comm);
}

/* The held COMM records of pid that its processes' records read so far now place. */
static void comms_place(struct session *s, pid_t pid)
{
	uint32_t kept = 0;

	for (uint32_t i = 0; i < s->n_held_comms; i++) {
		struct held_comm h = s->held_comms[i];
		struct session_process *p = h.pid == pid ?
			session_process_of_record(s, pid, h.ts) : NULL;

		if (p)
			session_process_comm(p, h.tid, h.comm);
		else
			s->held_comms[kept++] = h;
	}
	s->n_held_comms = kept;
}

/*
 * The session's last records read: a COMM still held whose pid's newest
 * process never showed its EXIT (lost from a full ring) is that one's, no
 * other of the pid having come; one after the newest's end was of a
 * process not followed.
 */
static void comms_place_last(struct session *s)
{
	for (uint32_t i = 0; i < s->n_held_comms; i++) {
		struct held_comm *h = &s->held_comms[i];
		struct session_process *p = session_process_at(s, h->pid, h->ts);

		if (!p->exited)
			session_process_comm(p, h->tid, h->comm);
	}
	s->n_held_comms = 0;
}

/*
 * A process of the tree, followed from now on: its own symbols, sample
 * pipeline and scheduler states, its Perfetto process. Past the cap it is
 * counted, not followed. NULL then, or when it is gone or out of memory.
 * fork_ns: its FORK record's time (0: not known). st: its /proc/PID/stat
 * as the caller just read it (NULL: read here).
 */
static struct session_process *session_add_process(struct server *srv, struct session *s,
						   pid_t pid, pid_t ppid, uint64_t fork_ns,
						   const struct proc_stat_line *st)
{
	struct session_process *older = session_process_find(s, pid);
	struct proc_stat_line read_now;
	struct session_process *p;

	s->n_procs++;
	if (s->n_live >= MAX_LIVE_PROCESSES) {
		s->not_followed++;
		return NULL;
	}
	p = session_process_new(s, pid);
	if (!p)
		return NULL;
	if (older && !older->exited) /* its EXIT record is not read yet: the pid is free, it is gone */
		process_exited(s, older);
	session_process_started(s, p, older, fork_ns);
	s->n_live++;
	p->ppid = ppid;
	/* its start time and name from one read (its comm file as fgets read it: to a newline) */
	if (!st && !proc_stat_read(pid, &read_now))
		st = &read_now;
	if (st) {
		p->start_time = st->start_time;
		snprintf(p->comm, sizeof(p->comm), "%.*s", (int)strcspn(st->comm, "\n"), st->comm);
	}
	/* a fork's parent, known: its mappings are the child's */
	if (s->sampler && session_process_start_symbols(p, fork_ns ? session_process_find(s, ppid) :
								     NULL, true, true))
		snprintf(p->why_not, sizeof(p->why_not), "out of memory for its samples");
	perfetto_writer_process(s->writer, p->trace_proc, p->comm[0] ? p->comm : NULL);
	if (pid != s->hello_pid) /* else its agent's hello describes it next */
		session_process_describe_found(p);
	/*
	 * Its one thread (forked, or its agent just started): named as it, not
	 * from /proc/PID/task. Reading a task's files there while the process
	 * runs costs its parent 0.3-2.4 ms in the reap (d_walk invalidating
	 * them), per process of a tree; later threads come from perf COMM
	 * records and the agent.
	 */
	if (p->comm[0])
		perfetto_writer_thread(s->writer, p->trace_proc, pid, p->comm);
	session_follow_sched(srv, s, pid);
	if (pid != s->hello_pid) /* it runs an agent: nothing to say why not */
		session_process_check_program(p);
	comms_place(s, pid);
	return p;
}

/* A process of the session, not gone (the newest of a reused pid). */
static struct session_process *session_live_process(struct session *s, pid_t pid)
{
	struct session_process *p = session_process_find(s, pid);

	return p && !p->exited ? p : NULL;
}

/* Whether a process whose parent is ppid descends from one the session follows (/proc's now). */
static bool session_descends_from(struct session *s, pid_t ppid)
{
	pid_t at = ppid;

	for (int depth = 0; depth < MAX_TREE_DEPTH; depth++) {
		if (at <= 0)
			return false;
		if (session_live_process(s, at))
			return true;
		at = proc_parent(at);
	}
	return false;
}

/* Whether pid descends from a process the session follows (its parents, as /proc has them now). */
static bool session_descends(struct session *s, pid_t pid)
{
	return session_descends_from(s, proc_parent(pid));
}

static void strv_free(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static void session_free(struct session *s)
{
	while (s->procs) {
		struct session_process *p = s->procs;

		s->procs = p->next;
		session_process_free(p);
	}
	free(s->pid_index);
	free(s->held_comms);
	kernel_symbols_free(s->kernel); /* after the writer: names are keyed by address */
	module_cache_free(s->modules);
	unwind_files_free(s->unwind_files); /* after the processes: their unwinders hold its files */
	auto_args_free(s->auto_args);
	for (uint32_t i = 0; i <= s->n_func_names && s->func_names; i++)
		free(s->func_names[i]);
	free(s->func_names);
	free(s->func_hash);
	for (size_t i = 0; i < s->n_patterns; i++)
		free(s->patterns[i]);
	free(s->patterns);
	strv_free(s->arg_specs, s->n_arg_specs);
	strv_free(s->retval_specs, s->n_retval_specs);
	sched_session_free(s->sched);
	session_live_free(s->live);
	free(s->comm);
	free(s->output_name);
	free(s);
}

/*
 * A regular file opened for writing: a pipe or a terminal nobody drains would
 * block the writer, and with it every session of the loop.
 */
static int output_fd_usable(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	struct stat st;

	return fl >= 0 && (fl & O_ACCMODE) != O_RDONLY && !fstat(fd, &st) && S_ISREG(st.st_mode);
}

/* A copy of n strings (n may be 0); NULL when out of memory. */
static char **strv_dup(char *const *v, size_t n)
{
	char **copy = calloc(n + 1, sizeof(char *));

	for (size_t i = 0; copy && i < n; i++) {
		if (!(copy[i] = strdup(v[i]))) {
			strv_free(copy, i);
			return NULL;
		}
	}
	return copy;
}

/* The client's --args/--retval, parsed as the agent will (hostile: the client's bytes). */
static const char *check_arg_specs(const Profd__RunRequest *req, char *why, size_t len)
{
	struct arg_spec spec;

	if (req->n_arg_specs + req->n_retval_specs > 64)
		return "more than 64 argument specs";
	if (req->args_string_max > 256)
		return "args string max must be at most 256";
	for (size_t i = 0; i < req->n_arg_specs; i++)
		if (arg_spec_parse(req->arg_specs[i], false, &spec, why, len))
			return why;
	for (size_t i = 0; i < req->n_retval_specs; i++)
		if (arg_spec_parse(req->retval_specs[i], true, &spec, why, len))
			return why;
	return NULL;
}

static struct session *session_new(struct server *srv, struct conn *c, const Profd__RunRequest *req)
{
	struct session *s = calloc(1, sizeof(*s));
	uint8_t rnd[16];

	if (!s)
		return NULL;
	s->demangled = demangle_cache_new();
	s->modules = module_cache_new();
	s->unwind_files = unwind_files_new();
	s->comm = strdup(req->target_comm && req->target_comm[0] ? req->target_comm : "target");
	s->output_name = strdup(req->output_name ? req->output_name : "");
	s->started_ns = s->rate_at_ns = mono_clock_ns();
	s->patterns = calloc(req->n_func_patterns + 1, sizeof(char *));
	for (size_t i = 0; s->patterns && i < req->n_func_patterns; i++)
		if ((s->patterns[i] = strdup(req->func_patterns[i])))
			s->n_patterns++;
	s->arg_specs = strv_dup(req->arg_specs, req->n_arg_specs);
	s->n_arg_specs = req->n_arg_specs;
	s->retval_specs = strv_dup(req->retval_specs, req->n_retval_specs);
	s->n_retval_specs = req->n_retval_specs;
	s->args_string_max = req->args_string_max;
	if (req->auto_args && !(s->auto_args = auto_args_new(s->arg_specs, s->n_arg_specs,
							     s->retval_specs, s->n_retval_specs,
							     NULL))) {
		session_free(s);
		return NULL;
	}
	if (!s->demangled || !s->modules || !s->unwind_files || !s->comm || !s->arg_specs || !s->retval_specs ||
	    !s->output_name || !s->patterns ||
	    s->n_patterns != req->n_func_patterns ||
	    getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		session_free(s);
		return NULL;
	}
	for (int i = 0; i < 16; i++)
		snprintf(s->token + 2 * i, 3, "%02x", rnd[i]);
	s->id = ++srv->next_session_id;
	s->client = c;
	s->client_cred = c->peer;
	s->freq = req->sample_freq;
	s->ring_pages = req->ring_pages;
	s->stack_bytes = req->stack_bytes;
	s->buffer_size = req->buffer_size;
	s->min_duration_ns = req->min_duration_ns;
	s->max_depth = req->max_depth;
	s->sched_off = req->sched_off;
	s->follow_children = !req->no_inherit && (req->attach_pid <= 0 || req->attach_children);
	/* at least one tick: a filter asked for is never silently off */
	if (req->min_duration_ns)
		s->min_duration_ticks = (uint64_t)((double)req->min_duration_ns * tsc_ticks_per_ns()) + 1;
	s->call_graph = req->call_graph <= CALL_GRAPH_DWARF ? req->call_graph : CALL_GRAPH_AUTO;
	s->out_fd = -1;
	s->next = srv->sessions;
	srv->sessions = s;
	c->session = s;
	return s;
}

static void session_start_sampling(struct session *s, Profd__SamplingReady *ready);
static void session_start_sched(struct server *srv, struct session *s);

/* profctl attach: the target runs already; the client injects the agent itself. */
static int session_attach(struct session *s, pid_t pid)
{
	char why[160];
	const char *refused = access_check_target(&s->client_cred, pid, false,
						  &s->target_start_time, why, sizeof(why));

	if (refused) {
		session_send_error(s->client, refused);
		return -EPERM;
	}
	s->attach_mode = 1;
	s->target = pid;
	if (!session_process_new(s, pid)) {
		session_send_error(s->client, "out of memory");
		return -ENOMEM;
	}
	session_root_described(s, s->procs);
	session_process_describe_threads(s->procs);
	session_start_sampling(s, NULL);
	session_start_sched(s->client->srv, s);
	return 0;
}

static enum perfetto_compression writer_compression(uint32_t wire)
{
	switch (wire) {
	case TRACE_COMPRESSION_NONE: return PERFETTO_COMPRESSION_NONE;
	case TRACE_COMPRESSION_ZSTD: return PERFETTO_COMPRESSION_ZSTD;
	default: return PERFETTO_COMPRESSION_DEFLATE; /* what every Perfetto reader opens */
	}
}

/* What every agent of s is told: in reply to its hello, or handed down by `run` (SessionStarted). */
static void session_agent_config(struct session *s, Profd__AgentConfig *cfg)
{
	cfg->session_id = s->id;
	cfg->n_func_patterns = s->n_patterns;
	cfg->func_patterns = s->patterns;
	cfg->buffer_size = s->buffer_size;
	cfg->min_duration_ticks = s->min_duration_ticks;
	cfg->max_depth = session_timeline_depth(s);
	cfg->follow_children = s->follow_children;
	cfg->n_arg_specs = s->n_arg_specs;
	cfg->arg_specs = s->arg_specs;
	cfg->n_retval_specs = s->n_retval_specs;
	cfg->retval_specs = s->retval_specs;
	cfg->args_string_max = s->args_string_max;
	cfg->auto_args = s->auto_args != NULL;
}

/*
 * SessionStarted, with a copy of the agents' config for `run` (profctl puts
 * it in the target's environment: its processes patch without a round trip).
 */
static void send_session_started(struct conn *c, struct session *s, bool with_config)
{
	Profd__SessionStarted started = PROFD__SESSION_STARTED__INIT;
	Profd__AgentConfig cfg = PROFD__AGENT_CONFIG__INIT;
	uint8_t *cfg_buf = NULL, *buf;
	size_t len;

	started.session_id = s->id;
	started.agent_token = s->token;
	session_agent_config(s, &cfg);
	len = profd__agent_config__get_packed_size(&cfg);
	if (with_config && (cfg_buf = malloc(len + 1))) {
		started.agent_config.len = profd__agent_config__pack(&cfg, cfg_buf);
		started.agent_config.data = cfg_buf;
	}
	len = profd__session_started__get_packed_size(&started);
	buf = malloc(len + 1);
	if (buf)
		conn_send(c, FRAME_SESSION_STARTED, buf, profd__session_started__pack(&started, buf));
	else
		session_send_error(c, "out of memory");
	free(buf);
	free(cfg_buf);
}

static void handle_run_request(struct server *srv, struct conn *c, const uint8_t *p, size_t len)
{
	Profd__RunRequest *req = profd__run_request__unpack(NULL, len, p);
	const char *refused;
	char why[256];
	struct session *s;

	if (!req || c->session) {
		session_send_error(c, req ? "one session per connection" : "malformed run request");
		goto out;
	}
	if (c->passed_fd < 0 || !output_fd_usable(c->passed_fd)) {
		session_send_error(c, "run request without an output descriptor of a regular file "
			   "open for writing");
		goto out;
	}
	if (req->ring_pages > MAX_RING_PAGES || (req->ring_pages & (req->ring_pages - 1))) {
		session_send_error(c, "ring pages must be a power of two up to " STRINGIFY(MAX_RING_PAGES));
		goto out;
	}
	if (req->stack_bytes % 8 || req->stack_bytes > SAMPLER_MAX_STACK_BYTES) {
		session_send_error(c, "stack bytes must be a multiple of 8 up to 65528");
		goto out;
	}
	if (req->min_duration_ns > MAX_MIN_DURATION_NS || req->max_depth > MAX_DEPTH) {
		session_send_error(c, "min duration must be at most 1 hour and max depth at most "
			   STRINGIFY(MAX_DEPTH));
		goto out;
	}
	/* the target's memory, not ours: the client's to spend, within reason */
	if (req->buffer_size && (req->buffer_size < MIN_BUFFER_SIZE ||
				 req->buffer_size > MAX_BUFFER_SIZE)) {
		session_send_error(c, "buffer size must be between 64K and 64G");
		goto out;
	}
	if (req->trace_compression > TRACE_COMPRESSION_ZSTD) {
		session_send_error(c, "trace compression must be none, deflate or zstd");
		goto out;
	}
	if (req->ring_size && (req->ring_size < PERFETTO_RING_MIN_BYTES ||
			       req->ring_size > MAX_RING_SIZE)) {
		session_send_error(c, "ring size must be between 256K (one compression block) and 4G");
		goto out;
	}
	if ((refused = check_arg_specs(req, why, sizeof(why)))) {
		session_send_error(c, refused);
		goto out;
	}
	s = session_new(srv, c, req);
	if (!s) {
		session_send_error(c, "out of memory");
		goto out;
	}
	s->out_fd = c->passed_fd;
	c->passed_fd = -1;
	s->writer = perfetto_writer_new_opts(s->out_fd, &(struct perfetto_writer_options){
		.compression = writer_compression(req->trace_compression),
		.ring_bytes = req->ring_size });
	if (!s->writer) {
		session_send_error(c, "cannot create the trace writer");
		goto out;
	}
	perfetto_writer_set_sample_freq(s->writer, s->freq);
	perfetto_writer_clock_snapshot(s->writer);
	if (req->attach_pid > 0 && session_attach(s, req->attach_pid))
		goto out; /* refused: the error went to the client */
	send_session_started(c, s, req->attach_pid <= 0);
	srv->served_one = true;
out:
	if (req)
		profd__run_request__free_unpacked(req, NULL);
}

static void on_sample(void *ctx, const struct sampler_sample *smp)
{
	struct session_process *p = session_process_at(ctx, (pid_t)smp->pid, smp->time);

	if (p)
		session_process_sample(p, smp);
}

static void on_mmap(void *ctx, const struct sampler_mmap *m)
{
	struct session_process *p = session_process_at(ctx, (pid_t)m->pid, m->time);

	if (p)
		session_process_mmap(p, m);
}

static void on_comm(void *ctx, uint32_t pid, uint32_t tid, const char *comm, uint64_t time)
{
	struct session *s = ctx;
	struct session_process *p;

	if (!session_process_find(s, (pid_t)pid))
		return; /* of no process the session follows */
	p = session_process_of_record(s, (pid_t)pid, time);
	if (p)
		session_process_comm(p, tid, comm);
	else
		comm_hold(s, (pid_t)pid, tid, comm, time);
}

/*
 * The kernel's word on the tree (perf FORK records, inherited events): a new
 * process of a followed one is followed from its fork, agent or not, so
 * its samples are there and the summary names it whatever becomes of it.
 */
/*
 * Known already: its agent's hello came first, or its EXIT record (another
 * CPU's ring, read first) marked it exited. A pid reused since is alive
 * with another start time.
 */
static bool fork_known(struct session *s, pid_t pid)
{
	struct session_process *p = session_process_find(s, pid);
	unsigned long long now_start;

	if (!p)
		return false;
	now_start = access_start_time(pid);
	return now_start == 0 || now_start == p->start_time;
}

static void on_fork(void *ctx, uint32_t pid, uint32_t ppid, uint32_t tid, uint64_t time)
{
	struct session *s = ctx;
	/* exited perhaps (its EXIT record read first): it forked before it did */
	struct session_process *parent = session_process_find(s, (pid_t)ppid);

	if (pid != tid || pid == ppid || !parent || fork_known(s, (pid_t)pid))
		return; /* a thread, or a process we know */
	if (!s->follow_children) {
		s->n_procs++;
		s->not_followed++;
		return;
	}
	session_add_process(s->client ? s->client->srv : NULL, s, (pid_t)pid, (pid_t)ppid, time,
			    NULL);
}

static void on_task(void *ctx, bool is_exit, uint32_t pid, uint32_t tid, uint64_t time)
{
	struct session *s = ctx;
	struct session_process *p, *newest;

	if (!is_exit || !(p = session_process_at(s, (pid_t)pid, time)))
		return;
	if (p->generation && time < p->start_ts)
		return; /* before every process of the pid the session knows */
	if (time > p->exit_ts) /* its last thread's exit: exit_group ends them one by one */
		p->exit_ts = time;
	newest = session_process_find(s, (pid_t)pid);
	if (p == newest && pid == tid && !p->exited) /* an older one of a reused pid: marked gone then */
		process_exited(s, p);
	comms_place(s, (pid_t)pid);
}

static void on_lost(void *ctx, uint32_t cpu, uint64_t lost, uint64_t time)
{
	struct session *s = ctx;

	s->samples_lost += lost;
	perfetto_writer_samples_lost(s->writer, time, cpu, lost);
}

static const struct sampler_callbacks sampler_cb = {
	.sample = on_sample,
	.mmap = on_mmap,
	.comm = on_comm,
	.task = on_task,
	.fork = on_fork,
	.lost = on_lost,
};

/*
 * Drains the perf rings. A sample may name a mapping whose MMAP2 record sits
 * in another CPU's ring read later in the same pass: samples are written
 * only after the whole pass (or, with an agent, once its events reach them).
 */
void session_read_samples(struct session *s)
{
	uint64_t started = mono_clock_ns();

	sampler_read(s->sampler, &sampler_cb, s);
	for (struct session_process *p = s->active; p; p = p->active_next)
		session_process_rings_read(p, started);
}

/*
 * Kernel frames only for a client that could read them itself (perf's rule:
 * CAP_PERFMON, or paranoid <= 1 with kallsyms readable); others get user
 * frames without a word, as perf gives them. The table's reading starts on a
 * thread when sampling starts (session_start_sampling); this waits for it.
 * The server keeps it for the sessions after (server_kernel_symbols).
 */
const struct kernel_symbols *session_kernel_symbols(void *session)
{
	struct session *s = session;
	char err[160];

	if (s->kernel || !s->kernel_wanted || s->kernel_tried)
		return s->kernel;
	s->kernel_tried = true;
	s->kernel = s->client ? server_kernel_symbols(s->client->srv, err, sizeof(err)) :
				kernel_symbols_load(NULL, err, sizeof(err));
	if (!s->kernel)
		server_log("session %" PRIu64 ": no kernel frames: %s", s->id, err);
	return s->kernel;
}

bool session_kernel_symbols_pending(void *session)
{
	const struct session *s = session;

	return s->kernel_wanted && !s->kernel_tried && s->client &&
	       server_kernel_symbols_pending(s->client->srv);
}

/* Run: armed to start at exec. Attach: the process runs already: maps from /proc, enabled now. */
static void session_start_sampling(struct session *s, Profd__SamplingReady *ready)
{
	struct sampler_config cfg = { .pid = s->target, .freq_hz = s->freq,
				      .enable_on_exec = !s->attach_mode,
				      .ring_pages = s->ring_pages };
	struct session_process *root = session_process_find(s, s->target);
	char err[256] = "";
	int r;

	s->kernel_wanted = s->freq && access_may_see_kernel(&s->client_cred);
	/*
	 * Now, on a thread, while the target starts: the 60-130 ms of
	 * /proc/kallsyms were most of a short `profctl run`. Samples with
	 * kernel frames wait for it (session_kernel_symbols_pending), the perf
	 * rings' reading does not: read at the first kernel frame, it stalled
	 * them while they filled (test_overhead lost 84-279 records). The
	 * server's copy makes it cheap for the sessions after the first.
	 */
	if (s->kernel_wanted && s->client)
		server_kernel_symbols_prefetch(s->client->srv);
	else if (s->kernel_wanted)
		session_kernel_symbols(s);
	r = session_process_start_symbols(root, NULL, s->attach_mode, s->freq != 0);
	if (s->freq == 0 || !root->symbols)
		return;
	if (r) {
		snprintf(s->warning, sizeof(s->warning), "sampling disabled: out of memory");
		return;
	}
	if (s->call_graph != CALL_GRAPH_FP) {
		cfg.copy_stack = root->unwinder != NULL;
		cfg.stack_bytes = s->stack_bytes ? s->stack_bytes : SAMPLER_DEFAULT_STACK_BYTES;
	}
	cfg.kernel_callchain = s->kernel_wanted;
	s->sampler = sampler_open(&cfg, err, sizeof(err));
	if (s->sampler && s->attach_mode && sampler_enable(s->sampler) < 0) {
		sampler_close(s->sampler);
		s->sampler = NULL;
		snprintf(err, sizeof(err), "cannot enable the perf events");
	}
	if (!s->sampler) {
		snprintf(s->warning, sizeof(s->warning), "sampling disabled: %s", err);
		if (ready)
			ready->warning = s->warning;
		return;
	}
	if (sampler_warning(s->sampler) && !s->warning[0]) /* e.g. kernel frames refused */
		snprintf(s->warning, sizeof(s->warning), "%s", sampler_warning(s->sampler));
	if (ready) {
		ready->sampling = 1;
		ready->warning = s->warning[0] ? s->warning : NULL;
	}
}

/* ---- scheduler states (daemon/sched) ------------------------------------------ */

static void sched_route(void *ctx, const struct sched_record *r)
{
	struct server *srv = ctx;

	for (struct session *s = srv->sessions; s; s = s->next)
		if (s->sched && (session_live_process(s, (pid_t)r->prev_tgid) ||
				 session_live_process(s, (pid_t)r->next_tgid)))
			sched_session_record(s->sched, r);
}

static bool sched_is_target(void *ctx, uint32_t tgid)
{
	return session_live_process(ctx, (pid_t)tgid) != NULL;
}

/*
 * A child of the tree: its switches from now on (the probe filters by
 * tgid in the kernel; those before profd heard of the child are not seen).
 */
static void session_follow_sched(struct server *srv, struct session *s, pid_t pid)
{
	if (s->sched && srv && srv->sched)
		sched_tracer_add(srv->sched, pid);
}

void session_sched_drain(struct server *srv)
{
	if (srv->sched)
		sched_tracer_drain(srv->sched, sched_route, srv);
}

/*
 * On unless --sched off: the probe is loaded with the first session that
 * wants it. Where it cannot be, s->sched_why says why and the session goes on.
 */
static void session_start_sched(struct server *srv, struct session *s)
{
	int err;

	if (s->sched_off || s->sched)
		return;
	if (server_sched_get(srv, s->sched_why, sizeof(s->sched_why)))
		return;
	err = sched_tracer_add(srv->sched, s->target);
	if (!err) {
		s->sched = sched_session_new(&(struct sched_session_config){
			.target = s->target, .writer = s->writer,
			.is_target = sched_is_target, .is_target_ctx = s,
			.see_other_tasks = access_may_see_other_tasks(&s->client_cred) });
		if (s->sched)
			return;
		sched_tracer_remove(srv->sched, s->target);
		err = -ENOMEM;
	}
	snprintf(s->sched_why, sizeof(s->sched_why), "cannot follow PID %d: %s", (int)s->target,
		 strerror(-err));
	server_sched_put(srv);
}

/* The target's last records in, its entry out of the probe (unloaded after the last). */
static void session_stop_sched(struct server *srv, struct session *s)
{
	if (!s->sched || !srv->sched)
		return;
	session_sched_drain(srv);
	sched_session_set_lost(s->sched, sched_tracer_lost(srv->sched, s->target));
	for (struct session_process *p = s->procs; p; p = p->next)
		sched_tracer_remove(srv->sched, p->pid);
	server_sched_put(srv);
}

static void handle_target_forked(struct session *s, const uint8_t *p, size_t len)
{
	Profd__TargetForked *msg = profd__target_forked__unpack(NULL, len, p);
	Profd__SamplingReady ready = PROFD__SAMPLING_READY__INIT;
	const char *refused;
	char why[160];
	uint8_t buf[512];

	if (!msg || msg->pid <= 0 || s->target) {
		session_send_error(s->client, "malformed or repeated target announcement");
		goto out;
	}
	refused = access_check_target(&s->client_cred, msg->pid, true, &s->target_start_time, why,
				      sizeof(why));
	if (refused) {
		session_send_error(s->client, refused);
		goto out;
	}
	if (!session_process_new(s, msg->pid)) {
		session_send_error(s->client, "out of memory");
		goto out;
	}
	s->target = msg->pid;
	session_root_described(s, s->procs);
	session_start_sampling(s, &ready);
	session_start_sched(s->client->srv, s);
	if (s->sched_why[0])
		ready.sched_unavailable = s->sched_why;
	if (profd__sampling_ready__get_packed_size(&ready) <= sizeof(buf))
		conn_send(s->client, FRAME_SAMPLING_READY, buf,
			  profd__sampling_ready__pack(&ready, buf));
out:
	if (msg)
		profd__target_forked__free_unpacked(msg, NULL);
}

static struct session *session_by_token(struct server *srv, const char *token)
{
	for (struct session *s = srv->sessions; s; s = s->next)
		if (token && strcmp(s->token, token) == 0)
			return s;
	return NULL;
}

/*
 * An agent's process that was gone (its /proc with it) before we read its
 * hello: agents with their config do not wait for our answer. Unless the
 * kernel told us of it (it would have been found), it is placed under the
 * parent its hello names, a process of the session, and only when the
 * kernel says (SO_PEERCRED) it ran as the client's own user: /proc has
 * nothing left to check it by, and it sent nothing but its own figures.
 */
static struct session_process *gone_process(struct server *srv, struct session *s,
					    const struct conn *c, pid_t parent)
{
	struct session_process *p;

	if ((c->peer.uid != s->client_cred.uid && s->client_cred.uid != 0) || parent <= 0 ||
	    !session_process_find(s, parent))
		return NULL;
	p = session_add_process(srv, s, c->peer.pid, parent, 0, NULL);
	if (p && !s->sampler) /* else its EXIT record says so (and its FORK record finds it) */
		process_exited(s, p);
	return p;
}

/*
 * p was added when /proc no longer had it (its FORK record read after it
 * exited, a moment after its hello's read saw it alive): no start time to
 * tell a reused pid by, and the hello's read is its. Taken as a reuse
 * instead, the process was put twice in the trace (a short process of a
 * tree under a busy profd: perf record -a beside it did it, 1 process in
 * ~200).
 */
static void start_from_hello(struct session_process *p, unsigned long long now_start)
{
	if (p->start_time == 0 && now_start)
		p->start_time = now_start;
}

/*
 * The process an agent's hello comes from: the target, or (following
 * children) a process of its tree: one the kernel told of (FORK records
 * read so far), else one whose parents in /proc lead to the session. Who
 * connected is the kernel's word (SO_PEERCRED), not the agent's; the token
 * is the session's secret, handed down through the environment; the client
 * must still be allowed to ptrace the process. A handed-over link serves
 * its session only. The process may have exited since it connected: then
 * the newest of its pid is it (see gone_process for one never seen).
 * waits: its agent waits for our config (it did not patch from the
 * environment's).
 */
static struct session_process *hello_process(struct server *srv, struct session *s,
					     struct conn *c, pid_t parent, bool waits)
{
	pid_t pid = c->peer.pid;
	struct session_process *p;
	struct proc_stat_line st;
	unsigned long long start, now_start;
	char why[160];

	if (!s->target || (c->bound_session && c->bound_session != s->id))
		return NULL;
	if (pid != s->target && !s->follow_children)
		return NULL;
	/* one read of its stat: its start time, and a new process's parent and name */
	now_start = proc_stat_read(pid, &st) ? 0 : st.start_time;
	p = session_process_find(s, pid);
	if (p && !p->exited)
		start_from_hello(p, now_start);
	if (p && (now_start == p->start_time || now_start == 0))
		return p; /* still it, or gone since it connected */
	if (s->sampler && (p || !waits)) {
		/*
		 * Not known, or a pid reused: its FORK record, written before it
		 * ran, may be unread yet. Read now (its first events would read
		 * the rings anyway), it adds the process as the kernel tells of
		 * it: its parent's mappings, then its exec's MMAP2 records, and
		 * says when an older process of the pid ends in the trace. From
		 * /proc instead (its maps, parents, the access check), a hello
		 * that outran its record cost profd a third more per process.
		 * Not for an agent that waits for its config: the samples pending
		 * (unwound as they are read) would hold up its start.
		 */
		struct session_process *known = p;

		s->hello_pid = pid;
		session_read_samples(s);
		s->hello_pid = 0;
		p = session_process_find(s, pid);
		if (p && p != known) /* its FORK record, just read: the process our read saw */
			start_from_hello(p, now_start);
		if (p && (now_start == p->start_time || now_start == 0))
			return p;
	}
	if (pid == s->target)
		return NULL;
	if (now_start == 0)
		return gone_process(srv, s, c, parent);
	/* checked as the process that read was of (the same start time): its parent and name */
	if (session_descends_from(s, st.ppid) &&
	    !access_check_target(&s->client_cred, pid, false, &start, why, sizeof(why)))
		return session_add_process(srv, s, pid,
					   start == now_start ? st.ppid : proc_parent(pid), 0,
					   start == now_start ? &st : NULL);
	/* reaped while it was checked: as gone as if it had been before */
	return access_start_time(pid) == 0 ? gone_process(srv, s, c, parent) : NULL;
}

/*
 * An agent that waits for its config is told why; one that patched already
 * (config_known) reads nothing from us: the closed connection is its answer
 * (its flusher sees it and puts the code back).
 */
static void agent_refuse(struct conn *c, const Profd__AgentHello *hello, const char *why)
{
	if (hello && hello->config_known)
		conn_close_later(c);
	else
		session_send_error(c, why);
}

static void handle_agent_hello(struct server *srv, struct conn *c, const uint8_t *b, size_t len)
{
	Profd__AgentHello *hello = profd__agent_hello__unpack(NULL, len, b);
	Profd__AgentConfig cfg = PROFD__AGENT_CONFIG__INIT;
	struct session *s = hello ? session_by_token(srv, hello->agent_token) : NULL;
	/* one that patched from the environment's config (config_known) waits for nothing */
	struct session_process *p =
		s ? hello_process(srv, s, c, hello->parent, !hello->config_known) : NULL;
	uint8_t buf[64 * 1024];

	if (!p) {
		agent_refuse(c, hello, "no session for this agent");
		goto out;
	}
	if (p->agent) { /* the program before an exec: its stream ended with it */
		p->agent->session = NULL;
		conn_close_later(p->agent);
		session_process_agent_gone(p);
	}
	if (p->agent_seen)
		p->execs++;
	/* a forked child's agent sends its parent's table again: its program's, counted once */
	p->table_inherited = hello->forked_from > 0;
	/* the program its agent runs in, by its agent's word */
	session_process_describe_with(p, hello->cmdline.data, hello->cmdline.len);
	if (session_process_agent_hello(p, c)) {
		agent_refuse(c, hello, "out of memory");
		goto out;
	}
	c->session = s;
	if (hello->forked_from > 0) { /* its capture is its parent's: so are the names */
		struct session_process *parent = session_process_find(s, hello->forked_from);

		p->auto_names = parent ? parent->auto_names : NULL;
	}
	if (hello->config_known) /* it patched already, from the environment's copy */
		goto out;
	session_agent_config(s, &cfg);
	if (profd__agent_config__get_packed_size(&cfg) <= sizeof(buf))
		conn_send(c, FRAME_AGENT_CONFIG, buf, profd__agent_config__pack(&cfg, buf));
out:
	if (hello)
		profd__agent_hello__free_unpacked(hello, NULL);
}

/*
 * The process whose agent c is: among the active first (a process is
 * retired only without an agent), then all of them (a hello from a gone
 * process may name a retired one of its pid).
 */
static struct session_process *agent_process(struct session *s, const struct conn *c)
{
	for (struct session_process *p = s->active; p; p = p->active_next)
		if (p->agent == c)
			return p;
	for (struct session_process *p = s->procs; p; p = p->next)
		if (p->agent == c)
			return p;
	return NULL;
}

void session_agent_frame(struct server *srv, struct conn *c, uint32_t type,
			 const uint8_t *payload, size_t len)
{
	struct session *s = c->session;
	struct session_process *p = s ? agent_process(s, c) : NULL;

	if (!s) {
		if (type == FRAME_AGENT_HELLO)
			handle_agent_hello(srv, c, payload, len);
		else
			session_send_error(c, "expected an agent hello");
		return;
	}
	if (p)
		session_process_agent_frame(p, type, payload, len);
}

static void session_unlink(struct server *srv, struct session *s)
{
	for (struct session **l = &srv->sessions; *l; l = &(*l)->next) {
		if (*l == s) {
			*l = s->next;
			break;
		}
	}
}

/*
 * The trace stopped growing at a failed write: the file ends at its last
 * whole packet and lacks the closing one (the reader says so). Where it was
 * cut, in bytes and in session time (a ring's window failing at the end: its
 * time is now): what came after was counted, not kept.
 */
static void session_trace_cut(struct session *s, const struct perfetto_writer_stats *st, int err)
{
	uint64_t cut_ns;

	cut_ns = st->cut_ns > s->started_ns ? st->cut_ns - s->started_ns : 0;
	if (!st->cut_ns)
		cut_ns = mono_clock_ns() - s->started_ns; /* failed at the end */
	char what[200];

	snprintf(what, sizeof(what), "%s): the trace was cut at %" PRIu64 " bytes, %.3f s into "
		 "the session; it loads up to there, what came after is in the figures only",
		 strerror(err), st->bytes, (double)cut_ns / 1e9);
	session_error(s, "writing the trace failed (%s", what);
}

/* Ends the session whatever its state: the trace written so far is finalized. */
static void add_sample_stats(struct sample_pipeline_stats *sum,
			     const struct sample_pipeline_stats *one)
{
	sum->written += one->written;
	sum->empty += one->empty;
	sum->in_calls += one->in_calls;
	sum->returns_repaired += one->returns_repaired;
	sum->returns_unrepaired += one->returns_unrepaired;
	if (one->held_peak > sum->held_peak)
		sum->held_peak = one->held_peak;
	sum->released_early += one->released_early;
	for (int k = 0; k < OVERHEAD_KINDS; k++)
		sum->by_kind[k] += one->by_kind[k];
}

/* Every process's held samples and exact figures go into the trace, which is then closed. */
static void session_close_trace(struct server *srv, struct session *s,
				struct perfetto_writer_stats *st,
				struct sample_pipeline_stats *samples)
{
	uint64_t now = mono_clock_ns();
	int err;

	if (s->sampler) {
		session_read_samples(s);
		sampler_report_untold_losses(s->sampler, &sampler_cb, s);
		sampler_close(s->sampler);
		s->sampler = NULL;
		comms_place_last(s);
	}
	for (struct session_process *p = s->procs; p; p = p->next) {
		struct sample_pipeline_stats one = { 0 };

		session_process_finish(p);
		if (p->samples_out)
			sample_pipeline_get_stats(p->samples_out, &one);
		add_sample_stats(samples, &one);
	}
	session_stop_sched(srv, s);
	if (!s->writer)
		return;
	for (struct session_process *p = s->procs; p; p = p->next)
		session_process_write_totals(p, now);
	err = perfetto_writer_finish(s->writer);
	perfetto_writer_get_stats(s->writer, st); /* after: where a failure cut it */
	perfetto_writer_free(s->writer);
	s->writer = NULL;
	st->bytes = (uint64_t)lseek(s->out_fd, 0, SEEK_CUR);
	if (err)
		session_trace_cut(s, st, -err);
}

/* Ends the session whatever its state: the trace written so far is finalized. */
static void session_finish(struct server *srv, struct session *s)
{
	struct perfetto_writer_stats st = { 0 };
	struct sample_pipeline_stats samples = { 0 };
	uint64_t events = 0, drops = 0;

	session_close_trace(srv, s, &st, &samples);
	if (s->out_fd >= 0)
		close(s->out_fd);
	if (s->client) {
		session_send_summary(s, &st, &samples);
		conn_close_later(s->client);
		s->client->session = NULL;
	}
	for (struct session_process *p = s->procs; p; p = p->next) {
		events += p->events;
		drops += p->drops;
		if (!p->agent)
			continue;
		conn_close_later(p->agent);
		p->agent->session = NULL;
	}
	/* children's copies keep a spawner open: it ends with its session */
	for (struct conn *k = srv->conns; k; k = k->next)
		if (k->kind == CONN_SPAWNER && k->bound_session == s->id)
			conn_close_later(k);
	server_log("session %" PRIu64 " ended: %" PRIu64 " events, %" PRIu64 " dropped, %" PRIu64
		   " samples (%" PRIu64 " in calls, %" PRIu64 " returns repaired, %" PRIu64
		   " left, %" PRIu64 " written before their events, %" PRIu64
		   " held at most)",
		   s->id, events, drops, samples.written, samples.in_calls,
		   samples.returns_repaired, samples.returns_unrepaired, samples.released_early,
		   samples.held_peak);
	session_unlink(srv, s);
	session_free(s);
}

static void handle_target_exited(struct server *srv, struct session *s)
{
	s->target_exited = 1;
	s->target_exited_ns = mono_clock_ns();
	s->agent_deadline_ns = s->target_exited_ns + AGENT_GRACE_NS;
	/*
	 * Its agents may all have said goodbye already (a short program's
	 * did before it exited): end now, not at the next tick, which made
	 * every run wait 10 ms on average (TICK_NS).
	 */
	srv->sessions_may_end = true;
}

/*
 * The target exited and its agents have not all said goodbye. What they
 * sent before they died may still be unread (profd busy with other
 * sessions on a loaded machine): while events keep coming the wait goes on,
 * up to AGENT_GRACE_MAX_NS after the exit. True when it is time to finish.
 */
static bool agents_grace_over(struct session *s, uint64_t now)
{
	uint64_t events = 0;

	if (now < s->agent_deadline_ns)
		return false;
	for (const struct session_process *p = s->procs; p; p = p->next)
		events += p->events;
	if (events == s->events_at_deadline || now - s->target_exited_ns >= AGENT_GRACE_MAX_NS)
		return true;
	s->events_at_deadline = events;
	s->agent_deadline_ns = now + AGENT_GRACE_NS;
	return false;
}

/* ---- profctl status / stop ------------------------------------------------------------ */

/* Another user's session shows only that it exists (root sees everything). */
bool session_may_see(const struct session *s, const struct conn *c)
{
	return c->peer.uid == 0 || c->peer.uid == s->client_cred.uid;
}

static void fill_status(const struct session *s, const struct conn *c, Profd__SessionStatus *st)
{
	uint64_t events = 0, drops = 0, samples = 0;
	uint32_t functions = 0;

	profd__session_status__init(st);
	st->id = s->id;
	st->owner_uid = s->client_cred.uid;
	if (!session_may_see(s, c)) {
		st->details_hidden = 1;
		return;
	}
	for (const struct session_process *p = s->procs; p; p = p->next) {
		functions += session_process_functions(p);
		events += p->events;
		drops += p->drops;
		samples += session_process_samples(p);
	}
	st->target_pid = s->target;
	st->target = s->comm;
	st->attach = s->attach_mode;
	st->functions = functions;
	st->events = events;
	st->events_per_s = s->events_per_s;
	st->events_dropped = drops;
	st->samples = samples;
	st->output = s->output_name;
	st->running_ms = (mono_clock_ns() - s->started_ns) / 1000000u;
}

static void handle_status_request(struct server *srv, struct conn *c, const uint8_t *p,
				  size_t len)
{
	Profd__StatusRequest *req = profd__status_request__unpack(NULL, len, p);
	Profd__StatusReply reply = PROFD__STATUS_REPLY__INIT;
	Profd__SessionStatus *list = NULL, **ptrs = NULL;
	size_t n = 0, cap = 0;
	uint8_t *buf = NULL;

	if (!req) {
		session_send_error(c, "malformed status request");
		return;
	}
	profd__status_request__free_unpacked(req, NULL);
	for (struct session *s = srv->sessions; s; s = s->next)
		cap++;
	list = calloc(cap + 1, sizeof(*list));
	ptrs = calloc(cap + 1, sizeof(*ptrs));
	for (struct session *s = srv->sessions; s && list && ptrs; s = s->next, n++) {
		fill_status(s, c, &list[n]);
		ptrs[n] = &list[n];
	}
	reply.n_sessions = list && ptrs ? n : 0;
	reply.sessions = ptrs;
	reply.profd_pid = getpid();
	len = profd__status_reply__get_packed_size(&reply);
	if (len <= FRAME_PAYLOAD_MAX && (buf = malloc(len ? len : 1))) {
		profd__status_reply__pack(&reply, buf);
		conn_send(c, FRAME_STATUS_REPLY, buf, len);
	}
	conn_close_later(c);
	free(buf);
	free(list);
	free(ptrs);
}

struct session *session_by_id(struct server *srv, uint64_t id)
{
	for (struct session *s = srv->sessions; s; s = s->next)
		if (s->id == id)
			return s;
	return NULL;
}

/*
 * Ends a session for its owner (or root). An attach client is told to
 * detach (only it can put the bytes back); a run session ends now: the
 * agent's connection closes so it stops recording, the trace is finalized
 * and the summary waits in profctl run's socket for the target's exit.
 */
static void handle_stop_request(struct server *srv, struct conn *c, const uint8_t *p, size_t len)
{
	Profd__StopRequest *req = profd__stop_request__unpack(NULL, len, p);
	Profd__StopReply reply = PROFD__STOP_REPLY__INIT;
	struct session *s = req ? session_by_id(srv, req->session_id) : NULL;
	char msg[160];
	uint8_t buf[256];

	if (!req || !s || !session_may_see(s, c)) {
		/* another user's session is refused exactly like a missing one */
		snprintf(msg, sizeof(msg), req ? "no session %" PRIu64 " of yours" :
						 "malformed stop request",
			 req ? req->session_id : 0);
		session_send_error(c, msg);
		goto out;
	}
	server_log("session %" PRIu64 ": stopped by uid %u (pid %d)", s->id, (unsigned)c->peer.uid,
		   (int)c->peer.pid);
	snprintf(s->warning, sizeof(s->warning), "stopped by profctl stop (uid %u)",
		 (unsigned)c->peer.uid);
	snprintf(msg, sizeof(msg), "session %" PRIu64 " %s", s->id,
		 s->attach_mode ? "is detaching" : "stopped; its trace is finalized");
	if (s->attach_mode && s->client)
		conn_send(s->client, FRAME_STOP_NOTICE, NULL, 0);
	else
		session_finish(srv, s);
	reply.message = msg;
	if (profd__stop_reply__get_packed_size(&reply) <= sizeof(buf))
		conn_send(c, FRAME_STOP_REPLY, buf, profd__stop_reply__pack(&reply, buf));
	conn_close_later(c);
out:
	if (req)
		profd__stop_request__free_unpacked(req, NULL);
}

/*
 * Writes a ring session's window, as it is now, to the file the client
 * opened and passed (profd never opens a client's path). For its owner or
 * root; the session records on.
 */
static void handle_snapshot_request(struct server *srv, struct conn *c, const uint8_t *p,
				    size_t len)
{
	Profd__SnapshotRequest *req = profd__snapshot_request__unpack(NULL, len, p);
	Profd__SnapshotReply reply = PROFD__SNAPSHOT_REPLY__INIT;
	struct session *s = req ? session_by_id(srv, req->session_id) : NULL;
	char msg[160];
	uint8_t buf[64];
	int64_t n;

	if (!req || !s || !session_may_see(s, c)) {
		snprintf(msg, sizeof(msg), req ? "no session %" PRIu64 " of yours" :
						 "malformed snapshot request",
			 req ? req->session_id : 0);
		session_send_error(c, msg);
		goto out;
	}
	if (!s->writer || !perfetto_writer_is_ring(s->writer)) {
		snprintf(msg, sizeof(msg), "session %" PRIu64 " is not a flight recorder "
			 "(start it with --ring SIZE)", s->id);
		session_send_error(c, msg);
		goto out;
	}
	if (c->passed_fd < 0 || !output_fd_usable(c->passed_fd)) {
		session_send_error(c, "snapshot request without an output descriptor of a regular file "
			   "open for writing");
		goto out;
	}
	n = perfetto_writer_snapshot(s->writer, c->passed_fd);
	if (n < 0) {
		snprintf(msg, sizeof(msg), "writing the snapshot failed: %s", strerror((int)-n));
		session_send_error(c, msg);
		goto out;
	}
	server_log("session %" PRIu64 ": snapshot of %" PRId64 " bytes for uid %u", s->id, n,
		   (unsigned)c->peer.uid);
	reply.bytes = (uint64_t)n;
	conn_send(c, FRAME_SNAPSHOT_REPLY, buf, profd__snapshot_reply__pack(&reply, buf));
	conn_close_later(c);
out:
	if (c->passed_fd >= 0)
		close(c->passed_fd);
	c->passed_fd = -1;
	if (req)
		profd__snapshot_request__free_unpacked(req, NULL);
}

/* NULL when fd is a connected AF_UNIX stream socket (its creator, for a pair, in *peer); else why not. */
static const char *stream_peer(int fd, struct ucred *peer)
{
	int type = 0, domain = 0;
	socklen_t tlen = sizeof(type), dlen = sizeof(domain), plen = sizeof(*peer);

	if (fd < 0)
		return "no descriptor came with it";
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) || type != SOCK_STREAM ||
	    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dlen) || domain != AF_UNIX ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, peer, &plen))
		return "not a local stream socket";
	return NULL;
}

/* Serves fd as a connection bound to s, of kind; NULL (fd then closed) when it cannot. */
static struct conn *adopt_bound(struct server *srv, struct session *s, int fd,
				enum conn_kind kind, const char *what, const char *why)
{
	struct conn *a = NULL;

	if (!why && !(a = server_adopt(srv, fd)))
		why = "too many connections";
	if (why) {
		char msg[160];

		snprintf(msg, sizeof(msg), "%s refused: %s", what, why);
		session_error(s, "%s", msg);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	a->kind = kind;
	a->bound_session = s->id;
	return a;
}

/*
 * NULL when the process that made a link (peer) is the target or, with
 * --children, a descendant of the target (injected by the client) that the
 * client may trace; else why not.
 */
static const char *link_maker_refusal(struct session *s, const struct ucred *peer)
{
	unsigned long long start;
	char why[160];

	if (peer->pid == s->target)
		return access_start_time(s->target) == s->target_start_time ? NULL :
			       "its other end is not the target's";
	if (!s->follow_children || !session_descends(s, peer->pid) ||
	    access_check_target(&s->client_cred, peer->pid, false, &start, why, sizeof(why)))
		return "its other end is not the target's";
	return NULL;
}

/* An agent link's maker: as link_maker_refusal says, and without an agent yet. */
static const char *agent_link_refusal(struct session *s, const struct ucred *peer)
{
	struct session_process *p = session_process_find(s, peer->pid);

	if (p && !p->exited && (p->agent || p->agent_seen))
		return "that process has its agent";
	return link_maker_refusal(s, peer);
}

/*
 * attach: the client hands over the profd end of a socket pair that the
 * target made (profctl took it with pidfd_getfd, with its ptrace rights), so
 * the agent needs no path, mode or group to reach us. The kernel names the
 * pair's creator, which must be this session's target (or, with --children,
 * one of its descendants); the agent on the other end still presents the
 * token, and the link serves this session only.
 */
static void handle_agent_link(struct server *srv, struct session *s, struct conn *c)
{
	int fd = c->passed_fd;
	struct ucred peer;
	const char *why = stream_peer(fd, &peer);

	c->passed_fd = -1;
	if (!why && !s->attach_mode)
		why = "the session has its agent";
	if (!why)
		why = agent_link_refusal(s, &peer);
	/* a descendant that ran before the attach: it inherited no perf event */
	if (adopt_bound(srv, s, fd, CONN_AGENT, "agent link", why) && peer.pid != s->target &&
	    s->sampler && sampler_add_process(s->sampler, peer.pid))
		server_log("session %" PRIu64 ": PID %d is not sampled", s->id, (int)peer.pid);
}

/*
 * attach --children: the profd end of the pair the target made for the
 * processes it forks (the agent's spawner, inherited by each): their own
 * links come through it (session_spawner_frame), as long as the session lasts.
 */
static void handle_spawner_link(struct server *srv, struct session *s, struct conn *c)
{
	int fd = c->passed_fd;
	struct ucred peer;
	const char *why = stream_peer(fd, &peer);

	c->passed_fd = -1;
	if (!why && (!s->attach_mode || !s->follow_children))
		why = "the session does not follow children";
	if (!why)
		why = link_maker_refusal(s, &peer);
	adopt_bound(srv, s, fd, CONN_SPAWNER, "spawner link", why);
}

void session_spawner_frame(struct server *srv, struct conn *c, uint32_t type)
{
	struct session *s = session_by_id(srv, c->bound_session);
	unsigned long long start;
	struct ucred peer;
	char why[160];
	int fd = c->passed_fd;

	c->passed_fd = -1;
	if (!s || type != FRAME_AGENT_LINK) {
		if (fd >= 0)
			close(fd);
		conn_close_later(c);
		return;
	}
	/*
	 * A forked child's own pair: its creator (the kernel's word, not the
	 * child's) must descend from a process the session follows, and the
	 * client must be allowed to trace it. Its agent's hello then joins it
	 * as any child's does (hello_process), with the session's token.
	 */
	if (stream_peer(fd, &peer) || !session_descends(s, peer.pid) ||
	    access_check_target(&s->client_cred, peer.pid, false, &start, why, sizeof(why))) {
		if (fd >= 0)
			close(fd);
		return;
	}
	adopt_bound(srv, s, fd, CONN_AGENT, "a child's link", NULL);
}

void session_client_frame(struct server *srv, struct conn *c, uint32_t type,
			  const uint8_t *payload, size_t len)
{
	struct session *s = c->session;

	if (!s) {
		if (type == FRAME_RUN_REQUEST)
			handle_run_request(srv, c, payload, len);
		else if (type == FRAME_STATUS_REQUEST)
			handle_status_request(srv, c, payload, len);
		else if (type == FRAME_STOP_REQUEST)
			handle_stop_request(srv, c, payload, len);
		else if (type == FRAME_SNAPSHOT_REQUEST)
			handle_snapshot_request(srv, c, payload, len);
		else if (type == FRAME_LIVE_REQUEST)
			session_live_request(srv, c, payload, len);
		else
			session_send_error(c, "expected a run, status, stop, snapshot or live request");
		return;
	}
	switch (type) {
	case FRAME_TARGET_FORKED:
		handle_target_forked(s, payload, len);
		break;
	case FRAME_TARGET_EXITED:
		handle_target_exited(srv, s);
		break;
	case FRAME_AGENT_LINK:
		handle_agent_link(srv, s, c);
		break;
	case FRAME_SPAWNER_LINK:
		handle_spawner_link(srv, s, c);
		break;
	case FRAME_LIVE_REQUEST: /* profctl top */
		session_live_request(srv, c, payload, len);
		break;
	default:
		session_send_error(c, "unexpected frame from the client");
	}
}

void session_conn_closed(struct server *srv, struct conn *c)
{
	struct session *s = c->session;
	struct session_process *p;

	if (!s)
		return;
	c->session = NULL;
	if (c == s->client) {
		s->client = NULL;
		session_finish(srv, s); /* nobody to report to: finalize now */
	} else if ((p = agent_process(s, c))) {
		if (!p->agent_said_goodbye) { /* killed, or its flusher gave up on us */
			p->agent_cut = true;
			p->events_at_cut = p->events;
		}
		session_process_agent_gone(p);
		/*
		 * Without perf EXIT records, its agent's goodbye says the process
		 * ended: else a tree of more than MAX_LIVE_PROCESSES over time
		 * would have its later processes counted as over the cap.
		 */
		if (!s->sampler && p->agent_said_exit && !p->exited)
			process_exited(s, p);
		if (s->target_exited) /* its last agent, perhaps: see session_end_ready */
			srv->sessions_may_end = true;
		else if (s->attach_mode && p->pid == s->target) /* detached from elsewhere */
			conn_send(s->client, FRAME_AGENT_GONE, NULL, 0);
	}
}

/* status: events over the last second */
static void session_rate_tick(struct session *s, uint64_t now)
{
	uint64_t events = 0;

	if (now - s->rate_at_ns < 1000000000ull)
		return;
	for (const struct session_process *p = s->procs; p; p = p->next)
		events += p->events;
	s->events_per_s = (events - s->rate_mark) * 1000000000ull / (now - s->rate_at_ns);
	s->rate_mark = events;
	s->rate_at_ns = now;
}

/* Every agent gone or said goodbye: nothing more will come. */
static bool session_agents_done(const struct session *s)
{
	for (const struct session_process *p = s->procs; p; p = p->next)
		if (p->agent && !p->agent_said_goodbye)
			return false;
	return true;
}

/*
 * Its target exited and every agent it knows of said goodbye: it could end.
 * Agents connect and send without waiting for profd, so one of a process
 * that exited may still sit in the backlog or in its socket unread.
 */
static bool session_ending(const struct session *s)
{
	return s->target_exited && session_agents_done(s);
}

void session_end_ready(struct server *srv)
{
	uint64_t now = mono_clock_ns();
	struct session *s, *next;

	srv->sessions_may_end = false;
	for (s = srv->sessions; s && !session_ending(s); s = s->next)
		;
	if (s) /* before the walk below: what it reads may end sessions */
		server_settle(srv);
	for (s = srv->sessions; s; s = next) {
		next = s->next;
		if (s->target_exited && (session_agents_done(s) || agents_grace_over(s, now)))
			session_finish(srv, s);
	}
}

void session_tick_all(struct server *srv)
{
	struct session *s, *next;
	uint64_t now = mono_clock_ns();

	session_sched_drain(srv);
	server_kernel_symbols_expire(srv, now);
	server_sched_expire(srv, now);
	for (s = srv->sessions; s; s = next) {
		next = s->next;
		if (s->sampler)
			session_read_samples(s);
		session_rate_tick(s, now);
		if (s->sched && srv->sched) { /* a loss marks the trace as it happens */
			sched_session_set_lost(s->sched, sched_tracer_lost(srv->sched, s->target));
			/* switches of threads whose calls never come (or lag) must not pile up */
			if (now > SAMPLE_HOLD_MAX_NS)
				sched_session_watermark(s->sched, now - SAMPLE_HOLD_MAX_NS);
		}
		for (struct session_process *p = s->active, *next; p; p = next) {
			next = p->active_next; /* a retired one leaves the list */
			session_process_tick(p, now);
			/*
			 * A tree of thousands must not keep every one's files open.
			 * Its agent gone (its events all in), the rings read a few
			 * times since its exit: no sample of it is still to come.
			 */
			if (p->exited && !p->agent && now - p->exited_ns > RETIRE_AFTER_NS)
				session_process_retire(p);
		}
		if (s->writer) /* never waits for the compressor */
			perfetto_writer_poll(s->writer);
	}
	session_end_ready(srv);
}

int session_count(const struct server *srv)
{
	int n = 0;

	for (const struct session *s = srv->sessions; s; s = s->next)
		n++;
	return n;
}

void session_finish_all(struct server *srv)
{
	while (srv->sessions)
		session_finish(srv, srv->sessions);
}

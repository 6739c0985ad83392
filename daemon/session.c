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

#include "common/mono_clock.h"
#include "daemon/access.h"
#include "daemon/sampling/call_stacks.h"
#include "daemon/symbols/demangle.h"
#include "daemon/sampling/dwarf_unwind.h"
#include "daemon/events/event_decoder.h"
#include "daemon/events/func_registry.h"
#include "daemon/events/func_stats.h"
#include "daemon/symbols/kernel_symbols.h"
#include "daemon/sampling/sample_pipeline.h"
#include "daemon/sampling/sampler.h"
#include "daemon/pid_ns.h"
#include "daemon/session.h"
#include "daemon/sampling/stub_map.h"
#include "daemon/symbols/symbols.h"
#include "daemon/events/tsc_rate.h"
#include "daemon/sched/sched_session.h"
#include "daemon/sched/sched_tracer.h"
#include "proto/event_wire.h"
#include "profd.pb-c.h"
#include "viewer-export/perfetto_writer.h"

enum { CALL_GRAPH_AUTO = 0, CALL_GRAPH_FP = 1, CALL_GRAPH_DWARF = 2 };

#define AGENT_GRACE_NS (3ull * 1000000000ull)   /* after the target exits */
/* Per CPU: 16 MiB. A client must not make a root daemon pin memory without bound. */
#define MAX_RING_PAGES 4096
#define STRINGIFY_VALUE(x) #x
#define STRINGIFY(x) STRINGIFY_VALUE(x)
#define SAMPLE_HOLD_MAX_NS (2ull * 1000000000ull) /* samples wait this long for events */
#define TID_SLOTS 4096                           /* power of two */
#define MIN_BUFFER_SIZE (64ull << 10)
#define MAX_BUFFER_SIZE (64ull << 30)
#define MAX_MIN_DURATION_NS (3600ull * 1000000000)
#define MAX_DEPTH 1024
/*
 * About what the Perfetto UI in a browser loads (../shared/perfetto-format.md
 * §6.3: its memory grows with the slice count): past it, the summary names
 * the --min-duration that would have kept the timeline under.
 */
#define UI_SLICE_LIMIT 10000000ull
/* Ours to hold, unlike the agent's buffers: a client must not make a root daemon keep more. */
#define MAX_RING_SIZE (4ull << 30)
enum { TRACE_COMPRESSION_DEFAULT = 0, TRACE_COMPRESSION_NONE = 1, TRACE_COMPRESSION_DEFLATE = 2,
       TRACE_COMPRESSION_ZSTD = 3 }; /* RunRequest.trace_compression */

struct thread_slot {
	uint32_t tid;          /* 0 = empty */
	uint64_t last_ts;      /* slices on one thread never go back in time */
	uint64_t drops;
	int named_by_kernel;   /* perf COMM names beat the agent's, read earlier */
};

struct session {
	uint64_t id;
	char token[33];
	struct conn *client, *agent;
	struct ucred client_cred;  /* SO_PEERCRED of the client: who asks for the target */
	pid_t target;
	int out_fd;
	struct perfetto_writer *writer;
	struct sampler *sampler;
	struct symbolizer *symbols;
	struct dwarf_unwinder *unwinder; /* NULL: frame-pointer callchains only */
	struct call_stacks *calls;       /* the agent's shadow stacks, replayed */
	struct stub_map *stubs;          /* where the agent's stubs are */
	struct pid_ns_map *pid_ns;       /* NULL: the target numbers its threads as we do */
	struct sched_session *sched;     /* NULL: no scheduler states (sched_why says why) */
	bool sched_off;                  /* --sched off */
	char sched_why[192];
	struct kernel_symbols *kernel;   /* NULL: the client may not see kernel frames */
	struct sample_pipeline *samples_out; /* NULL until sampling starts */
	uint32_t call_graph;             /* CALL_GRAPH_* */
	uint32_t ring_pages, stack_bytes; /* 0: the sampler's defaults */
	uint64_t buffer_size;            /* the agent's event buffer budget; 0: its default */
	uint64_t min_duration_ns;        /* --min-duration (0: none), and in TSC ticks */
	uint64_t min_duration_ticks;
	uint32_t max_depth;              /* --max-depth (0: none) */
	uint64_t buffer_budget, buffer_peak; /* as the agent reported them at its goodbye */
	struct func_stats *stats;        /* exact per-function figures */
	struct event_decoder *decoder;
	struct demangle_cache *demangled;
	char *comm;
	char *output_name;     /* as the client named it, for status only */
	uint64_t started_ns;
	uint64_t rate_at_ns, rate_mark, events_per_s; /* status: events over the last second */
	char **patterns;
	size_t n_patterns;
	uint32_t freq;
	struct func_registry funcs; /* the agents' tables: ids and names */
	struct thread_slot *threads;
	uint64_t events, drops, samples_lost, events_invalid;
	uint64_t agent_deadline_ns;
	unsigned long long target_start_time; /* to refuse an agent from a reused pid */
	int attach_mode;
	int agent_said_goodbye;
	int target_exited;
	int agent_seen;
	char error[256];
	char warning[256];
	struct session *next;
};

static void session_error(struct session *s, const char *fmt, const char *detail)
{
	if (s->error[0] == '\0')
		snprintf(s->error, sizeof(s->error), fmt, detail);
	server_log("session %" PRIu64 ": %s", s->id, s->error);
}

static struct thread_slot *session_thread(struct session *s, uint32_t tid)
{
	uint32_t i = (tid * 2654435761u) & (TID_SLOTS - 1);

	for (uint32_t probes = 0; probes < TID_SLOTS; probes++, i = (i + 1) & (TID_SLOTS - 1)) {
		if (s->threads[i].tid == tid)
			return &s->threads[i];
		if (s->threads[i].tid == 0) {
			s->threads[i].tid = tid;
			return &s->threads[i];
		}
	}
	return NULL; /* more threads than slots: their order is not clamped */
}

static void send_error(struct conn *c, const char *msg)
{
	Profd__ErrorReply e = PROFD__ERROR_REPLY__INIT;
	uint8_t buf[512];

	e.message = (char *)msg;
	if (profd__error_reply__get_packed_size(&e) <= sizeof(buf))
		conn_send(c, FRAME_ERROR, buf, profd__error_reply__pack(&e, buf));
	conn_close_later(c);
}

static void session_free(struct session *s)
{
	pid_ns_map_free(s->pid_ns);
	func_registry_free(&s->funcs);
	func_stats_free(s->stats);
	event_decoder_free(s->decoder);
	sample_pipeline_free(s->samples_out); /* empty: session_finish flushed it */
	kernel_symbols_free(s->kernel); /* after the writer: names are keyed by address */
	call_stacks_free(s->calls);
	stub_map_free(s->stubs);
	for (size_t i = 0; i < s->n_patterns; i++)
		free(s->patterns[i]);
	free(s->patterns);
	free(s->threads);
	sched_session_free(s->sched);
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

static struct session *session_new(struct server *srv, struct conn *c, const Profd__RunRequest *req)
{
	struct session *s = calloc(1, sizeof(*s));
	uint8_t rnd[16];

	if (!s)
		return NULL;
	s->threads = calloc(TID_SLOTS, sizeof(*s->threads));
	s->decoder = event_decoder_new();
	s->stats = func_stats_new();
	s->calls = call_stacks_new();
	s->stubs = stub_map_new();
	s->demangled = demangle_cache_new();
	s->comm = strdup(req->target_comm && req->target_comm[0] ? req->target_comm : "target");
	s->output_name = strdup(req->output_name ? req->output_name : "");
	s->started_ns = s->rate_at_ns = mono_clock_ns();
	s->patterns = calloc(req->n_func_patterns + 1, sizeof(char *));
	for (size_t i = 0; s->patterns && i < req->n_func_patterns; i++)
		if ((s->patterns[i] = strdup(req->func_patterns[i])))
			s->n_patterns++;
	if (!s->threads || !s->decoder || !s->stats || !s->calls || !s->stubs || !s->demangled || !s->comm ||
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

/* Names every thread the running target has now (later ones come from perf COMM and the agent). */
static void describe_running_threads(struct session *s)
{
	char path[96], name[64];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)s->target);
	dir = opendir(path);
	while (dir && (d = readdir(dir))) {
		int tid = atoi(d->d_name);
		FILE *f;

		if (tid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)s->target, tid);
		f = fopen(path, "re");
		if (f && fgets(name, sizeof(name), f)) {
			name[strcspn(name, "\n")] = '\0';
			if (tid == s->target)
				perfetto_writer_process(s->writer, s->target, name);
			perfetto_writer_thread(s->writer, s->target, tid, name);
		}
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
}

/* profctl attach: the target runs already; the client injects the agent itself. */
static int session_attach(struct session *s, pid_t pid)
{
	char why[160];
	const char *refused = access_check_target(&s->client_cred, pid, false,
						  &s->target_start_time, why, sizeof(why));

	if (refused) {
		send_error(s->client, refused);
		return -EPERM;
	}
	s->attach_mode = 1;
	s->target = pid;
	perfetto_writer_process(s->writer, pid, s->comm);
	describe_running_threads(s);
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

static void handle_run_request(struct server *srv, struct conn *c, const uint8_t *p, size_t len)
{
	Profd__RunRequest *req = profd__run_request__unpack(NULL, len, p);
	Profd__SessionStarted started = PROFD__SESSION_STARTED__INIT;
	struct session *s;
	uint8_t buf[256];

	if (!req || c->session) {
		send_error(c, req ? "one session per connection" : "malformed run request");
		goto out;
	}
	if (c->passed_fd < 0 || !output_fd_usable(c->passed_fd)) {
		send_error(c, "run request without an output descriptor of a regular file "
			   "open for writing");
		goto out;
	}
	if (req->ring_pages > MAX_RING_PAGES || (req->ring_pages & (req->ring_pages - 1))) {
		send_error(c, "ring pages must be a power of two up to " STRINGIFY(MAX_RING_PAGES));
		goto out;
	}
	if (req->stack_bytes % 8 || req->stack_bytes > SAMPLER_MAX_STACK_BYTES) {
		send_error(c, "stack bytes must be a multiple of 8 up to 65528");
		goto out;
	}
	if (req->min_duration_ns > MAX_MIN_DURATION_NS || req->max_depth > MAX_DEPTH) {
		send_error(c, "min duration must be at most 1 hour and max depth at most "
			   STRINGIFY(MAX_DEPTH));
		goto out;
	}
	/* the target's memory, not ours: the client's to spend, within reason */
	if (req->buffer_size && (req->buffer_size < MIN_BUFFER_SIZE ||
				 req->buffer_size > MAX_BUFFER_SIZE)) {
		send_error(c, "buffer size must be between 64K and 64G");
		goto out;
	}
	if (req->trace_compression > TRACE_COMPRESSION_ZSTD) {
		send_error(c, "trace compression must be none, deflate or zstd");
		goto out;
	}
	if (req->ring_size && (req->ring_size < PERFETTO_RING_MIN_BYTES ||
			       req->ring_size > MAX_RING_SIZE)) {
		send_error(c, "ring size must be between 256K (one compression block) and 4G");
		goto out;
	}
	s = session_new(srv, c, req);
	if (!s) {
		send_error(c, "out of memory");
		goto out;
	}
	s->out_fd = c->passed_fd;
	c->passed_fd = -1;
	s->writer = perfetto_writer_new_opts(s->out_fd, &(struct perfetto_writer_options){
		.compression = writer_compression(req->trace_compression),
		.ring_bytes = req->ring_size });
	if (!s->writer) {
		send_error(c, "cannot create the trace writer");
		goto out;
	}
	perfetto_writer_set_sample_freq(s->writer, s->freq);
	perfetto_writer_clock_snapshot(s->writer);
	if (req->attach_pid > 0 && session_attach(s, req->attach_pid))
		goto out; /* refused: the error went to the client */
	started.session_id = s->id;
	started.agent_token = s->token;
	conn_send(c, FRAME_SESSION_STARTED, buf, profd__session_started__pack(&started, buf));
	srv->served_one = true;
out:
	if (req)
		profd__run_request__free_unpacked(req, NULL);
}

static void on_sample(void *ctx, const struct sampler_sample *smp)
{
	struct session *s = ctx;

	if (s->samples_out)
		sample_pipeline_add(s->samples_out, smp);
}

static void on_mmap(void *ctx, const struct sampler_mmap *m)
{
	struct session *s = ctx;

	if ((pid_t)m->pid != s->target || !(m->prot & PROT_EXEC))
		return;
	symbolizer_add_mapping(s->symbols, m->start, m->start + m->len, m->pgoff, m->filename);
	if (s->unwinder)
		dwarf_unwinder_add_mapping(s->unwinder, m->start, m->start + m->len, m->pgoff,
					   m->filename);
}

static void on_comm(void *ctx, uint32_t pid, uint32_t tid, const char *comm, uint64_t time)
{
	struct session *s = ctx;

	(void)time;
	struct thread_slot *t;

	if ((pid_t)pid != s->target)
		return;
	t = session_thread(s, tid);
	if (t)
		t->named_by_kernel = 1;
	if (pid == tid)
		perfetto_writer_process(s->writer, (pid_t)pid, comm);
	perfetto_writer_thread(s->writer, (pid_t)pid, (pid_t)tid, comm);
	if (s->samples_out) /* the agent's thread: its samples are profiling overhead */
		sample_pipeline_thread_named(s->samples_out, tid, comm);
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
	.lost = on_lost,
};

/*
 * Drains the perf rings. A sample may name a mapping whose MMAP2 record sits
 * in another CPU's ring read later in the same pass: samples are written
 * only after the whole pass (or, with an agent, once its events reach them).
 */
static void session_read_samples(struct session *s)
{
	uint64_t started = mono_clock_ns();

	sampler_read(s->sampler, &sampler_cb, s);
	if (s->samples_out)
		sample_pipeline_rings_read(s->samples_out, started);
}

/*
 * Kernel frames only for a client that could read them itself (perf's rule:
 * CAP_PERFMON, or paranoid <= 1 with kallsyms readable); others get user
 * frames without a word, as perf gives them.
 */
static void session_load_kernel_symbols(struct session *s)
{
	char err[160];

	if (!access_may_see_kernel(&s->client_cred))
		return;
	s->kernel = kernel_symbols_load(NULL, err, sizeof(err));
	if (!s->kernel)
		server_log("session %" PRIu64 ": no kernel frames: %s", s->id, err);
}

/* Run: armed to start at exec. Attach: the process runs already: maps from /proc, enabled now. */
static void session_start_sampling(struct session *s, Profd__SamplingReady *ready)
{
	struct sampler_config cfg = { .pid = s->target, .freq_hz = s->freq,
				      .enable_on_exec = !s->attach_mode,
				      .ring_pages = s->ring_pages };
	char err[256] = "";

	s->symbols = symbolizer_new(s->target);
	if (s->symbols && s->attach_mode)
		symbolizer_load_proc_maps(s->symbols);
	if (s->freq == 0 || !s->symbols)
		return;
	if (s->call_graph != CALL_GRAPH_FP) { /* most of Debian has no frame pointers */
		s->unwinder = dwarf_unwinder_new(s->target);
		if (s->unwinder && s->attach_mode)
			dwarf_unwinder_load_proc_maps(s->unwinder);
		cfg.copy_stack = s->unwinder != NULL;
		cfg.stack_bytes = s->stack_bytes ? s->stack_bytes : SAMPLER_DEFAULT_STACK_BYTES;
	}
	session_load_kernel_symbols(s);
	cfg.kernel_callchain = s->kernel != NULL;
	s->samples_out = sample_pipeline_new(&(struct sample_pipeline_config){
		.target = s->target, .writer = s->writer, .symbols = s->symbols,
		.unwinder = s->unwinder, .demangled = s->demangled, .calls = s->calls,
		.stubs = s->stubs, .kernel = s->kernel });
	if (!s->samples_out) {
		snprintf(s->warning, sizeof(s->warning), "sampling disabled: out of memory");
		return;
	}
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
		if (s->sched && ((pid_t)r->prev_tgid == s->target || (pid_t)r->next_tgid == s->target))
			sched_session_record(s->sched, r);
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
	sched_tracer_remove(srv->sched, s->target);
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
		send_error(s->client, "malformed or repeated target announcement");
		goto out;
	}
	refused = access_check_target(&s->client_cred, msg->pid, true, &s->target_start_time, why,
				      sizeof(why));
	if (refused) {
		send_error(s->client, refused);
		goto out;
	}
	s->target = msg->pid;
	perfetto_writer_process(s->writer, s->target, s->comm);
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

/*
 * A call returned: its slice ends, with the samples it took as the innermost
 * call and, when the thread was switched out during it, its on-CPU and
 * off-CPU time (a slice without them ran throughout, if the trace has
 * scheduler states).
 */
static void end_call(struct session *s, uint32_t tid, uint64_t ts, uint32_t func_id,
		     struct offcpu_thread *clock)
{
	struct call_frame done = { 0 };
	struct perfetto_arg args[4];
	size_t n = 0;

	if (call_stacks_exit(s->calls, tid, func_id, &done) == 0 && s->sched) {
		struct offcpu_time now = offcpu_thread_before(clock, ts);
		struct offcpu_time in = { now.off_ns - done.off_at_enter.off_ns,
					  now.runnable_ns - done.off_at_enter.runnable_ns };
		uint64_t dur = ts >= done.enter_ts ? ts - done.enter_ts : 0;

		/* a clock behind its value at enter was forgotten meanwhile: no figure */
		if (now.off_ns < done.off_at_enter.off_ns ||
		    now.runnable_ns < done.off_at_enter.runnable_ns)
			goto end;
		sched_session_call(s->sched, func_id, dur, &in);
		if (in.off_ns) {
			if (in.off_ns > dur) /* its enter and the switches: two clocks, one order */
				in.off_ns = dur;
			args[n++] = (struct perfetto_arg){ "on_cpu_ns", dur - in.off_ns };
			args[n++] = (struct perfetto_arg){ "off_cpu_ns", in.off_ns };
			args[n++] = (struct perfetto_arg){ "runnable_ns", in.runnable_ns };
		}
	}
end:
	if (done.self_samples)
		args[n++] = (struct perfetto_arg){ "self_samples", done.self_samples };
	perfetto_writer_slice_end_args(s->writer, s->target, (pid_t)tid, ts, args, n);
}

/*
 * One thread's events in stream order: its slot resolved once per batch, then
 * per event only what the event needs (profd's hot path: ~10 M events/s).
 */
static void on_events(void *ctx, uint32_t tid, const struct decoded_event *evs, size_t n)
{
	struct session *s = ctx;
	struct thread_slot *t = session_thread(s, tid);
	uint64_t last_ts = t ? t->last_ts : 0;
	/* no switch is drained while a batch is decoded: one lookup serves it */
	struct offcpu_thread *clock = s->sched ? sched_session_clock(s->sched, tid) : NULL;

	for (size_t i = 0; i < n; i++) {
		const struct decoded_event *ev = &evs[i];
		uint32_t func_id = func_registry_session_id(&s->funcs, ev->func_id);
		uint64_t ts = ev->mono_ns;

		if (!func_id || (ev->kind != EVENT_ENTER && ev->kind != EVENT_EXIT)) {
			s->events_invalid++;
			continue;
		}
		if (ts < last_ts) /* slices on one thread never go back in time */
			ts = last_ts;
		last_ts = ts;
		s->events++;
		/* samples taken before this event see the calls open before it */
		if (s->samples_out)
			sample_pipeline_thread_reached(s->samples_out, tid, ts);
		if (ev->kind == EVENT_EXIT) {
			end_call(s, tid, ts, func_id, clock);
			continue;
		}
		call_stacks_enter(s->calls, tid, &(struct call_frame){
			.func_id = func_id, .return_address = ev->return_address,
			.return_slot = ev->return_slot, .enter_ts = ts,
			.off_at_enter = offcpu_thread_before(clock, ts) });
		perfetto_writer_slice_begin(s->writer, s->target, (pid_t)tid, ts, func_id);
	}
	if (t)
		t->last_ts = last_ts;
}

static void on_watermark(void *ctx, uint64_t ts)
{
	struct session *s = ctx;

	if (s->samples_out)
		sample_pipeline_watermark(s->samples_out, ts);
	if (s->sched)
		sched_session_watermark(s->sched, ts);
}

/* Its samples are all read (before this frame): they are written with its calls, then forgotten. */
static void on_thread_exit(void *ctx, uint32_t tid)
{
	struct session *s = ctx;

	if (s->samples_out)
		sample_pipeline_thread_reached(s->samples_out, tid, UINT64_MAX);
	call_stacks_thread_gone(s->calls, tid);
	if (s->sched)
		sched_session_thread_gone(s->sched, tid);
}

static void on_thread_name(void *ctx, uint32_t tid, const char *name)
{
	struct session *s = ctx;
	struct thread_slot *t = session_thread(s, tid);

	if (t && t->named_by_kernel)
		return;
	perfetto_writer_thread(s->writer, s->target, (pid_t)tid, name);
}

static void on_drops(void *ctx, uint32_t tid, uint64_t drops, uint64_t ts)
{
	struct session *s = ctx;
	struct thread_slot *t = session_thread(s, tid);

	if (!t || drops <= t->drops)
		return;
	s->drops += drops - t->drops;
	t->drops = drops;
	perfetto_writer_counter(s->writer, s->target, "dropped events", ts, (int64_t)s->drops);
}

/* The rate of durations in the stream so far: aggregates come in TSC ticks. */
static double session_ns_per_tick(const struct session *s)
{
	return (double)event_decoder_ticks_to_ns(s->decoder, 1ull << 32) / 4294967296.0;
}

static void on_func_agg(void *ctx, uint32_t tid, const struct decoded_func_agg *fa)
{
	struct session *s = ctx;
	uint32_t func_id = func_registry_session_id(&s->funcs, fa->func_id);

	if (!func_id) {
		s->events_invalid++;
		return;
	}
	if (func_stats_update(s->stats, tid, func_id, fa, session_ns_per_tick(s)))
		session_error(s, "%s", "out of memory for the per-function figures");
}

static void on_thread_drops(void *ctx, uint32_t tid, const struct decoded_thread_drops *td)
{
	struct session *s = ctx;

	func_stats_thread_drops(s->stats, tid, td);
}

static uint32_t on_map_tid(void *ctx, uint32_t agent_tid)
{
	struct session *s = ctx;

	return pid_ns_map_host_tid(s->pid_ns, agent_tid);
}

static const struct event_decoder_callbacks decoder_cb = {
	.map_tid = on_map_tid,
	.events = on_events,
	.func_agg = on_func_agg,
	.thread_drops = on_thread_drops,
	.watermark = on_watermark,
	.thread_exit = on_thread_exit,
	.thread_name = on_thread_name,
	.drops = on_drops,
};

static struct session *session_by_token(struct server *srv, const char *token)
{
	for (struct session *s = srv->sessions; s; s = s->next)
		if (token && strcmp(s->token, token) == 0)
			return s;
	return NULL;
}

static void handle_agent_hello(struct server *srv, struct conn *c, const uint8_t *p, size_t len)
{
	Profd__AgentHello *hello = profd__agent_hello__unpack(NULL, len, p);
	Profd__AgentConfig cfg = PROFD__AGENT_CONFIG__INIT;
	struct session *s = hello ? session_by_token(srv, hello->agent_token) : NULL;
	uint8_t buf[64 * 1024];

	/* The kernel's word on who connected, not the agent's; a handed-over link serves its session. */
	if (!s || s->agent || !s->target || c->peer.pid != s->target ||
	    (c->bound_session && c->bound_session != s->id) ||
	    access_start_time(s->target) != s->target_start_time) {
		send_error(c, "no session for this agent");
		goto out;
	}
	/* each agent (a new one after exec) starts its own zstd stream, clock and stacks */
	if (s->samples_out)
		sample_pipeline_flush(s->samples_out);
	call_stacks_clear(s->calls);
	stub_map_clear(s->stubs);
	event_decoder_free(s->decoder);
	s->decoder = event_decoder_new();
	if (!s->decoder) {
		send_error(c, "out of memory");
		goto out;
	}
	if (!s->pid_ns && (s->pid_ns = pid_ns_map_new(s->target)))
		server_log("session %" PRIu64 ": PID %d is %d in its own PID namespace: thread ids "
			   "translated", s->id, (int)s->target, (int)pid_ns_map_ns_pid(s->pid_ns));
	s->agent = c;
	s->agent_seen = 1;
	/* it patches before its table arrives: samples wait for the table and the events */
	if (s->samples_out)
		sample_pipeline_set_agent(s->samples_out, true, 0);
	func_registry_new_agent(&s->funcs);
	func_stats_new_agent(s->stats);
	s->agent_said_goodbye = 0;
	c->session = s;
	cfg.session_id = s->id;
	cfg.n_func_patterns = s->n_patterns;
	cfg.func_patterns = s->patterns;
	cfg.buffer_size = s->buffer_size;
	cfg.min_duration_ticks = s->min_duration_ticks;
	cfg.max_depth = s->max_depth;
	if (profd__agent_config__get_packed_size(&cfg) <= sizeof(buf))
		conn_send(c, FRAME_AGENT_CONFIG, buf, profd__agent_config__pack(&cfg, buf));
out:
	if (hello)
		profd__agent_hello__free_unpacked(hello, NULL);
}

static void function_named(void *ctx, uint32_t id, const Profd__InstrumentedFunction *f)
{
	struct session *s = ctx;

	if (f->stub)
		stub_map_add(s->stubs, f->stub, f->address, f->stub_same_offsets);
	perfetto_writer_function(s->writer, id,
				 demangle_cached(s->demangled, func_registry_name(&s->funcs, id)));
}

static void handle_function_table(struct session *s, const uint8_t *p, size_t len)
{
	Profd__FunctionTable *t = profd__function_table__unpack(NULL, len, p);

	if (!t || func_registry_add(&s->funcs, t, function_named, s)) {
		session_error(s, "%s", "malformed function table from the agent");
		if (t)
			profd__function_table__free_unpacked(t, NULL);
		conn_close_later(s->agent);
		return;
	}
	/* from now on samples wait for the events that say which calls were open */
	if (s->samples_out)
		sample_pipeline_set_agent(s->samples_out, true, t->exit_trampoline);
}

static void handle_events(struct server *srv, struct session *s, const uint8_t *p, size_t len,
			  bool raw)
{
	char err[160];
	int r;

	if (!s->funcs.agent_has_table) {
		session_error(s, "%s", "events before the function table");
		conn_close_later(s->agent);
		return;
	}
	/* every sample up to now in hand, so none arrives after the events that pass it */
	if (s->sampler)
		session_read_samples(s);
	/* and every switch: the calls' on/off-CPU clocks must not miss one before them */
	session_sched_drain(srv);
	r = raw ? event_decoder_feed_raw(s->decoder, p, len, &decoder_cb, s, err, sizeof(err)) :
		  event_decoder_feed(s->decoder, p, len, &decoder_cb, s, err, sizeof(err));
	if (r) {
		session_error(s, "agent stream: %s", err);
		conn_close_later(s->agent);
	}
}

static void handle_goodbye(struct session *s, const uint8_t *p, size_t len)
{
	Profd__AgentGoodbye *bye = profd__agent_goodbye__unpack(NULL, len, p);

	if (!bye)
		return; /* its figures are for the summary only: the session goes on */
	if (bye->buffer_budget > s->buffer_budget)
		s->buffer_budget = bye->buffer_budget;
	if (bye->buffer_peak > s->buffer_peak)
		s->buffer_peak = bye->buffer_peak;
	profd__agent_goodbye__free_unpacked(bye, NULL);
}

void session_agent_frame(struct server *srv, struct conn *c, uint32_t type,
			 const uint8_t *payload, size_t len)
{
	struct session *s = c->session;

	if (!s) {
		if (type == FRAME_AGENT_HELLO)
			handle_agent_hello(srv, c, payload, len);
		else
			send_error(c, "expected an agent hello");
		return;
	}
	switch (type) {
	case FRAME_FUNCTION_TABLE:
		handle_function_table(s, payload, len);
		break;
	case FRAME_EVENTS:
	case FRAME_EVENTS_RAW:
		handle_events(srv, s, payload, len, type == FRAME_EVENTS_RAW);
		break;
	case FRAME_AGENT_GOODBYE:
		s->agent_said_goodbye = 1; /* nothing more will come, whenever its socket closes */
		handle_goodbye(s, payload, len);
		break;
	default:
		session_error(s, "unexpected %s frame from the agent", frame_type_name(type));
		conn_close_later(c);
	}
}

/* Every agent's table adds up (an exec brings a new agent); skipped is allocated. */
static int fill_summary(struct session *s, Profd__SessionSummary *sum,
			const struct perfetto_writer_stats *st,
			const struct sample_pipeline_stats *samples)
{
	size_t n_skipped = 0;

	struct func_stats_summary calls;

	func_stats_summarize(s->stats, &calls);
	sum->agent_connected = s->agent_seen;
	sum->events = s->events;
	sum->events_dropped = s->drops;
	sum->calls_made = calls.made;
	sum->calls_recorded = calls.recorded;
	sum->calls_dropped = calls.dropped;
	sum->dropped_buffer_full = calls.dropped_by_reason[AGG_DROP_BUFFER_FULL];
	sum->dropped_shadow_full = calls.dropped_by_reason[AGG_DROP_SHADOW_FULL];
	sum->dropped_in_hook = calls.dropped_by_reason[AGG_DROP_IN_HOOK];
	sum->dropped_under_unwinder = calls.dropped_by_reason[AGG_DROP_UNDER_UNWINDER];
	sum->calls_unattributed = calls.unattributed;
	sum->calls_filtered = calls.filtered;
	sum->filtered_short = calls.filtered_by_reason[AGG_FILTER_SHORT];
	sum->filtered_deep = calls.filtered_by_reason[AGG_FILTER_DEEP];
	sum->min_duration_ns = s->min_duration_ns;
	sum->max_depth = s->max_depth;
	if (calls.recorded > UI_SLICE_LIMIT)
		sum->suggested_min_duration_ns =
			func_stats_min_duration_for(s->stats, UI_SLICE_LIMIT);
	sum->calls_open = calls.open;
	if (s->sched) {
		struct sched_session_stats ss;

		sched_session_get_stats(s->sched, &ss);
		sum->sched_switches = ss.switches;
		sum->sched_wakeups = ss.wakeups;
		sum->sched_lost = ss.lost;
		sum->sched_hidden = ss.hidden;
	} else if (s->sched_why[0]) {
		sum->sched_unavailable = s->sched_why;
	}
	sum->buffer_budget = s->buffer_budget;
	sum->buffer_peak = s->buffer_peak;
	sum->samples = samples->written;
	sum->sample_freq = s->freq;
	sum->samples_in_calls = samples->in_calls;
	sum->returns_repaired = samples->returns_repaired;
	sum->samples_empty = samples->empty;
	sum->samples_lost = s->samples_lost;
	sum->trace_bytes = st->bytes;
	sum->error = s->error;
	size_t n_warnings = s->warning[0] ? 1 : 0;

	for (size_t i = 0; i < s->funcs.n_tables; i++) {
		n_skipped += s->funcs.tables[i]->n_skipped;
		n_warnings += s->funcs.tables[i]->n_warnings;
	}
	sum->warnings = calloc(n_warnings + 1, sizeof(char *));
	if (!sum->warnings)
		return -ENOMEM;
	if (s->warning[0])
		sum->warnings[sum->n_warnings++] = s->warning;
	for (size_t i = 0; i < s->funcs.n_tables; i++)
		for (size_t k = 0; k < s->funcs.tables[i]->n_warnings; k++)
			sum->warnings[sum->n_warnings++] = s->funcs.tables[i]->warnings[k];
	sum->skipped = calloc(n_skipped + 1, sizeof(*sum->skipped));
	if (!sum->skipped)
		return -ENOMEM;
	for (size_t i = 0; i < s->funcs.n_tables; i++) {
		const Profd__FunctionTable *t = s->funcs.tables[i];

		sum->functions_matched += t->matched;
		sum->functions_instrumented += (uint32_t)t->n_functions;
		for (size_t k = 0; k < t->n_skipped; k++)
			sum->skipped[sum->n_skipped++] = t->skipped[k];
	}
	return 0;
}

/* Samples that are the profiler's own cost, by part (see daemon/sampling/overhead.h). */
static void fill_summary_overhead(Profd__SessionSummary *sum,
				  const struct sample_pipeline_stats *samples)
{
	sum->overhead_samples_hooks = samples->by_kind[OVERHEAD_HOOKS];
	sum->overhead_samples_flusher = samples->by_kind[OVERHEAD_FLUSHER];
	sum->overhead_samples_agent = samples->by_kind[OVERHEAD_AGENT];
	sum->overhead_samples = sum->overhead_samples_hooks + sum->overhead_samples_flusher +
				sum->overhead_samples_agent;
}

#define SUMMARY_SELF_FUNCTIONS 10

/* The functions with the most self samples, most first (entries allocated in *list). */
static size_t top_self_samples(const struct session *s, Profd__FunctionSelfSamples *list,
			       Profd__FunctionSelfSamples **ptrs)
{
	size_t n = 0;

	for (uint32_t id = 1; s->samples_out && id <= s->funcs.n_funcs; id++) {
		uint64_t k = sample_pipeline_self_samples(s->samples_out, id);
		size_t at;

		if (k == 0 || !func_registry_name(&s->funcs, id))
			continue;
		if (n == SUMMARY_SELF_FUNCTIONS && k <= list[n - 1].samples)
			continue;
		at = n < SUMMARY_SELF_FUNCTIONS ? n++ : n - 1;
		for (; at > 0 && list[at - 1].samples < k; at--)
			list[at] = list[at - 1];
		profd__function_self_samples__init(&list[at]);
		list[at].name = (char *)demangle_cached(s->demangled, func_registry_name(&s->funcs, id));
		list[at].samples = k;
	}
	for (size_t i = 0; i < n; i++)
		ptrs[i] = &list[i];
	return n;
}

#define SUMMARY_TOP_FUNCTIONS 10

static void fill_sched_time(const struct session *s, uint32_t func_id, Profd__FunctionTotals *f)
{
	struct sched_func_time t;

	if (!s->sched || !sched_session_func_time(s->sched, func_id, &t))
		return;
	f->sched_calls = t.calls;
	f->on_cpu_ns = f->total_ns > t.off_ns ? f->total_ns - t.off_ns : 0;
	f->off_cpu_ns = t.off_ns;
	f->runnable_ns = t.runnable_ns;
}

static size_t fill_top_functions(struct session *s, const struct func_totals *totals, size_t n,
				 Profd__FunctionTotals *top, Profd__FunctionTotals **ptrs)
{
	size_t k = 0;

	for (size_t i = 0; i < n && k < SUMMARY_TOP_FUNCTIONS; i++) {
		const char *name = func_registry_name(&s->funcs, totals[i].func_id);

		if (!name)
			continue;
		profd__function_totals__init(&top[k]);
		top[k].name = (char *)demangle_cached(s->demangled, name);
		top[k].calls = totals[i].calls;
		top[k].exited = totals[i].exited;
		top[k].total_ns = totals[i].total_ns;
		top[k].self_ns = totals[i].self_ns;
		top[k].max_ns = totals[i].max_ns;
		top[k].p50_ns = totals[i].p50_ns;
		top[k].p99_ns = totals[i].p99_ns;
		top[k].dropped = totals[i].dropped;
		top[k].filtered = totals[i].filtered;
		fill_sched_time(s, totals[i].func_id, &top[k]);
		ptrs[k] = &top[k];
		k++;
	}
	return k;
}

static void send_summary(struct session *s, const struct perfetto_writer_stats *st,
			 const struct sample_pipeline_stats *samples)
{
	Profd__SessionSummary sum = PROFD__SESSION_SUMMARY__INIT;
	Profd__FunctionSelfSamples self[SUMMARY_SELF_FUNCTIONS], *self_ptrs[SUMMARY_SELF_FUNCTIONS];
	uint8_t *buf = NULL;
	size_t len;

	Profd__FunctionTotals top[SUMMARY_TOP_FUNCTIONS], *top_ptrs[SUMMARY_TOP_FUNCTIONS];
	struct func_totals *totals = NULL;
	long n_totals;

	if (fill_summary(s, &sum, st, samples))
		goto out;
	fill_summary_overhead(&sum, samples);
	sum.n_self_samples = top_self_samples(s, self, self_ptrs);
	sum.self_samples = self_ptrs;
	n_totals = func_stats_totals(s->stats, 0, &totals);
	if (n_totals > 0) {
		sum.functions_called = (uint32_t)n_totals;
		sum.n_top_functions = fill_top_functions(s, totals, (size_t)n_totals, top, top_ptrs);
		sum.top_functions = top_ptrs;
	}
	len = profd__session_summary__get_packed_size(&sum);
	while (len > FRAME_PAYLOAD_MAX && sum.n_skipped > 0) {
		sum.n_skipped /= 2;
		len = profd__session_summary__get_packed_size(&sum);
	}
	buf = malloc(len ? len : 1);
	if (!buf)
		goto out;
	profd__session_summary__pack(&sum, buf);
	conn_send(s->client, FRAME_SESSION_SUMMARY, buf, len);
out:
	free(totals);
	free(buf);
	free(sum.skipped);
	free(sum.warnings);
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
 * The exact per-function figures, over all threads and per thread, on the
 * process's totals track (the UI shows them as arguments of one event per
 * function, `profctl report` reads them back), at the session's end.
 */
static void write_func_totals(struct session *s)
{
	uint64_t ts = mono_clock_ns();

	for (int per_thread = 0; per_thread <= 1; per_thread++) {
		struct func_totals *totals = NULL;
		long n = func_stats_totals(s->stats, per_thread, &totals);

		for (long i = 0; i < n; i++) {
			const struct func_totals *t = &totals[i];
			const char *name = func_registry_name(&s->funcs, t->func_id);
			struct perfetto_func_totals out = {
				.name = name ? demangle_cached(s->demangled, name) : "?",
				.tid = t->tid, .calls = t->calls, .exited = t->exited,
				.dropped = t->dropped, .filtered = t->filtered,
				.total_ns = t->total_ns, .self_ns = t->self_ns,
				.max_ns = t->max_ns, .p50_ns = t->p50_ns, .p90_ns = t->p90_ns,
				.p99_ns = t->p99_ns,
			};
			struct sched_func_time st;

			if (!t->tid && s->sched && sched_session_func_time(s->sched, t->func_id, &st)) {
				out.sched_calls = st.calls;
				out.on_cpu_ns = t->total_ns > st.off_ns ? t->total_ns - st.off_ns : 0;
				out.off_cpu_ns = st.off_ns;
				out.runnable_ns = st.runnable_ns;
			}

			perfetto_writer_func_totals(s->writer, s->target, ts, &out);
		}
		free(totals);
		if (n < 0)
			session_error(s, "%s", "out of memory for the per-function figures");
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
static void session_finish(struct server *srv, struct session *s)
{
	struct perfetto_writer_stats st = { 0 };
	struct sample_pipeline_stats samples = { 0 };
	char invalid[32];
	int err = 0;

	if (s->events_invalid) { /* ids no table named, or kinds we do not know: not written */
		snprintf(invalid, sizeof(invalid), "%" PRIu64, s->events_invalid);
		session_error(s, "the agent sent %s events naming no known function", invalid);
	}
	if (s->sampler) {
		session_read_samples(s);
		sampler_close(s->sampler);
	}
	if (s->samples_out) { /* what is still held is written before the trace ends */
		sample_pipeline_flush(s->samples_out);
		sample_pipeline_get_stats(s->samples_out, &samples);
	}
	session_stop_sched(srv, s);
	if (s->writer) {
		if (s->target)
			write_func_totals(s);
		err = perfetto_writer_finish(s->writer);
		perfetto_writer_get_stats(s->writer, &st); /* after: where a failure cut it */
		perfetto_writer_free(s->writer);
		s->writer = NULL;
		st.bytes = (uint64_t)lseek(s->out_fd, 0, SEEK_CUR);
		if (err)
			session_trace_cut(s, &st, -err);
	}
	symbolizer_free(s->symbols);
	dwarf_unwinder_free(s->unwinder);
	if (s->out_fd >= 0)
		close(s->out_fd);
	if (s->client) {
		send_summary(s, &st, &samples);
		conn_close_later(s->client);
		s->client->session = NULL;
	}
	if (s->agent) {
		conn_close_later(s->agent);
		s->agent->session = NULL;
	}
	server_log("session %" PRIu64 " ended: %" PRIu64 " events, %" PRIu64 " dropped, %" PRIu64
		   " samples (%" PRIu64 " in calls, %" PRIu64 " returns repaired, %" PRIu64
		   " left, %" PRIu64 " written before their events, %" PRIu64
		   " held at most)",
		   s->id, s->events, s->drops, samples.written, samples.in_calls,
		   samples.returns_repaired, samples.returns_unrepaired, samples.released_early,
		   samples.held_peak);
	session_unlink(srv, s);
	session_free(s);
}

static void handle_target_exited(struct session *s)
{
	s->target_exited = 1;
	s->agent_deadline_ns = mono_clock_ns() + AGENT_GRACE_NS;
}

/* ---- profctl status / stop ------------------------------------------------------------ */

/* Another user's session shows only that it exists (root sees everything). */
static bool may_see_session(const struct session *s, const struct conn *c)
{
	return c->peer.uid == 0 || c->peer.uid == s->client_cred.uid;
}

static void fill_status(const struct session *s, const struct conn *c, Profd__SessionStatus *st)
{
	uint32_t functions = 0;

	profd__session_status__init(st);
	st->id = s->id;
	st->owner_uid = s->client_cred.uid;
	if (!may_see_session(s, c)) {
		st->details_hidden = 1;
		return;
	}
	for (size_t i = 0; i < s->funcs.n_tables; i++)
		functions += (uint32_t)s->funcs.tables[i]->n_functions;
	st->target_pid = s->target;
	st->target = s->comm;
	st->attach = s->attach_mode;
	st->functions = functions;
	st->events = s->events;
	st->events_per_s = s->events_per_s;
	st->events_dropped = s->drops;
	st->samples = s->samples_out ? sample_pipeline_written(s->samples_out) : 0;
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
		send_error(c, "malformed status request");
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

static struct session *session_by_id(struct server *srv, uint64_t id)
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

	if (!req || !s || !may_see_session(s, c)) {
		/* another user's session is refused exactly like a missing one */
		snprintf(msg, sizeof(msg), req ? "no session %" PRIu64 " of yours" :
						 "malformed stop request",
			 req ? req->session_id : 0);
		send_error(c, msg);
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

	if (!req || !s || !may_see_session(s, c)) {
		snprintf(msg, sizeof(msg), req ? "no session %" PRIu64 " of yours" :
						 "malformed snapshot request",
			 req ? req->session_id : 0);
		send_error(c, msg);
		goto out;
	}
	if (!s->writer || !perfetto_writer_is_ring(s->writer)) {
		snprintf(msg, sizeof(msg), "session %" PRIu64 " is not a flight recorder "
			 "(start it with --ring SIZE)", s->id);
		send_error(c, msg);
		goto out;
	}
	if (c->passed_fd < 0 || !output_fd_usable(c->passed_fd)) {
		send_error(c, "snapshot request without an output descriptor of a regular file "
			   "open for writing");
		goto out;
	}
	n = perfetto_writer_snapshot(s->writer, c->passed_fd);
	if (n < 0) {
		snprintf(msg, sizeof(msg), "writing the snapshot failed: %s", strerror((int)-n));
		send_error(c, msg);
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

/* A connected AF_UNIX stream socket made by the session's target (its creator, for a pair). */
static const char *agent_link_refusal(const struct session *s, int fd)
{
	int type = 0, domain = 0;
	socklen_t tlen = sizeof(type), dlen = sizeof(domain), plen = sizeof(struct ucred);
	struct ucred peer;

	if (fd < 0)
		return "no descriptor came with it";
	if (!s->attach_mode || s->agent || s->agent_seen)
		return "the session has its agent";
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) || type != SOCK_STREAM ||
	    getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dlen) || domain != AF_UNIX ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &plen))
		return "not a local stream socket";
	if (peer.pid != s->target || access_start_time(s->target) != s->target_start_time)
		return "its other end is not the target's";
	return NULL;
}

/*
 * attach: the client hands over the profd end of a socket pair that the
 * target made (profctl took it with pidfd_getfd, with its ptrace rights), so
 * the agent needs no path, mode or group to reach us. The kernel names the
 * pair's creator, which must be this session's target; the agent on the
 * other end still presents the token, and the link serves this session only.
 */
static void handle_agent_link(struct server *srv, struct session *s, struct conn *c)
{
	int fd = c->passed_fd;
	const char *why = agent_link_refusal(s, fd);
	struct conn *a = NULL;

	c->passed_fd = -1;
	if (!why && !(a = server_adopt(srv, fd)))
		why = "too many connections";
	if (why) {
		session_error(s, "agent link refused: %s", why);
		if (fd >= 0)
			close(fd);
		return;
	}
	a->kind = CONN_AGENT;
	a->bound_session = s->id;
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
		else
			send_error(c, "expected a run, status, stop or snapshot request");
		return;
	}
	switch (type) {
	case FRAME_TARGET_FORKED:
		handle_target_forked(s, payload, len);
		break;
	case FRAME_TARGET_EXITED:
		handle_target_exited(s);
		break;
	case FRAME_AGENT_LINK:
		handle_agent_link(srv, s, c);
		break;
	default:
		send_error(c, "unexpected frame from the client");
	}
}

void session_conn_closed(struct server *srv, struct conn *c)
{
	struct session *s = c->session;

	if (!s)
		return;
	c->session = NULL;
	if (c == s->client) {
		s->client = NULL;
		session_finish(srv, s); /* nobody to report to: finalize now */
	} else if (c == s->agent) {
		s->agent = NULL;
		if (s->samples_out) /* no more events: held samples go out with what is known */
			sample_pipeline_set_agent(s->samples_out, false, 0);
		if (s->target_exited)
			session_finish(srv, s);
		else if (s->attach_mode) /* detached from elsewhere: the client ends it */
			conn_send(s->client, FRAME_AGENT_GONE, NULL, 0);
	}
}

void session_tick_all(struct server *srv)
{
	struct session *s = srv->sessions, *next;
	uint64_t now = mono_clock_ns();

	session_sched_drain(srv);
	for (; s; s = next) {
		next = s->next;
		if (s->sampler)
			session_read_samples(s);
		if (now - s->rate_at_ns >= 1000000000ull) {
			s->events_per_s = (s->events - s->rate_mark) * 1000000000ull /
					  (now - s->rate_at_ns);
			s->rate_mark = s->events;
			s->rate_at_ns = now;
		}
		if (s->sched && srv->sched) { /* a loss marks the trace as it happens */
			sched_session_set_lost(s->sched, sched_tracer_lost(srv->sched, s->target));
			/* switches of threads whose calls never come (or lag) must not pile up */
			if (now > SAMPLE_HOLD_MAX_NS)
				sched_session_watermark(s->sched, now - SAMPLE_HOLD_MAX_NS);
		}
		if (s->samples_out && now > SAMPLE_HOLD_MAX_NS) /* an agent that went quiet */
			sample_pipeline_release_older(s->samples_out, now - SAMPLE_HOLD_MAX_NS);
		if (s->writer) /* never waits for the compressor */
			perfetto_writer_poll(s->writer);
		if (s->target_exited &&
		    (!s->agent || s->agent_said_goodbye || now >= s->agent_deadline_ns))
			session_finish(srv, s);
	}
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

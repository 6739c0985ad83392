// SPDX-License-Identifier: MIT
/*
 * One process of a session (see session_internal.h): its agent connection
 * (hello, function tables, events, goodbye), the call stacks replayed from
 * its events, its threads' slices, its symbols and sample pipeline, and its
 * exact per-function figures. Writes into the session's trace; never
 * touches another process's state, the client or the session's end.
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>

#include "common/arg_spec.h"
#include "common/mono_clock.h"
#include "common/proc_maps_line.h"
#include "daemon/access.h"
#include "daemon/auto_args.h"
#include "daemon/events/event_decoder.h"
#include "daemon/events/event_hist.h"
#include "daemon/events/func_stats.h"
#include "daemon/pid_ns.h"
#include "daemon/sampling/call_stacks.h"
#include "daemon/sampling/dwarf_unwind.h"
#include "daemon/sampling/sample_pipeline.h"
#include "daemon/sampling/stub_map.h"
#include "daemon/sampling/unwind_files.h"
#include "daemon/sched/sched_session.h"
#include "daemon/session.h"
#include "daemon/session_internal.h"
#include "daemon/symbols/demangle.h"
#include "daemon/symbols/symbols.h"
#include "proto/event_wire.h"
#include "viewer-export/perfetto_writer.h"

#if defined(__x86_64__)
#define PROFD_ELF_MACHINE EM_X86_64
#else
#define PROFD_ELF_MACHINE EM_AARCH64
#endif

#define TID_SLOTS_FIRST 64      /* power of two; grows: a tree of thousands costs little each */
#define TID_SLOTS_MAX 65536

static uint32_t pid_slot(const struct session *s, pid_t pid)
{
	uint32_t i = ((uint32_t)pid * 2654435761u) & (s->pid_index_slots - 1);

	while (s->pid_index[i] && s->pid_index[i]->pid != pid)
		i = (i + 1) & (s->pid_index_slots - 1);
	return i;
}

/* Rebuilt from the list at twice the size when half full; the list stays the truth. */
static void pid_index_grow(struct session *s)
{
	uint32_t slots = s->pid_index_slots ? s->pid_index_slots * 2 : 64;
	struct session_process **grown = calloc(slots, sizeof(*grown));

	free(s->pid_index);
	s->pid_index = grown;
	s->pid_index_slots = grown ? slots : 0;
	s->pid_index_used = 0;
	for (struct session_process *p = s->procs; grown && p; p = p->next) {
		uint32_t i = pid_slot(s, p->pid);

		if (!s->pid_index[i]) { /* newest first: an older one of the same pid stays out */
			s->pid_index[i] = p;
			s->pid_index_used++;
		}
	}
}

static void pid_index_add(struct session *s, struct session_process *p)
{
	uint32_t i;

	if ((s->pid_index_used + 1) * 2 > s->pid_index_slots) {
		pid_index_grow(s); /* adds p too: it heads the list */
		return;
	}
	i = pid_slot(s, p->pid);
	s->pid_index_used += !s->pid_index[i];
	s->pid_index[i] = p;
}

struct session_process *session_process_new(struct session *s, pid_t pid)
{
	struct session_process *older = session_process_find(s, pid);
	struct session_process *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->s = s;
	p->pid = pid;
	/* a pid the kernel reused within the session: another process in the trace */
	p->generation = older ? older->generation + 1 : 0;
	p->trace_proc = PERFETTO_PROC(pid, p->generation);
	p->n_thread_slots = TID_SLOTS_FIRST;
	p->threads = calloc(p->n_thread_slots, sizeof(*p->threads));
	p->decoder = event_decoder_new();
	p->stats = func_stats_new();
	p->hists = event_hists_new();
	p->calls = call_stacks_new();
	p->stubs = stub_map_new();
	if (!p->threads || !p->decoder || !p->stats || !p->hists || !p->calls || !p->stubs) {
		session_process_free(p);
		return NULL;
	}
	p->next = s->procs;
	s->procs = p;
	p->active_next = s->active;
	if (s->active)
		s->active->active_prev = p;
	s->active = p;
	pid_index_add(s, p);
	return p;
}

/* Out of the session's active list, for good (see session_process_retire). */
static void active_unlink(struct session_process *p)
{
	if (p->active_prev)
		p->active_prev->active_next = p->active_next;
	else if (p->s->active == p)
		p->s->active = p->active_next;
	if (p->active_next)
		p->active_next->active_prev = p->active_prev;
	p->active_next = p->active_prev = NULL;
}

void session_process_free(struct session_process *p)
{
	if (!p)
		return;
	pid_ns_map_free(p->pid_ns);
	func_registry_free(&p->funcs);
	func_stats_free(p->stats);
	event_hists_free(p->hists);
	event_decoder_free(p->decoder);
	sample_pipeline_free(p->samples_out); /* empty: session_process_finish flushed it */
	call_stacks_free(p->calls);
	stub_map_free(p->stubs);
	symbolizer_free(p->symbols);
	dwarf_unwinder_free(p->unwinder);
	free(p->threads);
	free(p->trace_ids);
	free(p);
}

struct session_process *session_process_find(struct session *s, pid_t pid)
{
	if (s->pid_index)
		return s->pid_index[pid_slot(s, pid)];
	for (struct session_process *p = s->procs; p; p = p->next)
		if (p->pid == pid)
			return p;
	return NULL;
}

struct session_process *session_process_at(struct session *s, pid_t pid, uint64_t ts)
{
	struct session_process *p = session_process_find(s, pid);

	/* the list runs newest first: an older process of the pid comes after */
	while (p && p->generation && ts && p->start_ts > ts) {
		struct session_process *older = p->next;

		while (older && older->pid != pid)
			older = older->next;
		if (!older)
			break;
		p = older;
	}
	return p;
}

struct session_process *session_process_of_record(struct session *s, pid_t pid, uint64_t ts)
{
	struct session_process *p = session_process_at(s, pid, ts);

	/* before a newer one of the pid began, or before the last of its threads ended */
	if (!p || p != session_process_find(s, pid) || ts <= p->exit_ts)
		return p;
	if (p->exited)
		return NULL; /* after its end: the pid's next process, whose FORK is unread */
	/* its exit unread: still its only while /proc has it under the pid (0: not known) */
	return !p->start_time || access_start_time(pid) == p->start_time ? p : NULL;
}

static struct thread_slot *slot_find(struct thread_slot *slots, uint32_t n, uint32_t tid)
{
	uint32_t i = (tid * 2654435761u) & (n - 1);

	for (uint32_t probes = 0; probes < n; probes++, i = (i + 1) & (n - 1))
		if (slots[i].tid == tid || slots[i].tid == 0)
			return &slots[i];
	return NULL;
}

/* Twice the slots, past half full; false when it cannot (the table stays as it is). */
static bool threads_grow(struct session_process *p)
{
	uint32_t n = p->n_thread_slots * 2;
	struct thread_slot *slots;

	if (n > TID_SLOTS_MAX || !(slots = calloc(n, sizeof(*slots))))
		return false;
	for (uint32_t i = 0; i < p->n_thread_slots; i++)
		if (p->threads[i].tid)
			*slot_find(slots, n, p->threads[i].tid) = p->threads[i];
	free(p->threads);
	p->threads = slots;
	p->n_thread_slots = n;
	return true;
}

static struct thread_slot *process_thread(struct session_process *p, uint32_t tid)
{
	struct thread_slot *t = slot_find(p->threads, p->n_thread_slots, tid);

	if (t && t->tid == 0 && (p->n_threads + 1) * 2 > p->n_thread_slots && threads_grow(p))
		t = slot_find(p->threads, p->n_thread_slots, tid);
	if (t && t->tid == 0) {
		t->tid = tid;
		p->n_threads++;
	}
	return t; /* NULL: more threads than slots: their order is not clamped */
}

/* The trace's id of its current agent's function id, or 0 when none names it. */
static inline uint32_t trace_id(const struct session_process *p, uint32_t agent_id)
{
	uint32_t local = func_registry_session_id(&p->funcs, agent_id);

	return local < p->n_trace_ids ? p->trace_ids[local] : 0;
}

/* Names every thread the running process has now (later ones come from perf COMM and the agent). */
void session_process_describe_threads(struct session_process *p)
{
	char path[96], name[64];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)p->pid);
	dir = opendir(path);
	while (dir && (d = readdir(dir))) {
		int tid = atoi(d->d_name);
		FILE *f;

		if (tid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", (int)p->pid, tid);
		f = fopen(path, "re");
		if (f && fgets(name, sizeof(name), f)) {
			name[strcspn(name, "\n")] = '\0';
			if (tid == p->pid)
				perfetto_writer_process(p->s->writer, p->trace_proc, name);
			perfetto_writer_thread(p->s->writer, p->trace_proc, tid, name);
		}
		if (f)
			fclose(f);
	}
	if (dir)
		closedir(dir);
}

/*
 * /proc/PID is p's: no newer process of its pid in the session, and the
 * start time p was found with (a pid reused behind profd's back is another
 * process, whose command line would be written as p's).
 */
static bool proc_is_still(const struct session_process *p)
{
	return session_process_find(p->s, p->pid) == p &&
	       (!p->start_time || access_start_time(p->pid) == p->start_time);
}

/*
 * Its parent and command line into the trace (the importer's parent link),
 * and its pid in its own PID namespace where that differs: when it is found,
 * and again when it runs another program. Nothing when it is gone already
 * (its name and pid stay). cmdline: what its agent read of its own (a
 * hello), else NULL: /proc's, which may be another process's by then if
 * the pid was reused.
 */
static void describe(struct session_process *p, const uint8_t *cmdline, size_t len,
		     bool just_found)
{
	char path[64], buf[4096];
	ssize_t n = 0;
	pid_t ns_pid;
	int fd;

	if (cmdline && len) {
		n = (ssize_t)(len < sizeof(buf) ? len : sizeof(buf));
		memcpy(buf, cmdline, (size_t)n);
	} else if (just_found || proc_is_still(p)) {
		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)p->pid);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0) {
			n = read(fd, buf, sizeof(buf));
			close(fd);
		}
		if (!proc_is_still(p)) /* reused while it was read: not p's */
			n = 0;
	}
	if (n > 0 && p->ppid > 0)
		perfetto_writer_process_detail(p->s->writer, p->trace_proc, p->ppid, buf, (size_t)n);
	/* a process's pid namespace is for life: read once (exec and hello describe it again) */
	if (!p->ns_pid_read) {
		ns_pid = pid_ns_own_pid(p->pid);
		p->ns_pid = ns_pid > 0 ? ns_pid : 0;
		p->ns_pid_read = ns_pid >= 0; /* else gone, or not readable now */
	}
	ns_pid = p->ns_pid;
	if (ns_pid) /* 0 also when gone: its label stays */
		perfetto_writer_process_ns_pid(p->s->writer, p->trace_proc, ns_pid);
}

void session_process_describe_with(struct session_process *p, const uint8_t *cmdline, size_t len)
{
	describe(p, cmdline, len, false);
}

void session_process_describe_detail(struct session_process *p)
{
	describe(p, NULL, 0, false);
}

void session_process_describe_found(struct session_process *p)
{
	/* its start time was read this moment: the check after the read still stands */
	describe(p, NULL, 0, true);
}

/*
 * Its symbolizer (and DWARF unwinder, unless frame pointers were asked for)
 * and, with sampling, the pipeline its samples go through. load_maps: the
 * process runs already, its mappings come from /proc (else from MMAP2
 * records). 0, or -ENOMEM (sampling then stays off for it).
 */
int session_process_start_symbols(struct session_process *p, const struct session_process *parent,
				  bool load_maps, bool sampling)
{
	struct session *s = p->s;
	char *maps = NULL;
	size_t maps_len = 0;

	p->symbols = symbolizer_new(p->pid);
	if (!p->symbols)
		return -ENOMEM;
	symbolizer_share_modules(p->symbols, s->modules);
	/* read once for the symbolizer and the unwinder (its own read was 5 % of profd's CPU) */
	if (load_maps && !(parent && parent->symbols) &&
	    !proc_maps_text_read(p->pid, &maps, &maps_len))
		symbolizer_load_maps_text(p->symbols, maps, maps_len);
	else if (parent && parent->symbols)
		symbolizer_copy_mappings(p->symbols, parent->symbols);
	if (sampling && s->call_graph != CALL_GRAPH_FP) { /* most of Debian has no frame pointers */
		p->unwinder = dwarf_unwinder_new(p->pid);
		if (p->unwinder)
			dwarf_unwinder_share_files(p->unwinder, s->unwind_files);
		if (p->unwinder && parent && parent->unwinder)
			dwarf_unwinder_copy_modules(p->unwinder, parent->unwinder);
		else if (p->unwinder && load_maps && (maps || !proc_maps_text_read(p->pid, &maps,
											&maps_len)))
			dwarf_unwinder_load_maps_text(p->unwinder, maps, maps_len);
	}
	free(maps);
	if (!sampling)
		return 0;
	p->samples_out = sample_pipeline_new(&(struct sample_pipeline_config){
		.target = p->pid, .writer = s->writer, .symbols = p->symbols,
		.unwinder = p->unwinder, .demangled = s->demangled, .calls = p->calls,
		.stubs = p->stubs, .kernel = session_kernel_symbols, .kernel_ctx = s,
		.kernel_pending = session_kernel_symbols_pending,
		.agent_expected = !s->attach_mode && s->n_patterns > 0 });
	return p->samples_out ? 0 : -ENOMEM;
}

void session_process_sample(struct session_process *p, const struct sampler_sample *smp)
{
	if (p->samples_out && !p->retired)
		sample_pipeline_add(p->samples_out, smp);
}

void session_process_retire(struct session_process *p)
{
	if (p->samples_out) /* what it holds goes out now, with its symbols */
		sample_pipeline_trim(p->samples_out);
	p->retired = true;
	active_unlink(p);
	dwarf_unwinder_free(p->unwinder);
	p->unwinder = NULL;
	symbolizer_free(p->symbols);
	p->symbols = NULL;
	/* no agent, so no events: a later hello (an exec's) makes another, and clears these */
	event_decoder_free(p->decoder);
	p->decoder = NULL;
	call_stacks_clear(p->calls);
}

void session_process_mmap(struct session_process *p, const struct sampler_mmap *m)
{
	if (!(m->prot & PROT_EXEC) || !p->symbols)
		return;
	symbolizer_add_mapping_id(p->symbols, m->start, m->start + m->len, m->pgoff, m->filename,
				  makedev(m->maj, m->min), m->ino); /* 0 and 0: not known */
	if (p->unwinder)
		dwarf_unwinder_add_mapping_id(p->unwinder, m->start, m->start + m->len, m->pgoff,
					      m->filename,
					      &(struct unwind_file_id){
						      (uint64_t)m->maj << 32 | m->min, m->ino });
}

void session_process_comm(struct session_process *p, uint32_t tid, const char *comm)
{
	struct thread_slot *t = process_thread(p, tid);

	if (t)
		t->named_by_kernel = 1;
	if ((pid_t)tid == p->pid) { /* an exec, or its first name: what it runs now */
		/* read for its agent's hello: the hello's word on the program follows */
		bool hello_next = p->pid == p->s->hello_pid;

		snprintf(p->comm, sizeof(p->comm), "%s", comm);
		if (!p->agent_seen && !hello_next)
			session_process_check_program(p);
		perfetto_writer_process(p->s->writer, p->trace_proc, comm);
		if (!hello_next)
			session_process_describe_detail(p);
	}
	perfetto_writer_thread(p->s->writer, p->trace_proc, (pid_t)tid, comm);
	if (p->samples_out) /* the agent's thread: its samples are profiling overhead */
		sample_pipeline_thread_named(p->samples_out, tid, comm);
}

void session_process_rings_read(struct session_process *p, uint64_t started)
{
	if (p->samples_out && !p->retired) /* a retired one's was flushed, and takes no more */
		sample_pipeline_rings_read(p->samples_out, started);
}

void session_process_tick(struct session_process *p, uint64_t now)
{
	/* an agent that went quiet */
	if (p->samples_out && !p->retired && now > SAMPLE_HOLD_MAX_NS)
		sample_pipeline_release_older(p->samples_out, now - SAMPLE_HOLD_MAX_NS);
}

/* ---- its agent's events ------------------------------------------------------------ */

/*
 * One slice op's arguments as they are built (an event's --args values,
 * then a call's figures): profd's one thread replays, so off the stack.
 * Per op at most 4 figures and EVENT_VALUES_MAX values, a value's text at
 * most VALUE_TEXT_MAX.
 */
#define OP_ARGS_MAX (4 + EVENT_VALUES_MAX)
#define VALUE_TEXT_MAX (EVENT_STR_BYTES_MAX + 32)
struct op_args {
	struct perfetto_arg *arg;  /* where the next one goes */
	char *text; /* values shown as text (a cut or invalid string, an enum), in op_text */
	const struct auto_args_names *names; /* --auto-args: the process's DWARF descriptions */
};
static struct perfetto_arg op_arg[OP_ARGS_MAX];
static char op_text[EVENT_VALUES_MAX * VALUE_TEXT_MAX];

/* "arg1".."arg16", "fparg1".."fparg8", "retval": the perfetto_arg names are literals. */
static const char *value_name(const struct arg_item *it)
{
	static const char *const ints[] = { "arg0", "arg1", "arg2", "arg3", "arg4", "arg5",
					    "arg6", "arg7", "arg8", "arg9", "arg10", "arg11",
					    "arg12", "arg13", "arg14", "arg15", "arg16" };
	static const char *const fps[] = { "fparg0", "fparg1", "fparg2", "fparg3", "fparg4",
					   "fparg5", "fparg6", "fparg7", "fparg8" };

	_Static_assert(sizeof(ints) / sizeof(ints[0]) == ARG_INT_INDEX_MAX + 1, "every argN");
	_Static_assert(sizeof(fps) / sizeof(fps[0]) == ARG_FP_INDEX_MAX + 1, "every fpargN");
	if (it->source == ARG_SRC_INT)
		return ints[it->index];
	return it->source == ARG_SRC_FP ? fps[it->index] : "retval";
}

/* A string value as the slice shows it: cut ones end in "...", unreadable ones say so. */
static void string_arg(struct op_args *r, struct perfetto_arg *a, const struct decoded_value *v)
{
	int n;

	if (!(v->str_flags & (EVENT_STR_CUT | EVENT_STR_INVALID))) {
		a->str = (const char *)v->str;
		a->str_len = v->str_len;
		return;
	}
	if (v->str_flags & EVENT_STR_INVALID)
		n = snprintf(r->text, VALUE_TEXT_MAX, "<unreadable 0x%" PRIx64 ">", v->value);
	else
		n = snprintf(r->text, VALUE_TEXT_MAX, "%.*s...", (int)v->str_len, (const char *)v->str);
	a->str = r->text;
	a->str_len = (uint32_t)n;
	r->text += n;
}

/*
 * --auto-args: the parameter's own name, an enum by its enumerators (as
 * text); false when DWARF did not describe the value (the item names it).
 */
static bool described_arg(struct op_args *r, struct perfetto_arg *a, uint32_t func_id,
			  const struct decoded_value *v)
{
	const struct dwarf_value *dv = auto_args_value(r->names, func_id, &v->item);

	if (!dv)
		return false;
	if (dv->name)
		a->name = dv->name;
	if (v->item.cls == ARG_CLASS_ENUM) {
		a->type = PERFETTO_ARG_STRING;
		a->str = r->text;
		a->str_len = (uint32_t)auto_args_enum_text(dv, v->value, r->text, VALUE_TEXT_MAX);
		r->text += a->str_len;
		return true;
	}
	return false;
}

/* An event's --args/--retval values as slice arguments at r->arg (which moves past them). */
static void values_to_args(struct op_args *r, uint32_t func_id, const struct decoded_value *vals,
			   uint32_t n_values)
{
	for (uint32_t i = 0; i < n_values; i++) {
		const struct decoded_value *v = &vals[i];
		struct perfetto_arg *a = r->arg++;
		float f;

		*a = (struct perfetto_arg){ .name = value_name(&v->item), .value = v->value };
		if (r->names && described_arg(r, a, func_id, v))
			continue;
		switch (v->item.cls) {
		case ARG_CLASS_INT: a->type = PERFETTO_ARG_INT; break;
		case ARG_CLASS_HEX: case ARG_CLASS_PTR: a->type = PERFETTO_ARG_POINTER; break;
		case ARG_CLASS_BOOL: a->type = PERFETTO_ARG_BOOL; break;
		case ARG_CLASS_FLOAT:
			a->type = PERFETTO_ARG_DOUBLE;
			if (v->item.size == 4) { /* shown as the double it widens to */
				uint32_t bits = (uint32_t)v->value;
				double d;

				memcpy(&f, &bits, sizeof(f));
				d = f;
				memcpy(&a->value, &d, sizeof(d));
			}
			break;
		case ARG_CLASS_CHAR:
			a->type = PERFETTO_ARG_STRING;
			r->text[0] = (char)v->value;
			a->str = r->text++;
			a->str_len = 1;
			break;
		case ARG_CLASS_STR: a->type = PERFETTO_ARG_STRING; string_arg(r, a, v); break;
		default: break; /* UINT, ENUM (by number until --auto-args names it) */
		}
	}
}

/*
 * A call returned (done: its frame, NULL when none was open): the figures
 * its END carries, after its values at r->arg: the samples it took as the
 * innermost call (sampled: the process is) and, when the thread was
 * switched out during it, its on-CPU and off-CPU time (a slice without them
 * ran throughout, if the trace has scheduler states).
 */
static inline __attribute__((always_inline)) void
end_figures(struct sched_session *sched, const struct sched_func_sums *sums, struct op_args *r,
	    uint64_t ts, uint32_t func_id, const struct call_frame *done,
	    struct offcpu_thread *clock, bool sampled)
{
	if (done && sched) {
		struct offcpu_time now = offcpu_thread_before(clock, ts);
		struct offcpu_time in = { now.off_ns - done->off_at_enter.off_ns,
					  now.runnable_ns - done->off_at_enter.runnable_ns };
		uint64_t dur = ts >= done->enter_ts ? ts - done->enter_ts : 0;

		/* a clock behind its value at enter was forgotten meanwhile: no figure */
		if (now.off_ns < done->off_at_enter.off_ns ||
		    now.runnable_ns < done->off_at_enter.runnable_ns)
			goto end;
		if (func_id < sums->n_funcs)
			sched_func_add(&sums->funcs[func_id], dur, &in);
		else
			sched_session_call(sched, func_id, dur, &in);
		if (__builtin_expect(in.off_ns != 0, 0)) {
			if (in.off_ns > dur) /* its enter and the switches: two clocks, one order */
				in.off_ns = dur;
			*r->arg++ = (struct perfetto_arg){ "on_cpu_ns", dur - in.off_ns };
			*r->arg++ = (struct perfetto_arg){ "off_cpu_ns", in.off_ns };
			*r->arg++ = (struct perfetto_arg){ "runnable_ns", in.runnable_ns };
		}
	}
end:
	if (sampled && done && done->self_samples)
		*r->arg++ = (struct perfetto_arg){ "self_samples", done->self_samples };
}

/*
 * A call entered: its frame, filled in place (NULL calls, or refused: not
 * replayed); without samples only what its end reads.
 */
static inline void push_frame(struct call_thread *calls, uint32_t func_id, uint64_t ret,
			      uint64_t slot, uint64_t ts, struct offcpu_thread *clock, bool sampled)
{
	/* NULL: out of memory or too deep, the call is not replayed (as call_stacks_enter) */
	struct call_frame *f = !calls ? NULL : sampled ? call_thread_push(calls) :
							call_thread_push_unsampled(calls);

	if (f) {
		f->func_id = func_id;
		f->enter_ts = ts;
		f->off_at_enter = offcpu_thread_before(clock, ts);
		/* should sampling start while it is open: no samples yet, a slot none has */
		f->self_samples = 0;
		f->return_slot = 0;
		if (sampled) {
			f->return_address = ret;
			f->return_slot = slot;
			call_thread_pushed(calls, f);
		}
	}
}

static inline const struct call_frame *pop_frame(struct call_thread *calls, uint32_t func_id,
						 bool sampled)
{
	if (!calls)
		return NULL;
	return sampled ? call_thread_exit(calls, func_id) : call_thread_exit_unsampled(calls, func_id);
}

/*
 * The writer's cursor as on_chunk holds it: in memory for the out-of-line
 * calls (cur, out), and copied to locals that never escape for the inline
 * ones (the buffer's stores would have anything in memory reloaded after
 * each): the position they change in registers.
 */
struct replay_writer {
	struct perfetto_slice_cursor cur;
	struct perfetto_slice_pos out;
	bool ok;
};

/*
 * A slice op the cursor did not write inline, with the arguments built at
 * op_arg; at: on_chunk's position, in and out.
 */
static void slow_op(struct replay_writer *rw, struct perfetto_slice_pos *at, uint64_t ts,
		    uint32_t func_id, const struct op_args *r)
{
	struct perfetto_slice_op op = { .ts = ts, .func_id = func_id,
					.n_args = (uint32_t)(r->arg - op_arg) };

	if (!rw->ok)
		return;
	rw->out = *at;
	perfetto_slice_cursor_op(&rw->cur, &rw->out, &op, op_arg);
	*at = rw->out;
}

#define REPLAY_AHEAD 128
#define PLAIN_FUNCS 8 /* functions replay_plain keeps looked up (a power of two) */

/* A function met by replay_plain, by its agent id: its trace id, BEGIN tail and sums. */
struct plain_func {
	uint32_t agent_id, func_id;
	uint64_t tail;
	struct sched_func_time *sum;
	uint32_t *hist; /* its calls' duration buckets on this thread (NULL: no memory) */
};

/*
 * What replay_plain changes of a chunk's replay, in and out: the thread's
 * stack (calls: never NULL), its clock (NULL: it never switched) and the
 * scheduler's per-function sums (NULL: no scheduler states), the writer's
 * cursor (read only) and position.
 */
struct plain_run {
	/*
	 * The functions met: ids, BEGIN tail (0: no inline BEGIN), sums, by
	 * agent id (agent id 0, the entries' first tag, has no trace id). In
	 * memory, not in registers: a loop's functions alternate, and the
	 * registers of one cached function were spilled anyway. Forgotten
	 * (stale: before the next call) whenever replay_chunk replays an
	 * event itself (a name it defines changes the tails, a function it
	 * adds moves the sums).
	 */
	struct plain_func funcs[PLAIN_FUNCS];
	bool stale;
	struct call_thread *calls;
	struct offcpu_thread *clock;
	const struct sched_func_sums *sums;
	const struct perfetto_slice_cursor *cur;
	struct perfetto_slice_pos at;
	uint64_t last_ts, events;
	uint64_t sample_due; /* a sampled process's: its samples up to here go first */
	uint32_t tid;
	uint64_t ticks_q32;  /* the agent's ticks in 2^32 ns: its histogram's buckets */
};

/*
 * The usual events of a process, ev[i] to ev[n - 1], replayed as
 * replay_chunk would, up to the first that needs more: a function with
 * no trace id, an exit whose frame is not on top, a call switched out or
 * sampled as the innermost (its END has figures), a stack to grow, a
 * packet the cursor does not write inline, samples due before it (sampled:
 * the frames keep their return addresses, the recent slots and the last
 * exited frame, which samples read). Returns where it stopped: replay_chunk does that event,
 * from the state as it was before it (nothing of a stopped event is
 * changed: a clock read twice at one time reads the same). A loop of its
 * own, its state a few locals: in replay_chunk's loop, beside the slow
 * paths, they lived on the stack (192.7 -> 145.6 instructions per event on
 * a replay, bench/README.md).
 */
static inline __attribute__((always_inline)) size_t
plain_loop(const struct session_process *p, struct plain_run *run, const struct event_plain *ev,
	   size_t i, size_t n, const bool sched, const bool sampled)
{
	/* a copy: the buffer's stores had its fields reloaded after each */
	const struct perfetto_slice_cursor cur_copy = *run->cur, *cur = &cur_copy;
	struct perfetto_slice_pos at = run->at;
	struct call_thread *calls = run->calls;
	struct call_frame *frames = calls->frames;
	const uint32_t depth0 = calls->depth, packets0 = at.packets, at_depth0 = at.depth;
	/*
	 * The stack's depth and the track's move together here: one count,
	 * with the bounds of both. A frame pops above floor (the track's
	 * depth stays over 0; no END inline while BEGINs are clamped), one
	 * pushes below ceil (room in the stack, the track under its limit).
	 */
	const uint32_t floor = cur->clamped ? UINT32_MAX :
			       depth0 > at_depth0 ? depth0 - at_depth0 : 0;
	const uint32_t ceil = PERFETTO_MAX_SLICE_DEPTH - at_depth0 < calls->capacity - depth0 ?
				      depth0 + PERFETTO_MAX_SLICE_DEPTH - at_depth0 :
				      calls->capacity;
	struct offcpu_thread *clock = run->clock;
	const size_t start = i;
	uint32_t depth = depth0;
	uint64_t last_ts = run->last_ts;
	struct plain_func *funcs = run->funcs;
	/* a sampled stack's recent slots come with its first push (call_thread_push_slow) */
	const bool recent = sampled && calls->recent;
	const uint64_t sample_due = run->sample_due;

	assert(at_depth0 <= PERFETTO_MAX_SLICE_DEPTH && depth0 <= calls->capacity);
	for (; i < n; i++) {
		uint64_t ts = ev[i].mono_ns > last_ts ? ev[i].mono_ns : last_ts;
		struct plain_func *fn = &funcs[ev[i].func_id % PLAIN_FUNCS];
		uint32_t func_id;

		if (sampled && ts > sample_due)
			break;

		if (fn->agent_id != ev[i].func_id) {
			fn->agent_id = ev[i].func_id;
			fn->func_id = trace_id(p, fn->agent_id);
			fn->tail = fn->func_id ? perfetto_slice_begin_tail(cur, fn->func_id) : 0;
			if (sched)
				fn->sum = fn->func_id < run->sums->n_funcs ?
						  &run->sums->funcs[fn->func_id] : NULL;
			fn->hist = event_hists_get(p->hists, run->tid, fn->agent_id);
		}
		if (!(func_id = fn->func_id))
			break;
		if (ev[i].kind == EVENT_EXIT) {
			const struct call_frame *done;

			if (depth <= floor || frames[depth - 1].func_id != func_id)
				break;
			done = &frames[depth - 1];
			if (sampled && done->self_samples)
				break;
			if (sched) {
				/* switched out during the call: its END has figures */
				struct offcpu_time now = offcpu_thread_before(clock, ts);

				if (now.off_ns != done->off_at_enter.off_ns ||
				    now.runnable_ns < done->off_at_enter.runnable_ns || !fn->sum)
					break;
			}
			if (!perfetto_slice_emit(cur, &at, ts, cur->tail_end, 6))
				break;
			if (fn->hist) /* the agent leaves the bucket of a recorded call to us */
				fn->hist[event_hist_bucket(ts - done->enter_ts, run->ticks_q32)]++;
			if (sched) /* sched_func_add of a call never switched out */
				fn->sum->calls++;
			if (sampled) /* as call_thread_exit */
				call_thread_exited(calls, done);
			depth--;
		} else {
			struct call_frame *f = &frames[depth];
			/* without scheduler states the thread has no clock */
			struct offcpu_time off = sched ? offcpu_thread_before(clock, ts) :
							 (struct offcpu_time){ 0 };

			if (depth >= ceil || !fn->tail || (sampled && !recent) ||
			    !perfetto_slice_emit(cur, &at, ts, fn->tail, 8))
				break;
			f->func_id = func_id;
			f->enter_ts = ts;
			f->off_at_enter = off;
			f->self_samples = 0;
			f->return_slot = 0;
			if (sampled) { /* as push_frame */
				f->return_address = ev[i].return_address;
				f->return_slot = ev[i].return_slot;
				call_thread_pushed(calls, f);
			}
			depth++;
		}
		last_ts = ts;
	}
	/* one packet per event replayed: emit's own counts are dead */
	at.packets = packets0 + (uint32_t)(i - start);
	at.depth = at_depth0 + depth - depth0;
	calls->depth = depth;
	run->at = at;
	run->last_ts = last_ts;
	run->events += i - start;
	return i;
}

/* plain_loop made four times: with scheduler states or without, for a sampled process or not. */
static __attribute__((noinline)) size_t replay_plain(const struct session_process *p,
						    struct plain_run *run,
						    const struct event_plain *ev, size_t i,
						    size_t n, bool sampled)
{
	if (sampled)
		return run->sums ? plain_loop(p, run, ev, i, n, true, true) :
				   plain_loop(p, run, ev, i, n, false, true);
	return run->sums ? plain_loop(p, run, ev, i, n, true, false) :
			   plain_loop(p, run, ev, i, n, false, false);
}

/*
 * One EVENTS chunk of a thread, read event by event and replayed at once:
 * decoded, its call stack entered or left, its slice written, without an
 * array of events or ops in between (profd's hot path: tens of M events/s).
 * The thread's slot, clock, stack and track are looked up once per chunk:
 * no switch is drained and no sample added while a frame is decoded.
 */
static inline __attribute__((always_inline)) int
replay_chunk(struct session_process *p, uint32_t tid, struct event_reader *rd, const bool sampled)
{
	struct session *s = p->s;
	struct thread_slot *t = process_thread(p, tid);
	uint64_t last_ts = t ? t->last_ts : 0;
	struct offcpu_thread *clock = s->sched ? sched_session_clock(s->sched, tid) : NULL;
	struct call_thread *calls = call_stacks_thread(p->calls, tid);
	/* in locals: the stores below through pointers would make them reloaded per event */
	struct sample_pipeline *samples = p->samples_out;
	struct sched_session *sched = s->sched;
	const struct sched_func_sums *sums = sched ? sched_session_sums(sched) : NULL;
	uint64_t sample_due = sampled ? sample_pipeline_thread_due(samples, tid) : UINT64_MAX;
	uint32_t last_agent_id = 0, last_func_id = 0, hist_agent_id = 0;
	uint64_t events = 0, invalid = 0, with_values = 0, values = 0;
	const uint64_t ticks_q32 =
		event_hists_ticks_per_ns_q32(event_decoder_ticks_to_ns(p->decoder, 1ull << 32));
	uint32_t *hist = NULL;
	struct decoded_value vals[EVENT_VALUES_MAX];
	struct replay_writer rw;
	struct perfetto_slice_cursor cur;
	struct perfetto_slice_pos at;
	struct op_args r = { op_arg, op_text, p->auto_names };
	/*
	 * Events decoded a few ahead: a slice's packet length hangs on its
	 * timestamp (a delta of one or two bytes), and the buffer's next one on
	 * that length; converted there, each TSC's two dependent multiplies are
	 * off that chain (4 KiB, in L1; 32 at a time cost each loop's set-up
	 * and its end's stores per 32 events, 128 about 1.5 instructions per
	 * event less).
	 */
	struct event_plain ahead[REPLAY_AHEAD];
	struct plain_run run;
	bool plain = false; /* replay_plain may take the batch's next events */
	size_t n_ahead = 0, next = 0;
	int err = 0;

	rw.ok = perfetto_slice_cursor_open(s->writer, p->trace_proc, (pid_t)tid, &rw.cur,
					   &rw.out) == 0;
	cur = rw.cur;
	at = rw.out;
	run = (struct plain_run){ .stale = true, .calls = calls, .clock = clock, .sums = sums,
				  .cur = &rw.cur, .tid = tid, .ticks_q32 = ticks_q32 };
	for (;;) {
		struct event_plain e;
		struct decoded_event ev;
		uint32_t func_id, n_values = 0;

		if (next == n_ahead) {
			/* an unsampled process's frames hold no return address (push_frame) */
			n_ahead = sampled ? event_reader_plain(rd, ahead, REPLAY_AHEAD) :
					    event_reader_calls(rd, ahead, REPLAY_AHEAD);
			next = 0;
			plain = calls && rw.ok;
		}
		/*
		 * Not while the cursor writes nothing inline (a flight recorder's
		 * ring), nor again in this batch once it took no event: each
		 * call that stops at once costs a hundred instructions.
		 */
		if (plain && rw.cur.lim && next < n_ahead) {
			size_t from = next;

			if (run.stale) {
				memset(run.funcs, 0, sizeof(run.funcs));
				run.stale = false;
			}
			run.at = at;
			run.last_ts = last_ts;
			run.events = events;
			run.sample_due = sample_due;
			next = replay_plain(p, &run, ahead, next, n_ahead, sampled);
			at = run.at;
			last_ts = run.last_ts;
			events = run.events;
			if (next == n_ahead)
				continue;
			plain = next > from;
		}
		run.stale = true; /* replayed here */
		if (next < n_ahead) {
			e = ahead[next++];
		} else { /* values, long varints, a new clock segment, the end */
			if ((err = event_reader_next(rd, &ev, vals)) <= 0)
				break;
			e = (struct event_plain){ ev.mono_ns, ev.return_address, ev.return_slot,
						  ev.func_id, ev.kind };
			n_values = ev.n_values;
		}
		if (e.func_id != last_agent_id) { /* runs of one function: loops, recursion */
			last_agent_id = e.func_id;
			last_func_id = trace_id(p, e.func_id);
		}
		func_id = last_func_id;
		if (!func_id) {
			invalid++;
			continue;
		}
		if (e.mono_ns < last_ts) /* slices on one thread never go back in time */
			e.mono_ns = last_ts;
		last_ts = e.mono_ns;
		events++;
		/* samples taken before this event see the calls open before it */
		if (sampled && e.mono_ns > sample_due) {
			rw.out = at;
			if (rw.ok)
				perfetto_slice_cursor_close(&rw.cur, &rw.out); /* they are written too */
			sample_pipeline_thread_reached(samples, tid, e.mono_ns);
			sample_due = sample_pipeline_thread_due(samples, tid);
			rw.ok = perfetto_slice_cursor_open(s->writer, p->trace_proc, (pid_t)tid,
							   &rw.cur, &rw.out) == 0;
			cur = rw.cur;
			at = rw.out;
		}
		r.arg = op_arg;
		if (__builtin_expect(n_values != 0, 0)) {
			r.text = op_text;
			with_values += e.kind == EVENT_ENTER;
			values += n_values;
			values_to_args(&r, func_id, vals, n_values);
		}
		if (e.kind == EVENT_EXIT) {
			const struct call_frame *done = pop_frame(calls, func_id, sampled);

			if (done && (hist_agent_id != e.func_id || !hist)) {
				hist_agent_id = e.func_id;
				hist = event_hists_get(p->hists, tid, e.func_id);
			}
			if (done && hist) /* the agent leaves the bucket of a recorded call to us */
				hist[event_hist_bucket(e.mono_ns - done->enter_ts, ticks_q32)]++;
			if (sched || sampled)
				end_figures(sched, sums, &r, e.mono_ns, func_id, done, clock, sampled);
			if (r.arg == op_arg && perfetto_slice_end(&cur, &at, e.mono_ns))
				continue;
			slow_op(&rw, &at, e.mono_ns, 0, &r);
		} else {
			push_frame(calls, func_id, e.return_address, e.return_slot, e.mono_ns, clock,
				   sampled);
			if (r.arg == op_arg && perfetto_slice_begin(&cur, &at, e.mono_ns, func_id))
				continue;
			slow_op(&rw, &at, e.mono_ns, func_id, &r);
		}
		cur = rw.cur; /* reloaded by the op */
	}
	rw.out = at;
	if (rw.ok)
		perfetto_slice_cursor_close(&rw.cur, &rw.out);
	p->calls_with_args += with_values;
	p->args_recorded += values;
	p->events += events;
	p->events_invalid += invalid;
	if (t)
		t->last_ts = last_ts;
	return err;
}

/* replay_chunk made twice: for a process sampled or not (most of a frame's work is for samples). */
static int on_chunk(void *ctx, uint32_t tid, struct event_reader *rd)
{
	struct session_process *p = ctx;

	return p->samples_out ? replay_chunk(p, tid, rd, true) : replay_chunk(p, tid, rd, false);
}

static void on_watermark(void *ctx, uint64_t ts)
{
	struct session_process *p = ctx;

	if (p->samples_out)
		sample_pipeline_watermark(p->samples_out, ts);
	if (p->s->sched)
		sched_session_watermark(p->s->sched, ts);
}

/* Its samples are all read (before this frame): they are written with its calls, then forgotten. */
static void on_thread_exit(void *ctx, uint32_t tid)
{
	struct session_process *p = ctx;

	if (p->samples_out)
		sample_pipeline_thread_reached(p->samples_out, tid, UINT64_MAX);
	call_stacks_thread_gone(p->calls, tid);
	if (p->s->sched)
		sched_session_thread_gone(p->s->sched, tid);
}

static void on_thread_name(void *ctx, uint32_t tid, const char *name)
{
	struct session_process *p = ctx;
	struct thread_slot *t = process_thread(p, tid);

	if (t && t->named_by_kernel)
		return;
	perfetto_writer_thread(p->s->writer, p->trace_proc, (pid_t)tid, name);
}

static void on_drops(void *ctx, uint32_t tid, uint64_t drops, uint64_t ts)
{
	struct session_process *p = ctx;
	struct thread_slot *t = process_thread(p, tid);

	if (!t || drops <= t->drops)
		return;
	p->drops += drops - t->drops;
	t->drops = drops;
	perfetto_writer_counter(p->s->writer, p->trace_proc, "dropped events", ts, (int64_t)p->drops);
}

/* The rate of durations in the stream so far: aggregates come in TSC ticks. */
static double process_ns_per_tick(const struct session_process *p)
{
	return (double)event_decoder_ticks_to_ns(p->decoder, 1ull << 32) / 4294967296.0;
}

static void on_func_agg(void *ctx, uint32_t tid, const struct decoded_func_agg *fa)
{
	struct session_process *p = ctx;
	uint32_t func_id = trace_id(p, fa->func_id);
	uint64_t counted[AGG_BUCKETS] = { 0 };

	if (!func_id) {
		p->events_invalid++;
		return;
	}
	/* with the buckets its events gave since its last figures (event_hist.h) */
	if (func_stats_update(p->stats, tid, func_id, fa, process_ns_per_tick(p)) ||
	    (event_hists_take(p->hists, tid, fa->func_id, counted) &&
	     func_stats_add_buckets(p->stats, tid, func_id, fa->func_id, counted)))
		session_error(p->s, "%s", "out of memory for the per-function figures");
}

static void fold_counted(void *ctx, uint32_t tid, uint32_t agent_id, const uint64_t *counts)
{
	struct session_process *p = ctx;
	uint32_t func_id = trace_id(p, agent_id);

	if (func_id && func_stats_add_buckets(p->stats, tid, func_id, agent_id, counts))
		session_error(p->s, "%s", "out of memory for the per-function figures");
}

/*
 * The buckets counted from events that no figures of the agent's took yet
 * (an agent gone without its last figures, or about to be replaced: its ids
 * go with it).
 */
static void fold_all_counted(struct session_process *p)
{
	event_hists_take_all(p->hists, fold_counted, p);
}

static void on_thread_drops(void *ctx, uint32_t tid, const struct decoded_thread_drops *td)
{
	struct session_process *p = ctx;

	func_stats_thread_drops(p->stats, tid, td);
}

static uint32_t on_map_tid(void *ctx, uint32_t agent_tid)
{
	struct session_process *p = ctx;

	return pid_ns_map_host_tid(p->pid_ns, agent_tid);
}

static const struct event_decoder_callbacks decoder_cb = {
	.map_tid = on_map_tid,
	.chunk = on_chunk,
	.func_agg = on_func_agg,
	.thread_drops = on_thread_drops,
	.watermark = on_watermark,
	.thread_exit = on_thread_exit,
	.thread_name = on_thread_name,
	.drops = on_drops,
};

/*
 * c is its agent from now on (a new one after an exec starts its own zstd
 * stream, clock and stacks). 0, or -ENOMEM.
 */
int session_process_agent_hello(struct session_process *p, struct conn *c)
{
	/*
	 * An exec's new agent: what the old program's left held goes out with
	 * its stubs. The first agent's samples wait for its table (they may be
	 * in its stubs already: it patches before its hello).
	 */
	if (p->samples_out && p->agent_seen)
		sample_pipeline_flush(p->samples_out);
	call_stacks_clear(p->calls);
	stub_map_clear(p->stubs);
	event_decoder_free(p->decoder);
	p->decoder = event_decoder_new();
	if (!p->decoder)
		return -ENOMEM;
	/* in ours (its description read it already): its thread ids are ours */
	if (!p->pid_ns && !(p->ns_pid_read && !p->ns_pid) && (p->pid_ns = pid_ns_map_new(p->pid)))
		server_log("session %" PRIu64 ": PID %d is %d in its own PID namespace: thread ids "
			   "translated", p->s->id, (int)p->pid, (int)pid_ns_map_ns_pid(p->pid_ns));
	p->agent = c;
	p->agent_seen = 1;
	/* it patches before its table arrives: samples wait for the table and the events */
	if (p->samples_out)
		sample_pipeline_set_agent(p->samples_out, true, 0);
	fold_all_counted(p); /* under the old agent's ids */
	func_registry_new_agent(&p->funcs);
	func_stats_new_agent(p->stats);
	p->auto_names = NULL; /* its program asks again (a fork's: its parent's, see session.c) */
	p->agent_said_goodbye = 0;
	return 0;
}

/* Its local id -> the trace's, by name: a function forked or exec'd again keeps its trace id. */
static void function_named(void *ctx, uint32_t id, const Profd__InstrumentedFunction *f)
{
	struct session_process *p = ctx;

	if (f->stub)
		stub_map_add(p->stubs, f->stub, f->address, f->stub_same_offsets);
	if (id >= p->n_trace_ids) {
		uint32_t n = id * 2 + 16;
		uint32_t *grown = realloc(p->trace_ids, n * sizeof(*grown));

		if (!grown)
			return; /* its events then name no function: counted as invalid */
		memset(grown + p->n_trace_ids, 0, (n - p->n_trace_ids) * sizeof(*grown));
		p->trace_ids = grown;
		p->n_trace_ids = n;
	}
	p->trace_ids[id] = session_func_id(p->s, func_registry_name(&p->funcs, id));
}

/* A table's untimed stubs taken at most (a module has a few: its stack walkers, _exit). */
#define UNTIMED_STUBS_MAX 4096

static void handle_function_table(struct session_process *p, const uint8_t *b, size_t len)
{
	Profd__FunctionTable *t = profd__function_table__unpack(NULL, len, b);

	if (!t || func_registry_add(&p->funcs, t, function_named, p)) {
		session_error(p->s, "%s", "malformed function table from the agent");
		if (t)
			profd__function_table__free_unpacked(t, NULL);
		conn_close_later(p->agent);
		return;
	}
	/* the stubs of functions patched only for their flags: samples are taken there too */
	for (size_t i = 0; i < t->n_untimed_stubs && i < UNTIMED_STUBS_MAX; i++)
		stub_map_add(p->stubs, t->untimed_stubs[i]->stub, t->untimed_stubs[i]->address,
			     t->untimed_stubs[i]->stub_same_offsets);
	/* from now on samples wait for the events that say which calls were open */
	if (p->samples_out)
		sample_pipeline_set_agent(p->samples_out, true, t->exit_trampoline);
}

static void handle_events(struct session_process *p, const uint8_t *b, size_t len, bool raw)
{
	struct session *s = p->s;
	char err[160];
	int r;

	if (!p->funcs.agent_has_table) {
		session_error(s, "%s", "events before the function table");
		conn_close_later(p->agent);
		return;
	}
	/* every sample up to now in hand, so none arrives after the events that pass it */
	if (s->sampler)
		session_read_samples(s);
	/* and every switch: the calls' on/off-CPU clocks must not miss one before them */
	session_sched_drain(p->agent->srv);
	/* the aggregates in it are as of now, within the flusher's cycle (profctl top's rates) */
	func_stats_stamp(p->stats, mono_clock_ns());
	r = raw ? event_decoder_feed_raw(p->decoder, b, len, &decoder_cb, p, err, sizeof(err)) :
		  event_decoder_feed(p->decoder, b, len, &decoder_cb, p, err, sizeof(err));
	if (r) {
		session_error(s, "agent stream: %s", err);
		conn_close_later(p->agent);
	}
}

/*
 * --auto-args: the agent waits (bounded) for the answer before it patches;
 * for a module loaded later it asks after patching, from its flusher.
 */
static void handle_auto_args_query(struct session_process *p, const uint8_t *b, size_t len)
{
	struct session *s = p->s;
	struct auto_args_stats before, after;
	uint8_t *reply = NULL;
	size_t reply_len = 0;
	int err;

	if (!s->auto_args) {
		session_error(s, "%s", "an auto-args query in a session without --auto-args");
		conn_close_later(p->agent);
		return;
	}
	auto_args_get_stats(s->auto_args, &before);
	err = auto_args_answer(s->auto_args, p->pid, b, len, &reply, &reply_len, &p->auto_names);
	if (err) {
		session_error(s, "auto-args query: %s", strerror(-err));
		conn_close_later(p->agent);
		return;
	}
	auto_args_get_stats(s->auto_args, &after);
	server_log("session %" PRIu64 ": auto-args: PID %d: %u of %u functions described by "
		   "DWARF in %.1f ms", s->id, (int)p->pid, after.described - before.described,
		   after.functions - before.functions, (double)(after.ns - before.ns) / 1e6);
	conn_send(p->agent, FRAME_AUTO_ARGS, reply, reply_len);
	free(reply);
}

/* --auto-args installed after patching (a module loaded later): the calls made before. */
static void handle_auto_args_late(struct session_process *p, const uint8_t *b, size_t len)
{
	Profd__AutoArgsLate *late = profd__auto_args_late__unpack(NULL, len, b);

	if (!late || !p->s->auto_args) {
		session_error(p->s, "%s", "malformed auto-args report from the agent");
		if (late)
			profd__auto_args_late__free_unpacked(late, NULL);
		conn_close_later(p->agent);
		return;
	}
	for (size_t i = 0; i < late->n_functions; i++)
		auto_args_late(p->s->auto_args, func_registry_name(&p->funcs, late->functions[i]->id),
			       late->functions[i]->calls_before);
	profd__auto_args_late__free_unpacked(late, NULL);
}

static void handle_goodbye(struct session_process *p, const uint8_t *b, size_t len)
{
	Profd__AgentGoodbye *bye = profd__agent_goodbye__unpack(NULL, len, b);

	if (!bye)
		return; /* its figures are for the summary only: the session goes on */
	if (bye->buffer_budget > p->buffer_budget)
		p->buffer_budget = bye->buffer_budget;
	if (bye->buffer_peak > p->buffer_peak)
		p->buffer_peak = bye->buffer_peak;
	/* "process exit", "process exit (Go runtime.exit)": see agent/agent.c, agent/flusher.c */
	p->agent_said_exit = bye->reason && strncmp(bye->reason, "process exit", 12) == 0;
	p->agent_said_exec = bye->reason && strcmp(bye->reason, "exec") == 0;
	profd__agent_goodbye__free_unpacked(bye, NULL);
}

void session_process_agent_frame(struct session_process *p, uint32_t type, const uint8_t *payload,
				 size_t len)
{
	switch (type) {
	case FRAME_FUNCTION_TABLE:
		handle_function_table(p, payload, len);
		break;
	case FRAME_EVENTS:
	case FRAME_EVENTS_RAW:
		if (p->agent_said_exec) /* the exec failed: the agent records on, its goodbye is to come */
			p->agent_said_goodbye = p->agent_said_exec = false;
		handle_events(p, payload, len, type == FRAME_EVENTS_RAW);
		break;
	case FRAME_AUTO_ARGS_QUERY:
		handle_auto_args_query(p, payload, len);
		break;
	case FRAME_AUTO_ARGS_LATE:
		handle_auto_args_late(p, payload, len);
		break;
	case FRAME_AGENT_GOODBYE:
		p->agent_said_goodbye = 1; /* nothing more will come, whenever its socket closes */
		handle_goodbye(p, payload, len);
		break;
	default:
		session_error(p->s, "unexpected %s frame from the agent", frame_type_name(type));
		conn_close_later(p->agent);
	}
}

void session_process_agent_gone(struct session_process *p)
{
	p->agent = NULL;
	if (p->samples_out) /* no more events: held samples go out with what is known */
		sample_pipeline_set_agent(p->samples_out, false, 0);
}

/*
 * The exact per-function figures, over all threads and per thread, on the
 * process's totals track (the UI shows them as arguments of one event per
 * function, `profctl report` reads them back), at the session's end.
 */
void session_process_write_totals(struct session_process *p, uint64_t ts)
{
	struct session *s = p->s;

	for (int per_thread = 0; per_thread <= 1; per_thread++) {
		struct func_totals *totals = NULL;
		long n = func_stats_totals(p->stats, per_thread, &totals);

		for (long i = 0; i < n; i++) {
			const struct func_totals *t = &totals[i];
			const char *name = session_func_name(s, t->func_id);
			struct perfetto_func_totals out = {
				.name = name ? demangle_cached(s->demangled, name) : "?",
				.tid = t->tid, .calls = t->calls, .exited = t->exited,
				.dropped = t->dropped, .filtered = t->filtered,
				.values_dropped = t->values_dropped,
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
			perfetto_writer_func_totals(s->writer, p->trace_proc, ts, &out);
		}
		free(totals);
		if (n < 0)
			session_error(s, "%s", "out of memory for the per-function figures");
	}
}

/* What it still holds goes into the trace: its held samples, then its figures. */
void session_process_finish(struct session_process *p)
{
	fold_all_counted(p);
	if (p->events_invalid) { /* ids no table named, or kinds we do not know: not written */
		char invalid[32];

		snprintf(invalid, sizeof(invalid), "%" PRIu64, p->events_invalid);
		session_error(p->s, "the agent sent %s events naming no known function", invalid);
	}
	if (p->samples_out)
		sample_pipeline_flush(p->samples_out);
}

/*
 * No PT_INTERP among the program headers: nothing would load LD_PRELOAD.
 * They are read at once (a pread each was a dozen syscalls per process and
 * exec of a tree); e_phentsize is sizeof(Elf64_Phdr), the caller checked.
 */
static bool elf_is_static(int fd, const Elf64_Ehdr *eh)
{
	Elf64_Phdr ph[256];
	size_t n = eh->e_phnum < 256 ? eh->e_phnum : 256;
	ssize_t got = pread(fd, ph, n * sizeof(ph[0]), (off_t)eh->e_phoff);

	for (size_t i = 0; i < n; i++) {
		/* a header the file does not hold whole: as when its pread fell short */
		if (got < (ssize_t)((i + 1) * sizeof(ph[0])))
			return false;
		if (ph[i].p_type == PT_INTERP)
			return false;
	}
	return true;
}

void session_process_check_program(struct session_process *p)
{
	char path[64];
	Elf64_Ehdr eh;
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/exe", (int)p->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG))
		goto out;
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != PROFD_ELF_MACHINE)
		snprintf(p->why_not, sizeof(p->why_not), "another architecture (ELF machine %u)",
			 (unsigned)eh.e_machine);
	else if (eh.e_phentsize == sizeof(Elf64_Phdr) && elf_is_static(fd, &eh))
		snprintf(p->why_not, sizeof(p->why_not), "statically linked (nothing loads the agent)");
	else if (!fstat(fd, &st) && (st.st_mode & (S_ISUID | S_ISGID)))
		snprintf(p->why_not, sizeof(p->why_not), "set-user-ID or set-group-ID (the loader "
			 "ignores LD_PRELOAD)");
	else
		p->why_not[0] = '\0';
out:
	close(fd);
}

uint32_t session_process_functions(const struct session_process *p)
{
	uint32_t n = 0;

	for (size_t i = 0; i < p->funcs.n_tables; i++)
		n += (uint32_t)p->funcs.tables[i]->n_functions;
	return n;
}

uint64_t session_process_samples(const struct session_process *p)
{
	return p->samples_out ? sample_pipeline_written(p->samples_out) : 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * Perfetto trace reader, first pass: splits the file into `0A len` records,
 * decodes each TracePacket with protobuf-c and applies the importer's
 * tokenization rules in file order (sequence validity and CLEARED, defaults,
 * per-sequence interning, track reservation, counter and sample checks).
 * The input is hostile: every length is bounded, every iid may be missing.
 * trace_model.c does the end-of-file pass.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfetto_trace_subset.pb-c.h"
#include "viewer-export/packet_decompress.h"
#include "viewer-export/perfetto_writer.h"
#include "viewer-export/trace_reader_internal.h"

typedef Perfetto__Protos__TracePacket trd_packet;

/* Interned entries of one sequence generation; every table is keyed by iid. */
struct trd_iid_str {
	uint64_t iid;
	const char *s;
};

struct trd_frame {
	uint64_t iid;
	uint64_t function_iid, mapping_iid, rel_pc;
};

struct trd_mapping {
	uint64_t iid;
	size_t off, n;    /* path_string_ids in the sequence's u64 pool */
	const char *path; /* joined path, once resolved */
};

enum { TRD_STACK_NEW, TRD_STACK_OK, TRD_STACK_BAD };

struct trd_stack {
	uint64_t iid;
	size_t off, n;    /* frame_ids in the sequence's u64 pool */
	int state;
	char **frames, **maps; /* resolved once, shared by every sample using it */
};

struct trd_seq {
	uint32_t id; /* key */
	bool valid;  /* seen CLEARED, no loss since */
	bool has_clock, has_track_uuid;
	uint32_t clock_id;
	uint64_t track_uuid;
	/* its sequence-scoped incremental clock (§3.4.4), from a snapshot on it */
	bool incr_valid;
	uint32_t incr_clock;
	uint64_t incr_value;    /* the clock now: deltas accumulate here */
	uint64_t incr_to_trace; /* trace clock - incremental clock, at the snapshot */
	struct pw_table names, functions, paths, build_ids, frames, mappings, stacks;
	uint64_t *pool;
	size_t pool_n, pool_cap;
};

/* ---- sequences ------------------------------------------------------------ */

static void trd_seq_init(struct trd_seq *s)
{
	pw_table_init(&s->names, sizeof(struct trd_iid_str), sizeof(uint64_t));
	pw_table_init(&s->functions, sizeof(struct trd_iid_str), sizeof(uint64_t));
	pw_table_init(&s->paths, sizeof(struct trd_iid_str), sizeof(uint64_t));
	pw_table_init(&s->build_ids, sizeof(struct trd_iid_str), sizeof(uint64_t));
	pw_table_init(&s->frames, sizeof(struct trd_frame), sizeof(uint64_t));
	pw_table_init(&s->mappings, sizeof(struct trd_mapping), sizeof(uint64_t));
	pw_table_init(&s->stacks, sizeof(struct trd_stack), sizeof(uint64_t));
}

/* A new generation: interned data and defaults are wiped (CLEARED). */
static void trd_seq_clear(struct trd_seq *s)
{
	pw_table_clear(&s->names);
	pw_table_clear(&s->functions);
	pw_table_clear(&s->paths);
	pw_table_clear(&s->build_ids);
	pw_table_clear(&s->frames);
	pw_table_clear(&s->mappings);
	pw_table_clear(&s->stacks);
	s->pool_n = 0;
	s->has_clock = s->has_track_uuid = false;
	s->incr_valid = false;
}

static void trd_seq_free(struct trd_seq *s)
{
	pw_table_free(&s->names);
	pw_table_free(&s->functions);
	pw_table_free(&s->paths);
	pw_table_free(&s->build_ids);
	pw_table_free(&s->frames);
	pw_table_free(&s->mappings);
	pw_table_free(&s->stacks);
	free(s->pool);
}

static struct trd_seq *trd_seq_get(struct trd *r, uint32_t id)
{
	struct trd_seq *s;
	bool is_new;

	s = pw_table_get(&r->seqs, &id, &is_new);
	if (!s) {
		r->oom = true;
		return NULL;
	}
	if (is_new)
		trd_seq_init(s); /* starts invalid: packet loss assumed until CLEARED */
	return s;
}

/* Copies n u64s into the sequence pool; returns their offset or SIZE_MAX. */
static size_t trd_pool_add(struct trd *r, struct trd_seq *s, const uint64_t *v, size_t n)
{
	size_t off = s->pool_n;

	while (s->pool_cap - s->pool_n < n)
		if (!trd_reserve(r, (void **)&s->pool, &s->pool_cap, s->pool_cap, sizeof(uint64_t)))
			return SIZE_MAX;
	if (n)
		memcpy(s->pool + off, v, n * sizeof(uint64_t));
	s->pool_n += n;
	return off;
}

/* ---- interned data ---------------------------------------------------------- */

/* Returns the new entry for iid, or NULL when absent (problem) or defined (first wins). */
static void *trd_define(struct trd *r, struct pw_table *t, protobuf_c_boolean has_iid, uint64_t iid,
			const char *what)
{
	bool is_new;
	void *e;

	if (!has_iid || !iid) {
		trd_problem(r, "interned %s without iid (interned_data_tokenizer_errors)", what);
		return NULL;
	}
	e = pw_table_get(t, &iid, &is_new);
	if (!e)
		r->oom = true;
	return is_new ? e : NULL;
}

static void trd_intern_strings(struct trd *r, struct pw_table *t,
			       Perfetto__Protos__InternedString **v, size_t n, const char *what)
{
	size_t i;

	for (i = 0; i < n; i++) {
		struct trd_iid_str *e = trd_define(r, t, v[i]->has_iid, v[i]->iid, what);

		if (e && v[i]->has_str && v[i]->str.data)
			e->s = trd_str(r, v[i]->str.data, v[i]->str.len);
		else if (e)
			e->s = trd_str(r, "", 0);
	}
}

static void trd_intern_names(struct trd *r, struct trd_seq *s, Perfetto__Protos__InternedData *d)
{
	size_t i;

	for (i = 0; i < d->n_event_names; i++) {
		Perfetto__Protos__EventName *en = d->event_names[i];
		struct trd_iid_str *e;

		e = trd_define(r, &s->names, en->has_iid, en->iid, "event name");

		if (e)
			e->s = en->name ? trd_str(r, en->name, strlen(en->name)) : NULL;
	}
}

static void trd_intern_profile(struct trd *r, struct trd_seq *s, Perfetto__Protos__InternedData *d)
{
	size_t i;

	for (i = 0; i < d->n_frames; i++) {
		Perfetto__Protos__Frame *f = d->frames[i];
		struct trd_frame *e = trd_define(r, &s->frames, f->has_iid, f->iid, "frame");

		if (!e)
			continue;
		e->function_iid = f->has_function_name_id ? f->function_name_id : 0;
		e->mapping_iid = f->has_mapping_id ? f->mapping_id : 0;
		e->rel_pc = f->rel_pc;
	}
	for (i = 0; i < d->n_mappings; i++) {
		Perfetto__Protos__Mapping *mp = d->mappings[i];
		struct trd_mapping *e;

		e = trd_define(r, &s->mappings, mp->has_iid, mp->iid, "mapping");

		if (!e)
			continue;
		e->off = trd_pool_add(r, s, mp->path_string_ids, mp->n_path_string_ids);
		e->n = e->off == SIZE_MAX ? 0 : mp->n_path_string_ids;
		e->path = NULL;
	}
	for (i = 0; i < d->n_callstacks; i++) {
		Perfetto__Protos__Callstack *cs = d->callstacks[i];
		struct trd_stack *e = trd_define(r, &s->stacks, cs->has_iid, cs->iid, "callstack");

		if (!e)
			continue;
		e->off = trd_pool_add(r, s, cs->frame_ids, cs->n_frame_ids);
		e->n = e->off == SIZE_MAX ? 0 : cs->n_frame_ids;
		e->state = TRD_STACK_NEW;
	}
}

static void trd_intern(struct trd *r, struct trd_seq *s, Perfetto__Protos__InternedData *d)
{
	/* strings first: a packet may define an entry and what it references */
	trd_intern_names(r, s, d);
	trd_intern_strings(r, &s->functions, d->function_names, d->n_function_names,
			   "function name");
	trd_intern_strings(r, &s->paths, d->mapping_paths, d->n_mapping_paths, "mapping path");
	trd_intern_strings(r, &s->build_ids, d->build_ids, d->n_build_ids, "build id");
	trd_intern_profile(r, s, d);
}

/* ---- callstacks ----------------------------------------------------------- */

/* The mapping's path (path_string_ids joined with "/"); NULL with a problem if broken. */
static const char *trd_mapping_path(struct trd *r, struct trd_seq *s, uint64_t iid)
{
	struct trd_mapping *mp = pw_table_find(&s->mappings, &iid);
	size_t i, len = 0, pos = 0;
	struct trd_iid_str *ps;
	char *buf;

	if (!mp) {
		trd_problem(r, "mapping iid %" PRIu64 " undefined on sequence %" PRIu32
			    " (stackprofile_invalid_mapping_id)", iid, s->id);
		return NULL;
	}
	if (mp->path)
		return mp->path;
	for (i = 0; i < mp->n; i++) {
		ps = pw_table_find(&s->paths, &s->pool[mp->off + i]);
		if (!ps || !ps->s) {
			trd_problem(r, "mapping path iid %" PRIu64 " undefined on sequence %" PRIu32
				    " (stackprofile_invalid_string_id)", s->pool[mp->off + i],
				    s->id);
			return NULL;
		}
		len += strlen(ps->s) + 1;
	}
	buf = malloc(len + 1);
	if (!buf) {
		r->oom = true;
		return NULL;
	}
	for (i = 0; i < mp->n; i++) {
		ps = pw_table_find(&s->paths, &s->pool[mp->off + i]);
		if (i)
			buf[pos++] = '/';
		memcpy(buf + pos, ps->s, strlen(ps->s));
		pos += strlen(ps->s);
	}
	mp->path = trd_str(r, buf, pos);
	free(buf);
	return mp->path;
}

/* Resolves frame i of st into st->frames[i] / st->maps[i]; false with a problem. */
static bool trd_resolve_frame(struct trd *r, struct trd_seq *s, struct trd_stack *st, size_t i)
{
	uint64_t fid = s->pool[st->off + i];
	struct trd_frame *f = pw_table_find(&s->frames, &fid);
	struct trd_iid_str *fn;
	const char *map = "?";

	if (!f) {
		trd_problem(r, "frame iid %" PRIu64 " undefined on sequence %" PRIu32
			    " (stackprofile_invalid_frame_id)", fid, s->id);
		return false;
	}
	st->frames[i] = "?";
	if (f->function_iid) {
		fn = pw_table_find(&s->functions, &f->function_iid);
		if (!fn || !fn->s) {
			trd_problem(r, "function name iid %" PRIu64 " undefined on sequence "
				    "%" PRIu32 " (stackprofile_invalid_string_id)", f->function_iid,
				    s->id);
			return false;
		}
		if (fn->s[0])
			st->frames[i] = (char *)fn->s;
	}
	if (!f->mapping_iid) {
		trd_problem(r, "frame iid %" PRIu64 " has no mapping (readers before v53 drop "
			    "the callstack)", fid);
	} else {
		map = trd_mapping_path(r, s, f->mapping_iid);
		if (!map)
			return false;
	}
	st->maps[i] = (char *)map;
	return true;
}

/* The callstack's frames, root first, resolved once per generation; NULL if broken. */
static struct trd_stack *trd_resolve_stack(struct trd *r, struct trd_seq *s, uint64_t iid)
{
	struct trd_stack *st = pw_table_find(&s->stacks, &iid);
	size_t i;

	if (!st) {
		trd_problem(r, "callstack iid %" PRIu64 " undefined on sequence %" PRIu32
			    " (sample gets no callsite)", iid, s->id);
		return NULL;
	}
	if (st->state != TRD_STACK_NEW)
		return st->state == TRD_STACK_OK ? st : NULL;
	st->state = TRD_STACK_BAD;
	if (!st->n) {
		st->state = TRD_STACK_OK;
		return st;
	}
	st->frames = calloc(st->n, sizeof(char *));
	st->maps = calloc(st->n, sizeof(char *));
	if (!st->frames || !st->maps) {
		free(st->frames);
		free(st->maps);
		r->oom = true;
		return NULL;
	}
	if (!trd_keep(r, st->frames) || !trd_keep(r, st->maps))
		return NULL;
	for (i = 0; i < st->n; i++)
		if (!trd_resolve_frame(r, s, st, i))
			return NULL;
	st->state = TRD_STACK_OK;
	return st;
}

/* ---- payloads --------------------------------------------------------------- */

static void trd_perf_sample(struct trd *r, struct trd_seq *s, const trd_packet *p)
{
	const Perfetto__Protos__PerfSample *ps = p->perf_sample;
	struct trd_sample *out;
	struct trd_stack *st = NULL;

	if (ps->has_kernel_records_lost) {
		uint64_t sum = r->m->samples_lost + ps->kernel_records_lost;

		r->m->samples_lost = sum < r->m->samples_lost ? UINT64_MAX : sum;
		return;
	}
	if (ps->optional_sample_skipped_reason_case) {
		r->m->samples_skipped++; /* a skip record, not a sample */
		return;
	}
	if (ps->has_callstack_iid && ps->callstack_iid)
		st = trd_resolve_stack(r, s, ps->callstack_iid);
	if (!trd_reserve(r, (void **)&r->samples, &r->cap_samples, r->n_samples, sizeof(*out)))
		return;
	out = &r->samples[r->n_samples++];
	memset(out, 0, sizeof(*out));
	out->order = r->pkt_index;
	out->s.ts = p->has_timestamp ? p->timestamp : r->latest_ts;
	out->s.pid = (int32_t)ps->pid;
	out->s.tid = (int32_t)ps->tid;
	out->s.cpu = ps->cpu;
	if (st) {
		out->s.n_frames = st->n;
		out->s.frames = st->frames;
		out->s.frame_mappings = st->maps;
	}
}

static void trd_counter_value(struct trd *r, const trd_packet *p, uint64_t uuid)
{
	const Perfetto__Protos__TrackEvent *te = p->track_event;
	struct trd_track *t = pw_table_find(&r->tracks, &uuid), *parent;
	struct trd_counter *c;

	if (!t || t->kind != TRD_TRACK_COUNTER) {
		trd_problem(r, "counter value on track %" PRIu64 " before its counter descriptor "
			    "(track_event_counter_invalid_track_uuid, dropped)", uuid);
		return;
	}
	if (!te->counter_value_field_case) {
		trd_problem(r, "TYPE_COUNTER event without a value (dropped)");
		return;
	}
	if (!trd_reserve(r, (void **)&r->counters, &r->cap_counters, r->n_counters, sizeof(*c)))
		return;
	c = &r->counters[r->n_counters++];
	c->order = r->pkt_index;
	c->v.track_name = (char *)t->name;
	parent = t->parent_uuid ? pw_table_find(&r->tracks, &t->parent_uuid) : NULL;
	c->v.pid = parent && parent->kind == TRD_TRACK_PROCESS ? parent->pid : 0;
	c->v.ts = p->timestamp;
	if (te->counter_value_field_case ==
	    PERFETTO__PROTOS__TRACK_EVENT__COUNTER_VALUE_FIELD_COUNTER_VALUE)
		c->v.value = (double)te->counter_value;
	else
		c->v.value = te->double_counter_value;
}

static const char *trd_event_name(struct trd *r, struct trd_seq *s,
				  const Perfetto__Protos__TrackEvent *te)
{
	struct trd_iid_str *e;

	if (te->name_field_case == PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME)
		return te->name ? trd_str(r, te->name, strlen(te->name)) : NULL;
	if (te->name_field_case != PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID)
		return NULL;
	e = pw_table_find(&s->names, &te->name_iid);
	if (!e) {
		trd_problem(r, "event name iid %" PRIu64 " undefined on sequence %" PRIu32
			    " (slice gets no name)", te->name_iid, s->id);
		return NULL;
	}
	return e->s;
}

/* profd's per-slice argument, as trace processor would add it to the slice's args. */
static int64_t trd_self_samples_arg(const Perfetto__Protos__TrackEvent *te)
{
	for (size_t i = 0; i < te->n_debug_annotations; i++) {
		const Perfetto__Protos__DebugAnnotation *a = te->debug_annotations[i];

		if (a->name_field_case == PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME &&
		    strcmp(a->name, "self_samples") == 0 &&
		    a->value_case == PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_UINT_VALUE &&
		    a->uint_value <= INT64_MAX)
			return (int64_t)a->uint_value;
	}
	return -1;
}

static bool trd_is_totals_track(const struct trd *r, uint64_t uuid)
{
	for (size_t i = 0; i < r->n_totals_uuids; i++)
		if (r->totals_uuids[i] == uuid)
			return true;
	return false;
}

/* An event of profd's totals track: its arguments are one function's figures. */
static void trd_func_total(struct trd *r, struct trd_seq *s, const trd_packet *p, uint64_t uuid)
{
	const Perfetto__Protos__TrackEvent *te = p->track_event;
	const struct trd_track *t = pw_table_find(&r->tracks, &uuid);
	const struct trd_track *parent =
		t && t->parent_uuid ? pw_table_find(&r->tracks, &t->parent_uuid) : NULL;
	struct trace_func_total *ft;
	static const struct {
		const char *name;
		size_t offset;
	} fields[] = {
		{ "calls", offsetof(struct trace_func_total, calls) },
		{ "returned", offsetof(struct trace_func_total, returned) },
		{ "not_on_timeline", offsetof(struct trace_func_total, not_on_timeline) },
		{ "total_ns", offsetof(struct trace_func_total, total_ns) },
		{ "self_ns", offsetof(struct trace_func_total, self_ns) },
		{ "avg_ns", offsetof(struct trace_func_total, avg_ns) },
		{ "p50_ns_estimate", offsetof(struct trace_func_total, p50_ns) },
		{ "p90_ns_estimate", offsetof(struct trace_func_total, p90_ns) },
		{ "p99_ns_estimate", offsetof(struct trace_func_total, p99_ns) },
		{ "max_ns", offsetof(struct trace_func_total, max_ns) },
	};

	if (!trd_reserve(r, (void **)&r->m->func_totals, &r->cap_func_totals, r->m->n_func_totals,
			 sizeof(*ft)))
		return;
	ft = &r->m->func_totals[r->m->n_func_totals++];
	memset(ft, 0, sizeof(*ft));
	ft->pid = parent ? parent->pid : 0;
	ft->name = (char *)trd_event_name(r, s, te);
	for (size_t i = 0; i < te->n_debug_annotations; i++) {
		const Perfetto__Protos__DebugAnnotation *a = te->debug_annotations[i];

		if (a->name_field_case != PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME ||
		    a->value_case != PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_UINT_VALUE)
			continue;
		if (strcmp(a->name, "tid") == 0)
			ft->tid = (uint32_t)a->uint_value;
		for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++)
			if (strcmp(a->name, fields[k].name) == 0)
				memcpy((uint8_t *)ft + fields[k].offset, &a->uint_value,
				       sizeof(uint64_t));
	}
}

static void trd_track_event(struct trd *r, struct trd_seq *s, const trd_packet *p)
{
	const Perfetto__Protos__TrackEvent *te = p->track_event;
	int type = te->has_type ? (int)te->type : 0;
	struct trd_event *ev;
	uint64_t uuid;

	if (!p->has_timestamp) {
		trd_problem(r, "TrackEvent without timestamp (track_event_missing_timestamp, "
			    "dropped)");
		return;
	}
	if (!te->has_track_uuid && !s->has_track_uuid) {
		trd_problem(r, "TrackEvent without track_uuid (lands on the sequence's "
			    "default thread)");
		return;
	}
	uuid = te->has_track_uuid ? te->track_uuid : s->track_uuid;
	if (r->n_totals_uuids && trd_is_totals_track(r, uuid)) {
		trd_func_total(r, s, p, uuid);
		return;
	}
	if (type == TRD_COUNTER) {
		trd_counter_value(r, p, uuid);
		return;
	}
	if (type != TRD_BEGIN && type != TRD_END && type != TRD_INSTANT) {
		trd_problem(r, "TrackEvent of type %d (dropped)", type);
		return;
	}
	if (!trd_reserve(r, (void **)&r->events, &r->cap_events, r->n_events, sizeof(*ev)))
		return;
	ev = &r->events[r->n_events++];
	ev->ts = p->timestamp;
	ev->order = r->pkt_index;
	ev->uuid = uuid;
	ev->type = type;
	ev->name = trd_event_name(r, s, te);
	ev->self_samples = trd_self_samples_arg(te);
}

/* ---- descriptors ------------------------------------------------------------ */

struct trd_tid_key {
	int32_t pid, tid;
};

struct trd_tid_ent {
	struct trd_tid_key key;
	uint64_t uuid;
};

struct trd_pid_ent {
	int32_t pid;
	uint64_t uuid;
	size_t index; /* into process_pids / process_names */
};

static void trd_thread_track(struct trd *r, struct trd_track *t,
			     const Perfetto__Protos__ThreadDescriptor *td, bool is_new)
{
	struct trace_model *m = r->m;
	struct trd_tid_key key = { td->pid, (int32_t)td->tid };
	struct trd_tid_ent *id;
	bool id_new;

	if (is_new) {
		t->model_index = m->n_threads;
		id = pw_table_get(&r->thread_ids, &key, &id_new);
		if (!id || !trd_reserve(r, (void **)&m->threads, &r->cap_threads, m->n_threads,
					sizeof(*m->threads))) {
			r->oom = true;
			return;
		}
		if (!id_new && id->uuid != t->uuid)
			trd_problem(r, "thread %d/%d described by uuids %" PRIu64 " and %" PRIu64
				    ": the importer creates a second thread", key.pid, key.tid,
				    id->uuid, t->uuid);
		id->uuid = t->uuid;
		m->threads[m->n_threads] = (struct trace_thread){ key.pid, key.tid, NULL, t->uuid };
		m->n_threads++;
	}
	if (td->thread_name && t->model_index < m->n_threads)
		m->threads[t->model_index].name =
			(char *)trd_str(r, td->thread_name, strlen(td->thread_name));
}

static void trd_process_track(struct trd *r, struct trd_track *t,
			      const Perfetto__Protos__ProcessDescriptor *pd)
{
	struct trace_model *m = r->m;
	struct trd_pid_ent *e;
	size_t cap;
	bool is_new;

	e = pw_table_get(&r->process_ids, &pd->pid, &is_new);
	if (!e) {
		r->oom = true;
		return;
	}
	if (is_new) {
		cap = r->cap_processes;
		if (!trd_reserve(r, (void **)&m->process_pids, &cap, m->n_processes,
				 sizeof(int32_t)))
			return;
		cap = r->cap_processes;
		if (!trd_reserve(r, (void **)&m->process_names, &cap, m->n_processes,
				 sizeof(char *)))
			return;
		r->cap_processes = cap;
		e->uuid = t->uuid;
		e->index = m->n_processes++;
		m->process_pids[e->index] = pd->pid;
		m->process_names[e->index] = NULL;
	} else if (e->uuid != t->uuid) {
		trd_problem(r, "process %d described by uuids %" PRIu64 " and %" PRIu64
			    ": the importer creates a second process", pd->pid, e->uuid, t->uuid);
	}
	if (pd->process_name)
		m->process_names[e->index] =
			(char *)trd_str(r, pd->process_name, strlen(pd->process_name));
}

/* Kind, pid and tid of a descriptor; false (with a problem) if it is unusable. */
static bool trd_descriptor_identity(struct trd *r, const Perfetto__Protos__TrackDescriptor *d,
				    struct trd_track *id)
{
	memset(id, 0, sizeof(*id));
	id->uuid = d->uuid;
	id->kind = d->thread ? TRD_TRACK_THREAD :
		   d->process ? TRD_TRACK_PROCESS :
		   d->counter ? TRD_TRACK_COUNTER : TRD_TRACK_OTHER;
	id->parent_uuid = d->has_parent_uuid ? d->parent_uuid : 0;
	if (d->thread) {
		id->pid = d->thread->pid;
		id->tid = (int32_t)d->thread->tid;
		if (!d->thread->has_pid || !d->thread->has_tid) {
			trd_problem(r, "thread descriptor %" PRIu64 " without pid and tid: its "
				    "events are dropped", d->uuid);
			return false;
		}
	} else if (d->process) {
		id->pid = d->process->pid;
		if (!d->process->has_pid) {
			trd_problem(r, "process descriptor %" PRIu64 " without pid", d->uuid);
			return false;
		}
	}
	return true;
}

static void trd_track_descriptor(struct trd *r, const Perfetto__Protos__TrackDescriptor *d)
{
	struct trd_track id, *t;
	bool is_new;

	if (!d->has_uuid || !d->uuid) {
		trd_problem(r, "TrackDescriptor without uuid (ignored)");
		return;
	}
	id.usable = trd_descriptor_identity(r, d, &id);
	t = pw_table_get(&r->tracks, &d->uuid, &is_new);
	if (!t) {
		r->oom = true;
		return;
	}
	if (is_new) {
		*t = id;
	} else if (t->kind != id.kind || t->pid != id.pid || t->tid != id.tid ||
		   t->parent_uuid != id.parent_uuid) {
		trd_problem(r, "TrackDescriptor %" PRIu64 " conflicts with its first reservation "
			    "(track_descriptor_conflicting_reservation)", d->uuid);
		return;
	}
	if (d->static_or_dynamic_name_case && d->name)
		t->name = trd_str(r, d->name, strlen(d->name));
	if (t->name && strcmp(t->name, PERFETTO_FUNC_TOTALS_TRACK) == 0 && is_new &&
	    r->n_totals_uuids < sizeof(r->totals_uuids) / sizeof(r->totals_uuids[0]))
		r->totals_uuids[r->n_totals_uuids++] = d->uuid;
	if (!t->usable)
		return;
	if (t->kind == TRD_TRACK_THREAD)
		trd_thread_track(r, t, d->thread, is_new);
	else if (t->kind == TRD_TRACK_PROCESS)
		trd_process_track(r, t, d->process);
}

#define TRD_SEQ_CLOCK_FIRST 64
#define TRD_SEQ_CLOCK_LAST 127

/*
 * A snapshot on a sequence that starts one of its scoped incremental clocks:
 * later timestamps in that clock are deltas from it, placed through the
 * snapshot's first global clock (the trace's, for profd: CLOCK_MONOTONIC).
 */
static void trd_seq_clock_snapshot(struct trd *r, struct trd_seq *s,
				   const Perfetto__Protos__ClockSnapshot *cs)
{
	const Perfetto__Protos__ClockSnapshot__Clock *scoped = NULL, *global = NULL;

	for (size_t i = 0; i < cs->n_clocks; i++) {
		const Perfetto__Protos__ClockSnapshot__Clock *c = cs->clocks[i];

		if (c->clock_id >= TRD_SEQ_CLOCK_FIRST && c->clock_id <= TRD_SEQ_CLOCK_LAST)
			scoped = scoped ? scoped : c;
		else
			global = global ? global : c;
	}
	if (!scoped)
		return;
	if (!scoped->is_incremental || !global) {
		trd_problem(r, "sequence %" PRIu32 " snapshots clock %" PRIu32 " without a global "
			    "clock beside it, or not incremental (not supported)", s->id,
			    scoped->clock_id);
		return;
	}
	s->incr_valid = true;
	s->incr_clock = scoped->clock_id;
	s->incr_value = scoped->timestamp;
	s->incr_to_trace = global->timestamp - scoped->timestamp;
}

/*
 * A packet's timestamp in its sequence's incremental clock becomes absolute
 * (in place: every later reader of the packet sees trace time). 0, or -1
 * when it cannot be placed (the packet is dropped, as the importer does).
 */
static int trd_place_timestamp(struct trd *r, struct trd_seq *s, trd_packet *p)
{
	uint32_t clock = p->has_timestamp_clock_id ? p->timestamp_clock_id :
			 s && s->has_clock ? s->clock_id : TRD_CLOCK_BOOTTIME;

	if (clock < TRD_SEQ_CLOCK_FIRST || clock > TRD_SEQ_CLOCK_LAST)
		return 0;
	if (!s || !s->incr_valid || s->incr_clock != clock) {
		trd_problem(r, "timestamp in sequence-scoped clock %" PRIu32 " with no snapshot of "
			    "it on its sequence (clock_sync_failure, dropped)", clock);
		return -1;
	}
	s->incr_value += p->timestamp;
	p->timestamp = s->incr_value + s->incr_to_trace;
	p->has_timestamp_clock_id = true;
	p->timestamp_clock_id = s->incr_clock;
	return 0;
}

static void trd_clock_snapshot(struct trd *r, const Perfetto__Protos__ClockSnapshot *cs)
{
	size_t i;
	bool is_new;

	if (!r->m->has_clock_snapshot)
		r->m->first_clock_snapshot = r->pkt_index;
	r->m->has_clock_snapshot = 1;
	if (cs->n_clocks < 2)
		trd_problem(r, "ClockSnapshot with %zu clocks (needs at least 2)", cs->n_clocks);
	for (i = 0; i < cs->n_clocks; i++) {
		uint32_t id = cs->clocks[i]->clock_id;

		if (!pw_table_get(&r->clocks_snapshotted, &id, &is_new))
			r->oom = true;
	}
}

/* ---- one packet -------------------------------------------------------------- */

static void trd_note_clock(struct trd *r, const trd_packet *p, const struct trd_seq *s)
{
	uint32_t clock = p->has_timestamp_clock_id ? p->timestamp_clock_id :
			 s && s->has_clock ? s->clock_id : TRD_CLOCK_BOOTTIME;
	uint32_t *e;
	bool is_new;

	e = pw_table_get(&r->clocks_used, &clock, &is_new);
	if (!e) {
		r->oom = true;
		return;
	}
	e[1]++;
	r->latest_ts = p->timestamp;
}

static bool trd_is_scoped(const trd_packet *p)
{
	return p->interned_data || p->trace_packet_defaults || p->has_sequence_flags ||
	       p->incremental_state_cleared ||
	       p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT ||
	       p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PERF_SAMPLE;
}

/* Steps 1-5 of ProtoTraceReader::ParsePacket: loss, CLEARED, defaults, interning. */
static void trd_sequence_state(struct trd *r, struct trd_seq *s, const trd_packet *p,
			       uint32_t flags)
{
	const Perfetto__Protos__TracePacketDefaults *d = p->trace_packet_defaults;
	const Perfetto__Protos__TrackEventDefaults *ted = d ? d->track_event_defaults : NULL;

	if (flags & 1) {
		trd_seq_clear(s);
		s->valid = true;
	} else if (p->previous_packet_dropped) {
		s->valid = false;
	}
	if (d) {
		s->has_clock = d->has_timestamp_clock_id;
		s->clock_id = d->timestamp_clock_id;
		s->has_track_uuid = ted && ted->has_track_uuid;
		s->track_uuid = s->has_track_uuid ? ted->track_uuid : 0;
		if (d->perf_sample_defaults && d->perf_sample_defaults->timebase &&
		    d->perf_sample_defaults->timebase->interval_case ==
			    PERFETTO__PROTOS__PERF_EVENTS__TIMEBASE__INTERVAL_FREQUENCY)
			r->m->sample_freq = d->perf_sample_defaults->timebase->frequency;
	}
	if (p->interned_data && s->valid)
		trd_intern(r, s, p->interned_data);
	else if (p->interned_data)
		trd_problem(r, "interned data on sequence %" PRIu32 " before its "
			    "SEQ_INCREMENTAL_STATE_CLEARED packet (discarded)", s->id);
}

static void trd_tokenize(struct trd *r, const trd_packet *p)
{
	uint32_t flags = p->has_sequence_flags ? p->sequence_flags : 0;
	struct trd_seq *s = NULL;

	if (p->incremental_state_cleared)
		flags |= 1;
	if (p->optional_trusted_packet_sequence_id_case && p->trusted_packet_sequence_id) {
		s = trd_seq_get(r, p->trusted_packet_sequence_id);
		if (!s)
			return;
		trd_sequence_state(r, s, p, flags);
	} else if (trd_is_scoped(p)) {
		trd_problem(r, "packet without trusted_packet_sequence_id: its sequence-scoped "
			    "content is dropped (track_event_missing_sequence_id)");
	}
	if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_CLOCK_SNAPSHOT) {
		trd_clock_snapshot(r, p->clock_snapshot);
		if (s)
			trd_seq_clock_snapshot(r, s, p->clock_snapshot);
		return; /* the importer stops here for snapshots */
	}
	if (s && (flags & 2) && !s->valid) {
		trd_problem(r, "packet needs incremental state but sequence %" PRIu32 " is not "
			    "valid (packet_skipped_seq_needs_incremental_state_invalid)", s->id);
		return;
	}
	if (p->has_timestamp && trd_place_timestamp(r, s, (trd_packet *)p) < 0)
		return;
	if (p->has_timestamp)
		trd_note_clock(r, p, s);
	if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR)
		trd_track_descriptor(r, p->track_descriptor);
	else if (s && p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT)
		trd_track_event(r, s, p);
	else if (s && p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PERF_SAMPLE)
		trd_perf_sample(r, s, p);
}

/* ---- framing ------------------------------------------------------------------ */

/* 1 read, 0 ran out of bytes, -1 over-long varint. */
static int trd_varint(const uint8_t *buf, size_t len, size_t *off, uint64_t *v)
{
	unsigned shift;
	size_t i = *off;

	*v = 0;
	for (shift = 0; shift < 70; shift += 7) {
		if (i >= len)
			return 0;
		*v |= (uint64_t)(buf[i] & 0x7f) << shift;
		if (!(buf[i++] & 0x80)) {
			*off = i;
			return 1;
		}
	}
	return -1;
}

static void trd_split(struct trd *r, const uint8_t *buf, size_t len, bool nested);

/*
 * A packet wrapping compressed packets: the records inside are processed in
 * order as if they were top-level (the importer does not unwrap twice).
 */
static bool trd_compressed_record(struct trd *r, const uint8_t *data, size_t len, bool nested)
{
	uint8_t *inner = NULL;
	size_t inner_len = 0;
	char err[160];
	int rc = packet_decompress(data, len, &inner, &inner_len, err, sizeof(err));

	if (rc == 0)
		return false;
	if (rc == -ENOMEM)
		r->oom = true;
	else if (rc < 0)
		trd_problem(r, "%s", err);
	else if (nested)
		trd_problem(r, "compressed packets inside compressed packets (the importer "
			    "does not unwrap them; skipped)");
	else
		trd_split(r, inner, inner_len, true);
	free(inner);
	return true;
}

static void trd_packet_record(struct trd *r, const uint8_t *data, size_t len, bool nested)
{
	trd_packet *p;

	if (trd_compressed_record(r, data, len, nested))
		return;
	p = perfetto__protos__trace_packet__unpack(NULL, len, data);

	if (!p) {
		trd_problem(r, "TracePacket does not decode (%zu bytes; skipped)", len);
		return;
	}
	r->m->n_packets++;
	trd_tokenize(r, p);
	perfetto__protos__trace_packet__free_unpacked(p, NULL);
}

/* Skips a Trace field other than `packet`; false if the framing is broken. */
static bool trd_skip_field(const uint8_t *buf, size_t len, size_t *off, uint64_t tag)
{
	uint64_t v;

	switch (tag & 7) {
	case PWB_VARINT:
		return trd_varint(buf, len, off, &v) == 1;
	case PWB_I64:
		v = 8;
		break;
	case PWB_I32:
		v = 4;
		break;
	case PWB_LEN:
		if (trd_varint(buf, len, off, &v) != 1)
			return false;
		break;
	default:
		return false;
	}
	if (v > len - *off)
		return false;
	*off += v;
	return true;
}

/* nested: the records of a compressed block (offsets stay the wrapper's). */
static void trd_split(struct trd *r, const uint8_t *buf, size_t len, bool nested)
{
	size_t off = 0, start;
	uint64_t tag, plen = 0;
	int rc;

	if (len && buf[0] != 0x0a)
		trd_problem_at(r, "first byte is 0x%02x, not 0x0a: not a Perfetto protobuf trace",
			       buf[0]);
	for (; off < len && !r->oom; r->pkt_index++) {
		start = off;
		if (!nested)
			r->pkt_offset = off;
		rc = trd_varint(buf, len, &off, &tag);
		if (rc == 1 && tag == 0x0a)
			rc = trd_varint(buf, len, &off, &plen);
		if (rc == 0 || (rc == 1 && tag == 0x0a && plen > len - off)) {
			trd_problem_at(r, "truncated packet at offset %zu (%zu bytes left)", start,
				       len - start);
			return;
		}
		if (rc < 0 || tag == 0 || (tag != 0x0a && !trd_skip_field(buf, len, &off, tag))) {
			trd_problem_at(r, "broken record framing at offset %zu: parsing stops",
				       start);
			return;
		}
		if (tag != 0x0a) {
			trd_problem_at(r, "record at offset %zu is Trace field %" PRIu64 ", not a "
				       "packet (skipped)", start, tag >> 3);
			continue;
		}
		trd_packet_record(r, buf + off, (size_t)plen, nested);
		off += plen;
	}
}

/* ---- entry points --------------------------------------------------------------- */

static void trd_cleanup(struct trd *r)
{
	uint32_t i;

	for (i = 0; i < r->seqs.n; i++)
		trd_seq_free(pw_table_at(&r->seqs, i));
	for (i = 0; i < r->tracks.n; i++)
		free(((struct trd_track *)pw_table_at(&r->tracks, i))->stack);
	pw_table_free(&r->seqs);
	pw_table_free(&r->tracks);
	pw_table_free(&r->thread_ids);
	pw_table_free(&r->process_ids);
	pw_table_free(&r->clocks_used);
	pw_table_free(&r->clocks_snapshotted);
	free(r->events);
	free(r->samples);
	free(r->counters);
}

const char *trace_sample_overhead(const struct trace_sample *s)
{
	if (s->n_frames < 2 || strcmp(s->frames[0], PERFETTO_OVERHEAD_ROOT) != 0 ||
	    !s->frame_mappings[0] || strcmp(s->frame_mappings[0], PERFETTO_OVERHEAD_MAPPING) != 0)
		return NULL;
	return s->frames[1];
}

int trace_model_load_buffer(const uint8_t *buf, size_t len, struct trace_model **out)
{
	struct trd r = { 0 };

	*out = NULL;
	r.m = calloc(1, sizeof(*r.m));
	if (!r.m)
		return -ENOMEM;
	r.m->priv = calloc(1, sizeof(*r.m->priv));
	if (!r.m->priv) {
		free(r.m);
		return -ENOMEM;
	}
	pw_table_init(&r.seqs, sizeof(struct trd_seq), sizeof(uint32_t));
	pw_table_init(&r.tracks, sizeof(struct trd_track), sizeof(uint64_t));
	pw_table_init(&r.thread_ids, sizeof(struct trd_tid_ent), sizeof(struct trd_tid_key));
	pw_table_init(&r.process_ids, sizeof(struct trd_pid_ent), sizeof(int32_t));
	pw_table_init(&r.clocks_used, 2 * sizeof(uint32_t), sizeof(uint32_t));
	pw_table_init(&r.clocks_snapshotted, sizeof(uint32_t), sizeof(uint32_t));
	trd_split(&r, buf, len, false);
	if (!r.oom)
		trd_finish(&r);
	trd_cleanup(&r);
	if (r.oom) {
		trace_model_free(r.m);
		return -ENOMEM;
	}
	*out = r.m;
	return 0;
}

int trace_model_load(const char *path, struct trace_model **out)
{
	size_t len = 0, cap = 1 << 16;
	uint8_t *buf = malloc(cap), *nb;
	int fd, ret;
	ssize_t n;

	*out = NULL;
	if (!buf)
		return -ENOMEM;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		goto err_free_buf;
	}
	for (;;) {
		if (len == cap) {
			nb = cap > SIZE_MAX / 2 ? NULL : realloc(buf, cap * 2);
			if (!nb) {
				ret = -ENOMEM;
				goto err_close;
			}
			buf = nb;
			cap *= 2;
		}
		n = read(fd, buf + len, cap - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = -errno;
			goto err_close;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	ret = trace_model_load_buffer(buf, len, out);
	free(buf);
	return ret;

err_close:
	close(fd);
err_free_buf:
	free(buf);
	return ret;
}

/* SPDX-License-Identifier: MIT */
/*
 * Perfetto trace reader, packets: decodes each TracePacket with protobuf-c
 * and applies the importer's tokenization rules in file order (sequence
 * validity and CLEARED, defaults, per-sequence interning, incremental
 * clocks, track reservation, counter and sample checks), then hands the
 * payload on: slice events to trace_slices.c, everything else to the
 * stream's callbacks. The input is hostile: every length is bounded, every
 * iid may be missing. Framing and windows are trace_stream.c's.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "perfetto_trace_subset.pb-c.h"
#include "viewer-export/packet_decompress.h"
#include "viewer-export/perfetto_writer.h"
#include "viewer-export/trace_reader_internal.h"

typedef Perfetto__Protos__TracePacket trd_packet;
#define SEQ_ID_CASE \
	PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID

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
	uint64_t build_id_iid; /* 0: none */
};

enum { TRD_STACK_NEW, TRD_STACK_OK, TRD_STACK_BAD };

struct trd_stack {
	uint64_t iid;
	size_t off, n;    /* frame_ids in the sequence's u64 pool */
	int state;
	char **frames, **maps, **bids; /* resolved once, shared by every sample using it */
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
	struct pw_table arg_names; /* debug-annotation names */
	uint64_t *pool;
	size_t pool_n, pool_cap;
};

/* ---- sequences ------------------------------------------------------------ */

static void trd_seq_init(struct trd_seq *s)
{
	pw_table_init(&s->names, sizeof(struct trd_iid_str), sizeof(uint64_t));
	pw_table_init(&s->arg_names, sizeof(struct trd_iid_str), sizeof(uint64_t));
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
	pw_table_clear(&s->arg_names);
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
	pw_table_free(&s->arg_names);
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

	/* a sequence's packets come in runs: remember the last one (indexes are stable) */
	if (r->last_seq_ix && r->last_seq_id == id)
		return pw_table_at(&r->seqs, r->last_seq_ix - 1);
	s = pw_table_get(&r->seqs, &id, &is_new);
	if (!s) {
		r->oom = true;
		return NULL;
	}
	if (is_new)
		trd_seq_init(s); /* starts invalid: packet loss assumed until CLEARED */
	r->last_seq_id = id;
	r->last_seq_ix = pw_table_index(&r->seqs, s) + 1;
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

/* Build ids are raw bytes (NULs included): kept as lowercase hex text. */
static void trd_intern_build_ids(struct trd *r, struct trd_seq *s,
				 Perfetto__Protos__InternedData *d)
{
	static const char digits[] = "0123456789abcdef";
	char hex[129];

	for (size_t i = 0; i < d->n_build_ids; i++) {
		Perfetto__Protos__InternedString *v = d->build_ids[i];
		struct trd_iid_str *e = trd_define(r, &s->build_ids, v->has_iid, v->iid, "build id");
		size_t len = v->has_str && v->str.data ? v->str.len : 0;

		if (!e)
			continue;
		if (len > 64)
			len = 64; /* longer than any build id note: keep a prefix */
		for (size_t k = 0; k < len; k++) {
			hex[2 * k] = digits[v->str.data[k] >> 4];
			hex[2 * k + 1] = digits[v->str.data[k] & 15];
		}
		e->s = trd_str(r, hex, 2 * len);
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
	for (i = 0; i < d->n_debug_annotation_names; i++) {
		Perfetto__Protos__DebugAnnotationName *an = d->debug_annotation_names[i];
		struct trd_iid_str *e;

		e = trd_define(r, &s->arg_names, an->has_iid, an->iid, "debug annotation name");
		if (e)
			e->s = an->name ? trd_str(r, an->name, strlen(an->name)) : NULL;
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
		e->build_id_iid = mp->has_build_id ? mp->build_id : 0;
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
	trd_intern_build_ids(r, s, d);
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

/* The mapping's build id as hex, NULL when it has none (or names an undefined one). */
static const char *trd_mapping_build_id(struct trd_seq *s, uint64_t iid)
{
	struct trd_mapping *mp = pw_table_find(&s->mappings, &iid);
	struct trd_iid_str *b;

	if (!mp || !mp->build_id_iid)
		return NULL;
	b = pw_table_find(&s->build_ids, &mp->build_id_iid);
	return b && b->s && b->s[0] ? b->s : NULL;
}

/* Resolves frame i of st into st->frames[i] / maps[i] / bids[i]; false with a problem. */
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
		st->bids[i] = (char *)trd_mapping_build_id(s, f->mapping_iid);
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
	st->bids = calloc(st->n, sizeof(char *));
	if (!st->frames || !st->maps || !st->bids) {
		free(st->frames);
		free(st->maps);
		free(st->bids);
		r->oom = true;
		return NULL;
	}
	if (!trd_keep(r, st->frames) || !trd_keep(r, st->maps) || !trd_keep(r, st->bids))
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
	struct trace_stream_sample out = { 0 };
	struct trd_stack *st = NULL;

	if (ps->has_kernel_records_lost) {
		uint64_t sum = r->st.samples_lost + ps->kernel_records_lost;

		r->st.samples_lost = sum < r->st.samples_lost ? UINT64_MAX : sum;
		return;
	}
	if (ps->optional_sample_skipped_reason_case) {
		r->st.samples_skipped++; /* a skip record, not a sample */
		return;
	}
	if (ps->has_callstack_iid && ps->callstack_iid)
		st = trd_resolve_stack(r, s, ps->callstack_iid);
	out.order = r->pkt_index;
	out.s.ts = p->has_timestamp ? p->timestamp : r->latest_ts;
	out.s.pid = (int32_t)ps->pid;
	out.s.tid = (int32_t)ps->tid;
	out.s.generation = trd_generation_at(r, out.s.pid, out.s.ts -
					     (r->has_boot_to_trace ? (uint64_t)r->boot_to_trace : 0));
	out.s.cpu = ps->cpu;
	if (st) {
		out.s.n_frames = st->n;
		out.s.frames = st->frames;
		out.s.frame_mappings = st->maps;
		out.s.frame_build_ids = st->bids;
		/* profd's marker of a sample it could not unwind (a skip record before) */
		if (st->n == 1 && strcmp(st->frames[0], PERFETTO_NOT_UNWOUND) == 0 &&
		    st->maps[0] && strcmp(st->maps[0], PERFETTO_OVERHEAD_MAPPING) == 0)
			r->st.samples_skipped++;
	}
	trd_sample_event(r, &out);
}

static void trd_counter_value(struct trd *r, const trd_packet *p, uint64_t uuid)
{
	const Perfetto__Protos__TrackEvent *te = p->track_event;
	struct trd_track *t = pw_table_find(&r->tracks, &uuid), *parent;
	struct trace_counter_value v;

	if (!t || t->kind != TRD_TRACK_COUNTER) {
		trd_problem(r, "counter value on track %" PRIu64 " before its counter descriptor "
			    "(track_event_counter_invalid_track_uuid, dropped)", uuid);
		return;
	}
	if (!te->counter_value_field_case) {
		trd_problem(r, "TYPE_COUNTER event without a value (dropped)");
		return;
	}
	v.track_name = (char *)t->name;
	parent = t->parent_uuid ? pw_table_find(&r->tracks, &t->parent_uuid) : NULL;
	v.pid = parent && parent->kind == TRD_TRACK_PROCESS ? parent->pid : 0;
	v.generation = parent && parent->kind == TRD_TRACK_PROCESS ? parent->generation : 0;
	v.ts = p->timestamp;
	if (te->counter_value_field_case ==
	    PERFETTO__PROTOS__TRACK_EVENT__COUNTER_VALUE_FIELD_COUNTER_VALUE)
		v.value = (double)te->counter_value;
	else
		v.value = te->double_counter_value;
	if (r->ops->counter)
		trd_emitted(r, r->ops->counter(r->ctx, &v, r->pkt_index));
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

/* A debug annotation's name, inline or interned on s; NULL (a problem) when it has none. */
static const char *trd_annotation_name(struct trd *r, struct trd_seq *s,
				       const Perfetto__Protos__DebugAnnotation *a)
{
	struct trd_iid_str *e;

	if (a->name_field_case == PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME)
		return a->name;
	if (a->name_field_case != PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME_IID)
		return NULL;
	e = pw_table_find(&s->arg_names, &a->name_iid);
	if (!e || !e->s) {
		trd_problem(r, "debug annotation name iid %" PRIu64 " undefined on sequence %" PRIu32
			    " (the argument is dropped)", a->name_iid, s->id);
		return NULL;
	}
	return e->s;
}

/*
 * Whether a slice's debug annotation is an --args/--retval value: arg1,
 * fparg1, retval, or (--auto-args) a parameter's own name; profd's other
 * per-slice annotations are its figures.
 */
static bool trd_is_value_name(const char *name)
{
	static const char *const figures[] = { "self_samples", "on_cpu_ns", "off_cpu_ns",
					       "runnable_ns" };

	for (size_t i = 0; i < sizeof(figures) / sizeof(figures[0]); i++)
		if (!strcmp(name, figures[i]))
			return false;
	return true;
}

/* One value annotation appended to buf as trace_slice_args.values has it; false if unknown. */
static bool trd_put_value(char *buf, size_t cap, size_t *len, const char *name,
			  const Perfetto__Protos__DebugAnnotation *a)
{
	char num[32];
	const char *text = num;
	size_t n, start = *len;
	char type = 'n';

	switch (a->value_case) {
	case PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_INT_VALUE:
		snprintf(num, sizeof(num), "%" PRId64, a->int_value);
		break;
	case PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_UINT_VALUE:
		snprintf(num, sizeof(num), "%" PRIu64, a->uint_value);
		break;
	case PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_BOOL_VALUE:
		snprintf(num, sizeof(num), "%s", a->bool_value ? "true" : "false");
		break;
	case PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_POINTER_VALUE:
		snprintf(num, sizeof(num), "0x%" PRIx64, a->pointer_value);
		break;
	case PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_DOUBLE_VALUE:
		snprintf(num, sizeof(num), "%.17g", a->double_value);
		break;
	case PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE:
		type = 's';
		text = a->string_value ? a->string_value : "";
		break;
	default:
		return false;
	}
	n = snprintf(buf + start, cap - start, "%s%c%s%c", start ? "\x1e" : "", type, name,
		     TRACE_VALUE_EQ);
	if (start + n >= cap)
		return false;
	*len = start + n;
	for (const char *c = text; *c && *len + 1 < cap; c++) /* the separators never inside */
		buf[(*len)++] = *c == TRACE_VALUE_SEP || *c == TRACE_VALUE_EQ ? '?' : *c;
	buf[*len] = '\0';
	return true;
}

/*
 * The event's --args/--retval values as trace_slice_args.values (interned),
 * NULL if none; names[i]: annotation i's name (NULL: none).
 */
static const char *trd_slice_values(struct trd *r, const Perfetto__Protos__TrackEvent *te,
				    const char *const *names)
{
	char buf[8192];
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < te->n_debug_annotations; i++)
		if (names[i] && trd_is_value_name(names[i]))
			trd_put_value(buf, sizeof(buf), &len, names[i], te->debug_annotations[i]);
	return len ? trd_str(r, buf, len) : NULL;
}

/* profd's per-slice arguments, as trace processor would add them to the slice's args. */
static struct trace_slice_args trd_slice_args(struct trd *r, struct trd_seq *s,
					      const Perfetto__Protos__TrackEvent *te)
{
	struct trace_slice_args args = TRACE_SLICE_ARGS_NONE;
	static const struct {
		const char *name;
		size_t offset;
	} known[] = {
		{ "self_samples", offsetof(struct trace_slice_args, self_samples) },
		{ "on_cpu_ns", offsetof(struct trace_slice_args, on_cpu_ns) },
		{ "off_cpu_ns", offsetof(struct trace_slice_args, off_cpu_ns) },
		{ "runnable_ns", offsetof(struct trace_slice_args, runnable_ns) },
	};

	const char *names_local[64], **names = names_local;
	size_t n = te->n_debug_annotations;

	if (!n)
		return args;
	if (n > sizeof(names_local) / sizeof(names_local[0]) &&
	    !(names = malloc(n * sizeof(*names)))) {
		r->oom = true;
		return args;
	}
	for (size_t i = 0; i < n; i++) {
		const Perfetto__Protos__DebugAnnotation *a = te->debug_annotations[i];
		int64_t v;

		names[i] = trd_annotation_name(r, s, a);
		if (!names[i] || a->value_case != PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_UINT_VALUE ||
		    a->uint_value > INT64_MAX)
			continue;
		v = (int64_t)a->uint_value;
		for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
			if (strcmp(names[i], known[k].name) == 0)
				memcpy((uint8_t *)&args + known[k].offset, &v, sizeof(v));
	}
	args.values = trd_slice_values(r, te, names);
	if (names != names_local)
		free(names);
	return args;
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
	struct trace_func_total ft_storage = { 0 }, *ft = &ft_storage;
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
		{ "values_dropped", offsetof(struct trace_func_total, values_dropped) },
		{ "sched_calls", offsetof(struct trace_func_total, sched_calls) },
		{ "on_cpu_ns", offsetof(struct trace_func_total, on_cpu_ns) },
		{ "off_cpu_ns", offsetof(struct trace_func_total, off_cpu_ns) },
		{ "runnable_ns", offsetof(struct trace_func_total, runnable_ns) },
	};

	ft->pid = parent ? parent->pid : 0;
	ft->generation = parent ? parent->generation : 0;
	ft->name = (char *)trd_event_name(r, s, te);
	for (size_t i = 0; i < te->n_debug_annotations; i++) {
		const Perfetto__Protos__DebugAnnotation *a = te->debug_annotations[i];

		if (a->name_field_case != PERFETTO__PROTOS__DEBUG_ANNOTATION__NAME_FIELD_NAME)
			continue;
		/* the function's name (the event is named for the track; older traces: for it) */
		if (a->value_case == PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_STRING_VALUE &&
		    strcmp(a->name, "function") == 0 && a->string_value)
			ft->name = (char *)trd_str(r, a->string_value, strlen(a->string_value));
		if (a->value_case != PERFETTO__PROTOS__DEBUG_ANNOTATION__VALUE_UINT_VALUE)
			continue;
		if (strcmp(a->name, "tid") == 0)
			ft->tid = (uint32_t)a->uint_value;
		for (size_t k = 0; k < sizeof(fields) / sizeof(fields[0]); k++)
			if (strcmp(a->name, fields[k].name) == 0)
				memcpy((uint8_t *)ft + fields[k].offset, &a->uint_value,
				       sizeof(uint64_t));
	}
	if (r->ops->func_total)
		trd_emitted(r, r->ops->func_total(r->ctx, ft));
}

static void trd_track_event(struct trd *r, struct trd_seq *s, const trd_packet *p)
{
	const Perfetto__Protos__TrackEvent *te = p->track_event;
	int type = te->has_type ? (int)te->type : 0;
	struct trd_event ev;
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
	ev.ts = p->timestamp;
	ev.order = r->pkt_index;
	ev.uuid = uuid;
	ev.type = type;
	ev.name = trd_event_name(r, s, te);
	ev.args = trd_slice_args(r, s, te);
	trd_slice_event(r, &ev);
}

/* ---- descriptors ------------------------------------------------------------ */

/* A thread of one process: a reused pid's processes each have their own. */
struct trd_tid_key {
	int32_t pid, tid;
	uint32_t generation;
};

struct trd_tid_ent {
	struct trd_tid_key key;
	uint64_t uuid;
};

/*
 * A pid's newest process. A descriptor of that pid with a new uuid is
 * another process (the importer's rule: TrackEventTracker starts a new
 * process for a pid whose process has another uuid): a pid reused.
 */
struct trd_pid_ent {
	int32_t pid;
	uint64_t uuid;
	size_t index;        /* the index the process callback got */
	uint32_t generation; /* processes of this pid before it */
};

struct trd_gen_key {
	int32_t pid;
	uint32_t generation;
};

struct trd_gen_ent {
	struct trd_gen_key key;
	/*
	 * BOOTTIME: ProcessDescriptor.start_timestamp_ns, 0 unknown. profd times
	 * these descriptors in BOOTTIME too: compared as they are, before any
	 * clock snapshot (a flight recorder's header comes first).
	 */
	uint64_t start;
};

uint64_t trd_thread_uuid(const struct trd *r, int32_t pid, int32_t tid, uint32_t generation)
{
	struct trd_tid_key key = { pid, tid, generation };
	const struct trd_tid_ent *id = pw_table_find(&r->thread_ids, &key);

	return id ? id->uuid : 0;
}

uint32_t trd_generation_at(const struct trd *r, int32_t pid, uint64_t boot_ts)
{
	const struct trd_pid_ent *e = pw_table_find(&r->process_ids, &pid);
	uint32_t g = e ? e->generation : 0;

	for (; g > 0; g--) {
		struct trd_gen_key key = { pid, g };
		const struct trd_gen_ent *ge = pw_table_find(&r->generations, &key);

		if (!ge || ge->start <= boot_ts)
			break;
	}
	return g;
}

/*
 * A thread belongs to its pid's process alive when its descriptor says
 * (profd times those of a reused pid's processes), else to the newest.
 */
static void trd_thread_track(struct trd *r, struct trd_track *t,
			     const Perfetto__Protos__ThreadDescriptor *td, bool is_new,
			     const uint64_t *at)
{
	struct trd_tid_key key = { td->pid, (int32_t)td->tid, 0 };
	struct trace_thread th = { key.pid, key.tid, NULL, t->uuid, 0 };
	struct trd_tid_ent *id;
	bool id_new;

	if (is_new) {
		const struct trd_pid_ent *pe = pw_table_find(&r->process_ids, &key.pid);

		t->generation = at ? trd_generation_at(r, key.pid, *at) : pe ? pe->generation : 0;
	}
	th.generation = key.generation = t->generation;
	if (is_new) {
		id = pw_table_get(&r->thread_ids, &key, &id_new);
		if (!id || !trd_reserve(r, (void **)&r->threads, &r->cap_threads, r->n_threads,
					sizeof(*r->threads))) {
			r->oom = true;
			return;
		}
		t->thread_index = r->n_threads;
		r->threads[r->n_threads++] = th;
		if (!id_new && id->uuid != t->uuid)
			trd_problem(r, "thread %d/%d described by uuids %" PRIu64 " and %" PRIu64
				    ": the importer creates a second thread", key.pid, key.tid,
				    id->uuid, t->uuid);
		id->uuid = t->uuid;
		trd_slices_thread_described(r, key.pid, key.tid, key.generation);
	}
	if (td->thread_name) {
		th.name = (char *)trd_str(r, td->thread_name, strlen(td->thread_name));
		if (t->thread_index < r->n_threads)
			r->threads[t->thread_index].name = th.name;
	}
	if (r->ops->thread && (is_new || td->thread_name))
		trd_emitted(r, r->ops->thread(r->ctx, t->thread_index, &th, is_new));
}

/* Where a process begins in trace time: its descriptor's start_timestamp_ns (BOOTTIME). */
static void trd_generation_begins(struct trd *r, int32_t pid, uint32_t generation,
				  const Perfetto__Protos__ProcessDescriptor *pd)
{
	struct trd_gen_key key = { pid, generation };
	struct trd_gen_ent *g;
	bool is_new;

	if (!generation)
		return;
	g = pw_table_get(&r->generations, &key, &is_new);
	if (!g) {
		r->oom = true;
		return;
	}
	if (pd->has_start_timestamp_ns && pd->start_timestamp_ns > 0)
		g->start = (uint64_t)pd->start_timestamp_ns;
}

/* A new uuid for a pid seen already: the pid's next process (trd_pid_ent). */
static struct trd_pid_ent *trd_process_new(struct trd *r, struct trd_track *t, int32_t pid)
{
	struct trd_pid_ent *e;
	size_t cap;
	bool is_new;

	e = pw_table_get(&r->process_ids, &pid, &is_new);
	if (!e) {
		r->oom = true;
		return NULL;
	}
	if (!is_new && e->uuid != t->uuid)
		e->generation++;
	if (is_new || e->uuid != t->uuid) {
		cap = r->cap_processes;
		if (!trd_reserve(r, (void **)&r->process_pids, &cap, r->n_processes,
				 sizeof(int32_t)))
			return NULL;
		cap = r->cap_processes;
		if (!trd_reserve(r, (void **)&r->process_names, &cap, r->n_processes,
				 sizeof(char *)))
			return NULL;
		r->cap_processes = cap;
		e->uuid = t->uuid;
		e->index = r->n_processes++;
		r->process_pids[e->index] = pid;
		r->process_names[e->index] = NULL;
	}
	return e;
}

static void trd_process_track(struct trd *r, struct trd_track *t,
			      const Perfetto__Protos__ProcessDescriptor *pd, bool is_new)
{
	const char *name = NULL;
	struct trd_pid_ent *e;

	if (is_new) {
		e = trd_process_new(r, t, pd->pid);
		if (!e)
			return;
		t->process_index = e->index;
		t->generation = e->generation;
		trd_generation_begins(r, pd->pid, e->generation, pd);
	}
	if (t->process_index >= r->n_processes)
		return;
	if (pd->process_name) {
		name = trd_str(r, pd->process_name, strlen(pd->process_name));
		r->process_names[t->process_index] = (char *)name;
	}
	if (r->ops->process && (is_new || pd->process_name))
		trd_emitted(r, r->ops->process(r->ctx, t->process_index, pd->pid, t->generation,
					       name, is_new));
	for (size_t i = 0; r->ops->process_label && i < pd->n_process_labels; i++)
		trd_emitted(r, r->ops->process_label(r->ctx, t->process_index, pd->pid,
						     t->generation,
						     trd_str(r, pd->process_labels[i],
							     strlen(pd->process_labels[i]))));
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

/*
 * The BOOTTIME of a descriptor's packet, when it has one: profd times the
 * descriptors of a reused pid's processes, in BOOTTIME (perfetto_writer.c).
 */
static const uint64_t *trd_descriptor_time(struct trd *r, const trd_packet *p, uint64_t *ts)
{
	if (!p->has_timestamp)
		return NULL;
	*ts = p->timestamp;
	if (p->has_timestamp_clock_id && p->timestamp_clock_id == TRD_CLOCK_BOOTTIME)
		return ts;
	if (!r->has_boot_to_trace)
		return NULL;
	*ts -= (uint64_t)r->boot_to_trace;
	return ts;
}

static void trd_track_descriptor(struct trd *r, const Perfetto__Protos__TrackDescriptor *d,
				 const trd_packet *p)
{
	uint64_t at;
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
		trd_thread_track(r, t, d->thread, is_new, trd_descriptor_time(r, p, &at));
	else if (t->kind == TRD_TRACK_PROCESS)
		trd_process_track(r, t, d->process, is_new);
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

	if (!r->st.has_clock_snapshot)
		r->st.first_clock_snapshot = r->pkt_index;
	r->st.has_clock_snapshot = true;
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

	if (r->last_clock_ix && r->last_clock_id == clock) {
		e = pw_table_at(&r->clocks_used, r->last_clock_ix - 1);
	} else {
		e = pw_table_get(&r->clocks_used, &clock, &is_new);
		if (!e) {
			r->oom = true;
			return;
		}
		r->last_clock_id = clock;
		r->last_clock_ix = pw_table_index(&r->clocks_used, e) + 1;
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
			r->st.sample_freq = d->perf_sample_defaults->timebase->frequency;
	}
	if (p->interned_data && s->valid)
		trd_intern(r, s, p->interned_data);
	else if (p->interned_data)
		trd_problem(r, "interned data on sequence %" PRIu32 " before its "
			    "SEQ_INCREMENTAL_STATE_CLEARED packet (discarded)", s->id);
}

/* profd's closing packet: the trace was written to its end (perfetto_writer.c pw_build_closing). */
static void trd_trace_attributes(struct trd *r, const Perfetto__Protos__TraceAttributes *ta)
{
	for (size_t i = 0; i < ta->n_attribute; i++) {
		const Perfetto__Protos__TraceAttributes__Attribute *a = ta->attribute[i];
		uint64_t before;

		if (!a->key || strcmp(a->key, PERFETTO_TRACE_END_KEY) ||
		    a->value_case != PERFETTO__PROTOS__TRACE_ATTRIBUTES__ATTRIBUTE__VALUE_LONG_VALUE)
			continue;
		r->st.ended = true;
		before = (uint64_t)a->long_value;
		if (before && before != r->st.n_packets - 1)
			trd_problem(r, "the closing packet follows %" PRIu64 " packets, the file holds "
				    "%zu before it: packets are missing", before, r->st.n_packets - 1);
	}
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
		trd_sched_clock_snapshot(r, p->clock_snapshot);
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
		trd_track_descriptor(r, p->track_descriptor, p);
	else if (s && p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT)
		trd_track_event(r, s, p);
	else if (s && p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PERF_SAMPLE)
		trd_perf_sample(r, s, p);
	else if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS)
		trd_ftrace_bundle(r, p->ftrace_events);
	else if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_SYSTEM_INFO)
		trd_system_info(r, p->system_info);
	else if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_ATTRIBUTES)
		trd_trace_attributes(r, p->trace_attributes);
}

/* ---- the packet dispatch ------------------------------------------------------- */

/* A packet and its track event as protobuf-c leaves them, reused for the hot ones. */
struct trd_fast {
	trd_packet p;
	Perfetto__Protos__TrackEvent te;
};

/*
 * profd's hot packet, a BEGIN/END/INSTANT on a thread's own sequence
 * (perfetto_writer.c pw_emit_slice): `40 ts 50 seq 5A len {48 type [50
 * iid]}` and nothing else. Decoded by hand into the packet protobuf-c would
 * have made (about a third of the reader's time otherwise); false for
 * anything else, which protobuf-c decodes.
 */
static trd_packet *trd_fast_slice(struct trd *r, const uint8_t *d, size_t len)
{
	struct trd_fast *f = r->fast;
	uint64_t ts, seq, te_len, type, iid = 0;
	size_t off = 1, seq_at;
	bool has_iid;

	if (!f || r->opts.no_fast_decode || !len || d[0] != 0x40 || trd_varint(d, len, &off, &ts) != 1)
		return NULL;
	if (off >= len || d[off++] != 0x50)
		return NULL;
	seq_at = off;
	if (trd_varint(d, len, &off, &seq) != 1 || off - seq_at > 5 || seq > UINT32_MAX)
		return NULL;
	if (off >= len || d[off++] != 0x5a || trd_varint(d, len, &off, &te_len) != 1 ||
	    te_len != len - off)
		return NULL;
	if (off + 2 > len || d[off] != 0x48 || d[off + 1] < TRD_BEGIN || d[off + 1] > TRD_INSTANT)
		return NULL;
	type = d[off + 1];
	off += 2;
	has_iid = off < len; /* iid 0 written is not iid absent: the importer looks it up */
	if (has_iid && (d[off++] != 0x50 || trd_varint(d, len, &off, &iid) != 1 || off != len))
		return NULL;
	f->p.has_timestamp = 1;
	f->p.timestamp = ts;
	f->p.has_timestamp_clock_id = 0; /* trd_place_timestamp may have set it */
	f->p.trusted_packet_sequence_id = (uint32_t)seq;
	f->te.type = (Perfetto__Protos__TrackEvent__Type)type;
	f->te.name_field_case = has_iid ? PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD_NAME_IID :
				      PERFETTO__PROTOS__TRACK_EVENT__NAME_FIELD__NOT_SET;
	f->te.name_iid = iid;
	return &f->p;
}

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
		trd_split_buffer(r, inner, inner_len, true);
	free(inner);
	return true;
}

/*
 * The one function every TracePacket goes through (its record's payload,
 * file order; nested: from inside a compressed packet): decode, then the
 * importer's per-packet steps.
 */
void trd_packet_record(struct trd *r, const uint8_t *data, size_t len, bool nested)
{
	trd_packet *p = trd_fast_slice(r, data, len); /* never a compressed packet */

	if (p) {
		r->st.n_packets++;
		trd_tokenize(r, p);
		return;
	}
	if (trd_compressed_record(r, data, len, nested))
		return;
	p = perfetto__protos__trace_packet__unpack(NULL, len, data);
	if (!p) {
		trd_problem(r, "TracePacket does not decode (%zu bytes; skipped)", len);
		return;
	}
	r->st.n_packets++;
	trd_tokenize(r, p);
	perfetto__protos__trace_packet__free_unpacked(p, NULL);
}

/* ---- set-up and end of file -------------------------------------------------------- */

void trd_reader_init(struct trd *r)
{
	r->fast = malloc(sizeof(*r->fast));
	if (r->fast) { /* the fields trd_fast_slice leaves alone stay as protobuf-c sets them */
		perfetto__protos__trace_packet__init(&r->fast->p);
		perfetto__protos__track_event__init(&r->fast->te);
		r->fast->p.optional_trusted_packet_sequence_id_case = SEQ_ID_CASE;
		r->fast->p.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT;
		r->fast->p.track_event = &r->fast->te;
		r->fast->te.has_type = 1;
	}
	pw_table_init(&r->seqs, sizeof(struct trd_seq), sizeof(uint32_t));
	pw_table_init(&r->tracks, sizeof(struct trd_track), sizeof(uint64_t));
	pw_table_init(&r->thread_ids, sizeof(struct trd_tid_ent), sizeof(struct trd_tid_key));
	pw_table_init(&r->process_ids, sizeof(struct trd_pid_ent), sizeof(int32_t));
	pw_table_init(&r->generations, sizeof(struct trd_gen_ent), sizeof(struct trd_gen_key));
	pw_table_init(&r->clocks_used, 2 * sizeof(uint32_t), sizeof(uint32_t));
	pw_table_init(&r->clocks_snapshotted, sizeof(uint32_t), sizeof(uint32_t));
}

/* Packets in a clock no snapshot relates to the trace's: the importer drops them. */
void trd_reader_finish(struct trd *r)
{
	uint32_t i;

	for (i = 0; i < r->clocks_used.n; i++) {
		const uint32_t *e = pw_table_at(&r->clocks_used, i);

		if (e[0] == TRD_CLOCK_BOOTTIME || pw_table_find(&r->clocks_snapshotted, &e[0]))
			continue;
		trd_problem_at(r, "%" PRIu32 " packets use clock %" PRIu32 ", which no "
			       "ClockSnapshot contains: the importer drops them "
			       "(clock_sync_failure)", e[1], e[0]);
	}
}

void trd_reader_free(struct trd *r)
{
	uint32_t i;

	for (i = 0; i < r->seqs.n; i++)
		trd_seq_free(pw_table_at(&r->seqs, i));
	pw_table_free(&r->seqs);
	pw_table_free(&r->tracks);
	pw_table_free(&r->thread_ids);
	pw_table_free(&r->process_ids);
	pw_table_free(&r->generations);
	pw_table_free(&r->clocks_used);
	pw_table_free(&r->clocks_snapshotted);
	free(r->fast);
	free(r->threads);
	free(r->process_pids);
	free(r->process_names);
}

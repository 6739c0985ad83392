/* SPDX-License-Identifier: MIT */
/*
 * Sequence 2 of the Perfetto writer: PerfSample packets and the symbol
 * dictionaries they reference (function names, mapping paths, build ids,
 * mappings, frames, callstacks), each entry defined in the packet of its
 * first use. Frames always carry a mapping; callstacks are root first.
 * If a packet cannot be built, the dictionaries are dropped and the next
 * packet clears the sequence again, so no iid is ever used undefined.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "viewer-export/perfetto_writer_internal.h"

/* InternedData field numbers. */
enum {
	PW_I_FUNCTION_NAMES = 5,
	PW_I_FRAMES = 6,
	PW_I_CALLSTACKS = 7,
	PW_I_BUILD_IDS = 16,
	PW_I_MAPPING_PATHS = 17,
	PW_I_MAPPINGS = 19,
};

struct pw_mapping_key {
	uint64_t start, end, pgoff, load_bias;
	uint32_t path_iid, build_id_iid;
};

struct pw_frame_ent {
	uint32_t mapping_iid; /* key: mapping_iid, zero, rel_pc */
	uint32_t zero;
	uint64_t rel_pc;
	uint32_t function_iid;
};
#define PW_FRAME_KEY_SIZE offsetof(struct pw_frame_ent, function_iid)

_Static_assert(sizeof(struct pw_mapping_key) == 40, "mapping key has no padding");
_Static_assert(PW_FRAME_KEY_SIZE == 16, "frame key has no padding");

void pw_symbols_init(struct pw_symbols *s)
{
	memset(s, 0, sizeof(*s));
	pw_table_init(&s->mappings, sizeof(struct pw_mapping_key), sizeof(struct pw_mapping_key));
	pw_table_init(&s->frames, sizeof(struct pw_frame_ent), PW_FRAME_KEY_SIZE);
}

void pw_symbols_free(struct pw_symbols *s)
{
	pw_strtab_free(&s->functions);
	pw_strtab_free(&s->paths);
	pw_strtab_free(&s->build_ids);
	pw_table_free(&s->mappings);
	pw_table_free(&s->frames);
	pw_strtab_free(&s->callstacks);
	pw_vec_free(&s->new_functions);
	pw_vec_free(&s->new_paths);
	pw_vec_free(&s->new_build_ids);
	pw_vec_free(&s->new_mappings);
	pw_vec_free(&s->new_frames);
	pw_vec_free(&s->stack);
}

void pw_symbols_restart(struct perfetto_writer *w)
{
	uint32_t freq = w->sym.freq_hz;

	pw_symbols_free(&w->sym);
	pw_symbols_init(&w->sym);
	w->sym.freq_hz = freq;
	w->seq_started[PW_SEQ_PERF] = false;
}

void perfetto_writer_set_sample_freq(struct perfetto_writer *w, uint32_t freq_hz)
{
	w->sym.freq_hz = freq_hz; /* read when sequence 2 is (re)started */
}

/* Interns bytes in `t`; a new entry's iid is queued on `pending`. Returns the iid or -ENOMEM. */
static int64_t pw_intern_str(struct pw_strtab *t, struct pw_vec *pending, const void *data,
			     size_t len)
{
	bool is_new;
	int64_t idx = pw_strtab_intern(t, data, len, &is_new);

	if (idx < 0)
		return idx;
	if (is_new && pw_vec_push(pending, (uint32_t)idx + 1) < 0)
		return -ENOMEM;
	return idx + 1;
}

/* Whether f's mapping is the cached last one (compared by content, not pointer). */
static bool pw_last_map_hit(const struct pw_symbols *s, const struct perfetto_frame *f,
			    const char *path)
{
	uint32_t bid = s->last_map.build_id_iid;
	size_t bid_len = f->build_id ? f->build_id_len : 0;

	if (!s->last_map.mapping_iid || f->map_start != s->last_map.start ||
	    f->map_end != s->last_map.end || f->map_pgoff != s->last_map.pgoff ||
	    f->load_bias != s->last_map.load_bias)
		return false;
	if (bid ? bid_len != s->build_ids.ents[bid - 1].len ||
			  memcmp(f->build_id, pw_strtab_data(&s->build_ids, bid - 1), bid_len) != 0
		: bid_len != 0)
		return false;
	return strcmp(path, (const char *)pw_strtab_data(&s->paths, s->last_map.path_iid - 1)) == 0;
}

static int64_t pw_intern_mapping(struct pw_symbols *s, const struct perfetto_frame *f)
{
	const char *path = f->mapping_path ? f->mapping_path : "[unknown]";
	struct pw_mapping_key key, *m;
	int64_t path_iid, bid_iid = 0;
	uint32_t iid;
	bool is_new;

	if (pw_last_map_hit(s, f, path))
		return s->last_map.mapping_iid;

	path_iid = pw_intern_str(&s->paths, &s->new_paths, path, strlen(path));
	if (path_iid < 0)
		return path_iid;
	if (f->build_id && f->build_id_len) {
		bid_iid = pw_intern_str(&s->build_ids, &s->new_build_ids, f->build_id,
					f->build_id_len);
		if (bid_iid < 0)
			return bid_iid;
	}
	memset(&key, 0, sizeof(key));
	key.start = f->map_start;
	key.end = f->map_end;
	key.pgoff = f->map_pgoff;
	key.load_bias = f->load_bias;
	key.path_iid = (uint32_t)path_iid;
	key.build_id_iid = (uint32_t)bid_iid;
	m = pw_table_get(&s->mappings, &key, &is_new);
	if (!m)
		return -ENOMEM;
	iid = pw_table_index(&s->mappings, m) + 1;
	if (is_new && pw_vec_push(&s->new_mappings, iid) < 0)
		return -ENOMEM;
	s->last_map.start = key.start;
	s->last_map.end = key.end;
	s->last_map.pgoff = key.pgoff;
	s->last_map.load_bias = key.load_bias;
	s->last_map.path_iid = key.path_iid;
	s->last_map.build_id_iid = key.build_id_iid;
	s->last_map.mapping_iid = iid;
	return iid;
}

static int64_t pw_intern_frame(struct pw_symbols *s, const struct perfetto_frame *f)
{
	struct pw_frame_ent key, *fe;
	int64_t mapping_iid, fn_iid;
	uint32_t iid;
	char hex[96];
	bool is_new;

	mapping_iid = pw_intern_mapping(s, f);
	if (mapping_iid < 0)
		return mapping_iid;
	memset(&key, 0, sizeof(key));
	key.mapping_iid = (uint32_t)mapping_iid;
	key.rel_pc = f->rel_pc;
	fe = pw_table_get(&s->frames, &key, &is_new);
	if (!fe)
		return -ENOMEM;
	iid = pw_table_index(&s->frames, fe) + 1;
	if (!is_new)
		return iid;
	if (f->function) {
		fn_iid = pw_intern_str(&s->functions, &s->new_functions, f->function,
				       strlen(f->function));
	} else {
		/* as perf names it: which file, where (the same offset means nothing across files) */
		const char *slash = f->mapping_path ? strrchr(f->mapping_path, '/') : NULL;
		const char *file = slash ? slash + 1 : f->mapping_path ? f->mapping_path : "";
		int n = snprintf(hex, sizeof(hex), "%s+0x%" PRIx64, file, f->rel_pc);

		if (n >= (int)sizeof(hex))
			n = (int)sizeof(hex) - 1; /* a long file name, cut */

		fn_iid = pw_intern_str(&s->functions, &s->new_functions, hex, (size_t)n);
	}
	if (fn_iid < 0)
		return fn_iid;
	fe->function_iid = (uint32_t)fn_iid;
	if (pw_vec_push(&s->new_frames, iid) < 0)
		return -ENOMEM;
	return iid;
}

/* Interns the callstack; *is_new when its definition must go in this packet. */
static int64_t pw_intern_stack(struct pw_symbols *s, const struct perfetto_frame *frames,
			       size_t n, bool *is_new)
{
	int64_t iid;
	size_t i;

	s->stack.n = 0;
	for (i = 0; i < n; i++) {
		iid = pw_intern_frame(s, &frames[i]);
		if (iid < 0)
			return iid;
		if (pw_vec_push(&s->stack, (uint32_t)iid) < 0)
			return -ENOMEM;
	}
	iid = pw_strtab_intern(&s->callstacks, s->stack.v, n * sizeof(uint32_t), is_new);
	return iid < 0 ? iid : iid + 1;
}

static void pw_emit_strings(struct pwb *b, uint32_t field, const struct pw_strtab *t,
			    const struct pw_vec *iids)
{
	size_t i, e;

	for (i = 0; i < iids->n; i++) {
		uint32_t idx = iids->v[i] - 1;

		e = pwb_open(b, field);
		pwb_uint(b, 1, iids->v[i]);
		pwb_bytes(b, 2, pw_strtab_data(t, idx), t->ents[idx].len);
		pwb_close(b, e);
	}
}

static void pw_emit_frames(struct pwb *b, const struct pw_symbols *s)
{
	size_t i, e;

	for (i = 0; i < s->new_frames.n; i++) {
		const struct pw_frame_ent *f = pw_table_at(&s->frames, s->new_frames.v[i] - 1);

		e = pwb_open(b, PW_I_FRAMES);
		pwb_uint(b, 1, s->new_frames.v[i]);
		pwb_uint(b, 2, f->function_iid);
		pwb_uint(b, 3, f->mapping_iid);
		pwb_uint(b, 4, f->rel_pc);
		pwb_close(b, e);
	}
}

static void pw_emit_mappings(struct pwb *b, const struct pw_symbols *s)
{
	size_t i, e;

	for (i = 0; i < s->new_mappings.n; i++) {
		uint32_t iid = s->new_mappings.v[i];
		const struct pw_mapping_key *m = pw_table_at(&s->mappings, iid - 1);

		e = pwb_open(b, PW_I_MAPPINGS);
		pwb_uint(b, 1, iid);
		if (m->build_id_iid)
			pwb_uint(b, 2, m->build_id_iid);
		pwb_uint(b, 3, 0); /* start_offset: first mapping of the file */
		pwb_uint(b, 4, m->start);
		pwb_uint(b, 5, m->end);
		pwb_uint(b, 6, m->load_bias);
		pwb_uint(b, 7, m->path_iid); /* path_string_ids: the full path */
		pwb_uint(b, 8, m->pgoff);    /* exact_offset */
		pwb_close(b, e);
	}
}

static void pw_emit_callstack(struct pwb *b, const struct pw_symbols *s, uint64_t iid)
{
	size_t i, e = pwb_open(b, PW_I_CALLSTACKS);

	pwb_uint(b, 1, iid);
	for (i = 0; i < s->stack.n; i++)
		pwb_uint(b, 2, s->stack.v[i]); /* frame_ids: unpacked, root first */
	pwb_close(b, e);
}

static void pw_emit_interned(struct perfetto_writer *w, uint64_t new_stack_iid)
{
	struct pw_symbols *s = &w->sym;
	struct pwb *b = &w->pkt;
	size_t in;

	if (!new_stack_iid && !s->new_functions.n && !s->new_frames.n && !s->new_paths.n &&
	    !s->new_build_ids.n && !s->new_mappings.n)
		return;
	in = pwb_open(b, PW_F_INTERNED_DATA);
	pw_emit_strings(b, PW_I_FUNCTION_NAMES, &s->functions, &s->new_functions);
	pw_emit_frames(b, s);
	if (new_stack_iid)
		pw_emit_callstack(b, s, new_stack_iid);
	pw_emit_strings(b, PW_I_BUILD_IDS, &s->build_ids, &s->new_build_ids);
	pw_emit_strings(b, PW_I_MAPPING_PATHS, &s->paths, &s->new_paths);
	pw_emit_mappings(b, s);
	pwb_close(b, in);
}

static void pw_pending_clear(struct pw_symbols *s)
{
	s->new_functions.n = 0;
	s->new_paths.n = 0;
	s->new_build_ids.n = 0;
	s->new_mappings.n = 0;
	s->new_frames.n = 0;
}

int perfetto_writer_sample(struct perfetto_writer *w, uint64_t ts, uint32_t cpu, pid_t pid,
			   pid_t tid, const struct perfetto_frame *frames, size_t n_frames)
{
	int64_t stack_iid = 0;
	bool stack_new = false;
	size_t mark, ps;
	int ret = 0;

	if (n_frames && !frames)
		return -EINVAL;
	if (n_frames > UINT32_MAX / sizeof(uint32_t))
		return -E2BIG;
	pw_chunk_check(w);
	pw_pending_clear(&w->sym);
	if (n_frames) {
		stack_iid = pw_intern_stack(&w->sym, frames, n_frames, &stack_new);
		if (stack_iid < 0) {
			ret = (int)stack_iid;
			goto err_reset;
		}
	}
	mark = pw_packet_begin(w, PW_SEQ_PERF, ts, true);
	pw_emit_interned(w, stack_new ? (uint64_t)stack_iid : 0);
	ps = pwb_open(&w->pkt, PW_F_PERF_SAMPLE);
	pwb_uint(&w->pkt, 1, cpu);
	pwb_uint(&w->pkt, 2, (uint32_t)pid);
	pwb_uint(&w->pkt, 3, (uint32_t)tid);
	if (stack_iid)
		pwb_uint(&w->pkt, 4, (uint64_t)stack_iid);
	pwb_uint(&w->pkt, 5, PW_MODE_USER);
	pwb_close(&w->pkt, ps);
	ret = pw_packet_end(w, mark);
	if (ret < 0)
		goto err_reset;
	w->st.samples++;
	return 0;

err_reset:
	/* entries interned above were never written: start the sequence over */
	pw_symbols_restart(w);
	return ret;
}

int perfetto_writer_sample_skipped(struct perfetto_writer *w, uint64_t ts, uint32_t cpu,
				   pid_t pid, pid_t tid)
{
	size_t mark, ps;

	pw_chunk_check(w);
	mark = pw_packet_begin(w, PW_SEQ_PERF, ts, true);
	ps = pwb_open(&w->pkt, PW_F_PERF_SAMPLE);
	pwb_uint(&w->pkt, 1, cpu);
	pwb_uint(&w->pkt, 2, (uint64_t)pid);
	pwb_uint(&w->pkt, 3, (uint64_t)tid);
	pwb_uint(&w->pkt, 18, 2); /* sample_skipped_reason = PROFILER_SKIP_UNWIND_STAGE */
	pwb_close(&w->pkt, ps);
	return pw_packet_end(w, mark);
}

int perfetto_writer_samples_lost(struct perfetto_writer *w, uint64_t ts, uint32_t cpu,
				 uint64_t lost)
{
	size_t mark, ps;

	pw_chunk_check(w);
	mark = pw_packet_begin(w, PW_SEQ_PERF, ts, true);
	ps = pwb_open(&w->pkt, PW_F_PERF_SAMPLE);
	pwb_uint(&w->pkt, 1, cpu);
	pwb_uint(&w->pkt, 2, 0); /* pid 0: a loss record, not a sample */
	pwb_uint(&w->pkt, 17, lost); /* kernel_records_lost */
	pwb_close(&w->pkt, ps);
	return pw_packet_end(w, mark);
}

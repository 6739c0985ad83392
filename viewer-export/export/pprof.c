// SPDX-License-Identifier: MIT
/*
 * pprof's profile.proto (github.com/google/pprof proto/profile.proto),
 * gzip-compressed, as `go tool pprof`, speedscope and the pprof-speaking
 * profiling servers read it. Four sample types: samples/count and
 * cpu/nanoseconds (count x the sampling period, 1e9 / the trace's frequency)
 * for the CPU samples, calls/count and call_time/nanoseconds for the
 * instrumented calls (each call a sample whose stack is its chain of
 * instrumented callers; time is self time, so stacks sum without counting a
 * nested call twice). A sample's values that do not apply are zero; cpu is
 * the default type. Functions by name, mappings by path with their build
 * ids, locations per (function, mapping) (the trace keeps no addresses).
 *
 * Encoded by hand with perfetto_intern.h's pwb encoder rather than a
 * protoc-c copy of profile.proto: the message is written once, at the end,
 * from tables this module holds anyway, with a dozen fields. Each CPU
 * sample is labelled with its pid, and a reused pid's later processes
 * (trace_reader.h, generation) also with "pid_generation", so that the
 * processes of one pid stay apart.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "viewer-export/export/export.h"
#include "viewer-export/perfetto_intern.h"

enum { V_SAMPLES, V_CPU_NS, V_CALLS, V_CALL_NS };

/* Fixed strings, first in the string table (index = position). */
static const char *const fixed[] = {
	"", "samples", "count", "cpu", "nanoseconds", "calls", "call_time", "[unknown]", "pid",
	"pid_generation",
};
enum { S_EMPTY, S_SAMPLES, S_COUNT, S_CPU, S_NS, S_CALLS, S_CALL_TIME, S_UNKNOWN, S_PID,
       S_PID_GENERATION, S_FIXED };

struct pprof {
	struct export_base base;
	struct export_names strings;   /* every string, by the stream's pointer: id = index */
	struct export_stacks funcs;    /* [name] -> v[0] function id */
	struct export_stacks maps;     /* [path] -> v[0] mapping id, v[1] build id string */
	struct export_stacks locs;     /* [function id, mapping id] -> v[0] location id */
	/* location ids, leaf first, then the process's pid (0: none) and generation -> the values */
	struct export_stacks samples;
	struct export_calls *chains;
	uint64_t *buf;                 /* location ids of the stack being built */
	uint32_t *ids;
	size_t buf_cap;
	const char *main_path;         /* the mapping of a sampled stack's root frame */
	bool main_from_main_thread;    /* ... of the main thread's: _start's, the executable */
};

static int64_t str_id(struct pprof *p, const char *s)
{
	return export_names_id(&p->strings, s);
}

/* The id of key in t, numbered from 1 in first-seen order (v[0]); extra goes to v[1]. */
static int64_t table_id(struct export_stacks *t, const uint32_t *key, size_t n, int64_t extra)
{
	const struct export_stack *s = export_stacks_find(t, key, n);
	int64_t v[EXPORT_VALUES] = { (int64_t)t->n + 1, extra };
	int rc;

	if (s)
		return s->v[0];
	rc = export_stacks_add(t, key, n, v);
	return rc < 0 ? rc : v[0];
}

/* The location of function `name` in mapping `path` (NULL: unknown), with its build id. */
static int64_t location(struct pprof *p, const char *name, const char *path, const char *bid)
{
	int64_t name_id = str_id(p, name), fn, map = 0;
	uint32_t key[2];

	if (name_id < 0)
		return name_id;
	key[0] = (uint32_t)name_id;
	fn = table_id(&p->funcs, key, 1, 0);
	if (fn < 0)
		return fn;
	if (path) {
		int64_t path_id = str_id(p, path), bid_id = bid ? str_id(p, bid) : 0;

		if (path_id < 0 || bid_id < 0)
			return -ENOMEM;
		key[0] = (uint32_t)path_id;
		map = table_id(&p->maps, key, 1, bid_id);
		if (map < 0)
			return map;
	}
	key[0] = (uint32_t)fn;
	key[1] = (uint32_t)map;
	return table_id(&p->locs, key, 2, 0);
}

static bool reserve(struct pprof *p, size_t n)
{
	if (n <= p->buf_cap)
		return true;
	free(p->buf);
	free(p->ids);
	p->buf = malloc(n * sizeof(*p->buf));
	p->ids = malloc(n * sizeof(*p->ids));
	p->buf_cap = p->buf && p->ids ? n : 0;
	return p->buf_cap != 0;
}

static int pprof_sample(void *ctx, const struct trace_stream_sample *smp)
{
	struct pprof *p = ctx;
	const struct trace_sample *s = &smp->s;
	size_t n = s->n_frames ? s->n_frames : 1;
	int64_t v[EXPORT_VALUES] = { [V_SAMPLES] = 1 };

	if (!reserve(p, n + 2))
		return -ENOMEM;
	/* the main thread's root frame is _start, in the executable; another thread's is libc's */
	if ((!p->main_path || !p->main_from_main_thread) && s->n_frames && s->frame_mappings &&
	    s->frame_mappings[0] && s->frame_mappings[0][0] != '[') {
		p->main_path = s->frame_mappings[0];
		p->main_from_main_thread = s->tid == s->pid;
	}
	for (size_t i = 0; i < n; i++) { /* leaf first */
		size_t k = s->n_frames - 1 - i;
		int64_t loc = !s->n_frames ? location(p, fixed[S_UNKNOWN], NULL, NULL)
			: location(p, s->frames[k], s->frame_mappings ? s->frame_mappings[k] : NULL,
				   s->frame_build_ids ? s->frame_build_ids[k] : NULL);

		if (loc < 0)
			return (int)loc;
		p->ids[i] = (uint32_t)loc;
	}
	p->ids[n] = (uint32_t)s->pid; /* a process tree's samples stay apart, labelled */
	p->ids[n + 1] = s->generation;
	return export_stacks_add(&p->samples, p->ids, n + 2, v);
}

static int pprof_chain(void *ctx, const uint32_t *ids, size_t n, int64_t calls, int64_t ns)
{
	struct pprof *p = ctx;
	int64_t v[EXPORT_VALUES] = { [V_CALLS] = calls, [V_CALL_NS] = ns };
	struct export_names *names = &p->strings;

	if (!reserve(p, n + 2))
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) { /* ids are string ids of the names, root first */
		int64_t loc = location(p, names->names[ids[n - 1 - i]], NULL, NULL);

		if (loc < 0)
			return (int)loc;
		p->ids[i] = (uint32_t)loc;
	}
	p->ids[n] = p->ids[n + 1] = 0; /* chains are summed over processes */
	return export_stacks_add(&p->samples, p->ids, n + 2, v);
}

static int pprof_slice(void *ctx, const struct trace_stream_slice *s)
{
	return export_calls_slice(((struct pprof *)ctx)->chains, s);
}

/* ---- the Profile message ------------------------------------------------------- */

static void value_type(struct pwb *b, uint32_t field, uint64_t type, uint64_t unit)
{
	size_t m = pwb_open(b, field);

	pwb_uint(b, 1, type);
	pwb_uint(b, 2, unit);
	pwb_close(b, m);
}

static void encode_samples(struct pwb *b, const struct pprof *p, uint64_t period)
{
	for (size_t i = 0; i < p->samples.n; i++) {
		const struct export_stack *s = &p->samples.items[i];
		const uint32_t *ids = export_stack_ids(&p->samples, s);
		size_t m = pwb_open(b, 2), packed;

		packed = pwb_open(b, 1); /* location_id, leaf first; the last two: pid, generation */
		for (size_t k = 0; k + 2 < s->n; k++)
			pwb_varint(b, ids[k]);
		pwb_close(b, packed);
		packed = pwb_open(b, 2); /* value */
		pwb_varint(b, (uint64_t)s->v[V_SAMPLES]);
		pwb_varint(b, (uint64_t)s->v[V_SAMPLES] * period);
		pwb_varint(b, (uint64_t)s->v[V_CALLS]);
		pwb_varint(b, (uint64_t)s->v[V_CALL_NS]);
		pwb_close(b, packed);
		if (s->n >= 2 && ids[s->n - 2]) {
			size_t label = pwb_open(b, 3); /* Label: key "pid", num */

			pwb_uint(b, 1, S_PID);
			pwb_uint(b, 3, ids[s->n - 2]);
			pwb_close(b, label);
		}
		if (s->n >= 2 && ids[s->n - 1]) {
			size_t label = pwb_open(b, 3); /* Label: key "pid_generation", num */

			pwb_uint(b, 1, S_PID_GENERATION);
			pwb_uint(b, 3, ids[s->n - 1]);
			pwb_close(b, label);
		}
		pwb_close(b, m);
	}
}

/*
 * The order pprof should see a mapping in: 0 the program's executable (the
 * mapping of a sampled stack's root frame), 1 another file, 2 a pseudo-mapping
 * ("[kernel.kallsyms]", "[vdso]", "[profd]").
 */
static int mapping_rank(const struct pprof *p, const struct export_stack *s)
{
	uint32_t path = export_stack_ids(&p->maps, s)[0];
	const char *name = path < p->strings.n ? p->strings.names[path] : "";

	if (p->main_path && strcmp(name, p->main_path) == 0)
		return 0;
	return name[0] == '[' ? 2 : 1;
}

static void encode_mappings(struct pwb *b, const struct pprof *p)
{
	/* pprof takes the first mapping for the main binary */
	for (int rank = 0; rank <= 2; rank++) {
		for (size_t i = 0; i < p->maps.n; i++) {
			const struct export_stack *s = &p->maps.items[i];
			size_t m;

			if (mapping_rank(p, s) != rank)
				continue;
			m = pwb_open(b, 3);
			pwb_uint(b, 1, (uint64_t)s->v[0]);
			pwb_uint(b, 5, export_stack_ids(&p->maps, s)[0]);
			if (s->v[1])
				pwb_uint(b, 6, (uint64_t)s->v[1]);
			pwb_uint(b, 7, 1); /* has_functions */
			pwb_close(b, m);
		}
	}
}

static void encode_tables(struct pwb *b, const struct pprof *p)
{
	encode_mappings(b, p);
	for (size_t i = 0; i < p->locs.n; i++) { /* Location with one Line */
		const struct export_stack *s = &p->locs.items[i];
		const uint32_t *key = export_stack_ids(&p->locs, s);
		size_t m = pwb_open(b, 4), line;

		pwb_uint(b, 1, (uint64_t)s->v[0]);
		if (key[1])
			pwb_uint(b, 2, key[1]);
		line = pwb_open(b, 4);
		pwb_uint(b, 1, key[0]);
		pwb_close(b, line);
		pwb_close(b, m);
	}
	for (size_t i = 0; i < p->funcs.n; i++) { /* Function */
		const struct export_stack *s = &p->funcs.items[i];
		size_t m = pwb_open(b, 5);

		pwb_uint(b, 1, (uint64_t)s->v[0]);
		pwb_uint(b, 2, export_stack_ids(&p->funcs, s)[0]);
		pwb_uint(b, 3, export_stack_ids(&p->funcs, s)[0]);
		pwb_close(b, m);
	}
	for (size_t i = 0; i < p->strings.n; i++)
		pwb_str(b, 6, p->strings.names[i]);
}

static int encode_profile(struct pwb *b, const struct pprof *p)
{
	uint64_t period = p->base.sample_freq ? 1000000000ull / p->base.sample_freq : 0;

	value_type(b, 1, S_SAMPLES, S_COUNT);
	value_type(b, 1, S_CPU, S_NS);
	value_type(b, 1, S_CALLS, S_COUNT);
	value_type(b, 1, S_CALL_TIME, S_NS);
	encode_samples(b, p, period);
	encode_tables(b, p);
	value_type(b, 11, S_CPU, S_NS); /* period_type */
	pwb_uint(b, 12, period);
	pwb_uint(b, 14, S_CPU); /* default_sample_type */
	return b->oom ? -ENOMEM : 0;
}

/* gzip (deflate with a gzip header) of buf to out. */
static int gzip_write(struct pprof *p, const uint8_t *buf, size_t len, FILE *out)
{
	z_stream z = { 0 };
	uint8_t chunk[65536];
	int zr;

	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return export_fail(&p->base, ENOMEM, "cannot start gzip compression");
	z.next_in = (Bytef *)buf;
	z.avail_in = (uInt)len;
	do {
		z.next_out = chunk;
		z.avail_out = sizeof(chunk);
		zr = deflate(&z, Z_FINISH);
		if (zr == Z_STREAM_ERROR)
			break;
		if (fwrite(chunk, 1, sizeof(chunk) - z.avail_out, out) != sizeof(chunk) - z.avail_out) {
			deflateEnd(&z);
			return export_fail(&p->base, errno ? errno : EIO, "cannot write the output: %s",
					   strerror(errno ? errno : EIO));
		}
	} while (zr != Z_STREAM_END);
	deflateEnd(&z);
	return zr == Z_STREAM_END ? 0 : export_fail(&p->base, EIO, "gzip compression failed");
}

static int pprof_init(struct pprof *p)
{
	for (size_t i = 0; i < S_FIXED; i++)
		if (export_names_id(&p->strings, fixed[i]) != (int64_t)i)
			return -ENOMEM;
	p->chains = export_calls_new(&p->strings, pprof_chain, p);
	return p->chains ? 0 : -ENOMEM;
}

static void pprof_free(struct pprof *p)
{
	export_calls_free(p->chains);
	export_stacks_free(&p->funcs);
	export_stacks_free(&p->maps);
	export_stacks_free(&p->locs);
	export_stacks_free(&p->samples);
	export_names_free(&p->strings);
	free(p->buf);
	free(p->ids);
}

int export_pprof(const char *path, FILE *out, const struct export_opts *o, char *err)
{
	static const struct trace_stream_ops ops = { .sample = pprof_sample, .slice = pprof_slice };
	struct pprof p = { .base.err = err };
	struct pwb b = { 0 };
	int rc;

	err[0] = 0;
	rc = pprof_init(&p) ? export_fail(&p.base, ENOMEM, "out of memory")
			    : export_stream_run(path, &ops, &p.base, o, false);
	if (!rc && encode_profile(&b, &p) < 0)
		rc = export_fail(&p.base, ENOMEM, "out of memory encoding the profile");
	if (!rc)
		rc = gzip_write(&p, b.p, b.len, out);
	export_stream_done(&p.base);
	pwb_free(&b);
	pprof_free(&p);
	return rc;
}

// SPDX-License-Identifier: MIT
/*
 * Chrome's Trace Event Format (JSON object form, {"traceEvents":[...]}), as
 * chrome://tracing and trace_processor's JSON importer load it, written while
 * the trace streams:
 *  - one complete event ("ph":"X") per instrumented call, on its pid/tid, with
 *    the trace's ts and dur (microseconds, 3 decimals keep the nanoseconds);
 *    a call still open at the end is a "B" with no "E" (open to the end).
 *    Events come in END order: the format needs no sort, nesting follows
 *    from ts/dur;
 *    its --args/--retval values (arg1, fparg1, retval...) are its "args";
 *  - "M" metadata events naming processes and threads (each descriptor: the
 *    last name wins);
 *  - the CPU samples as instant events ("ph":"i", thread scope) on a pseudo
 *    thread per sampled thread, "TID samples" (tid + EXPORT_SAMPLES_TID), so
 *    they do not interleave with the calls' slices; name "cpu sample" (one
 *    named after a function would count as a call of it), args.leaf: the
 *    leaf frame, args.stack: the frames root first, ';'-separated;
 *  - a pid reused within the trace (trace_reader.h, generation): its later
 *    processes are pid + generation * CHROME_PID_REUSED (the format knows
 *    a process by its pid alone), named "NAME (pid PID)".
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "viewer-export/export/export.h"

#define CHROME_SAMPLES_TID (1 << 30) /* above any Linux tid (PID_MAX_LIMIT is 2^22) */
#define CHROME_SAMPLE_NAME "cpu sample"
#define CHROME_PID_REUSED 4194304 /* PID_MAX_LIMIT: above any pid */

/* The pid the format shows for the generation-th process of pid. */
static int64_t chrome_pid(int32_t pid, uint32_t generation)
{
	return (int64_t)pid + (int64_t)generation * CHROME_PID_REUSED;
}

struct chrome {
	struct export_base base;
	FILE *out;
	bool first;
	struct export_names sampled; /* threads given a samples pseudo thread, by (pid, tid) key */
};

/* s's characters as JSON string content (no quotes). */
static void json_chars_n(FILE *out, const char *s, size_t n)
{
	for (const unsigned char *p = (const unsigned char *)s; p < (const unsigned char *)s + n; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(out, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", out);
		else if (*p < 0x20 || *p == 0x7f)
			fprintf(out, "\\u%04x", *p);
		else
			fputc(*p, out); /* UTF-8 passes through as the program named it */
	}
}

static void json_chars(FILE *out, const char *s)
{
	json_chars_n(out, s ? s : "", s ? strlen(s) : 0);
}

/*
 * A slice's --args/--retval values as its "args": strings as strings,
 * numbers as numbers but for pointers (0x...) and non-finite doubles, which
 * JSON has no number for.
 */
static void json_values(FILE *out, const char *values)
{
	struct trace_value v;
	const char *sep = ",\"args\":{";

	while (trace_values_next(&values, &v)) {
		bool number = v.type == 'n' && v.value_len && strspn(v.value, "-0123456789.e+") >=
							       v.value_len;
		bool boolean = v.type == 'n' && ((v.value_len == 4 && !memcmp(v.value, "true", 4)) ||
						 (v.value_len == 5 && !memcmp(v.value, "false", 5)));

		fputs(sep, out);
		sep = ",";
		fputc('"', out);
		json_chars_n(out, v.name, v.name_len);
		fputs("\":", out);
		if (number || boolean) {
			fwrite(v.value, 1, v.value_len, out);
			continue;
		}
		fputc('"', out);
		json_chars_n(out, v.value, v.value_len);
		fputc('"', out);
	}
	if (sep[0] == ',' && sep[1] == '\0')
		fputc('}', out);
}

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	json_chars(out, s);
	fputc('"', out);
}

/* Trace ns as microseconds with 3 decimals, exact. */
static void json_us(FILE *out, uint64_t ns)
{
	fprintf(out, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

static FILE *event(struct chrome *c)
{
	fputs(c->first ? "\n" : ",\n", c->out);
	c->first = false;
	return c->out;
}

static void meta(struct chrome *c, const char *what, int64_t pid, int32_t tid, const char *name)
{
	FILE *out = event(c);

	fprintf(out, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%" PRId64 ",\"tid\":%d,\"args\":{\"name\":",
		what, pid, tid);
	json_str(out, name);
	fputs("}}", out);
}

static int chrome_process(void *ctx, size_t index, int32_t pid, uint32_t generation,
			  const char *name, bool is_new)
{
	char named[160];

	(void)index;
	(void)is_new;
	if (name && generation) /* its own pid is not the one the format shows */
		snprintf(named, sizeof(named), "%s (pid %d)", name, (int)pid);
	if (name)
		meta(ctx, "process_name", chrome_pid(pid, generation), 0, generation ? named : name);
	return 0;
}

static int chrome_thread(void *ctx, size_t index, const struct trace_thread *t, bool is_new)
{
	(void)index;
	(void)is_new;
	if (t->name)
		meta(ctx, "thread_name", chrome_pid(t->pid, t->generation), t->tid, t->name);
	return 0;
}

static int chrome_slice(void *ctx, const struct trace_stream_slice *s)
{
	struct chrome *c = ctx;
	FILE *out = event(c);

	fprintf(out, "{\"ph\":\"%s\",\"pid\":%" PRId64 ",\"tid\":%d,\"ts\":",
		s->dur < 0 ? "B" : "X", chrome_pid(s->pid, s->generation), s->tid);
	json_us(out, s->ts);
	if (s->dur >= 0) {
		fputs(",\"dur\":", out);
		json_us(out, (uint64_t)s->dur);
	}
	fputs(",\"name\":", out);
	json_str(out, s->name ? s->name : "?");
	if (s->args.values)
		json_values(out, s->args.values);
	fputc('}', out);
	return 0;
}

/* The sampled thread's pseudo thread, named once. */
static int samples_thread(struct chrome *c, int64_t pid, int32_t tid)
{
	/* a (pid, tid) key as a fake pointer: export_names only compares them */
	const char *key = (const char *)(uintptr_t)(((uint64_t)pid << 32) | (uint32_t)tid);
	size_t before = c->sampled.n;
	int64_t id = export_names_id(&c->sampled, key);
	char name[48];

	if (id < 0)
		return (int)id;
	if (c->sampled.n != before) {
		snprintf(name, sizeof(name), "%d samples", tid);
		meta(c, "thread_name", pid, tid + CHROME_SAMPLES_TID, name);
	}
	return 0;
}

static int chrome_sample(void *ctx, const struct trace_stream_sample *smp)
{
	struct chrome *c = ctx;
	const struct trace_sample *s = &smp->s;
	int64_t pid = chrome_pid(s->pid, s->generation);
	int rc = samples_thread(c, pid, s->tid);
	FILE *out;

	if (rc)
		return rc;
	out = event(c);
	fprintf(out, "{\"ph\":\"i\",\"s\":\"t\",\"pid\":%" PRId64 ",\"tid\":%d,\"ts\":", pid,
		s->tid + CHROME_SAMPLES_TID);
	json_us(out, s->ts);
	/* named for what it is: an event named after a function would count as its call */
	fputs(",\"name\":\"" CHROME_SAMPLE_NAME "\",\"args\":{\"leaf\":", out);
	json_str(out, s->n_frames ? s->frames[s->n_frames - 1] : "[unknown]");
	fprintf(out, ",\"cpu\":%u,\"stack\":\"", s->cpu);
	for (size_t k = 0; k < s->n_frames; k++) {
		if (k)
			fputc(';', out);
		json_chars(out, s->frames[k]);
	}
	fputs("\"}}", out);
	return 0;
}

int export_chrome(const char *path, FILE *out, const struct export_opts *o, char *err)
{
	static const struct trace_stream_ops ops = {
		.process = chrome_process, .thread = chrome_thread,
		.slice = chrome_slice, .sample = chrome_sample,
	};
	struct chrome c = { .base.err = err, .out = out, .first = true };
	int rc;

	err[0] = 0;
	fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", out);
	rc = export_stream_run(path, &ops, &c.base, o, false);
	export_stream_done(&c.base);
	fputs("\n]}\n", out);
	export_names_free(&c.sampled);
	return rc;
}

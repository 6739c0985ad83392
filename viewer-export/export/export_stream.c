// SPDX-License-Identifier: MIT
/*
 * The exports' stream run (export.h): reads the trace once through
 * trace_stream.h and decides which of the reader's problems end an export.
 * Damage to the file itself (its framing, a truncated or undecodable packet,
 * a file that is not a Perfetto trace) is fatal: an export of part of a trace
 * would look whole. A broken importer rule in a readable trace is not: the
 * importers keep going too, so the export does, warning once.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "viewer-export/export/export.h"

#define EXPORT_REORDER 1024 /* slice events per track put back in order, as the report does */
#define EXPORT_DAMAGED 1    /* a problem callback's stop code: err is set */

int export_fail(struct export_base *base, int e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(base->err, EXPORT_ERR_LEN, fmt, ap);
	va_end(ap);
	return -e;
}

static bool is_damage(const char *line)
{
	static const char *const fatal[] = {
		"truncated packet", "broken record framing", "not a Perfetto protobuf trace",
		"does not decode", "not a packet",
	};

	for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
		if (strstr(line, fatal[i]))
			return true;
	return false;
}

static int run_problem(void *ctx, const char *line)
{
	struct export_base *base = ctx;

	if (is_damage(line)) {
		snprintf(base->err, EXPORT_ERR_LEN, "damaged trace: %s", line);
		return EXPORT_DAMAGED;
	}
	if (!base->problems++)
		snprintf(base->first_problem, sizeof(base->first_problem), "%s", line);
	return 0;
}

int export_stream_run(const char *path, const struct trace_stream_ops *ops,
		      struct export_base *base, const struct export_opts *o, bool attribute)
{
	struct trace_stream_opts so = {
		.window = o->window, .reorder = EXPORT_REORDER, .attribute_samples = attribute,
	};
	struct trace_stream_ops run_ops = *ops;
	const struct trace_stream_stats *st;
	char cut[TRACE_STREAM_CUT_LINE];
	struct trace_stream *ts;
	int err;

	run_ops.problem = run_problem;
	ts = trace_stream_new(&run_ops, base, &so);
	if (!ts)
		return export_fail(base, ENOMEM, "out of memory");
	err = trace_stream_read_file(ts, path);
	st = trace_stream_get_stats(ts);
	base->sample_freq = st->sample_freq;
	if (err == EXPORT_DAMAGED) {
		err = -EINVAL;
	} else if (err < 0 && !base->err[0]) {
		snprintf(base->err, EXPORT_ERR_LEN, "cannot read trace: %s", strerror(-err));
	} else if (err > 0 && !base->err[0]) { /* an exporter's callback stopped it */
		snprintf(base->err, EXPORT_ERR_LEN, "export stopped");
		err = -EIO;
	} else if (!err && st->n_packets == 0) {
		snprintf(base->err, EXPORT_ERR_LEN, "empty trace: no packets");
		err = -EINVAL;
	}
	if (!err && !st->ended)
		fprintf(stderr, "profctl: export: %s\n", trace_stream_cut_line(st, cut, sizeof(cut)));
	base->stream = ts; /* freed by export_stream_done, once the names were written */
	if (!err && base->problems)
		fprintf(stderr, "profctl: export: warning: the trace breaks %llu importer rule(s), "
			"first: %s\n", (unsigned long long)base->problems, base->first_problem);
	return err;
}

void export_stream_done(struct export_base *base)
{
	trace_stream_free(base->stream);
	base->stream = NULL;
}

// SPDX-License-Identifier: MIT
/*
 * Shared client side of profiling sessions (see session_client.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/arg_spec.h"
#include "common/func_filter.h"
#include "common/hex.h"
#include "profctl/session_client.h"
#include "proto/frame.h"
#include "proto/frame_io.h"
#include "viewer-export/perfetto_writer.h"
#include "profd.pb-c.h"

#define REPLY_TIMEOUT_MS 10000
#define SUMMARY_TIMEOUT_MS 60000

static int parse_unsigned(const char *s, const char *what, unsigned max, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v > max || s[0] == '-') {
		fprintf(stderr, "profctl: %s must be a whole number from 0 to %u, not '%s'\n", what,
			max, s);
		return -EINVAL;
	}
	*out = (unsigned)v;
	return 0;
}

/* fp, dwarf or auto, the last two optionally ",BYTES" of stack copied per sample (like perf). */
static int parse_call_graph(const char *s, struct profile_options *o)
{
	static const char *const modes[] = { "auto", "fp", "dwarf" };
	const char *comma = strchr(s, ',');
	size_t len = comma ? (size_t)(comma - s) : strlen(s);

	for (unsigned i = 0; i < 3; i++) {
		if (strlen(modes[i]) != len || strncmp(s, modes[i], len) != 0)
			continue;
		o->call_graph = i;
		if (!comma)
			return 0;
		if (i == 1) {
			fprintf(stderr, "profctl: --call-graph fp copies no stack: drop ',%s'\n",
				comma + 1);
			return -EINVAL;
		}
		if (parse_unsigned(comma + 1, "the --call-graph stack size", 65528, &o->stack_bytes))
			return -EINVAL;
		if (o->stack_bytes == 0 || o->stack_bytes % 8) {
			fprintf(stderr, "profctl: the --call-graph stack size must be a multiple of 8 "
					"from 8 to 65528, not '%s'\n", comma + 1);
			return -EINVAL;
		}
		return 0;
	}
	fprintf(stderr, "profctl: --call-graph must be fp, dwarf or auto (dwarf,BYTES), not '%s'\n",
		s);
	return -EINVAL;
}

/* Pages per CPU ring: a power of two, as perf's --mmap-pages. */
static int parse_mmap_pages(const char *s, unsigned *out)
{
	if (parse_unsigned(s, "--mmap-pages", 1u << 16, out))
		return -EINVAL;
	if (*out == 0 || (*out & (*out - 1))) {
		fprintf(stderr, "profctl: --mmap-pages must be a power of two, not '%s'\n", s);
		return -EINVAL;
	}
	return 0;
}

/*
 * SIZE with an optional K, M or G suffix (powers of 1024), as perf record -m
 * takes it, from min to max bytes; `range` says so in the error line.
 */
static int parse_size(const char *s, const char *what, unsigned long long min,
		      unsigned long long max, const char *range, unsigned long long *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end == 'K' || *end == 'k')
		shift = 10;
	else if (*end == 'M' || *end == 'm')
		shift = 20;
	else if (*end == 'G' || *end == 'g')
		shift = 30;
	if (shift)
		end++;
	if (errno || end == s || *end || s[0] == '-' || v > max >> shift || (v << shift) < min) {
		fprintf(stderr, "profctl: %s must be a size from %s (a number with K, M or G), "
				"not '%s'\n", what, range, s);
		return -EINVAL;
	}
	*out = v << shift;
	return 0;
}

/* DUR: a number (decimals allowed) with ns, us, ms or s, from 1ns to 1 hour. */
static int parse_min_duration(const char *s, unsigned long long *out_ns)
{
	static const struct { const char *unit; double ns; } units[] = {
		{ "ns", 1 }, { "us", 1e3 }, { "ms", 1e6 }, { "s", 1e9 },
	};
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	for (size_t i = 0; !errno && end != s && v >= 0 && i < sizeof(units) / sizeof(units[0]); i++) {
		double ns = v * units[i].ns + 0.5;

		if (strcmp(end, units[i].unit) || ns < 1 || ns > 3600e9)
			continue;
		*out_ns = (unsigned long long)ns;
		return 0;
	}
	fprintf(stderr, "profctl: --min-duration must be a duration from 1ns to 1 hour with a unit "
			"(500ns, 2us, 1.5ms, 1s), not '%s'\n", s);
	return -EINVAL;
}

/* none, deflate or zstd: RunRequest.trace_compression (1, 2, 3; 0 is profd's default). */
static int parse_compression(const char *s, unsigned *out)
{
	static const char *const names[] = { "none", "deflate", "zstd" };

	for (unsigned i = 0; i < 3; i++) {
		if (strcmp(s, names[i]) == 0) {
			*out = i + 1;
			return 0;
		}
	}
	fprintf(stderr, "profctl: --trace-compression must be deflate, zstd or none, not '%s'\n",
		s);
	return -EINVAL;
}

int profile_options_parse(int argc, char **argv, struct profile_options *o, const char *usage,
			  bool stop_at_operand)
{
	static const struct option longopts[] = {
		{ "funcs", required_argument, NULL, 'F' }, { "freq", required_argument, NULL, 'f' },
		{ "output", required_argument, NULL, 'o' }, { "duration", required_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },      { "call-graph", required_argument, NULL, 'g' },
		{ "mmap-pages", required_argument, NULL, 'm' },
		{ "buffer-size", required_argument, NULL, 'b' },
		{ "min-duration", required_argument, NULL, 'M' },
		{ "max-depth", required_argument, NULL, 'D' },
		{ "trace-compression", required_argument, NULL, 'C' },
		{ "ring", required_argument, NULL, 'R' },
		{ "sched", required_argument, NULL, 'S' },
		{ "no-inherit", no_argument, NULL, 'I' },
		{ "children", no_argument, NULL, 'c' },
		{ "args", required_argument, NULL, 'A' },
		{ "retval", required_argument, NULL, 'T' },
		{ "args-string-max", required_argument, NULL, 'L' },
		{ "auto-args", no_argument, NULL, 'a' },
		{ 0 },
	};
	int c;

	memset(o, 0, sizeof(*o));
	o->freq = PROFILE_DEFAULT_FREQ;
	o->patterns = calloc((size_t)argc + 1, sizeof(char *));
	o->arg_specs = calloc((size_t)argc + 1, sizeof(char *));
	o->retval_specs = calloc((size_t)argc + 1, sizeof(char *));
	if (!o->patterns || !o->arg_specs || !o->retval_specs)
		return -ENOMEM;
	while ((c = getopt_long(argc, argv, stop_at_operand ? "+o:v" : "o:v", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'F': o->patterns[o->n_patterns++] = optarg; break;
		case 'A': o->arg_specs[o->n_arg_specs++] = optarg; break;
		case 'T': o->retval_specs[o->n_retval_specs++] = optarg; break;
		case 'L':
			if (parse_unsigned(optarg, "--args-string-max", 256, &o->args_string_max))
				return -EINVAL;
			if (!o->args_string_max) {
				fprintf(stderr, "profctl: --args-string-max must be from 1 to 256, not 0\n");
				return -EINVAL;
			}
			break;
		case 'f': if (parse_unsigned(optarg, "--freq", 100000, &o->freq)) return -EINVAL; break;
		case 'd': if (parse_unsigned(optarg, "--duration", 86400 * 365, &o->duration_s)) return -EINVAL; break;
		case 'o': o->output = optarg; break;
		case 'v': o->verbose = true; break;
		case 'I': o->no_inherit = true; break;
		case 'a': o->auto_args = true; break;
		case 'c': o->children = true; break;
		case 'g':
			if (parse_call_graph(optarg, o))
				return -EINVAL;
			break;
		case 'm':
			if (parse_mmap_pages(optarg, &o->mmap_pages))
				return -EINVAL;
			break;
		case 'b':
			if (parse_size(optarg, "--buffer-size", 64ull << 10, 64ull << 30,
				       "64K to 64G", &o->buffer_size))
				return -EINVAL;
			break;
		case 'C':
			if (parse_compression(optarg, &o->trace_compression))
				return -EINVAL;
			break;
		case 'R':
			if (parse_size(optarg, "--ring", 256ull << 10, 4ull << 30,
				       "256K (one compression block) to 4G", &o->ring_size))
				return -EINVAL;
			break;
		case 'S':
			if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
				fprintf(stderr, "profctl: --sched must be on or off, not '%s'\n", optarg);
				return -EINVAL;
			}
			o->sched_off = strcmp(optarg, "off") == 0;
			break;
		case 'M':
			if (parse_min_duration(optarg, &o->min_duration_ns))
				return -EINVAL;
			break;
		case 'D':
			if (parse_unsigned(optarg, "--max-depth", PROFILE_MAX_DEPTH, &o->max_depth))
				return -EINVAL;
			if (!o->max_depth) {
				fprintf(stderr, "profctl: --max-depth must be from 1 to %d, not 0\n",
					PROFILE_MAX_DEPTH);
				return -EINVAL;
			}
			break;
		default: fprintf(stderr, "%s", usage); return -EINVAL;
		}
	}
	return optind;
}

/* Each --args and --retval spec as the agent will read it; prints the first error. */
static int arg_specs_check(const struct profile_options *o)
{
	struct arg_spec spec;
	char err[256];

	for (size_t i = 0; i < o->n_arg_specs + o->n_retval_specs; i++) {
		bool retval = i >= o->n_arg_specs;
		const char *text = retval ? o->retval_specs[i - o->n_arg_specs] : o->arg_specs[i];

		if (arg_spec_parse(text, retval, &spec, err, sizeof(err))) {
			fprintf(stderr, "profctl: %s\n", err);
			return -EINVAL;
		}
	}
	return 0;
}

int profile_patterns_check(const struct profile_options *o)
{
	struct func_filter *f;
	char err[256];

	if (arg_specs_check(o))
		return -EINVAL;
	if ((o->n_arg_specs || o->n_retval_specs) && !o->n_patterns) {
		fprintf(stderr, "profctl: --args and --retval apply to the functions --funcs "
				"instruments: give --funcs\n");
		return -EINVAL;
	}
	if (o->auto_args && !o->n_patterns) {
		fprintf(stderr, "profctl: --auto-args applies to the functions --funcs "
				"instruments: give --funcs\n");
		return -EINVAL;
	}
	if (o->n_patterns == 0)
		return 0;
	if (func_filter_parse((const char *const *)o->patterns, o->n_patterns, &f, err,
			      sizeof(err))) {
		fprintf(stderr, "profctl: --funcs: %s\n", err);
		return -EINVAL;
	}
	func_filter_free(f);
	return 0;
}

void session_client_init(struct session_client *c, const struct profile_options *opt)
{
	memset(c, 0, sizeof(*c));
	c->opt = opt;
	c->out_fd = -1;
	c->link.fd = -1;
}

int session_client_open_output(struct session_client *c, const char *comm, pid_t pid)
{
	struct stat st;

	if (c->opt->output)
		snprintf(c->output_path, sizeof(c->output_path), "%s", c->opt->output);
	else
		snprintf(c->output_path, sizeof(c->output_path), "profd-%s-%d.pftrace", comm,
			 (int)pid);
	/* O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of hanging here */
	c->out_fd = open(c->output_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0644);
	if (c->out_fd < 0) {
		fprintf(stderr, "profctl: cannot write the trace to %s: %s\n", c->output_path,
			strerror(errno));
		return -errno;
	}
	if (fstat(c->out_fd, &st) == 0 && !S_ISREG(st.st_mode)) {
		/* profd writes as the trace grows: a pipe nobody drains would stall it */
		fprintf(stderr, "profctl: cannot write the trace to %s: not a regular file\n",
			c->output_path);
		close(c->out_fd);
		c->out_fd = -1;
		return -EINVAL;
	}
	return 0;
}

int session_client_expect(struct session_client *c, uint32_t want, uint8_t **payload,
			  uint32_t *len, int timeout_ms)
{
	struct frame_header h;
	int err;

	/* an agent-gone notice is for the attach loop; here it changes nothing */
	while ((err = frame_recv(c->link.fd, &h, payload, NULL, timeout_ms)) >= 0 &&
	       h.type == FRAME_AGENT_GONE && want != FRAME_AGENT_GONE) {
		free(*payload);
		*payload = NULL;
	}
	if (err == -ECONNRESET || err == -EPIPE) {
		fprintf(stderr, "profctl: profd exited during the session: no summary; the trace "
				"may be cut short\n");
		return err;
	}
	if (err < 0) {
		fprintf(stderr, "profctl: profd did not answer: %s\n", strerror(-err));
		return err;
	}
	if (h.type == want) {
		*len = h.length;
		return 0;
	}
	if (h.type == FRAME_ERROR) {
		Profd__ErrorReply *e = profd__error_reply__unpack(NULL, h.length, *payload);

		fprintf(stderr, "profctl: profd refused: %s\n", e && e->message ? e->message : "?");
		if (e)
			profd__error_reply__free_unpacked(e, NULL);
	} else {
		fprintf(stderr, "profctl: unexpected %s frame from profd\n", frame_type_name(h.type));
	}
	free(*payload);
	*payload = NULL;
	return -EPROTO;
}

int session_client_start(struct session_client *c, const char *comm, pid_t attach_pid,
			 char *token, size_t token_len)
{
	Profd__RunRequest req = PROFD__RUN_REQUEST__INIT;
	Profd__SessionStarted *started;
	uint8_t *buf, *reply = NULL;
	uint32_t len;
	size_t n;
	int err = daemon_link_open(&c->link, c->opt->verbose);

	if (err)
		return err;
	req.n_func_patterns = c->opt->n_patterns;
	req.func_patterns = c->opt->patterns;
	req.sample_freq = c->opt->freq;
	req.duration_s = c->opt->duration_s;
	req.target_comm = (char *)comm;
	req.output_name = c->output_path;
	req.attach_pid = attach_pid;
	req.call_graph = c->opt->call_graph;
	req.stack_bytes = c->opt->stack_bytes;
	req.ring_pages = c->opt->mmap_pages;
	req.buffer_size = c->opt->buffer_size;
	req.min_duration_ns = c->opt->min_duration_ns;
	req.sched_off = c->opt->sched_off;
	req.no_inherit = c->opt->no_inherit;
	req.attach_children = attach_pid > 0 && c->opt->children;
	req.max_depth = c->opt->max_depth;
	req.trace_compression = c->opt->trace_compression;
	req.ring_size = c->opt->ring_size;
	req.n_arg_specs = c->opt->n_arg_specs;
	req.arg_specs = c->opt->arg_specs;
	req.n_retval_specs = c->opt->n_retval_specs;
	req.retval_specs = c->opt->retval_specs;
	req.args_string_max = c->opt->args_string_max;
	req.auto_args = c->opt->auto_args;
	n = profd__run_request__get_packed_size(&req);
	buf = malloc(n + 1);
	if (!buf)
		return -ENOMEM;
	profd__run_request__pack(&req, buf);
	err = frame_send(c->link.fd, FRAME_RUN_REQUEST, buf, n, c->out_fd);
	free(buf);
	if (!err)
		err = session_client_expect(c, FRAME_SESSION_STARTED, &reply, &len, REPLY_TIMEOUT_MS);
	if (err)
		return err;
	started = profd__session_started__unpack(NULL, len, reply);
	free(reply);
	if (!started || !started->agent_token || strlen(started->agent_token) + 2 > token_len) {
		if (started)
			profd__session_started__free_unpacked(started, NULL);
		return -EPROTO;
	}
	snprintf(token, token_len, "%s", started->agent_token);
	/* NULL for nothing (or no memory): the agents then ask profd for their config */
	c->agent_config_hex = hex_encode(started->agent_config.data, started->agent_config.len);
	profd__session_started__free_unpacked(started, NULL);
	close(c->out_fd); /* profd holds its own copy */
	c->out_fd = -1;
	return 0;
}

static void print_skipped(const Profd__SessionSummary *s, bool verbose)
{
	size_t shown = verbose ? s->n_skipped : (s->n_skipped < 20 ? s->n_skipped : 20);

	for (size_t i = 0; i < shown; i++) {
		const Profd__SkippedFunction *f = s->skipped[i];
		const char *mod = f->module ? strrchr(f->module, '/') : NULL;

		fprintf(stderr, "  skipped %s (%s): %s\n", f->name, mod ? mod + 1 : f->module,
			f->reason);
	}
	if (shown < s->n_skipped)
		fprintf(stderr, "  ... and %zu more skipped (-v lists them all)\n",
			s->n_skipped - shown);
}

void profctl_print_overhead(FILE *out, const char *prefix, const struct profctl_overhead *o)
{
	double secs = o->freq_hz ? (double)o->samples / (double)o->freq_hz : 0;

	fprintf(out, "%sprofiling overhead: %llu samples (%.1f %% of %llu)", prefix,
		(unsigned long long)o->samples,
		o->of_samples ? 100.0 * (double)o->samples / (double)o->of_samples : 0.0,
		(unsigned long long)o->of_samples);
	if (o->freq_hz && secs >= 1)
		fprintf(out, " ~ %.2f s", secs);
	else if (o->freq_hz)
		fprintf(out, " ~ %.1f ms", 1000 * secs);
	fprintf(out, ": hooks %llu, flusher %llu, agent %llu\n", (unsigned long long)o->hooks,
		(unsigned long long)o->flusher, (unsigned long long)o->agent);
}

/* The profiler's own cost, apart from the program's; only where an agent ran (else none). */
static void print_overhead(const Profd__SessionSummary *s)
{
	if (s->samples == 0 || (!s->agent_connected && s->overhead_samples == 0))
		return;
	profctl_print_overhead(stderr, "profctl: ", &(struct profctl_overhead){
		.samples = s->overhead_samples, .of_samples = s->samples,
		.freq_hz = s->sample_freq, .hooks = s->overhead_samples_hooks,
		.flusher = s->overhead_samples_flusher, .agent = s->overhead_samples_agent });
}

/* Sampled self time of the instrumented functions: where the CPU went inside them. */
static void print_self_samples(const Profd__SessionSummary *s)
{
	if (s->n_self_samples == 0)
		return;
	fprintf(stderr, "profctl: self time (samples while innermost instrumented call, "
			"%llu of the program's %llu samples, profiling overhead apart):\n",
		(unsigned long long)s->samples_in_calls,
		(unsigned long long)(s->samples - s->overhead_samples));
	for (size_t i = 0; i < s->n_self_samples; i++) {
		const Profd__FunctionSelfSamples *f = s->self_samples[i];

		if (s->sample_freq)
			fprintf(stderr, "profctl: %8llu samples  ~%8.1f ms  %s\n",
				(unsigned long long)f->samples,
				1000.0 * (double)f->samples / s->sample_freq, f->name);
		else
			fprintf(stderr, "profctl: %8llu samples  %s\n", (unsigned long long)f->samples,
				f->name);
	}
}

/* A duration in the unit that keeps 3-4 digits. */
static const char *fmt_ns(char *buf, size_t len, uint64_t ns)
{
	if (ns < 10000)
		snprintf(buf, len, "%llu ns", (unsigned long long)ns);
	else if (ns < 10000000)
		snprintf(buf, len, "%.1f us", (double)ns / 1e3);
	else if (ns < 10000000000ull)
		snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
	else
		snprintf(buf, len, "%.2f s", (double)ns / 1e9);
	return buf;
}

/* ", F filtered (...)": the calls the session's filters kept off the timeline, by filter. */
/* --auto-args: how many functions DWARF described, and what it could not place. */
static void print_auto_args(const Profd__SessionSummary *s)
{
	uint32_t without = s->auto_args_functions - s->auto_args_described - s->auto_args_explicit;

	fprintf(stderr, "profctl: auto-args: %u of %u instrumented functions described by DWARF "
			"(%u without", s->auto_args_described, s->auto_args_functions, without);
	if (s->auto_args_explicit)
		fprintf(stderr, ", %u left to --args/--retval", s->auto_args_explicit);
	fprintf(stderr, ")");
	if (s->auto_args_unplaced)
		fprintf(stderr, "; %u parameters not placed (structs by value, long double, ...): "
				"not recorded", s->auto_args_unplaced);
	if (s->auto_args_capped)
		fprintf(stderr, "; %u past the %d values a call records", s->auto_args_capped,
			ARG_SPEC_ITEMS_MAX);
	fprintf(stderr, "; DWARF read in %.1f ms\n", (double)s->auto_args_ns / 1e6);
	if (!s->auto_args_late)
		return;
	fprintf(stderr, "profctl: auto-args: %u functions of modules loaded later got their values "
			"once profd had described them, after ~%llu calls without (counted at the switch: "
			"a call then in flight on either side; ",
		s->auto_args_late, (unsigned long long)s->auto_args_late_calls);
	for (size_t i = 0; i < s->n_auto_args_late_named; i++)
		fprintf(stderr, "%s%s", i ? ", " : "", s->auto_args_late_named[i]);
	fprintf(stderr, "%s)\n", s->auto_args_late > s->n_auto_args_late_named ? ", ..." : "");
}

/*
 * The values recorded, and the calls recorded without theirs for want of
 * room (a return value beyond the exits owed): per function, the ones the
 * table below shows.
 */
static void print_values(const Profd__SessionSummary *s)
{
	const char *sep = " (";

	fprintf(stderr, "profctl: values: %llu calls carried arguments, %llu values recorded "
			"(--args/--retval)", (unsigned long long)s->calls_with_args,
		(unsigned long long)s->args_recorded);
	if (s->values_dropped) {
		fprintf(stderr, "; %llu calls recorded without their values, for want of buffer room",
			(unsigned long long)s->values_dropped);
		for (size_t i = 0; i < s->n_top_functions; i++) {
			if (!s->top_functions[i]->values_dropped)
				continue;
			fprintf(stderr, "%s%s %llu", sep, s->top_functions[i]->name,
				(unsigned long long)s->top_functions[i]->values_dropped);
			sep = ", ";
		}
		fprintf(stderr, "%s", sep[0] == ',' ? ")" : "");
	}
	fprintf(stderr, "\n");
}

static void print_filtered(const Profd__SessionSummary *s)
{
	char a[16];

	if (!s->min_duration_ns && !s->max_depth)
		return;
	fprintf(stderr, ", %llu filtered (", (unsigned long long)s->calls_filtered);
	if (s->min_duration_ns)
		fprintf(stderr, "shorter than %s: %llu%s", fmt_ns(a, sizeof(a), s->min_duration_ns),
			(unsigned long long)s->filtered_short, s->max_depth ? ", " : "");
	if (s->max_depth)
		fprintf(stderr, "deeper than %u%s: %llu", s->max_depth,
			s->max_depth == PERFETTO_MAX_SLICE_DEPTH ? ", the Perfetto viewer's limit" : "",
			(unsigned long long)s->filtered_deep);
	fprintf(stderr, ")");
}

/*
 * A function's off-CPU time (switched out inside its calls) and, of it, the
 * time it was runnable: over its recorded calls, marked '*' when some of its
 * calls were not recorded (the figure then covers fewer calls than total).
 */
static void print_off_cpu(const Profd__FunctionTotals *t)
{
	char off[16], run[16], cell[40];

	if (!t->sched_calls) {
		fprintf(stderr, "%22s ", "-");
		return;
	}
	fmt_ns(off, sizeof(off), t->off_cpu_ns);
	fmt_ns(run, sizeof(run), t->runnable_ns);
	snprintf(cell, sizeof(cell), "%s (%s)%s", off, run, t->sched_calls < t->exited ? "*" : "");
	fprintf(stderr, "%22s ", cell);
}

/*
 * Calls in one unit: made = recorded + dropped + filtered, and why; then the
 * exact per-function figures.
 */
static void print_calls(const Profd__SessionSummary *s)
{
	static const char *const reasons[] = { "buffer full", "deeper than the shadow stack",
					       "signal handler inside a hook", "during an unwind",
					       "called from generated code" };
	const uint64_t by_reason[] = { s->dropped_buffer_full, s->dropped_shadow_full,
				       s->dropped_in_hook, s->dropped_under_unwinder,
				       s->dropped_from_generated_code };
	char a[16], b[16], c[16], d[16], e[16], f[16];
	const char *sep = " (";

	fprintf(stderr, "profctl: calls: %llu made, %llu recorded, %llu dropped",
		(unsigned long long)s->calls_made, (unsigned long long)s->calls_recorded,
		(unsigned long long)s->calls_dropped);
	for (size_t i = 0; i < sizeof(by_reason) / sizeof(by_reason[0]); i++) {
		if (!by_reason[i])
			continue;
		fprintf(stderr, "%s%s: %llu", sep, reasons[i], (unsigned long long)by_reason[i]);
		sep = ", ";
	}
	fprintf(stderr, "%s", sep[0] == ',' ? ")" : "");
	print_filtered(s);
	if (s->calls_open)
		fprintf(stderr, "; %llu still running at the end", (unsigned long long)s->calls_open);
	if (s->calls_unattributed)
		fprintf(stderr, "; %llu in no function's figures (the agent lacked memory)",
			(unsigned long long)s->calls_unattributed);
	fprintf(stderr, "\n");
	if (s->args_recorded || s->values_dropped)
		print_values(s);
	if (s->auto_args)
		print_auto_args(s);
	if (s->buffer_budget)
		fprintf(stderr, "profctl: event buffers: peak %.1f MiB of %.1f MiB (--buffer-size)\n",
			(double)s->buffer_peak / (1 << 20), (double)s->buffer_budget / (1 << 20));
	if (s->suggested_min_duration_ns)
		fprintf(stderr, "profctl: warning: the timeline holds %llu slices, more than the "
				"Perfetto UI loads in a browser (about 10 M): --min-duration %s "
				"would have kept it under (estimate)\n",
			(unsigned long long)s->calls_recorded,
			fmt_ns(a, sizeof(a), s->suggested_min_duration_ns));
	if (!s->n_top_functions)
		return;
	fprintf(stderr, "profctl: functions by total time (exact, every call; p50/p99 within 12 %%), "
			"%u called:\n", s->functions_called);
	fprintf(stderr, "profctl: %12s %10s %10s %10s %10s %10s %10s %s %s\n", "calls", "total",
		"self", "avg", "p50~", "p99~", "max", s->sched_switches ? "   off-CPU (runnable) " : "",
		"function");
	for (size_t i = 0; i < s->n_top_functions; i++) {
		const Profd__FunctionTotals *t = s->top_functions[i];

		fprintf(stderr, "profctl: %12llu %10s %10s %10s %10s %10s %10s ",
			(unsigned long long)t->calls, fmt_ns(a, sizeof(a), t->total_ns),
			fmt_ns(b, sizeof(b), t->self_ns),
			fmt_ns(c, sizeof(c), t->exited ? t->total_ns / t->exited : 0),
			fmt_ns(d, sizeof(d), t->p50_ns), fmt_ns(e, sizeof(e), t->p99_ns),
			fmt_ns(f, sizeof(f), t->max_ns));
		if (s->sched_switches)
			print_off_cpu(t);
		fprintf(stderr, "%s\n", t->name);
	}
}

/* Scheduler states: what was recorded, or why nothing was (said at the start too). */
static void print_sched(const struct session_client *c, const Profd__SessionSummary *s)
{
	if (c->opt->sched_off)
		return;
	if (s->sched_unavailable && s->sched_unavailable[0]) {
		if (!c->sched_told)
			fprintf(stderr, "profctl: no scheduler states: %s\n", s->sched_unavailable);
		return;
	}
	fprintf(stderr, "profctl: scheduler: %llu switches, %llu wakeups (%llu lost%s)",
		(unsigned long long)s->sched_switches, (unsigned long long)s->sched_wakeups,
		(unsigned long long)s->sched_lost,
		s->sched_lost ? ": on/off-CPU times are estimates" : "");
	if (s->sched_hidden)
		fprintf(stderr, "; %llu naming other users' tasks, shown as \"another task\"",
			(unsigned long long)s->sched_hidden);
	fprintf(stderr, "\n");
}

#define PROCESS_ROWS_SHOWN 16

static void print_process_row(const Profd__ProcessSummary *p)
{
	fprintf(stderr, "profctl: %8d %8d  %-16s", p->pid, p->ppid, p->name ? p->name : "?");
	if (p->instrumented)
		fprintf(stderr, " %10llu %8llu%s\n", (unsigned long long)p->calls_made,
			(unsigned long long)p->samples, p->execs ? "  (exec'd)" : "");
	else
		fprintf(stderr, " %10s %8llu  not instrumented: %s\n", "-",
			(unsigned long long)p->samples, p->why_not ? p->why_not : "?");
}

/* Every process of the tree is named, or counted: a process left out is never silent. */
static void print_processes(const struct session_client *c, const Profd__SessionSummary *s)
{
	uint32_t instrumented = 0, shown = 0;

	if (s->processes_seen <= 1 && s->n_processes <= 1)
		return;
	for (size_t i = 0; i < s->n_processes; i++)
		instrumented += s->processes[i]->instrumented;
	fprintf(stderr, "profctl: processes: %u seen, %zu followed (%u instrumented)",
		s->processes_seen, s->n_processes, instrumented);
	if (s->processes_not_followed)
		fprintf(stderr, ", %u not followed (%s)", s->processes_not_followed,
			c->opt->no_inherit ? "--no-inherit" : "over the cap of processes at once");
	fprintf(stderr, "\nprofctl:      pid     ppid  program               calls  samples\n");
	for (size_t i = 0; i < s->n_processes; i++) {
		const Profd__ProcessSummary *p = s->processes[i];

		/* the rows that say something first: every one not instrumented is shown */
		if (shown >= PROCESS_ROWS_SHOWN && p->instrumented && !c->opt->verbose)
			continue;
		print_process_row(p);
		shown++;
	}
	if (shown < s->n_processes)
		fprintf(stderr, "profctl: ... %zu more instrumented processes (-v lists them)\n",
			s->n_processes - shown);
}

static void print_summary(const struct session_client *c, const Profd__SessionSummary *s)
{
	if (s->error && s->error[0])
		fprintf(stderr, "profctl: error: %s\n", s->error);
	if (c->quiet) /* profctl top: its table said the rest */
		return;
	for (size_t i = 0; i < s->n_warnings; i++)
		fprintf(stderr, "profctl: warning: %s\n", s->warnings[i]);
	if (c->opt->n_patterns > 0) {
		if (!s->agent_connected)
			fprintf(stderr, "profctl: warning: the agent never connected: no function "
					"was instrumented\n");
		else if (s->functions_matched == 0)
			fprintf(stderr, "profctl: warning: --funcs matched no function in the "
					"program or its libraries\n");
		fprintf(stderr, "profctl: functions: %u matched, %u instrumented, %zu skipped\n",
			s->functions_matched, s->functions_instrumented, s->n_skipped);
		print_skipped(s, c->opt->verbose);
	}
	print_processes(c, s);
	if (s->agent_connected)
		print_calls(s);
	fprintf(stderr, "profctl: samples: %llu (%llu lost)\n", (unsigned long long)s->samples,
		(unsigned long long)s->samples_lost);
	print_sched(c, s);
	print_overhead(s);
	print_self_samples(s);
	fprintf(stderr, "profctl: trace: %s (%llu bytes); open it at https://ui.perfetto.dev\n",
		c->output_path, (unsigned long long)s->trace_bytes);
}

int session_client_finish(struct session_client *c, int wait_status)
{
	Profd__TargetExited msg = PROFD__TARGET_EXITED__INIT;
	Profd__SessionSummary *sum;
	uint8_t buf[64], *reply = NULL;
	uint32_t len;
	int err;

	msg.wait_status = wait_status;
	err = frame_send(c->link.fd, FRAME_TARGET_EXITED, buf,
			 profd__target_exited__pack(&msg, buf), -1);
	/* after profctl stop the summary was sent before profd closed: still readable */
	if (!err || err == -EPIPE || err == -ECONNRESET)
		err = session_client_expect(c, FRAME_SESSION_SUMMARY, &reply, &len,
					    SUMMARY_TIMEOUT_MS);
	if (err)
		return err;
	sum = profd__session_summary__unpack(NULL, len, reply);
	free(reply);
	if (!sum)
		return -EPROTO;
	print_summary(c, sum);
	profd__session_summary__free_unpacked(sum, NULL);
	return 0;
}

void session_client_close(struct session_client *c)
{
	free(c->agent_config_hex);
	c->agent_config_hex = NULL;
	if (c->out_fd >= 0)
		close(c->out_fd);
	c->out_fd = -1;
	daemon_link_close(&c->link);
}

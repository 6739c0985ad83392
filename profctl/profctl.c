// SPDX-License-Identifier: MIT
/*
 * profctl's main(): dispatches to one subcommand per file.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profctl/profctl.h"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: profctl run [--funcs GLOBS] [--freq HZ] [-o FILE] [--duration S] [--call-graph fp|dwarf[,BYTES]|auto] [--mmap-pages N] [--buffer-size SIZE]\n"
		"                   [--min-duration DUR] [--max-depth N] [--trace-compression deflate|zstd|none] [--ring SIZE] [--sched on|off] [--no-inherit] [-v] -- CMD [ARGS...]\n"
		"       profctl attach PID --funcs GLOBS [--freq HZ] [-o FILE] [--duration S] [--call-graph fp|dwarf[,BYTES]|auto] [--mmap-pages N] [--buffer-size SIZE]\n"
		"                   [--min-duration DUR] [--max-depth N] [--trace-compression deflate|zstd|none] [--ring SIZE] [--sched on|off] [-v]\n"
		"       profctl detach PID\n"
		"       profctl report [--dump | [--sort calls|total|self|avg|p99] [--top N] [--threads] [--percentiles]\n"
		"                      [--funcs GLOBS] [--callers FUNC]] FILE\n"
		"       profctl funcs GLOBS (--pid PID | -- CMD [ARGS...])\n"
		"       profctl status\n"
		"       profctl stop ID\n"
		"       profctl open [--port N] [--no-browser] [--timeout S] [--origin URL] [-v] FILE\n"
		"       profctl snapshot ID [-o FILE]\n"
		"       profctl export --format pprof|chrome|folded [-o OUT|-] [--with-calls] FILE\n"
		"       profctl top PID --funcs GLOBS [--interval S] [--batch] [-n N] [--sort KEY] [--totals]\n"
		"                   [-o FILE] [--freq HZ] [--sched on|off] [-v]\n"
		"       profctl top --session ID [--interval S] [--batch] [-n N] [--sort KEY] [--totals]\n"
		"\n"
		"  run      start CMD with the agent preloaded, instrument the functions GLOBS\n"
		"           selects (comma-separated, !GLOB excludes, MODULE:GLOB restricts),\n"
		"           sample it at HZ (default 999, 0 = off) and write a Perfetto trace\n"
		"  attach   load the agent into the running process PID (with your own ptrace\n"
		"           rights), instrument GLOBS until Ctrl-C or S seconds, then detach\n"
		"           and put every patched byte back\n"
		"  detach   end an attach session from another terminal\n"
		"  report   summarize a trace written by profctl run or attach: functions\n"
		"           sorted by KEY, the first N, per thread, with percentiles, only\n"
		"           GLOBS, or FUNC's callers and callees\n"
		"  funcs    list what GLOBS would instrument in PID's modules or in CMD and\n"
		"           the libraries it loads at start, and every function skipped\n"
		"           with its reason, without running anything of it\n"
		"  status   list the sessions of the running profd (system service or\n"
		"           $PROFD_SOCKET): target, functions, events/s, drops, output\n"
		"  stop     end session ID (yours, or any as root); its trace is finalized\n"
		"  open     serve FILE once on 127.0.0.1 (port 9001, the one ui.perfetto.dev\n"
		"           may fetch from) and print the ui.perfetto.dev link that loads it,\n"
		"           or open it with xdg-open when there is a display\n"
		"  snapshot write the current window of flight-recorder session ID (--ring)\n"
		"           to FILE (default profd-ID-snapshot-TIME.pftrace); it records on\n"
		"  export   convert FILE for other tools: pprof (gzipped profile.proto: CPU\n"
		"           samples, instrumented calls and their self time), chrome (Trace\n"
		"           Event Format JSON) or folded stacks (`a;b;c COUNT`; --with-calls\n"
		"           adds the calls' chains under [calls ns], weighted in nanoseconds);\n"
		"           OUT defaults to FILE with .pb.gz, .json or .folded\n"
		"  top      attach to PID as attach does and show, live, its instrumented\n"
		"           functions: calls, total and self time per second, avg, p50,\n"
		"           p99 and max over the last interval (S, default 1), off-CPU share;\n"
		"           keys sort (c t s a p o), r switches to session totals, q quits\n"
		"           and detaches; --batch prints N plain tables (KEY: total, calls,\n"
		"           self, avg, p99, off-cpu); --session watches a running session\n");
}

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{ "run", cmd_run },       { "attach", cmd_attach },     { "detach", cmd_detach },
	{ "report", cmd_report }, { "funcs", cmd_funcs },       { "status", cmd_status },
	{ "stop", cmd_stop },     { "open", cmd_open },         { "snapshot", cmd_snapshot },
	{ "export", cmd_export }, { "top", cmd_top },
};

/* Options of any subcommand that take no value: what follows them is not theirs. */
static bool takes_no_value(const char *opt)
{
	static const char *const flags[] = { "-v", "--verbose", "--no-inherit", "--children",
					     "--dump", "--threads", "--percentiles", "--no-browser",
					     "--with-calls", "--batch", "--totals" };

	if (strchr(opt, '='))
		return true;
	for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++)
		if (strcmp(opt, flags[i]) == 0)
			return true;
	return false;
}

/*
 * `profctl CMD ... --help` (or -h) among CMD's options: before "--", and
 * for run before the command it starts (whose own --help that is).
 */
static bool wants_help(const char *cmd, int argc, char **argv)
{
	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return false;
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return true;
		if (argv[i][0] == '-' && argv[i][1] && !takes_no_value(argv[i]))
			i++; /* its value */
		else if (argv[i][0] != '-' && strcmp(cmd, "run") == 0)
			return false;
	}
	return false;
}

static bool word_is(const char *p, const char *word)
{
	size_t n = strlen(word);

	return strncmp(p, word, n) == 0 && (p[n] == ' ' || p[n] == '\0');
}

/*
 * CMD's part of the usage: its synopsis lines ("profctl CMD" and the lines
 * that continue them) and, after the blank line, its description ("  CMD"
 * and the lines indented under it).
 */
static void command_usage(FILE *out, const char *cmd)
{
	char *text = NULL, *line, *save = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	bool in = false, described = false, first = true;

	if (!mem)
		return;
	usage(mem);
	fclose(mem);
	for (line = text; (save = strchr(line, '\n')); line = save + 1) {
		const char *p = line + strspn(line, " ");

		*save = '\0';
		if (!*line) {
			described = true;
			in = false;
			continue;
		}
		if (strncmp(p, "usage: ", 7) == 0)
			p += 7;
		if (!described && strncmp(p, "profctl ", 8) == 0) {
			in = word_is(p + 8, cmd);
			if (in)
				fprintf(out, "%s%s\n", first ? "usage: " : "       ", p);
			first = first && !in;
		} else if (described && line[0] == ' ' && line[1] == ' ' && line[2] != ' ') {
			in = word_is(line + 2, cmd);
			if (in)
				fprintf(out, "%s\n", line);
		} else if (in) {
			fprintf(out, "%s\n", line);
		}
	}
	free(text);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		if (strcmp(argv[1], commands[i].name) != 0)
			continue;
		if (wants_help(argv[1], argc, argv)) {
			command_usage(stdout, argv[1]);
			return 0;
		}
		return commands[i].run(argc - 1, argv + 1);
	}
	fprintf(stderr, "profctl: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

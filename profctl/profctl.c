// SPDX-License-Identifier: MIT
/*
 * profctl's main(): dispatches to one subcommand per file.
 */
#include <stdio.h>
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
		"           OUT defaults to FILE with .pb.gz, .json or .folded\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "report") == 0)
		return cmd_report(argc - 1, argv + 1);
	if (strcmp(argv[1], "attach") == 0)
		return cmd_attach(argc - 1, argv + 1);
	if (strcmp(argv[1], "detach") == 0)
		return cmd_detach(argc - 1, argv + 1);
	if (strcmp(argv[1], "status") == 0)
		return cmd_status(argc - 1, argv + 1);
	if (strcmp(argv[1], "stop") == 0)
		return cmd_stop(argc - 1, argv + 1);
	if (strcmp(argv[1], "open") == 0)
		return cmd_open(argc - 1, argv + 1);
	if (strcmp(argv[1], "snapshot") == 0)
		return cmd_snapshot(argc - 1, argv + 1);
	if (strcmp(argv[1], "export") == 0)
		return cmd_export(argc - 1, argv + 1);
	if (strcmp(argv[1], "funcs") == 0)
		return cmd_funcs(argc - 1, argv + 1);
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "profctl: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}

#!/usr/bin/env bash
# make bench: runs the benchmarks under bench/ and prints their figures.
# Usage: bench/run.sh [BUILD_DIR] [CALLS_PER_ROUND]; see bench/README.md.
# BENCH_ONLY=overhead: the overhead tables (profd, uftrace) and nothing after.
# Exits non-zero when the figures cannot be trusted: profd did not patch the
# functions, the session failed, or the benchmark itself failed.
set -eu
BUILD=${1:-build}
CALLS=${2:-20000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=bench/bench_common.bash
. "$ROOT/bench/bench_common.bash"

# The functions profd patches; everything else in bench/overhead.c stays plain.
# The --args rows (issue 29): the 4-int copies without a spec, with arg1 and
# with arg1-arg4, and the string copy with arg1/s.
FUNCS='bench_instrumented,bench_instrumented_args,bench_instrumented_int4*,bench_instrumented_str_args'
NFUNCS=6
SPECS=(--args 'bench_instrumented_int4_arg1@arg1' --args 'bench_instrumented_int4_args@arg1,arg2,arg3,arg4'
	--args 'bench_instrumented_str_args@arg1/s')

# profd's overhead against uftrace's best mode: ROW_PROFD and ROW_UFTRACE are
# the starts of row labels; "overhead vs plain" is a row's next-to-last column.
ratio() { # ROW_PROFD ROW_UFTRACE WHAT
	local p u
	p=$(awk -v row="$1" 'index($0, row) == 1 && /[0-9]$/ { print $(NF - 1); exit }' \
		"$tmp/overhead.out")
	u=$(cat "$tmp/uftrace_pg.out" "$tmp/uftrace_dyn.out" | awk -v row="$2" '
		index($0, row) == 1 && /[0-9]$/ { v = $(NF - 1) + 0; if (best == "" || v < best) best = v }
		END { print best }')
	[ -n "$p" ] && [ -n "$u" ] && awk -v p="$p" -v u="$u" -v w="$3" 'BEGIN {
		printf "%s: profd %+.2f ns, uftrace (best mode) %+.2f: %.1fx under uftrace\n",
			w, p, u, (p > 0 ? u / p : 0) }'
	return 0
}

echo "== overhead: per-call cost, plain vs profd vs uprobe+uretprobe, same process =="
rc=0
"$ROOT/$BUILD/profctl" run --freq 0 --funcs "$FUNCS" "${SPECS[@]}" -o "$tmp/overhead.pftrace" -- \
	"$ROOT/$BUILD/bench/overhead" "$CALLS" >"$tmp/overhead.out" 2>"$tmp/overhead.err" || rc=$?
grep -v "^instrumented calls:" "$tmp/overhead.out" || true
grep -E "^profctl: (functions|calls):" "$tmp/overhead.err" || true
fail=0
if [ "$rc" -ne 0 ]; then
	echo "FAIL: overhead exited with status $rc" >&2
	fail=1
fi
# profctl exits with the program's status: a failed session only shows on stderr.
if grep -qE "^profctl: error" "$tmp/overhead.err"; then
	echo "FAIL: the profd session failed: the instrumented rows did not record" >&2
	fail=1
fi
if ! grep -qE "^profctl: functions: .* $NFUNCS instrumented" "$tmp/overhead.err"; then
	echo "FAIL: profd did not instrument all of $FUNCS" >&2
	fail=1
fi
# Every call is timed; a dropped one is only missing from the timeline (its enter and exit events).
expected=$(sed -nE 's/^instrumented calls: .*should record ([0-9]+) events.*/\1/p' "$tmp/overhead.out")
read -r recorded dropped < <(summary_counts "$tmp/overhead.err") || true
if [ -n "$expected" ] && [ -n "${recorded:-}" ]; then
	if [ "$dropped" -ne 0 ]; then
		echo "WARNING: $dropped calls dropped (rings full): the instrumented rows mix" \
			"recorded and cheaper dropped calls; rerun on a quieter machine" >&2
	elif [ "$recorded" -ne "$expected" ]; then
		echo "FAIL: profd recorded $recorded events, expected $expected" >&2
		fail=1
	else
		echo "profd recorded all $expected events, none dropped"
	fi
fi
if [ "$fail" -ne 0 ]; then
	sed 's/^/  | /' "$tmp/overhead.err" >&2
	exit 1
fi

# The same empty call under uftrace, in its two modes (tools/install-deps.sh
# installs it): -pg (mcount) and dynamic patching (-P), each in a run of its
# own (with -P uftrace takes its slower libmcount for both). The ratio takes
# uftrace's best mode.
echo
echo "== overhead: the same empty call under uftrace (-pg and -P), then profd's ratio =="
if ! command -v uftrace >/dev/null; then
	echo "uftrace: not installed (tools/install-deps.sh), no ratio"
else
	rc=0
	uftrace record --no-libcall --no-event -d "$tmp/uftrace.pg" -- \
		"$ROOT/$BUILD/bench/overhead" --uftrace "$CALLS" >"$tmp/uftrace_pg.out" 2>&1 || rc=$?
	uftrace record --no-libcall --no-event -P bench_uftrace_dyn -d "$tmp/uftrace.dyn" -- \
		"$ROOT/$BUILD/bench/overhead" --uftrace "$CALLS" >"$tmp/uftrace_dyn.out" 2>&1 || rc=$?
	rm -rf "$tmp/uftrace.pg" "$tmp/uftrace.dyn"
	if [ "$rc" -ne 0 ]; then
		echo "WARNING: uftrace record exited with status $rc:" >&2
		sed 's/^/  | /' "$tmp/uftrace_pg.out" "$tmp/uftrace_dyn.out" >&2
	fi
	grep -E "^(row|empty  plain)" "$tmp/uftrace_pg.out"
	grep -E "^empty  (via 3 callers, )?uftrace -pg" "$tmp/uftrace_pg.out" || true
	grep -E "^empty  (via 3 callers, )?uftrace -P" "$tmp/uftrace_dyn.out" || true
	ratio "empty  instrumented (profd)" "empty  uftrace" "a direct call"
	ratio "empty  via 3 callers, instrumented" "empty  via 3 callers, uftrace" "via 3 callers"
fi
echo
echo "== overhead: instructions per call, exactly (valgrind; what no noise moves) =="
"$ROOT/bench/hot_instructions.sh" "$BUILD"
[ "${BENCH_ONLY:-}" = overhead ] && exit 0

echo
echo "== bursts: 20,000 calls every 1.5 s (a thread between requests), per burst =="
# From the fourth burst on, the ring's pages are the ones the last bursts used
# (agent/segments.c keeps free segments resident 10 s): no page faults.
"$ROOT/$BUILD/bench/bursts" 6 20000 1500 | sed 's/^/plain     /'
if ! "$ROOT/$BUILD/profctl" run --freq 0 --funcs burst_step -o "$tmp/bursts.pftrace" -- \
	"$ROOT/$BUILD/bench/bursts" 6 20000 1500 >"$tmp/bursts.out" 2>"$tmp/bursts.err" ||
	grep -qE "^profctl: error" "$tmp/bursts.err"; then
	echo "FAIL: the bursts session failed" >&2
	cat "$tmp/bursts.err" >&2
	exit 1
fi
sed 's/^/profiled  /' "$tmp/bursts.out"

echo
"$ROOT/bench/attach.sh" "$BUILD"

echo
"$ROOT/bench/attach_service.sh" "$BUILD"

echo
echo "== unwind: DWARF unwinding cost per sample in the daemon (libdwfl), spin and qsort =="
# unwind_cost exits non-zero when it has no samples or a module failed to load.
rc=0
"$ROOT/$BUILD/bench/unwind_cost" || rc=$?
if [ "$rc" -ne 0 ]; then
	echo "FAIL: unwind_cost exited with status $rc" >&2
	exit 1
fi

# Short here to keep `make bench` reasonable; bench/README.md has the 30 s figures.
# load.sh fails when a session failed or the events do not add up to the calls.
echo
"$ROOT/bench/load.sh" 5 "$BUILD"

# --quick: about 15 s; bench/README.md has the full run's figures.
# pipeline.sh fails when a session failed or the events do not add up to the calls.
echo
"$ROOT/bench/pipeline.sh" --quick "$BUILD"

# --quick: about 30 s; bench/README.md has the full run's figures.
# sched.sh fails when a session failed or the probe recorded a program it does not follow.
echo
"$ROOT/bench/sched.sh" --quick "$BUILD"

#!/usr/bin/env bash
# make bench: runs the benchmarks under bench/ and prints their figures.
# Usage: bench/run.sh [BUILD_DIR] [CALLS_PER_ROUND]; see bench/README.md.
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
FUNCS='bench_instrumented,bench_instrumented_args'
NFUNCS=2

echo "== overhead: per-call cost, plain vs profd vs uprobe+uretprobe, same process =="
rc=0
"$ROOT/$BUILD/profctl" run --freq 0 --funcs "$FUNCS" -o "$tmp/overhead.pftrace" -- \
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

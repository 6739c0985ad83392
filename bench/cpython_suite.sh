#!/usr/bin/env bash
# A real interpreter's test suite under heavy instrumentation: 14 modules of
# CPython's regression suite (Debian's /usr/bin/python3 and
# libpython3.11-testsuite) under --funcs 'Py*,_Py*' (thousands of functions,
# tens of millions of calls). Prints the calls made, recorded and dropped
# (they must add up and, at default settings, nothing should be dropped),
# the buffers' peak, wall time with and without profd, and the trace's size.
# Usage: bench/cpython_suite.sh [BUILD_DIR] [extra profctl options...]
# (more --funcs add to the globs: --funcs '*' --min-duration 1us is issue 12's run)
set -u
BUILD=${1:-build}
shift || true
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
MODULES="test_json test_dict test_list test_set test_string test_re test_itertools
test_functools test_collections test_heapq test_bisect test_operator test_enum test_math"
if [ ! -x "$PY" ] || ! "$PY" -c 'import test.test_json' 2>/dev/null; then
	echo "skip: no $PY with its test suite (apt-get install libpython3.11-testsuite)"
	exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# regrtest works in the current directory
run_suite() { (cd "$tmp" && "$@" "$PY" -m test -q $MODULES) ; }

echo "== CPython: 14 regression test modules under --funcs 'Py*,_Py*' =="
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s.%N)
run_suite >"$tmp/plain.out" 2>&1
plain_rc=$?
t1=$(date +%s.%N)
run_suite "$ROOT/$BUILD/profctl" run --funcs 'Py*,_Py*' --freq 999 -o "$tmp/suite.pftrace" "$@" -- \
	>"$tmp/prof.out" 2>"$tmp/prof.err"
prof_rc=$?
t2=$(date +%s.%N)
grep -E "^profctl: (functions|calls|event buffers|error|warning)" "$tmp/prof.err"
read -r made recorded dropped < <(sed -nE \
	's/^profctl: calls: ([0-9]+) made, ([0-9]+) recorded, ([0-9]+) dropped.*/\1 \2 \3/p' \
	"$tmp/prof.err") || true
filtered=$(sed -nE 's/^profctl: calls: .*, ([0-9]+) filtered.*/\1/p' "$tmp/prof.err")
filtered=${filtered:-0}
# CPYTHON_TRACE_OUT=FILE keeps the trace (for profctl report)
[ -z "${CPYTHON_TRACE_OUT:-}" ] || cp "$tmp/suite.pftrace" "$CPYTHON_TRACE_OUT"
bytes=$(stat -c %s "$tmp/suite.pftrace" 2>/dev/null || echo 0)
awk -v a="$t0" -v b="$t1" -v c="$t2" -v r="${recorded:-0}" -v n="$bytes" 'BEGIN {
	printf "wall: %.1f s plain, %.1f s profiled; trace %.0f MB, %.1f bytes per recorded event\n",
		b - a, c - b, n / 1e6, r ? n / (2 * r) : 0 }'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
fail=0
if [ "$prof_rc" -ne "$plain_rc" ]; then
	echo "FAIL: the suite exited $prof_rc profiled, $plain_rc plain" >&2
	fail=1
fi
if [ -z "${made:-}" ] || [ $((recorded + dropped + filtered)) -ne "$made" ]; then
	echo "FAIL: no calls line, or recorded + dropped + filtered != made" >&2
	fail=1
fi
exit "$fail"

#!/usr/bin/env bash
# Trace size: the python json round trip under --funcs 'Py*,_Py*' recorded by a
# profd of its own; prints the calls, the trace's bytes per recorded event and
# profd's CPU per recorded event: all of it, and its main thread's (the epoll
# loop; the rest is the writer's compression thread). Extra arguments go to `profctl run` (e.g.
# --trace-compression none). Usage: bench/trace_size.sh [BUILD_DIR] [-- PROFCTL_ARGS...]
# Exits non-zero when the session failed.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build
if [ $# -gt 0 ] && [ "$1" != -- ]; then BUILD=$1; shift; fi
if [ $# -gt 0 ] && [ "$1" = -- ]; then shift; fi
PY=/usr/bin/python3
# shellcheck source=bench/bench_common.bash
. "$ROOT/bench/bench_common.bash"
[ -x "$PY" ] || { echo "FAIL: no $PY" >&2; exit 1; }

tmp=$(mktemp -d)
profd_pid=
cleanup() {
	if [ -n "$profd_pid" ]; then kill -TERM "$profd_pid" 2>/dev/null || true; fi
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
cpu_ticks() { sed 's/^.*) //' "$1" | awk '{ print $12 + $13 }'; }

profd_start "$tmp"
ticks0=$(cpu_ticks "/proc/$profd_pid/stat")
main0=$(cpu_ticks "/proc/$profd_pid/task/$profd_pid/stat")
"$ROOT/$BUILD/profctl" run --funcs 'Py*,_Py*' --freq 999 -o "$tmp/py.pftrace" "$@" -- \
	"$PY" -c 'import json
d = [{"a": i, "b": [i, str(i)], "c": {"x": i}} for i in range(200000)]
print(len(json.loads(json.dumps(d))))' >"$tmp/py.out" 2>"$tmp/py.err" || {
	echo "FAIL: profctl run failed" >&2; sed 's/^/  | /' "$tmp/py.err" >&2; exit 1; }
ticks1=$(cpu_ticks "/proc/$profd_pid/stat")
main1=$(cpu_ticks "/proc/$profd_pid/task/$profd_pid/stat")
if grep -q '^profctl: error' "$tmp/py.err"; then
	grep '^profctl: error' "$tmp/py.err" >&2
	exit 1
fi
read -r events dropped < <(summary_counts "$tmp/py.err")
bytes=$(stat -c %s "$tmp/py.pftrace")
awk -v e="$events" -v d="$dropped" -v b="$bytes" -v t0="$ticks0" -v t1="$ticks1" \
	-v m0="$main0" -v m1="$main1" -v hz="$(getconf CLK_TCK)" 'BEGIN {
	printf "events recorded %d, calls dropped %d, trace %d bytes = %.2f B/event, " \
		"profd CPU %.2f s = %.1f ns/event (main thread %.1f ns/event)\n", e, d, b, b / e,
		(t1 - t0) / hz, 1e9 * (t1 - t0) / hz / e, 1e9 * (m1 - m0) / hz / e }'

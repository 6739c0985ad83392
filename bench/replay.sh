#!/usr/bin/env bash
# The same agent stream through profd again and again: for comparing two
# builds of profd on exactly the same events (issue 28). Captures what an
# agent sends (bench/stream_tee.so), then replays it from a process of its
# own (bench/stream_replay, through `profctl run`), so that each replay
# decodes the same events with the same clock pairs.
#
#   bench/replay.sh capture CAPTURE [BUILD_DIR] -- PROFCTL_RUN_ARGS... -- CMD...
#   bench/replay.sh dump CAPTURE OUT.dump [BUILD_DIR] -- PROFCTL_RUN_ARGS...
#       `profctl report --dump` of the replay's trace, the replaying process's
#       pid written PID: two builds' dumps of one capture are equal when
#       they decode alike (--sched off: the replaying process's own
#       scheduler states are not the capture's)
#   bench/replay.sh cost CAPTURE [BUILD_DIR] -- PROFCTL_RUN_ARGS...
#       profd's CPU time per event replaying it (utime + stime, 10 ms steps)
#       and, with valgrind on PATH, its instructions per event (cachegrind:
#       the same on every run, whatever the machine's load)
# BUILD_DIR (relative to the tree's root) defaults to build; a capture made
# with one build's agent replays into profd builds that read its stream.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
usage() {
	sed -n '2,21p' "$0" >&2
	exit 2
}
[ $# -ge 2 ] || usage
MODE=$1 CAPTURE=$2
shift 2
OUT=
if [ "$MODE" = dump ]; then
	[ $# -ge 1 ] || usage
	OUT=$1
	shift
fi
BUILD=build
if [ $# -gt 0 ] && [ "$1" != -- ]; then
	BUILD=$1
	shift
fi
if [ $# -eq 0 ] || [ "$1" != -- ]; then usage; fi
shift
RUN_ARGS=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	RUN_ARGS+=("$1")
	shift
done
[ $# -gt 0 ] && shift # the second --: the command (capture only)
# shellcheck source=bench/bench_common.bash
. "$ROOT/bench/bench_common.bash"
for f in profd profctl libprofagent.so bench/stream_tee.so bench/stream_replay; do
	if [ ! -e "$ROOT/$BUILD/$f" ]; then
		echo "FAIL: $BUILD/$f is missing (make -j2 all $BUILD/bench/stream_tee.so" \
			"$BUILD/bench/stream_replay)" >&2
		exit 1
	fi
done

bench_tmp

# One replay session: profctl's stderr in $tmp/run.err, the trace in $tmp/run.pftrace.
replay() {
	"$ROOT/$BUILD/profctl" run -o "$tmp/run.pftrace" "${RUN_ARGS[@]}" -- \
		"$ROOT/$BUILD/bench/stream_replay" "$(realpath "$CAPTURE")" \
		>"$tmp/run.out" 2>"$tmp/run.err" || true
	if ! grep -qE '^profctl: calls: ' "$tmp/run.err"; then
		echo "FAIL: the replay recorded nothing" >&2
		sed 's/^/  | /' "$tmp/run.err" >&2
		exit 1
	fi
}

case $MODE in
capture)
	[ $# -gt 0 ] || usage
	profd_start "$tmp"
	STREAM_TEE=$(realpath -m "$CAPTURE") LD_PRELOAD="$ROOT/$BUILD/bench/stream_tee.so" \
		"$ROOT/$BUILD/profctl" run -o "$tmp/run.pftrace" "${RUN_ARGS[@]}" -- "$@" \
		>/dev/null 2>"$tmp/run.err" || true
	grep -E '^profctl: (calls|error)' "$tmp/run.err" || true
	echo "capture: $CAPTURE, $(stat -c %s "$CAPTURE") bytes"
	;;
dump)
	profd_start "$tmp"
	replay
	"$ROOT/$BUILD/profctl" report --dump "$tmp/run.pftrace" |
		awk 'NR == 1 && $1 == "process" { pid = $2 }
		     { if (($1 == "process" || $1 == "thread") && $2 == pid) $2 = "PID"; print }' \
			>"$OUT"
	echo "dump: $OUT, $(wc -l <"$OUT") lines"
	;;
cost)
	profd_start "$tmp"
	cpu() { local l; read -r l <"/proc/$profd_pid/stat"; l=${l##*) }
		read -r _ _ _ _ _ _ _ _ _ _ _ u s _ <<<"$l"; echo $((u + s)); }
	c0=$(cpu)
	replay
	c1=$(cpu)
	read -r events _ < <(summary_counts "$tmp/run.err")
	awk -v c=$((c1 - c0)) -v e="$events" -v hz="$(getconf CLK_TCK)" 'BEGIN {
		printf "profd: %.1f ns/event of CPU (%d events)\n", c * 1e9 / hz / e, e }'
	kill -TERM "$profd_pid"
	wait "$profd_pid" || true
	profd_pid=
	if ! command -v valgrind >/dev/null; then
		echo "instructions: skip (no valgrind)"
		exit 0
	fi
	rm -f "$tmp/profd.sock"
	valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$tmp/cg.out" \
		"$ROOT/$BUILD/profd" --foreground --socket "$tmp/profd.sock" 2>"$tmp/profd.log" &
	profd_pid=$!
	for _ in $(seq 400); do [ -S "$tmp/profd.sock" ] && break; sleep 0.05; done
	export PROFD_SOCKET="$tmp/profd.sock"
	replay
	kill -TERM "$profd_pid"
	wait "$profd_pid" || true
	profd_pid=
	cg_annotate "$tmp/cg.out" 2>/dev/null | awk -v e="$events" '
		/PROGRAM TOTALS/ { gsub(",", "", $1); printf "profd: %.1f instructions/event in all\n", $1 / e }
		/^ *[0-9,]+ \(/ && /:/ && !/TOTALS/ && n < 8 { v = $1; gsub(",", "", v)
			if (v / e >= 1) { printf "  %7.1f %s\n", v / e, $NF; n++ } }'
	;;
*) usage ;;
esac

#!/usr/bin/env bash
# Load: two targets x 4 threads call instrumented functions as fast as they can
# for SECONDS (default 30), both recorded by ONE shared profd. Prints the events
# profd ingested per second, the calls the agents dropped (rings full), profd's
# CPU time and memory (sampled every second, to show that it stays bounded),
# and the bytes of trace per recorded event.
# Usage: bench/load.sh [SECONDS] [BUILD_DIR]; see bench/README.md.
# Exits non-zero when a session failed or the events do not add up to the calls.
set -eu
SECS=${1:-30}
BUILD=${2:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SESSIONS=2
THREADS=4
FUNCS='load_*' # load_outer and load_inner, nothing else in bench/load_target.c
NFUNCS=2
# shellcheck source=bench/bench_common.bash
. "$ROOT/bench/bench_common.bash"

case "$SECS" in
'' | *[!0-9]* | 0)
	echo "usage: $0 [SECONDS >= 1] [BUILD_DIR]" >&2
	exit 2
	;;
esac
require_load_target_build

tmp=$(mktemp -d)
profd_pid=
sampler_pid=
cleanup() {
	if [ -n "$sampler_pid" ]; then kill "$sampler_pid" 2>/dev/null || true; fi
	if [ -n "$profd_pid" ]; then kill -TERM "$profd_pid" 2>/dev/null || true; fi
	wait 2>/dev/null || true
	rm -rf "$tmp" # the traces: about 20 bytes per event, gigabytes at 30 s
}
trap cleanup EXIT

# utime + stime of every thread of the process, in clock ticks (after "(comm) ": fields 12, 13)
cpu_ticks() { sed 's/^.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
# VmRSS and VmHWM, in KiB
mem_kib() { awk '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { print r, h }' "/proc/$1/status"; }

echo "== load: $SESSIONS targets x $THREADS threads, calls as fast as possible for $SECS s, one shared profd =="
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# A shared daemon, not the private one profctl would start per session: both
# sessions must go to the same process for its CPU and memory to be measured.
profd_start "$tmp"

# One line a second: seconds since start, VmRSS, VmHWM (KiB).
(
	i=0
	while [ ! -e "$tmp/stop-sampler" ] && [ -r "/proc/$profd_pid/status" ]; do
		echo "$i $(mem_kib "$profd_pid")"
		i=$((i + 1))
		sleep 1
	done
) >"$tmp/mem.log" &
sampler_pid=$!

ticks0=$(cpu_ticks "$profd_pid")
t0=$(date +%s.%N)
pids=()
for i in $(seq "$SESSIONS"); do
	"$ROOT/$BUILD/profctl" run --funcs "$FUNCS" --freq 999 -o "$tmp/load$i.pftrace" -- \
		"$ROOT/$BUILD/bench/load_target" "$THREADS" "$SECS" >"$tmp/t$i.out" 2>"$tmp/t$i.err" &
	pids+=("$!")
done
rcs=()
for i in $(seq "$SESSIONS"); do
	rc=0
	wait "${pids[$((i - 1))]}" || rc=$?
	rcs+=("$rc")
done
t1=$(date +%s.%N)
if ! kill -0 "$profd_pid" 2>/dev/null; then
	echo "FAIL: profd died during the sessions" >&2
	sed 's/^/  | /' "$tmp/profd.log" "$tmp"/t*.err >&2
	profd_pid=
	exit 1
fi
# Both traces are finalized once profctl has printed its summary: profd's work is done.
ticks1=$(cpu_ticks "$profd_pid")
read -r rss_end hwm_end < <(mem_kib "$profd_pid")
touch "$tmp/stop-sampler"
wait "$sampler_pid" || true
sampler_pid=
echo "$(awk -v t0="$t0" -v t1="$t1" 'BEGIN { printf "%d", t1 - t0 + 0.5 }') $rss_end $hwm_end" \
	>>"$tmp/mem.log"
kill -TERM "$profd_pid"
profd_rc=0
wait "$profd_pid" || profd_rc=$?
profd_pid=
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"

fail=0
mismatch=0
parsed=0
total_calls=0
total_recorded=0
total_dropped=0
total_bytes=0
row() { # name calls recorded dropped bytes
	awk -v n="$1" -v c="$2" -v r="$3" -v d="$4" -v b="$5" -v t="$SECS" 'BEGIN {
		printf "%-8s %13.0f %13.0f %13.0f %13.0f %13.0f %8.2f%% %13.0f %9.2f\n", n, c, c / t, r,
			r / t, d, r + 2 * d ? 100 * 2 * d / (r + 2 * d) : 0, b, r ? b / r : 0 }'
}
printf "%-8s %13s %13s %13s %13s %13s %9s %13s %9s\n" session calls "calls/s" "events rec." \
	"rec./s" "calls dropped" "dropped" "trace bytes" "B/event"
for i in $(seq "$SESSIONS"); do
	err="$tmp/t$i.err"
	calls=$(sed -nE 's/^calls: .* total ([0-9]+)$/\1/p' "$tmp/t$i.out")
	recorded=
	dropped=
	read -r recorded dropped < <(summary_counts "$err") || true
	bytes=$(stat -c %s "$tmp/load$i.pftrace" 2>/dev/null || echo 0)
	ok=1
	if [ "${rcs[$((i - 1))]}" -ne 0 ]; then
		echo "FAIL: session $i: profctl exited with status ${rcs[$((i - 1))]}" >&2
		ok=0
	fi
	# profctl exits with the program's status: a failed session only shows on stderr.
	if grep -qE "^profctl: error" "$err"; then
		echo "FAIL: session $i: $(grep -E '^profctl: error' "$err" | head -n 1)" >&2
		ok=0
	fi
	grep -E "^profctl: warning" "$err" | sed "s/^profctl: /WARNING: session $i: /" >&2 || true
	if ! grep -qE "^profctl: functions: $NFUNCS matched, $NFUNCS instrumented" "$err"; then
		echo "FAIL: session $i: profd did not instrument exactly load_outer and load_inner" >&2
		ok=0
	fi
	if [ -z "$calls" ] || [ -z "$recorded" ] || [ -z "$dropped" ]; then
		echo "FAIL: session $i: no call count from the target or no events line from profctl" >&2
		ok=0
	else
		row "$i" "$calls" "$recorded" "$dropped" "$bytes"
		parsed=$((parsed + 1))
		total_calls=$((total_calls + calls))
		total_recorded=$((total_recorded + recorded))
		total_dropped=$((total_dropped + dropped))
		total_bytes=$((total_bytes + bytes))
		# Every call is counted: recorded (an enter and an exit event in the
		# trace) or dropped from the timeline (counted once, by the agent's
		# aggregates). So recorded events + 2 x dropped calls must be exactly
		# 2 x the program's calls. Anything else means events or counts were
		# lost (or invented) between the hooks and the trace.
		if [ $((recorded + 2 * dropped)) -ne $((2 * calls)) ]; then
			echo "FAIL: session $i: $recorded events recorded + 2 x $dropped calls dropped" \
				"!= 2 x $calls calls (off by $((recorded + 2 * dropped - 2 * calls)))" >&2
			mismatch=1
			ok=0
		fi
	fi
	if [ "$ok" -eq 0 ]; then
		sed 's/^/  | /' "$tmp/t$i.out" "$err" >&2
		fail=1
	fi
done
if [ "$parsed" -eq "$SESSIONS" ]; then
	row total "$total_calls" "$total_recorded" "$total_dropped" "$total_bytes"
	if [ "$mismatch" -eq 0 ]; then
		echo "recorded + 2 x dropped = 2 x calls in every session: no event or drop went missing"
	fi
fi

awk -v a="$ticks0" -v b="$ticks1" -v hz="$(getconf CLK_TCK)" -v t0="$t0" -v t1="$t1" \
	-v r="$total_recorded" '
	BEGIN { cpu = (b - a) / hz; wall = t1 - t0
		printf "profd CPU: %.2f s in %.1f s of sessions = %.1f %% of one CPU", cpu, wall,
			100 * cpu / wall
		if (r) printf ", %.0f ns per recorded event", 1e9 * cpu / r
		printf "\n" }'
# VmHWM is read once, at the end; the per-second RSS shows whether memory grows with time.
awk '{ if ($2 > max) max = $2; if ($3 > hwm) hwm = $3; last = $2
		if ($1 % 5 == 0) series = series sprintf(" %ds:%.1f", $1, $2 / 1024)
		else tail = sprintf(" %ds:%.1f", $1, $2 / 1024) }
	END { if ($1 % 5) series = series tail
		printf "profd memory: peak %.1f MiB (VmHWM %.1f, largest RSS sample %.1f);" \
			" RSS after the sessions %.1f MiB\n", (hwm > max ? hwm : max) / 1024,
			hwm / 1024, max / 1024, last / 1024
		printf "profd RSS every 5 s (MiB):%s\n", series }' "$tmp/mem.log"

if [ "$profd_rc" -ne 0 ]; then
	echo "FAIL: profd exited with status $profd_rc on SIGTERM" >&2
	sed 's/^/  | /' "$tmp/profd.log" >&2
	fail=1
fi
exit "$fail"

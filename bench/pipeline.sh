#!/usr/bin/env bash
# Pipeline: what the event pipeline (the agent's flusher thread in the target,
# then profd, and profctl) costs per event, and the highest event rate that one
# session sustains without dropping a call, for 1, 2 and 4 target threads.
# Usage: bench/pipeline.sh [--quick] [--flat N] [--trace-compression C] [--sched on|off]
# [BUILD_DIR]; see bench/README.md.
# Exits non-zero when a session failed or its events do not add up to the calls.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build
QUICK=0
COMPRESSION=deflate # profctl's default
FLAT_RUNS=0 # --flat N: only the flat-out run, N times, and their medians
usage() {
	echo "usage: $0 [--quick] [--flat N] [--trace-compression deflate|zstd|none] [--sched on|off]" \
		"[BUILD_DIR]  (default: about 1 minute; --quick: about 15 s)" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--trace-compression)
		[ $# -ge 2 ] || usage
		COMPRESSION=$2
		shift
		;;
	--sched)
		[ $# -ge 2 ] || usage
		SCHED=$2
		shift
		;;
	--flat)
		if [ $# -lt 2 ] || ! [ "$2" -gt 0 ] 2>/dev/null; then usage; fi
		FLAT_RUNS=$2
		shift
		;;
	-*) usage ;;
	*) BUILD=$1 ;;
	esac
	shift
done

FUNCS='load_*' # load_outer and load_inner, nothing else in bench/load_target.c
NFUNCS=2
THREAD_COUNTS='1 2 4'
# The first rate tried with 1 thread, in events/s (2 per call). 2 and 4 threads
# start from the rate 1 thread sustained.
START_EVENTS=8000000
if [ "$QUICK" -eq 1 ]; then
	FLAT_SECS=2 SEARCH_SECS=1 MAX_RUNS=5 PRECISION=4
else
	FLAT_SECS=3 SEARCH_SECS=3 MAX_RUNS=8 PRECISION=8
fi
# The search stops once the bracket is narrower than 1/PRECISION of the rate
# sustained, or after MAX_RUNS sessions per thread count.
# shellcheck source=bench/bench_common.bash
. "$ROOT/bench/bench_common.bash"
POLL_S=0.01 # how often the flusher's CPU time is read
HZ=$(getconf CLK_TCK)

require_load_target_build
if ! read -r line </proc/self/schedstat || [ "${line%% *}" = 0 ]; then
	echo "FAIL: /proc/PID/schedstat gives no CPU time (kernel without CONFIG_SCHED_INFO?)" >&2
	exit 1
fi

tmp=$(mktemp -d)
profd_pid=
profctl_pid=
watcher_pid=
target_pid=
cleanup() {
	local p
	for p in "$watcher_pid" "$profctl_pid" "$target_pid"; do
		if [ -n "$p" ]; then kill "$p" 2>/dev/null || true; fi
	done
	if [ -n "$profd_pid" ]; then kill -TERM "$profd_pid" 2>/dev/null || true; fi
	wait 2>/dev/null || true
	rm -rf "$tmp" # the trace of a run: about 19 bytes per event, up to a GB
}
trap cleanup EXIT

# A sleep without a fork: a read that times out on a FIFO nobody writes to.
mkfifo "$tmp/nap"
exec {nap_fd}<>"$tmp/nap"
nap() { read -r -t "$1" -u "$nap_fd" _ || true; }

# utime + stime of every thread of profd, the exited ones included, in ns
# (10 ms resolution: CLK_TCK is 100).
profd_cpu_ns() {
	local line
	read -r line <"/proc/$profd_pid/stat"
	line=${line##*) } # after "(comm) ", utime and stime are fields 12 and 13
	read -r _ _ _ _ _ _ _ _ _ _ _ utime stime _ <<<"$line"
	echo $(((utime + stime) * 1000000000 / HZ))
}

# Sets target_pid and flusher_tid once profctl's child runs load_target and its
# agent has started the thread named profd-flusher; fails after 5 s.
find_flusher() { # PROFCTL_PID
	local i child comm task
	for ((i = 0; i < 1000; i++)); do
		for child in $(pgrep -P "$1" || true); do
			read -r comm 2>/dev/null <"/proc/$child/comm" || continue
			[ "$comm" = load_target ] || continue
			for task in "/proc/$child/task"/*; do
				read -r comm 2>/dev/null <"$task/comm" || continue
				if [ "$comm" = profd-flusher ]; then
					target_pid=$child
					flusher_tid=${task##*/}
					return 0
				fi
			done
		done
		kill -0 "$1" 2>/dev/null || return 1
		nap 0.005
	done
	return 1
}

# Reads the flusher thread's CPU time every POLL_S until the thread is gone,
# then prints the last value (ns), the number of reads, and the wall time (ns)
# from the start of the last successful read to the first failed one: the
# thread cannot have used more CPU than that after the last read. The first
# field of schedstat is the thread's total on-CPU time (sum_exec_runtime, which
# utime + stime of /proc/PID/task/TID/stat split at a resolution of 10 ms).
# Then reads profctl's (single-threaded) CPU time the same way until it is
# reaped, and prints it last: a zombie's schedstat still reads, so the last
# value is its total.
watch_flusher() { # TGID TID PROFCTL_PID
	local f="/proc/$1/task/$2/schedstat" line ns=0 reads=0 t t_ok ctl_ns=0 tail
	t_ok=$EPOCHREALTIME
	while t=$EPOCHREALTIME && read -r line 2>/dev/null <"$f"; do
		t_ok=$t
		ns=${line%% *}
		reads=$((reads + 1))
		nap "$POLL_S"
	done
	t=$EPOCHREALTIME
	tail=$(((${t/[.,]/} - ${t_ok/[.,]/}) * 1000))
	while read -r line 2>/dev/null <"/proc/$3/schedstat"; do
		ctl_ns=${line%% *}
		nap "$POLL_S"
	done
	echo "$ns $reads $tail $ctl_ns"
}

# Figures of the last run_session, for the search and the summary.
run_dropped=0
run_ok=0
run_drop_pct=0
run_made_pct=0
run_figures=

mega() { awk -v n="$1" 'BEGIN { printf "%.2fM", n / 1e6 }'; }

header() {
	echo "flush, profd, ctl ns/event: CPU time of the target's flusher thread, of profd, of profctl, per"
	echo "event recorded; all: the three together (the pipeline all-in, less the target's own threads);"
	echo "tail <: at most this much flusher CPU per event went unseen after its last read; tgt ns/call:"
	echo "wall time x threads / calls (flat out only); CPU %: of one CPU, over the session"
	printf "%-7s %12s %9s %9s %13s %7s %7s %8s %7s %6s %8s %6s %6s %6s  %s\n" threads \
		"calls/s/thr" "calls/s" "ev/s rec" "calls dropped" dropped "tgt ns" \
		"flush ns" "tail <" "flush%" "profd ns" profd% "ctl ns" "all ns" result
	printf "%-7s %12s %9s %9s %13s %7s %7s %8s %7s %6s %8s %6s %6s %6s\n" "" "(pacing)" "" "" "" \
		"" "/call" "/event" "/event" "CPU" "/event" CPU "/event" "/event"
}

# One profctl run session of load_target: THREADS, RATE calls/s per thread (0:
# flat out), SECONDS. Prints one row and sets run_*; exits on a failed session.
run_session() {
	local threads=$1 rate=$2 secs=$3 rc=0 t0 t1 p0 p1 calls wall recorded='' dropped='' ok=1
	local flusher_ns reads tail_ns ctl_ns result args=("$threads" "$secs")
	[ "$rate" -eq 0 ] || args+=(--rate "$rate")
	target_pid=
	flusher_tid=
	p0=$(profd_cpu_ns)
	t0=$EPOCHREALTIME
	"$ROOT/$BUILD/profctl" run --funcs "$FUNCS" --freq 0 --trace-compression "$COMPRESSION" \
		--sched "${SCHED:-on}" \
		-o "$tmp/run.pftrace" -- \
		"$ROOT/$BUILD/bench/load_target" "${args[@]}" >"$tmp/run.out" 2>"$tmp/run.err" &
	profctl_pid=$!
	if find_flusher "$profctl_pid"; then
		watch_flusher "$target_pid" "$flusher_tid" "$profctl_pid" >"$tmp/flusher" &
		watcher_pid=$!
	fi
	wait "$profctl_pid" || rc=$?
	profctl_pid=
	t1=$EPOCHREALTIME
	if ! kill -0 "$profd_pid" 2>/dev/null; then
		echo "FAIL: profd died during the session" >&2
		sed 's/^/  | /' "$tmp/profd.log" "$tmp/run.err" >&2
		profd_pid=
		exit 1
	fi
	# The trace is finalized once profctl has printed its summary: profd's work is done.
	p1=$(profd_cpu_ns)
	rm -f "$tmp/run.pftrace"
	flusher_ns=0 reads=0 tail_ns=0 ctl_ns=0
	if [ -n "$watcher_pid" ]; then
		wait "$watcher_pid" || true
		watcher_pid=
		read -r flusher_ns reads tail_ns ctl_ns <"$tmp/flusher"
	else
		echo "FAIL: no thread named profd-flusher appeared in load_target" >&2
		ok=0
	fi
	target_pid=

	calls=$(sed -nE 's/^calls: .* total ([0-9]+)$/\1/p' "$tmp/run.out")
	wall=$(sed -nE 's/^ran ([0-9.]+) s in .*/\1/p' "$tmp/run.out")
	read -r recorded dropped < <(summary_counts "$tmp/run.err") || true
	if [ "$rc" -ne 0 ]; then
		echo "FAIL: profctl exited with status $rc" >&2
		ok=0
	fi
	# profctl exits with the program's status: a failed session only shows on stderr.
	if grep -qE "^profctl: error" "$tmp/run.err"; then
		echo "FAIL: $(grep -E '^profctl: error' "$tmp/run.err" | head -n 1)" >&2
		ok=0
	fi
	grep -E "^profctl: warning" "$tmp/run.err" | sed "s/^profctl: /WARNING: /" >&2 || true
	if ! grep -qE "^profctl: functions: $NFUNCS matched, $NFUNCS instrumented" "$tmp/run.err"; then
		echo "FAIL: profd did not instrument exactly load_outer and load_inner" >&2
		ok=0
	fi
	if [ -z "$calls" ] || [ -z "$wall" ] || [ -z "$recorded" ] || [ -z "$dropped" ]; then
		echo "FAIL: no call count from the target or no events line from profctl" >&2
		ok=0
	elif [ $((recorded + 2 * dropped)) -ne $((2 * calls)) ]; then
		# Every call is recorded (enter + exit) or dropped (counted once, no
		# event): see bench/load.sh for why this must hold exactly.
		echo "FAIL: $recorded events recorded + 2 x $dropped calls dropped != 2 x $calls calls" \
			"(off by $((recorded + 2 * dropped - 2 * calls)))" >&2
		ok=0
	fi
	if [ "$ok" -eq 0 ]; then
		sed 's/^/  | /' "$tmp/run.out" "$tmp/run.err" >&2
		exit 1
	fi

	local calls_m ev_m pct fl_ev tail_ev fl_cpu pr_ev pr_cpu tgt made pacing ctl_ev all_ev
	read -r calls_m ev_m pct fl_ev tail_ev fl_cpu pr_ev pr_cpu tgt made ctl_ev all_ev < <(awk \
		-v th="$threads" -v rate="$rate" -v c="$calls" -v w="$wall" -v r="$recorded" \
		-v d="$dropped" -v f="$flusher_ns" -v tail="$tail_ns" -v p="$((p1 - p0))" \
		-v ctl="$ctl_ns" -v t0="$t0" -v t1="$t1" 'BEGIN {
		s = t1 - t0; ev = r ? r : 1
		printf "%.2f %.2f %.2f %.1f %.2f %.0f %.1f %.0f %s %.0f %.1f %.1f\n", c / w / 1e6,
			r / w / 1e6, 100 * 2 * d / (r + 2 * d), f / ev, tail / ev, 100 * f / 1e9 / s,
			p / ev, 100 * p / 1e9 / s, rate ? "paced" : sprintf("%.2f", 1e9 * w * th / c),
			rate ? 100 * c / w / (rate * th) : 100, ctl / ev, (f + p + ctl) / ev }')
	pacing="flat out"
	[ "$rate" -eq 0 ] || pacing=$(mega "$rate")
	if [ "$rate" -eq 0 ]; then
		result=flat-out
	elif [ "$dropped" -gt 0 ]; then
		result=drops
	elif [ "$made" -lt 90 ]; then
		# more than 10 % short of the rate asked: the target, not the
		# pipeline, set the rate (or the machine was too busy to run it)
		result=short
	else
		result=ok
	fi
	printf "%-7d %12s %8.2fM %8.2fM %13d %6.2f%% %7s %8.1f %7.2f %5d%% %8.1f %5d%% %6.1f %6.1f  %s\n" \
		"$threads" "$pacing" "$calls_m" "$ev_m" "$dropped" "$pct" "$tgt" "$fl_ev" "$tail_ev" \
		"$fl_cpu" "$pr_ev" "$pr_cpu" "$ctl_ev" "$all_ev" "$result"
	if [ "$reads" -lt 10 ]; then
		echo "WARNING: the flusher's CPU time was read only $reads times" >&2
	fi
	run_dropped=$dropped
	run_drop_pct=$pct
	run_made_pct=$made
	run_ok=0
	[ "$result" != ok ] || run_ok=1
	# for the summary: events/s recorded, dropped %, flusher, profd, all-in ns/event, target ns/call
	run_figures="${ev_m}M $pct% $fl_ev $pr_ev $all_ev $tgt"
}

summary_row() { # THREADS WHAT FIGURES NOTE
	# shellcheck disable=SC2086 # FIGURES: six words
	printf "%-7s %-10s %12s %8s %12s %12s %12s %12s  %s\n" "$1" "$2" $3 "$4" >>"$tmp/summary"
}

# Doubles the rate while no call is dropped, then bisects. Appends a line to the summary.
search() { # THREADS START_EVENTS_PER_S
	local threads=$1 events=$2 lo=0 hi=0 lo_figures='' hi_dropped=0 hi_pct=- runs=0 note
	local note_fast=''
	while [ "$runs" -lt "$MAX_RUNS" ]; do
		run_session "$threads" $((events / (2 * threads))) "$SEARCH_SECS"
		runs=$((runs + 1))
		if [ "$run_ok" -eq 1 ]; then
			lo=$events lo_figures=$run_figures
		elif [ "$run_dropped" -eq 0 ]; then
			note_fast="at $(mega "$events") the target made $run_made_pct% of the calls asked"
			note_fast="$note_fast (a busy machine?)"
			break
		else
			hi=$events hi_dropped=$run_dropped hi_pct=$run_drop_pct
		fi
		if [ "$hi" -eq 0 ]; then
			events=$((2 * events))
		elif [ "$lo" -eq 0 ]; then
			events=$((events / 2))
		elif [ $(((hi - lo) * PRECISION)) -le "$lo" ]; then
			break
		else
			events=$(((lo + hi) / 2))
		fi
	done
	sustained=$lo
	if [ "$lo" -eq 0 ] && [ "$hi" -eq 0 ]; then
		summary_row "$threads" sustained "- - - - - -" "$note_fast; $runs runs"
		return
	elif [ "$lo" -eq 0 ]; then
		note="dropped at every rate tried, down to $(mega "$hi"): $hi_dropped calls ($hi_pct%)"
		summary_row "$threads" sustained "- - - - - -" "$note; $runs runs"
		return
	fi
	note="asked $(mega "$lo")"
	if [ "$hi" -gt 0 ]; then
		note="$note; $(mega "$hi"): $hi_dropped calls dropped ($hi_pct%)"
	else
		note="$note; $note_fast"
	fi
	summary_row "$threads" sustained "$lo_figures" "$note; $runs runs"
}

echo "== pipeline: flusher and profd CPU per event, and the highest rate recorded without drops =="
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r load1 _ </proc/loadavg
if [ "${load1%%.*}" -ge 1 ]; then
	echo "WARNING: the machine is busy (load average $load1): the rates will come out low" >&2
fi
profd_start "$tmp"

# --flat N: N flat-out runs of 2 s (the issue's figure), then the median of each column.
flat_only() {
	local i
	: >"$tmp/flat"
	echo "-- 1 thread calling flat out for 2 s, $FLAT_RUNS times"
	for ((i = 0; i < FLAT_RUNS; i++)); do
		run_session 1 0 2
		echo "$run_figures" >>"$tmp/flat"
	done
	echo
	echo "median of $FLAT_RUNS flat-out runs (each column apart):"
	printf "%12s %8s %12s %12s %12s %12s\n" "events/s rec" dropped "flush ns/ev" \
		"profd ns/ev" "all-in ns/ev" "tgt ns/call"
	for i in 1 2 3 4 5 6; do
		tr -d 'M%' <"$tmp/flat" | awk -v c="$i" '{ print $c }' | sort -g |
			awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
				printf "%s ", m }'
	done | awk '{ printf "%11.2fM %7.2f%% %12.1f %12.1f %12.1f %12.2f\n", $1, $2, $3, $4, $5, $6 }'
}

header
if [ "$FLAT_RUNS" -gt 0 ]; then
	flat_only
else
	echo "-- 1 thread calling flat out for $FLAT_SECS s"
	run_session 1 0 "$FLAT_SECS"
	: >"$tmp/summary"
	summary_row 1 "flat out" "$run_figures" ""
	sustained=0
	for t in $THREAD_COUNTS; do
		start=$START_EVENTS
		[ "$sustained" -eq 0 ] || start=$sustained
		echo "-- $t thread(s), paced, $SEARCH_SECS s per run: the highest rate with no call dropped"
		search "$t" "$start"
	done

	echo
	echo "summary (sustained: the highest rate asked with no call dropped in a run of $SEARCH_SECS s;"
	echo "events/s recorded: that run's, 2 events per call; the note gives the next rate up asked):"
	printf "%-7s %-10s %12s %8s %12s %12s %12s %12s  %s\n" threads run "events/s rec" dropped \
		"flush ns/ev" "profd ns/ev" "all-in ns/ev" "tgt ns/call" note
	cat "$tmp/summary"
fi
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
kill -TERM "$profd_pid"
profd_rc=0
wait "$profd_pid" || profd_rc=$?
profd_pid=
if [ "$profd_rc" -ne 0 ]; then
	echo "FAIL: profd exited with status $profd_rc on SIGTERM" >&2
	sed 's/^/  | /' "$tmp/profd.log" >&2
	exit 1
fi

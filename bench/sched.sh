#!/usr/bin/env bash
# Scheduler states: what profd's scheduler probe costs a program that
# switches a lot (bench/pingpong.c: two threads pass a byte over two pipes),
# and what profd spends per scheduler event it writes. Four configurations,
# interleaved in every repetition (a noisy stretch hits them all alike):
#   (a) bare; (b) profctl run --sched off --freq 0; (c) profctl run --freq 0
#   (sched on); (d) bare, while another session follows an idle process (the
#   probe is loaded and filters every switch on the machine in the kernel).
# Each in two modes: both threads on one CPU (2 switches per round trip, no
# idle task between) and one thread on each of two CPUs (4 switches, through
# the idle tasks, and a cross-CPU wakeup per byte). Left free, the scheduler
# mixes the two from run to run, and the median means nothing.
# Usage: bench/sched.sh [--quick] [--reps N] [--cpus N,M] [BUILD_DIR]; see bench/README.md.
# Prints "n/a" and exits 0 when the probe cannot load here (not root, no BTF);
# exits non-zero when a session failed or the probe recorded what it should not have.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build
QUICK=0
REPS=
CPUS=0,1
usage() {
	echo "usage: $0 [--quick] [--reps N] [--cpus N,M] [BUILD_DIR]" \
		"  (default: 7 repetitions, about 2 minutes; --quick: 3, about 30 s)" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--reps)
		[ $# -ge 2 ] || usage
		case "$2" in '' | *[!0-9]*) usage ;; esac
		REPS=$2
		shift
		;;
	--cpus)
		[ $# -ge 2 ] || usage
		case "$2" in [0-9]*,[0-9]*) ;; *) usage ;; esac
		case "$2" in *[!0-9,]* | *,*,*) usage ;; esac
		CPUS=$2
		shift
		;;
	-*) usage ;;
	*) BUILD=$1 ;;
	esac
	shift
done
# Round trips per run: about 2 s each (4 us per round trip on one CPU, 40-70
# us over two on the 2-vCPU VM, where a cross-CPU wakeup is expensive).
if [ "$QUICK" -eq 1 ]; then
	REPS=${REPS:-3} RT_SAME=150000 RT_SPLIT=10000
else
	REPS=${REPS:-7} RT_SAME=500000 RT_SPLIT=40000
fi
CPU=${CPUS%,*} CPU2=${CPUS#*,}
[ "$REPS" -ge 1 ] || usage
# Probe load + unload cost: this many short sessions with --sched on, and as many with off.
LOAD_SESSIONS=10
# How long a run waits for other profds' probes to go away before it starts anyway.
OTHERS_WAIT_S=5
# More than this in the idle session and the probe recorded what it should have filtered out.
IDLE_MAX_EVENTS=1000
HZ=$(getconf CLK_TCK)
# shellcheck source=bench/bench_common.bash
. "$ROOT/bench/bench_common.bash"

for f in profd profctl libprofagent.so bench/pingpong; do
	if [ ! -x "$ROOT/$BUILD/$f" ]; then
		echo "FAIL: $ROOT/$BUILD/$f is missing: make -j2 all $BUILD/bench/pingpong" >&2
		exit 1
	fi
done
if [ "$CPU" -ge "$(nproc)" ] || [ "$CPU2" -ge "$(nproc)" ] || [ "$CPU" -eq "$CPU2" ]; then
	echo "FAIL: --cpus $CPUS: two different CPUs of 0-$(($(nproc) - 1)) (one CPU alone: bench/pingpong --cpu N)" >&2
	exit 1
fi

tmp=$(mktemp -d)
profd_pid=
idle_pid=
cleanup() {
	if [ -n "$idle_pid" ]; then
		# shellcheck disable=SC2016 # $1 is the inner shell's
		timeout 5 sh -c ': >"$1"' sh "$tmp/idle.fifo" 2>/dev/null || kill "$idle_pid" 2>/dev/null || true
	fi
	if [ -n "$profd_pid" ]; then kill -TERM "$profd_pid" 2>/dev/null || true; fi
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
mkfifo "$tmp/idle.fifo"

# utime + stime of every thread of profd, dead ones included (the writer's
# thread lives as long as its session), in clock ticks (after "(comm) ": fields 12, 13)
profd_ticks() { sed 's/^.*) //' "/proc/$profd_pid/stat" | awk '{ print $12 + $13 }'; }
# BPF programs attached to sched tracepoints by anyone (another engineer's profd):
# every configuration pays their filter. Empty when bpftool is missing.
sched_progs() {
	if command -v bpftool >/dev/null; then
		bpftool prog show 2>/dev/null | grep -c 'name profd_sched_' || true
	fi
}
fail_with() { # MESSAGE [FILES...]
	echo "FAIL: $1" >&2
	shift
	[ $# -eq 0 ] || sed 's/^/  | /' "$@" >&2
	exit 1
}

# "SWITCHES WAKEUPS LOST" from profctl's summary, nothing if the line is absent.
sched_counts() { # PROFCTL_STDERR
	sed -nE 's/^profctl: scheduler: ([0-9]+) switches, ([0-9]+) wakeups \(([0-9]+) lost.*/\1 \2 \3/p' "$1"
}
# The session's summary must say it worked: no error, and for sched on, the probe's counts.
check_session() { # NAME STDERR SCHED(on|off)
	if grep -qE '^profctl: (error|scheduler states: none)' "$2"; then
		fail_with "$1: $(grep -E '^profctl: (error|scheduler states: none)' "$2" | head -n 1)" "$2"
	fi
	if [ "$3" = on ] && [ -z "$(sched_counts "$2")" ]; then
		fail_with "$1: no 'profctl: scheduler:' line: the probe did not follow the target" "$2"
	fi
	if [ "$3" = off ] && grep -q '^profctl: scheduler' "$2"; then
		fail_with "$1: --sched off, yet profctl reports scheduler states" "$2"
	fi
}

# The idle session of (d): a target blocked in open() of a FIFO until idle_stop.
idle_start() {
	# shellcheck disable=SC2016 # $1 is the inner shell's
	"$ROOT/$BUILD/profctl" run --freq 0 -o "$tmp/idle.pftrace" -- \
		sh -c 'echo ready; exec head -c1 "$1"' sh "$tmp/idle.fifo" \
		>"$tmp/idle.out" 2>"$tmp/idle.err" &
	idle_pid=$!
	# profd adds the target to the probe before the target runs: "ready" means followed
	for _ in $(seq 200); do
		grep -q ready "$tmp/idle.out" 2>/dev/null && return 0
		kill -0 "$idle_pid" 2>/dev/null || break
		sleep 0.05
	done
	fail_with "the idle session of (d) did not start" "$tmp/idle.out" "$tmp/idle.err"
}
idle_stop() {
	local rc=0 counts
	# shellcheck disable=SC2016 # $1 is the inner shell's
	timeout 5 sh -c ': >"$1"' sh "$tmp/idle.fifo" || true
	wait "$idle_pid" || rc=$?
	idle_pid=
	[ "$rc" -eq 0 ] || fail_with "the idle session of (d) exited with status $rc" "$tmp/idle.err"
	check_session "(d)'s idle session" "$tmp/idle.err" on
	counts=$(sched_counts "$tmp/idle.err")
	# shellcheck disable=SC2086 # three numbers
	set -- $counts
	if [ $(($1 + $2)) -gt "$IDLE_MAX_EVENTS" ]; then
		fail_with "(d): the idle session recorded $1 switches and $2 wakeups: the probe" \
			"did not filter out the program it does not follow" "$tmp/idle.err"
	fi
}

# One run: appends "MODE CFG REP ALL_ROUND_TRIPS NS/RT CPU_NS/RT SWITCHES/RT PROFD_TICKS
# SCHED_SWITCHES SCHED_WAKEUPS LOST OTHERS_PROGS" to $tmp/results.
run_one() { # MODE(same|split) CFG(a-d) REP
	local args out="$tmp/pp.out" err="$tmp/pp.err" rc=0 t0 t1 sw=0 wk=0 lost=0 rt others
	others=$(sched_progs)
	# another engineer's session: its filter would slow this run and not its pair
	for _ in $(seq "$((OTHERS_WAIT_S * 10))"); do
		[ "${others:-0}" -gt 0 ] || break
		sleep 0.1
		others=$(sched_progs)
	done
	if [ "$1" = same ]; then rt=$RT_SAME args=(--cpu "$CPU" "$RT_SAME"); else rt=$RT_SPLIT args=(--cpu "$CPUS" "$RT_SPLIT"); fi
	local pp=("$ROOT/$BUILD/bench/pingpong" "${args[@]}")
	local run=("$ROOT/$BUILD/profctl" run --freq 0 -o "$tmp/pp.pftrace")
	: >"$err"
	case "$2" in
	a) t0=$(profd_ticks); "${pp[@]}" >"$out" 2>"$err" || rc=$? ;;
	b) t0=$(profd_ticks); "${run[@]}" --sched off -- "${pp[@]}" >"$out" 2>"$err" || rc=$? ;;
	c) t0=$(profd_ticks); "${run[@]}" -- "${pp[@]}" >"$out" 2>"$err" || rc=$? ;;
	d) idle_start; t0=$(profd_ticks); "${pp[@]}" >"$out" 2>"$err" || rc=$? ;;
	esac
	t1=$(profd_ticks)
	[ "$2" != d ] || idle_stop
	[ "$rc" -eq 0 ] || fail_with "$1 ($2): pingpong exited with status $rc" "$out" "$err"
	case "$2" in
	b) check_session "$1 (b)" "$err" off ;;
	c)
		check_session "$1 (c)" "$err" on
		read -r sw wk lost < <(sched_counts "$err")
		[ "$lost" -eq 0 ] || echo "WARNING: $1 (c) rep $3: the probe lost $lost records" >&2
		;;
	esac
	rm -f "$tmp/pp.pftrace"
	# profctl's counts include pingpong's untimed warm-up: ROUND_TRIPS is warm-up + timed
	sed -nE 's/.*round_trips=([0-9]+) .* ns_per_round_trip=([0-9.]+) cpu_ns_per_round_trip=([0-9.]+) switches_per_round_trip=([0-9.]+) .*warmup_round_trips=([0-9]+).*/\2 \3 \4 \5/p' \
		"$out" | awk -v m="$1" -v c="$2" -v r="$3" -v rt="$rt" -v t="$((t1 - t0))" \
		-v s="$sw" -v w="$wk" -v l="$lost" -v o="${others:-0}" \
		'{ print m, c, r, rt + $4, $1, $2, $3, t, s, w, l, o; n++ }
		END { exit n != 1 }' >>"$tmp/results" || fail_with "$1 ($2): no figures from pingpong" "$out"
}

# profd CPU of loading and unloading the probe: N tiny sessions with it, N without.
load_cost_ticks() {
	local on=0 off=0 t0 s
	for _ in $(seq "$LOAD_SESSIONS"); do
		for s in on off; do
			t0=$(profd_ticks)
			"$ROOT/$BUILD/profctl" run --sched "$s" --freq 0 -o "$tmp/pp.pftrace" -- \
				"$ROOT/$BUILD/bench/pingpong" 1 >/dev/null 2>"$tmp/load.err" ||
				fail_with "a short --sched $s session failed" "$tmp/load.err"
			check_session "a short --sched $s session" "$tmp/load.err" "$s"
			if [ "$s" = on ]; then on=$((on + $(profd_ticks) - t0)); else off=$((off + $(profd_ticks) - t0)); fi
		done
	done
	echo $((on - off))
}

echo "== sched: the scheduler probe's cost to a program that switches a lot, and profd's per event =="
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
others=$(sched_progs)
[ -z "$others" ] || echo "BPF programs on the sched tracepoints before the run (others' profd): $others"
profd_start "$tmp"
"$ROOT/$BUILD/profctl" run --freq 0 -o "$tmp/pp.pftrace" -- "$ROOT/$BUILD/bench/pingpong" 1 \
	>/dev/null 2>"$tmp/probe.err" || fail_with "a short session failed" "$tmp/probe.err"
if grep -q '^profctl: scheduler states: none' "$tmp/probe.err"; then
	echo "n/a: $(sed -nE 's/^profctl: scheduler states: none: //p' "$tmp/probe.err" | head -n 1)"
	exit 0
fi
load_ticks=$(load_cost_ticks)

# Every repetition runs every (mode, configuration); the order of the
# configurations rotates, so that none always runs first after a mode change.
cfgs=(a b c d)
: >"$tmp/results"
for rep in $(seq "$REPS"); do
	for mode in same split; do
		for i in 0 1 2 3; do
			run_one "$mode" "${cfgs[$(((i + rep) % 4))]}" "$rep"
		done
	done
done
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
others_after=$(sched_progs)
[ "$others" = "$others_after" ] || echo "BPF programs on the sched tracepoints after the run: $others_after"

awk -v reps="$REPS" -v wait="$OTHERS_WAIT_S" -v cpu="$CPU" -v cpu2="$CPU2" -v hz="$HZ" -v load="$load_ticks" -v nload="$LOAD_SESSIONS" '
	function median(arr, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
			if (arr[j] < arr[i]) { t = arr[i]; arr[i] = arr[j]; arr[j] = t }
		return n % 2 ? arr[(n + 1) / 2] : (arr[n / 2] + arr[n / 2 + 1]) / 2
	}
	# the median over repetitions of FIELD (ns = 5, cpu = 6, rusage switches = 7) for mode, cfg
	function med(m, c, f,   r, v) { for (r = 1; r <= reps; r++) v[r] = val[m, c, r, f]; return median(v, reps) }
	# the median over repetitions of the difference c1 - c2, paired within a repetition
	function dmed(m, c1, c2,   r, v) {
		for (r = 1; r <= reps; r++) v[r] = val[m, c1, r, 5] - val[m, c2, r, 5]
		return median(v, reps)
	}
	function drange(m, c1, c2,   r, d, lo, hi) {
		for (r = 1; r <= reps; r++) {
			d = val[m, c1, r, 5] - val[m, c2, r, 5]
			if (r == 1 || d < lo) lo = d
			if (r == 1 || d > hi) hi = d
		}
		return sprintf("%.0f to %.0f", lo, hi)
	}
	{ for (f = 4; f <= 12; f++) val[$1, $2, $3, f] = $f; runs++; busy += $12 > 0 }
	END {
		name["a"] = "(a) bare"
		name["b"] = "(b) profctl run --sched off --freq 0"
		name["c"] = "(c) profctl run --freq 0 (sched on)"
		name["d"] = "(d) bare, probe following another process"
		title["same"] = sprintf("both threads on CPU %d", cpu)
		title["split"] = sprintf("ping on CPU %d, pong on CPU %d", cpu, cpu2)
		split("same split", modes, " ")
		for (k = 1; k <= 2; k++) {
			m = modes[k]
			printf "\n-- %s: %d round trips per run (warm-up included), median of %d runs --\n", title[m],
				val[m, "a", 1, 4], reps
			printf "%-42s %12s %12s %14s %10s\n", "configuration", "ns/rt wall", "ns/rt CPU", "round trips/s", "switches/rt"
			for (c = 0; c < 4; c++) {
				cf = substr("abcd", c + 1, 1)
				printf "%-42s %12.0f %12.0f %14.0f %10.3f\n", name[cf], med(m, cf, 5), med(m, cf, 6),
					1e9 / med(m, cf, 5), med(m, cf, 7)
			}
			ev_sw = 0; ev_wk = 0; ticks = 0; events = 0; dticks_d = 0; secs_d = 0
			for (r = 1; r <= reps; r++) {
				rt = val[m, "c", r, 4]
				sw[r] = val[m, "c", r, 9] / rt; wk[r] = val[m, "c", r, 10] / rt
				ticks += val[m, "c", r, 8] - val[m, "b", r, 8]
				events += val[m, "c", r, 9] + val[m, "c", r, 10]
				dticks_d += val[m, "d", r, 8] - val[m, "a", r, 8]
			}
			s = median(sw, reps); w = median(wk, reps)
			printf "(c) scheduler events per round trip (profctl): %.3f switches + %.3f wakeups\n", s, w
			cb = dmed(m, "c", "b"); da = dmed(m, "d", "a"); ba = dmed(m, "b", "a")
			printf "(c) - (b): %+.0f ns per round trip (runs: %s) = %+.0f ns per switch recorded, " \
				"%+.0f ns per scheduler event (switch or wakeup)\n", cb, drange(m, "c", "b"), cb / s, cb / (s + w)
			printf "(d) - (a): %+.0f ns per round trip (runs: %s) = %+.0f ns per switch, " \
				"%+.0f ns per scheduler event, as counted in (c)\n", da, drange(m, "d", "a"), da / s, da / (s + w)
			printf "(b) - (a): %+.0f ns per round trip (runs: %s): the agent in the process, no functions\n",
				ba, drange(m, "b", "a")
			# profd CPU, summed over the repetitions: one run moves it by a few 10 ms ticks only
			net = ticks / hz - reps * load / nload / hz
			printf "profd CPU, (c) - (b): %.2f s over %d events = %.0f ns per scheduler event " \
				"(%.0f ns less the probe load per session)\n", ticks / hz, events,
				events ? 1e9 * ticks / hz / events : 0, events ? 1e9 * net / events : 0
			printf "profd CPU, (d) - (a): %+.2f s in all (the idle session, while the program ran)\n",
				dticks_d / hz
		}
		if (busy)
			printf "\nWARNING: %d of %d runs began with another profd'"'"'s probe loaded (after %d s): they pay its filter\n",
				busy, runs, wait
		printf "\nprofd CPU to load and unload the probe: %.1f ms per session (%d short sessions with, as many without)\n",
			1000 * load / nload / hz, nload
	}' "$tmp/results"

#!/usr/bin/env bash
# Signals against the agent's hooks: runs a signal-heavy program many times
# under `profctl run --funcs GLOB --freq 0` and counts the runs whose exit
# status differs from the same program's plain run (crash signals named).
# signal_storm's runs must also leave a readable trace, free of `problem`
# lines, with every call it made after the storm (a thread that stopped
# recording shows fewer). One line per workload and glob:
#   abi_torture signal [*]: 2000 runs, 0 crashed (0.00%), 0 other failures, 312.4 s (0.156 s/run)
# Exits 1 if any run failed. bench/README.md says how to read the figures.
#
# bench/signal_stress.sh [-n RUNS] [--funcs GLOB]... [--storm CASES] [--storm-runs M]
#                        [--signals N] [--python [N]] [--keep DIR] [--cores] [--build DIR]
#   -n RUNS        runs of `abi_torture signal` and of each storm case (default 2000;
#                  -n 0 --python N runs CPython's tests alone)
#   --funcs GLOB   the globs to profile with, each in turn (default '*'; e.g. 'torture_*')
#   --storm CASES  also tests/targets/signal_storm's cases (comma-separated, or all:
#                  itimer,thread_timer,altstack,nodefer,longjmp,breakpoints,
#                  breakpoints_longjmp), RUNS runs each; CASE:M runs that one M times
#   --storm-runs M runs of each storm case without its own :M
#   --signals N    signals per storm (signal_storm -n; default its own, 5000)
#   --python [N]   also N runs (default 50) of CPython's test_signal stress tests
#                  (/usr/bin/python3 -m test test_signal -m 'test_stress_*')
#   --keep DIR     keep the output of failed runs there (default: a temporary directory,
#                  printed when a run failed)
#   --cores        leave core dumps on (ulimit -c unlimited); off by default
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build
RUNS=2000
STORM_RUNS=
PY_RUNS=0
STORM=
SIGNALS=
KEEP=
CORES=0
GLOBS=()
STORM_ALL=itimer,thread_timer,altstack,nodefer,longjmp,breakpoints,breakpoints_longjmp
PY_TEST=/usr/lib/python3.11/test/test_signal.py
MAX_KEPT=20 # failed runs whose output is kept, per workload

usage() {
	sed -n '/^# bench.signal_stress.sh \[/,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	-n) RUNS=${2:?}; shift 2 ;;
	--funcs) GLOBS+=("${2:?}"); shift 2 ;;
	--storm) STORM=${2:?}; shift 2 ;;
	--storm-runs) STORM_RUNS=${2:?}; shift 2 ;;
	--signals) SIGNALS=${2:?}; shift 2 ;;
	--python)
		PY_RUNS=50
		if [[ ${2:-} =~ ^[0-9]+$ ]]; then PY_RUNS=$2; shift; fi
		shift ;;
	--keep) KEEP=${2:?}; shift 2 ;;
	--cores) CORES=1; shift ;;
	--build) BUILD=${2:?}; shift 2 ;;
	*) usage ;;
	esac
done
[[ $RUNS =~ ^[0-9]+$ ]] || usage
STORM_RUNS=${STORM_RUNS:-$RUNS}
[[ $STORM_RUNS =~ ^[0-9]+$ ]] || usage
[ ${#GLOBS[@]} -gt 0 ] || GLOBS=('*')
[ "$STORM" = all ] && STORM=$STORM_ALL
if [ "$CORES" -eq 1 ]; then ulimit -c unlimited; else ulimit -c 0; fi

PROFCTL="$ROOT/$BUILD/profctl"
TARGETS="$ROOT/$BUILD/tests/targets"
for f in "$PROFCTL" "$TARGETS/abi_torture" "$TARGETS/signal_storm"; do
	[ -x "$f" ] || { echo "signal_stress: $f is missing (make -j2 all)" >&2; exit 2; }
done
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
KEEP_CREATED=0
if [ -z "$KEEP" ]; then
	KEEP=$(mktemp -d -t signal_stress.XXXXXX)
	KEEP_CREATED=1
fi
mkdir -p "$KEEP"
any_failed=0

signame() { # exit status >= 128: the signal's name
	local s
	s=$(kill -l $(($1 - 128)) 2>/dev/null) && echo "SIG$s" || echo "signal $(($1 - 128))"
}

# trace_problem STDOUT TRACE: empty if signal_storm's trace holds every
# storm_marker call it counted and breaks no importer rule; else what is wrong.
trace_problem() {
	local want got problems
	want=$(awk '$1 == "count" && $2 == "storm_marker" {print $3}' "$1")
	"$PROFCTL" report --dump "$2" >"$WORK/run.dump" 2>/dev/null || { echo "trace unreadable"; return; }
	problems=$(grep -c '^problem' "$WORK/run.dump")
	got=$(awk '$1 == "slice" && $4 == "storm_marker"' "$WORK/run.dump" | wc -l)
	if [ "$got" != "${want:-none}" ]; then
		echo "calls after the storm missing from the trace"
	elif [ "$problems" -ne 0 ]; then
		echo "trace has problem lines"
	fi
}

# stress LABEL TIMEOUT RUNS GLOB CHECK_TRACE CMD...: the plain run's exit
# status, then RUNS profiled runs compared with it (and their traces checked).
stress() {
	local label=$1 limit=$2 runs=$3 glob=$4 check_trace=$5
	shift 5
	local plain_rc rc i start end crashed=0 other=0 kept=0 tag
	declare -A why=()

	(cd "$WORK" && timeout -k 10 "$limit" "$@" >"$WORK/plain.out" 2>"$WORK/plain.err")
	plain_rc=$?
	if [ "$plain_rc" -ne 0 ]; then
		echo "$label: the plain run exits $plain_rc (not 0); its stderr:" >&2
		tail -n 5 "$WORK/plain.err" >&2
		why["plain run exit $plain_rc"]=1
	fi
	start=$(date +%s.%N)
	for ((i = 1; i <= runs; i++)); do
		(cd "$WORK" && timeout -k 10 "$limit" "$PROFCTL" run --funcs "$glob" --freq 0 \
			-o "$WORK/run.pftrace" -- "$@" >"$WORK/run.out" 2>"$WORK/run.err")
		rc=$?
		if [ "$i" -eq 1 ] && grep -q 'matched no function' "$WORK/run.err"; then
			echo "$label [$glob]: skipped, the glob matches no function in it"
			return
		fi
		tag=
		if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
			tag="timed out (${limit} s)"
		elif [ "$rc" -gt 128 ] && [ "$rc" -ne "$plain_rc" ]; then
			tag=$(signame "$rc")
			crashed=$((crashed + 1))
		elif [ "$rc" -ne "$plain_rc" ]; then
			tag="exit $rc"
		elif [ "$check_trace" -eq 1 ]; then
			tag=$(trace_problem "$WORK/run.out" "$WORK/run.pftrace")
		fi
		rm -f "$WORK/run.pftrace"
		[ -n "$tag" ] || continue
		case $tag in SIG* | signal*) ;; *) other=$((other + 1)) ;; esac
		why[$tag]=$((${why[$tag]:-0} + 1))
		if [ "$kept" -lt "$MAX_KEPT" ]; then
			kept=$((kept + 1))
			cat "$WORK/run.out" "$WORK/run.err" \
				>"$KEEP/${label//[^a-z0-9_]/_}.${glob//[^a-z0-9_]/_}.run$i.txt"
		fi
	done
	end=$(date +%s.%N)
	local detail=""
	if grep -q 'nothing tested' "$WORK/run.err" 2>/dev/null; then
		detail=$(grep -m1 -o 'nothing tested: .*' "$WORK/run.err")
	fi
	for tag in "${!why[@]}"; do
		detail+="${detail:+, }$tag x${why[$tag]}"
	done
	awk -v l="$label" -v g="$glob" -v n="$runs" -v c="$crashed" -v o="$other" -v d="$detail" \
		-v s="$start" -v e="$end" 'BEGIN {
		t = e - s
		printf "%s [%s]: %d runs, %d crashed (%.2f%%), %d other failures, %.1f s (%.3f s/run)%s\n",
			l, g, n, c, n ? 100 * c / n : 0, o, t, n ? t / n : 0, d == "" ? "" : "; " d
	}'
	if [ $((crashed + other)) -gt 0 ] || [ "$plain_rc" -ne 0 ]; then
		any_failed=1
	fi
}

echo "signal_stress: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg);" \
	"agent $ROOT/$BUILD/libprofagent.so"
storm_args=()
[ -n "$SIGNALS" ] && storm_args=(-n "$SIGNALS")
for glob in "${GLOBS[@]}"; do
	[ "$RUNS" -gt 0 ] && stress "abi_torture signal" 60 "$RUNS" "$glob" 0 "$TARGETS/abi_torture" signal
	for c in ${STORM//,/ }; do
		n=$STORM_RUNS
		if [[ $c == *:* ]]; then
			n=${c#*:}
			c=${c%%:*}
		fi
		stress "signal_storm $c" 60 "$n" "$glob" 1 "$TARGETS/signal_storm" "${storm_args[@]}" "$c"
	done
	if [ "$PY_RUNS" -gt 0 ]; then
		if [ -f "$PY_TEST" ]; then
			# test_stress_delivery_* wait up to 30 s for signals that do not come
			stress "python3 test_signal test_stress_*" 120 "$PY_RUNS" "$glob" 0 \
				/usr/bin/python3 -m test test_signal -m 'test_stress_*'
		else
			echo "python3 test_signal: skipped, $PY_TEST is missing" \
				"(Debian's libpython3.11-testsuite: tools/install-deps.sh)"
		fi
	fi
done
if [ "$any_failed" -ne 0 ]; then
	echo "signal_stress: failed runs' output in $KEEP"
	exit 1
fi
[ "$KEEP_CREATED" -eq 1 ] && rmdir "$KEEP"
exit 0

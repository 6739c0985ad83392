#!/usr/bin/env bash
# Instructions per instrumented call, exactly: the figure no noise moves
# (issue 28). The ns of bench/overhead move by 30 % from one round to the
# next on a shared VM (bench/README.md, "Noise"), more than most changes to
# the fast paths are worth; the instructions each path executes are the same
# on every run. Runs bench/bursts (one burst of N calls of burst_step) under
# valgrind's cachegrind in `profctl run`, for two N, and divides the
# difference of each function's instructions by the difference of the calls:
# what one more call costs, start-up and exit left out. The target's
# instructions only (the agent's flusher thread included); profd's are
# bench/replay.sh cost's.
# Usage: bench/hot_instructions.sh [BUILD_DIR]   (needs valgrind: skipped without it)
set -eu
BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LOW=100000
HIGH=600000
if ! command -v valgrind >/dev/null || ! command -v cg_diff >/dev/null; then
	echo "hot instructions: valgrind not installed, skipped"
	exit 0
fi
# shellcheck source=bench/bench_common.bash
. "$ROOT/bench/bench_common.bash"
bench_tmp

# cachegrind's out file of burst_step called N times, plain or profiled.
run() { # N plain|profiled
	local vg=(valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$tmp/$2.$1")
	if [ "$2" = plain ]; then
		"${vg[@]}" "$ROOT/$BUILD/bench/bursts" 1 "$1" 0 >/dev/null 2>"$tmp/err" ||
			{ cat "$tmp/err" >&2; exit 1; }
		return
	fi
	# the agent patches code: valgrind must look for code written at run time
	"$ROOT/$BUILD/profctl" run --freq 0 --sched off --funcs burst_step -o "$tmp/t.pftrace" -- \
		"${vg[@]}" --smc-check=all "$ROOT/$BUILD/bench/bursts" 1 "$1" 0 >/dev/null 2>"$tmp/err" ||
		{ cat "$tmp/err" >&2; exit 1; }
	if [ "$(summary_counts "$tmp/err")" != "$((2 * $1)) 0" ]; then
		echo "FAIL: not every call of the $1 was recorded under valgrind:" >&2
		grep -E "^profctl: (calls|error)" "$tmp/err" >&2
		exit 1
	fi
}

# Per call: the difference of two runs' instructions, by where they ran.
per_call() { # MODE
	cg_diff "$tmp/$1.$LOW" "$tmp/$1.$HIGH" >"$tmp/$1.diff" 2>/dev/null
	cg_annotate --threshold=0 "$tmp/$1.diff" 2>/dev/null | awk -v calls=$((HIGH - LOW)) '
		/PROGRAM TOTALS/ { gsub(",", "", $1); total = $1 }
		/^ *-?[0-9,]+ +\(.*%\) +[^ ]+:[^ ]+$/ {
			n = $1; gsub(",", "", n); where = $NF
			if (where ~ /profagent_entry_trampoline/) what = "entry trampoline"
			else if (where ~ /profagent_exit_trampoline/) what = "exit trampoline"
			else if (where ~ /flusher|event_wire|segments/) what = "flusher (2 events)"
			else if (where ~ /agent\/|trampolines\//) what = "agent, other"
			else if (where == "???:???") what = "stubs and landings (no symbols)"
			else what = "the program (loop and function)"
			sum[what] += n
		}
		END {
			n = split("entry trampoline|exit trampoline|stubs and landings (no symbols)|" \
				  "agent, other|flusher (2 events)|the program (loop and function)", order, "|")
			for (i = 1; i <= n; i++)
				if (order[i] in sum)
					printf "  %-34s %7.1f\n", order[i], sum[order[i]] / calls
			printf "  %-34s %7.1f\n", "all", total / calls
		}'
}

for n in $LOW $HIGH; do
	run "$n" plain
	run "$n" profiled
done
echo "instructions per call of burst_step ($((HIGH - LOW)) calls: the difference of $HIGH and $LOW), plain:"
per_call plain
echo "profiled (profctl run --freq 0 --sched off; valgrind --smc-check=all):"
per_call profiled

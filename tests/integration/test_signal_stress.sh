#!/usr/bin/env bash
# Signals landing inside the agent's hooks, the short version of
# bench/signal_stress.sh, all under `profctl run --funcs '*' --freq 0`:
# abi_torture's `signal` case 40 times; tests/targets/signal_storm's
# `breakpoints` (one SIGTRAP at each instruction of the hooks in turn: a
# window there crashes every run) 10 times; its timer storms (5,000 signals
# against a thread calling instrumented functions flat out) 6 or 3 times; and
# the two cases whose handler leaves with siglongjmp 3 times. Every run must
# exit as its plain run does; signal_storm's traces must read back free of
# `problem` lines and hold every call made after the storm. One check per
# workload (the bench's line names the crash signals). About 17 s.
set -u
. "$(dirname "$0")/common.bash"
ABI_RUNS=${ABI_RUNS:-40}
CASES=breakpoints:10,breakpoints_longjmp:3,itimer:6,thread_timer:6,altstack:6,nodefer:3,longjmp:3

"$ROOT/bench/signal_stress.sh" --build "$BUILD" -n "$ABI_RUNS" --storm "$CASES" \
	--keep "$WORK/failed" >"$WORK/stress.out" 2>&1
cat "$WORK/stress.out"
check_eq "every workload reported" "$(grep -c ': [0-9]* runs, ' "$WORK/stress.out")" \
	$((1 + $(echo "$CASES" | tr ',' '\n' | wc -l)))
while read -r line; do
	label=${line%%:*}
	failures=$(echo "$line" | sed -n 's/.* \([0-9]*\) crashed .*, \([0-9]*\) other failures.*/\1 \2/p')
	check_eq "$label: runs that crashed or failed otherwise" "$failures" "0 0"
	case $line in *"nothing tested"*) skip "$label: ${line##*nothing tested: }" ;; esac
done < <(grep ': [0-9]* runs, ' "$WORK/stress.out")
finish

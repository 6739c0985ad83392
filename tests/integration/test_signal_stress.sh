#!/usr/bin/env bash
# Signals landing inside the agent's hooks, the short version of
# bench/signal_stress.sh: abi_torture's `signal` case 40 times and each
# signal_storm case (tests/targets/signal_storm.c: 5,000 signals against a
# thread calling instrumented functions flat out) 8 times, all under
# `profctl run --funcs '*' --freq 0`. Every run must exit as its plain run
# does; signal_storm's traces must read back free of `problem` lines and
# hold every call the program made after the storm. One check per workload
# (the bench names the crash signals). About 25 s.
set -u
. "$(dirname "$0")/common.bash"
ABI_RUNS=${ABI_RUNS:-40}
STORM_RUNS=${STORM_RUNS:-8}
CASES=itimer,thread_timer,altstack,nodefer,longjmp

"$ROOT/bench/signal_stress.sh" --build "$BUILD" -n "$ABI_RUNS" --storm "$CASES" \
	--storm-runs "$STORM_RUNS" --keep "$WORK/failed" >"$WORK/stress.out" 2>&1
cat "$WORK/stress.out"
check_eq "every workload reported" "$(grep -c ': [0-9]* runs, ' "$WORK/stress.out")" \
	$((1 + $(echo "$CASES" | tr ',' '\n' | wc -l)))
while read -r line; do
	label=${line%%:*}
	failures=$(echo "$line" | sed -n 's/.* \([0-9]*\) crashed .*, \([0-9]*\) other failures.*/\1 \2/p')
	check_eq "$label: runs that crashed or failed otherwise" "$failures" "0 0"
done < <(grep ': [0-9]* runs, ' "$WORK/stress.out")
finish

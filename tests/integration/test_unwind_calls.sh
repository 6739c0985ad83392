#!/usr/bin/env bash
# Calls made while an unwinder walks the stack (C++ exceptions on 4 threads,
# tests/targets/throw_threads.cpp, under --funcs '*': the personality
# routine, FDE lookups, destructors) are timed and counted in the exact
# figures like any other: the output is the unprofiled one, nothing is
# dropped, no call lands in no function's figures, and for every function
# its slices plus its off-timeline calls are its exact calls.
set -u
. "$(dirname "$0")/common.bash"
PROG="$TARGETS/throw_threads"

"${RUNNER[@]}" "$PROG" >"$WORK/ref.out"
check_eq "unprofiled: 4 threads report" "$(grep -c '^thread ' "$WORK/ref.out")" 4
(cd "$WORK" && timeout 600 "$PROFCTL" run "${PROFILE_OPTS[@]}" --funcs '*' -o t.pftrace -- \
	"${RUNNER[@]}" "$PROG" >out 2>err)
check_eq "under '*': exit status" "$?" 0
check "under '*': output identical" cmp -s "$WORK/ref.out" "$WORK/out"
calls=$(sed -n 's/^profctl: calls: //p' "$WORK/err")
echo "calls under '*': $calls"
check_eq "nothing dropped" "$(echo "$calls" | sed -nE 's/.* ([0-9]+) dropped.*/\1/p')" 0
check_eq "no call in no function's figures" "$(grep -c "in no function's figures" "$WORK/err")" 0
timeout 600 "$PROFCTL" report --dump "$WORK/t.pftrace" | dump_func_counts >"$WORK/counts"
check "the trace has per-function totals" test -s "$WORK/counts"
short=$(awk '$1 + $3 != $2' "$WORK/counts" | head -n 5)
check "every function: slices + off-timeline = calls (slices calls off name: $(echo "$short" | tr '\n' ';'))" \
	test -z "$short"
check_eq "tt_thrower: every call counted (2000 x 4 threads, depths 3-6)" \
	"$(awk '/ tt_thrower\(int, long\*\)$/ { print $2 }' "$WORK/counts")" 44000
finish

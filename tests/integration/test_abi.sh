#!/usr/bin/env bash
# The promise of instrumentation: the program behaves exactly as before.
# tests/targets/abi_torture runs plain, under --funcs 'torture_*' (its own
# functions) and under --funcs '*' (everything, libc and the loader included).
# Per run: exit status and stdout identical to the plain run, every case ok
# (one check each; a case the whole run never reached is rerun alone), the
# trace readable and free of `problem` lines. Under 'torture_*', the slices
# of each function the program counted itself equal its count.
# TARGET_ARCH=aarch64: the arm64 build under qemu-user (common.bash).
set -u
. "$(dirname "$0")/common.bash"
TARGET="$TARGETS/abi_torture"

if [ ! -x "$TARGET" ]; then
	check "abi_torture is built ($TARGET)" false
	finish
	exit
fi

"${RUNNER[@]}" "$TARGET" >"$WORK/plain.out" 2>"$WORK/plain.err"
plain_rc=$?
check_eq "plain: exit status" "$plain_rc" 0
cases=$(awk '$1 == "case" {print $2}' "$WORK/plain.out")
check "plain: the target lists its cases" test -n "$cases"
for c in $cases; do
	check_eq "plain: case $c" "$(grep -m1 "^case $c " "$WORK/plain.out")" "case $c ok"
done

# The case's line from a profiled run of that case alone, or what happened instead.
run_case_alone() { # glob, case, output prefix
	local line rc

	(cd "$WORK" && timeout -k 10 120 "$PROFCTL" run "${PROFILE_OPTS[@]}" --funcs "$1" \
		-o "$3.$2.pftrace" -- "${RUNNER[@]}" "$TARGET" "$2" >"$3.$2.out" 2>"$3.$2.err")
	rc=$?
	line=$(grep -m1 "^case $2 " "$3.$2.out")
	echo "${line:-no case line (run alone: exit status $rc)}"
}

run_profiled() { # label, glob
	local label=$1 glob=$2 out="$WORK/run-${1//[^a-z]/}" rc line

	(cd "$WORK" && timeout -k 10 300 "$PROFCTL" run "${PROFILE_OPTS[@]}" --funcs "$glob" \
		-o "$out.pftrace" -- "${RUNNER[@]}" "$TARGET" >"$out.out" 2>"$out.err")
	rc=$?
	# for the lead: what was patched, what was recorded
	echo "$label: $(grep -m1 '^profctl: functions:' "$out.err")"
	echo "$label: $(grep -m1 '^profctl: calls:' "$out.err")"
	check_eq "$label: exit status" "$rc" "$plain_rc"
	check "$label: stdout identical to the plain run" cmp -s "$WORK/plain.out" "$out.out"
	check_eq "$label: no FAIL line" "$(grep -c 'FAIL' "$out.out")" 0
	for c in $cases; do
		line=$(grep -m1 "^case $c " "$out.out")
		[ -n "$line" ] || line=$(run_case_alone "$glob" "$c" "$out")
		check_eq "$label: case $c" "$line" "case $c ok"
	done
	"$PROFCTL" report --dump "$out.pftrace" >"$out.dump" 2>"$out.dump.err"
	check "$label: report reads the trace" test -s "$out.dump"
	check_eq "$label: trace breaks no importer rule" "$(grep -c '^problem' "$out.dump")" 0
}

run_profiled "torture_*" 'torture_*'
# Every prologue shape is patched (or a case passes without testing anything),
# except the loop into the first bytes, which must be refused.
check_eq "torture_*: the only function skipped" \
	"$(awk '$1 == "skipped" {print $2, $3}' "$WORK/run-torture.err")" "torture_asm_loop_mid (abi_torture):"

# Slices per function == the program's own count, from a run of only the
# cases before the counts (those after them may crash a broken agent, and a
# crash loses the events still in the rings). The target counts only
# functions that never recurse, never run in a signal handler and never nest
# past the shadow stack or Perfetto's depth limit.
counted_cases=$(awk '$1 == "count" {exit} $1 == "case" {print $2}' "$WORK/plain.out")
out="$WORK/counts"
# shellcheck disable=SC2086 # one argument per case
(cd "$WORK" && timeout -k 10 300 "$PROFCTL" run "${PROFILE_OPTS[@]}" --funcs 'torture_*' \
	-o "$out.pftrace" -- "${RUNNER[@]}" "$TARGET" $counted_cases >"$out.out" 2>"$out.err")
rc=$?
check_eq "counts run (the cases before the counts): exit status" "$rc" 0
if [ "$rc" != 0 ]; then # where it stopped (124: the timeout: a hang, or qemu starved)
	echo "  counts run: last lines: $(grep '^case ' "$out.out" | tail -n 2 | tr '\n' ' ')"
	tail -n 3 "$out.err" | sed 's/^/    /'
fi
"$PROFCTL" report --dump "$out.pftrace" >"$out.dump" 2>/dev/null
check_eq "counts run: all count lines printed" "$(grep -c '^count ' "$out.out")" \
	"$(grep -c '^count ' "$WORK/plain.out")"
# the program's own counts: its process's slices (the first process; a forked child's are its own)
while read -r _ name n; do
	check_eq "counts run: slices of $name" "$(awk -v f="$name" '
		$1 == "process" && !pid { pid = $2 }
		$1 == "thread" && $2 == pid { mine[$3] = 1 }
		$1 == "slice" && $4 == f && ($2 in mine)' "$out.dump" | wc -l)" "$n"
done < <(grep '^count ' "$out.out")

run_profiled "all" '*'

finish

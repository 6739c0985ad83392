#!/usr/bin/env bash
# Frames that do not return the ordinary way (tests/targets/shadow_torture.c,
# tests/targets/exceptions.cpp) under instrumentation: identical output, and
# slices that close where the calls really ended instead of nesting forever.
# TARGET_ARCH=aarch64: the arm64 builds under qemu-user (common.bash).
set -u
. "$(dirname "$0")/common.bash"

run_both() { # name, globs, program
	local name=$1 globs=$2 prog=$3
	"${RUNNER[@]}" "$prog" >"$WORK/$name.plain" 2>&1
	echo "$?" >"$WORK/$name.plain.rc"
	"$PROFCTL" run "${PROFILE_OPTS[@]}" --funcs "$globs" -o "$WORK/$name.pftrace" -- \
		"${RUNNER[@]}" "$prog" >"$WORK/$name.prof" 2>"$WORK/$name.err"
	echo "$?" >"$WORK/$name.prof.rc"
	grep '^profctl: functions' "$WORK/$name.err"
	check_eq "$name: exit status" "$(cat "$WORK/$name.prof.rc")" "$(cat "$WORK/$name.plain.rc")"
	check "$name: output identical to the plain run" cmp -s "$WORK/$name.plain" "$WORK/$name.prof"
	"$PROFCTL" report --dump "$WORK/$name.pftrace" >"$WORK/$name.dump"
	check_eq "$name: trace breaks no rule" "$(grep -c '^problem' "$WORK/$name.dump")" 0
}

slices() { awk -v n="$2" '$1 == "slice" && $4 == n' "$WORK/$1.dump" | wc -l; }
counted() { awk -v n="$2" '$1 == "count" && $2 == n {print $3}' "$WORK/$1.plain"; }

run_both torture 'sh_*' "$TARGETS/shadow_torture"
check "backtrace() sees the true callers" grep -q "backtrace callers found 3 of 3" "$WORK/torture.prof"
if [ "$TARGET_ARCH" = aarch64 ]; then
	# a signed return address that reads as plain (a PAC of 0) must be restored signed
	check "aarch64: backtrace() over a zero-PAC return sees the callers" \
		grep -qx "backtrace from a zero-PAC return found 2 of 2" "$WORK/torture.prof"
	# the same where the function signs later than its first instruction or its pad
	check "aarch64: backtrace() over a zero-PAC return signed late sees the callers" \
		grep -qx "backtrace from a zero-PAC return signed late found 2 of 2" "$WORK/torture.prof"
fi
check_eq "longjmp'd calls: one slice per call" "$(slices torture sh_jump_leaf)" "$(counted torture sh_jump_leaf)"
check_eq "longjmp'd calls nest no deeper than the recursion (depth <= 4)" \
	"$(awk '$1 == "slice" && $4 == "sh_jump_leaf" && $3 > 4' "$WORK/torture.dump" | wc -l)" 0
check_eq "short-lived threads: one slice each" "$(slices torture sh_thread_body)" "$(counted torture sh_thread_body)"
check_eq "recursion 100,000 deep: traced down to Perfetto's depth limit" "$(slices torture sh_recurse)" 512
check_eq "signal handler calls on sigaltstack: 4 per signal" "$(slices torture sh_in_handler)" 200

if [ -x "$TARGETS/exceptions" ]; then
	# globs match demangled names too; slices are named demangled
	run_both exceptions 'ex_*' "$TARGETS/exceptions"
	check_eq "exceptions: one slice per call" "$(slices exceptions 'ex_thrower(int)')" \
		"$(counted exceptions ex_thrower)"
	check_eq "exceptions: thrown-through frames close (depth <= 4)" \
		"$(awk '$1 == "slice" && $4 ~ /ex_/ && $3 > 4' "$WORK/exceptions.dump" | wc -l)" 0
	check_eq "exceptions: every call's slice ends (re-hijacked at the catch)" \
		"$(awk '$1 == "slice" && $6 == -1' "$WORK/exceptions.dump" | wc -l)" 0
fi
if [ -x "$TARGETS/exceptions" ] && [ -z "$TARGET_ARCH" ]; then
	# samples taken while exceptions unwind through instrumented C++ frames
	"$PROFCTL" run --freq 10000 --funcs 'ex_*' -o "$WORK/ex_samples.pftrace" -- \
		"$TARGETS/exceptions" >/dev/null 2>&1
	"$PROFCTL" report --dump "$WORK/ex_samples.pftrace" | awk '$1 == "sample"' \
		>"$WORK/ex_samples.txt"
	check "exceptions: sample frames carry demangled C++ names, callers in order" \
		grep -q ';main;ex_catcher(int);ex_thrower(int)' "$WORK/ex_samples.txt"
	check_eq "exceptions: no sample frame keeps a mangled name" \
		"$(grep -cE '(^| |;)_Z' "$WORK/ex_samples.txt")" 0
	# a failure names its samples (seen once, in a suite run beside two CPU hogs)
	grep -E '(^| |;)_Z' "$WORK/ex_samples.txt" | head -n 3 | sed 's/^/  offending: /'
fi
# Everything instrumented, libc, libstdc++ and libgcc_s included: the unwinders'
# own callees run while return addresses are restored.
run_both torture_all '*' "$TARGETS/shadow_torture"
check "backtrace() under '*' sees the true callers" \
	grep -q "backtrace callers found 3 of 3" "$WORK/torture_all.prof"
if [ -x "$TARGETS/exceptions" ]; then
	run_both exceptions_all '*' "$TARGETS/exceptions"
fi
finish

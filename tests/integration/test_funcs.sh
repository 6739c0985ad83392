#!/usr/bin/env bash
# profctl funcs (issue 14): the instrumented/skipped split it prints without
# running the workload is the one `profctl run` reports with the same globs,
# on the bundled demo and in libc (IFUNCs, setjmp, _start: skips with
# reasons), for a command and for a running process; bad input is one line.
source "$(dirname "$0")/common.bash"
DEMO="$ROOT/$BUILD/examples/demo"

# split FILE: the "M matched, I instrumented, S skipped" of a summary line
split_of() { sed -nE 's/^profctl: functions: ([0-9]+) matched, ([0-9]+) instrumented, ([0-9]+) skipped.*/\1 \2 \3/p' "$1"; }
skips() { grep '^  skipped ' "$1" | sort; }

compare_with_run() { # label, globs, command...
	local label=$1 globs=$2
	shift 2
	"$PROFCTL" funcs "$globs" -- "$@" >"$WORK/$label.funcs" 2>"$WORK/$label.funcs.err"
	check_eq "$label: funcs exits 0" "$?" 0
	"$PROFCTL" run -v --freq 0 --funcs "$globs" -o "$WORK/$label.pftrace" -- "$@" \
		>/dev/null 2>"$WORK/$label.run"
	check_eq "$label: run exits 0" "$?" 0
	check "$label: funcs found something" test -n "$(split_of "$WORK/$label.funcs")"
	check_eq "$label: same matched/instrumented/skipped as run" \
		"$(split_of "$WORK/$label.funcs")" "$(split_of "$WORK/$label.run")"
	check_eq "$label: the same functions skipped for the same reasons" \
		"$(skips "$WORK/$label.funcs")" "$(skips "$WORK/$label.run")"
}

compare_with_run demo 'fib,worker,main,hot_loop,run_rounds' "$DEMO"
check_eq "demo: fib listed as instrumented under the demo" \
	"$(sed -n "\|^$DEMO:|,/^[^ ]/p" "$WORK/demo.funcs" | grep -c '^  instrumented fib$')" 1
# a real library: libc's str* (IFUNC resolvers skipped), setjmp (skipped), _start
compare_with_run libc 'libc.so*:str*,*setjmp*,_start,fib' "$DEMO"
check "libc: an IFUNC resolver skipped with its reason" \
	grep -q '^  skipped str[a-z]* (libc.so.6): IFUNC resolver' "$WORK/libc.funcs"
check "libc: setjmp skipped with its reason" \
	grep -q '^  skipped _\?setjmp (libc.so.6): saves its own return address' "$WORK/libc.funcs"
check "libc: libc listed as a module" grep -q '^/.*/libc.so.6: [0-9]* instrumented' "$WORK/libc.funcs"

# --pid: the modules a running sleep has mapped; same libc split as run of sleep
sleep 30 &
SLEEPER=$!
sleep 0.2
"$PROFCTL" funcs --pid "$SLEEPER" 'libc.so*:str*,*setjmp*' >"$WORK/pid.funcs" 2>&1
check_eq "--pid: exits 0" "$?" 0
"$PROFCTL" run -v --freq 0 --funcs 'libc.so*:str*,*setjmp*' -o "$WORK/sleep.pftrace" -- sleep 0 \
	>/dev/null 2>"$WORK/sleep.run"
check_eq "--pid: same split as run of sleep" "$(split_of "$WORK/pid.funcs")" "$(split_of "$WORK/sleep.run")"
check_eq "--pid: same skips as run of sleep" "$(skips "$WORK/pid.funcs")" "$(skips "$WORK/sleep.run")"
kill "$SLEEPER"
wait "$SLEEPER" 2>/dev/null

# bad input: one line, non-zero, nothing on stdout
bad() { # label, expected exit, args...
	local label=$1 want=$2
	shift 2
	"$PROFCTL" funcs "$@" >"$WORK/bad.out" 2>"$WORK/bad.err"
	check_eq "$label: exit $want" "$?" "$want"
	check_eq "$label: one line" "$(wc -l <"$WORK/bad.err")" 1
	check_eq "$label: nothing on stdout" "$(wc -c <"$WORK/bad.out")" 0
}
bad "no such pid" 1 --pid 2147483646 fib
check "no such pid: says so" grep -q 'no such process' "$WORK/bad.err"
bad "glob matching nothing" 1 'no_such_function_zz' -- "$DEMO"
check "glob matching nothing: says so" grep -q 'select no function' "$WORK/bad.err"
bad "command that does not exist" 1 fib -- /no/such/command
check "command that does not exist: says so" grep -q 'command not found' "$WORK/bad.err"
bad "bad pid" 2 --pid abc fib
bad "no target" 2 fib
bad "both targets" 2 --pid 1 fib -- "$DEMO"
bad "bad glob" 2 '!x' -- "$DEMO"
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && command -v setpriv >/dev/null; then
	setpriv --reuid nobody --regid nogroup --clear-groups "$PROFCTL" funcs --pid 1 fib \
		>"$WORK/bad.out" 2>"$WORK/bad.err"
	check_eq "another user's pid: exit 1" "$?" 1
	check_eq "another user's pid: one line" "$(wc -l <"$WORK/bad.err")" 1
else
	skip "another user's pid: needs root and setpriv"
fi
finish

#!/usr/bin/env bash
# Session life cycle: a target that execs (a new agent takes over in the same
# process; the calls before the exec all counted), --duration ending the
# profile while the program runs on, and a sampling-only run without --funcs.
set -u
. "$(dirname "$0")/common.bash"
DEMO="$ROOT/$BUILD/examples/demo"

"$DEMO" >"$WORK/plain.out"
printf 'exec %s\n' "$DEMO" >"$WORK/wrapper.sh"
"$PROFCTL" run --funcs 'fib*,worker*' -o "$WORK/exec.pftrace" -- sh "$WORK/wrapper.sh" \
	>"$WORK/exec.out" 2>"$WORK/exec.err"
check_eq "exec'd target exits like the plain run" "$?" 0
check "exec'd target's output is unchanged" cmp -s "$WORK/plain.out" "$WORK/exec.out"
"$PROFCTL" report --dump "$WORK/exec.pftrace" >"$WORK/exec.dump"
total=$(awk '$2 == "fib" && $3 == "calls" {n += $4} END {print n}' "$WORK/plain.out")
# a call the agent could not record (ring full) is counted as dropped, never lost
dropped=$(sed -nE 's/^profctl: calls: [0-9]+ made, [0-9]+ recorded, ([0-9]+) dropped.*/\1/p' "$WORK/exec.err")
check_eq "slices of the exec'd image + dropped calls = the program's calls" \
	"$(( $(awk '$1 == "slice" && $4 == "fib"' "$WORK/exec.dump" | wc -l) + ${dropped:-0} ))" "$total"
check_eq "the exec'd trace breaks no rule" "$(grep -c '^problem' "$WORK/exec.dump")" 0

# An image's calls before its exec are sent by the exec's hook (no destructor
# runs): all of them, with no word of a process cut short; an exec that fails
# (each directory of execvp's PATH but the last, a missing file) records on;
# posix_spawn's children (system) exec in our memory, from inside a call.
EXEC_IMAGE="$ROOT/$BUILD/tests/targets/exec_image"
for mode in exec execvp fail spawn; do
	"$PROFCTL" run --funcs 'ex_*' -o "$WORK/$mode.pftrace" -- "$EXEC_IMAGE" "$mode" \
		>"$WORK/$mode.out" 2>"$WORK/$mode.err"
	check_eq "$mode: exits as the program does" "$?" 0
	case $mode in fail) steps=1500 ;; spawn) steps=1010 ;; *) steps=1000 ;; esac
	calls=$steps
	[ "$mode" = spawn ] && calls=$((steps + 1)) # ex_outer, whose frame the children's exec left alone
	check_eq "$mode: every call before (and after) it made and recorded" \
		"$(calls_made_recorded_dropped "$WORK/$mode.err")" "$calls $calls 0"
	check_eq "$mode: no agent said to have stopped before its goodbye" \
		"$(grep -c 'before its goodbye' "$WORK/$mode.err")" 0
	"$PROFCTL" report --dump "$WORK/$mode.pftrace" >"$WORK/$mode.dump"
	check_eq "$mode: a slice per call" \
		"$(awk '$1 == "slice" && $4 == "ex_step"' "$WORK/$mode.dump" | wc -l)" "$steps"
done

"$PROFCTL" run --duration 1 --funcs 'fib*' -o "$WORK/dur.pftrace" -- \
	sh -c 'sleep 2; echo done; exit 3' >"$WORK/dur.out" 2>"$WORK/dur.err"
check_eq "--duration: CMD's exit status is still profctl's" "$?" 3
check_eq "--duration: CMD ran to its end" "$(cat "$WORK/dur.out")" "done"
check "--duration: summary printed" grep -q "trace: $WORK/dur.pftrace" "$WORK/dur.err"
"$PROFCTL" report --dump "$WORK/dur.pftrace" >"$WORK/dur.dump"
check "--duration: trace readable" test $? -eq 0

"$PROFCTL" run -o "$WORK/sample.pftrace" -- "$DEMO" >"$WORK/sample.out" 2>"$WORK/sample.err"
check "sampling only: output unchanged" cmp -s "$WORK/plain.out" "$WORK/sample.out"
"$PROFCTL" report --dump "$WORK/sample.pftrace" >"$WORK/sample.dump"
check_eq "sampling only: no slices" "$(grep -c '^slice' "$WORK/sample.dump")" 0
check "sampling only: hot_loop sampled" grep -qE '^sample .*hot_loop$' "$WORK/sample.dump"
check_eq "sampling only: no agent thread" "$(grep -c 'profd-flusher' "$WORK/sample.dump")" 0

finish

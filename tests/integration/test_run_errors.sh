#!/usr/bin/env bash
# profctl run's contract at the edges: CMD's exit status is profctl's, bad
# input gets a one-line error before CMD starts, a glob that matches nothing
# warns and still runs the program, and a trace is written in every case;
# profd dying mid-session is said in one line and profctl exits non-zero.
set -u
. "$(dirname "$0")/common.bash"

"$PROFCTL" run --freq 0 -o "$WORK/exit.pftrace" -- sh -c 'exit 7' 2>"$WORK/exit.err"
check_eq "exit status of CMD is profctl's" "$?" 7

"$PROFCTL" run --freq 0 -o "$WORK/sig.pftrace" -- sh -c 'kill -TERM $$' 2>/dev/null
check_eq "a CMD killed by SIGTERM gives 128+15" "$?" 143

"$PROFCTL" run -o "$WORK/nf.pftrace" -- no-such-command-profd 2>"$WORK/nf.err"
check_eq "missing command exits 127" "$?" 127
check "missing command is named" grep -q "no-such-command-profd: command not found" "$WORK/nf.err"
check_eq "missing command: one line" "$(wc -l <"$WORK/nf.err")" 1

"$PROFCTL" run -o /nonexistent-dir/x.pftrace -- sh -c "touch $WORK/ran" 2>"$WORK/out.err"
check "unwritable output fails" test $? -ne 0
check "unwritable output is named" grep -q "cannot write the trace to /nonexistent-dir/x.pftrace" "$WORK/out.err"
check "CMD does not run when the output cannot be written" test ! -e "$WORK/ran"

"$PROFCTL" run --funcs 'a,,b' -o "$WORK/bad.pftrace" -- true 2>"$WORK/glob.err"
check "malformed --funcs fails" test $? -eq 2
check "malformed --funcs is explained" grep -q "^profctl: --funcs: " "$WORK/glob.err"

"$PROFCTL" run --funcs 'no_such_function_xyz*' -o "$WORK/nomatch.pftrace" -- \
	sh -c 'echo still-runs' >"$WORK/nomatch.out" 2>"$WORK/nomatch.err"
check_eq "a glob matching nothing still runs CMD" "$(cat "$WORK/nomatch.out")" "still-runs"
check "a glob matching nothing warns" grep -q "matched no function" "$WORK/nomatch.err"
"$PROFCTL" report --dump "$WORK/nomatch.pftrace" >"$WORK/nomatch.dump"
check "the trace of such a run is valid" test $? -eq 0
check_eq "and breaks no rule" "$(grep -c '^problem' "$WORK/nomatch.dump")" 0

"$PROFCTL" run --freq abc -- true 2>"$WORK/freq.err"
check "--freq must be a number" grep -q "^profctl: --freq must be a whole number" "$WORK/freq.err"

# profd dying mid-session (its private one, killed): one line, a non-zero exit
"$PROFCTL" run --freq 0 -o "$WORK/gone.pftrace" -- sleep 2 2>"$WORK/gone.err" &
run_pid=$!
profd_pid=
for _ in $(seq 200); do profd_pid=$(pgrep -P "$run_pid" -x profd) && break; sleep 0.05; done
sleep 0.5
kill -9 $profd_pid
wait "$run_pid"
check "profd gone mid-run: profctl exits non-zero" test $? -ne 0
check_eq "profd gone mid-run: one line says so" "$(cat "$WORK/gone.err")" \
	"profctl: profd exited during the session: no summary; the trace may be cut short"

finish

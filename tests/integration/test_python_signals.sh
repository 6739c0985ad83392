#!/usr/bin/env bash
# CPython's own signal stress tests (test_signal's test_stress_*: setitimer
# at 1-11 us against Python's C signal handler, handlers changed while a
# thread raises) under `profctl run --funcs '*' --freq 0`, with Debian's
# /usr/bin/python3 (`python3` on PATH may be a pyenv build without the
# tests). Every function of the interpreter, libc and the loader is patched,
# so signals land inside the agent's hooks. Each run must pass as it does
# unprofiled and leave a trace that reads back free of `problem` lines.
# PY_RUNS runs (default 5; about 3 s each, most of it reading the ~100 MB
# trace back): the agent with the exit hook's signal window crashed in 44 %
# of runs, so 5 runs catch it 19 times in 20 (tests/integration/
# test_signal_stress.sh's breakpoints case catches it every time).
set -u
. "$(dirname "$0")/common.bash"
PY=/usr/bin/python3
TEST_FILE=/usr/lib/python3.11/test/test_signal.py
PY_RUNS=${PY_RUNS:-5}

if [ ! -x "$PY" ] || [ ! -f "$TEST_FILE" ]; then
	skip "$TEST_FILE is missing (Debian's libpython3.11-testsuite: tools/install-deps.sh)"
	finish
	exit
fi

# run_tests DIR [profctl run args...]: DIR/{out,err,rc}
run_tests() {
	local dir=$1
	shift
	mkdir -p "$dir"
	# regrtest works in the current directory: one per run
	(cd "$dir" && timeout -k 10 120 "$@" "$PY" -m test -v test_signal -m 'test_stress_*' \
		>out 2>err)
	echo $? >"$dir/rc"
}

run_tests "$WORK/plain"
# CPython's own stress tests time signal delivery: beside a loaded machine's
# other tests they fail now and then with no profiler at all (1 run in the
# proofs of session 38). The baseline says the tests pass here; a second try
# of it masks nothing of ours (the profiled runs get none).
if [ "$(cat "$WORK/plain/rc")" != 0 ]; then
	echo "unprofiled: failed once without the profiler (rc $(cat "$WORK/plain/rc")): again" >&2
	grep -m3 '^FAIL\|^ERROR\|Error' "$WORK/plain/out" >&2
	run_tests "$WORK/plain"
fi
check_eq "unprofiled: exit status" "$(cat "$WORK/plain/rc")" 0
check "unprofiled: Tests result: SUCCESS" grep -q '^Tests result: SUCCESS' "$WORK/plain/out"
check "unprofiled: the three test_stress_* ran" grep -q '^Ran 3 tests' "$WORK/plain/out"

for i in $(seq "$PY_RUNS"); do
	d="$WORK/run$i"
	run_tests "$d" "$PROFCTL" run --funcs '*' --freq 0 -o "$d/trace.pftrace" --
	rc=$(cat "$d/rc")
	check_eq "run $i: exit status" "$rc" 0
	check "run $i: Tests result: SUCCESS" grep -q '^Tests result: SUCCESS' "$d/out"
	check "run $i: the three test_stress_* ran" grep -q '^Ran 3 tests' "$d/out"
	if [ "$rc" -ne 0 ]; then
		grep -m1 'was killed by\|^profctl: error' "$d/err"
		grep -m3 'Error\|FAIL' "$d/out"
	fi
	echo "run $i: $(grep -m1 '^profctl: functions:' "$d/err");" \
		"$(grep -m1 '^profctl: calls:' "$d/err")"
	timeout 600 "$PROFCTL" report --dump "$d/trace.pftrace" >"$d/dump" 2>"$d/dump.err"
	check "run $i: report reads the trace" test $? -eq 0
	check_eq "run $i: trace breaks no importer rule" "$(grep -c '^problem' "$d/dump")" 0
	check "run $i: the interpreter's calls recorded" \
		grep -q -m1 '^slice .* _PyEval_EvalFrameDefault ' "$d/dump"
	rm -f "$d/trace.pftrace" "$d/dump" # about 100 MB + 300 MB each
done

finish

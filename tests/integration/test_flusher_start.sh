#!/usr/bin/env bash
# When a run's process starts the agent's flusher thread (agent/flusher.c
# flusher_start_deferred): not at its start, but at a hook's slow path once
# it has lived 20 ms, where starting a thread is safe. A short process starts
# none and its exit sends everything; a long one starts it; never inside a
# signal handler of the program's (it may have interrupted malloc, whose lock
# pthread_create takes), nor at all while an SA_NODEFER handler is installed
# (such a handler cannot be told from the signal mask), yet in a thread that
# blocks a handled signal from its start (another thread takes it). Every call is in the
# figures and on the timeline, whichever way it was sent. No timing asserted
# beyond the target's own sleeps (60 ms against the 20 ms delay). Where a
# process must still be under the delay (short, late's first calls), the
# delay is 2 s (PROFD_FLUSHER_DELAY_MS): a loaded machine's scheduler may
# hold a process of a millisecond for tens.
set -u
. "$(dirname "$0")/common.bash"
TARGET="$ROOT/$BUILD/tests/targets/flusher_start"

# run MODE [ARG]: the target's output in $WORK/MODE.out, the summary in .err, the dump in .dump
run() {
	"$PROFCTL" run --funcs 'fs_*' -o "$WORK/$1.pftrace" -- "$TARGET" "$@" \
		>"$WORK/$1.out" 2>"$WORK/$1.err"
	check_eq "$1: exits as the program does" "$?" 0
	"$PROFCTL" report --dump "$WORK/$1.pftrace" >"$WORK/$1.dump"
	check_eq "$1: the trace breaks no rule" "$(grep -c '^problem' "$WORK/$1.dump")" 0
}

# exact MODE CALLS: the summary and the timeline hold every call
exact() {
	check_eq "$1: every call made and recorded" \
		"$(calls_made_recorded_dropped "$WORK/$1.err")" "$2 $2 0"
	check_eq "$1: a slice per call" "$(grep -c '^slice .* fs_' "$WORK/$1.dump")" "$2"
}

threads() { awk -v w="$2" '$1 == w && $2 == "threads" {print $3}' "$WORK/$1.out"; }
flusher_threads() { grep -c '^thread .* profd-flusher' "$WORK/$1.dump"; }

PROFD_FLUSHER_DELAY_MS=2000 run short
check_eq "short: no thread was started" "$(threads short short)" 1
check_eq "short: no flusher thread in the trace" "$(flusher_threads short)" 0
exact short 1001

PROFD_FLUSHER_DELAY_MS=2000 run late 2500
check_eq "late: none in its first milliseconds" "$(threads late early)" 1
check_eq "late: started once it lived past the delay and called on" "$(threads late late)" 2
check_eq "late: the flusher thread is in the trace" "$(flusher_threads late)" 1
exact late 3102

run handler
check_eq "handler: none started in a signal handler" "$(threads handler handler)" 1
check_eq "handler: started by the calls outside it" "$(threads handler plain)" 2
exact handler 6103

run blocked
check_eq "a handled signal blocked in a worker from its start: started by its calls" \
	"$(threads blocked worker)" 3
exact blocked 3102

run nodefer
check_eq "SA_NODEFER handler installed: none started in it" "$(threads nodefer handler)" 1
check_eq "SA_NODEFER handler installed: none started at all" "$(threads nodefer plain)" 1
exact nodefer 6103

finish

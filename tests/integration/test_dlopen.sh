#!/usr/bin/env bash
# Libraries loaded with dlopen after profiling began are instrumented when
# they match, under run and under attach, and a dlclose + dlopen again (the
# library maybe at another address) neither breaks nor double-counts.
set -u
. "$(dirname "$0")/common.bash"
HOST="$ROOT/$BUILD/tests/targets/plugin_host"
PLUGIN="$ROOT/$BUILD/tests/targets/libprofd_plugin.so"

"$HOST" "$PLUGIN" >"$WORK/plain.out"
"$PROFCTL" run --funcs 'plug_*' -o "$WORK/run.pftrace" -- "$HOST" "$PLUGIN" \
	>"$WORK/run.out" 2>"$WORK/run.err"
check_eq "run: exit status" "$?" 0
check "run: output identical" cmp -s "$WORK/plain.out" "$WORK/run.out"
"$PROFCTL" report --dump "$WORK/run.pftrace" >"$WORK/run.dump"
check_eq "run: one slice per plug_work call" \
	"$(awk '$1 == "slice" && $4 == "plug_work"' "$WORK/run.dump" | wc -l)" 2000
check_eq "run: calls nest (plug_inner inside plug_work)" \
	"$(awk '$1 == "slice" && $4 == "plug_inner" && $3 == 1' "$WORK/run.dump" | wc -l)" 2000
check_eq "run: no rule broken" "$(grep -c '^problem' "$WORK/run.dump")" 0

"$HOST" "$PLUGIN" "$WORK/go" "$WORK/stop" >"$WORK/host.out" &
pid=$!
for _ in $(seq 100); do grep -q ready "$WORK/host.out" 2>/dev/null && break; sleep 0.05; done
"$PROFCTL" attach "$pid" -v --funcs 'plug_*' -o "$WORK/attach.pftrace" 2>"$WORK/attach.err" &
apid=$!
for _ in $(seq 500); do grep -q "attached to PID" "$WORK/attach.err" && break; sleep 0.01; done
touch "$WORK/go"
for _ in $(seq 200); do grep -q "count plug_work" "$WORK/host.out" && break; sleep 0.05; done
sleep 0.1
kill -INT "$apid"
wait "$apid"
check_eq "attach: profctl ends cleanly" "$?" 0
touch "$WORK/stop"
wait "$pid"
check_eq "attach: the target exits normally" "$?" 0
check "attach: the target's output is right" cmp -s "$WORK/plain.out" "$WORK/host.out"
"$PROFCTL" report --dump "$WORK/attach.pftrace" >"$WORK/attach.dump"
check_eq "attach: a library loaded after the attach is traced" \
	"$(awk '$1 == "slice" && $4 == "plug_work"' "$WORK/attach.dump" | wc -l)" 2000
finish

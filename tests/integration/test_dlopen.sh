#!/usr/bin/env bash
# Libraries loaded with dlopen after profiling began are instrumented when
# they match, under run and under attach, and a dlclose + dlopen again (the
# library maybe at another address) neither breaks nor double-counts; samples
# taken in such a library are named and unwound; --args/--retval apply to it,
# and --auto-args (under attach here; under run in test_auto_args.sh).
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
# each load's functions are new ids of the agent's, one function of the trace: both counted
check_eq "run: the exact figures count both loads' calls" \
	"$(awk '$1 == "total" && $2 == 0 && ($3 == "plug_work" || $3 == "plug_inner") { print $3, $4 }' \
		"$WORK/run.dump" | sort | tr '\n' ' ')" "plug_inner 2000 plug_work 2000 "
check "run: the summary's calls made are all of them" \
	grep -qE '^profctl: calls: 4000 made, 4000 recorded, 0 dropped' "$WORK/run.err"

# --args/--retval apply to a library loaded later as to any: its stubs are
# built with the specs (no answer to wait for, unlike --auto-args). A return
# value left off for want of room is counted (test_exact_calls forces some).
"$PROFCTL" run --funcs 'plug_*' --freq 0 --args 'plug_work@arg1' --retval 'plug_work@retval' \
	-o "$WORK/args.pftrace" -- "$HOST" "$PLUGIN" >"$WORK/args.out" 2>"$WORK/args.err"
check_eq "args: exit status" "$?" 0
read -r a_slices a_arg a_ret a_bad < <("$PROFCTL" report --dump "$WORK/args.pftrace" | awk '
	function close_slice() { if (f) { n++; if (v ~ /^arg1=[0-9]+/) a++; if (v ~ / retval=/) r++ } f = 0 }
	$1 == "slice" { close_slice(); f = $4 == "plug_work"; v = "" }
	$1 == "args" && f { $1 = $2 = $3 = ""; sub(/^ +/, ""); v = $0
		x = v; sub(/^arg1=/, "", x); x += 0
		if (v !~ /^arg1=[0-9]+( retval=[0-9]+)?$/ || (v ~ / retval=/ && v !~ " retval=" 3 * x + 3 "$")) bad++ }
	END { close_slice(); print n + 0, a + 0, r + 0, bad + 0 }')
check_eq "args: every plug_work call carries its argument" "$a_slices $a_arg" "2000 2000"
a_lost=$("$PROFCTL" report --dump "$WORK/args.pftrace" |
	awk '$1 == "total" && $2 == 0 && $3 == "plug_work" { print $NF }')
check_eq "args: and its return value, but those counted as left off ($a_lost)" \
	"$((a_ret + ${a_lost:-0}))" 2000
check_eq "args: each value is its call's (i, 3i+3 returned)" "$a_bad" 0

# samples in a library mapped after profiling began (PERF_RECORD_MMAP2), in
# both of its loads, inside an instrumented function: named, and unwound to main
PLUG_SPIN_MS=300 "$PROFCTL" run --freq 2000 --funcs 'plug_*' -o "$WORK/spin.pftrace" -- \
	"$HOST" "$PLUGIN" >"$WORK/spin.out" 2>"$WORK/spin.err"
"$PROFCTL" report --dump "$WORK/spin.pftrace" >"$WORK/spin.dump"
read -r in_spin to_main < <(awk '$1 == "process" { pid = $2 }
	$1 == "sample" && $2 == pid && $4 ~ /;plug_spin$/ { n++; if ($4 ~ /(^|;)main;.*plug_spin$/) k++ }
	END { print n + 0, k + 0 }' "$WORK/spin.dump")
check "run: samples in the late library's plug_spin ($in_spin of ~1200)" test "$in_spin" -ge 600
check "run: $to_main of them unwind to main (>= 95%)" test $((to_main * 100)) -ge $((in_spin * 95))
check_eq "run: two plug_spin calls, one per load" \
	"$(awk '$1 == "slice" && $4 == "plug_spin"' "$WORK/spin.dump" | wc -l)" 2

# attach with --auto-args: the library loaded after it gets its values from profd's late answer
PLUG_PACE_US=300 "$HOST" "$PLUGIN" "$WORK/go" "$WORK/stop" >"$WORK/host.out" &
pid=$!
for _ in $(seq 100); do grep -q ready "$WORK/host.out" 2>/dev/null && break; sleep 0.05; done
"$PROFCTL" attach "$pid" -v --funcs 'plug_*' --auto-args -o "$WORK/attach.pftrace" \
	2>"$WORK/attach.err" &
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
check "attach --auto-args: its calls carry their parameter by name once described" grep -qE \
	'^args [0-9]+ [0-9]+ x=[0-9]+ retval=[0-9]+$' "$WORK/attach.dump"
finish

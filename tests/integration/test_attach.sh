#!/usr/bin/env bash
# profctl attach/detach against a running 8-thread process that checks every
# result it computes: slices recorded while attached, every patched byte back
# after detach, the agent reused by later attaches, 200 attach/detach cycles
# without one wrong result, a call that spans two sessions counted by neither
# after its first (refusals are in test_attach_errors.sh).
set -u
. "$(dirname "$0")/common.bash"
TARGET="$ROOT/$BUILD/tests/targets/attach_target"
CYCLES=${ATTACH_CYCLES:-200}

code_bytes() { # pid, symbol: 16 bytes of live code at the symbol, as hex
	local pid=$1 sym=$2 base off
	base=$(awk -v exe="$TARGET" '$6 == exe && $3 == "00000000" {print $1; exit}' "/proc/$pid/maps")
	off=$(nm "$TARGET" | awk -v s="$sym" '$3 == s {print $1}')
	dd if="/proc/$pid/mem" bs=1 skip=$((0x${base%-*} + 0x$off)) count=16 2>/dev/null | od -An -tx1 | tr -d ' \n'
}

"$TARGET" "$WORK/stop" >"$WORK/target.out" 2>"$WORK/target.err" &
pid=$!
for _ in $(seq 100); do grep -q running "$WORK/target.out" 2>/dev/null && break; sleep 0.05; done
before=$(code_bytes "$pid" at_mix)

"$PROFCTL" attach "$pid" --funcs 'at_*' --duration 1 -o "$WORK/a.pftrace" 2>"$WORK/a.err"
check_eq "attach --duration 1 succeeds" "$?" 0
grep '^profctl: functions' "$WORK/a.err"
check "three functions instrumented" grep -q "3 matched, 3 instrumented" "$WORK/a.err"
check_eq "every patched byte is back after detach" "$(code_bytes "$pid" at_mix)" "$before"
"$PROFCTL" report --dump "$WORK/a.pftrace" >"$WORK/a.dump"
check_eq "the attach trace breaks no rule" "$(grep -c '^problem' "$WORK/a.dump")" 0
check "slices were recorded" grep -q '^slice [0-9]* 0 at_outer ' "$WORK/a.dump"
check "calls nest (at_mix inside at_outer)" grep -q '^slice [0-9]* 1 at_mix ' "$WORK/a.dump"
# A call still running at detach stays open: the agent lets calls return for a
# moment, but the thread profctl's detach call runs on cannot return until it
# is done. So: open slices on one thread at most, each the last at its depth
# there (a lost exit would leave one open with later calls beside or under it),
# and nothing nests deeper than the program does (at_outer -> at_mix).
open_check=$(awk '$1 == "slice" {
		key = $2 " " $3; last[key] = NR; if ($3 > maxd) maxd = $3
		if ($6 < 0) { open[NR] = key; if ($6 != -1) bad++ }
	}
	END {
		for (n in open) { if (last[open[n]] != n) bad++; split(open[n], a, " "); th[a[1]] = 1 }
		for (t in th) nt++
		printf "%d bad, %d threads with open calls, depth %d", bad, nt, maxd
	}' "$WORK/a.dump")
check "no slice ends before it begins, only calls in flight at detach are open ($open_check)" \
	eval '[[ "$open_check" =~ ^0\ bad,\ [01]\ threads\ with\ open\ calls,\ depth\ 1$ ]]'
check "threads are named" grep -q "^thread $pid [0-9]* attach_target" "$WORK/a.dump"
maps_once=$(grep -c libprofagent "/proc/$pid/maps")

# Ctrl-C once each session is attached (-v says so), as a user would
ok_cycles=0
for i in $(seq "$CYCLES"); do
	# emptied here, not by the child's redirection: the loop below must not see the
	# last cycle's "attached" and interrupt a profctl that cannot take SIGINT yet
	: >"$WORK/cycle.err"
	"$PROFCTL" attach "$pid" -v --funcs 'at_*' --freq 0 -o "$WORK/cycle.pftrace" \
		2>"$WORK/cycle.err" &
	apid=$!
	for _ in $(seq 500); do grep -q "attached to PID" "$WORK/cycle.err" && break; sleep 0.01; done
	kill -INT "$apid" 2>/dev/null
	if wait "$apid"; then
		ok_cycles=$((ok_cycles + 1))
	else
		echo "cycle $i failed:"
		cat "$WORK/cycle.err"
	fi
	kill -0 "$pid" 2>/dev/null || break
done
check_eq "attach/detach cycles that ended cleanly" "$ok_cycles" "$CYCLES"
check_eq "the agent is loaded once and reused" "$(grep -c libprofagent "/proc/$pid/maps")" "$maps_once"
check_eq "code bytes intact after the cycles" "$(code_bytes "$pid" at_mix)" "$before"

"$PROFCTL" attach "$pid" -v --funcs 'at_*' -o "$WORK/d.pftrace" 2>"$WORK/d.err" &
apid=$!
# a detach before the attach is done finds nothing to detach (a loaded machine is slow to attach)
wait_for "$WORK/d.err" "attached to PID"
"$PROFCTL" detach "$pid" 2>"$WORK/detach.err"
check_eq "profctl detach PID from elsewhere" "$?" 0
wait "$apid"
check_eq "the attached profctl then ends cleanly" "$?" 0
check "and says why" grep -q "detached from elsewhere" "$WORK/d.err"

touch "$WORK/stop"
wait "$pid"
check_eq "the target exits normally" "$?" 0
check_eq "the target never computed a wrong result" "$(cat "$WORK/target.out" | tail -n 1)" \
	"wrong results 0"

# A call one session saw enter and the next sees return (the agent stays
# loaded between them) belongs to neither's figures after the first: the
# second session's calls and timeline are its own (agent.c
# forget_earlier_session takes its function and its recording flag; the
# x86-64 exit fast path tests the flag alone).
mkdir -p "$WORK/cs"
"$ROOT/$BUILD/tests/targets/cross_session" "$WORK/cs" >"$WORK/cs.out" 2>&1 &
cspid=$!
wait_for "$WORK/cs.out" "^ready"
"$PROFCTL" attach "$cspid" -v --funcs 'cs_*' --freq 0 -o "$WORK/cs1.pftrace" 2>"$WORK/cs1.err" &
apid=$!
wait_for "$WORK/cs1.err" "attached to PID"
touch "$WORK/cs/enter"
wait_for "$WORK/cs.out" "^inside" # cs_long entered, and waits for `release`
kill -INT "$apid"
wait "$apid"
check_eq "the first session ends, cs_long still running" "$?" 0
"$PROFCTL" attach "$cspid" -v --funcs 'cs_*' --freq 0 -o "$WORK/cs2.pftrace" 2>"$WORK/cs2.err" &
apid=$!
wait_for "$WORK/cs2.err" "attached to PID"
touch "$WORK/cs/release"
wait_for "$WORK/cs.out" "^done"
kill -INT "$apid"
wait "$apid"
check_eq "the second session ends" "$?" 0
check_eq "with no error (an event naming no function)" "$(grep -c '^profctl: error' "$WORK/cs2.err")" 0
check "the second session counts its own 5 calls, not cs_long's return" \
	grep -qE "^profctl: calls: 5 made, 5 recorded, 0 dropped" "$WORK/cs2.err"
"$PROFCTL" report --dump "$WORK/cs2.pftrace" >"$WORK/cs2.dump"
check_eq "its timeline: the 5 cs_short, nothing else" \
	"$(awk '$1 == "slice" {print $4}' "$WORK/cs2.dump" | sort | uniq -c | tr -s ' ')" " 5 cs_short"
check_eq "and no rule broken" "$(grep -c '^problem' "$WORK/cs2.dump")" 0
touch "$WORK/cs/stop"
wait "$cspid"
check_eq "the target exits normally" "$?" 0

"$PROFCTL" attach 999999999 --funcs 'x' -o "$WORK/e.pftrace" 2>"$WORK/e1.err"
check "no such process: clear error" grep -q "no such process" "$WORK/e1.err"
finish

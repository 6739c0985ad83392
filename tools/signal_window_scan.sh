#!/usr/bin/env bash
# Delivers one signal at each instruction of the agent's trampolines and
# hooks in turn, with gdb, and says which instructions a signal must not
# land on: the deterministic counterpart of bench/signal_stress.sh, which
# waits for a timer to land there by chance.
#
# tools/signal_window_scan.sh [--case CASE] [--build DIR] [SYMBOL...]
#   SYMBOL  functions of libprofagent.so to scan (default: profagent_entry_trampoline,
#           profagent_enter_hook, profagent_exit_trampoline, profagent_exit_hook)
#   --case  signal_storm's case: itimer (default), altstack, nodefer or longjmp (the
#           handler leaves with siglongjmp; the trace must still hold the calls made after)
#
# Per instruction: `profctl run --funcs 'storm_*' --freq 0 -- signal_storm -n 5
# -i 500000 CASE` (a slow timer: only the injected signal lands in the agent),
# gdb attaches once the agent is loaded, stops at the instruction's first
# execution and delivers SIGALRM there (the handler is instrumented and calls
# instrumented functions); then the run must end as a plain run does. One
# line per instruction: `ok`, `not reached` (a path this program never takes,
# e.g. a thread's first call) or what went wrong. About 3 s per instruction,
# 10 minutes for the default set. Exits 1 if any instruction failed. Needs
# root or ptrace rights over your own processes (Yama ptrace_scope 0).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=build
CASE=itimer
SYMS=()
while [ $# -gt 0 ]; do
	case $1 in
	--case) CASE=${2:?}; shift 2 ;;
	--build) BUILD=${2:?}; shift 2 ;;
	-*) sed -n '/^# tools.signal_window_scan.sh/,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
	*) SYMS+=("$1"); shift ;;
	esac
done
[ ${#SYMS[@]} -gt 0 ] || SYMS=(profagent_entry_trampoline profagent_enter_hook
	profagent_exit_trampoline profagent_exit_hook)
case $CASE in itimer | altstack | nodefer | longjmp) ;; *) echo "unknown case $CASE" >&2; exit 2 ;; esac
AGENT="$ROOT/$BUILD/libprofagent.so"
TARGET="$ROOT/$BUILD/tests/targets/signal_storm"
PROFCTL="$ROOT/$BUILD/profctl"
for f in "$AGENT" "$TARGET" "$PROFCTL"; do
	[ -e "$f" ] || { echo "signal_window_scan: $f is missing (make -j2 all)" >&2; exit 2; }
done
command -v gdb >/dev/null || { echo "signal_window_scan: needs gdb" >&2; exit 2; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
ulimit -c 0

# offsets SYMBOL: the offset of each of its instructions, from objdump
offsets() {
	objdump -d --no-show-raw-insn "$AGENT" | awk -v want="<$1>:" '
		$2 == want { base = $1; on = 1; next }
		on && NF == 0 { exit }
		on && $1 ~ /:$/ { a = $1; sub(":", "", a); print a, base }' |
		while read -r a base; do echo $((16#$a - 16#$base)); done
}

# wait_for_agent PARENT: the target's pid once it runs signal_storm with the agent loaded
wait_for_agent() {
	local pid
	for _ in $(seq 500); do
		pid=$(pgrep -P "$1" | head -n 1)
		if [ -n "$pid" ] && [ "$(readlink "/proc/$pid/exe")" = "$TARGET" ] &&
			grep -q libprofagent "/proc/$pid/maps" 2>/dev/null; then
			echo "$pid"
			return 0
		fi
		sleep 0.01
	done
	return 1
}

# verdict PROFCTL_EXIT: what happened to the run in $WORK
verdict() {
	local want got
	if ! grep -q 'hit Breakpoint' "$WORK/gdb"; then
		echo "not reached"
	elif grep -q 'received signal SIG' "$WORK/gdb"; then
		grep -m1 -o 'received signal SIG[A-Z0-9]*' "$WORK/gdb" | sed 's/received signal //'
	elif [ "$1" -ne 0 ]; then
		echo "exit $1: $(grep -m1 FAIL "$WORK/out")"
	else
		want=$(awk '$1 == "count" && $2 == "storm_marker" {print $3}' "$WORK/out")
		"$PROFCTL" report --dump "$WORK/t.pftrace" >"$WORK/dump" 2>/dev/null
		got=$(awk '$1 == "slice" && $4 == "storm_marker"' "$WORK/dump" | wc -l)
		if [ "$got" != "$want" ]; then
			echo "recording stopped: $got of $want calls after the storm in the trace"
		else
			echo ok
		fi
	fi
}

n_ok=0 n_failed=0 n_unreached=0
for sym in "${SYMS[@]}"; do
	offs=$(offsets "$sym")
	[ -n "$offs" ] || { echo "$sym: not in $AGENT" >&2; n_failed=$((n_failed + 1)); continue; }
	for off in $offs; do
		rm -f "$WORK/t.pftrace"
		"$PROFCTL" run --funcs 'storm_*' --freq 0 -o "$WORK/t.pftrace" -- "$TARGET" -n 5 \
			-i 500000 "$CASE" >"$WORK/out" 2>"$WORK/err" &
		run=$!
		if pid=$(wait_for_agent "$run"); then
			sleep 0.2 # past the agent's start: the patches are in
			timeout 60 gdb -q -batch -p "$pid" -iex 'set auto-load safe-path /' \
				-ex 'handle SIGALRM nostop noprint pass' -ex "break *($sym+$off)" \
				-ex continue -ex delete -ex 'signal SIGALRM' >"$WORK/gdb" 2>&1
		else
			echo "attach: the target never started" >"$WORK/gdb"
		fi
		wait "$run"
		rc=$?
		what=$(verdict "$rc")
		where=$(gdb -q -batch -ex "info line *($sym+$off)" "$AGENT" 2>/dev/null |
			sed -n 's/^Line \([0-9]*\) of "\([^"]*\)".*/\2:\1/p' | head -n 1)
		printf '%s+%d (%s): %s\n' "$sym" "$off" "${where:-?}" "$what"
		case $what in
		ok) n_ok=$((n_ok + 1)) ;;
		"not reached") n_unreached=$((n_unreached + 1)) ;;
		*) n_failed=$((n_failed + 1)) ;;
		esac
	done
done
echo "case $CASE: $((n_ok + n_failed + n_unreached)) instructions: $n_ok ok, $n_failed failed, $n_unreached not reached"
[ "$n_failed" -eq 0 ]

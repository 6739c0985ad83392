#!/usr/bin/env bash
# gdb's bt inside instrumented functions shows the true callers, in order,
# and no trampoline frame (tools/gdb/libprofagent.so-gdb.py reads the agent's
# shadow stack). glibc's backtrace() and C++ exceptions are covered by
# test_shadow_stack.sh.
set -u
. "$(dirname "$0")/common.bash"
TARGET="$ROOT/$BUILD/tests/targets/unwind_target"

if ! command -v gdb >/dev/null; then
	skip "gdb is not installed"
	finish
	exit
fi
"$PROFCTL" run --funcs 'uw_*' -o "$WORK/uw.pftrace" -- "$TARGET" "$WORK/ready" \
	>"$WORK/uw.out" 2>"$WORK/uw.err" &
for _ in $(seq 200); do [ -e "$WORK/ready" ] && break; sleep 0.05; done
pid=$(pgrep -f "^$TARGET $WORK/ready\$" | head -n 1)
check "target is waiting inside uw_level3" test -n "$pid"
gdb -p "$pid" -batch -ex "source $ROOT/$BUILD/libprofagent.so-gdb.py" -ex bt \
	-ex "set var uw_release = 1" >"$WORK/bt.txt" 2>&1
wait
chain=$(awk '/^#[0-9]+ / { for (i = 1; i <= NF; i++) if ($i == "in") { print $(i + 1); break } }' \
	"$WORK/bt.txt" | grep -E '^(uw_|main$|profagent)' | tr '\n' ' ')
check_eq "bt shows the true callers in order" "$chain" "uw_level3 uw_level2 uw_level1 main "
check_eq "no trampoline frame in bt" "$(grep "^#" "$WORK/bt.txt" | grep -c profagent)" 0
check_eq "the program finishes normally" "$(cat "$WORK/uw.out")" "5"
finish

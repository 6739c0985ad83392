#!/usr/bin/env bash
# gdb's bt inside instrumented functions shows the true callers, in order,
# and no trampoline frame (tools/gdb/libprofagent.so-gdb.py reads the agent's
# shadow stack). glibc's backtrace() and C++ exceptions are covered by
# test_shadow_stack.sh.
# Then gdb unwinds from every instruction of the x86-64 trampolines' fast
# paths (trampolines/x86_64.S): stopped at each in turn (stepi), the frame of
# the instrumented function's caller comes right after the trampoline's (once
# the return slot is hijacked, after its landing, which the gdb script
# unwinds), so the CFI is right at each. The exit trampoline's first
# instruction (nothing pushed yet: no rule) and the placeholder 0 it pushes
# (unwinders stop there until the real return address is back) are the two
# allowed ends. usleep, instrumented, is called in uw_level3's wait loop: the
# steady state, its fast paths taken.
set -u
. "$(dirname "$0")/common.bash"
TARGET="$ROOT/$BUILD/tests/targets/unwind_target"

if ! command -v gdb >/dev/null; then
	skip "gdb is not installed"
	finish
	exit
fi
cat >"$WORK/steps.py" <<'EOF'
import gdb

def callers():
    # the frames older than the one stopped in, by name (or address)
    out, f = [], gdb.newest_frame()
    for _ in range(2):
        try:
            f = f.older()
        except gdb.error:
            break
        if f is None:
            break
        out.append(f.name() or hex(f.pc()))
    return out

for sym in ("profagent_entry_trampoline", "profagent_exit_trampoline"):
    gdb.execute("delete")
    gdb.execute("break " + sym, to_string=True)
    gdb.execute("continue", to_string=True)
    base = int(gdb.parse_and_eval("(long)&" + sym))
    steps = bad = 0
    while steps < 400 and sym in (gdb.newest_frame().name() or ""):
        off = int(gdb.parse_and_eval("$pc")) - base
        up = callers()
        exit_end = sym.startswith("profagent_exit") and (off == 0 or up[:1] == ["0x0"])
        if "uw_level3" not in up and not exit_end:
            bad += 1
            print("BAD %s+%#x: %s" % (sym, off, " <- ".join(up)))
        steps += 1
        gdb.execute("stepi", to_string=True)
    print("STEPS %s %d %d" % (sym, steps, bad))
gdb.execute("delete")
EOF
STEPS=()
[ "$(uname -m)" = x86_64 ] && STEPS=(-x "$WORK/steps.py")
"$PROFCTL" run --funcs 'uw_*,usleep' -o "$WORK/uw.pftrace" -- "$TARGET" "$WORK/ready" \
	>"$WORK/uw.out" 2>"$WORK/uw.err" &
for _ in $(seq 200); do [ -e "$WORK/ready" ] && break; sleep 0.05; done
pid=$(pgrep -f "^$TARGET $WORK/ready\$" | head -n 1)
check "target is waiting inside uw_level3" test -n "$pid"
timeout 120 gdb -p "$pid" -batch -ex "source $ROOT/$BUILD/libprofagent.so-gdb.py" -ex bt \
	"${STEPS[@]}" -ex "set var uw_release = 1" >"$WORK/bt.txt" 2>&1
wait
chain=$(awk '/^#[0-9]+ / { for (i = 1; i <= NF; i++) if ($i == "in") { print $(i + 1); break } }' \
	"$WORK/bt.txt" | grep -E '^(uw_|main$|profagent)' | tr '\n' ' ')
check_eq "bt shows the true callers in order" "$chain" "uw_level3 uw_level2 uw_level1 main "
check_eq "no trampoline frame in bt" "$(grep "^#" "$WORK/bt.txt" | grep -c profagent)" 0
grep -E '^(STEPS|BAD) ' "$WORK/bt.txt" | head -n 7
for t in entry exit; do
	[ ${#STEPS[@]} -gt 0 ] || break
	read -r steps bad < <(sed -nE "s/^STEPS profagent_${t}_trampoline ([0-9]+) ([0-9]+)$/\1 \2/p" \
		"$WORK/bt.txt")
	# the fast paths: 93 and 74 instructions (bench/hot_instructions.sh); the full
	# paths reach their call after 57 and 40 at most, where the stepping stops
	check "$t trampoline: its fast path stepped through (${steps:-0} instructions)" \
		test "${steps:-0}" -ge 70
	check_eq "$t trampoline: every instruction unwinds to the caller" "${bad:-none}" 0
done
check_eq "the program finishes normally" "$(cat "$WORK/uw.out")" "5"
finish

#!/usr/bin/env bash
# The agent maps libZydis only when its built-in x86-64 decoder meets a
# prologue it does not know: a program of ordinary functions is instrumented
# without it; a library dlopen()ed later whose function starts with x87
# instructions is instrumented with it, loaded from inside that dlopen, and
# the program sees the same results either way.
set -u
. "$(dirname "$0")/common.bash"
PROBE="$ROOT/$BUILD/tests/targets/decoder_probe"
PLUGIN="$ROOT/$BUILD/tests/targets/libx87_plugin.so"

if [ "$(uname -m)" != x86_64 ]; then
	echo "SKIP: the built-in decoder is x86-64's (aarch64 has fixed-width instructions)"
	finish
fi

"$PROBE" "$PLUGIN" >"$WORK/plain.out"
check_eq "plain: libZydis mapped at neither point" \
	"$(grep -c 'libZydis mapped no' "$WORK/plain.out")" 2

"$PROFCTL" run --funcs 'probe_*' -o "$WORK/plain_funcs.pftrace" -- "$PROBE" \
	>"$WORK/run1.out" 2>"$WORK/run1.err"
check_eq "ordinary prologues: exit status" "$?" 0
check_eq "ordinary prologues: instrumented without libZydis" \
	"$(cat "$WORK/run1.out")" "$(head -1 "$WORK/plain.out")"
"$PROFCTL" report --dump "$WORK/plain_funcs.pftrace" >"$WORK/run1.dump"
check_eq "ordinary prologues: one slice per probe_step call" \
	"$(awk '$1 == "slice" && $4 == "probe_step"' "$WORK/run1.dump" | wc -l)" 100

"$PROFCTL" run --funcs 'probe_*,x87_*' -o "$WORK/x87.pftrace" -- "$PROBE" "$PLUGIN" \
	>"$WORK/run2.out" 2>"$WORK/run2.err"
check_eq "x87 prologue: exit status" "$?" 0
check_eq "x87 prologue: the sums are the program's own" \
	"$(sed 's/, libZydis.*//' "$WORK/run2.out")" "$(sed 's/, libZydis.*//' "$WORK/plain.out")"
check_eq "x87 prologue: libZydis mapped only once the library needed it" \
	"$(sed 's/.*libZydis mapped //' "$WORK/run2.out" | tr '\n' ' ')" "no yes "
"$PROFCTL" report --dump "$WORK/x87.pftrace" >"$WORK/run2.dump"
check_eq "x87 prologue: one slice per x87_first call" \
	"$(awk '$1 == "slice" && $4 == "x87_first"' "$WORK/run2.dump" | wc -l)" 100
check_eq "x87 prologue: no rule broken" "$(grep -c '^problem' "$WORK/run2.dump")" 0
finish

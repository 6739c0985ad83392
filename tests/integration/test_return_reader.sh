#!/usr/bin/env bash
# Functions that read their own return address (tests/targets/return_reader.c)
# under --funcs '*': the agent sees the read of the return slot in their first
# instructions and leaves them unhijacked, so they print what they print
# unprofiled, and profctl funcs lists them with the reason. x86-64 only (the
# scan decodes with Zydis); a read after a branch is not seen (see
# trampolines/return_slot_x86_64.h).
set -u
. "$(dirname "$0")/common.bash"
PROG="$TARGETS/return_reader"

if [ "$(uname -m)" != x86_64 ] || [ -n "$TARGET_ARCH" ]; then
	skip "the return-slot scan is x86-64 only"
	finish
	exit
fi
(cd "$WORK" && "$PROG" >ref.out)
check "unprofiled: the caller is the program" grep -qx 'caller module: return_reader' "$WORK/ref.out"
(cd "$WORK" && timeout 600 "$PROFCTL" run --funcs '*' -o t.pftrace -- "$PROG" >out 2>err)
check "under '*': output identical" cmp -s "$WORK/ref.out" "$WORK/out"
timeout 600 "$PROFCTL" funcs 'caller_module,return_address,main' -- "$PROG" >"$WORK/funcs" 2>&1
for f in caller_module return_address; do
	check "funcs: $f skipped as a reader of its return address" \
		grep -q "skipped $f (return_reader): reads its own return address" "$WORK/funcs"
done
check "funcs: main instrumented" grep -qx '  instrumented main' "$WORK/funcs"
finish

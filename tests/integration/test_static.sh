#!/usr/bin/env bash
# A statically linked program under profctl run: no dynamic loader, so no
# agent can be preloaded. profctl says so in one line and the session goes on:
# the program runs as it would, and the trace has its CPU samples.
set -u
. "$(dirname "$0")/common.bash"

cat >"$WORK/spin.c" <<'SRC'
#include <stdio.h>
int main(void)
{
	volatile unsigned long x = 0;

	for (unsigned long i = 0; i < 200000000ul; i++)
		x += i;
	printf("%lu\n", x);
	return 3;
}
SRC
if ! ${CC:-cc} -O1 -static -o "$WORK/spin" "$WORK/spin.c" 2>"$WORK/cc.err"; then
	skip "cannot link statically (no libc.a?): $(head -n 1 "$WORK/cc.err")"
	finish
	exit
fi
(cd "$WORK" && timeout 60 "$PROFCTL" run --funcs 'main,spin*' -o static.pftrace -- ./spin \
	>out 2>err; echo $? >rc)
check_eq "exit status is the program's" "$(cat "$WORK/rc")" 3
check_eq "the program's output" "$(cat "$WORK/out")" 19999999900000000
check_eq "one line says why nothing is instrumented" \
	"$(grep -c '^profctl: spin is statically linked: functions cannot be instrumented; sampling and scheduler states only$' "$WORK/err")" 1
check_eq "no 'agent never connected' warning" "$(grep -c 'never connected' "$WORK/err")" 0
timeout 60 "$PROFCTL" report --dump "$WORK/static.pftrace" >"$WORK/dump" 2>&1
check "the trace has samples" test "$(grep -c '^sample' "$WORK/dump")" -gt 0
finish

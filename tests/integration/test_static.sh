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
(cd "$WORK" && timeout 600 "$PROFCTL" run --funcs 'main,spin*' -o static.pftrace -- ./spin \
	>out 2>err; echo $? >rc)
check_eq "exit status is the program's" "$(cat "$WORK/rc")" 3
check_eq "the program's output" "$(cat "$WORK/out")" 19999999900000000
check_eq "one line says why nothing is instrumented" \
	"$(grep -c '^profctl: spin is statically linked: functions cannot be instrumented; sampling and scheduler states only$' "$WORK/err")" 1
check_eq "no 'agent never connected' warning" "$(grep -c 'never connected' "$WORK/err")" 0
timeout 600 "$PROFCTL" report --dump "$WORK/static.pftrace" >"$WORK/dump" 2>&1
check "the trace has samples" test "$(grep -c '^sample' "$WORK/dump")" -gt 0

# attach: no loader to dlopen the agent with; the same line, and the session goes on
cat >"$WORK/serve.c" <<'SRC'
#include <stdio.h>
#include <unistd.h>
int main(void)
{
	volatile unsigned long x = 0;

	printf("ready\n");
	fflush(stdout);
	for (;;)
		for (unsigned long i = 0; i < 100000000ul; i++)
			x += i;
}
SRC
${CC:-cc} -O1 -static -o "$WORK/serve" "$WORK/serve.c"
"$WORK/serve" >"$WORK/serve.out" &
serve=$!
for _ in $(seq 100); do grep -q ready "$WORK/serve.out" 2>/dev/null && break; sleep 0.05; done
timeout 600 "$PROFCTL" attach "$serve" --funcs 'main' --duration 1 -o "$WORK/attach.pftrace" \
	2>"$WORK/attach.err"
check_eq "attach: exit status 0" "$?" 0
check_eq "attach: one line says why nothing is instrumented" \
	"$(grep -c "^profctl: PID $serve (serve) is statically linked: functions cannot be instrumented; sampling and scheduler states only$" "$WORK/attach.err")" 1
check_eq "attach: no other complaint" "$(grep -ciE 'cannot|error|detaching' "$WORK/attach.err")" 1
check "attach: the program runs on" kill -0 "$serve"
kill "$serve"
wait "$serve" 2>/dev/null
timeout 600 "$PROFCTL" report --dump "$WORK/attach.pftrace" >"$WORK/attach.dump" 2>&1
check "attach: the trace has samples" test "$(grep -c '^sample' "$WORK/attach.dump")" -gt 0
finish

#!/usr/bin/env bash
# Process trees: a shell loop running a small C program N times (default 500),
# plain and under `profctl run --funcs 'narrow*'` (every process followed:
# agent loaded, globs resolved, connected, figures sent), median of ROUNDS.
# Prints the wall times, their ratio (issue 26: at most 2x) and the cost per
# process (the difference over N). Wall time: run it on a quiet machine.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
PROFCTL="$ROOT/$BUILD/profctl"
N=${N:-500}
ROUNDS=${ROUNDS:-3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/small.c" <<'EOF'
#include <stdio.h>
__attribute__((noinline)) int narrow_step(int x) { return x * 3 + 1; }
__attribute__((noinline)) int narrow_loop(int n)
{
	int x = 0;
	for (int i = 0; i < n; i++)
		x = narrow_step(x) & 0xffff;
	return x;
}
int main(void) { return narrow_loop(1000) < 0; }
EOF
${CC:-cc} -O1 -o "$WORK/small" "$WORK/small.c" || exit 1
LOOP="i=0; while [ \$i -lt $N ]; do '$WORK/small' || exit 1; i=\$((i + 1)); done"

now_ns() { date +%s%N; }
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

run_plain() { local t0; t0=$(now_ns); sh -c "$LOOP"; echo $(( $(now_ns) - t0 )); }
run_profiled() {
	local t0; t0=$(now_ns)
	"$PROFCTL" run --funcs 'narrow*' -o "$WORK/loop.pftrace" -- sh -c "$LOOP" 2>"$WORK/err" ||
		{ cat "$WORK/err" >&2; exit 1; }
	echo $(( $(now_ns) - t0 ))
}

run_plain >/dev/null # warm-up: page cache, the loader
for r in $(seq "$ROUNDS"); do run_plain; done | median >"$WORK/plain"
for r in $(seq "$ROUNDS"); do run_profiled; done | median >"$WORK/prof"
plain=$(cat "$WORK/plain")
prof=$(cat "$WORK/prof")
grep -E '^profctl: (processes|calls):' "$WORK/err"
awk -v p="$plain" -v q="$prof" -v n="$N" 'BEGIN {
	printf "process tree: %d runs of a small program in a shell loop (median of '"$ROUNDS"')\n", n
	printf "  plain       %8.1f ms\n", p / 1e6
	printf "  profiled    %8.1f ms   ratio %.2fx (issue 26: at most 2x)\n", q / 1e6, q / p
	printf "  per process %8.1f us   (agent load, globs, connection, figures, profd side)\n",
		(q - p) / n / 1e3
}'

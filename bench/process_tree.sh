#!/usr/bin/env bash
# Process trees: a shell loop running a small C program N times (default 500),
# plain and under `profctl run --funcs 'narrow*'` (every process followed:
# agent loaded, globs resolved, connected, figures sent), median of ROUNDS.
# Prints the wall times, their ratio (issue 26: at most 2x) and the cost per
# process (the difference over N), with its CPU: the loop's (profctl and the
# tree it waits for) and profd's (one profd of the bench's own for every
# run, its CPU read from /proc), then one session's own cost (`profctl run`
# of the program once, against the program alone, then with a private profd).
# Wall time: run it on a
# quiet machine. RUN_ARGS: more options for every `profctl run` (e.g.
# '--freq 0 --sched off', to see what sampling and the scheduler add).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
PROFCTL="$ROOT/$BUILD/profctl"
N=${N:-500}
ROUNDS=${ROUNDS:-3}
read -ra run_args <<<"${RUN_ARGS:-}"
WORK=$(mktemp -d)
# shellcheck source=bench/bench_common.bash
. "$ROOT/bench/bench_common.bash"
profd_start "$WORK"
trap 'kill "$profd_pid" 2>/dev/null; wait "$profd_pid" 2>/dev/null; rm -rf "$WORK"' EXIT

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
profd_cpu_ms() { awk -v t="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / t)}' "/proc/$profd_pid/stat"; }
# CPU ms of what /usr/bin/time ran: it and the children it waited for
time_cpu_ms() { awk '{printf "%d\n", ($1 + $2) * 1000}' "$WORK/time"; }

# Each prints one line: wall ns, loop CPU ms, profd CPU ms.
run_plain() {
	local t0; t0=$(now_ns)
	/usr/bin/time -f '%U %S' -o "$WORK/time" sh -c "$LOOP"
	echo "$(( $(now_ns) - t0 )) $(time_cpu_ms) 0"
}
run_profiled() {
	local t0 c0; c0=$(profd_cpu_ms); t0=$(now_ns)
	/usr/bin/time -f '%U %S' -o "$WORK/time" \
		"$PROFCTL" run "${run_args[@]}" --funcs 'narrow*' -o "$WORK/loop.pftrace" -- sh -c "$LOOP" \
		2>"$WORK/err" || { cat "$WORK/err" >&2; exit 1; }
	echo "$(( $(now_ns) - t0 )) $(time_cpu_ms) $(( $(profd_cpu_ms) - c0 ))"
}
column_median() { awk -v c="$1" '{print $c}' "$2" | median; }

run_plain >/dev/null # warm-up: page cache, the loader
for r in $(seq "$ROUNDS"); do run_plain; run_profiled >>"$WORK/prof"; done >"$WORK/plain"
grep -E '^profctl: (processes|calls):' "$WORK/err"
awk -v p="$(column_median 1 "$WORK/plain")" -v q="$(column_median 1 "$WORK/prof")" \
    -v pc="$(column_median 2 "$WORK/plain")" -v qc="$(column_median 2 "$WORK/prof")" \
    -v dc="$(column_median 3 "$WORK/prof")" -v n="$N" 'BEGIN {
	printf "process tree: %d runs of a small program in a shell loop (median of '"$ROUNDS"')\n", n
	printf "  plain       %8.1f ms   loop CPU %7.1f ms\n", p / 1e6, pc
	printf "  profiled    %8.1f ms   loop CPU %7.1f ms   profd CPU %7.1f ms   ratio %.2fx (issue 26: at most 2x)\n",
		q / 1e6, qc, dc, q / p
	printf "  per process %8.1f us   loop CPU %7.1f us   profd CPU %7.1f us\n",
		(q - p) / n / 1e3, (qc - pc) * 1e3 / n, dc * 1e3 / n
}'

# One session's own cost: `profctl run` of the program once (the daemon warm:
# its probe and kernel symbols kept from the runs above), against the plain
# program, median of 11; what a test runner pays per command it wraps.
for _ in $(seq 11); do
	t0=$(now_ns); "$WORK/small"; t1=$(now_ns)
	"$PROFCTL" run "${run_args[@]}" --funcs 'narrow*' -o "$WORK/one.pftrace" -- "$WORK/small" \
		2>/dev/null || exit 1
	echo "$((t1 - t0)) $(( $(now_ns) - t1 ))"
done >"$WORK/one"
awk -v p="$(column_median 1 "$WORK/one")" -v q="$(column_median 2 "$WORK/one")" 'BEGIN {
	printf "  one run     %8.1f ms   (plain %.1f ms): a session'"'"'s start and end\n", q / 1e6, p / 1e6
}'

# The same without a daemon running: profctl starts a private profd for the
# session (what a user pays who installed no service), its probe loaded and
# the kernel's symbols read (or taken from /run/profd/kallsyms.cache) each time.
if [ -S /run/profd/profd.sock ]; then
	echo "  one run with a private profd: not measured (a profd serves /run/profd/profd.sock)"
	exit 0
fi
for _ in $(seq 11); do
	t0=$(now_ns)
	env -u PROFD_SOCKET "$PROFCTL" run "${run_args[@]}" --funcs 'narrow*' \
		-o "$WORK/one.pftrace" -- "$WORK/small" 2>/dev/null || exit 1
	echo "$(( $(now_ns) - t0 ))"
done >"$WORK/private"
awk -v q="$(column_median 1 "$WORK/private")" 'BEGIN {
	printf "  one run     %8.1f ms   with a private profd (no daemon running)\n", q / 1e6
}'

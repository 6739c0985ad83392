#!/usr/bin/env bash
# profctl run on the bundled demo (examples/demo.c): the program's output is
# untouched, and the trace's slices match the calls the program counted itself,
# per thread and per recursion depth; samples exist on both threads.
set -u
. "$(dirname "$0")/common.bash"
DEMO="$ROOT/$BUILD/examples/demo"

"$DEMO" >"$WORK/plain.out"
plain_rc=$?
(cd "$WORK" && "$PROFCTL" run --funcs 'fib*,worker*' -o "$WORK/demo.pftrace" -- "$DEMO" \
	>"$WORK/prof.out" 2>"$WORK/prof.err")
prof_rc=$?
check_eq "exit status of the profiled demo" "$prof_rc" "$plain_rc"
check "stdout byte-identical to the unprofiled run" cmp -s "$WORK/plain.out" "$WORK/prof.out"
check "summary names the trace" grep -q "trace: $WORK/demo.pftrace" "$WORK/prof.err"
check "summary: 2 functions instrumented" grep -q "2 matched, 2 instrumented, 0 skipped" "$WORK/prof.err"
"$PROFCTL" report --dump "$WORK/demo.pftrace" >"$WORK/dump.txt"
check "report reads the trace" test -s "$WORK/dump.txt"
check_eq "trace breaks no importer rule" "$(grep -c '^problem' "$WORK/dump.txt")" 0
check_eq "no calls dropped" "$(grep -c 'calls: [0-9]* made, [0-9]* recorded, 0 dropped' "$WORK/prof.err")" 1

pid=$(awk '$1 == "process" {print $2; exit}' "$WORK/dump.txt")
# The worker thread is the one whose depth-0 slice is `worker`.
wtid=$(awk '$1 == "slice" && $3 == 0 && $4 == "worker" {print $2; exit}' "$WORK/dump.txt")
check "process and worker thread found" test -n "$pid" -a -n "$wtid"

# fib slices per thread == the program's own counts
main_calls=$(awk '$1 == "main" && $2 == "fib" {print $4}' "$WORK/plain.out")
worker_calls=$(awk '$1 == "worker" && $2 == "fib" {print $4}' "$WORK/plain.out")
check_eq "fib slices on the main thread" \
	"$(awk -v t="$pid" '$1 == "slice" && $2 == t && $4 == "fib"' "$WORK/dump.txt" | wc -l)" "$main_calls"
check_eq "fib slices on the worker thread" \
	"$(awk -v t="$wtid" '$1 == "slice" && $2 == t && $4 == "fib"' "$WORK/dump.txt" | wc -l)" "$worker_calls"
check_eq "one worker slice" "$(awk '$1 == "slice" && $4 == "worker"' "$WORK/dump.txt" | wc -l)" 1

# Nesting: slices per depth equal the program's calls per recursion depth
# (the worker thread's fib calls sit one level deeper, inside `worker`).
expected=$(awk '$2 == "depth" {print $1, $3, $5}' "$WORK/plain.out" | sort)
actual=$(awk -v m="$pid" -v w="$wtid" '$1 == "slice" && $4 == "fib" {
	if ($2 == m) n["main " $3]++; else if ($2 == w) n["worker " ($3 - 1)]++; else n["other"]++ }
	END { for (k in n) print k, n[k] }' "$WORK/dump.txt" | sort)
check_eq "fib slices per recursion depth match the program's counts" "$actual" "$expected"

# Every nested fib slice sits inside a fib or worker slice one level up on its
# thread. The dump gives slices as they end: sorted by thread and start (the
# enclosing call first on a tie), the enclosing slice is the last one seen at
# depth - 1.
bad_parents=$(awk '$1 == "slice" { print $2, $5, $3, $6, $4 }' "$WORK/dump.txt" |
	sort -k1,1n -k2,2n -k3,3n | awk '
	{ tid = $1; ts = $2; d = $3; dur = $4; name = $5
	  if (tid != cur) { cur = tid; delete pts; delete pend; delete pname }
	  if (d > 0) {
		if (!((d - 1) in pname) || (pname[d - 1] != "fib" && pname[d - 1] != "worker") ||
		    pts[d - 1] > ts || (dur >= 0 && pend[d - 1] >= 0 && ts + dur > pend[d - 1])) bad++
	  }
	  pts[d] = ts; pend[d] = dur < 0 ? -1 : ts + dur; pname[d] = name }
	END { print bad + 0 }')
check_eq "slices nest inside the enclosing calls" "$bad_parents" 0

# CPU samples on both threads, with callstacks through main / worker.
check "samples on the main thread name main" \
	grep -qE "^sample $pid [0-9]+ (.*;)?main(;|$)" "$WORK/dump.txt"
check "samples on the worker thread name worker" \
	grep -qE "^sample $wtid [0-9]+ (.*;)?worker(;|$)" "$WORK/dump.txt"
check "hot_loop is sampled" grep -qE "^sample [0-9]+ [0-9]+ .*hot_loop$" "$WORK/dump.txt"
check_eq "no sample frame is a trampoline" \
	"$(grep '^sample' "$WORK/dump.txt" | grep -c 'profagent_e[a-z]*_trampoline')" 0
main_all=$(awk -v t="$pid" '$1 == "sample" && $2 == t && $4 ~ /hot_loop$/' "$WORK/dump.txt" | wc -l)
main_full=$(awk -v t="$pid" '$1 == "sample" && $2 == t && $4 ~ /^_start;.*;main;hot_loop$/' \
	"$WORK/dump.txt" | wc -l)
check "DWARF unwinding reaches _start through libc (main: $main_full of $main_all samples)" \
	test "$main_all" -gt 0 -a "$main_full" -ge $((main_all * 9 / 10))

# self samples: the worker's hot_loop runs inside `worker`, so worker gets most of them
"$PROFCTL" report "$WORK/demo.pftrace" >"$WORK/report.txt"
# (the column before the name: the exact table of 5154bc5 put calls and times before it)
worker_self=$(awk '$NF == "worker" && $(NF - 1) ~ /^[0-9]+$/ {print $(NF - 1); exit}' "$WORK/report.txt")
check "report: the worker's hot loop samples count as worker's self samples ($worker_self)" \
	test "${worker_self:-0}" -gt 10
finish

#!/usr/bin/env bash
# profctl report's options (issue 14): --sort orders the rows by the number it
# names, --top N keeps N rows, --funcs filters, --threads lists per-thread
# exact rows, --percentiles prints p50/p90/p99, --callers F's callers and
# callees add up to F's slices; bad values exit 2 with one line.
source "$(dirname "$0")/common.bash"
DEMO="$ROOT/$BUILD/examples/demo"
T="$WORK/demo.pftrace"

"$PROFCTL" run --funcs 'fib,worker,main,hot_loop' -o "$T" -- "$DEMO" >/dev/null 2>"$WORK/run.err"
check_eq "the demo ran under the profiler" "$?" 0

# rows NAME-OF-TABLE: the exact functions table's rows (calls total self avg p50 p99 ... name)
rows() { sed -n '/^instrumented functions/,/^$/p' | sed '1,2d;/^$/d'; }
# to_ns: the table's " 12.3ms" style cells as ns
col_ns() { # column number; stdin rows
	awk -v c="$1" '{ v = $c; m = 1; if (v ~ /ns$/) m = 1; else if (v ~ /us$/) m = 1e3;
		else if (v ~ /ms$/) m = 1e6; else if (v ~ /s$/) m = 1e9; sub(/[a-z]+$/, "", v);
		printf "%.0f\n", v * m }'
}
sorted_desc() { sort -g -r -c 2>/dev/null; }

for key in calls:1 total:2 self:3 avg:4 p99:6; do
	name=${key%%:*} col=${key##*:}
	"$PROFCTL" report --sort "$name" "$T" | rows >"$WORK/$name.rows"
	check_eq "--sort $name: four rows" "$(wc -l <"$WORK/$name.rows")" 4
	if [ "$name" = calls ]; then
		awk '{ print $1 }' "$WORK/$name.rows" >"$WORK/$name.keys"
	else
		col_ns "$col" <"$WORK/$name.rows" >"$WORK/$name.keys"
	fi
	check "--sort $name: rows in descending $name order" sorted_desc <"$WORK/$name.keys"
done
check "--sort calls: fib (most calls) first" grep -q 'fib$' <(head -1 "$WORK/calls.rows")
# (not "--sort total differs": whether fib's nested totals pass main's depends on the load)
check "--sort avg: main (one call enclosing every other) first" \
	grep -q 'main$' <(head -1 "$WORK/avg.rows")

"$PROFCTL" report --top 2 "$T" | rows >"$WORK/top.rows"
check_eq "--top 2: two rows" "$(wc -l <"$WORK/top.rows")" 2
check_eq "--top 2: the first two of the full table" "$(cat "$WORK/top.rows")" \
	"$(head -2 "$WORK/total.rows")"

"$PROFCTL" report --funcs 'f*,w*' "$T" | rows >"$WORK/funcs.rows"
check_eq "--funcs 'f*,w*': fib and worker only" "$(awk '{ print $NF }' "$WORK/funcs.rows" | sort | tr '\n' ' ')" \
	"fib worker "
"$PROFCTL" report --funcs '*,!fib' "$T" | rows >"$WORK/nofib.rows"
check "--funcs '*,!fib': no fib row" bash -c "! grep -q ' fib\$' '$WORK/nofib.rows'"

# --threads: per-thread rows of fib add up to its all-threads calls
"$PROFCTL" report --threads --funcs fib "$T" >"$WORK/threads.out"
fib_calls=$(awk '$NF == "fib" { print $1 }' "$WORK/total.rows")
thread_sum=$(sed -n '/^per thread/,/^$/p' "$WORK/threads.out" | awk '$NF == "fib" { s += $2 } END { print s + 0 }')
check_eq "--threads: fib's per-thread calls add up to its calls" "$thread_sum" "$fib_calls"
check_eq "--threads: fib ran on two threads" \
	"$(sed -n '/^per thread/,/^$/p' "$WORK/threads.out" | awk '$NF == "fib"' | wc -l)" 2

"$PROFCTL" report --percentiles --funcs fib "$T" >"$WORK/pct.out"
p50=$(sed -n '/^percentiles/,/^$/p' "$WORK/pct.out" | awk '$NF == "fib"' | col_ns 3)
p90=$(sed -n '/^percentiles/,/^$/p' "$WORK/pct.out" | awk '$NF == "fib"' | col_ns 4)
p99=$(sed -n '/^percentiles/,/^$/p' "$WORK/pct.out" | awk '$NF == "fib"' | col_ns 5)
dump_p50=$("$PROFCTL" report --dump "$T" | awk '$1 == "total" && $2 == 0 && $3 == "fib" { print $9 }')
check "--percentiles: p50 <= p90 <= p99 for fib ($p50 $p90 $p99)" test "$p50" -le "$p90" -a "$p90" -le "$p99"
check "--percentiles: p50 is the trace's ($dump_p50 ns)" test "$p50" -eq "$dump_p50" -o "$dump_p50" -ge 10000
# the buckets of calls on the timeline are counted by profd from their events,
# the agent's only of calls off it: every fib call is on it here
median=$("$PROFCTL" report --dump "$T" | awk '$1 == "slice" && $4 == "fib" { print $6 }' | sort -n |
	awk '{ d[NR] = $1 } END { print d[int((NR + 1) / 2)] + 0 }')
check "--percentiles: p50 ($p50 ns) within 25 % of the median of fib's slices ($median ns)" \
	awk -v p="$p50" -v m="$median" 'BEGIN { exit !(m > 0 && p >= m * 0.75 && p <= m * 1.25 + 2) }'

# --callers fib: callers' counts add up to fib's slices; callees' to the slices inside fib
"$PROFCTL" report --dump "$T" >"$WORK/dump"
slices=$(awk '$1 == "slice" && $4 == "fib"' "$WORK/dump" | wc -l)
"$PROFCTL" report --callers fib "$T" >"$WORK/callers.out"
callers=$(sed -n '/^callers/,/^$/p' "$WORK/callers.out" | awk 'NR > 2 && NF { s += $1 } END { print s + 0 }')
check_eq "--callers fib: callers' calls add up to fib's slices" "$callers" "$slices"
# in the demo only fib calls fib, from main or worker (depth 0): fib's callees are its slices
# at depth 2 and deeper
want_callees=$(awk '$1 == "slice" && $4 == "fib" && $3 >= 2' "$WORK/dump" | wc -l)
callees=$(sed -n '/^callees/,/^$/p' "$WORK/callers.out" | awk 'NR > 2 && NF { s += $1 } END { print s + 0 }')
check_eq "--callers fib: callees' calls add up to the slices directly inside fib" "$callees" "$want_callees"
check "--callers fib: main and worker call it" grep -q ' main$' <(sed -n '/^callers/,/^$/p' "$WORK/callers.out")
"$PROFCTL" report --callers worker "$T" >"$WORK/worker.out"
check "--callers worker: it calls hot_loop" grep -q ' hot_loop$' <(sed -n '/^callees/,/^$/p' "$WORK/worker.out")
check "--callers worker: no caller (a thread's start)" grep -q '(no caller)' "$WORK/worker.out"

# the default output is the one without options
check_eq "--sort total is the default" "$("$PROFCTL" report "$T" | rows)" "$(cat "$WORK/total.rows")"

# bad input: one line, exit 2
for bad in "--sort bogus" "--top 0" "--top x" "--funcs !x" "--bogus" "--dump --top 3" "--top"; do
	# shellcheck disable=SC2086
	"$PROFCTL" report $bad "$T" >"$WORK/bad.out" 2>"$WORK/bad.err"
	rc=$?
	[ "$bad" = "--top" ] && { "$PROFCTL" report --top >/dev/null 2>"$WORK/bad.err"; rc=$?; }
	check_eq "report $bad: exit 2" "$rc" 2
	check_eq "report $bad: one line" "$(wc -l <"$WORK/bad.err")" 1
	check_eq "report $bad: nothing on stdout" "$(wc -c <"$WORK/bad.out")" 0
done
finish

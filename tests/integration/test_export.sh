#!/usr/bin/env bash
# profctl export, read back by the real consumers: `go tool pprof` on the
# pprof file (hottest function, totals = the trace's samples x period, calls
# and their time), Python's json module on the Chrome JSON (slices per thread
# and their nesting = the trace's), the folded counts (= the trace's
# samples); and each bad input: one line, non-zero exit, nothing left behind.
set -u
. "$(dirname "$0")/common.bash"
TP_CHECK_EXCLUDE='/text\.pftrace$' # not a trace, on purpose
DEMO="$ROOT/$BUILD/examples/demo"
T="$WORK/demo.pftrace"
FREQ=499
PERIOD=$((1000000000 / FREQ))

(cd "$WORK" && "$PROFCTL" run --funcs 'fib*,worker*' --freq $FREQ -o "$T" -- "$DEMO" \
	>/dev/null 2>"$WORK/run.err")
check "demo profiled" test -s "$T"
"$PROFCTL" report --dump "$T" >"$WORK/dump.txt"
n_samples=$(grep -c '^sample ' "$WORK/dump.txt")
n_slices=$(grep -c '^slice ' "$WORK/dump.txt")
# self times add up to the root calls' time: what the calls' weights must sum to
# (printf: mawk prints a sum past 2^31 as 2.33148e+09)
root_ns=$(awk '$1 == "slice" && $3 == 0 && $6 > 0 { s += $6 } END { printf "%.0f\n", s }' "$WORK/dump.txt")
hottest=$(awk '$1 == "sample" { n = split($4, f, ";"); c[f[n]]++ }
	END { for (k in c) if (c[k] > best) { best = c[k]; h = k }; print h }' "$WORK/dump.txt")

check "the trace has samples, slices, a hottest leaf" \
	test "$n_samples" -gt 0 -a "$n_slices" -gt 0 -a "$root_ns" -gt 0 -a -n "$hottest"
# ---- folded ---------------------------------------------------------------------
check "folded export" "$PROFCTL" export --format folded "$T"
F="$WORK/demo.folded" # default name: the trace's, with the format's extension
check "folded: written under the default name" test -s "$F"
check_eq "folded: counts add up to the trace's samples" \
	"$(awk '{ s += $NF } END { print s }' "$F")" "$n_samples"
check_eq "folded: identical stacks aggregated" "$(awk '{ $NF = ""; print }' "$F" | sort | uniq -d | wc -l)" 0
check_eq "folded: the heaviest line ends in the hottest leaf" \
	"$(awk '$NF > m { m = $NF; l = $0 } END { sub(/ [0-9]+$/, "", l); n = split(l, f, ";"); print f[n] }' "$F")" "$hottest"
check "folded: stacks root first (main's calls under _start)" grep -q '^_start;.*;main;' "$F"
"$PROFCTL" export --format folded --with-calls -o - "$T" >"$WORK/calls.folded" 2>"$WORK/calls.err"
check_eq "folded -o -: stdout, nothing on stderr" "$(wc -c <"$WORK/calls.err")" 0
check_eq "folded --with-calls: sampled lines unchanged" "$(grep -v '^\[calls ns\];' "$WORK/calls.folded")" "$(cat "$F")"
check_eq "folded --with-calls: call weights (ns) add up to the root calls' time" \
	"$(awk '/^\[calls ns\];/ { s += $NF } END { printf "%.0f\n", s }' "$WORK/calls.folded")" "$root_ns"

# ---- pprof, read by go tool pprof ----------------------------------------------------
P="$WORK/demo.pb.gz"
check "pprof export" "$PROFCTL" export --format pprof -o "$P" "$T"
check "pprof: gzip" gzip -t "$P"
if command -v go >/dev/null; then
	export HOME="$WORK" GOCACHE="$WORK/gocache" GOPATH="$WORK/go"
	pp() { go tool pprof "$@" "$P" 2>/dev/null; }
	pp -top -unit=ns >"$WORK/top.txt"
	check_eq "pprof -top: the hottest sampled function" \
		"$(awk '$1 == "flat" { getline; print $6; exit }' "$WORK/top.txt")" "$hottest"
	check_eq "pprof -top: cpu total = samples x period" \
		"$(sed -n 's/.* of \([0-9]*\)ns total.*/\1/p' "$WORK/top.txt")" "$((n_samples * PERIOD))"
	check_eq "pprof: samples total" \
		"$(pp -top -sample_index=samples | sed -n 's/.* of \([0-9]*\) total.*/\1/p')" "$n_samples"
	check_eq "pprof: instrumented calls total = the trace's slices" \
		"$(pp -top -sample_index=calls | sed -n 's/.* of \([0-9]*\) total.*/\1/p')" "$n_slices"
	check_eq "pprof: call_time total = the root calls' time" \
		"$(pp -top -unit=ns -sample_index=call_time | sed -n 's/.* of \([0-9]*\)ns total.*/\1/p')" "$root_ns"
	bid=$(readelf -n "$DEMO" | awk '/Build ID/ { print $3 }')
	check "pprof: the demo's mapping carries its build id" \
		test -n "$bid" -a "$(pp -raw | awk -v d="$DEMO" '$3 == d { print $4 }')" = "$bid"
	check_eq "pprof: the program is its main binary (the first mapping)" \
		"$(sed -n 's/^File: //p' "$WORK/top.txt")" "$(basename "$DEMO")"
	check "pprof: worker calls fib (instrumented chain)" \
		grep -q 'fib' <(pp -peek '^worker$' -sample_index=calls)
else
	echo "FAIL: go not installed (tools/install-deps.sh installs golang-go)"
	failed=$((failed + 1))
fi

# ---- chrome JSON, read back by Python's json module ---------------------------------------
J="$WORK/demo.json"
check "chrome export" "$PROFCTL" export --format chrome -o "$J" "$T"
# One line per slice: tid depth name ts dur, the depth rebuilt from ts/dur nesting alone.
/usr/bin/python3 - "$J" >"$WORK/json_slices.txt" <<'PY' || echo "FAIL: python could not read the JSON"
import decimal, json, sys
d = json.load(open(sys.argv[1]), parse_float=decimal.Decimal)
by_tid = {}
for e in d["traceEvents"]:
    if e["ph"] in ("X", "B"):
        ts = int(e["ts"] * 1000)
        dur = int(e["dur"] * 1000) if e["ph"] == "X" else -1
        by_tid.setdefault(e["tid"], []).append((ts, -dur if dur >= 0 else -(1 << 62), e["name"]))
for tid, evs in by_tid.items():
    evs.sort()
    stack = []  # ends of the enclosing slices
    for ts, negdur, name in evs:
        dur = -negdur if negdur != -(1 << 62) else -1
        end = ts + dur if dur >= 0 else 1 << 62
        while stack and stack[-1] <= ts and not (stack[-1] == ts and end == ts):
            stack.pop()
        print(tid, len(stack), name, ts, dur)
        stack.append(end)
print("samples", sum(1 for e in d["traceEvents"] if e["ph"] == "i"))
print("sample_names", ",".join(sorted({e["name"] for e in d["traceEvents"] if e["ph"] == "i"})))
print("names", sum(1 for e in d["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"))
PY
check_eq "chrome: slices per thread, their depth, ts and dur = the trace's" \
	"$(grep -v '^samples\|^names\|^sample_names' "$WORK/json_slices.txt" | sort)" \
	"$(awk '$1 == "slice" { print $2, $3, $4, $5, $6 }' "$WORK/dump.txt" | sort)"
check_eq "chrome: one instant event per sample" "$(awk '$1 == "samples" { print $2 }' "$WORK/json_slices.txt")" "$n_samples"
check_eq "chrome: samples are named for what they are, not after a function" \
	"$(sed -n 's/^sample_names //p' "$WORK/json_slices.txt")" "cpu sample"
check "chrome: thread names" test "$(awk '$1 == "names" { print $2 }' "$WORK/json_slices.txt")" -ge 2

# ---- bad input: one line, non-zero exit, no output left -------------------------------------
bad() { # description, expected text on stderr, then the export's arguments
	local what=$1 want=$2
	shift 2
	"$PROFCTL" export "$@" >"$WORK/bad.out" 2>"$WORK/bad.err"
	local rc=$?
	check "$what: non-zero exit" test "$rc" -ne 0
	check_eq "$what: one line on stderr" "$(wc -l <"$WORK/bad.err")" 1
	check "$what: says '$want'" grep -q -- "$want" "$WORK/bad.err"
}
mkdir "$WORK/out"
bad "unknown format" "unknown format 'svg'" --format svg -o "$WORK/out/x" "$T"
printf 'hello, this is not a trace\n' >"$WORK/text.pftrace"
bad "not a trace" "not a Perfetto protobuf trace" --format pprof -o "$WORK/out/x" "$WORK/text.pftrace"
head -c $(($(stat -c %s "$T") - 1000)) "$T" >"$WORK/cut.pftrace"
for f in pprof chrome folded; do
	bad "truncated trace ($f)" "truncated packet" --format $f -o "$WORK/out/cut" "$WORK/cut.pftrace"
done
bad "missing trace" "No such file" --format folded -o "$WORK/out/x" "$WORK/none.pftrace"
bad "unwritable output" "cannot write $WORK/nodir/x.json" --format chrome -o "$WORK/nodir/x.json" "$T"
check_eq "no output or temporary file left behind" "$(ls -A "$WORK/out")" ""
echo keep >"$WORK/out/old.folded"
bad "truncated trace over an existing output" "truncated packet" --format folded -o "$WORK/out/old.folded" "$WORK/cut.pftrace"
check_eq "the existing output is untouched" "$(cat "$WORK/out/old.folded")" keep

finish

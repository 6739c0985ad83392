#!/usr/bin/env bash
# Timeline filters (issue 12): under --min-duration only the calls at least
# that long reach the trace, their parents with them, while every call stays
# counted exactly; --max-depth keeps deep recursion off the timeline, also
# counted; filters and a full buffer together still add up; bad values are
# refused with one line.
source "$(dirname "$0")/common.bash"
TARGET="$ROOT/$BUILD/tests/targets/filter_target"

# summary_calls FILE: "made recorded dropped filtered" from "profctl: calls: ..."
summary_calls() {
	sed -nE 's/^profctl: calls: ([0-9]+) made, ([0-9]+) recorded, ([0-9]+) dropped(.*)/\1 \2 \3 \4/p' \
		"$1" | awk '{ f = 0; if (match($0, /, [0-9]+ filtered/)) { f = substr($0, RSTART + 2, RLENGTH - 2); sub(/ filtered/, "", f) } print $1, $2, $3, f + 0 }'
}

# counts TRACE: "NAME SLICES CALLS OFF_TIMELINE SHORTEST" per function (all threads)
counts() {
	"$PROFCTL" report --dump "$1" | awk '
		$1 == "slice" { n[$4]++; if (!($4 in lo) || $6 < lo[$4]) lo[$4] = $6 }
		$1 == "total" && $2 == 0 { calls[$3] = $4; off[$3] = $6 }
		END { for (f in calls) print f, n[f] + 0, calls[f], off[f], (f in lo) ? lo[f] : -1 }' |
		sort
}

"$TARGET" >"$WORK/plain.out"
check_eq "the target runs alone" "$?" 0
total=$(sed -n 's/^total //p' "$WORK/plain.out")

# ---- --min-duration 2us: a million ~10 ns calls, 2800 calls of 5 us or more
"$PROFCTL" run --funcs 'ft_*' --freq 0 --min-duration 2us -o "$WORK/min.pftrace" -- "$TARGET" \
	>"$WORK/min.out" 2>"$WORK/min.err"
check_eq "min-duration: the target ran" "$?" 0
check_eq "min-duration: the program's output is unchanged" "$(cat "$WORK/min.out")" \
	"$(cat "$WORK/plain.out")"
read -r made recorded dropped filtered < <(summary_calls "$WORK/min.err")
check_eq "min-duration: calls made = the program's calls" "$made" "$total"
check_eq "min-duration: nothing dropped" "$dropped" 0
check_eq "min-duration: made = recorded + filtered" "$made" "$((recorded + filtered))"
check "min-duration: the filter is named in the summary" \
	grep -qE "^profctl: calls: .* $filtered filtered \(shorter than 2000 ns: $filtered\)" \
	"$WORK/min.err"
counts "$WORK/min.pftrace" >"$WORK/min.counts"
check "min-duration: slices were written" test -s "$WORK/min.counts"
check_eq "min-duration: no slice is shorter than 2 us" \
	"$(awk '$5 >= 0 && $5 < 2000' "$WORK/min.counts")" ""
for f in ft_slow ft_parent ft_recurse ft_jumper ft_jump_outer; do
	want=$(sed -n "s/^long $f //p" "$WORK/min.out")
	check_eq "min-duration: every long call of $f is a slice" \
		"$(awk -v f=$f '$1 == f { print $2 }' "$WORK/min.counts")" "$want"
done
for f in ft_tiny ft_slow ft_parent ft_recurse ft_jumper ft_jump_outer; do
	want=$(sed -n "s/^count $f //p" "$WORK/min.out")
	read -r slices calls off < <(awk -v f=$f '$1 == f { print $2, $3, $4 }' "$WORK/min.counts")
	check_eq "min-duration: $f exact calls = the program's" "$calls" "$want"
	check_eq "min-duration: $f slices + off-timeline = its calls" "$((slices + off))" "$want"
done
tiny=$(awk '$1 == "ft_tiny" { print $2 }' "$WORK/min.counts")
check "min-duration: tiny calls stay off the timeline (${tiny} of 1000000 on it)" \
	test "${tiny:-1000000}" -lt 1000
"$PROFCTL" report --dump "$WORK/min.pftrace" >"$WORK/min.dump"
# the buckets of calls off the timeline are the agent's (profd counts the others' from events)
tiny_p50=$(awk '$1 == "total" && $2 == 0 && $3 == "ft_tiny" { print $9 }' "$WORK/min.dump")
check "min-duration: ft_tiny's p50 (${tiny_p50} ns) is of its short calls, off the timeline" \
	test "${tiny_p50:-0}" -gt 0 -a "${tiny_p50:-0}" -lt 2000
check_eq "min-duration: the trace reads back without problems" \
	"$(grep -c '^problem' "$WORK/min.dump")" 0
check_eq "min-duration: ft_slow called by ft_parent nests in it (late ENTERs)" \
	"$(awk '$1 == "slice" && $4 == "ft_slow" && $3 == 1' "$WORK/min.dump" | wc -l)" 500
check_eq "min-duration: ft_jumper, left by longjmp, nests in ft_jump_outer" \
	"$(awk '$1 == "slice" && $4 == "ft_jumper" && $3 == 1' "$WORK/min.dump" | wc -l)" 50
check_eq "min-duration: the recursion keeps its 12 levels" \
	"$(awk '$1 == "slice" && $4 == "ft_recurse" { d[$3] = 1 } END { print length(d) }' \
		"$WORK/min.dump")" 12

# ---- --max-depth 5: ft_recurse is 12 deep
"$PROFCTL" run --funcs 'ft_*' --freq 0 --max-depth 5 -o "$WORK/depth.pftrace" -- "$TARGET" \
	>"$WORK/depth.out" 2>"$WORK/depth.err"
check_eq "max-depth: the program's output is unchanged" "$(cat "$WORK/depth.out")" \
	"$(cat "$WORK/plain.out")"
read -r made recorded dropped filtered < <(summary_calls "$WORK/depth.err")
check_eq "max-depth: calls made = the program's calls" "$made" "$total"
check_eq "max-depth: 7 levels of 100 recursions filtered" "$filtered" 700
check "max-depth: the filter is named in the summary" \
	grep -qE "^profctl: calls: .* 700 filtered \(deeper than 5: 700\)" "$WORK/depth.err"
"$PROFCTL" report --dump "$WORK/depth.pftrace" >"$WORK/depth.dump"
check_eq "max-depth: ft_recurse slices only at depths 0-4, 100 each" \
	"$(awk '$1 == "slice" && $4 == "ft_recurse" { d[$3]++ } END { for (k in d) print k, d[k] }' \
		"$WORK/depth.dump" | sort -n | tr '\n' ' ')" "0 100 1 100 2 100 3 100 4 100 "
check_eq "max-depth: ft_recurse exact calls = the program's" \
	"$(awk '$1 == "total" && $2 == 0 && $3 == "ft_recurse" { print $4 }' "$WORK/depth.dump")" 1200
check_eq "max-depth: the trace reads back without problems" \
	"$(grep -c '^problem' "$WORK/depth.dump")" 0

# ---- both filters and a 64 KiB buffer: drops and filters add up, the trace stays whole
"$PROFCTL" run --funcs 'ft_*' --freq 0 --min-duration 1ns --max-depth 3 --buffer-size 64K \
	-o "$WORK/both.pftrace" -- "$TARGET" >"$WORK/both.out" 2>"$WORK/both.err"
check_eq "filters + tiny buffer: the program's output is unchanged" "$(cat "$WORK/both.out")" \
	"$(cat "$WORK/plain.out")"
read -r made recorded dropped filtered < <(summary_calls "$WORK/both.err")
check_eq "filters + tiny buffer: calls made = the program's calls" "$made" "$total"
check_eq "filters + tiny buffer: made = recorded + dropped + filtered" "$made" \
	"$((recorded + dropped + filtered))"
counts "$WORK/both.pftrace" >"$WORK/both.counts"
check_eq "filters + tiny buffer: slices + off-timeline = calls, for every function" \
	"$(awk '$2 + $4 != $3' "$WORK/both.counts")" ""
check_eq "filters + tiny buffer: the trace reads back without problems" \
	"$("$PROFCTL" report --dump "$WORK/both.pftrace" | grep -c '^problem')" 0

# ---- bad values: one line naming the option, non-zero exit, nothing run
for bad in "--min-duration 5" "--min-duration 0us" "--min-duration -1us" \
	"--min-duration 2h" "--min-duration 2us5" "--min-duration 7200s" "--max-depth 0" \
	"--max-depth 2000" "--max-depth x"; do
	# shellcheck disable=SC2086
	"$PROFCTL" run --funcs 'ft_*' $bad -o "$WORK/bad.pftrace" -- "$TARGET" >"$WORK/bad.out" \
		2>"$WORK/bad.err"
	rc=$?
	check "$bad is refused (exit $rc)" test "$rc" -ne 0
	check_eq "$bad: one line naming the option" "$(grep -c -- "${bad%% *}" "$WORK/bad.err")" 1
	check "$bad: the program did not run" test ! -s "$WORK/bad.out"
done
finish

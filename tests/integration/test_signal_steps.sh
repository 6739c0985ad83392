#!/usr/bin/env bash
# A signal before every instruction the profiler adds to a fixed probe
# (tests/targets/sigstep_target.c): hooks, trampolines, stubs and patched
# entries, one instruction at a time, in four passes of handler behaviour.
# The program must run exactly as it does unprofiled and the trace must hold
# one slice per call it made. Failures name the pass and the instruction
# (symbol+offset) in FATAL and FAIL lines; to look closer, run the target
# under profctl with --verbose, --only WORD or --from PASS:VISIT. Two more
# runs walk the capture of --args/--retval (issue 29) on a probe of its own,
# ss_args alone (the target's --capture-probe): its values written with its
# ENTER, and saved while it waits (--min-duration); the values in the trace
# are checked too.
set -u
. "$(dirname "$0")/common.bash"

TARGET="$ROOT/$BUILD/tests/targets/sigstep_target"
GLOBS='ss_*,backtrace'
# About half of what one probe runs in profiler code today (4931: enter hook
# 1543, exit hook 528, trampolines 2675 with their fast paths, stubs 119;
# with --min-duration, where the fast paths give way at once, trampolines
# 1691): a path that stops being visited, or a function that stops being
# patched, falls below its floor.
MIN_TOTAL=2400 MIN_ENTER=750 MIN_EXIT=260 MIN_TRAMP=1300 MIN_STUBS=50
# The capture probe, ss_args (ints, a string, a double) and ss_ints (ints
# only, copied inline) with their specs, about half of what it runs in
# profiler code today (1610: enter hook 701, exit hook 491, trampolines 384,
# stubs 21; trampolines 305 with --min-duration).
CAPTURE_FLOORS=(MIN_TOTAL=800 MIN_ENTER=340 MIN_EXIT=240 MIN_TRAMP=150 MIN_STUBS=9)
CAPTURE_SPECS=(--args 'ss_args@arg1,arg2/i32,arg3/s,fparg1/f64' --retval 'ss_args@retval/f64'
	--args 'ss_ints@arg1,arg2,arg3,arg4' --retval 'ss_ints@retval')
# Each function's values, then its return value, as --dump shows them.
CAPTURE_VALUES=(ss_args 'arg1=5 arg2=-7 arg3="sigstep" fparg1=2.5' 'retval=282.5'
	ss_ints 'arg1=1 arg2=-2 arg3=3 arg4=1048576' 'retval=4194310')
start=$(date +%s.%N)

# The values of each slice of FUNC (its args line, without "args TID TS"):
# its arguments on every one; its return value on every call that returned,
# and on a call abandoned after its exit hook's publish (pass 4), but for the
# few whose segment had no room left for it. With --min-duration, the
# arguments too: a late ENTER's values are written when there is room (its
# return value may still be).
capture_check() { # FUNC ARGS RETVAL
	local fn=$1 args=$2 ret=$3 slices returned with_args with_retval late=${MODE:+1}

	awk -v f="$fn" '$1 == "slice" { want = $4 == f }
		$1 == "args" && want { $1 = $2 = $3 = ""; sub(/^ +/, ""); print; want = 0 }' \
		"$WORK/ss.dump" >"$WORK/values"
	slices=$(awk -v f="$fn" '$1 == "slice" && $4 == f' "$WORK/ss.dump" | wc -l)
	returned=$(sed -nE "s/^$fn calls returned: ([0-9]+)\$/\\1/p" "$WORK/prof.out")
	with_args=$(grep -cxF -e "$args" -e "$args $ret" "$WORK/values")
	with_retval=$(grep -cxF -e "$args $ret" -e "$ret" "$WORK/values")
	if [ -n "$late" ]; then
		check "$MODE: $fn slices with their arguments: $with_args of $slices, within 1/100" \
			test $((100 * (with_args - slices))) -ge "-$slices"
	else
		check_eq "capture: every $fn slice has its arguments" "$with_args" "$slices"
	fi
	check "capture: $fn was called ($slices slices)" test "$slices" -gt 0
	check_eq "capture: the values of $fn are right" \
		"$(grep -cvxF -e "$args" -e "$args $ret" ${late:+-e "$ret"} "$WORK/values")" 0
	check "capture: a return value on the calls of $fn that returned ($with_retval of ${returned:-0}), within 1/100" \
		test "${returned:-0}" -gt 0 -a $((100 * (with_retval - ${returned:-0}))) -ge "-${returned:-0}"
}

# The harness alone: unprofiled, only the ss_ entry bytes count as profiler code.
"$TARGET" >"$WORK/plain.out" 2>&1
rc=$?
if grep -q '^skip:' "$WORK/plain.out"; then
	skip "$(sed -n 's/^skip: //p' "$WORK/plain.out")"
	finish
	exit
fi
check_eq "unprofiled: exit status" "$rc" 0
check "unprofiled: every visit right" grep -q '^sigstep: every visit right' "$WORK/plain.out"
check "unprofiled: the ss_ entries were visited in 4 passes" \
	grep -Eq '^visited [1-9][0-9]* instructions .* x 4 passes$' "$WORK/plain.out"

# The full probe twice, then the capture probe twice: ENTERs written at once,
# and held in the shadow entry until the call proves long enough
# (--min-duration 1ns, a few ticks), so that late ENTERs and their parents'
# are visited too. Under the tracer a few calls measure a
# single tick and stay off the timeline, counted as filtered: that path
# depends on a duration, so in that mode the harness may see the probe take
# another path ("harness:" lines, no signal sent then; on a busy machine on
# every retry of a visit), and the slices plus the calls off the timeline
# (filtered or passed through) are checked against the program's counts.
for RUN in "" "--min-duration 1ns" capture "capture --min-duration 1ns"; do
	echo "== run: ${RUN:-ENTERs at once}"
	MODE=${RUN#capture} MODE=${MODE# }
	opts=() target_opts=()
	[ -z "$MODE" ] || read -ra opts <<<"$MODE"
	if [ "$RUN" != "$MODE" ]; then
		opts+=("${CAPTURE_SPECS[@]}") target_opts=(--capture-probe)
		declare "${CAPTURE_FLOORS[@]}"
	fi
	# no scheduler states: the tracer stops the target at every step (tens of
	# thousands of switches in seconds), and on a loaded machine the probe's
	# ring lost some (counted and marked: the importer's data-loss stat, which
	# failed the trace check once); they are not what this test is about
	"$PROFCTL" run --freq 0 --sched off --funcs "$GLOBS" "${opts[@]}" -o "$WORK/ss.pftrace" -- \
		"$TARGET" "${target_opts[@]}" >"$WORK/prof.out" 2>"$WORK/prof.err"
	rc=$?
	grep -E '^profctl: (functions|events|.*killed)' "$WORK/prof.err"
	grep -E '^(FATAL|FAIL) ' "$WORK/prof.out"
	grep -E '^(pass [1-4]|signals|sigstep|calls recorded)' "$WORK/prof.out"
	if [ -z "$MODE" ]; then
		check_eq "profiled: exit status" "$rc" 0
		check_eq "profiled: FATAL and FAIL lines" \
			"$(grep -cE '^(FATAL|FAIL) ' "$WORK/prof.out")" 0
	else
		check "$MODE: the tracer ran to its end (exit $rc)" test "$rc" -le 1
		check_eq "$MODE: FATAL and FAIL lines other than another path" \
			"$(grep -E '^(FATAL|FAIL) ' "$WORK/prof.out" |
				grep -cvE "harness: (rsp|the probe ran|another path)|the probe's path changed")" 0
	fi
	check_eq "every ss_ function instrumented" \
		"$(sed -nE 's/^profctl: functions: .* ([0-9]+) instrumented.*/\1/p' "$WORK/prof.err")" \
		"$(grep -c '^count ss_' "$WORK/prof.out")"

	n='([0-9]+)'
	kinds="enter hook $n, exit hook $n, trampolines $n, stubs $n, other $n"
	read -r total enter exit tramp stubs other passes < <(sed -nE \
		"s/^visited $n instructions \($kinds\) x $n passes$/\1 \2 \3 \4 \5 \6 \7/p" \
		"$WORK/prof.out")
	echo "visited ${total:-0} instructions"
	check_eq "profiled: all 4 passes completed" "${passes:-0}" 4
	check "instructions per pass: ${total:-0} >= $MIN_TOTAL" [ "${total:-0}" -ge $MIN_TOTAL ]
	check "enter hook: ${enter:-0} >= $MIN_ENTER" [ "${enter:-0}" -ge $MIN_ENTER ]
	check "exit hook: ${exit:-0} >= $MIN_EXIT" [ "${exit:-0}" -ge $MIN_EXIT ]
	check "trampolines: ${tramp:-0} >= $MIN_TRAMP" [ "${tramp:-0}" -ge $MIN_TRAMP ]
	check "stubs: ${stubs:-0} >= $MIN_STUBS" [ "${stubs:-0}" -ge $MIN_STUBS ]

	# A visit is made again only when a ring-segment switch moved the learned
	# occurrence (a few per run): a hook whose path depended on timing would be
	# repeated at every visit of its instructions, and hidden by the repeats.
	read -r delivered repeated < <(sed -nE \
		's/^signals delivered: ([0-9]+);.* the probe took another path: ([0-9]+)$/\1 \2/p' \
		"$WORK/prof.out")
	check "visits made again: ${repeated:-none} of ${delivered:-0} (under 1 %)" \
		test -n "${repeated:-}" -a $((100 * ${repeated:-0})) -lt "${delivered:-0}"

	"$PROFCTL" report --dump "$WORK/ss.pftrace" >"$WORK/ss.dump"
	check_eq "trace breaks no rule" "$(grep -c '^problem' "$WORK/ss.dump")" 0
	# A handler's calls made while the thread is inside a hook pass through
	# unrecorded and are counted as dropped: slices = calls made - those, and the
	# agent's dropped figure is exactly their sum.
	for name in $(awk '$1 == "count" {print $2}' "$WORK/prof.out"); do
		if [ -n "$MODE" ]; then
			# Known gap (issue 12's note): a siglongjmp out of a late ENTER's few
			# instructions can leave 1-3 calls in 40 k accounted twice; more than
			# 1 in 10,000 is a failure.
			got=$(awk -v n="$name" '$1 == "slice" && $4 == n {s++}
				$1 == "total" && $2 == 0 && $3 == n {o = $6}
				END {print s + o}' "$WORK/ss.dump")
			want=$(awk -v n="$name" '$1 == "count" && $2 == n {print $3}' "$WORK/prof.out")
			check "$MODE: slices of $name + its calls off the timeline ($got) = the calls it made ($want), within 1/10000" \
				test "${got:-0}" -ge "${want:-1}" -a $(( (${got:-0} - ${want:-0}) * 10000 )) -le "${want:-0}"
			continue
		fi
		check_eq "slices of $name = calls the program made - calls passed through" \
			"$(awk -v n="$name" '$1 == "slice" && $4 == n' "$WORK/ss.dump" | wc -l)" \
			"$(awk -v n="$name" '$1 == "count" && $2 == n {c = $3}
				$1 == "unrecorded" && $2 == n {u = $3} END {print c - u}' "$WORK/prof.out")"
	done
	grep -E '^handler calls passed through' "$WORK/prof.out"
	for ((i = 0; ${#target_opts[@]} && i < ${#CAPTURE_VALUES[@]}; i += 3)); do
		capture_check "${CAPTURE_VALUES[@]:i:3}"
	done
	[ -z "$MODE" ] || continue
	check_eq "profctl's dropped = the calls that passed through" \
		"$(sed -nE 's/^profctl: calls: [0-9]+ made, [0-9]+ recorded, ([0-9]+) dropped.*/\1/p' "$WORK/prof.err")" \
		"$(awk '$1 == "unrecorded" {u += $3} END {print u + 0}' "$WORK/prof.out")"
	check_eq "no ss_ slice left open" \
		"$(awk '$1 == "slice" && $4 ~ /^ss_/ && $6 == -1' "$WORK/ss.dump" | wc -l)" 0
done
awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "time: %.1f s\n", b - a }'
finish

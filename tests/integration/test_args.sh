#!/usr/bin/env bash
# Arguments and return values (issue 29, uftrace's -A/-R): --args and
# --retval put integers of every size, doubles, strings (copied without ever
# faulting the target: a bad pointer, an unreadable page, a string without
# its NUL), stack arguments and return values on the slices; in --dump, in
# the Chrome export and (when it is on PATH) in trace_processor's args; calls
# kept waiting by --min-duration keep theirs; `profctl attach` records them
# too; bad specs get one line. TARGET_ARCH=aarch64: the arm64 build under
# qemu-user with its agent (common.bash), all but attach.
source "$(dirname "$0")/common.bash"
TARGET="$TARGETS/args_target"
SPECS=(--args 'args_all@arg1/s,arg2/i8,arg3/i16,arg4/i32,arg5,fparg1,arg6/u32,arg7/s'
	--retval 'args_all@retval' --args 'args_long@arg1/s' --args 'args_stack@arg7,arg8/x,arg10'
	--args 'args_float@fparg1,fparg2/f32' --retval 'args_float@retval/f64'
	--args 'fopen@arg1/s')

"${RUNNER[@]}" "$TARGET" >"$WORK/plain.out"
check_eq "the target runs alone" "$?" 0

# Under qemu-user no string is copied: qemu has no process_vm_readv (ENOSYS),
# and the agent records such a pointer as unreadable, as it must. There a
# string's expected text is that, without its address (which moves between
# runs); text STRING gives what a check expects of one.
if [ -n "$TARGET_ARCH" ]; then
	skip "strings under qemu-user (no process_vm_readv there): checked as recorded unreadable"
	text() { echo '<unreadable>'; }
	no_addresses() { sed -E 's/<unreadable(\\x20| )0x[0-9a-f]{5,}>/<unreadable>/g'; }
else
	text() { echo "$1"; }
	no_addresses() { cat; }
fi

# args_of TRACE FUNC N: the args line of FUNC's Nth slice (file order), without "args TID TS"
args_of() {
	"$PROFCTL" report --dump "$1" | awk -v f="$2" -v n="$3" '
		$1 == "slice" { want = ($4 == f && ++seen[f] == n) }
		$1 == "args" && want { $1 = $2 = $3 = ""; sub(/^ +/, ""); print; exit }' | no_addresses
}

"$PROFCTL" run --funcs 'args_*,fopen' --freq 0 "${SPECS[@]}" --args 'nomatch_*@arg1' \
	-o "$WORK/args.pftrace" -- "${RUNNER[@]}" "$TARGET" >"$WORK/args.out" 2>"$WORK/args.err"
check_eq "run: the target ran" "$?" 0
check_eq "run: the program's output is unchanged" "$(cat "$WORK/args.out")" "$(cat "$WORK/plain.out")"
check_eq "ints of every size, a double, an enum, a bad pointer, the return value" \
	"$(args_of "$WORK/args.pftrace" args_all 1)" \
	"arg1=\"$(text 'hello\x20world')\""' arg2=-5 arg3=1234 arg4=-70000 arg5=1099511627776 fparg1=2.5 arg6=7 arg7="<unreadable\x200x1>" retval=1099511560015'
check "an unreadable page as a string: invalid, the target unharmed" grep -qE \
	"^arg1=\"$(text second)\""' arg2=7 arg3=-2 arg4=3 arg5=-4 fparg1=-0.25 arg6=2 arg7="<unreadable(\\x200x[0-9a-f]+)?>" retval=1007$' \
	<<<"$(args_of "$WORK/args.pftrace" args_all 2)"
check_eq "a string past the copy limit: 64 bytes, marked cut" "$(args_of "$WORK/args.pftrace" args_long 1)" \
	"arg1=\"$(text 'abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl...')\""
check_eq "a string without its NUL before an unreadable page: what could be read, marked cut" \
	"$(args_of "$WORK/args.pftrace" args_long 2)" "arg1=\"$(text 'xxxxxxxxxx...')\""
check_eq "arguments on the stack (arg7, arg8 in hex, arg10)" "$(args_of "$WORK/args.pftrace" args_stack 1)" \
	'arg7=77 arg8=0x58 arg10=1010'
check_eq "FP arguments (f64, f32) and an FP return value" "$(args_of "$WORK/args.pftrace" args_float 3)" \
	'fparg1=1.5 fparg2=0.25 retval=3.25'
check_eq "a libc function's argument: the path given to fopen" "$(args_of "$WORK/args.pftrace" fopen 1)" \
	"arg1=\"$(text /proc/self/args_target_path)\""
check "every call with a spec carries its values" test "$("$PROFCTL" report --dump "$WORK/args.pftrace" | grep -c "^args ")" = 19
check "a spec that matches nothing: a warning naming it" \
	grep -qF "warning: --args 'nomatch_*@arg1': matches no instrumented function" "$WORK/args.err"
check "the summary counts the calls with values" \
	grep -qE '^profctl: values: 19 calls carried arguments, [0-9]+ values recorded' "$WORK/args.err"

# ---- the Chrome export: the values in each event's "args"
if "$PROFCTL" export --help 2>&1 | grep -q chrome; then
	"$PROFCTL" export --format chrome -o "$WORK/args.json" "$WORK/args.pftrace" 2>"$WORK/export.err"
	check_eq "export chrome: done" "$?" 0
	check "export chrome: strings, ints, doubles in the event's args" grep -qF \
		'"args":{"arg1":"'"$(text 'hello world')"'","arg2":-5,"arg3":1234,"arg4":-70000,"arg5":1099511627776,"fparg1":2.5,"arg6":7,"arg7":"<unreadable 0x1>","retval":1099511560015}' \
		<(no_addresses <"$WORK/args.json")
fi

# ---- trace_processor: debug annotations by the importer's rules
if command -v trace_processor_shell >/dev/null; then
	cat >"$WORK/q.sql" <<'SQL'
select a.key, a.value_type, coalesce(a.int_value, a.string_value, a.real_value)
from slice s join args a using(arg_set_id) where s.name = 'args_all'
  and (a.key glob 'debug.arg*' or a.key glob 'debug.fparg*' or a.key = 'debug.retval')
order by s.ts, a.key limit 9;
SQL
	timeout 600 trace_processor_shell -q "$WORK/q.sql" "$WORK/args.pftrace" 2>/dev/null |
		tail -n +2 | tr -d '"' | tr '\n' ' ' | no_addresses >"$WORK/tp.out"
	check_eq "trace_processor: the args table" "$(cat "$WORK/tp.out")" \
		"debug.arg1,string,$(text 'hello world')"' debug.arg2,int,-5 debug.arg3,int,1234 debug.arg4,int,-70000 debug.arg5,int,1099511627776 debug.arg6,uint,7 debug.arg7,string,<unreadable 0x1> debug.fparg1,real,2.500000 debug.retval,int,1099511560015 '
else
	skip "trace_processor_shell not on PATH: the args table is not checked"
fi

# ---- --min-duration: a call written late keeps its values; calls off the timeline have none
"$PROFCTL" run --funcs 'args_*,fopen' --freq 0 "${SPECS[@]}" --min-duration 1ns \
	-o "$WORK/late.pftrace" -- "${RUNNER[@]}" "$TARGET" >/dev/null 2>"$WORK/late.err"
check_eq "min-duration: the target ran" "$?" 0
check_eq "min-duration: a call reaching the timeline late keeps its values" \
	"$(args_of "$WORK/late.pftrace" args_all 1)" "$(args_of "$WORK/args.pftrace" args_all 1)"
check_eq "min-duration: the string saved with it" "$(args_of "$WORK/late.pftrace" args_long 1)" \
	"$(args_of "$WORK/args.pftrace" args_long 1)"
"$PROFCTL" run --funcs 'args_*' --freq 0 "${SPECS[@]}" --min-duration 10s \
	-o "$WORK/off.pftrace" -- "${RUNNER[@]}" "$TARGET" >/dev/null 2>"$WORK/off.err"
check_eq "min-duration 10s: no values for calls off the timeline" \
	"$("$PROFCTL" report --dump "$WORK/off.pftrace" | grep -c '^args ')" 0

# ---- --args-string-max
"$PROFCTL" run --funcs 'args_all' --freq 0 --args 'args_all@arg1/s' --args-string-max 8 \
	-o "$WORK/short.pftrace" -- "${RUNNER[@]}" "$TARGET" >/dev/null 2>&1
check_eq "args-string-max 8: cut at 8 bytes" "$(args_of "$WORK/short.pftrace" args_all 1)" \
	"arg1=\"$(text 'hello\x20wo...')\""

# ---- attach: values of a running process's calls (8 threads, each checking its results)
if [ -n "$TARGET_ARCH" ]; then
	skip "attach: not under qemu-user (profctl attach injects into x86-64 processes)"
else
	"$TARGETS/attach_target" "$WORK/stop" >"$WORK/attach.out" 2>/dev/null &
	apid=$!
	wait_for "$WORK/attach.out" running
	"$PROFCTL" attach "$apid" --funcs 'at_*' --freq 0 --duration 1 \
		--args 'at_mix@arg1,arg2,arg3' --retval 'at_mix@retval' \
		--args 'at_scale@fparg1,arg1,fparg2' --retval 'at_scale@retval/f64' \
		-o "$WORK/attach.pftrace" 2>"$WORK/attach.err"
	check_eq "attach: done" "$?" 0
	touch "$WORK/stop"
	wait "$apid"
	check_eq "attach: the target never computed a wrong result" "$(tail -n 1 "$WORK/attach.out")" \
		"wrong results 0"
	# Every slice of at_mix(i, 3i, 7) and at_scale(1.5, k, 0.25) with its values,
	# each right; the return value on all but the calls still running at detach
	# and the few (3 in 10,000 here) whose segment had no room left for it
	# beyond the exits owed (agent/hooks.c exit_values).
	"$PROFCTL" report --dump "$WORK/attach.pftrace" | awk '
		function bxor(a, b,   r, bit) { # a ^ b for non-negative integers (mawk has no xor)
			for (bit = 1; a > 0 || b > 0; bit *= 2) {
				if (a % 2 != b % 2) r += bit
				a = int(a / 2); b = int(b / 2)
			}
			return r + 0
		}
		$1 == "total" && $2 == 0 { lost[$3] = $NF; next }
		$1 == "slice" { f = $4; n[f]++; next }
		$1 != "args" || (f != "at_mix" && f != "at_scale") { f = ""; next }
		{
			split("", v)
			for (i = 4; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
			if (f == "at_mix")
				ok = v["arg2"] == 3 * v["arg1"] && v["arg3"] == 7 &&
				     (!("retval" in v) || v["retval"] == 31 * v["arg1"] + bxor(v["arg2"], 7))
			else
				ok = v["fparg1"] == 1.5 && v["fparg2"] == 0.25 && v["arg1"] >= 0 &&
				     v["arg1"] < 1024 && (!("retval" in v) || v["retval"] == 1.5 * v["arg1"] + 0.25)
			with[f]++; bad[f] += !ok; ret[f] += "retval" in v; f = ""
		}
		END {
			for (g in n) if (g == "at_mix" || g == "at_scale")
				printf "%s %d %d %d %d %d\n", g, n[g], with[g], ret[g], bad[g], lost[g]
		}' | sort >"$WORK/attach.values"
	cat "$WORK/attach.values"
	for fn in at_mix at_scale; do
		read -r _ slices with rets bad lost < <(grep "^$fn " "$WORK/attach.values")
		check "attach: $fn was recorded (${slices:-0} slices)" test "${slices:-0}" -gt 0
		check_eq "attach: every $fn slice carries its arguments" "${with:-0}" "${slices:-0}"
		# left off: the count of values without room, and at most one call
		# per thread (8) still running at the detach
		missing=$((${slices:-0} - ${rets:-0} - ${lost:-0}))
		check "attach: $fn's return values (${rets:-0} of ${slices:-0}): all but ${lost:-0} counted, $missing running at detach (<= 8)" \
			test "${rets:-0}" -gt 0 -a "$missing" -ge 0 -a "$missing" -le 8
		check_eq "attach: the values of $fn are right" "${bad:-1}" 0
	done
fi

# ---- bad specs: one line, nothing started
bad_spec() { # expected message, then profctl's options
	local want=$1
	shift
	"$PROFCTL" run --funcs 'args_*' --freq 0 "$@" -o "$WORK/bad.pftrace" -- "${RUNNER[@]}" "$TARGET" \
		>"$WORK/bad.out" 2>"$WORK/bad.err"
	check "bad spec $*: refused" test $? -ne 0
	check_eq "bad spec $*: one line" "$(cat "$WORK/bad.err")" "$want"
	check "bad spec $*: nothing started" test ! -s "$WORK/bad.out" -a ! -e "$WORK/bad.pftrace"
}
bad_spec "profctl: --args 'foo@arg9/q': unknown format 'q'" --args 'foo@arg9/q'
bad_spec "profctl: --retval 'foo@arg1': --retval takes retval only" --retval 'foo@arg1'
bad_spec "profctl: --args 'foo': no '@' (FUNC@arg1,...)" --args foo
bad_spec "profctl: --args 'foo@fparg9': fparg9: at most fparg8 (the FP argument registers)" \
	--args 'foo@fparg9'
finish

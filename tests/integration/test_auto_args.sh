#!/usr/bin/env bash
# --auto-args (issue 29, uftrace's -a): every parameter named and typed from
# DWARF, the -O0 and -O2 builds of args_dwarf alike: integers, bool as
# true/false, enums by enumerator (flags as A|B), strings, other pointers,
# floats; the return value; a struct by value leaves only what is placed
# before it; a function without DWARF records nothing; an explicit --args
# spec wins; the summary's counts are exact; in --dump, the Chrome export,
# trace_processor's args (when on PATH), and through profctl attach.
source "$(dirname "$0")/common.bash"

# args_of TRACE FUNC N: the args line of FUNC's Nth slice (file order), without "args TID TS"
args_of() {
	"$PROFCTL" report --dump "$1" | awk -v f="$2" -v n="$3" '
		$1 == "slice" { want = ($4 == f && ++seen[f] == n) }
		$1 == "args" && want { $1 = $2 = $3 = ""; sub(/^ +/, ""); print; exit }'
}

# check_common TRACE LABEL: the values every build shows alike
check_common() {
	local t=$1 l=$2
	check_eq "$l: ints of every size, a char, a bool as true" "$(args_of "$t" ad_ints 1)" \
		'i=-1 u=2 s=-3 c="c" l=5 b=true retval=103'
	check_eq "$l: enums by their enumerators, flags as A|B" "$(args_of "$t" ad_enum 1)" \
		'mode="AD_APPEND" flags="AD_F_SYNC|AD_F_TRUNC" retval=7'
	check "$l: char * as strings, other pointers in hex" grep -qE \
		'^path="/etc/hostname" buf="b" opaque=0x[0-9a-f]+ bytes=0x[0-9a-f]+ retval=113$' \
		<<<"$(args_of "$t" ad_strings 1)"
	check_eq "$l: floats and doubles among integers, a double returned" \
		"$(args_of "$t" ad_mixed 1)" 'a=1 d=2.5 f=3.5 b=4 e=5.5 retval=16.5'
	check_eq "$l: a struct by value: only the parameter placed before it" \
		"$(args_of "$t" ad_struct_val 1)" 'a=1 retval=9'
	check_eq "$l: a struct returned in memory shifts the registers" \
		"$(args_of "$t" ad_ret_big 1)" 'a=1 name="x"'
	check_eq "$l: typedefs and qualifiers" "$(args_of "$t" ad_typedef 1)" \
		'n=3 name="n" cv=4 retval=117'
	check_eq "$l: a float returned, a bool returned" \
		"$(args_of "$t" ad_retf 1) $(args_of "$t" ad_is_ok 1 | sed 's/p=0x[0-9a-f]*/p/')" \
		'x=1.5 retval=3 p retval=true'
	check_eq "$l: a void function: nothing" "$(args_of "$t" ad_void 1)" ''
}

O2="$TARGETS/args_dwarf"
O0="$TARGETS/args_dwarf_O0"

# ---- -O0: ad_nodwarf (built without -g) is instrumented and records nothing
"$PROFCTL" run --funcs 'ad_*' --freq 0 --auto-args -o "$WORK/o0.pftrace" -- "$O0" \
	>"$WORK/o0.out" 2>"$WORK/o0.err"
check_eq "-O0: the target ran" "$?" 0
check_eq "-O0: its output is unchanged" "$(cat "$WORK/o0.out")" "$("$O0")"
check_common "$WORK/o0.pftrace" "-O0"
check_eq "-O0: a function without DWARF records nothing" \
	"$("$PROFCTL" report --dump "$WORK/o0.pftrace" | grep -c '^slice .* ad_nodwarf ') $(args_of "$WORK/o0.pftrace" ad_nodwarf 1)" '1 '
check_eq "-O0: a static function, named" "$(args_of "$WORK/o0.pftrace" ad_clone_me 2)" \
	'a=2 b=7 s="j" retval=119'
check_eq "-O0: the summary's counts" "$(grep '^profctl: auto-args:' "$WORK/o0.err" | sed 's/; DWARF read in .*//')" \
	'profctl: auto-args: 18 of 19 instrumented functions described by DWARF (1 without); 8 parameters not placed (structs by value, long double, ...): not recorded; 8 past the 8 values a call records'
check "-O0: the values counted" grep -qE '^profctl: values: 18 calls carried arguments' "$WORK/o0.err"

# ---- -O2: GCC's clone (ad_clone_me.constprop.0...) has another ABI: its parameters are refused
"$PROFCTL" run --funcs 'ad_*' --freq 0 --auto-args -o "$WORK/o2.pftrace" -- "$O2" \
	>"$WORK/o2.out" 2>"$WORK/o2.err"
check_eq "-O2: the target ran" "$?" 0
check_common "$WORK/o2.pftrace" "-O2"
clone=$("$PROFCTL" report --dump "$WORK/o2.pftrace" | awk '$1 == "slice" && $4 ~ /^ad_clone_me\./ { print $4; exit }')
check "-O2: the clone is instrumented" test -n "$clone"
check_eq "-O2: a clone records nothing" "$(args_of "$WORK/o2.pftrace" "$clone" 1)" ''
nodwarf=$(grep -c 'skipped ad_nodwarf' "$WORK/o2.err")
check_eq "-O2: the summary's counts" "$(grep '^profctl: auto-args:' "$WORK/o2.err" | sed 's/; DWARF read in .*//')" \
	"profctl: auto-args: 18 of $((19 - nodwarf)) instrumented functions described by DWARF ($((1 - nodwarf)) without); 11 parameters not placed (structs by value, long double, ...): not recorded; 8 past the 8 values a call records"

# ---- the Chrome export: the names, typed
"$PROFCTL" export --format chrome -o "$WORK/o0.json" "$WORK/o0.pftrace" 2>"$WORK/export.err"
check_eq "export chrome: done" "$?" 0
check "export chrome: ints, a char, a bool" grep -qF \
	'"args":{"i":-1,"u":2,"s":-3,"c":"c","l":5,"b":true,"retval":103}' "$WORK/o0.json"
check "export chrome: enums by name" grep -qF \
	'"args":{"mode":"AD_APPEND","flags":"AD_F_SYNC|AD_F_TRUNC","retval":7}' "$WORK/o0.json"

# ---- trace_processor: debug annotations under the parameters' names
if command -v trace_processor_shell >/dev/null; then
	cat >"$WORK/q.sql" <<'SQL'
select a.key, a.value_type, coalesce(a.int_value, a.string_value, a.real_value)
from slice s join args a using(arg_set_id) where s.name in ('ad_enum', 'ad_ints')
and a.key like 'debug.%' order by s.name, a.key;
SQL
	timeout 600 trace_processor_shell -q "$WORK/q.sql" "$WORK/o0.pftrace" 2>/dev/null |
		tail -n +2 | tr -d '"' | tr '\n' ' ' >"$WORK/tp.out"
	check_eq "trace_processor: the args table" "$(cat "$WORK/tp.out")" \
		'debug.flags,string,AD_F_SYNC|AD_F_TRUNC debug.mode,string,AD_APPEND debug.retval,int,7 debug.b,bool,1 debug.c,string,c debug.i,int,-1 debug.l,int,5 debug.retval,int,103 debug.s,int,-3 debug.u,uint,2 '
else
	skip "trace_processor_shell not on PATH: the args table is not checked"
fi

# ---- an explicit spec wins for the functions it matches
"$PROFCTL" run --funcs 'ad_*' --freq 0 --auto-args --args 'ad_ints@arg1/x' \
	--retval 'ad_enum@retval/x' -o "$WORK/ex.pftrace" -- "$O0" >/dev/null 2>"$WORK/ex.err"
check_eq "explicit: the target ran" "$?" 0
check_eq "explicit --args wins" "$(args_of "$WORK/ex.pftrace" ad_ints 1)" 'arg1=0xffffffff'
check_eq "explicit --retval wins" "$(args_of "$WORK/ex.pftrace" ad_enum 1)" 'retval=0x7'
check_eq "explicit: the others from DWARF" "$(args_of "$WORK/ex.pftrace" ad_mixed 1)" \
	'a=1 d=2.5 f=3.5 b=4 e=5.5 retval=16.5'
check "explicit: counted apart" grep -qF \
	'16 of 19 instrumented functions described by DWARF (1 without, 2 left to --args/--retval)' \
	"$WORK/ex.err"

# ---- attach: the agent asks before it patches
exec 3> >("$O2" --loop >"$WORK/loop.out")
for _ in $(seq 50); do
	pid=$(pgrep -n -f "args_dwarf --loop")
	[ -n "$pid" ] && [ -s "$WORK/loop.out" ] && break
	sleep 0.1
done
"$PROFCTL" attach "$pid" --funcs 'ad_*' --freq 0 --auto-args --duration 1 \
	-o "$WORK/at.pftrace" 2>"$WORK/at.err"
check_eq "attach: done" "$?" 0
exec 3>&-
check_eq "attach: the enums by name" "$(args_of "$WORK/at.pftrace" ad_enum 1)" \
	'mode="AD_APPEND" flags="AD_F_SYNC|AD_F_TRUNC" retval=7'
check_eq "attach: every call with a described parameter has its values" \
	"$("$PROFCTL" report --dump "$WORK/at.pftrace" | awk '$1 == "slice" && $4 == "ad_ints" { n++ }
		$1 == "args" && $4 == "i=-1" { a++ } END { print (n > 0 && n == a) }')" 1
check "attach: the summary" grep -q '^profctl: auto-args: 18 of' "$WORK/at.err"

# ---- a module loaded later (dlopen): patched at once, values from profd's answer on
# The thread in dlopen does not wait for profd: its first calls carry no
# values; the flusher asks and installs the answer while they run (a call
# every 300 us, 1000 per load, two loads). The summary counts the calls made
# before, read from the agent's figures as each function's values were
# installed: a call in flight at that instant may be counted either way.
HOST="$TARGETS/plugin_host"
PLUGIN="$TARGETS/libprofd_plugin.so"
PLUG_PACE_US=300 "$PROFCTL" run --funcs 'plug_*,run_plugin' --freq 0 --auto-args \
	-o "$WORK/dl.pftrace" -- "$HOST" "$PLUGIN" >"$WORK/dl.out" 2>"$WORK/dl.err"
check_eq "dlopen: the target ran" "$?" 0
check_eq "dlopen: its output is unchanged" "$(cat "$WORK/dl.out")" "$("$HOST" "$PLUGIN")"
# the program's own run_plugin, described at the start, keeps its name after the later queries
check_eq "dlopen: a function described at the start keeps its names after them" \
	"$(args_of "$WORK/dl.pftrace" run_plugin 2 | sed 's/ retval=.*//')" "path=\"$PLUGIN\""
# slices of plug_work and plug_inner, those with values, values not the call's, return values left off
read -r dl_slices dl_with dl_bad dl_noret < <("$PROFCTL" report --dump "$WORK/dl.pftrace" | awk '
	function close_slice() { if (f != "") { n++; if (v != "") { w++; check(v) } } f = "" }
	function check(v,   k, x) {
		k = split(v, a, " "); sub(/^x=/, "", a[1]); x = a[1] + 0
		if (v !~ /^x=[0-9]+( retval=[0-9]+)?$/) { bad++; return }
		if (k == 1) { noret++; return }
		sub(/^retval=/, "", a[2])
		if (a[2] + 0 != 3 * x + (f == "plug_work" ? 3 : 1)) bad++
	}
	$1 == "slice" { close_slice(); if ($4 == "plug_work" || $4 == "plug_inner") f = $4; v = "" }
	$1 == "args" && f != "" { $1 = $2 = $3 = ""; sub(/^ +/, ""); v = $0 }
	END { close_slice(); print n + 0, w + 0, bad + 0, noret + 0 }')
check_eq "dlopen: every call of plug_work and plug_inner is a slice" "$dl_slices" 4000
check "dlopen: most carry their parameter by its name ($dl_with of 4000)" test "$dl_with" -ge 2000
check_eq "dlopen: each value is its call's (x, and 3x+1 or 3x+3 returned)" "$dl_bad" 0
read -r dl_late dl_before < <(sed -nE 's/^profctl: auto-args: ([0-9]+) functions of modules loaded later .* after ~([0-9]+) calls without.*/\1 \2/p' "$WORK/dl.err")
check_eq "dlopen: the summary names the late functions (3 per load)" "${dl_late:-}" 6
dl_without=$((dl_slices - dl_with))
check "dlopen: the calls before ($dl_before) are the slices without values ($dl_without), +-2" \
	test "${dl_before:-0}" -ge $((dl_without - 2)) -a "${dl_before:-0}" -le $((dl_without + 2))

# ---- without --funcs: one line
"$PROFCTL" run --freq 0 --auto-args -o "$WORK/bad.pftrace" -- "$O2" >"$WORK/bad.out" 2>"$WORK/bad.err"
check "no --funcs: refused" test $? -ne 0
check_eq "no --funcs: one line" "$(cat "$WORK/bad.err")" \
	'profctl: --auto-args applies to the functions --funcs instruments: give --funcs'
check "no --funcs: nothing started" test ! -s "$WORK/bad.out" -a ! -e "$WORK/bad.pftrace"
finish

#!/usr/bin/env bash
# The profiler's own cost apart: on a program whose instrumented calls are as
# frequent as they get (tiny_step, a few instructions per call), the samples
# taken in the agent (stubs, trampolines, hooks, its start-up) and on its
# flusher thread are one "profiling overhead" figure in the summary and in
# profctl report, marked so in the trace, and never among the program's
# hottest functions: overhead + the program's samples = all samples.
# (300 ms of calls at 4999 Hz: the trace of a longer run is hundreds of MB.)
set -u
. "$(dirname "$0")/common.bash"
TARGET="$ROOT/$BUILD/tests/targets/tiny_calls"
MARK="[profiling-overhead]"

# every function of libprofagent.so, its static ones too (.symtab), less what
# every ELF has (crt files, libc_nonshared)
nm --defined-only "$ROOT/$BUILD/libprofagent.so" | awk '$2 ~ /^[tTwW]$/ { print $3 }' |
	grep -vE '^(_.*|frame_dummy|(de)?register_tm_clones|pthread_atfork)$' |
	sort -u >"$WORK/agent_names.txt"
check "the agent's function names are known" grep -qx profagent_enter_hook "$WORK/agent_names.txt"

# names in list $1 (one per line) that are the agent's, or libzstd's
agent_names_in() {
	grep -vx '' "$1" | while read -r f; do
		grep -qxF -- "$f" "$WORK/agent_names.txt" && echo "$f"
		case $f in libzstd*) echo "$f" ;; esac
	done
}

"$PROFCTL" run --freq 4999 --funcs 'tiny*' -o "$WORK/t.pftrace" -- "$TARGET" 300 \
	>"$WORK/t.out" 2>"$WORK/t.err"
check "the program ran to its end" grep -q ' calls$' "$WORK/t.out"
"$PROFCTL" report "$WORK/t.pftrace" >"$WORK/report.txt"
"$PROFCTL" report --dump "$WORK/t.pftrace" >"$WORK/dump.txt"

# ---- the summary: one figure, its parts, and the rest is the program's ------------------
OVERHEAD_RE='profiling overhead: ([0-9]+) samples \([0-9.]+ % of ([0-9]+)\) ~ [0-9.]+ m?s: '
OVERHEAD_RE+='hooks ([0-9]+), flusher ([0-9]+), agent ([0-9]+)$'
read -r ovh total hooks flusher agent < <(sed -nE "s/^profctl: $OVERHEAD_RE/\1 \2 \3 \4 \5/p" \
	"$WORK/t.err")
check "summary: the overhead line is there (${ovh:-none})" test -n "${agent:-}"
ovh=${ovh:-0} total=${total:-0} hooks=${hooks:-0} flusher=${flusher:-0} agent=${agent:-0}
check "summary: overhead samples ($ovh), in the hooks ($hooks) and the flusher ($flusher)" \
	test "$ovh" -gt 0 -a "$hooks" -gt 0 -a "$flusher" -gt 0
check_eq "summary: hooks + flusher + agent = overhead" "$((hooks + flusher + agent))" "$ovh"
check_eq "summary: the overhead's share is of all samples" \
	"$total" "$(sed -n 's/.*samples: \([0-9]*\) .*/\1/p' "$WORK/t.err")"
program=$(sed -n "s/.*instrumented call, [0-9]* of the program's \([0-9]*\) samples.*/\1/p" \
	"$WORK/t.err")
check_eq "summary: overhead + the program's samples = all samples" \
	"$((ovh + ${program:-0}))" "$total"
sed -nE 's/^profctl: +[0-9]+ samples  ~ +[0-9.]+ ms  (.*)$/\1/p' "$WORK/t.err" >"$WORK/self.txt"
check "summary: tiny_step is in the self-time list" grep -qx tiny_step "$WORK/self.txt"
check_eq "summary: no function of the agent in the self-time list" \
	"$(agent_names_in "$WORK/self.txt")" ""

# ---- profctl report: the same figure, and hottest functions of the program only ---------
read -r r_ovh r_total r_hooks r_flusher r_agent < <(sed -nE "s/^$OVERHEAD_RE/\1 \2 \3 \4 \5/p" \
	"$WORK/report.txt")
check_eq "report: the overhead figure is the summary's" \
	"${r_ovh:-} ${r_total:-} ${r_hooks:-} ${r_flusher:-} ${r_agent:-}" \
	"$ovh $total $hooks $flusher $agent"
r_program=$(sed -n "s/^hottest sampled functions (the program's own: \([0-9]*\) of .*/\1/p" \
	"$WORK/report.txt")
check_eq "report: overhead + the program's samples = all samples" \
	"$((${r_ovh:-0} + ${r_program:-0}))" "${r_total:-x}"
awk '/^hottest sampled functions/ { on = 1; next } on && NF == 0 { on = 0 } on { print $3 }' \
	"$WORK/report.txt" >"$WORK/hottest.txt"
check "report: the hottest functions are listed" test -s "$WORK/hottest.txt"
check_eq "report: no function of the agent or libzstd among the hottest" \
	"$(agent_names_in "$WORK/hottest.txt")" ""
check_eq "report: no profagent_ name among the hottest" \
	"$(grep -c profagent_ "$WORK/hottest.txt")" 0

# ---- the trace keeps the overhead samples, marked -----------------------------------------
flusher_tid=$(awk '$1 == "thread" && $4 == "profd-flusher" { print $3 }' "$WORK/dump.txt")
check "trace: the flusher is a thread of its own (${flusher_tid:-none})" test -n "$flusher_tid"
check_eq "trace: the marked samples are the overhead counted" \
	"$(grep -c "^sample [0-9]* [0-9]* \[profiling-overhead\];" "$WORK/dump.txt")" "$ovh"
check_eq "trace: every sample of the flusher thread is marked as its" \
	"$(awk -v t="${flusher_tid:-x}" -v want="$MARK;flusher;" \
		'$1 == "sample" && $2 == t && index($4, want) != 1' "$WORK/dump.txt" | wc -l)" 0
# an unmarked sample with a frame of the agent would be overhead counted as the program's
awk '$1 == "sample" && index($4, "[profiling-overhead];") != 1 { print $4 }' "$WORK/dump.txt" |
	tr ';' '\n' | sort -u >"$WORK/program_frames.txt"
check_eq "trace: no sample of the program has a frame of the agent" \
	"$(agent_names_in "$WORK/program_frames.txt")" ""

# ---- without the agent there is none -------------------------------------------------------
"$PROFCTL" run --freq 4999 -o "$WORK/plain.pftrace" -- "$TARGET" 100 >/dev/null 2>"$WORK/plain.err"
check_eq "sampling only: no overhead line in the summary" \
	"$(grep -c 'profiling overhead' "$WORK/plain.err")" 0
check "sampling only: the report counts none" \
	grep -q '^profiling overhead: 0 samples' <("$PROFCTL" report "$WORK/plain.pftrace")
finish

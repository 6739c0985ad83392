#!/usr/bin/env bash
# Scheduler states (daemon/sched): a program whose threads sleep in nap(),
# block on a contended mutex in lock_wait(), hold it in hold_lock() and spin
# in spin(), profiled with the BPF probe. Read back with profctl report
# --dump (the reader applies trace processor's thread_state rules):
# Sleeping matches the sleeps, the blocked wait is off-CPU inside its slice
# and woken by the thread that released the lock, the spinner runs, each
# slice's on + off-CPU is its duration. Then the privacy and privilege
# rules: a second user served by root's profd sees no other task's identity;
# a second user's own profd cannot load BPF, says why and records the rest.
set -u
. "$(dirname "$0")/common.bash"
TARGET="$ROOT/$BUILD/tests/targets/sched_target"
FUNCS='nap,hold_lock,lock_wait,spin,deep'
HIDDEN_TID=4194304 # PERFETTO_SCHED_HIDDEN_TID

"$PROFCTL" run --funcs "$FUNCS" --trace-compression none -o "$WORK/s.pftrace" -- "$TARGET" \
	>"$WORK/out.txt" 2>"$WORK/err.txt"
check "the program ran as it does alone" test "$(grep -c ' tid=' "$WORK/out.txt")" -eq 4
if grep -q "no scheduler states" "$WORK/err.txt"; then
	# as root on a kernel with BTF the probe must load: anything else is a failure
	if [ "$(id -u)" -eq 0 ] && [ -r /sys/kernel/btf/vmlinux ]; then
		check "root loads the scheduler probe" false
		grep 'no scheduler states' "$WORK/err.txt"
	else
		skip "no BPF here: $(grep 'no scheduler states' "$WORK/err.txt")"
	fi
	finish
	exit $?
fi
check "the summary counts the scheduler events" \
	grep -qE "scheduler: [1-9][0-9]* switches, [1-9][0-9]* wakeups \(0 lost" "$WORK/err.txt"
"$PROFCTL" report --dump "$WORK/s.pftrace" >"$WORK/dump.txt"
"$PROFCTL" report "$WORK/s.pftrace" >"$WORK/report.txt"
check_eq "the reader finds no problem" "$(grep -c '^problem' "$WORK/dump.txt")" 0
check "the trace names the kernel (trace processor decodes prev_state by its version)" \
	grep -q "kernel $(uname -r)" "$WORK/report.txt"

role() { awk -v r="$1" -v f="$2" '$1 == r { for (i = 2; i <= NF; i++) { split($i, kv, "=");
	if (kv[1] == f) print kv[2] } }' "$WORK/out.txt"; }
napper=$(role napper tid) holder=$(role holder tid) waiter=$(role waiter tid)
spinner=$(role spinner tid)
# a thread's time in one state, inside [from, to) (ns; whole trace without bounds)
state_ns() { awk -v t="$1" -v s="$2" -v a="${3:-0}" -v b="${4:-0}" '$1 == "state" && $2 == t &&
	$3 == s { lo = $4; hi = $4 + $5; if (b > 0) { if (lo < a) lo = a; if (hi > b) hi = b }
	if (hi > lo) n += hi - lo } END { printf "%.0f\n", n }' "$WORK/dump.txt"; }
within() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { d = a - b; if (d < 0) d = -d;
	exit !(b > 0 && d <= b * p / 100) }'; }

asked=$(role napper asked)
sleeping=$(state_ns "$napper" Sleeping)
check "the napper sleeps as long as its naps asked (${sleeping} ns of ${asked}, within 5 %)" \
	within "$sleeping" "$asked" 5
naps=$(awk -v t="$napper" '$1 == "slice" && $2 == t && $4 == "nap"' "$WORK/dump.txt" | wc -l)
check_eq "ten nap slices" "$naps" 10

read -r w_ts w_dur < <(awk -v t="$waiter" '$1 == "slice" && $2 == t && $4 == "lock_wait" {
	print $5, $6 }' "$WORK/dump.txt")
read -r w_on w_off < <(awk -v t="$waiter" -v ts="${w_ts:-0}" '$1 == "offcpu" && $2 == t &&
	$3 == ts { print $4, $5 }' "$WORK/dump.txt")
check "lock_wait is off-CPU for most of its ${w_dur:-?} ns (${w_off:-none} off)" \
	awk -v off="${w_off:-0}" -v d="${w_dur:-1}" 'BEGIN { exit !(off >= d * 0.9) }'
blocked=$(state_ns "$waiter" Sleeping "${w_ts:-0}" $(( ${w_ts:-0} + ${w_dur:-0} )))
# the slice also holds the wait for a CPU once woken, which a busy machine makes long
runnable=$(state_ns "$waiter" Runnable "${w_ts:-0}" $(( ${w_ts:-0} + ${w_dur:-0} )))
check "trace processor's view agrees: it sleeps in the slice (${blocked} ns; ${runnable} ns runnable)" \
	awk -v n="$blocked" -v r="$runnable" -v d="${w_dur:-1}" 'BEGIN { exit !(n >= (d - r) * 0.85) }'
wakers=$(awk -v t="$waiter" -v a="${w_ts:-0}" -v b=$(( ${w_ts:-0} + ${w_dur:-0} )) \
	'$1 == "state" && $2 == t && $3 == "Runnable" && $4 >= a && $4 <= b { print $6 }' \
	"$WORK/dump.txt" | sort -u | tr '\n' ' ')
check "the thread that released the lock woke it (holder $holder; wakers: $wakers)" \
	grep -qw "$holder" <<<"$wakers"

read -r s_ts s_dur < <(awk -v t="$spinner" '$1 == "slice" && $2 == t && $4 == "spin" {
	print $5, $6 }' "$WORK/dump.txt")
s_end=$(( ${s_ts:-0} + ${s_dur:-0} ))
running=$(state_ns "$spinner" Running "${s_ts:-0}" "$s_end")
waiting=$(( $(state_ns "$spinner" Runnable "${s_ts:-0}" "$s_end") +
	$(state_ns "$spinner" Preempted "${s_ts:-0}" "$s_end") ))
blocked=$(( $(state_ns "$spinner" Sleeping "${s_ts:-0}" "$s_end") +
	$(state_ns "$spinner" Uninterruptible "${s_ts:-0}" "$s_end") ))
s_on=$(awk -v t="$spinner" -v ts="${s_ts:-0}" '$1 == "offcpu" && $2 == t && $3 == ts { print $4 }' \
	"$WORK/dump.txt")
s_on=${s_on:-${s_dur:-0}} # no offcpu line: never switched out
check "spin's Running time by trace processor's rules is its on-CPU time by profd's clock ($running vs $s_on ns)" \
	within "$running" "$s_on" 2
check "the spinner never blocks in spin ($blocked ns of ${s_dur:-?} asleep)" \
	awk -v n="$blocked" -v d="${s_dur:-1}" 'BEGIN { exit !(n <= d * 0.01) }'
check "Running + Runnable cover spin ($((running + waiting)) of ${s_dur:-?} ns)" \
	awk -v n="$((running + waiting))" -v d="${s_dur:-1}" 'BEGIN { exit !(n >= d * 0.99) }'

# every split slice: on + off = its duration within 1 %; runnable <= off
bad=$(awk '$1 == "slice" { d[$2 " " $5] = $6 } $1 == "offcpu" { k = $2 " " $3;
	if (!(k in d) || $4 + $5 < d[k] * 0.99 || $4 + $5 > d[k] * 1.01 || $6 > $5) n++; m++ }
	END { print (m ? n + 0 : "none") }' "$WORK/dump.txt")
check_eq "each split slice's on + off-CPU is its duration" "$bad" 0
check "report shows the functions' off-CPU time" grep -q "off-CPU" "$WORK/report.txt"
# deep() sleeps at the bottom of 3 nested calls of itself: each call's off-CPU time counts
# in its function's sum, as its duration counts in the exact total (on-CPU = total - off-CPU)
read -r d_calls d_total d_off < <(awk '$1 == "total" && $2 == 0 && $3 == "deep" { print $4, $7, $13 }' \
	"$WORK/dump.txt")
check_eq "deep: 9 calls (3 levels, 3 times)" "${d_calls:-none}" 9
check "deep's off-CPU time is summed as its total is ($d_off of $d_total ns)" \
	awk -v o="${d_off:-0}" -v t="${d_total:-0}" 'BEGIN { exit !(t > 0 && o <= t && o >= t * 0.9) }'
check "report shows the threads' states with their wakers" \
	grep -qE "^ +$waiter .*$holder:" "$WORK/report.txt"

# --sched off: no probe, no events, the rest as before
"$PROFCTL" run --funcs "$FUNCS" --sched off -o "$WORK/off.pftrace" -- "$TARGET" \
	>/dev/null 2>"$WORK/off.err"
check_eq "--sched off writes no scheduler event" \
	"$("$PROFCTL" report --dump "$WORK/off.pftrace" | grep -c '^sched ')" 0
check "--sched off still records the calls" grep -q "calls: 22 made, 22 recorded" "$WORK/off.err"
check "--sched off says nothing about scheduler states" \
	test "$(grep -c 'scheduler' "$WORK/off.err")" -eq 0

# ---- a second user -------------------------------------------------------------------
USER_NAME=profd-test
if [ "$(id -u)" -eq 0 ] && command -v useradd >/dev/null; then
	id "$USER_NAME" >/dev/null 2>&1 || useradd -M -s /bin/sh "$USER_NAME" 2>/dev/null
fi
if ! id "$USER_NAME" >/dev/null 2>&1; then
	skip "no second user to run as"
	finish
	exit $?
fi
chmod o+rwx "$WORK"
as_user() { su "$USER_NAME" -s /bin/sh -c "TMPDIR=/tmp $*"; }

# served by root's profd: scheduler states, but no other task's identity
SOCK="$WORK/profd.sock"
"$ROOT/$BUILD/profd" --socket "$SOCK" 2>"$WORK/profd.log" &
profd_pid=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
chmod o+rw "$SOCK"
as_user "PROFD_SOCKET='$SOCK' '$PROFCTL' run --funcs '$FUNCS' -o '$WORK/u.pftrace' -- '$TARGET'" \
	>"$WORK/u.out" 2>"$WORK/u.err"
kill "$profd_pid"
wait "$profd_pid"
check "root's profd follows the second user's program" grep -q "scheduler: [1-9]" "$WORK/u.err"
check "the summary says other users' tasks were hidden" grep -q "another task" "$WORK/u.err"
"$PROFCTL" report --dump "$WORK/u.pftrace" >"$WORK/u.dump"
target_pid=$(awk '$1 == "process" { print $2; exit }' "$WORK/u.dump")
ours=$(awk -v p="$target_pid" '$1 == "thread" && $2 == p { printf "%s ", $3 }' "$WORK/u.dump")
leaked=$(awk -v ours=" $ours" -v h="$HIDDEN_TID" '$1 == "sched" { for (i = 5; i <= 6; i++)
	{ t = $i; if (t != 0 && t < h && index(ours, " " t " ") == 0) n++ }
	t = $8; if (t != 0 && t < h && index(ours, " " t " ") == 0) n++ } END { print n + 0 }' \
	"$WORK/u.dump")
check_eq "no pid of another process reaches the second user" "$leaked" 0
check "other tasks appear as placeholders" \
	awk -v h="$HIDDEN_TID" '$1 == "sched" && $8 >= h { f = 1 } END { exit !f }' "$WORK/u.dump"
u_waiter=$(awk '$1 == "waiter" { sub("tid=", "", $2); print $2 }' "$WORK/u.out")
u_holder=$(awk '$1 == "holder" { sub("tid=", "", $2); print $2 }' "$WORK/u.out")
u_wakers=$(awk -v t="$u_waiter" '$1 == "state" && $2 == t && $3 == "Runnable" { print $6 }' \
	"$WORK/u.dump" | sort -u | tr '\n' ' ')
check "its own threads keep their names: the holder woke the waiter ($u_holder in: $u_wakers)" \
	grep -qw "${u_holder:-none}" <<<"$u_wakers"

# the second user's own profd: no BPF for it; it says why and records the rest
as_user "'$PROFCTL' run --funcs '$FUNCS' -o '$WORK/p.pftrace' -- '$TARGET'" \
	>/dev/null 2>"$WORK/p.err"
check "an unprivileged profd says why there are no scheduler states, in one line" \
	test "$(grep -c 'no scheduler states: .*not permitted' "$WORK/p.err")" -eq 1
check "... and records the calls" grep -q "calls: 22 made, 22 recorded" "$WORK/p.err"
check_eq "... with no scheduler event in its trace" \
	"$("$PROFCTL" report --dump "$WORK/p.pftrace" | grep -c '^sched ')" 0

# the service's capabilities (systemd/profd.service.in) are enough without root, and
# CAP_BPF is the one that makes the difference
caps=$(sed -n 's/^AmbientCapabilities=//p' "$ROOT/systemd/profd.service.in" |
	tr 'A-Z ' 'a-z\n' | sed -n 's/^cap_/+/p' | paste -sd, -)
with_caps() { # caps, socket: root's client profiles through a profd of the second user
	local sock=$1 c=$2 pid
	setpriv --reuid "$USER_NAME" --regid "$USER_NAME" --clear-groups --inh-caps "$c" \
		--ambient-caps "$c" "$ROOT/$BUILD/profd" --socket "$sock" 2>/dev/null &
	pid=$!
	for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
	PROFD_SOCKET="$sock" "$PROFCTL" run --funcs "$FUNCS" -o "$WORK/c.pftrace" -- "$TARGET" \
		2>&1 >/dev/null | grep 'sched'
	kill "$pid"
	wait "$pid"
}
if command -v setpriv >/dev/null && [ -n "$caps" ]; then
	check "the unit's capabilities ($caps) load the probe without root" \
		grep -q "scheduler: [1-9]" <<<"$(with_caps "$WORK/c1.sock" "$caps")"
	check "without CAP_BPF the probe is refused, and said so" \
		grep -q "no scheduler states: .*CAP_BPF" \
		<<<"$(with_caps "$WORK/c2.sock" "$(sed 's/,*+bpf//' <<<"$caps")")"
else
	skip "no setpriv: the unit's capabilities are not tried"
fi
finish

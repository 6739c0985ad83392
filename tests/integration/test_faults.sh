#!/usr/bin/env bash
# Faults mid-session, one behaviour per check: the target SIGKILLed, profd
# SIGKILLed (the agent notices, unpatches itself and leaves, the program runs
# on unchanged), profctl SIGKILLed (the target runs on, the trace is
# finalized), the output disk full, and eight sessions at once.
set -u
. "$(dirname "$0")/common.bash"
TARGET="$ROOT/$BUILD/tests/targets/fault_target"
trap 'umount "$WORK/small" 2>/dev/null; rm -rf "$WORK"' EXIT
unset PROFD_SOCKET

wait_for_file() {
	for _ in $(seq 200); do [ -e "$1" ] && return 0; sleep 0.05; done
	return 1
}

child_named() { # parent PID, command name
	pgrep -P "$1" -x "$2" | head -n 1
}

alive() { # PID: running, not a zombie waiting for a parent that is gone
	local state
	state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)
	[ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

within() { # tenths of a second, command: true once the command succeeds in time
	local n=$1
	shift
	for _ in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
	"$@"
}

gone() { # PID
	! alive "$1"
}

# The first 8 bytes of a function, in the live process or in the file.
live_bytes() { # PID, symbol
	local off base
	off=$(nm "$TARGET" | awk -v s="$2" '$3 == s {print $1}')
	base=$(awk -v exe="$TARGET" '$6 == exe && $3 == "00000000" {print $1; exit}' \
		"/proc/$1/maps")
	dd if="/proc/$1/mem" bs=1 skip=$((0x${base%-*} + 0x$off)) count=8 2>/dev/null |
		od -An -tx1 | tr -d ' \n'
}
file_bytes() { # symbol: through the executable segment's file offset
	local addr seg
	addr=$((0x$(nm "$TARGET" | awk -v s="$1" '$3 == s {print $1}')))
	seg=$(readelf -lW "$TARGET" |
		awk '$1 == "LOAD" && ($7 ~ /E/ || $8 == "E") {print $2, $3; exit}')
	dd if="$TARGET" bs=1 skip=$((addr - ${seg#* } + ${seg% *})) count=8 2>/dev/null |
		od -An -tx1 | tr -d ' \n'
}

flusher_running() { # PID
	grep -qx profd-flusher /proc/"$1"/task/*/comm 2>/dev/null
}

agent_left() { # PID: no agent thread, the original code back
	! flusher_running "$1" && [ "$(live_bytes "$1" ft_leaf)" = "$original" ]
}

sockets_of() { # PID
	find "/proc/$1/fd" -lname 'socket:*' 2>/dev/null | wc -l
}

slices() { # dump file, function
	awk -v f="$2" '$1 == "slice" && $4 == f' "$1" | wc -l
}

problems() { # dump file
	grep -c '^problem' "$1"
}

# Starts a profiled run in the background: $run_pid is profctl, $target_pid
# the program and $daemon_pid its private profd once the program runs.
start_run() { # name, fault_target arguments...
	local name=$1
	shift
	rm -f "$WORK/$name.ready"
	"$PROFCTL" run --funcs 'ft_*' -o "$WORK/$name.pftrace" -- "$TARGET" "$@" \
		"$WORK/$name.ready" >"$WORK/$name.out" 2>"$WORK/$name.err" &
	run_pid=$!
	wait_for_file "$WORK/$name.ready"
	sleep 0.3 # recording for a while
	target_pid=$(child_named "$run_pid" fault_target)
	daemon_pid=$(child_named "$run_pid" profd)
}

# ---- 1. the target SIGKILLed mid-session ----
start_run kill 2 2000 100 2000
kill -KILL "$target_pid"
wait "$run_pid"
check_eq "target SIGKILLed: profctl exits as a shell would (128 + 9)" "$?" 137
check "target SIGKILLed: profctl says the program was killed" \
	grep -qiE 'killed|SIGKILL|signal 9' "$WORK/kill.err"
check "target SIGKILLed: the summary says its last figures are missing" grep -qE \
	"warning: the agent of PID $target_pid stopped before its goodbye, after [0-9]+ events" \
	"$WORK/kill.err"
"$PROFCTL" report "$WORK/kill.pftrace" >"$WORK/kill.report" 2>&1
check_eq "target SIGKILLed: the trace loads" "$?" 0
"$PROFCTL" report --dump "$WORK/kill.pftrace" >"$WORK/kill.dump"
check_eq "target SIGKILLed: the trace is finalized, breaking no rule" \
	"$(problems "$WORK/kill.dump")" 0
work=$(slices "$WORK/kill.dump" ft_work)
check "target SIGKILLed: slices from before the death ($work of 400000 calls)" \
	test "$work" -gt 0 -a "$work" -lt 400000
# nothing lost on the way: every ft_work has its two ft_leaf calls, but for
# the calls the 2 threads were in when they died
leaf=$(awk '$1 == "slice" && $3 == 1 && $4 == "ft_leaf"' "$WORK/kill.dump" | wc -l)
check "target SIGKILLed: every recorded call has its nested calls ($leaf for $work)" \
	test "$leaf" -le $((2 * work)) -a "$leaf" -ge $((2 * work - 4))

# ---- 2. profd SIGKILLed mid-session ----
daemon_killed() {
	local patched
	"$TARGET" 4 600 100 5000 >"$WORK/plain.out"
	original=$(file_bytes ft_leaf)
	start_run daemon 4 600 100 5000
	patched=$(live_bytes "$target_pid" ft_leaf)
	kill -KILL "$daemon_pid"
	within 10 agent_left "$target_pid"
	check "profd SIGKILLed: the code was patched before ($original -> $patched)" \
		test -n "$original" -a "$patched" != "$original"
	check "profd SIGKILLed: within 1 s the agent's thread is gone" \
		eval '! flusher_running "$target_pid"'
	check_eq "profd SIGKILLed: within 1 s the agent put the original code back" \
		"$(live_bytes "$target_pid" ft_leaf)" "$original"
	check_eq "profd SIGKILLed: the agent closed its socket" "$(sockets_of "$target_pid")" 0
	wait "$run_pid"
	# profctl's status: not the program's, since the session failed (issue 30)
	check_eq "profd SIGKILLed: profctl exits non-zero" "$?" 1
	check_eq "profd SIGKILLed: profctl says so in one line" \
		"$(grep -c '^profctl: profd exited during the session' "$WORK/daemon.err")" 1
	check "profd SIGKILLed: the program ran to its end (its last line)" \
		grep -q '^interrupted sleeps 0$' "$WORK/daemon.out"
	check "profd SIGKILLed: the program's output is unchanged (no EINTR, no wrong result)" \
		cmp -s "$WORK/plain.out" "$WORK/daemon.out"
}

# ---- 3. profctl SIGKILLed mid-session ----
# The program is profctl's child, but it is the user's: it runs on, unprofiled.
profctl_killed() {
	mkdir -p "$WORK/priv"
	TMPDIR="$WORK/priv" start_run ctl 4 600 100 5000
	kill -KILL "$run_pid"
	{ wait "$run_pid"; } 2>/dev/null
	check "profctl SIGKILLed: the program runs on" alive "$target_pid"
	check "profctl SIGKILLed: its private profd finalizes the trace and exits" \
		within 50 gone "$daemon_pid"
	check_eq "profctl SIGKILLed: the private socket's directory is gone" \
		"$(find "$WORK/priv" -mindepth 1 | wc -l)" 0
	check "profctl SIGKILLed: the agent leaves (its thread, its patches)" \
		within 20 agent_left "$target_pid"
	check "profctl SIGKILLed: the program ends on its own" within 100 gone "$target_pid"
	check "profctl SIGKILLed: the program's output is unchanged" \
		cmp -s "$WORK/plain.out" "$WORK/ctl.out"
	"$PROFCTL" report --dump "$WORK/ctl.pftrace" >"$WORK/ctl.dump"
	check_eq "profctl SIGKILLed: the trace loads" "$?" 0
	check_eq "profctl SIGKILLed: the trace breaks no rule" "$(problems "$WORK/ctl.dump")" 0
	check "profctl SIGKILLed: the trace holds the slices until then" \
		test "$(slices "$WORK/ctl.dump" ft_work)" -gt 0
}

# Only a private profd, started by profctl for its session, is ours to kill.
if [ -S /run/profd/profd.sock ]; then
	skip "profd and profctl SIGKILLed: a system profd would serve these sessions"
else
	daemon_killed
	profctl_killed
fi

# ---- 4. the output disk full ----
mkdir -p "$WORK/small"
if mount -t tmpfs -o size=256k tmpfs "$WORK/small" 2>/dev/null; then
	"$TARGET" 1 100 1000 0 >"$WORK/full.plain"
	"$PROFCTL" run --funcs 'ft_*' -o "$WORK/small/full.pftrace" -- "$TARGET" 1 100 1000 0 \
		>"$WORK/full.out" 2>"$WORK/full.err"
	check_eq "disk full: the program's exit status is profctl's" "$?" 0
	check "disk full: the program's output is unchanged" \
		cmp -s "$WORK/full.plain" "$WORK/full.out"
	check_eq "disk full: one line names the problem" \
		"$(grep -c 'trace.*No space left on device' "$WORK/full.err")" 1
	"$PROFCTL" report --dump "$WORK/small/full.pftrace" >"$WORK/full.dump"
	check_eq "disk full: what fits loads" "$?" 0
	check_eq "disk full: what fits is a valid trace (whole packets only)" \
		"$(problems "$WORK/full.dump")" 0
	grep '^problem' "$WORK/full.dump" | head -n 3
	size=$(stat -c %s "$WORK/small/full.pftrace")
	check_eq "disk full: the summary says where the trace was cut" \
		"$(grep -c "trace was cut at $size bytes, [0-9.]* s into the session" "$WORK/full.err")" 1
	check_eq "disk full: the reader knows it was cut, and where" \
		"$(grep '^cut ' "$WORK/full.dump")" "cut $size"
	"$PROFCTL" report "$WORK/small/full.pftrace" >"$WORK/full.report" 2>&1
	check_eq "disk full: report accepts it" "$?" 0
	check_eq "disk full: report says so in one line" \
		"$(grep -c "ends after $size bytes without profd's closing packet" "$WORK/full.report")" 1
	"$PROFCTL" run --funcs 'ft_*' -o "$WORK/whole.pftrace" -- "$TARGET" 1 100 1000 0 >/dev/null 2>&1
	check_eq "a trace written to its end has no cut line" \
		"$("$PROFCTL" report --dump "$WORK/whole.pftrace" | grep -c '^cut ')" 0
	umount "$WORK/small"
else
	skip "disk full: cannot mount a small tmpfs (needs root)"
fi

# ---- 5. eight sessions at once, in one profd ----
"$ROOT/$BUILD/profd" --foreground --socket "$WORK/shared.sock" 2>"$WORK/shared.log" &
shared_pid=$!
for _ in $(seq 100); do [ -S "$WORK/shared.sock" ] && break; sleep 0.05; done
export PROFD_SOCKET="$WORK/shared.sock"
pids=()
for i in 1 2 3 4 5 6 7 8; do
	"$PROFCTL" run --funcs 'ft_*' -o "$WORK/par$i.pftrace" -- "$TARGET" 2 50 100 1000 \
		>"$WORK/par$i.out" 2>"$WORK/par$i.err" &
	pids+=($!)
done
ok_runs=0
ok_traces=0
for i in 1 2 3 4 5 6 7 8; do
	wait "${pids[$((i - 1))]}" && ok_runs=$((ok_runs + 1))
	"$PROFCTL" report --dump "$WORK/par$i.pftrace" >"$WORK/par$i.dump" 2>/dev/null
	dropped=$(sed -nE 's/^profctl: calls: [0-9]+ made, [0-9]+ recorded, ([0-9]+) dropped.*/\1/p' \
		"$WORK/par$i.err")
	recorded=$(($(grep -c '^slice' "$WORK/par$i.dump") + ${dropped:-0}))
	calls=$(awk '$2 == "calls" {n += $3} END {print n}' "$WORK/par$i.out")
	if [ "$recorded" -eq "${calls:-0}" ] && [ "$(problems "$WORK/par$i.dump")" -eq 0 ]; then
		ok_traces=$((ok_traces + 1))
	else
		echo "session $i: $recorded slices + dropped of ${calls:-?} calls," \
			"$(problems "$WORK/par$i.dump") problems"
	fi
done
kill -TERM "$shared_pid"
wait "$shared_pid"
unset PROFD_SOCKET
check_eq "eight sessions at once: one profd served them all" \
	"$(grep -c '^profd: session [0-9]* ended' "$WORK/shared.log")" 8
check_eq "eight sessions at once: every one ends cleanly" "$ok_runs" 8
check_eq "eight sessions at once: each trace holds its own calls (slices + dropped = calls)" \
	"$ok_traces" 8
check_eq "eight sessions at once: the program's call count" \
	"$(awk '$2 == "calls" {n += $3} END {print n}' "$WORK/par1.out")" 35000

finish

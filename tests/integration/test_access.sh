#!/usr/bin/env bash
# profd serving several users: profctl status lists the sessions (another
# user's only by id and owner), profctl stop ends one (owner or root only),
# a second user cannot profile root's process through profd, an impostor
# cannot pose as a session's agent, and hostile bytes on the socket get a
# clear refusal without disturbing the running session.
set -u
. "$(dirname "$0")/common.bash"
TARGET="$ROOT/$BUILD/tests/targets/attach_target"
CLIENT="$ROOT/$BUILD/tests/targets/raw_frame_client"
SOCK="$WORK/profd.sock"
USER_NAME=profd-test

"$ROOT/$BUILD/profd" --socket "$SOCK" 2>"$WORK/profd.log" &
profd_pid=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
check "profd listens on its socket" test -S "$SOCK"
export PROFD_SOCKET="$SOCK"
# peers that stop halfway through a frame, or never send one: dropped after 10 s
"$CLIENT" "$SOCK" "01000000ff000000abcd" 14000 >"$WORK/halfframe.txt" &
halfframe=$!
"$CLIENT" "$SOCK" "" 14000 >"$WORK/silent.txt" &
silent=$!

# 64 KiB of event buffers for 8 threads calling flat out: the agent drops (and
# counts) most calls, and the trace stays small enough to read back at the end
"$PROFCTL" run --funcs 'at_*' --buffer-size 64K -o "$WORK/run.pftrace" -- "$TARGET" "$WORK/stop" \
	>"$WORK/run.out" 2>"$WORK/run.err" &
run_pid=$!
for _ in $(seq 100); do grep -q running "$WORK/run.out" 2>/dev/null && break; sleep 0.05; done
target_pid=$(pgrep -f "^$TARGET $WORK/stop\$" | head -n 1)
sleep 1.2 # one events/s window
"$PROFCTL" status >"$WORK/status.txt" 2>&1
check "status lists the session with its target and functions" \
	grep -qE "^ +1 +run +$target_pid +attach_target +3 " "$WORK/status.txt"
check "status shows the session's output" grep -q "run.pftrace" "$WORK/status.txt"
events=$(awk '$1 == "1" { print $6 }' "$WORK/status.txt")
check "status counts events (${events:-none})" test "${events:-0}" -gt 0
rate=$(awk '$1 == "1" { print $7 }' "$WORK/status.txt")
check "status gives the events of the last second (${rate:-none}/s of ${events:-0})" \
	test "${rate:-0}" -gt 0 -a "${rate:-0}" -le "${events:-0}"
# the agent drops (its buffers are tiny), status counts it as it goes
status_drops=$(awk '$1 == "1" { print $8 }' "$WORK/status.txt")

varint() { # number: its protobuf varint, as hex
	local v=$1 out=""
	while [ "$v" -ge 128 ]; do
		out+=$(printf '%02x' $(((v & 127) | 128)))
		v=$((v >> 7))
	done
	printf '%s%02x' "$out" "$v"
}
as_user() { su "$USER_NAME" -s /bin/sh -c "PROFD_SOCKET='$SOCK' TMPDIR=/tmp $*"; }
if [ "$(id -u)" -eq 0 ] && command -v useradd >/dev/null; then
	id "$USER_NAME" >/dev/null 2>&1 || useradd -M -s /bin/sh "$USER_NAME" 2>/dev/null
fi
if id "$USER_NAME" >/dev/null 2>&1; then
	chmod o+rx "$WORK" && chmod o+rw "$SOCK"
	as_user "'$PROFCTL' status" >"$WORK/status_user.txt" 2>&1
	check "another user sees the session only by id and owner" \
		grep -q "(a session of uid 0)" "$WORK/status_user.txt"
	check_eq "another user sees none of its details" \
		"$(grep -c 'attach_target\|run.pftrace' "$WORK/status_user.txt")" 0
	as_user "'$PROFCTL' stop 1" >"$WORK/stop_user.txt" 2>&1
	check "another user cannot stop it" test $? -ne 0
	check_eq "the refusal is one clear line" "$(cat "$WORK/stop_user.txt")" \
		"profctl: no session 1 of yours"
	as_user "'$PROFCTL' attach $target_pid --funcs 'at_*' -o /tmp/profd-test-$$.pftrace" \
		>"$WORK/attach_user.txt" 2>&1
	check "another user cannot attach to root's process" test $? -ne 0
	check "the attach refusal says why" \
		grep -qiE "belongs to uid 0|not permitted" "$WORK/attach_user.txt"
	rm -f "/tmp/profd-test-$$.pftrace"
	# profd's own check, without profctl's ptrace in front of it: a raw RunRequest
	# { attach_pid } with an output file, as the second user
	uid2=$(id -u "$USER_NAME")
	raw_attach() { # pid: what profd answers the second user
		local req len
		req="38$(varint "$1")"
		len=$(printf '%08x' $((${#req} / 2)) | sed 's/\(..\)\(..\)\(..\)\(..\)/\4\3\2\1/')
		as_user "PASS_FILE=/tmp/profd-test-$$.raw '$CLIENT' '$SOCK' 01000000$len$req"
		rm -f "/tmp/profd-test-$$.raw"
	}
	pid_of_user_sleep() { # USER: the sleep su started for USER, once it runs (10 s at most)
		local pid=
		for _ in $(seq 200); do
			pid=$(pgrep -u "$1" -x sleep | head -n 1)
			[ -n "$pid" ] && break
			sleep 0.05
		done
		echo "$pid"
	}
	# "reply 7 " then the ErrorReply's bytes: its length byte may print as a letter
	refusal=$(raw_attach "$target_pid")
	check "profd refuses the second user root's process ($refusal)" eval '[[ "$refusal" == \
		"reply 7 "?"PID $target_pid belongs to uid 0, not to uid $uid2 (needs CAP_SYS_PTRACE)" ]]'
	su nobody -s /bin/sh -c 'exec sleep 30' 2>/dev/null &
	nobody_sleep=$!
	nobody_pid=$(pid_of_user_sleep nobody)
	refusal=$(raw_attach "$nobody_pid")
	check "profd refuses the second user a third user's process ($refusal)" eval '[[ "$refusal" == \
		"reply 7 "?"PID $nobody_pid belongs to uid $(id -u nobody), not to uid $uid2 "* ]]'
	{ kill "$nobody_pid"; wait "$nobody_sleep"; } 2>/dev/null
	as_user "exec sleep 30" 2>/dev/null &
	own_sleep=$!
	own_pid=$(pid_of_user_sleep "$USER_NAME")
	check "profd lets the second user profile its own process" \
		eval '[[ "$(raw_attach "$own_pid")" == "reply 2 "* ]]'
	{ kill "$own_pid"; wait "$own_sleep"; } 2>/dev/null
else
	skip "no second user could be created: the cross-user checks did not run"
fi

# an impostor presenting the session's real token from another process
token=$(tr '\0' '\n' <"/proc/$target_pid/environ" | sed -n 's/^PROFD_AGENT_TOKEN=//p')
hex_token=$(printf '%s' "$token" | od -An -tx1 | tr -d ' \n')
hello="0a20${hex_token}1001" # AgentHello { agent_token, pid = 1 }
len=$(printf '%08x' $((${#hello} / 2)) | sed 's/\(..\)\(..\)\(..\)\(..\)/\4\3\2\1/')
check "the agent's token was found" test ${#token} -eq 32
check_eq "an impostor agent is refused" "$("$CLIENT" "$SOCK" "10000000${len}${hello}")" \
	"reply 7 no session for this agent"
# the same, to a session no agent has joined yet (an attach before its
# injection): only the pid check stands between the impostor and the session
sleep 30 &
lone=$!
lone_req="38$(varint "$lone")"
lone_len=$(printf '%08x' $((${#lone_req} / 2)) | sed 's/\(..\)\(..\)\(..\)\(..\)/\4\3\2\1/')
HOLD_MS=3000 PASS_FILE="$WORK/lone.pftrace" "$CLIENT" "$SOCK" "01000000${lone_len}${lone_req}" \
	>"$WORK/lone.txt" &
lone_client=$!
for _ in $(seq 50); do grep -qE '[0-9a-f]{32}$' "$WORK/lone.txt" && break; sleep 0.05; done
lone_token=$(grep -oE '[0-9a-f]{32}$' "$WORK/lone.txt")
check "an attach session without its agent started (token ${lone_token:-none})" test -n "$lone_token"
hello="0a20$(printf '%s' "$lone_token" | od -An -tx1 | tr -d ' \n')10$(varint "$lone")"
len=$(printf '%08x' $((${#hello} / 2)) | sed 's/\(..\)\(..\)\(..\)\(..\)/\4\3\2\1/')
check_eq "an impostor is refused where the agent has not come yet" \
	"$("$CLIENT" "$SOCK" "10000000${len}${hello}")" "reply 7 no session for this agent"
{ kill "$lone"; wait "$lone_client" "$lone"; } 2>/dev/null
# hostile bytes: an unknown frame type, a length over the bound, a stall mid-frame
check "an unknown frame type gets no answer but a hang-up" \
	test "$("$CLIENT" "$SOCK" "7f00000000000000")" = closed
check "a frame longer than the bound: hang-up" \
	test "$("$CLIENT" "$SOCK" "0100000000ffffff")" = closed
"$CLIENT" "$SOCK" "01000000ff000000abcd" 3000 >"$WORK/stall.txt" &
stall=$!
sleep 0.5
"$PROFCTL" status >"$WORK/status2.txt" 2>&1
check "a client stalled mid-frame does not block profd" grep -q "attach_target" "$WORK/status2.txt"
wait "$stall"

wait "$halfframe" "$silent"
check_eq "a peer stalled mid-frame is disconnected" "$(cat "$WORK/halfframe.txt")" closed
check "profd says why it dropped the stalled peer" \
	grep -q "stalled in the middle of a frame for 1[0-9] s: disconnected" "$WORK/profd.log"
check_eq "a peer that never sends a frame is disconnected" "$(cat "$WORK/silent.txt")" closed
check "profd says why it dropped the silent peer" \
	grep -q "sent no frame for 1[0-9] s: disconnected" "$WORK/profd.log"

"$PROFCTL" stop 1 >"$WORK/stop.txt" 2>&1
check "the owner (root) stops the session" grep -q "session 1 stopped" "$WORK/stop.txt"
"$PROFCTL" report "$WORK/run.pftrace" >"$WORK/report.txt" 2>&1
check "the stopped session's trace is finalized and loads" grep -q "at_outer" "$WORK/report.txt"
check "the target still runs after the stop" kill -0 "$target_pid"
touch "$WORK/stop"
wait "$run_pid"
check_eq "profctl run ends with the target's status" "$?" 0
check "profctl run prints the summary with the stop" grep -q "stopped by profctl stop" "$WORK/run.err"
final_drops=$(sed -n 's/^profctl: calls: [0-9]* made, [0-9]* recorded, \([0-9]*\) dropped.*/\1/p' "$WORK/run.err")
check "status's drop count (${status_drops:-none}) is the summary's so far (${final_drops:-none})" \
	test "${status_drops:-0}" -gt 0 -a "${status_drops:-0}" -le "${final_drops:-0}"
check "the target's output is complete" grep -q "wrong results 0" "$WORK/run.out"
"$PROFCTL" status >"$WORK/status3.txt" 2>&1
check "status: no session left" grep -q "0 sessions" "$WORK/status3.txt"
kill "$profd_pid"
wait "$profd_pid"
check_eq "profd exits 0 on SIGTERM" "$?" 0
finish

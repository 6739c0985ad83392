#!/usr/bin/env bash
# profctl top (issue 30) against a target whose functions run at known rates
# (tests/targets/top_target.c counts its own calls):
# - --batch: one plain table per interval; calls/s within 10 % of the
#   target's own counts per second; sorted by total time (top_wait first);
#   --sort calls/avg/self and --totals change the table as they should;
# - quitting detaches: every patched byte back, the target counting on;
# - -o keeps the trace; --session watches a running session (its owner only);
# - bad input: a glob matching nothing, no such process, no rights, a PID
#   that exits meanwhile (the last table stays, a line says so), profd dying
#   (top detaches all the same): one line each;
# - interactively in tmux (skipped without it): the table, the sort keys,
#   r for totals, a resize, q and Ctrl-C give the terminal back as it was,
#   TERM=dumb draws without escapes.
set -u
. "$(dirname "$0")/common.bash"
TARGET="$TARGETS/top_target"
TMUX_SOCK="$WORK/tmux-0.sock" # in $WORK: gone with it
USER_NAME=profd-test
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	command -v tmux >/dev/null && tmux -S "$TMUX_SOCK" kill-server 2>/dev/null
	wait 2>/dev/null
	rm -rf "$WORK"
}
trap cleanup EXIT

start_target() { # name: runs $WORK/NAME.counts until $WORK/NAME.stop exists; sets tpid
	"$TARGET" "$WORK/$1.counts" "$WORK/$1.stop" >"$WORK/$1.out" 2>&1 &
	tpid=$!
	pids+=("$tpid")
	wait_for "$WORK/$1.out" running
}
# The target's own calls of FUNC (top_fast ...) per second between two lines of its counts file.
own_rate() { # func, line before, line after
	local col
	case $1 in top_fast) col=2 ;; top_slow) col=3 ;; top_wait) col=4 ;; top_outer) col=5 ;;
		top_inner) col=6 ;; esac
	awk -v c="$col" -v a="$2" -v b="$3" 'BEGIN { split(a, x, " "); split(b, y, " ")
		printf "%.1f", (y[c] - x[c]) * 1e9 / (y[1] - x[1]) }'
}
# The mean of FUNC's calls/s over the tables of a --batch output, the first left out.
top_rate() { # file, func
	awk -v f="$2" '/^profctl top /{ t++ } t > 1 && $NF == f && $1 ~ /^[0-9.]+$/ { s += $1; n++ }
		END { if (n) printf "%.1f", s / n }' "$1"
}
# The first function of each table, one per line.
first_rows() {
	awk '/^profctl top /{ t++; seen = 0 } t && !seen && $1 ~ /^[0-9.]+$/ { print $NF; seen = 1 }' "$1"
}
within_10pct() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(b > 0 && a > 0.9 * b && a < 1.1 * b) }'; }

start_target main
pid=$tpid
exe=$(readlink "/proc/$pid/exe")
before_fast=$(symbol_bytes "$pid" "$exe" top_fast)
before_outer=$(symbol_bytes "$pid" "$exe" top_outer)

# ---- --batch: rates, order --------------------------------------------------------------
c0=$(cat "$WORK/main.counts")
timeout 60 "$PROFCTL" top "$pid" --funcs 'top_*' --batch -n 4 >"$WORK/batch.out" 2>"$WORK/batch.err"
check_eq "top --batch -n 4: exits 0" "$?" 0
c1=$(cat "$WORK/main.counts")
check_eq "top --batch -n 4: four tables" "$(grep -c '^profctl top ' "$WORK/batch.out")" 4
check_eq "top --batch: nothing on stderr" "$(cat "$WORK/batch.err")" ""
check "top --batch: the columns" grep -q \
	'calls/s *total/s *self/s *avg *p50~ *p99~ *max .*function$' "$WORK/batch.out"
for f in top_fast top_slow top_wait top_outer top_inner; do
	want=$(own_rate "$f" "$c0" "$c1")
	got=$(top_rate "$WORK/batch.out" "$f")
	check "top --batch: $f at $got calls/s, the target counted $want/s (within 10 %)" \
		within_10pct "$got" "$want"
done
check_eq "top --batch: sorted by total time, top_wait first in every table" \
	"$(first_rows "$WORK/batch.out" | sort -u)" top_wait
check "top --batch: top_wait is off-CPU (asleep)" \
	awk '$NF == "top_wait" && $(NF - 1) ~ /%$/ { if ($(NF - 1) + 0 < 80) exit 1; n++ } END { exit !n }' \
	"$WORK/batch.out"
cat "$WORK/batch.out" | tail -8

for sort in "calls top_fast" "avg top_wait" "p99 top_wait"; do
	set -- $sort
	timeout 60 "$PROFCTL" top "$pid" --funcs 'top_*' --batch -n 1 --interval 0.5 --sort "$1" \
		>"$WORK/sort-$1.out" 2>&1
	check_eq "top --sort $1: $2 first" "$(first_rows "$WORK/sort-$1.out")" "$2"
done
timeout 60 "$PROFCTL" top "$pid" --funcs 'top_*' --batch -n 1 --interval 0.5 --sort self \
	>"$WORK/sort-self.out" 2>&1
check_eq "top --sort self: top_outer (which only calls top_inner) last" \
	"$(awk '$1 ~ /^[0-9.]+$/ { last = $NF } END { print last }' "$WORK/sort-self.out")" top_outer
timeout 60 "$PROFCTL" top "$pid" --funcs 'top_*' --batch -n 1 --totals >"$WORK/totals.out" 2>&1
check "top --totals: session totals" grep -q '^totals over' "$WORK/totals.out"
check "top --totals: counts, not rates" grep -q '^ *calls  *total  *self ' "$WORK/totals.out"

# ---- quitting detaches ---------------------------------------------------------------------
check_eq "after top: top_fast's bytes are back" "$(symbol_bytes "$pid" "$exe" top_fast)" "$before_fast"
check_eq "after top: top_outer's bytes are back" "$(symbol_bytes "$pid" "$exe" top_outer)" \
	"$before_outer"
n0=$(awk '{ print $2 }' "$WORK/main.counts")
sleep 0.5
check "after top: the target counts on" test "$(awk '{ print $2 }' "$WORK/main.counts")" -gt "$n0"

# ---- -o keeps the trace ------------------------------------------------------------------
timeout 60 "$PROFCTL" top "$pid" --funcs 'top_*' --batch -n 1 -o "$WORK/top.pftrace" \
	>"$WORK/o.out" 2>"$WORK/o.err"
check_eq "top -o: exits 0" "$?" 0
check "top -o: says where the trace is" grep -q "trace: $WORK/top.pftrace" "$WORK/o.err"
"$PROFCTL" report --dump "$WORK/top.pftrace" >"$WORK/top.dump" 2>&1
check "top -o: the trace holds top_fast's slices" grep -q '^slice [0-9]* [0-9]* top_fast ' \
	"$WORK/top.dump"

# ---- bad input: one line each ----------------------------------------------------------------
one_line() { # description, expected exit, regex, profctl args...
	local what=$1 code=$2 re=$3
	shift 3
	timeout 60 "$PROFCTL" "$@" >"$WORK/bad.out" 2>"$WORK/bad.err"
	check_eq "$what: exit $code" "$?" "$code"
	check_eq "$what: one line" "$(wc -l <"$WORK/bad.err")" 1
	check "$what: says so ($(cat "$WORK/bad.err"))" grep -qE -- "$re" "$WORK/bad.err"
}
one_line "a glob matching nothing" 1 "matched no function in PID $pid" \
	top "$pid" --funcs 'no_such_fn_*' --batch -n 1
one_line "no such process" 1 "no such process" top 4194300 --funcs 'top_*' --batch
one_line "not a PID" 2 "not a process id" top 12x --funcs 'top_*' --batch
one_line "a bad sort key" 2 "--sort must be" top "$pid" --funcs 'top_*' --sort speed
check_eq "main target still fine" "$(symbol_bytes "$pid" "$exe" top_fast)" "$before_fast"

start_target dying
dying=$tpid
(sleep 2.5; kill "$dying") &
timeout 60 "$PROFCTL" top "$dying" --funcs 'top_*' --batch -n 30 >"$WORK/dying.out" 2>"$WORK/dying.err"
check_eq "a PID that exits: top ends, exit 0" "$?" 0
check_eq "a PID that exits: one line says so" "$(cat "$WORK/dying.err")" "profctl: PID $dying exited"
check "a PID that exits: its last table stays, marked" \
	grep -q "^PID $dying exited: these are its last figures" "$WORK/dying.out"
check "a PID that exits: the last table has its functions" \
	bash -c "tac '$WORK/dying.out' | sed '/^profctl top /q' | grep -q ' top_fast$'"

# profd dying mid-session (top's private one, killed): one line, exit 1, bytes back
timeout 60 "$PROFCTL" top "$pid" --funcs 'top_*' --batch -n 30 >"$WORK/gone.out" 2>"$WORK/gone.err" &
top_pid=$!
profd_pid=
for _ in $(seq 200); do
	profd_pid=$(pgrep -P "$(pgrep -P "$top_pid" -x profctl)" -x profd) && break
	sleep 0.05
done
wait_for "$WORK/gone.out" '^profctl top '
kill -9 $profd_pid
wait "$top_pid"
check_eq "profd gone mid-top: exit 1" "$?" 1
check_eq "profd gone mid-top: one line says so" "$(cat "$WORK/gone.err")" \
	"profctl: profd exited during the session: detached; the trace may be cut short"
check_eq "profd gone mid-top: top_fast's bytes are back" "$(symbol_bytes "$pid" "$exe" top_fast)" \
	"$before_fast"

if [ "$(id -u)" -eq 0 ] && command -v useradd >/dev/null; then
	id "$USER_NAME" >/dev/null 2>&1 || useradd -M -s /bin/sh "$USER_NAME" 2>/dev/null
fi
if [ "$(id -u)" -eq 0 ] && id "$USER_NAME" >/dev/null 2>&1; then
	su "$USER_NAME" -s /bin/sh -c "TMPDIR=/tmp '$PROFCTL' top $pid --funcs 'top_*' --batch -n 1" \
		>"$WORK/rights.out" 2>"$WORK/rights.err"
	check_eq "no rights: exit 1" "$?" 1
	check_eq "no rights: one line" "$(wc -l <"$WORK/rights.err")" 1
	check "no rights: says whose it is ($(cat "$WORK/rights.err"))" \
		grep -q "belongs to uid 0" "$WORK/rights.err"
else
	skip "no rights: needs root and a user to be ($USER_NAME)"
fi

# ---- --session: a running session, watched ---------------------------------------------------
SOCK="$WORK/profd.sock"
"$ROOT/$BUILD/profd" --foreground --socket "$SOCK" 2>"$WORK/profd.log" &
pids+=($!)
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
PROFD_SOCKET="$SOCK" "$PROFCTL" attach "$pid" --funcs 'top_*' -v -o "$WORK/watched.pftrace" \
	2>"$WORK/watched.err" &
attach_pid=$!
pids+=("$attach_pid")
wait_for "$WORK/watched.err" "attached to PID"
id=$(PROFD_SOCKET="$SOCK" "$PROFCTL" status | awk -v p="$pid" '$3 == p { print $1 }')
c0=$(cat "$WORK/main.counts")
PROFD_SOCKET="$SOCK" timeout 60 "$PROFCTL" top --session "$id" --batch -n 3 \
	>"$WORK/session.out" 2>"$WORK/session.err"
check_eq "top --session ID: exits 0" "$?" 0
c1=$(cat "$WORK/main.counts")
want=$(own_rate top_fast "$c0" "$c1")
got=$(top_rate "$WORK/session.out" top_fast)
check "top --session: top_fast at $got calls/s, the target counted $want/s" within_10pct "$got" "$want"
check "top --session: the session records on" kill -0 "$attach_pid"
if [ "$(id -u)" -eq 0 ] && id "$USER_NAME" >/dev/null 2>&1; then
	chmod o+rx "$WORK" && chmod o+rw "$SOCK"
	su "$USER_NAME" -s /bin/sh -c "PROFD_SOCKET='$SOCK' '$PROFCTL' top --session $id --batch -n 1" \
		>"$WORK/theirs.out" 2>"$WORK/theirs.err"
	check_eq "another user's top --session: refused" "$?" 1
	check_eq "another user's top --session: one line, as for a missing one" \
		"$(cat "$WORK/theirs.err")" "profctl: profd refused: no session $id of yours"
	check_eq "another user's top --session: no figures" "$(cat "$WORK/theirs.out")" ""
fi
# hostile bytes: a LiveRequest that does not unpack, one naming no session, a whole one
CLIENT="$ROOT/$BUILD/tests/targets/raw_frame_client"
check_eq "a malformed live request: refused" "$("$CLIENT" "$SOCK" 1800000002000000ffff)" \
	"reply 7 malformed live request"
check_eq "a live request for no session: refused" \
	"$("$CLIENT" "$SOCK" 180000000400000008bf843d)" "reply 7 no session 999999 of yours"
check "a live request for session $id: answered with the figures" \
	bash -c "'$CLIENT' '$SOCK' 1800000002000000$(printf '08%02x' "$id") | grep -q '^reply 25 '"
PROFD_SOCKET="$SOCK" timeout 60 "$PROFCTL" top --session "$id" --batch -n 60 \
	>"$WORK/ending.out" 2>"$WORK/ending.err" &
watch_pid=$!
wait_for "$WORK/ending.out" '^profctl top '
kill -INT "$attach_pid"
wait "$attach_pid"
check_eq "the watched attach session ends cleanly" "$?" 0
wait "$watch_pid"
check_eq "top --session of a session that ends: exit 0" "$?" 0
check_eq "top --session of a session that ends: one line says so" "$(cat "$WORK/ending.err")" \
	"profctl: session $id ended"

# ---- interactive, in tmux ----------------------------------------------------------------------
if ! command -v tmux >/dev/null; then
	skip "interactive top: no tmux (tools/install-deps.sh installs it)"
	finish
	exit
fi
tm() { tmux -S "$TMUX_SOCK" "$@"; }
screen() { tm capture-pane -p -t top; }
# The first function under the column names on the screen.
screen_first() { screen | awk '/calls\/?s? +total/ { on = 1; next } on && NF { print $NF; exit }'; }
wait_screen() { # extended regex over the whole screen, up to 15 s
	for _ in $(seq 150); do
		screen | grep -qE "$1" && return 0
		sleep 0.1
	done
	return 1
}
wait_first() { # function expected first, up to 15 s
	for _ in $(seq 150); do
		[ "$(screen_first)" = "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
runs=0
run_in_tmux() { # TERM value, then the command line typed into the pane
	tm kill-server 2>/dev/null
	runs=$((runs + 1)) # a server of its own: the last one may still be on its way out
	TMUX_SOCK="$WORK/tmux-$runs.sock"
	rm -f "$WORK/tty.before" "$WORK/tty.after" "$WORK/tty.rc"
	tm new-session -d -s top -x 110 -y 24 "env TERM=$1 PS1='$ ' bash --norc --noprofile"
	# one argument: tmux takes a word ending in ';' for the end of its own command
	tm send-keys -t top "stty -g >'$WORK/tty.before'; $2; echo \$? >'$WORK/tty.rc'; stty -g >'$WORK/tty.after'" Enter
}
wait_rc() { for _ in $(seq 150); do [ -s "$WORK/tty.after" ] && return 0; sleep 0.1; done; return 1; }

TOP_CMD="'$PROFCTL' top $pid --funcs 'top_*'"
run_in_tmux xterm "$TOP_CMD"
check "tmux: the table comes" wait_screen 'top_wait'
check "tmux: sorted by total, top_wait first" wait_first top_wait
check_eq "tmux: on the alternate screen" "$(tm display -p -t top '#{alternate_on}')" 1
tm send-keys -t top c
check "tmux: c sorts by calls (top_fast first)" wait_first top_fast
tm send-keys -t top a
check "tmux: a sorts by avg (top_wait first)" wait_first top_wait
tm send-keys -t top r
check "tmux: r shows session totals" wait_screen '^totals over'
tm send-keys -t top r
check "tmux: r again, rates" wait_screen '^per second over'
tm resize-window -t top -x 60 -y 12
check "tmux: after a resize the table is redrawn" wait_screen '^ +calls/s +total/s +avg +p99~ function'
check_eq "tmux: every line fits 60 columns" \
	"$(screen | awk 'length($0) > 60' | wc -l)" 0
check "tmux: the rows fit 12 lines" test "$(screen | grep -c ' top_')" -le 8
tm send-keys -t top q
check "tmux: q quits" wait_rc
check_eq "tmux: q: exit 0" "$(cat "$WORK/tty.rc")" 0
check_eq "tmux: q: the terminal's settings are back" "$(cat "$WORK/tty.after")" \
	"$(cat "$WORK/tty.before")"
check_eq "tmux: q: off the alternate screen" "$(tm display -p -t top '#{alternate_on}')" 0
check_eq "tmux: q detached: top_fast's bytes are back" "$(symbol_bytes "$pid" "$exe" top_fast)" \
	"$before_fast"

run_in_tmux xterm "$TOP_CMD"
check "tmux: the table comes again" wait_first top_wait
tm send-keys -t top C-c
check "tmux: Ctrl-C quits" wait_rc
check_eq "tmux: Ctrl-C: exit 0" "$(cat "$WORK/tty.rc")" 0
check_eq "tmux: Ctrl-C: the terminal's settings are back" "$(cat "$WORK/tty.after")" \
	"$(cat "$WORK/tty.before")"
check_eq "tmux: Ctrl-C detached: top_outer's bytes are back" \
	"$(symbol_bytes "$pid" "$exe" top_outer)" "$before_outer"

# TERM=dumb: tables one after the other, no escape sequence from top
run_in_tmux dumb "script -qfec \"$TOP_CMD\" '$WORK/dumb.raw'"
check "tmux: TERM=dumb: the table comes" wait_screen 'top_wait'
sleep 1.5
tm send-keys -t top q
check "tmux: TERM=dumb: q quits" wait_rc
check "tmux: TERM=dumb: two tables or more were drawn" \
	test "$(grep -c '^per second over' "$WORK/dumb.raw")" -ge 2
check_eq "tmux: TERM=dumb: no escape sequences" "$(grep -c $'\033' "$WORK/dumb.raw")" 0

touch "$WORK/main.stop"
wait "$pid"
check_eq "the target ran to its end, every result right" "$?" 0
finish

#!/usr/bin/env bash
# profd as a system service, checked without a service manager:
# systemd-socket-activate hands profd its listening socket the way
# profd.socket does; a python3 datagram socket stands in for $NOTIFY_SOCKET
# (READY/STATUS/STOPPING); SIGTERM in the middle of a session still
# finalizes its trace. Then `profd --foreground` by hand, and `make install`:
# the layout, the units (systemd-analyze verify), and an installed profctl
# that finds its agent and its private profd.
set -u
. "$(dirname "$0")/common.bash"
DEMO="$ROOT/$BUILD/examples/demo"
LOOPER="$ROOT/$BUILD/tests/targets/attach_target" # loops until a file exists
PROFD="$ROOT/$BUILD/profd"
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$WORK"' EXIT

"$DEMO" >"$WORK/plain.out"

# ---- socket activation ---------------------------------------------------------
activate() { # socket path, log file: starts an activated profd, sets profd_pid
	# it passes on only the environment -E names
	systemd-socket-activate -l "$1" -E NOTIFY_SOCKET="$notify_socket" "$PROFD" --foreground \
		>/dev/null 2>"$2" &
	profd_pid=$! # systemd-socket-activate execs profd in place: same pid
	pids+=("$profd_pid")
	wait_for "$2" '^Listening on'
}

notify_socket=
if ! command -v python3 >/dev/null; then
	skip "no python3: READY/STATUS/STOPPING not observed"
else
	python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a") as out:
    while True:
        print(s.recv(4096).decode(errors="replace").replace("\n", "|"), file=out, flush=True)
' "$WORK/notify.sock" "$WORK/notify.log" &
	pids+=("$!")
	for _ in $(seq 100); do [ -S "$WORK/notify.sock" ] && break; sleep 0.05; done
	notify_socket="$WORK/notify.sock"
fi

if ! command -v systemd-socket-activate >/dev/null; then
	skip "no systemd-socket-activate (Debian: package systemd): socket activation not tested"
else
	activate "$WORK/profd.sock" "$WORK/profd.log"
	check "profd starts only on the first connection" \
		test "$(grep -c 'socket activation' "$WORK/profd.log")" -eq 0
	PROFD_SOCKET="$WORK/profd.sock" "$PROFCTL" run --funcs 'fib*' -o "$WORK/a.pftrace" -- \
		"$DEMO" >"$WORK/a.out" 2>"$WORK/a.err"
	check_eq "a session through the activated socket succeeds" "$?" 0
	check "the program's output is unchanged" cmp -s "$WORK/plain.out" "$WORK/a.out"
	check "profd took its socket from LISTEN_FDS" \
		grep -qx "profd: socket activation: fd 3 ($WORK/profd.sock)" "$WORK/profd.log"
	check "the activated profd ran the session" grep -q '^profd: session 1 ended' "$WORK/profd.log"
	"$PROFCTL" report --dump "$WORK/a.pftrace" >"$WORK/a.dump"
	check_eq "the trace loads" "$?" 0
	check "the trace has fib slices" grep -q '^slice [0-9]* [0-9]* fib ' "$WORK/a.dump"
	check_eq "the trace breaks no rule" "$(grep -c '^problem' "$WORK/a.dump")" 0

	# SIGTERM while a session records: its trace is finalized, profd exits 0
	PROFD_SOCKET="$WORK/profd.sock" "$PROFCTL" run --funcs 'at_outer' --freq 99 \
		-o "$WORK/b.pftrace" -- "$LOOPER" "$WORK/stop" >"$WORK/b.out" 2>"$WORK/b.err" &
	profctl_pid=$!
	pids+=("$profctl_pid")
	wait_for "$WORK/b.out" running
	sleep 0.3
	kill -TERM "$profd_pid"
	wait "$profd_pid"
	check_eq "SIGTERM: profd exits 0" "$?" 0
	check "SIGTERM: profd says what it finalizes" \
		grep -q '^profd: stopping on SIGTERM: finalizing 1 trace$' "$WORK/profd.log"
	touch "$WORK/stop"
	wait "$profctl_pid"
	check_eq "SIGTERM: the program still exits normally" "$?" 0
	check "SIGTERM: profctl reports the trace" grep -q "^profctl: trace: $WORK/b.pftrace" "$WORK/b.err"
	"$PROFCTL" report --dump "$WORK/b.pftrace" >"$WORK/b.dump"
	check_eq "SIGTERM: the finalized trace loads" "$?" 0
	check "SIGTERM: the trace has the slices recorded so far" \
		grep -q '^slice [0-9]* 0 at_outer ' "$WORK/b.dump"
	check_eq "one line per event in the log" \
		"$(grep -vcE '^(profd: |Listening on|Communication attempt|Execing)' "$WORK/profd.log")" 0

	if [ -n "$notify_socket" ]; then
		wait_for "$WORK/notify.log" STOPPING
		check_eq "READY=1 first, once listening" "$(head -n 1 "$WORK/notify.log")" "READY=1"
		check_eq "STATUS follows the sessions" \
			"$(grep -o '^STATUS=[0-9]* sessions\?$' "$WORK/notify.log" | tr '\n' ' ')" \
			"STATUS=0 sessions STATUS=1 session STATUS=0 sessions STATUS=1 session "
		check "STOPPING=1 on SIGTERM" \
			grep -qx 'STOPPING=1|STATUS=finalizing 1 trace' "$WORK/notify.log"
	fi

	# fd 3 that is no listening socket: refused, not served
	LISTEN_FDS=1 sh -c 'LISTEN_PID=$$ exec "$1" --foreground' sh "$PROFD" 3</dev/null \
		2>"$WORK/bad.log"
	check_eq "a bad LISTEN_FDS socket: profd exits 1" "$?" 1
	check "a bad LISTEN_FDS socket: said why" grep -q 'is not a listening AF_UNIX' "$WORK/bad.log"
fi

# ---- by hand: profd --foreground --------------------------------------------------
JOURNAL_STREAM=0:0 "$PROFD" --foreground --socket "$WORK/fg.sock" 2>"$WORK/fg.log" &
fg_pid=$!
pids+=("$fg_pid")
wait_for "$WORK/fg.log" '^profd: listening on'
check "--foreground: logs to stderr (not the journal: JOURNAL_STREAM is not stderr)" \
	grep -qx "profd: listening on $WORK/fg.sock" "$WORK/fg.log"
if getent group profd >/dev/null; then want_mode="660 profd"; else want_mode="600 root"; fi
check_eq "--foreground: the socket's mode is profd.socket's (group profd, or root only)" \
	"$(stat -c '%a %G' "$WORK/fg.sock")" "$want_mode"
PROFD_SOCKET="$WORK/fg.sock" "$PROFCTL" run --funcs 'fib*' -o "$WORK/fg.pftrace" -- "$DEMO" \
	>/dev/null 2>"$WORK/fg.err"
check_eq "--foreground: a session succeeds" "$?" 0
kill -TERM "$fg_pid"
wait "$fg_pid"
check_eq "--foreground: SIGTERM exits 0" "$?" 0
: >"$WORK/journal.log"
JOURNAL_STREAM=$(stat -c %d:%i "$WORK/journal.log") "$PROFD" --foreground \
	--socket "$WORK/j.sock" 2>>"$WORK/journal.log" &
j_pid=$!
pids+=("$j_pid")
wait_for "$WORK/journal.log" 'listening on'
kill -TERM "$j_pid"
wait "$j_pid"
check "stderr is the journal: lines carry a syslog priority" \
	grep -qx "<6>listening on $WORK/j.sock" "$WORK/journal.log"
check_eq "stderr is the journal: no line without one" \
	"$(grep -cv '^<[0-7]>' "$WORK/journal.log")" 0

# ---- make install ---------------------------------------------------------------------
# -o: install what is built, never rebuild it here
make_install() { # make arguments...
	make -C "$ROOT" -s --no-print-directory BUILD="$BUILD" -o "$BUILD/profd" \
		-o "$BUILD/profctl" -o "$BUILD/libprofagent.so" -o "$BUILD/libprofagent.so-gdb.py" \
		install "$@" >"$WORK/install.log" 2>&1
}
R="$WORK/root"
make_install DESTDIR="$R" PREFIX=/usr
check_eq "make install DESTDIR PREFIX=/usr succeeds" "$?" 0
for f in lib/profd/profd lib/profd/profctl; do
	check "installed executable: /usr/$f" test -x "$R/usr/$f"
done
for f in lib/profd/libprofagent.so lib/profd/libprofagent.so-gdb.py lib/systemd/system/profd.socket \
	lib/systemd/system/profd.service lib/sysusers.d/profd.conf; do
	check "installed: /usr/$f" test -f "$R/usr/$f"
done
check_eq "bin/profctl links to the installed one" "$(readlink "$R/usr/bin/profctl")" \
	/usr/lib/profd/profctl
check_eq "sbin/profd links to the installed one" "$(readlink "$R/usr/sbin/profd")" /usr/lib/profd/profd
check_eq "the service runs the installed profd" \
	"$(grep '^ExecStart=' "$R/usr/lib/systemd/system/profd.service")" \
	"ExecStart=/usr/lib/profd/profd --foreground"
check_eq "no placeholder is left in the units" \
	"$(cat "$R"/usr/lib/systemd/system/* | grep -cE '@[A-Z]+@')" 0
make_install DESTDIR="$WORK/root2"
check "PREFIX defaults to /usr/local" \
	grep -qx 'ExecStart=/usr/local/lib/profd/profd --foreground' \
	"$WORK/root2/usr/local/lib/systemd/system/profd.service"

if ! command -v systemd-analyze >/dev/null; then
	skip "no systemd-analyze: the installed units are not verified"
else
	# verify resolves the units' dependencies (sysinit.target, ...) inside --root
	V="$WORK/verify-root"
	cp -a "$R" "$V"
	cp -n /usr/lib/systemd/system/*.target /usr/lib/systemd/system/*.slice \
		"$V/usr/lib/systemd/system/" 2>/dev/null
	systemd-analyze verify --root="$V" "$V/usr/lib/systemd/system/profd.socket" \
		"$V/usr/lib/systemd/system/profd.service" >"$WORK/verify.log" 2>&1
	check_eq "systemd-analyze verify accepts the units" "$?" 0
	check_eq "systemd-analyze verify has nothing to say" "$(cat "$WORK/verify.log")" ""
fi

# profctl finds libprofagent.so and profd next to itself, through a symlink too
mkdir -p "$WORK/bin"
ln -s "$R/usr/lib/profd/profctl" "$WORK/bin/profctl"
if [ -S /run/profd/profd.sock ]; then
	skip "a system profd listens: the installed private daemon is not exercised"
else
	env -u PROFD_SOCKET "$WORK/bin/profctl" run --funcs 'fib*' -o "$WORK/i.pftrace" -- "$DEMO" \
		>"$WORK/i.out" 2>"$WORK/i.err"
	check_eq "installed profctl (via a symlink) runs a session" "$?" 0
	check "installed profctl instruments with the installed agent" \
		grep -q '^profctl: functions: 1 matched, 1 instrumented' "$WORK/i.err"
fi

finish

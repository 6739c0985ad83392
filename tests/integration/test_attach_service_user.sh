#!/usr/bin/env bash
# `sudo profctl attach PID` on a service as an admin meets it: a
# request/response server (tests/targets/rr_server) running as nobody while a
# client keeps it busy, attached by root through the system socket (socket
# activation, root-only socket as when no `profd` group exists) and through a
# private profd; then the same server inside its own mount namespace (tmpfs
# over /tmp, the build directory hidden) and its own PID namespace. Each
# time: calls recorded, the client sees no error, and after the detach
# /proc/PID/fd is what it was. And the refusals: a client without ptrace
# rights, a forged agent link, a target speaking on its link with another
# session's token.
set -u
. "$(dirname "$0")/common.bash"
PROFD="$ROOT/$BUILD/profd"
CLIENT="$ROOT/$BUILD/tests/targets/raw_frame_client"
OTHER_USER=daemon # holds no ptrace rights over nobody's processes
pids=()
cleanup() {
	touch "$WORK/stop"
	for p in "${pids[@]}"; do { kill -9 "$p" && wait "$p"; } 2>/dev/null; done
	rm -rf "$WORK" "${BIN_DIR:-}"
}
trap cleanup EXIT

if [ "$(id -u)" -ne 0 ]; then
	skip "not root: attaching to another user's service needs root"
	finish
	exit
fi
for tool in setpriv unshare; do
	if ! command -v "$tool" >/dev/null; then
		skip "no $tool (util-linux): cannot start the service as nobody"
		finish
		exit
	fi
done
# nobody must run the server, and the build directory will be hidden from it
BIN_DIR=$(mktemp -d /var/tmp/profd-rr.XXXXXX)
chmod 755 "$BIN_DIR"
cp "$ROOT/$BUILD/tests/targets/rr_server" "$BIN_DIR/"
AS_NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)

# start_server MODE: plain | mnt | pidns; sets srv (host pid) and port
start_server() {
	# the build directory first: a clone under /tmp is gone once /tmp is covered
	local hide="mount -t tmpfs none '$ROOT/$BUILD' && mount -t tmpfs none /tmp &&"
	: >"$WORK/srv.out"
	case $1 in
	plain) "${AS_NOBODY[@]}" "$BIN_DIR/rr_server" serve >"$WORK/srv.out" 2>&1 & ;;
	mnt) unshare -m sh -c "$hide exec ${AS_NOBODY[*]} '$BIN_DIR/rr_server' serve" \
		>"$WORK/srv.out" 2>&1 & ;;
	pidns) unshare -p -f -m --mount-proc sh -c \
		"$hide exec ${AS_NOBODY[*]} '$BIN_DIR/rr_server' serve" >"$WORK/srv.out" 2>&1 & ;;
	esac
	launcher=$!
	pids+=("$launcher")
	srv=$launcher
	wait_for "$WORK/srv.out" '^port ' || return 1
	port=$(awk '/^port/ { print $2 }' "$WORK/srv.out")
	[ "$1" = pidns ] && srv=$(pgrep -P "$srv" | head -n 1)
	pids+=("$srv")
	[ "$(stat -c %U "/proc/$srv")" = nobody ]
}

stop_server() { # quietly: no "Killed" from the shell
	{ kill -9 "$srv" "$launcher"; wait "$launcher"; } 2>/dev/null
}

# attach_case NAME SOCKET: root attaches through SOCKET ("": a private profd)
attach_case() {
	local name=$1 sock=$2 client_pid rc
	rm -f "$WORK/stop"
	"$BIN_DIR/rr_server" client "$port" "$WORK/stop" >"$WORK/$name.client" 2>&1 &
	client_pid=$!
	sleep 0.3
	ls "/proc/$srv/fd" | sort >"$WORK/$name.fd.before"
	PROFD_SOCKET=$sock "$PROFCTL" attach "$srv" --funcs 'rr_*' --duration 2 -v \
		-o "$WORK/$name.pftrace" >"$WORK/$name.out" 2>"$WORK/$name.err"
	rc=$?
	ls "/proc/$srv/task" >"$WORK/$name.tasks"
	ls "/proc/$srv/fd" | sort >"$WORK/$name.fd.after"
	touch "$WORK/stop"
	wait "$client_pid"
	check_eq "$name: attach succeeds ($(grep -m1 'cannot' "$WORK/$name.err"))" "$rc" 0
	check "$name: the client saw no error" grep -q ' errors 0 ' "$WORK/$name.client"
	"$PROFCTL" report --dump "$WORK/$name.pftrace" >"$WORK/$name.dump" 2>/dev/null
	check "$name: calls recorded" grep -q '^slice [0-9]* [0-9]* rr_handle ' "$WORK/$name.dump"
	check "$name: /proc/PID/fd after the detach is as before" \
		cmp -s "$WORK/$name.fd.before" "$WORK/$name.fd.after"
	check "$name: the agent's thread is gone" \
		test "$(cat /proc/"$srv"/task/*/comm | grep -c profd-flusher)" -eq 0
}

# ---- the system daemon, socket-activated, its socket root's only ---------------
if ! command -v systemd-socket-activate >/dev/null; then
	skip "no systemd-socket-activate (Debian: package systemd): system socket not tested"
else
	SYS_SOCK="$WORK/sys/profd.sock"
	mkdir -m 0700 "$WORK/sys"
	systemd-socket-activate -l "$SYS_SOCK" "$PROFD" --foreground >/dev/null \
		2>"$WORK/sys.log" &
	pids+=("$!")
	wait_for "$WORK/sys.log" '^Listening on'
	chmod 0600 "$SYS_SOCK"
	if start_server plain; then
		attach_case system "$SYS_SOCK"
		check "system: the activated profd ran it" grep -q 'session 1 ended' "$WORK/sys.log"
		stop_server
	else
		check "the server starts as nobody" false
	fi
fi

# ---- a private profd (the cases below use one too) -------------------------------
if [ -S /run/profd/profd.sock ]; then
	skip "a system profd listens on /run/profd/profd.sock: no private profd would start"
	finish
	exit
fi
if start_server plain; then
	cat "/proc/$srv/maps" >"$WORK/maps.before"
	attach_case private ""
	check "private: the agent stays mapped from a memfd, no file path of ours" \
		grep -q '/memfd:libprofagent.so' "/proc/$srv/maps"
	check "private: nothing of the build directory is mapped" \
		test "$(grep -c "$ROOT/$BUILD" "/proc/$srv/maps")" -eq 0
	# a second attach reuses the agent already there
	attach_case again ""
	stop_server
fi

# ---- its own mount namespace: tmpfs over /tmp, the build directory hidden -------
if ! unshare -m true 2>/dev/null; then
	skip "unshare -m not permitted here: mount namespaces not tested"
elif start_server mnt; then
	check "mnt: the target cannot see profctl's agent" \
		test ! -e "/proc/$srv/root$ROOT/$BUILD/libprofagent.so"
	attach_case mnt ""
	stop_server
else
	check "the server starts in its own mount namespace" false
fi

# ---- its own PID namespace ------------------------------------------------------
if ! unshare -p -f -m --mount-proc true 2>/dev/null; then
	skip "unshare -p not permitted here: PID namespaces not tested"
elif start_server pidns; then
	check_eq "pidns: the server is pid 1 in its namespace" \
		"$(awk '/^NSpid/ { print $NF }' "/proc/$srv/status")" 1
	attach_case pidns ""
	check "pidns: the trace's process is the host pid" grep -q "^process $srv " "$WORK/pidns.dump"
	slice_tid=$(awk '$1 == "slice" && $4 == "rr_handle" { print $2; exit }' "$WORK/pidns.dump")
	check "pidns: slices are on host thread ids (${slice_tid:-none})" \
		grep -qx "${slice_tid:-none}" "$WORK/pidns.tasks"
	check "pidns: profd said it translates" grep -q 'in its own PID namespace' "$WORK/pidns.err"
	check "pidns: the trace labels the process with its namespace pid" \
		grep -qx "label $srv pid 1 in its PID namespace" "$WORK/pidns.dump"
	if command -v trace_processor_shell >/dev/null; then
		echo "select a.display_value from process p join args a using (arg_set_id)
			where p.pid = $srv;" >"$WORK/label.sql"
		trace_processor_shell -q "$WORK/label.sql" "$WORK/pidns.pftrace" >"$WORK/label.out" 2>&1
		check "pidns: Perfetto's importer has the label among the process's args" \
			grep -q 'pid 1 in its PID namespace' "$WORK/label.out"
	fi
	stop_server
else
	check "the server starts in its own PID namespace" false
fi

# ---- refusals -------------------------------------------------------------------
# attach_frame PID: a RunRequest frame (hex) attaching to PID, nothing else set
attach_frame() {
	local req len
	req="38$(printf '%s' "$1" | awk '{ v = $1; s = ""; while (v >= 128) { s = s sprintf("%02x", v % 128 + 128); v = int(v / 128) } printf "%s%02x", s, v }')"
	len=$(printf '%08x' $((${#req} / 2)) | sed 's/\(..\)\(..\)\(..\)\(..\)/\4\3\2\1/')
	echo "01000000$len$req"
}

# hostile_hello NAME TOKEN_OF: a hostile target (tests/targets/hostile_link)
# attached by root, its link handed over as profctl does, then speaking on it
# with the token of TOKEN_OF's session ("own": its own); its reply in NAME.out
hostile_hello() {
	local name=$1 h hfd
	"$TARGETS/hostile_link" "$WORK/$name.token" >"$WORK/$name.out" 2>&1 &
	h=$!
	pids+=("$h")
	wait_for "$WORK/$name.out" '^link ' || return 1
	hfd=$(awk '/^link/ { print $2 }' "$WORK/$name.out")
	LINK_FROM="$h:$hfd" HOLD_MS=6000 PASS_FILE="$WORK/$name.pftrace" "$CLIENT" \
		"$WORK/open/profd.sock" "$(attach_frame "$h")" >"$WORK/$name.client" 2>&1 &
	pids+=("$!")
	wait_for "$WORK/$name.client" '^link passed' || return 1
	# the target opens the token file as soon as it exists: it must appear whole (mv)
	if [ "$2" = own ]; then
		grep -o '[0-9a-f]\{32\}' "$WORK/$name.client" | head -n 1 >"$WORK/$name.token.new"
	else
		cp "$2" "$WORK/$name.token.new"
	fi
	mv "$WORK/$name.token.new" "$WORK/$name.token"
	wait "$h"
}

mkdir -p "$WORK/open" "$WORK/other"
"$PROFD" --socket "$WORK/open/profd.sock" 2>"$WORK/open.log" &
pids+=("$!")
for _ in $(seq 100); do [ -S "$WORK/open/profd.sock" ] && break; sleep 0.05; done
chmod 0755 "$WORK" "$WORK/open" && chmod 0666 "$WORK/open/profd.sock" && chmod 0777 "$WORK/other"
if start_server plain; then
	ls "/proc/$srv/fd" | sort >"$WORK/refuse.fd.before"
	if id "$OTHER_USER" >/dev/null 2>&1; then
		setpriv --reuid="$OTHER_USER" --regid="$OTHER_USER" --clear-groups env \
			PROFD_SOCKET="$WORK/open/profd.sock" "$PROFCTL" attach "$srv" --funcs 'rr_*' \
			--duration 1 -o "$WORK/other/t.pftrace" >"$WORK/other.out" 2>"$WORK/other.err"
		check "a client without ptrace rights over the service is refused" \
			test $? -ne 0 -a -n "$(grep -i 'belongs to uid\|not permitted' "$WORK/other.err")"
	else
		skip "no user $OTHER_USER: the refusal of a client without ptrace rights not tested"
	fi
	# root's own session, but the link it hands over is its own socket pair
	THEN_LINK=1 PASS_FILE="$WORK/forged.pftrace" "$CLIENT" "$WORK/open/profd.sock" \
		"$(attach_frame "$srv")" >"$WORK/forged.out" 2>&1
	check "a forged agent link (not the target's socket) is closed" \
		grep -qx 'link closed' "$WORK/forged.out"
	check "profd says why" grep -q "agent link refused: its other end is not the target's" \
		"$WORK/open.log"
	# a target speaking on its own link as its agent: with its session's token it
	# joins; with another live session's it is refused, and that session gets nothing
	sleep 30 &
	other=$!
	pids+=("$other")
	HOLD_MS=15000 PASS_FILE="$WORK/b.pftrace" "$CLIENT" "$WORK/open/profd.sock" \
		"$(attach_frame "$other")" >"$WORK/b.client" 2>&1 &
	pids+=("$!")
	wait_for "$WORK/b.client" '^reply 2 '
	grep -o '[0-9a-f]\{32\}' "$WORK/b.client" | head -n 1 >"$WORK/b.token"
	hostile_hello own own
	check "a target's link with its own session's token: the agent config comes back" \
		grep -q '^hello reply 17 ' "$WORK/own.out"
	hostile_hello stolen "$WORK/b.token"
	check_eq "another session's token was at hand" "$(wc -c <"$WORK/b.token")" 33
	check "a target's link with another session's token is refused" \
		grep -q '^hello reply 7 .*no session for this agent' "$WORK/stolen.out"
	ls "/proc/$srv/fd" | sort >"$WORK/refuse.fd.after"
	check "the refusals left the service untouched" \
		cmp -s "$WORK/refuse.fd.before" "$WORK/refuse.fd.after"
	stop_server
fi

finish

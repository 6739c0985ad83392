#!/usr/bin/env bash
# profctl open: serves one trace once on 127.0.0.1 with the headers
# ui.perfetto.dev needs, fetched here as the UI would (curl with its Origin);
# the CORS preflight, 404/403/405/400 without stopping, a client that leaves
# mid-transfer or sends nothing, xdg-open, Ctrl-C, --timeout, the size hint
# and bad input. Each server runs on a random free port.
set -u
. "$(dirname "$0")/common.bash"
TP_CHECK_EXCLUDE='/(big|got|huge)\.pftrace$' # random bytes in one packet, on purpose

if ! command -v curl >/dev/null; then
	echo "FAIL: curl is missing (tools/install-deps.sh installs it)"
	echo "0 passed, 1 failed"
	exit 1
fi
UI=https://ui.perfetto.dev

varint() { # N -> its protobuf varint bytes, as printf escapes
	local n=$1 out=
	while [ "$n" -ge 128 ]; do
		out+=$(printf '\\x%02x' $(((n & 127) | 128)))
		n=$((n >> 7))
	done
	printf '%s\\x%02x' "$out" "$n"
}

# A trace of one 64 MiB TracePacket: more than the socket buffers hold, so
# writes come back short and a client can leave in the middle.
BIG=$WORK/big.pftrace
len=$(((64 << 20) - 5))
{ printf "\\x0a$(varint $len)"; head -c $len /dev/urandom; } >"$BIG"

# Starts `profctl open --port P ARGS` on a free random port, in the
# background: sets SRV_PID, SRV_PORT and SRV_LINK (the printed link).
start_open() { # output prefix, args...
	local pre=$1 try i
	shift
	for try in 1 2 3 4 5; do
		SRV_PORT=$((20000 + RANDOM % 40000))
		"$PROFCTL" open --port "$SRV_PORT" "$@" >"$pre.out" 2>"$pre.err" &
		SRV_PID=$!
		for i in $(seq 200); do # until it listens (the link is printed after)
			[ -s "$pre.out" ] && break
			kill -0 "$SRV_PID" 2>/dev/null || break
			sleep 0.05
		done
		SRV_LINK=$(head -n 1 "$pre.out")
		[ -n "$SRV_LINK" ] && return 0
		wait "$SRV_PID"
		grep -q "is in use" "$pre.err" || return 1
	done
	return 1
}

# The exit status of our server SRV_PID; one still running after 30 s is
# killed (then the status says so).
exit_status() {
	local i
	for i in $(seq 600); do
		kill -0 "$SRV_PID" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$SRV_PID" 2>/dev/null && kill "$SRV_PID"
	wait "$SRV_PID"
}

# Sends raw bytes, prints the reply's status line; "closed" follows when
# the server closed the connection (cat saw the end, not its timeout).
raw_request() { # bytes (printf format)
	local out rc
	exec 7<>"/dev/tcp/127.0.0.1/$SRV_PORT"
	# shellcheck disable=SC2059 # the argument is the format
	printf "$1" >&7
	out=$(timeout 20 cat <&7)
	rc=$?
	exec 7<&-
	printf '%s\n' "$out" | head -n 1 | tr -d '\r'
	[ $rc -eq 0 ] && echo closed
}

status_of() { # curl args... -> the HTTP status
	curl -s -o /dev/null -w '%{http_code}' "$@"
}

# ---- the whole exchange with one server ----------------------------------
start_open "$WORK/a" --no-browser -v "$BIG"
check "profctl open starts and prints a link" test -n "$SRV_LINK"
URL=http://127.0.0.1:$SRV_PORT/big.pftrace
check_eq "the link loads the served URL in the UI" "$SRV_LINK" \
	"$UI/#!/?url=$URL&rpc_port=$SRV_PORT"

curl -s -o /dev/null -D "$WORK/pre.h" -X OPTIONS -H "Origin: $UI" \
	-H 'Access-Control-Request-Method: GET' \
	-H 'Access-Control-Request-Private-Network: true' "$URL"
check "the preflight gets 204" grep -q '^HTTP/1.1 204' "$WORK/pre.h"
check "the preflight allows the UI's origin" grep -qi "^access-control-allow-origin: $UI" "$WORK/pre.h"
check "the preflight allows GET" grep -qi '^access-control-allow-methods: GET' "$WORK/pre.h"
check "the preflight allows a private-network request" \
	grep -qi '^access-control-allow-private-network: true' "$WORK/pre.h"

curl -s -I -D "$WORK/head.h" -o /dev/null "$URL"
check "HEAD gives the length" grep -qi "^content-length: $(stat -c %s "$BIG")" "$WORK/head.h"
check_eq "another path gets 404" "$(status_of "http://127.0.0.1:$SRV_PORT/other.pftrace")" 404
check_eq "a path out of the directory gets 404" \
	"$(status_of --path-as-is "http://127.0.0.1:$SRV_PORT/../big.pftrace")" 404
check_eq "the UI's probe for trace_processor (POST /status) gets 404" \
	"$(status_of -X POST "http://127.0.0.1:$SRV_PORT/status")" 404
check_eq "PUT gets 405" "$(status_of -X PUT "$URL")" 405
check_eq "another origin gets 403" "$(status_of -H 'Origin: https://evil.example' "$URL")" 403
check_eq "another Host (DNS rebinding) gets 403" \
	"$(status_of -H "Host: evil.example:$SRV_PORT" "$URL")" 403

check_eq "a malformed request line gets 400, connection closed" \
	"$(raw_request 'GARBAGE\r\n\r\n')" "HTTP/1.1 400 Bad Request
closed"
check_eq "bare LF line ends get 400" \
	"$(raw_request "GET /big.pftrace HTTP/1.1\nHost: 127.0.0.1:$SRV_PORT\n\n")" \
	"HTTP/1.1 400 Bad Request
closed"
long=$(head -c 9000 /dev/zero | tr '\0' a)
check_eq "a head over 8 KiB gets 400" \
	"$(raw_request "GET /big.pftrace HTTP/1.1\r\nHost: 127.0.0.1:$SRV_PORT\r\nX-Long: $long\r\n\r\n")" \
	"HTTP/1.1 400 Bad Request
closed"
check_eq "HTTP/1.1 without Host gets 400" "$(raw_request 'GET /big.pftrace HTTP/1.1\r\n\r\n')" \
	"HTTP/1.1 400 Bad Request
closed"

# Clients that read a little of the trace and leave: one that resets the
# connection, one that half-closed first (the server's next write is an EPIPE).
exec 5<>"/dev/tcp/127.0.0.1/$SRV_PORT"
printf 'GET /big.pftrace HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n' "$SRV_PORT" >&5
head -c 100000 <&5 >/dev/null
exec 5<&-
python3 - "$SRV_PORT" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET /big.pftrace HTTP/1.1\r\nHost: 127.0.0.1:%s\r\n\r\n" % sys.argv[1].encode())
s.shutdown(socket.SHUT_WR)
s.recv(100000)
s.close()
PY
check "the server outlives clients that left mid-transfer" kill -0 "$SRV_PID"

# an idle connection (a browser's preconnect) must not hold up the fetch
exec 6<>"/dev/tcp/127.0.0.1/$SRV_PORT"
curl -s -H "Origin: $UI" -D "$WORK/get.h" -o "$WORK/got.pftrace" "$URL"
check "the fetched bytes are the file's" cmp -s "$WORK/got.pftrace" "$BIG"
check "the GET carries the CORS header" grep -qi "^access-control-allow-origin: $UI" "$WORK/get.h"
check "the GET says no-cache" grep -qi '^cache-control: no-cache' "$WORK/get.h"
exit_status
check_eq "served once, profctl open exits 0" "$?" 0
exec 6<&-
check "the client that left is named" grep -q "left after .* of $(stat -c %s "$BIG") bytes" "$WORK/a.err"
check "each request is logged with -v" grep -q '"GET /big.pftrace" 200' "$WORK/a.err"
check "the last line says it was fetched" sh -c "tail -n 1 '$WORK/a.err' | grep -q 'the UI fetched'"

# ---- a gzip'ed trace, fetched by a stand-in xdg-open ------------------------
gzip -c "$BIG" | head -c $((1 << 20)) >"$WORK/small.gz" # the magic is what counts
mkdir -p "$WORK/bin"
cat >"$WORK/bin/xdg-open" <<EOF
#!/bin/sh
echo "\$1" >"$WORK/xdg.args"
# process groups: its own, profctl's (a Ctrl-C for profctl must spare the browser)
echo "\$(cut -d' ' -f5 /proc/\$\$/stat) \$(cut -d' ' -f5 /proc/\$PPID/stat)" >"$WORK/xdg.pgid"
url=\${1#*url=}
exec curl -s -H 'Origin: $UI' -o "$WORK/xdg.got" "\${url%%&*}"
EOF
chmod +x "$WORK/bin/xdg-open"
DISPLAY=:99 PATH="$WORK/bin:$PATH" start_open "$WORK/x" "$WORK/small.gz"
exit_status
check_eq "with a display, xdg-open's fetch ends it with 0" "$?" 0
check_eq "xdg-open got the link" "$(cat "$WORK/xdg.args" 2>/dev/null)" "$SRV_LINK"
check "and the gzip'ed trace whole" cmp -s "$WORK/xdg.got" "$WORK/small.gz"
read -r xdg_pgid profctl_pgid <"$WORK/xdg.pgid"
check "xdg-open runs in a process group of its own" test "$xdg_pgid" != "$profctl_pgid"

# ---- Ctrl-C, --timeout, a busy port, a trace too big for the browser ------
start_open "$WORK/c" --no-browser "$BIG"
busy_port=$SRV_PORT
"$PROFCTL" open --no-browser --timeout 5 --port "$busy_port" "$BIG" >"$WORK/busy.out" \
	2>"$WORK/busy.err"
check_eq "a busy port fails" "$?" 1
check "a busy port is named" grep -q "^profctl: 127.0.0.1:$busy_port is in use" "$WORK/busy.err"
check_eq "a busy port: one line" "$(wc -l <"$WORK/busy.err")" 1
check_eq "a busy port: no link" "$(wc -c <"$WORK/busy.out")" 0
kill -INT "$SRV_PID"
exit_status
check_eq "Ctrl-C exits 130" "$?" 130
check "Ctrl-C says it stopped" grep -q "stopped (Interrupt) before the UI fetched" "$WORK/c.err"

start_open "$WORK/t" --no-browser --timeout 1 "$BIG"
exit_status
check_eq "--timeout with no fetch exits 1" "$?" 1
check "--timeout says nothing fetched it" grep -q "nothing fetched .* within 1 s" "$WORK/t.err"

printf "\\x0a\\x05hello" >"$WORK/huge.pftrace"
truncate -s 600M "$WORK/huge.pftrace" # sparse
"$PROFCTL" open --no-browser --port 0 --timeout 1 "$WORK/huge.pftrace" >/dev/null 2>"$WORK/huge.err"
check "a trace over 512 MiB gets the trace_processor hint" \
	grep -q "run trace_processor_shell --httpd $WORK/huge.pftrace" "$WORK/huge.err"
check "and is still served" grep -q "^profctl: serving" "$WORK/huge.err"
# gzip magic, then a trailer whose size (ISIZE) says 600 MiB once inflated
printf '\x1f\x8b\x08\0\0\0\0\0\0\x03\0\0\0\0\0\0\0\0\0\x80\x25' >"$WORK/huge.gz"
"$PROFCTL" open --no-browser --port 0 --timeout 1 "$WORK/huge.gz" >/dev/null 2>"$WORK/hugegz.err"
check "a gzip'ed trace that inflates past 512 MiB gets the hint" \
	grep -q "^profctl: at 600.0 MiB this trace may not load" "$WORK/hugegz.err"

# ---- bad input: one line, non-zero, no link --------------------------------
bad_input() { # description, expected message (grep -E), args...
	local what=$1 msg=$2 rc
	shift 2
	"$PROFCTL" open --no-browser --port 0 "$@" >"$WORK/bad.out" 2>"$WORK/bad.err"
	rc=$?
	check "$what: fails" test $rc -ne 0
	check "$what: says why" grep -qE -e "$msg" "$WORK/bad.err"
	check_eq "$what: one line" "$(wc -l <"$WORK/bad.err")" 1
	check_eq "$what: no link" "$(wc -c <"$WORK/bad.out")" 0
}
printf 'hello\n' >"$WORK/text.txt"
printf '\nstarts with a newline\n' >"$WORK/newline.txt"
: >"$WORK/empty.pftrace"
bad_input "a missing file" "cannot open $WORK/nope.pftrace: No such file" "$WORK/nope.pftrace"
bad_input "a directory" "$WORK is not a regular file" "$WORK"
bad_input "a text file" "$WORK/text.txt is not a Perfetto trace" "$WORK/text.txt"
bad_input "a text file starting with 0x0a" "is not a Perfetto trace" "$WORK/newline.txt"
bad_input "an empty file" "empty.pftrace is not a Perfetto trace \(it is empty" "$WORK/empty.pftrace"
bad_input "a port out of range" "--port must be a whole number" --port 70000 "$BIG"
bad_input "an origin with a path" "--origin must be like" --origin "$UI/x" "$BIG"
bad_input "no FILE" "^usage: profctl open"

finish

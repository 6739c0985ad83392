#!/usr/bin/env bash
# A service under load, attached as an admin would: tests/targets/rr_server
# running as nobody (root required), a client sending 8-byte requests
# back to back; requests/s before the attach, during it (the 3 rr_*
# functions instrumented, every call recorded, sampling at 999 Hz) and after
# the detach, in one run. Each phase is ROUNDS client runs of SECONDS; the
# median is printed with the spread.
#   bench/attach_service.sh [BUILD] [ROUNDS] [SECONDS]
set -eu
BUILD=${1:-build}
ROUNDS=${2:-3}
SECONDS_PER=${3:-2}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" -ne 0 ] || ! command -v setpriv >/dev/null; then
	echo "attach_service: skipped (needs root and setpriv to run the service as nobody)"
	exit 0
fi
tmp=$(mktemp -d /var/tmp/profd-bench.XXXXXX)
chmod 755 "$tmp"
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
cp "$ROOT/$BUILD/tests/targets/rr_server" "$tmp/"

setpriv --reuid=nobody --regid=nogroup --clear-groups "$tmp/rr_server" serve >"$tmp/srv.out" &
srv=$!
for _ in $(seq 100); do grep -q '^port' "$tmp/srv.out" && break; sleep 0.05; done
port=$(awk '/^port/ { print $2 }' "$tmp/srv.out")

phase() { # name: ROUNDS client runs, median and range of requests/s
	local rates
	rates=$(for _ in $(seq "$ROUNDS"); do
		"$tmp/rr_server" client "$port" "-$SECONDS_PER" | awk '{ print $6 }' | tr -d '/s'
	done | sort -n)
	printf '%-8s %10s req/s (median of %d x %d s; range %s-%s)\n' "$1" \
		"$(echo "$rates" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')" \
		"$ROUNDS" "$SECONDS_PER" "$(echo "$rates" | head -n 1)" "$(echo "$rates" | tail -n 1)"
}

echo "== attach_service: rr_server as nobody, one client back to back =="
phase before
"$ROOT/$BUILD/profctl" attach "$srv" --funcs 'rr_*' -v -o "$tmp/t.pftrace" 2>"$tmp/attach.err" &
attach=$!
for _ in $(seq 200); do grep -q 'attached to PID' "$tmp/attach.err" && break; sleep 0.05; done
phase during
kill -INT "$attach"
wait "$attach" || true
phase after
grep -E 'attached to PID|detached in' "$tmp/attach.err" | sed 's/^/  /'
grep -E '^profctl: calls:' "$tmp/attach.err" | sed 's/^/  /'

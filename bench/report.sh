#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `profctl report` on a large trace: peak RSS, CPU and wall time of the
# report and of `report --dump >/dev/null` (bench/README.md, "Report").
# Usage: bench/report.sh [BUILD_DIR] [SECONDS] [TRACE]
# Makes TRACE (default: a temporary one) from Debian's python3 doing JSON
# round trips for SECONDS (default 5: about 80 M slices) under --funcs
# 'Py*,_Py*' unless TRACE exists already, written with --trace-compression
# $COMPRESSION (default none: about 1.7 GB; deflate: about 240 MB), then
# measures each reading twice. Not run by `make bench`: it takes minutes and
# gigabytes of disk.
set -eu
BUILD=${1:-build}
SECS=${2:-5}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PROFCTL="$ROOT/$BUILD/profctl"
PY=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
TRACE=${3:-$tmp/big.pftrace}

[ -x "$PY" ] || { echo "FAIL: $PY not found (Debian's python3)" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "FAIL: /usr/bin/time not found (Debian's time)" >&2; exit 1; }
if [ ! -s "$TRACE" ]; then
	cat >"$tmp/work.py" <<'EOF'
import json, sys, time
t0 = time.time()
d = [{"a": i, "b": [i, str(i)], "c": {"x": i, "y": [1.5, None, True]}} for i in range(20000)]
n = 0
while time.time() - t0 < float(sys.argv[1]):
    n += len(json.loads(json.dumps(d)))
print(n)
EOF
	"$PROFCTL" run --funcs 'Py*,_Py*' --trace-compression "${COMPRESSION:-none}" -o "$TRACE" \
		-- "$PY" "$tmp/work.py" "$SECS" \
		>/dev/null 2>"$tmp/run.err" || { cat "$tmp/run.err" >&2; exit 1; }
fi
echo "trace: $TRACE ($(stat -c %s "$TRACE") bytes)"
measure() { # LABEL ARGS...
	local label=$1
	shift
	/usr/bin/time -f '%M %U %S %e' -o "$tmp/time" "$PROFCTL" report "$@" "$TRACE" >/dev/null
	read -r rss user sys wall <"$tmp/time"
	printf '%-22s peak RSS %8.1f MiB, CPU %6.1f s (user %.1f, sys %.1f), wall %6.1f s\n' \
		"$label" "$(echo "$rss / 1024" | bc -l)" "$(echo "$user + $sys" | bc -l)" "$user" "$sys" \
		"$wall"
}
for i in 1 2; do
	measure "report ($i)"
	measure "report --dump ($i)" --dump
done

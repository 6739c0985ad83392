#!/usr/bin/env bash
# Compressed traces and the flight recorder, through profd:
# - a default `profctl run` trace is deflate-compressed (python3's zlib, not our
#   reader, inflates its blocks) and reads back with the same slices as
#   `--trace-compression none`; zstd too;
# - `--ring 1M` over a run of ~40 M events: two snapshots while it runs, each
#   loading alone, the second later than the first; the final trace is about
#   1 MiB, loads with no problem under the importer's rules, ends with the
#   program's last call, shows the call open since the start from the
#   window's start, and keeps the exact totals of the whole session;
# - bad input: a malformed or too small SIZE, an unknown compression, a
#   snapshot of a session that is no ring, of a missing one, of another
#   user's: one clear line each, non-zero exit, no file left behind.
set -u
. "$(dirname "$0")/common.bash"
BURST="$ROOT/$BUILD/tests/targets/burst_target"
RING_TARGET="$ROOT/$BUILD/tests/targets/ring_target"
SOCK="$WORK/profd.sock"
USER_NAME=profd-test
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$WORK"' EXIT

"$ROOT/$BUILD/profd" --foreground --socket "$SOCK" 2>"$WORK/profd.log" &
profd_pid=$!
pids+=("$profd_pid")
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
check "profd listens on its socket" test -S "$SOCK"
export PROFD_SOCKET="$SOCK"

wait_for_file() { # path: up to 60 s
	for _ in $(seq 1200); do
		[ -e "$1" ] && return 0
		sleep 0.05
	done
	return 1
}
problems() { "$PROFCTL" report --dump "$1" | grep -c '^problem'; }
# "NAME COUNT" per slice name, sorted
slice_counts() { "$PROFCTL" report --dump "$1" | awk '$1 == "slice" { n[$4]++ } END { for (k in n) print k, n[k] }' | sort; }

# ---- compression ------------------------------------------------------------------
for mode in default none zstd; do
	args=()
	[ "$mode" = default ] || args=(--trace-compression "$mode")
	"$PROFCTL" run --funcs 'burst_*' --freq 0 "${args[@]}" -o "$WORK/burst-$mode.pftrace" -- \
		"$BURST" 300000 >"$WORK/burst-$mode.out" 2>"$WORK/burst-$mode.err"
	check_eq "burst ($mode): profctl exits 0" "$?" 0
	check_eq "burst ($mode): no session error" "$(grep -c '^profctl: error' "$WORK/burst-$mode.err")" 0
	check_eq "burst ($mode): the trace reads back without problems" \
		"$(problems "$WORK/burst-$mode.pftrace")" 0
	slice_counts "$WORK/burst-$mode.pftrace" >"$WORK/burst-$mode.counts"
done
check "burst: slices were recorded" test -s "$WORK/burst-none.counts"
check_eq "burst: deflate holds the same slices as none" \
	"$(cat "$WORK/burst-default.counts")" "$(cat "$WORK/burst-none.counts")"
check_eq "burst: zstd holds the same slices as none" \
	"$(cat "$WORK/burst-zstd.counts")" "$(cat "$WORK/burst-none.counts")"
none_size=$(stat -c %s "$WORK/burst-none.pftrace")
deflate_size=$(stat -c %s "$WORK/burst-default.pftrace")
check "burst: deflate is smaller than a quarter of none ($deflate_size of $none_size bytes)" \
	test $((deflate_size * 4)) -lt "$none_size"
# Independently of our reader: every record of the default trace is a
# compressed_packets wrapper that python3's zlib inflates into whole packets.
if command -v python3 >/dev/null; then
	python3 - "$WORK/burst-default.pftrace" >"$WORK/inflate.txt" 2>&1 <<'EOF'
import sys, zlib
def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if not c & 0x80:
            return v, i
data = open(sys.argv[1], 'rb').read()
i = wrapped = plain = inner = 0
while i < len(data):
    assert data[i] == 0x0a, 'not a packet record'
    n, i = varint(data, i + 1)
    pkt, i = data[i:i + n], i + n
    tag, j = varint(pkt, 0)
    if tag != (50 << 3 | 2):
        plain += 1
        continue
    m, j = varint(pkt, j)
    assert j + m == len(pkt), 'the wrapper holds more than its block'
    block = zlib.decompress(pkt[j:j + m])
    k = 0
    while k < len(block):
        assert block[k] == 0x0a, 'inflated bytes are not packet records'
        size, k = varint(block, k + 1)
        k += size
        inner += 1
    assert k == len(block), 'a packet runs past its block'
    wrapped += 1
print(wrapped, plain, inner)
EOF
	read -r wrapped plain inner <"$WORK/inflate.txt"
	check "python3 zlib inflates the default trace's blocks ($(cat "$WORK/inflate.txt"))" \
		test "${wrapped:-0}" -gt 0 -a "${plain:-1}" -eq 0 -a "${inner:-0}" -gt 1000
else
	skip "no python3: deflate blocks not cross-checked"
fi

# ---- bad input ------------------------------------------------------------------------
bad_input() { # description, expected word in the one line, profctl args...
	local what=$1 word=$2
	shift 2
	"$PROFCTL" "$@" >"$WORK/bad.out" 2>"$WORK/bad.err"
	local rc=$?
	check "$what: refused (exit $rc)" test "$rc" -ne 0
	check_eq "$what: one line" "$(wc -l <"$WORK/bad.err")" 1
	check "$what: the line names $word ($(head -c 160 "$WORK/bad.err"))" grep -q -- "$word" "$WORK/bad.err"
	check "$what: the program did not run" test ! -s "$WORK/bad.out"
}
bad_input "--ring 100K (smaller than a block)" "--ring" run --ring 100K --funcs 'burst_*' \
	-o "$WORK/bad.pftrace" -- "$BURST" 10
bad_input "--ring 12Q (malformed)" "--ring" run --ring 12Q --funcs 'burst_*' \
	-o "$WORK/bad.pftrace" -- "$BURST" 10
bad_input "--trace-compression lz4" "--trace-compression" run --trace-compression lz4 \
	--funcs 'burst_*' -o "$WORK/bad.pftrace" -- "$BURST" 10
bad_input "snapshot of a missing session" "no session 999" snapshot 999 -o "$WORK/missing.pftrace"
check "snapshot of a missing session: no file left" test ! -e "$WORK/missing.pftrace"
check_eq "snapshot of a missing session: no partial file left" \
	"$(find "$WORK" -name '*.partial-*' | wc -l)" 0

# ---- the flight recorder ---------------------------------------------------------
session_id() { # the id of the session whose target runs in $1's directory
	"$PROFCTL" status | awk -v t="$1" '$4 == t { print $1; exit }'
}
mkdir -p "$WORK/ring" "$WORK/plain"
"$PROFCTL" run --ring 1M --funcs 'ring_*' --freq 199 -o "$WORK/ring.pftrace" -- \
	"$RING_TARGET" "$WORK/ring" >"$WORK/ring.out" 2>"$WORK/ring.err" &
ring_run=$!
"$PROFCTL" run --funcs 'ring_*' --freq 0 -o "$WORK/plain.pftrace" -- \
	"$RING_TARGET" "$WORK/plain" 1000 >"$WORK/plain.out" 2>"$WORK/plain.err" &
plain_run=$!
check "ring: the target made its first calls" wait_for_file "$WORK/ring/ready1"
check "plain: the target runs" wait_for_file "$WORK/plain/ready1"
"$PROFCTL" status >"$WORK/status.txt" 2>&1
ids=$(awk '$4 == "ring_target" { print $1 }' "$WORK/status.txt")
check_eq "two sessions are listed" "$(echo $ids | wc -w)" 2
ring_id=$(awk '$4 == "ring_target" && $NF ~ /\/ring.pftrace$/ { print $1 }' "$WORK/status.txt")
plain_id=$(awk '$4 == "ring_target" && $NF ~ /\/plain.pftrace$/ { print $1 }' "$WORK/status.txt")

bad_input "snapshot of a session that is no ring" "not a flight recorder" \
	snapshot "$plain_id" -o "$WORK/plain-snap.pftrace"
check "snapshot of a session that is no ring: no file left" test ! -e "$WORK/plain-snap.pftrace"
touch "$WORK/plain/go2" "$WORK/plain/stop"

as_user() { su "$USER_NAME" -s /bin/sh -c "PROFD_SOCKET='$SOCK' TMPDIR=/tmp $*"; }
if [ "$(id -u)" -eq 0 ] && command -v useradd >/dev/null; then
	id "$USER_NAME" >/dev/null 2>&1 || useradd -M -s /bin/sh "$USER_NAME" 2>/dev/null
fi
if id "$USER_NAME" >/dev/null 2>&1; then
	chmod o+rx "$WORK" && chmod o+rw "$SOCK"
	user_dir=$(mktemp -d /tmp/profd-ring-test.XXXXXX)
	chmod 0777 "$user_dir"
	as_user "'$PROFCTL' snapshot $ring_id -o '$user_dir/theirs.pftrace'" >"$WORK/user.out" 2>&1
	check "another user's snapshot is refused" test $? -ne 0
	check_eq "another user's snapshot: one clear line" "$(cat "$WORK/user.out")" \
		"profctl: no session $ring_id of yours"
	check_eq "another user's snapshot: nothing left behind" "$(ls -A "$user_dir")" ""
	rm -rf "$user_dir"
else
	skip "no second user: another user's snapshot not tried"
fi

"$PROFCTL" snapshot "$ring_id" -o "$WORK/snap1.pftrace" >"$WORK/snap1.txt" 2>&1
check_eq "snapshot 1: profctl exits 0 ($(cat "$WORK/snap1.txt"))" "$?" 0
touch "$WORK/ring/go2"
check "ring: the target made its second round of calls" wait_for_file "$WORK/ring/ready2"
"$PROFCTL" snapshot "$ring_id" -o "$WORK/snap2.pftrace" >"$WORK/snap2.txt" 2>&1
check_eq "snapshot 2: profctl exits 0 ($(cat "$WORK/snap2.txt"))" "$?" 0
touch "$WORK/ring/stop"
wait "$ring_run"
check_eq "ring: profctl run exits 0" "$?" 0
wait "$plain_run"
check_eq "ring: no session error" "$(grep -c '^profctl: error' "$WORK/ring.err")" 0

for f in snap1 snap2 ring; do
	"$PROFCTL" report --dump "$WORK/$f.pftrace" >"$WORK/$f.dump"
	check_eq "$f: loads alone with no problem under the importer's rules" \
		"$(grep -c '^problem' "$WORK/$f.dump")" 0
	check "$f: holds calls ($(grep -c '^slice' "$WORK/$f.dump") slices)" \
		test "$(grep -c '^slice' "$WORK/$f.dump")" -gt 10000
	# ring_main began before the window: it shows from the window's start, at depth 0
	# (the dump gives slices as they end: the first to begin is the smallest ts)
	first_ts=$(awk '$1 == "slice" && (m == "" || $5 < m) { m = $5 } END { print m }' \
		"$WORK/$f.dump")
	main_ts=$(awk '$1 == "slice" && $4 == "ring_main" { print $5; exit }' "$WORK/$f.dump")
	check "$f: ring_main, open since before the window, shows from its start ($main_ts, first $first_ts)" \
		test -n "$main_ts" -a "${main_ts:-0}" = "$first_ts"
	check_eq "$f: ring_main is at depth 0" \
		"$(awk '$1 == "slice" && $4 == "ring_main" { print $3; exit }' "$WORK/$f.dump")" 0
	last_ts=$(awk '$1 == "slice" && $5 > t { t = $5 } END { print t }' "$WORK/$f.dump")
	eval "${f}_last=\$last_ts"
done
# shellcheck disable=SC2154 # set by eval above
check "snapshot 2 ends later than snapshot 1 ($snap2_last > $snap1_last)" \
	test "$snap2_last" -gt "$snap1_last"
check_eq "ring: the trace's last call is the program's last (ring_last; $(grep '^profctl: calls' "$WORK/ring.err"))" \
	"$(awk '$1 == "slice" && ($5 > t || ($5 == t && $3 > d)) { t = $5; d = $3; n = $4 }
		END { print n }' "$WORK/ring.dump")" ring_last
check "ring: ring_main ended in the window" \
	test "$(awk '$1 == "slice" && $4 == "ring_main" { print $6; exit }' "$WORK/ring.dump")" -gt 0
size=$(stat -c %s "$WORK/ring.pftrace")
check "ring: the trace is about 1 MiB ($size bytes)" \
	test "$size" -ge $((512 * 1024)) -a "$size" -le $((1024 * 1024 + 128 * 1024))
recorded=$(sed -nE 's/^profctl: calls: [0-9]+ made, ([0-9]+) recorded.*/\1/p' "$WORK/ring.err")
calls=$(sed -n 's/^calls //p' "$WORK/ring.out")
check "ring: far more was recorded than the window keeps ($recorded calls)" \
	test "${recorded:-0}" -gt $((10 * $(grep -c '^slice' "$WORK/ring.dump")))
check_eq "ring: the totals stay exact for the whole session (ring_work)" \
	"$(awk '$1 == "total" && $2 == 0 && $3 == "ring_work" { print $4 }' "$WORK/ring.dump")" \
	"$calls"
kill -TERM "$profd_pid"
wait "$profd_pid"
check_eq "profd exits 0 on SIGTERM" "$?" 0
finish

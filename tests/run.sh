#!/usr/bin/env bash
# Runs every unit test binary, every integration test, the fuzz targets
# (briefly) and the arm64 suite under qemu-user; sums their "N passed, N
# failed" lines into one closing line of the same form.
#
# The unit tests run one after the other; the rest run in TEST_JOBS lanes
# (default: the CPU count, at most 2), each lane taking the next test from
# one queue, the longest first. Every test already passes beside other
# work (issue 23: the suite stays green with two CPU hogs beside it), and
# each keeps to its own directory, profd and socket; what they share (the
# profd-test user) is made here, before the lanes start. Results are printed
# in the queue's order whatever the lane, so two runs read alike.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
total_pass=0
total_fail=0
failed_names=()

tally() { # name, output file, exit code, seconds taken
	local name=$1 out=$2 rc=$3 took=$4 line p f
	line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
	if [ -z "$line" ]; then
		p=0; f=1
	else
		p=$(echo "$line" | awk '{print $1}')
		f=$(echo "$line" | awk '{print $3}')
	fi
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
	total_pass=$((total_pass + p))
	total_fail=$((total_fail + f))
	if [ "$f" -ne 0 ]; then
		failed_names+=("$name")
		echo "---- $name (exit $rc, ${took} s) ----"
		tail -n 40 "$out"
	else
		echo "ok   $name: $line (${took} s)"
	fi
}

# The queue: name, then the command. The slowest first (seconds on a 2-vCPU
# VM under load), so that no lane is left with a long test at the end.
SLOW_FIRST="test_signal_steps test_runtimes test_exact_calls test_signal_stress
	test_sample_stacks test_attach test_ring test_attach_errors test_real_programs"
queue_names=()
queue_cmds=()
enqueue() { queue_names+=("$1"); queue_cmds+=("$2"); }
for name in $SLOW_FIRST; do
	[ -f "tests/integration/$name.sh" ] && enqueue "$name" "timeout 600 bash tests/integration/$name.sh"
done
# Every fuzz target for FUZZ_SECONDS (5 s each, under a minute in all). A
# missing clang or libFuzzer runtime fails here, with the reason, never skips.
enqueue fuzz "timeout 600 env FUZZ_SECONDS=${FUZZ_SECONDS:-5} bash tests/fuzz/run.sh"
# The arm64 builds and agent under qemu-user (make test-aarch64; a skip
# without the cross tools, which tools/install-deps.sh installs).
enqueue aarch64 "timeout 600 env HOST_BUILD=$BUILD bash tests/aarch64/run.sh"
for t in tests/integration/test_*.sh; do
	name=$(basename "$t" .sh)
	[[ " $(echo $SLOW_FIRST) " == *" $name "* ]] || enqueue "$name" "timeout 600 bash $t"
done

# One lane: takes the queue's next index under a lock until none is left.
lane() {
	local i start
	while :; do
		i=$(flock "$tmp/queue.lock" sh -c 'i=$(cat "$1"); echo $((i + 1)) >"$1"; echo "$i"' \
			sh "$tmp/queue.next")
		[ "$i" -lt ${#queue_names[@]} ] || return 0
		start=$(date +%s)
		eval "${queue_cmds[$i]}" >"$tmp/$i.out" 2>&1
		echo "$? $(($(date +%s) - start))" >"$tmp/$i.rc"
	done
}

suite_start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	start=$(date +%s)
	timeout 300 "$t" >"$tmp/$name.out" 2>&1
	tally "$name" "$tmp/$name.out" $? $(($(date +%s) - start))
done
if [ "$(id -u)" -eq 0 ] && command -v useradd >/dev/null; then
	id profd-test >/dev/null 2>&1 || useradd -M -s /bin/sh profd-test 2>/dev/null
fi
jobs=${TEST_JOBS:-$(nproc)}
[ "$jobs" -ge 1 ] 2>/dev/null || jobs=1
[ "$jobs" -le 2 ] || jobs=2
echo 0 >"$tmp/queue.next"
lanes=()
for _ in $(seq "$jobs"); do
	lane &
	lanes+=($!)
done
wait "${lanes[@]}"
for i in "${!queue_names[@]}"; do
	read -r rc took <"$tmp/$i.rc" 2>/dev/null || { rc=1; took=0; }
	tally "${queue_names[$i]}" "$tmp/$i.out" "$rc" "$took"
done
[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "suite: $(($(date +%s) - suite_start)) s in $jobs lanes"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]

#!/usr/bin/env bash
# Runs every unit test binary, every integration test, the fuzz targets
# (briefly) and the arm64 suite under qemu-user; sums their "N passed, N failed" lines into one closing line of
# the same form.
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
export BUILD
total_pass=0
total_fail=0
failed_names=()

tally() { # name, output file, exit code, start (epoch seconds)
	local name=$1 out=$2 rc=$3 took=$(($(date +%s) - $4)) line p f
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

suite_start=$(date +%s)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	name=$(basename "$t")
	start=$(date +%s)
	timeout 300 "$t" >"$tmp/$name.out" 2>&1
	tally "$name" "$tmp/$name.out" $? "$start"
done
for t in tests/integration/test_*.sh; do
	[ -f "$t" ] || continue
	name=$(basename "$t" .sh)
	start=$(date +%s)
	timeout 600 bash "$t" >"$tmp/$name.out" 2>&1
	tally "$name" "$tmp/$name.out" $? "$start"
done
# Every fuzz target for FUZZ_SECONDS (10 s each, about a minute in all). A
# missing clang or libFuzzer runtime fails here, with the reason, never skips.
start=$(date +%s)
timeout 600 env FUZZ_SECONDS="${FUZZ_SECONDS:-10}" bash tests/fuzz/run.sh >"$tmp/fuzz.out" 2>&1
tally fuzz "$tmp/fuzz.out" $? "$start"
# The arm64 builds and agent under qemu-user (make test-aarch64, ~15 s; a skip
# without the cross tools, which tools/install-deps.sh installs).
start=$(date +%s)
timeout 600 env HOST_BUILD="$BUILD" bash tests/aarch64/run.sh >"$tmp/aarch64.out" 2>&1
tally aarch64 "$tmp/aarch64.out" $? "$start"
[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "suite: $(($(date +%s) - suite_start)) s"
echo "$total_pass passed, $total_fail failed"
[ "$total_fail" -eq 0 ]

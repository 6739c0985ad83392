#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds every libFuzzer target (tests/fuzz/fuzz_*.c) into build/fuzz/ with
# ASan and UBSan, runs each for ${FUZZ_SECONDS:-20} seconds on a copy of its
# seed corpus (tests/fuzz/corpus/<target>/ is never written), prints per target
# the executions and the outcome, and ends with "N passed, N failed".
# A target passes when it built and ran without a crash, leak, UB or timeout;
# crashing inputs land in build/fuzz/artifacts/<target>/. Needs clang and `make`.
set -u
cd "$(dirname "$0")/../.."
SECONDS_EACH=${FUZZ_SECONDS:-20}
OUT=build/fuzz
CC=${FUZZ_CC:-clang}
FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -I. -Ibuild/gen -D_GNU_SOURCE"
# UBSan only reports by default; a report must count as a crash.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# The sources and libraries each target links against.
target_deps() {
	case $1 in
	fuzz_event_decoder) echo "daemon/event_decoder.c -lzstd" ;;
	fuzz_frame_reader) echo "proto/frame.c" ;;
	fuzz_elf_symbols) echo "agent/elf_symbols.c" ;;
	fuzz_trace_reader)
		echo "viewer-export/trace_reader.c viewer-export/trace_model.c" \
		     "viewer-export/perfetto_intern.c build/gen/perfetto_trace_subset.pb-c.c" \
		     "-lprotobuf-c" ;;
	fuzz_func_filter) echo "common/func_filter.c" ;;
	*) return 1 ;;
	esac
}

# Builds target $1 into $OUT/$1; the target's own file must be warning-free.
build_target() {
	local t=$1 deps
	deps=$(target_deps "$t") || { echo "no sources known for $t"; return 1; }
	mkdir -p "$OUT/obj"
	# shellcheck disable=SC2086 # FLAGS and deps are word lists
	$CC $FLAGS -Wall -Wextra -Werror -c -o "$OUT/obj/$t.o" "tests/fuzz/$t.c" &&
		$CC $FLAGS -o "$OUT/$t" "$OUT/obj/$t.o" $deps
}

# Runs target $1; prints "<executions> <ok|crash>".
run_target() {
	local t=$1 log=$OUT/$1.log corpus=$OUT/corpus/$1 art=$OUT/artifacts/$1/ runs rc
	rm -rf "$corpus" "$art"
	mkdir -p "$corpus" "$art"
	cp tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null
	"$OUT/$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$art" "$corpus" >"$log" 2>&1
	rc=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	[ -n "$runs" ] || runs=$(grep -oE '^#[0-9]+' "$log" | tail -n 1 | tr -d '#')
	if [ "$rc" -eq 0 ] && ! ls "$art" | grep -q .; then
		echo "${runs:-0} ok"
	else
		echo "${runs:-0} crash"
	fi
}

[ -f build/gen/perfetto_trace_subset.pb-c.c ] ||
	make -s build/gen/perfetto_trace_subset.pb-c.c build/gen/profd.pb-c.c || exit 1
mkdir -p "$OUT"
passed=0
failed=0
for src in tests/fuzz/fuzz_*.c; do
	t=$(basename "$src" .c)
	if ! build_target "$t" >"$OUT/$t.build.log" 2>&1; then
		echo "FAIL $t: build failed"
		sed 's/^/    /' "$OUT/$t.build.log" | tail -n 20
		failed=$((failed + 1))
		continue
	fi
	read -r runs outcome < <(run_target "$t")
	if [ "$outcome" = ok ]; then
		echo "ok   $t: $runs executions in ${SECONDS_EACH}s"
		passed=$((passed + 1))
	else
		echo "FAIL $t: crashed after $runs executions (log $OUT/$t.log," \
		     "input in $OUT/artifacts/$t/)"
		grep -m 3 -E 'ERROR|runtime error|SUMMARY' "$OUT/$t.log" | sed 's/^/    /'
		failed=$((failed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

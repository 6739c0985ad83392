#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds every libFuzzer target (tests/fuzz/fuzz_*.c) into build/fuzz/ with
# ASan and UBSan, runs each for ${FUZZ_SECONDS:-20} seconds on a copy of its
# seed corpus (tests/fuzz/corpus/<target>/ is never written), prints per target
# the executions and the outcome, and ends with "N passed, N failed".
# A target passes when it built and ran without a crash, leak, UB or timeout;
# crashing inputs land in build/fuzz/artifacts/<target>/. FUZZ_SECONDS=0 runs
# each seed once. Needs clang with its libFuzzer runtime (Debian 12:
# libclang-rt-14-dev) and protoc-c; without them every target fails, saying why.
# Everything, generated protobuf-c code included, goes to build/fuzz/: no
# `make` run here, so nothing races a parallel build of the tree.
set -u
cd "$(dirname "$0")/../.."
SECONDS_EACH=${FUZZ_SECONDS:-20}
OUT=build/fuzz
CC=${FUZZ_CC:-clang}
FLAGS="-g -O1 -fsanitize=fuzzer,address,undefined -I. -I$OUT/gen -D_GNU_SOURCE"
# UBSan only reports by default; a report must count as a crash.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# The sources and libraries each target links against.
target_deps() {
	case $1 in
	fuzz_event_decoder) echo "daemon/events/event_decoder.c common/arg_spec.c -lzstd" ;;
	fuzz_frame_reader) echo "proto/frame.c" ;;
	fuzz_elf_symbols) echo "agent/elf_symbols.c" ;;
	fuzz_dwarf_params)
		echo "daemon/symbols/dwarf_params.c daemon/symbols/dwarf_describe.c" \
		     "daemon/symbols/dwarf_abi.c daemon/symbols/debug_file.c agent/elf_symbols.c -ldw -lelf" ;;
	fuzz_trace_reader)
		echo "viewer-export/trace_reader.c viewer-export/trace_model.c" \
		     "viewer-export/trace_stream.c viewer-export/trace_slices.c viewer-export/trace_sched.c" \
		     "viewer-export/packet_decompress.c viewer-export/perfetto_intern.c" \
		     "$OUT/gen/perfetto_trace_subset.pb-c.c -lprotobuf-c -lz -lzstd" ;;
	fuzz_func_filter) echo "common/func_filter.c" ;;
	fuzz_http_request) echo "profctl/http_serve.c" ;;
	fuzz_control_messages)
		echo "proto/frame.c daemon/events/func_registry.c daemon/sampling/stub_map.c" \
		     "$OUT/gen/profd.pb-c.c -lprotobuf-c" ;;
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
	local t=$1 log=$OUT/$1.log corpus=$OUT/corpus/$1 art=$OUT/artifacts/$1/ runs rc limit
	rm -rf "$corpus" "$art"
	mkdir -p "$corpus" "$art"
	cp tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null
	# -max_total_time=0 would mean no limit
	if [ "$SECONDS_EACH" -gt 0 ]; then limit=-max_total_time=$SECONDS_EACH; else limit=-runs=0; fi
	"$OUT/$t" "$limit" -timeout=10 -rss_limit_mb=2048 \
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

# Says why the targets cannot be built, or nothing.
missing_tools() {
	local probe=$OUT/probe
	if ! command -v "$CC" >/dev/null; then
		echo "$CC not found: install clang (tools/install-deps.sh)"
		return
	fi
	command -v protoc-c >/dev/null ||
		{ echo "protoc-c not found: install protobuf-c-compiler (tools/install-deps.sh)"; return; }
	printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return !d + !n; }\n' \
		>"$probe.c"
	# shellcheck disable=SC2086 # FLAGS is a word list
	$CC $FLAGS -o "$probe" "$probe.c" >"$probe.log" 2>&1 || {
		echo "$CC cannot link -fsanitize=fuzzer, the libFuzzer runtime is missing" \
		     "(Debian 12: libclang-rt-14-dev; tools/install-deps.sh):"
		sed 's/^/    /' "$probe.log" | tail -n 5
	}
}

# The protobuf-c code the targets link, from proto/*.proto when they changed.
generate_protos() {
	local p
	mkdir -p "$OUT/gen"
	for p in proto/*.proto; do
		[ "$OUT/gen/$(basename "$p" .proto).pb-c.c" -nt "$p" ] ||
			protoc-c --proto_path=proto --c_out="$OUT/gen" "$p" || return 1
	done
}

mkdir -p "$OUT"
reason=$(missing_tools)
if [ -z "$reason" ] && ! generate_protos >"$OUT/protoc.log" 2>&1; then
	reason="protoc-c failed: $(head -n 3 "$OUT/protoc.log")"
fi
if [ -n "$reason" ]; then
	n=$(find tests/fuzz -name 'fuzz_*.c' | wc -l)
	echo "FAIL fuzz targets not built: $reason"
	echo "0 passed, $n failed"
	exit 1
fi
passed=0
failed=0
# Built in parallel (one clang per target), run one after the other.
for src in tests/fuzz/fuzz_*.c; do
	t=$(basename "$src" .c)
	{ build_target "$t" >"$OUT/$t.build.log" 2>&1; echo $? >"$OUT/$t.build.rc"; } &
done
wait
for src in tests/fuzz/fuzz_*.c; do
	t=$(basename "$src" .c)
	if [ "$(cat "$OUT/$t.build.rc")" != 0 ]; then
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

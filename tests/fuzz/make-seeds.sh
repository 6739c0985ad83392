#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Writes the seed corpus of each fuzz target under tests/fuzz/corpus/<target>/:
# a few small, valid (and slightly damaged) inputs, made with the project's
# own writers where there is one (tests/fuzz/seed_gen.c, which also checks that
# the event seeds decode). Needs gcc and protoc-c. Rerun it after a wire-format
# or .proto change; keep the corpus under 200 KiB.
set -eu
cd "$(dirname "$0")/../.."
CORPUS=tests/fuzz/corpus
CC=${CC:-gcc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the generated protobuf-c code, made here: no `make` run racing a build of the tree
mkdir -p "$tmp/gen"
protoc-c --proto_path=proto --c_out="$tmp/gen" proto/profd.proto proto/perfetto_trace_subset.proto
rm -rf "$CORPUS"
for t in tests/fuzz/fuzz_*.c; do
	mkdir -p "$CORPUS/$(basename "$t" .c)"
done

# ---- event decoder, frame reader, control messages, trace reader: seed_gen.c -----
$CC -std=gnu11 -O1 -Wall -Wextra -Werror -Wno-missing-field-initializers -I. -I"$tmp/gen" \
	-D_GNU_SOURCE -o "$tmp/seed_gen" tests/fuzz/seed_gen.c \
	proto/frame.c common/arg_spec.c daemon/events/event_decoder.c viewer-export/perfetto_writer.c \
	viewer-export/perfetto_samples.c viewer-export/perfetto_sched.c viewer-export/perfetto_intern.c viewer-export/trace_sink.c \
	"$tmp/gen/profd.pb-c.c" "$tmp/gen/perfetto_trace_subset.pb-c.c" -lzstd -lisal -lz \
	-lprotobuf-c -lpthread
trace=$CORPUS/fuzz_trace_reader/profd-trace
"$tmp/seed_gen" "$CORPUS/fuzz_event_decoder" "$CORPUS/fuzz_frame_reader" \
	"$CORPUS/fuzz_control_messages" "$trace"
head -c $(($(stat -c %s "$trace") - 5)) "$trace" >"$CORPUS/fuzz_trace_reader/truncated"

# ---- ELF: a tiny shared object with a symtab, its stripped copy, a truncated one --
cat >"$tmp/tiny.c" <<'EOF'
int counter;
int add(int a, int b) { return a + b + counter; }
int twice(int a) { return add(a, a); }
__attribute__((noinline)) static int local_helper(int a) { return a * 3; }
int use_local(int a) { return local_helper(a) + 1; }
int alias_of_add(int a, int b) __attribute__((alias("add")));
static int (*pick(void))(int) { return twice; }
int chosen(int) __attribute__((ifunc("pick")));
EOF
$CC -shared -fPIC -O1 -nostdlib -Wl,--build-id=none -Wl,-z,noseparate-code -Wl,--hash-style=gnu \
	-o "$CORPUS/fuzz_elf_symbols/tiny.so" "$tmp/tiny.c"
strip --strip-all -o "$CORPUS/fuzz_elf_symbols/tiny-stripped.so" "$CORPUS/fuzz_elf_symbols/tiny.so"
head -c 200 "$CORPUS/fuzz_elf_symbols/tiny.so" >"$CORPUS/fuzz_elf_symbols/headers-only"

# ---- DWARF parameters: a tiny -g object with each kind of parameter, a truncated copy --
cat >"$tmp/params.c" <<'EOF'
enum mode { M_READ, M_WRITE = 4, M_BACK = -2 };
typedef unsigned long size_type;
struct pair { long a, b, c; };
int ints(int i, unsigned u, short s, char c, long l, _Bool b) { return i + u + s + c + l + b; }
long text(const char *path, void *p, enum mode m, size_type n) { return path[0] + (p != 0) + m + n; }
double mixed(int a, double d, float f, long b) { return a + d + f + b; }
struct pair ret_pair(int a, struct pair p, long double x, ...) { p.a = a + (long)x; return p; }
EOF
$CC -shared -fPIC -O1 -g -nostdlib -Wl,--build-id=none -Wl,--hash-style=gnu \
	-o "$CORPUS/fuzz_dwarf_params/params.so" "$tmp/params.c"
head -c 3000 "$CORPUS/fuzz_dwarf_params/params.so" >"$CORPUS/fuzz_dwarf_params/truncated"

# ---- --funcs patterns: patterns..., module path, symbol (NUL-separated) -----------
ff=$CORPUS/fuzz_func_filter
printf 'main,compute*\0/usr/bin/demo\0compute_sum' >"$ff/list"
printf '*\0!_*, !*@plt\0/usr/lib/x86_64-linux-gnu/libz.so.1\0_init' >"$ff/excludes"
printf 'libz*:inflate*\0 ! libc.so.*:* \0libz.so.1\0inflateReset' >"$ff/modules"
printf '[a-c]?x\\*\0demo\0bqx*' >"$ff/classes"
printf ' , \0!\0:x' >"$ff/errors"
# ---- HTTP requests to profctl open: the UI's fetch, its preflight, its probe, bad ones --
hr=$CORPUS/fuzz_http_request
printf 'GET /t.pftrace HTTP/1.1\r\nHost: 127.0.0.1:9001\r\nOrigin: https://ui.perfetto.dev\r\n\r\n' \
	>"$hr/ui-get"
printf 'OPTIONS /t.pftrace HTTP/1.1\r\nHost: 127.0.0.1:9001\r\nOrigin: https://ui.perfetto.dev\r\nAccess-Control-Request-Method: GET\r\nAccess-Control-Request-Private-Network: true\r\n\r\n' \
	>"$hr/preflight"
printf 'POST /status HTTP/1.1\r\nHost: 127.0.0.1:9001\r\nContent-Length: 0\r\n\r\n' >"$hr/rpc-probe"
printf 'HEAD /t.pftrace HTTP/1.0\r\n\r\n' >"$hr/head-1.0"
printf 'GET /t.pftrace HTTP/1.1\nHost: a\n folded\r\n\r\n' >"$hr/bad"
du -cb "$CORPUS" | tail -n 1

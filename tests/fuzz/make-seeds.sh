#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Writes the seed corpus of each fuzz target under tests/fuzz/corpus/<target>/:
# a few small, valid (and slightly damaged) inputs, made with the project's
# own writers where there is one. Needs `make` first (build/gen). Rerun it
# after a wire-format change; keep the corpus under 200 KiB.
set -eu
cd "$(dirname "$0")/../.."
CORPUS=tests/fuzz/corpus
CC=${CC:-gcc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

[ -f build/gen/perfetto_trace_subset.pb-c.h ] || make -s build/gen/perfetto_trace_subset.pb-c.c
rm -rf "$CORPUS"
for t in tests/fuzz/fuzz_*.c; do
	mkdir -p "$CORPUS/$(basename "$t" .c)"
done

# ---- event decoder, frame reader, trace reader: a small C generator --------------
cat >"$tmp/seedgen.c" <<'EOF'
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "proto/event_wire.h"
#include "proto/frame.h"
#include "viewer-export/perfetto_writer.h"

static uint8_t raw[4096], seed[1 << 16];
static size_t raw_len, seed_len;

static void put(const void *p, size_t n) { memcpy(raw + raw_len, p, n); raw_len += n; }

static void chunk(uint32_t kind, uint32_t tid, uint32_t count, uint64_t drops, const void *b,
		  size_t n)
{
	struct event_chunk_header h = { .kind = kind, .tid = tid, .count = count, .drops = drops };

	put(&h, sizeof(h));
	if (n)
		put(b, n);
}

static void pair(uint64_t tsc, uint64_t mono)
{
	struct event_clock_pair p = { tsc, mono };

	chunk(EVENT_CHUNK_CLOCK_PAIR, 0, 0, 0, &p, sizeof(p));
}

static void records(uint32_t tid, uint64_t tsc, uint32_t n, uint64_t drops)
{
	struct event_record r[8];

	for (uint32_t i = 0; i < n; i++)
		r[i] = (struct event_record){ tsc + 100 * i, 1 + i / 2, i % 2 ? 2 : 1 };
	chunk(EVENT_CHUNK_RECORDS, tid, n, drops, r, n * sizeof(r[0]));
}

/* Frame f of a small session: the agent's chunk order (flusher_cycle). */
static void session_frame(int f)
{
	raw_len = 0;
	if (f == 0) {
		pair(1000000, 5000000);
		chunk(EVENT_CHUNK_THREAD_NAME, 42, 0, 0, "demo-main-thread", 16);
	}
	records(42, 1000000 + 3000 * f + 10, f == 2 ? 0 : 6, f == 2 ? 3 : 0);
	if (f == 2)
		chunk(EVENT_CHUNK_THREAD_EXIT, 42, 0, 3, NULL, 0);
	pair(1000000 + 3000 * (f + 1), 5000000 + 1000 * (f + 1));
}

static void seed_put(const void *p, size_t n) { memcpy(seed + seed_len, p, n); seed_len += n; }

static void seed_frame(const void *p, size_t n)
{
	uint8_t len[2] = { (uint8_t)n, (uint8_t)(n >> 8) };

	seed_put(len, 2);
	seed_put(p, n);
}

static void seed_write(const char *path)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(seed, 1, seed_len, f) != seed_len || fclose(f))
		exit(1);
	seed_len = 0;
}

static void compress_frame(ZSTD_CCtx *c)
{
	static uint8_t out[8192];
	ZSTD_inBuffer in = { raw, raw_len, 0 };
	ZSTD_outBuffer o = { out, sizeof(out), 0 };

	size_t left;

	do
		left = ZSTD_compressStream2(c, &o, &in, ZSTD_e_flush);
	while (left != 0 && !ZSTD_isError(left));
	if (left)
		exit(1);
	seed_frame(out, o.pos);
}

static void event_seeds(const char *dir, char *path)
{
	ZSTD_CCtx *c = ZSTD_createCCtx();

	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1);
	for (int mode = 0; mode < 2; mode++) {
		seed_put(&(uint8_t){ (uint8_t)mode }, 1);
		for (int f = 0; f < 3; f++) {
			session_frame(f);
			if (mode)
				seed_frame(raw, raw_len);
			else
				compress_frame(c);
		}
		sprintf(path, "%s/session-%s", dir, mode ? "raw" : "zstd");
		seed_write(path);
	}
	ZSTD_freeCCtx(c);
}

static void frame_seeds(const char *dir, char *path)
{
	static const uint32_t types[] = { FRAME_AGENT_HELLO, FRAME_EVENTS, FRAME_ERROR,
					  FRAME_AGENT_GOODBYE };
	uint8_t hdr[FRAME_HEADER_SIZE], body[300];

	for (int s = 0; s < 2; s++) {
		seed_put("\x15\xcd\x5b\x07\x3a\x11\x90\x42" + s, 8);
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
			size_t n = s ? 7 * i : 100 * i;

			memset(body, 'a' + (int)i, n);
			frame_header_encode(hdr, types[i], (uint32_t)n);
			seed_put(hdr, sizeof(hdr));
			seed_put(body, n);
		}
		if (s) { /* ends with a header announcing more than there is */
			frame_header_encode(hdr, FRAME_EVENTS, 5000);
			seed_put(hdr, sizeof(hdr));
		}
		sprintf(path, "%s/stream-%d", dir, s);
		seed_write(path);
	}
}

static void trace_seed(const char *path)
{
	struct perfetto_frame frames[2] = {
		{ .function = "main", .rel_pc = 0x1139, .mapping_path = "/usr/bin/demo",
		  .map_start = 0x555555554000, .map_end = 0x555555556000 },
		{ .function = NULL, .rel_pc = 0x2a3c0, .mapping_path = "/usr/lib/libc.so.6",
		  .map_start = 0x7ffff7c00000, .map_end = 0x7ffff7d00000, .map_pgoff = 0x28000 },
	};
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	struct perfetto_writer *w = perfetto_writer_new(fd);

	perfetto_writer_process(w, 100, "demo");
	perfetto_writer_thread(w, 100, 101, "worker");
	perfetto_writer_function(w, 1, "compute");
	perfetto_writer_function(w, 2, "helper");
	perfetto_writer_slice_begin(w, 100, 101, 1000, 1);
	perfetto_writer_slice_begin(w, 100, 101, 1100, 2);
	perfetto_writer_slice_end(w, 100, 101, 1200);
	perfetto_writer_sample(w, 1150, 0, 100, 101, frames, 2);
	perfetto_writer_counter(w, 100, "dropped events", 1160, 3);
	perfetto_writer_samples_lost(w, 1170, 0, 2);
	perfetto_writer_slice_end(w, 100, 101, 1300);
	perfetto_writer_slice_begin(w, 100, 101, 1400, 1); /* never ended */
	if (perfetto_writer_free(w) != 0)
		exit(1);
}

int main(int argc, char **argv)
{
	char path[4096];

	(void)argc;
	event_seeds(argv[1], path);
	frame_seeds(argv[2], path);
	trace_seed(argv[3]);
	return 0;
}
EOF
$CC -std=gnu11 -O1 -I. -Ibuild/gen -D_GNU_SOURCE -o "$tmp/seedgen" "$tmp/seedgen.c" \
	proto/frame.c viewer-export/perfetto_writer.c viewer-export/perfetto_samples.c \
	viewer-export/perfetto_intern.c \
	-lzstd -lprotobuf-c
trace=$CORPUS/fuzz_trace_reader/profd-trace
"$tmp/seedgen" "$CORPUS/fuzz_event_decoder" "$CORPUS/fuzz_frame_reader" "$trace"
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

# ---- --funcs patterns: patterns..., module path, symbol (NUL-separated) -----------
ff=$CORPUS/fuzz_func_filter
printf 'main,compute*\0/usr/bin/demo\0compute_sum' >"$ff/list"
printf '*\0!_*, !*@plt\0/usr/lib/x86_64-linux-gnu/libz.so.1\0_init' >"$ff/excludes"
printf 'libz*:inflate*\0 ! libc.so.*:* \0libz.so.1\0inflateReset' >"$ff/modules"
printf '[a-c]?x\\*\0demo\0bqx*' >"$ff/classes"
printf ' , \0!\0:x' >"$ff/errors"
du -cb "$CORPUS" | tail -n 1

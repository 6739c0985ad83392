// SPDX-License-Identifier: MIT
/*
 * Compression cost on real trace bytes: cuts a profd trace (uncompressed,
 * `--trace-compression none`) into blocks of whole packets of 64..448 KiB and
 * compresses each with zlib levels 1-6 (and level 1 with the strategies
 * Z_RLE and Z_HUFFMAN_ONLY), ISA-L's igzip levels 0-3 (zlib format, what
 * profd writes) and zstd levels 1-3, as the writer's
 * output stage would. Prints, per codec, level and block size, the bytes out
 * per byte in and the CPU ns per input KiB (and per event at the trace's
 * bytes per event). Usage: compress_cost TRACE [MiB to use, default 64].
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>
#include <zstd.h>

#include "viewer-export/igzip_block.h"

static double cpu_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Reads the varint at p[*i..n); false when it runs past n. */
static bool varint_at(const uint8_t *p, size_t n, size_t *i, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; *i < n; shift += 7) {
		*v |= (uint64_t)(p[*i] & 0x7f) << shift;
		if (!(p[(*i)++] & 0x80))
			return true;
	}
	return false;
}

/* The end of the last whole `0A len` record of p[0..n) that ends by `limit`. */
static size_t whole_packets(const uint8_t *p, size_t n, size_t limit)
{
	size_t off = 0, i;
	uint64_t len;

	for (i = 1; varint_at(p, n, &i, &len) && i + len <= limit; i = off + 1)
		off = i + len;
	return off;
}

/* level < 0: level 1 with strategy -level (Z_HUFFMAN_ONLY 2, Z_RLE 3). */
static size_t deflate_block(int level, const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
	z_stream z = { 0 };
	size_t olen;

	if (deflateInit2(&z, level < 0 ? 1 : level, Z_DEFLATED, 15, 8,
			 level < 0 ? -level : Z_DEFAULT_STRATEGY) != Z_OK)
		return 0;
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	olen = deflate(&z, Z_FINISH) == Z_STREAM_END ? cap - z.avail_out : 0;
	deflateEnd(&z);
	return olen;
}

static size_t igzip_level(int level, const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
	static const uint32_t buf_size[] = { ISAL_DEF_LVL0_DEFAULT, ISAL_DEF_LVL1_DEFAULT,
					     ISAL_DEF_LVL2_DEFAULT, ISAL_DEF_LVL3_DEFAULT };
	static uint8_t *level_buf[4];

	if (!level_buf[level] && !(level_buf[level] = malloc(buf_size[level])))
		return 0;
	return igzip_block((uint32_t)level, level_buf[level], buf_size[level], in, n, out, cap);
}

int main(int argc, char **argv)
{
	static const size_t blocks[] = { 64 << 10, 128 << 10, 256 << 10, 448 << 10 };
	size_t use = (argc > 2 ? strtoul(argv[2], NULL, 10) : 64) << 20, n, cap;
	uint8_t *buf, *out;
	FILE *f;

	if (argc < 2) {
		fprintf(stderr, "usage: %s TRACE [MiB]\n", argv[0]);
		return 2;
	}
	f = fopen(argv[1], "rb");
	buf = malloc(use);
	if (!f || !buf)
		return 1;
	n = fread(buf, 1, use, f);
	fclose(f);
	n = whole_packets(buf, n, n);
	cap = compressBound(448 << 10) + ZSTD_compressBound(448 << 10);
	out = malloc(cap);
	printf("%zu bytes of whole packets\n", n);
	printf("%-6s %5s %7s %9s %12s\n", "codec", "level", "block", "out/in", "ns/KiB in");
	for (int codec = 0; codec < 3; codec++) { /* zlib, zstd, igzip */
		static const char *const names[] = { "zlib", "zstd", "igzip" };
		int maxl = codec == 0 ? 6 : 3;
		ZSTD_CCtx *z = ZSTD_createCCtx();

		for (int level = codec == 0 ? -3 : codec == 1 ? 1 : 0; level <= maxl; level++) {
			if (codec == 0 && (level == 0 || level == -1))
				continue;
			for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++) {
				size_t off = 0, total = 0;
				double t0 = cpu_ns();

				while (off < n) {
					size_t len = whole_packets(buf + off, n - off, blocks[b]);

					if (!len)
						break;
					total += codec == 1 ? ZSTD_compressCCtx(z, out, cap, buf + off, len, level)
						 : codec == 2 ? igzip_level(level, buf + off, len, out, cap)
							      : deflate_block(level, buf + off, len, out, cap);
					off += len;
				}
				printf("%-6s %5s %6zuK %9.4f %12.0f\n", names[codec],
				       level == -2 ? "huff" : level == -3 ? "rle" : (char[]){ (char)('0' + level), 0 },
				       blocks[b] >> 10, (double)total / (double)off,
				       (cpu_ns() - t0) / ((double)off / 1024));
				fflush(stdout);
			}
		}
		ZSTD_freeCCtx(z);
	}
	free(out);
	free(buf);
	return 0;
}

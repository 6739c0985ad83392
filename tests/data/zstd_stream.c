// SPDX-License-Identifier: MIT
/*
 * zstd_stream c|d: stdin to stdout through libzstd.so's streaming API, compressing
 * with 2 worker threads that libzstd starts itself. Built at test time by
 * tests/integration/test_real_programs.sh: the zstd CLI links libzstd in statically.
 */
#include <stdio.h>
#include <string.h>
#include <zstd.h>

static int failed(size_t r, const char *what)
{
	if (!ZSTD_isError(r))
		return 0;
	fprintf(stderr, "%s: %s\n", what, ZSTD_getErrorName(r));
	return 1;
}

static int compress(void)
{
	static char in[1 << 17], out[1 << 17];
	ZSTD_CCtx *c = ZSTD_createCCtx();
	size_t n, r, total = 0;
	int last;

	if (failed(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 5), "level") ||
	    failed(ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 1), "checksum") ||
	    failed(ZSTD_CCtx_setParameter(c, ZSTD_c_nbWorkers, 2), "workers"))
		return 1;
	do {
		n = fread(in, 1, sizeof(in), stdin);
		last = n < sizeof(in);
		ZSTD_inBuffer ib = { in, n, 0 };
		do {
			ZSTD_outBuffer ob = { out, sizeof(out), 0 };
			r = ZSTD_compressStream2(c, &ob, &ib, last ? ZSTD_e_end : ZSTD_e_continue);
			if (failed(r, "compress"))
				return 1;
			fwrite(out, 1, ob.pos, stdout);
			total += ob.pos;
		} while (last ? r != 0 : ib.pos < ib.size);
	} while (!last);
	ZSTD_freeCCtx(c);
	fprintf(stderr, "compressed to %zu bytes\n", total);
	return 0;
}

static int decompress(void)
{
	static char in[1 << 16], out[1 << 17];
	ZSTD_DCtx *d = ZSTD_createDCtx();
	size_t n, r = 0, total = 0;

	while ((n = fread(in, 1, sizeof(in), stdin)) > 0) {
		ZSTD_inBuffer ib = { in, n, 0 };
		while (ib.pos < ib.size) {
			ZSTD_outBuffer ob = { out, sizeof(out), 0 };
			r = ZSTD_decompressStream(d, &ob, &ib);
			if (failed(r, "decompress"))
				return 1;
			fwrite(out, 1, ob.pos, stdout);
			total += ob.pos;
		}
	}
	ZSTD_freeDCtx(d);
	fprintf(stderr, "decompressed to %zu bytes%s\n", total, r ? " (truncated frame)" : "");
	return r != 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "c") == 0)
		return compress();
	if (argc == 2 && strcmp(argv[1], "d") == 0)
		return decompress();
	fprintf(stderr, "usage: zstd_stream c|d <in >out\n");
	return 2;
}

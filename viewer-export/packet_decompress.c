/* SPDX-License-Identifier: MIT */
/*
 * Finds a TracePacket's compressed_packets / zstd_compressed_packets field
 * and inflates it, bounded (see packet_decompress.h). The input is hostile:
 * every length is checked, and the output never grows past the bound.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>
#include <zstd.h>

#include "viewer-export/packet_decompress.h"

enum { F_COMPRESSED = 50, F_ZSTD_COMPRESSED = 133 };

static int get_varint(const uint8_t *p, size_t len, size_t *off, uint64_t *v)
{
	*v = 0;
	for (unsigned shift = 0; shift < 64 && *off < len; shift += 7) {
		uint8_t b = p[(*off)++];

		*v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			return 0;
	}
	return -1;
}

/* The compressed field's bytes, if the packet has one: its field number, else 0. */
static uint32_t find_field(const uint8_t *p, size_t len, const uint8_t **data, size_t *n)
{
	size_t off = 0;
	uint64_t tag, v;

	while (off < len) {
		if (get_varint(p, len, &off, &tag))
			return 0;
		switch (tag & 7) {
		case 0:
			if (get_varint(p, len, &off, &v))
				return 0;
			continue;
		case 1:
			v = 8;
			break;
		case 5:
			v = 4;
			break;
		case 2:
			if (get_varint(p, len, &off, &v))
				return 0;
			break;
		default:
			return 0; /* the packet's own decoding reports it */
		}
		if (v > len - off)
			return 0;
		if ((tag & 7) == 2 && (tag >> 3 == F_COMPRESSED || tag >> 3 == F_ZSTD_COMPRESSED)) {
			*data = p + off;
			*n = (size_t)v;
			return (uint32_t)(tag >> 3);
		}
		off += v;
	}
	return 0;
}

/* Makes room for at least one more byte in *buf, within PACKET_DECOMPRESS_MAX. */
static int grow(uint8_t **buf, size_t *cap)
{
	size_t n = *cap ? *cap * 2 : 1u << 18;
	uint8_t *b;

	if (*cap >= PACKET_DECOMPRESS_MAX)
		return -EFBIG;
	if (n > PACKET_DECOMPRESS_MAX)
		n = PACKET_DECOMPRESS_MAX;
	b = realloc(*buf, n);
	if (!b)
		return -ENOMEM;
	*buf = b;
	*cap = n;
	return 0;
}

static int inflate_block(const uint8_t *in, size_t n, uint8_t **out, size_t *out_len,
			 const char **why)
{
	z_stream z = { 0 };
	size_t cap = 0;
	int zr = Z_OK, err = 0;

	*out = NULL;
	if (inflateInit2(&z, 32 + MAX_WBITS) != Z_OK) /* zlib or gzip header */
		return -ENOMEM;
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	while (zr == Z_OK) {
		if (z.total_out == cap && (err = grow(out, &cap)))
			break;
		z.next_out = *out + z.total_out;
		z.avail_out = (uInt)(cap - z.total_out);
		zr = inflate(&z, Z_NO_FLUSH);
		if (zr == Z_BUF_ERROR && z.avail_out == 0)
			zr = Z_OK; /* only out of room */
	}
	if (!err && zr != Z_STREAM_END) {
		err = -EBADMSG;
		*why = zr == Z_BUF_ERROR ? "truncated" : z.msg ? z.msg : "malformed";
	}
	*out_len = z.total_out;
	inflateEnd(&z);
	return err;
}

static int zstd_block(const uint8_t *in, size_t n, uint8_t **out, size_t *out_len,
		      const char **why)
{
	ZSTD_DStream *d = ZSTD_createDStream();
	ZSTD_inBuffer ib = { in, n, 0 };
	ZSTD_outBuffer ob = { NULL, 0, 0 };
	size_t cap = 0, r = 1;
	int err = 0;

	*out = NULL;
	if (!d)
		return -ENOMEM;
	ZSTD_initDStream(d);
	while (r != 0) {
		if (ob.pos == cap && (err = grow(out, &cap)))
			break;
		ob.dst = *out;
		ob.size = cap;
		r = ZSTD_decompressStream(d, &ob, &ib);
		if (ZSTD_isError(r)) {
			*why = ZSTD_getErrorName(r);
			err = -EBADMSG;
			break;
		}
		if (r != 0 && ib.pos == ib.size && ob.pos < ob.size) {
			*why = "truncated";
			err = -EBADMSG;
			break;
		}
	}
	*out_len = ob.pos;
	ZSTD_freeDStream(d);
	return err;
}

int packet_decompress(const uint8_t *p, size_t len, uint8_t **out, size_t *out_len, char *err,
		      size_t err_len)
{
	const char *codec, *why = "";
	const uint8_t *data = NULL;
	size_t n = 0;
	uint32_t field = find_field(p, len, &data, &n);
	int r;

	if (!field)
		return 0;
	codec = field == F_COMPRESSED ? "compressed_packets (deflate)" :
					"zstd_compressed_packets";
	r = field == F_COMPRESSED ? inflate_block(data, n, out, out_len, &why) :
				    zstd_block(data, n, out, out_len, &why);
	if (!r)
		return 1;
	free(*out);
	*out = NULL;
	if (r == -EFBIG)
		snprintf(err, err_len, "%s of %zu bytes inflate past %u MiB (skipped)", codec, n,
			 PACKET_DECOMPRESS_MAX >> 20);
	else if (r == -EBADMSG)
		snprintf(err, err_len, "%s of %zu bytes do not decompress: %s (skipped)", codec, n,
			 why);
	else
		snprintf(err, err_len, "%s: out of memory", codec);
	return r;
}

// SPDX-License-Identifier: MIT
/*
 * libFuzzer target for proto/frame.c's frame_reader. Input: an 8-byte seed,
 * then the byte stream, fed in pieces whose sizes (and the `want` asked of
 * frame_reader_space) come from the seed; whole frames are taken after each
 * piece. Checks the reader's bounds and that every byte fed is accounted for.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/frame.h"

#define CHECK(cond) ((cond) ? (void)0 : abort())

static volatile uint8_t sink; /* keeps the payload reads */

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Mostly small pieces, sometimes a big one, sometimes a single byte. */
static size_t piece_size(uint64_t *s)
{
	uint64_t r = next_rand(s);

	switch (r % 4) {
	case 0:
		return 1;
	case 1:
		return 1 + (r >> 8) % 16;
	case 2:
		return 1 + (r >> 8) % 512;
	default:
		return 1 + (r >> 8) % (32 << 10);
	}
}

/* What to ask frame_reader_space for: the piece, another size, or (rarely) far too much. */
static size_t want_size(size_t len, uint64_t *s)
{
	uint64_t r = next_rand(s) % 1024;

	if (r == 0)
		return SIZE_MAX;
	if (r == 1)
		return FRAME_READER_CAP_MAX;
	return r % 2 ? len : piece_size(s);
}

/* Takes every whole frame; returns the bytes they held, or -1 after a bad header. */
static long long take_frames(struct frame_reader *r)
{
	struct frame_header hdr;
	const uint8_t *payload;
	long long taken = 0;
	int ret;

	while ((ret = frame_reader_next(r, &hdr, &payload)) == 1) {
		CHECK(hdr.length <= FRAME_PAYLOAD_MAX && frame_type_known(hdr.type));
		for (size_t i = 0; i < hdr.length; i++) /* ASan checks every payload byte */
			sink ^= payload[i];
		taken += FRAME_HEADER_SIZE + hdr.length;
	}
	if (ret < 0) {
		CHECK(ret == -EPROTO || ret == -EMSGSIZE);
		return -1;
	}
	return taken;
}

/* Feeds one piece through frame_reader_space/commit; returns the bytes committed. */
static size_t feed_piece(struct frame_reader *r, const uint8_t *p, size_t len, uint64_t *seed)
{
	size_t want = want_size(len, seed), room, n;
	uint8_t *dst = frame_reader_space(r, want, &room);

	/* frames are drained after each piece, so the buffer is never full */
	CHECK(dst != NULL);
	CHECK(room > 0 && r->cap <= FRAME_READER_CAP_MAX);
	n = len < room ? len : room;
	memcpy(dst, p, n);
	frame_reader_commit(r, n);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frame_reader r;
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	size_t off = 8;
	long long fed = 0, taken = 0;

	if (size < 8)
		return 0;
	memcpy(&seed, data, 8);
	seed |= 1;
	frame_reader_init(&r);
	while (off < size) {
		size_t len = piece_size(&seed);
		long long t;

		if (len > size - off)
			len = size - off;
		len = feed_piece(&r, data + off, len, &seed);
		off += len;
		fed += (long long)len;
		t = take_frames(&r);
		if (t < 0)
			break;
		taken += t;
		CHECK(taken <= fed && fed - taken == (long long)(r.len - r.off));
	}
	frame_reader_free(&r);
	return 0;
}

/* SPDX-License-Identifier: MIT */
/*
 * One block deflated in zlib format by ISA-L's igzip, stateless: what a
 * TracePacket.compressed_packets holds. Shared by the writer's sink
 * (trace_sink.c) and bench/compress_cost.c, which measures its levels.
 */
#ifndef PROFD_IGZIP_BLOCK_H
#define PROFD_IGZIP_BLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <isa-l/igzip_lib.h>

/* The compressed size, or 0 when it does not fit in cap (or igzip fails). */
static inline size_t igzip_block(uint32_t level, uint8_t *level_buf, uint32_t level_buf_size,
				 const uint8_t *in, size_t n, uint8_t *out, size_t cap)
{
	struct isal_zstream z;

	isal_deflate_stateless_init(&z);
	z.gzip_flag = IGZIP_ZLIB;
	z.level = level;
	z.level_buf = level_buf;
	z.level_buf_size = level_buf_size;
	z.end_of_stream = 1;
	z.flush = NO_FLUSH;
	z.next_in = (uint8_t *)in;
	z.avail_in = (uint32_t)n;
	z.next_out = out;
	z.avail_out = (uint32_t)cap;
	return isal_deflate_stateless(&z) == COMP_OK ? z.total_out : 0;
}

#endif

/* SPDX-License-Identifier: MIT */
/*
 * Unwrapping of compressed TracePackets for the trace reader: a packet whose
 * compressed_packets (field 50, zlib/gzip deflate) or zstd_compressed_packets
 * (field 133) holds a run of `0A len TracePacket` records, which the
 * importer processes in order as if they were top-level. No global state.
 */
#ifndef PROFD_PACKET_DECOMPRESS_H
#define PROFD_PACKET_DECOMPRESS_H

#include <stddef.h>
#include <stdint.h>

/* Largest inflated block accepted (profd writes 256 KiB; Perfetto's service up to ~512 KB). */
#define PACKET_DECOMPRESS_MAX (64u << 20)

/*
 * For the TracePacket body p[0..len): 0 when it wraps no compressed packets;
 * 1 with *out (malloc'd, the caller frees) and *out_len the inflated records;
 * a negative errno with a one-line reason in err (a block that is malformed,
 * truncated or inflates past PACKET_DECOMPRESS_MAX; -ENOMEM).
 */
int packet_decompress(const uint8_t *p, size_t len, uint8_t **out, size_t *out_len, char *err,
		      size_t err_len);

#endif

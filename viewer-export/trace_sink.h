/* SPDX-License-Identifier: MIT */
/*
 * The Perfetto writer's output stage. It takes blocks of whole packets and
 * either writes them to the trace file as they come (plain, or each block
 * wrapped in one TracePacket.compressed_packets / zstd_compressed_packets
 * packet) or, as a flight recorder, keeps only the newest ring_bytes of them
 * in memory, in chunks that each decode alone after a header (see
 * perfetto_writer.h). Compression runs on one worker thread fed through a
 * bounded queue: the caller never waits for it while the queue has room, and
 * when the worker falls behind the caller compresses a queued block itself
 * (so the queue never grows and nothing is lost). Internal to viewer-export/.
 */
#ifndef PROFD_TRACE_SINK_H
#define PROFD_TRACE_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "viewer-export/perfetto_writer.h"

/* Raw bytes per compression block (bench/README.md: chosen from measurements). */
#define TRACE_SINK_BLOCK PERFETTO_BLOCK_BYTES

struct trace_sink;

/* ring_bytes 0: write to fd as blocks come. NULL with errno (ENOMEM, EINVAL) on failure. */
struct trace_sink *trace_sink_new(int fd, enum perfetto_compression comp, uint64_t ring_bytes);

/*
 * Queues p[0..n) (whole packet records, copied). A block larger than a
 * compressed wrapper may hold goes out uncompressed. Returns 0, or -ENOMEM
 * (the bytes are lost and counted as a write error).
 */
int trace_sink_put(struct trace_sink *s, const uint8_t *p, size_t n);

/*
 * Ring only: the next block put starts a new chunk, whose prologue (packets
 * that stand for the state before it: open slices) is p[0..n), copied.
 */
int trace_sink_chunk_begin(struct trace_sink *s, const uint8_t *p, size_t n);

/* Ring only: true once the chunk being filled holds its share of the ring. */
bool trace_sink_chunk_due(const struct trace_sink *s);

/* Emits the blocks already compressed, in order; never waits. */
void trace_sink_poll(struct trace_sink *s);

/* Emits every queued block, waiting for the worker (finish only). Returns the first write error. */
int trace_sink_drain(struct trace_sink *s);

/*
 * Ring only: writes header[0..hlen), the oldest chunk's prologue, every
 * block emitted so far and trailer[0..tlen) to fd. Returns the bytes written
 * or a negative errno (a failed write is cut back to whole packets when fd
 * is a file).
 */
int64_t trace_sink_write_ring(struct trace_sink *s, int fd, const uint8_t *header, size_t hlen,
			      const uint8_t *trailer, size_t tlen);

/* Bytes written to the sink's fd; raw bytes put; bytes stored (ring) or written after compression. */
struct trace_sink_stats {
	uint64_t bytes_written, raw_bytes, stored_bytes, ring_bytes_held;
	uint64_t blocks, blocks_helped; /* compressed; of them by the caller (worker behind) */
	uint64_t chunks_dropped;
	uint64_t cut_ns;  /* CLOCK_MONOTONIC when a write first failed (the file ends there), 0: never */
};
void trace_sink_get_stats(const struct trace_sink *s, struct trace_sink_stats *st);

/* First write error (positive errno), 0 if none. */
int trace_sink_write_error(const struct trace_sink *s);

bool trace_sink_is_ring(const struct trace_sink *s);

/* Drains (waits for the worker), stops it, frees. Does not close fd. Returns the first write error. */
int trace_sink_free(struct trace_sink *s);

#endif

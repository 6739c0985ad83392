/* SPDX-License-Identifier: MIT */
/*
 * The decompressed content of FRAME_EVENTS frames: a sequence of chunks,
 * each a fixed 24-byte header then its body. The agent writes it, the daemon
 * decodes it (daemon/event_decoder.c) treating every field as hostile.
 * One zstd stream per connection; each frame ends at a ZSTD_e_flush boundary,
 * so each frame decompresses to whole chunks.
 */
#ifndef PROFD_EVENT_WIRE_H
#define PROFD_EVENT_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* Wire values: never renumber. */
enum event_chunk_kind {
	EVENT_CHUNK_RECORDS = 1,     /* body: count 16-byte units (records, enter frames) of tid */
	EVENT_CHUNK_CLOCK_PAIR = 2,  /* body: struct event_clock_pair; every record before it has tsc <= pair.tsc */
	EVENT_CHUNK_THREAD_NAME = 3, /* body: 16 bytes, NUL-padded comm of tid */
	EVENT_CHUNK_THREAD_EXIT = 4, /* no body: tid will send no more records */
};

enum event_kind {
	EVENT_ENTER = 1,
	EVENT_EXIT = 2,
};

struct event_chunk_header {
	uint32_t kind;
	uint32_t tid;
	uint32_t count;      /* records in the body (EVENT_CHUNK_RECORDS), else 0 */
	uint32_t reserved;
	uint64_t drops;      /* cumulative events this thread dropped so far */
};

/*
 * One instrumented event: raw TSC, converted to CLOCK_MONOTONIC by the daemon.
 * An EVENT_ENTER record is always followed, in the same chunk, by a struct
 * event_enter_frame: the 16-byte units of a chunk's body are records and
 * frames, told apart by the top bit of their last 32-bit word.
 */
struct event_record {
	uint64_t tsc;
	uint32_t func_id;
	uint32_t kind;       /* enum event_kind; top bit clear */
};

/*
 * Where the entered call's return address lived and what it was before the
 * agent hijacked it: the daemon puts it back into sampled stacks (a sample
 * inside the call otherwise sees the exit trampoline instead of its caller).
 */
struct event_enter_frame {
	uint64_t return_address;
	uint64_t tagged_slot; /* slot address | EVENT_FRAME_TAG (user addresses are < 2^47) */
};

#define EVENT_FRAME_TAG (1ull << 63)

/* Whether a 16-byte unit of a records chunk is a struct event_enter_frame. */
static inline int event_unit_is_frame(const void *unit)
{
	uint64_t second;

	__builtin_memcpy(&second, (const uint8_t *)unit + 8, sizeof(second));
	return (second & EVENT_FRAME_TAG) != 0;
}

/* A TSC reading and the CLOCK_MONOTONIC time taken at the same instant. */
struct event_clock_pair {
	uint64_t tsc;
	uint64_t mono_ns;
};

#define EVENT_THREAD_NAME_LEN 16
/* One frame's decompressed size is at most this (zip-bomb bound for the daemon). */
#define EVENT_FRAME_DECOMPRESSED_MAX (16u << 20)

_Static_assert(sizeof(struct event_chunk_header) == 24, "wire layout");
_Static_assert(sizeof(struct event_record) == 16, "wire layout");
_Static_assert(sizeof(struct event_enter_frame) == 16, "wire layout");
_Static_assert(sizeof(struct event_clock_pair) == 16, "wire layout");

#endif

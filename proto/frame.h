/* SPDX-License-Identifier: MIT */
/*
 * Frames on every profd socket: an 8-byte header {type, payload length}
 * (little-endian, as on the only hosts that speak it) then the payload.
 * Owns the header layout, the type numbers and the size limits; pure code,
 * no I/O, so it can be fuzzed. Every length is checked before it is trusted.
 */
#ifndef PROFD_FRAME_H
#define PROFD_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Wire values: never renumber. */
enum frame_type {
	FRAME_RUN_REQUEST = 1,
	FRAME_SESSION_STARTED = 2,
	FRAME_TARGET_FORKED = 3,
	FRAME_SAMPLING_READY = 4,
	FRAME_TARGET_EXITED = 5,
	FRAME_SESSION_SUMMARY = 6,
	FRAME_ERROR = 7,
	FRAME_AGENT_GONE = 8, /* profd -> client: the agent left before the session ended */
	FRAME_STATUS_REQUEST = 9,  /* client -> profd, first and only frame: list sessions */
	FRAME_STATUS_REPLY = 10,
	FRAME_STOP_REQUEST = 11,   /* client -> profd, first and only frame: end a session */
	FRAME_STOP_REPLY = 12,
	FRAME_STOP_NOTICE = 13,    /* profd -> an attach client: someone stopped the session */
	FRAME_SNAPSHOT_REQUEST = 14, /* client -> profd, first and only frame (+ fd): ring window */
	FRAME_SNAPSHOT_REPLY = 15,
	FRAME_AGENT_HELLO = 16,
	FRAME_AGENT_CONFIG = 17,
	FRAME_FUNCTION_TABLE = 18,
	FRAME_EVENTS = 19, /* zstd stream chunk, flushed: see proto/event_wire.h */
	FRAME_AGENT_GOODBYE = 20,
	FRAME_EVENTS_RAW = 21, /* the same chunks, not compressed: see proto/event_wire.h */
	/* client -> profd (+ fd): the profd end of a socket pair the attach target made */
	FRAME_AGENT_LINK = 22,
	/*
	 * client -> profd (+ fd): the profd end of a socket pair the attach
	 * target made for its forked children (attach --children): each sends
	 * an FRAME_AGENT_LINK over it with the profd end of its own pair.
	 */
	FRAME_SPAWNER_LINK = 23,
	/*
	 * client -> profd: the session's exact figures now (LiveRequest), on the
	 * session's own connection, or first and only frame of a new one
	 * (profctl top --session). Answered with FRAME_LIVE_FIGURES.
	 */
	FRAME_LIVE_REQUEST = 24,
	FRAME_LIVE_FIGURES = 25,
	/*
	 * --auto-args, agent -> profd before it patches: the functions it will
	 * instrument (AutoArgsQuery); profd answers FRAME_AUTO_ARGS (AutoArgs)
	 * with what to capture for those DWARF describes. For a module loaded
	 * later the agent asks after patching, and once it has installed the
	 * answer says how many calls came before (FRAME_AUTO_ARGS_LATE,
	 * AutoArgsLate).
	 */
	FRAME_AUTO_ARGS_QUERY = 26,
	FRAME_AUTO_ARGS = 27,
	FRAME_AUTO_ARGS_LATE = 28,
	FRAME_TYPE_MAX = 29,
};

#define FRAME_HEADER_SIZE 8u
/* No control message or compressed event chunk is larger than this. */
#define FRAME_PAYLOAD_MAX (8u << 20)

struct frame_header {
	uint32_t type;
	uint32_t length;
};

/* Writes the header for (type, length) into out[FRAME_HEADER_SIZE]. */
void frame_header_encode(uint8_t *out, uint32_t type, uint32_t length);

/*
 * Parses a header from buf[0..len). Returns 0 on success, -EAGAIN when fewer
 * than FRAME_HEADER_SIZE bytes are there, -EPROTO for an unknown type and
 * -EMSGSIZE for a length over FRAME_PAYLOAD_MAX. On -EPROTO and -EMSGSIZE
 * *hdr still holds the raw values, for the caller's message.
 */
int frame_header_decode(const uint8_t *buf, size_t len, struct frame_header *hdr);

/* Short name of a frame type for messages ("events", "agent-hello", "unknown"). */
const char *frame_type_name(uint32_t type);

/* True for the types listed in enum frame_type. */
bool frame_type_known(uint32_t type);

/*
 * Incremental reader for a non-blocking stream: feed bytes as they arrive,
 * take whole frames out. Memory is bounded by FRAME_PAYLOAD_MAX + header;
 * consumed bytes are compacted away and a buffer grown for a big frame is
 * shrunk back once it has been taken. One reader per connection, not
 * thread-safe; the fields are private.
 */
struct frame_reader {
	uint8_t *buf;
	size_t len;  /* bytes in buf, consumed ones included */
	size_t cap;
	size_t off;  /* bytes at the front of buf already taken by frame_reader_next */
	bool keep;   /* frame_reader_keep */
};

/* Largest buffer frame_reader_space ever allocates. */
#define FRAME_READER_CAP_MAX (FRAME_HEADER_SIZE + FRAME_PAYLOAD_MAX)

void frame_reader_init(struct frame_reader *r);
void frame_reader_free(struct frame_reader *r);
/*
 * Reserves room for at least `want` more bytes and returns where to write
 * them (*room gets the room); NULL with errno = ENOMEM. At the memory bound
 * *room may be less than want; NULL with errno = ENOBUFS when the buffer is
 * full, which only happens while a whole frame is waiting in it (take it).
 */
uint8_t *frame_reader_space(struct frame_reader *r, size_t want, size_t *room);
/* Adds the n bytes written at the pointer frame_reader_space returned (n <= room). */
void frame_reader_commit(struct frame_reader *r, size_t n);
/*
 * Takes the next whole frame: 1 with *hdr and *payload (valid until the next
 * call on r), 0 when more bytes are needed, negative errno for a bad header
 * (the stream cannot be resynchronised: drop the connection). The header is
 * checked as soon as its 8 bytes are in, before any room is made for the
 * payload. The payload has no particular alignment: memcpy out of it.
 */
int frame_reader_next(struct frame_reader *r, struct frame_header *hdr, const uint8_t **payload);
/*
 * keep: r holds on to its buffer when it drains, instead of shrinking back
 * at once (for a peer that streams big frames: growing it again for every
 * frame faulted in and copied its pages, 7 % of profd's CPU under a busy
 * agent); frame_reader_trim gives the memory back once the peer is quiet.
 */
void frame_reader_keep(struct frame_reader *r, bool keep);
/* A drained reader's buffer back to its small size (best effort); a partial frame stays. */
void frame_reader_trim(struct frame_reader *r);
/* True when bytes of a frame not yet whole are waiting (after frame_reader_next said 0). */
bool frame_reader_partial(const struct frame_reader *r);

#endif

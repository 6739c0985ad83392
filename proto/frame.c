// SPDX-License-Identifier: MIT
/*
 * Frame header codec and the incremental frame reader (see proto/frame.h).
 * Pure code over caller bytes: no I/O, no logging, no global state. Every
 * header is validated before its length is used to size anything; memory
 * stays under FRAME_READER_CAP_MAX however hostile the stream.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/frame.h"

/* A reader keeps at most this much once its big frames are gone. */
#define FRAME_READER_CAP_KEEP (64u << 10)
#define FRAME_READER_CAP_MIN 4096u

_Static_assert(sizeof(struct frame_header) == FRAME_HEADER_SIZE, "wire layout");
_Static_assert(FRAME_READER_CAP_KEEP < FRAME_READER_CAP_MAX, "reader bounds");

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void frame_header_encode(uint8_t *out, uint32_t type, uint32_t length)
{
	put_le32(out, type);
	put_le32(out + 4, length);
}

int frame_header_decode(const uint8_t *buf, size_t len, struct frame_header *hdr)
{
	if (len < FRAME_HEADER_SIZE)
		return -EAGAIN;
	hdr->type = get_le32(buf);
	hdr->length = get_le32(buf + 4);
	if (!frame_type_known(hdr->type))
		return -EPROTO;
	if (hdr->length > FRAME_PAYLOAD_MAX)
		return -EMSGSIZE;
	return 0;
}

static const char *const frame_type_names[FRAME_TYPE_MAX] = {
	[FRAME_RUN_REQUEST] = "run-request",
	[FRAME_SESSION_STARTED] = "session-started",
	[FRAME_TARGET_FORKED] = "target-forked",
	[FRAME_SAMPLING_READY] = "sampling-ready",
	[FRAME_TARGET_EXITED] = "target-exited",
	[FRAME_SESSION_SUMMARY] = "session-summary",
	[FRAME_ERROR] = "error",
	[FRAME_AGENT_GONE] = "agent-gone",
	[FRAME_STATUS_REQUEST] = "status-request",
	[FRAME_STATUS_REPLY] = "status-reply",
	[FRAME_STOP_REQUEST] = "stop-request",
	[FRAME_STOP_REPLY] = "stop-reply",
	[FRAME_STOP_NOTICE] = "stop-notice",
	[FRAME_SNAPSHOT_REQUEST] = "snapshot-request",
	[FRAME_SNAPSHOT_REPLY] = "snapshot-reply",
	[FRAME_AGENT_HELLO] = "agent-hello",
	[FRAME_AGENT_CONFIG] = "agent-config",
	[FRAME_FUNCTION_TABLE] = "function-table",
	[FRAME_EVENTS] = "events",
	[FRAME_AGENT_GOODBYE] = "agent-goodbye",
	[FRAME_EVENTS_RAW] = "events-raw",
	[FRAME_AGENT_LINK] = "agent-link",
	[FRAME_SPAWNER_LINK] = "spawner-link",
	[FRAME_LIVE_REQUEST] = "live-request",
	[FRAME_LIVE_FIGURES] = "live-figures",
	[FRAME_AUTO_ARGS_QUERY] = "auto-args-query",
	[FRAME_AUTO_ARGS] = "auto-args",
	[FRAME_AUTO_ARGS_LATE] = "auto-args-late",
};

bool frame_type_known(uint32_t type)
{
	return type < FRAME_TYPE_MAX && frame_type_names[type] != NULL;
}

const char *frame_type_name(uint32_t type)
{
	return frame_type_known(type) ? frame_type_names[type] : "unknown";
}

void frame_reader_init(struct frame_reader *r)
{
	memset(r, 0, sizeof(*r));
}

void frame_reader_free(struct frame_reader *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

/* Moves the bytes not yet taken to the front of the buffer. */
static void frame_reader_compact(struct frame_reader *r)
{
	size_t pending = r->len - r->off;

	if (r->off == 0)
		return;
	if (pending)
		memmove(r->buf, r->buf + r->off, pending);
	r->len = pending;
	r->off = 0;
}

/* Gives back the memory of a big frame once little is buffered (best effort). */
static void frame_reader_shrink(struct frame_reader *r, size_t need)
{
	uint8_t *smaller;

	if (r->keep || r->cap <= FRAME_READER_CAP_KEEP || need > FRAME_READER_CAP_KEEP)
		return;
	assert(r->off == 0 && r->len <= need);
	smaller = realloc(r->buf, FRAME_READER_CAP_KEEP);
	if (!smaller)
		return;
	r->buf = smaller;
	r->cap = FRAME_READER_CAP_KEEP;
}

static int frame_reader_grow(struct frame_reader *r, size_t need)
{
	size_t cap = r->cap < FRAME_READER_CAP_MIN ? FRAME_READER_CAP_MIN : r->cap;
	uint8_t *bigger;

	assert(need <= FRAME_READER_CAP_MAX);
	while (cap < need)
		cap = cap > FRAME_READER_CAP_MAX / 2 ? FRAME_READER_CAP_MAX : cap * 2;
	bigger = realloc(r->buf, cap);
	if (!bigger)
		return -ENOMEM;
	r->buf = bigger;
	r->cap = cap;
	return 0;
}

void frame_reader_keep(struct frame_reader *r, bool keep)
{
	r->keep = keep;
}

void frame_reader_trim(struct frame_reader *r)
{
	bool keep = r->keep;

	if (r->off != r->len)
		return;
	r->off = r->len = 0;
	r->keep = false;
	frame_reader_shrink(r, 0);
	r->keep = keep;
}

uint8_t *frame_reader_space(struct frame_reader *r, size_t want, size_t *room)
{
	size_t need;

	*room = 0;
	frame_reader_compact(r);
	if (r->len >= FRAME_READER_CAP_MAX) {
		errno = ENOBUFS;
		return NULL;
	}
	if (want == 0)
		want = 1;
	need = want > FRAME_READER_CAP_MAX - r->len ? FRAME_READER_CAP_MAX : r->len + want;
	frame_reader_shrink(r, need);
	if (r->cap < need && frame_reader_grow(r, need) < 0) {
		errno = ENOMEM;
		return NULL;
	}
	*room = r->cap - r->len;
	return r->buf + r->len;
}

void frame_reader_commit(struct frame_reader *r, size_t n)
{
	assert(n <= r->cap - r->len);
	if (n > r->cap - r->len)
		n = r->cap - r->len;
	r->len += n;
}

int frame_reader_next(struct frame_reader *r, struct frame_header *hdr, const uint8_t **payload)
{
	size_t pending = r->len - r->off;
	const uint8_t *p;
	int err;

	if (pending == 0) {
		/* The previous payload is released by this call: drop what it held. */
		r->off = r->len = 0;
		frame_reader_shrink(r, 0);
		return 0;
	}
	p = r->buf + r->off;
	err = frame_header_decode(p, pending, hdr);
	if (err == -EAGAIN)
		return 0;
	if (err < 0)
		return err;
	if (pending - FRAME_HEADER_SIZE < hdr->length)
		return 0;
	*payload = p + FRAME_HEADER_SIZE;
	r->off += FRAME_HEADER_SIZE + (size_t)hdr->length;
	return 1;
}

bool frame_reader_partial(const struct frame_reader *r)
{
	return r->len > r->off;
}

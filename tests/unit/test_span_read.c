// SPDX-License-Identifier: MIT
/*
 * How far the flusher reads a span of a thread's ring (agent_thread.h
 * span_read_limit): to the committed head while the owner writes in the span,
 * to the span's end once the owner has moved on, and never to an end that a
 * ring switch stored before a siglongjmp cut it short of its publish.
 */
#include <stdint.h>

#include "agent/agent_thread.h"
#include "unit.h"

/* The owner in span 0, nothing stored: read to the head. */
static void test_owner_in_span(void)
{
	CHECK_EQ_U64(span_read_limit(0, 100, 0), 100);
	CHECK_EQ_U64(span_read_limit(3, 3 * SEGMENT_SPAN + 7, 0), 3 * SEGMENT_SPAN + 7);
}

/* A completed switch: the end (1 + the span's last position) bounds the read. */
static void test_owner_moved_on(void)
{
	uint64_t head = SEGMENT_SPAN + 40, end = 500 + 1;

	CHECK_EQ_U64(span_read_limit(0, head, end), 500);
	/* the next span, which the owner writes in: its head */
	CHECK_EQ_U64(span_read_limit(1, head, 0), head);
}

/*
 * A switch cut short: span 0's end stored at 500 (+1), then a siglongjmp out
 * of the handler before the head moved; the owner wrote on to 900 in span 0.
 * Everything up to 900 is to be read, and the span is not done (its segment
 * is still the owner's).
 */
static void test_switch_cut_short(void)
{
	uint64_t stored_end = 500 + 1, head = 900;
	uint64_t limit = span_read_limit(0, head, stored_end);

	CHECK_EQ_U64(limit, head);
	/* a reader at 500 has records left, it does not skip to the next span */
	CHECK(500 < limit);
	/* the owner's next switch completes from 900: the new end is taken */
	CHECK_EQ_U64(span_read_limit(0, SEGMENT_SPAN, 900 + 1), 900);
}

int main(void)
{
	RUN_TEST(test_owner_in_span);
	RUN_TEST(test_owner_moved_on);
	RUN_TEST(test_switch_cut_short);
	return unit_summary();
}

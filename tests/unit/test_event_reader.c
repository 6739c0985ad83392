// SPDX-License-Identifier: MIT
/*
 * Unit tests for daemon/events/event_decoder.h's reader, profd's per-event
 * path: event_reader_plain gives what event_reader_next gives, event for
 * event, on streams of every kind of item, in both kinds of EVENTS chunk
 * (event_reader_calls too, but for the frames it leaves out, and the
 * reader goes on from where it left as from event_reader_plain);
 * an ENTER_SEEN names only a frame its own chunk gave (proto/event_wire.h).
 */
#include "tests/unit/event_stream_fixture.h"

/* What one reader read: every event through one of the two calls. */
struct read_log {
	struct delivered_record *recs;
	size_t n, cap, plain;
	bool plain_first; /* event_reader_plain before event_reader_next */
	bool calls;       /* event_reader_calls instead: its events' frames logged as ~0 */
};

static void log_event(struct read_log *l, uint32_t tid, uint64_t mono, uint32_t func, uint32_t kind,
		      uint64_t ret, uint64_t slot, uint32_t n_values)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 1024;
		l->recs = realloc(l->recs, l->cap * sizeof(*l->recs));
	}
	if (kind != EVENT_ENTER)
		ret = slot = 0; /* an exit has no frame, whatever the reader left there */
	l->recs[l->n++] = (struct delivered_record){ tid, func, kind, mono, ret, slot, n_values, "" };
}

static int read_chunk(void *ctx, uint32_t tid, struct event_reader *r)
{
	struct read_log *l = ctx;
	struct decoded_value values[EVENT_VALUES_MAX];
	struct decoded_event ev;
	int got;

	for (size_t k = 0;; k++) {
		struct event_plain some[7];
		size_t n = l->calls ? event_reader_calls(r, some, 1 + k % 7) :
			   l->plain_first ? event_reader_plain(r, some, 1 + k % 7) : 0;

		for (size_t i = 0; i < n; i++)
			log_event(l, tid, some[i].mono_ns, some[i].func_id, some[i].kind,
				  l->calls ? ~0ull : some[i].return_address,
				  l->calls ? ~0ull : some[i].return_slot, 0);
		l->plain += n;
		if (n && !l->calls)
			continue; /* (after event_reader_calls, one event_reader_next: it reads the bases left) */
		got = event_reader_next(r, &ev, values);
		if (got <= 0)
			return got;
		log_event(l, tid, ev.mono_ns, ev.func_id, ev.kind, ev.return_address,
			  ev.return_slot, ev.n_values);
	}
}

static const struct event_decoder_callbacks chunk_cb = { .chunk = read_chunk };

/*
 * A random thread's calls: nested enters and exits, short and long deltas,
 * a few call sites per function (frames seen again and new ones), values on
 * some, into chunks of up to 700 items; clock pairs between the chunks.
 */
static void build_random_stream(struct builder *b, uint64_t *seed)
{
	static uint8_t body[800 * (EVENT_WORST + EVENT_VALUES_WORST)];
	static struct event_frames frames;
	uint64_t tsc = BASE_TSC + 5, mono = BASE_MONO;
	uint32_t stack[64], depth = 0;

	put_pair(b, BASE_TSC, BASE_MONO);
	for (int chunk = 0; chunk < 40; chunk++) {
		struct event_encoder enc = { .frames = chunk % 5 ? &frames : NULL, .words = chunk % 3 != 1 };
		uint8_t *p = body;
		uint32_t n = 1 + (uint32_t)(unit_rand(seed) % 700);

		event_frames_reset(&frames);
		for (uint32_t i = 0; i < n; i++) {
			uint64_t r = unit_rand(seed);
			/* mostly a few ns, now and then microseconds or milliseconds */
			uint64_t step = r % 16 ? 1 + r % 300 : r % 3 ? r % 100000 : r % 50000000;
			bool enter = depth == 0 || (depth < 64 && (r >> 20) % 2);
			uint32_t func = enter ? 1 + (uint32_t)((r >> 24) % 140) : stack[depth - 1];
			uint32_t site = (uint32_t)((r >> 40) % 3);

			tsc += step;
			if (enter) {
				stack[depth++] = func;
				p = event_encode(&enc, p, tsc, func, EVENT_ENTER,
						 test_return_address(func) + 16 * site,
						 test_return_slot(depth) - (r >> 50) % 2 * 0x100000);
			} else {
				depth--;
				p = event_encode(&enc, p, tsc, func, EVENT_EXIT, 0, 0);
			}
			if ((r >> 33) % 29 == 0) { /* a value after it */
				p = event_encode_values_tag(&enc, p, 1);
				p = event_put_varint(p, arg_item_desc(&(struct arg_item){
								.source = ARG_SRC_INT, .index = 1,
								.cls = ARG_CLASS_INT, .size = 8 }));
				p = event_put_varint(p, event_zigzag((int64_t)(r >> 3)));
			}
		}
		put_chunk(b, enc.words ? EVENT_CHUNK_EVENTS32 : EVENT_CHUNK_EVENTS, 9 + chunk % 3,
			  enc.count, 0, body, (size_t)(p - body));
		mono += 1 + (tsc - BASE_TSC) % 1000;
		if (chunk % 4 == 3) /* a new clock segment now and then, inside a frame too */
			put_pair(b, tsc + 1, BASE_MONO + (tsc + 1 - BASE_TSC) / 3 + chunk);
	}
	put_pair(b, tsc + 2, BASE_MONO + (tsc + 2 - BASE_TSC) / 3 + 1000);
}

static void check_plain_reads_as_next(bool calls)
{
	struct event_decoder *d1 = event_decoder_new(), *d2 = event_decoder_new(),
			     *d3 = event_decoder_new();
	struct read_log plain = { .plain_first = true, .calls = calls }, next = { 0 };
	size_t frames_checked = 0;
	struct recorder rec = { 0 };
	uint64_t seed = 0x7e57ab1e5eedull;
	struct builder b;

	builder_init(&b, 0);
	build_random_stream(&b, &seed);
	builder_flush(&b);
	CHECK_EQ_INT(event_decoder_feed(d1, b.out, b.out_len, &chunk_cb, &plain, last_err,
					sizeof(last_err)), 0);
	CHECK_EQ_INT(event_decoder_feed(d2, b.out, b.out_len, &chunk_cb, &next, last_err,
					sizeof(last_err)), 0);
	CHECK_EQ_INT(event_decoder_feed(d3, b.out, b.out_len, &record_cb, &rec, last_err,
					sizeof(last_err)), 0);
	if (last_err[0])
		fprintf(stderr, "  %s\n", last_err);
	CHECK(plain.n > 10000);
	CHECK_EQ_INT(plain.n, next.n);
	CHECK_EQ_INT(rec.n_recs, next.n);
	CHECK(plain.plain > plain.n / 4); /* the fast path did its share */
	CHECK(plain.plain < plain.n);     /* and not all */
	for (size_t i = 0; i < plain.n && i < next.n && i < rec.n_recs; i++) {
		const struct delivered_record *x = &plain.recs[i], *y = &next.recs[i],
					      *z = &rec.recs[i];
		/* event_reader_calls left it out: the frames of the events read after it tell */
		bool no_frame = calls && x->kind == EVENT_ENTER && x->return_address == ~0ull;

		frames_checked += calls && x->kind == EVENT_ENTER && !no_frame;
		if (x->tid != y->tid || x->func != y->func || x->kind != y->kind ||
		    x->mono != y->mono || (!no_frame && (x->return_address != y->return_address ||
							 x->return_slot != y->return_slot)) ||
		    x->n_values != y->n_values ||
		    y->func != z->func || y->mono != z->mono || y->kind != z->kind ||
		    y->n_values != z->n_values ||
		    (y->kind == EVENT_ENTER && (y->return_address != z->return_address ||
						y->return_slot != z->return_slot))) {
			fprintf(stderr, "  event %zu differs: func %u/%u/%u mono %" PRIu64
					"/%" PRIu64 "/%" PRIu64 "\n", i, x->func, y->func, z->func,
				x->mono, y->mono, z->mono);
			unit_check_failures++;
			break;
		}
	}
	if (calls) /* enters read by event_reader_next, with bases event_reader_calls left */
		CHECK(frames_checked > 1000);
	builder_fini(&b);
	event_decoder_free(d1);
	event_decoder_free(d2);
	event_decoder_free(d3);
	free(plain.recs);
	free(next.recs);
	recorder_free(&rec);
}

static void test_plain_reads_as_next(void)
{
	check_plain_reads_as_next(false);
}

static void test_calls_read_as_next(void)
{
	check_plain_reads_as_next(true);
}

/* One chunk of thread 4 (its last TSC under tsc + 1) between two clock pairs, fed to d, read into l. */
static void feed_chunk(struct event_decoder *d, struct read_log *l, const uint8_t *body,
		       size_t len, uint32_t count, bool words, uint64_t tsc)
{
	struct builder b;

	builder_init(&b, 0);
	put_pair(&b, BASE_TSC, BASE_MONO);
	put_pair(&b, tsc + 1, BASE_MONO + (tsc + 1 - BASE_TSC) / 2);
	put_chunk(&b, words ? EVENT_CHUNK_EVENTS32 : EVENT_CHUNK_EVENTS, 4, count, 0, body, len);
	builder_flush(&b);
	CHECK_EQ_INT(event_decoder_feed(d, b.out, b.out_len, &chunk_cb, l, last_err,
					sizeof(last_err)), 0);
	builder_fini(&b);
}

/*
 * event_reader_calls does not read a SEEN's frame, yet it is the base of
 * the next ENTER's: enters from new sites right after a loop's SEEN, one
 * inside the other (the second's base the first's), read by
 * event_reader_next after each batch.
 */
static void check_calls_bases(bool words)
{
	static struct event_frames frames;
	struct event_encoder enc = { .frames = &frames, .words = words };
	struct event_decoder *d = event_decoder_new();
	struct read_log l = { .plain_first = true, .calls = true };
	static uint8_t body[18000 * EVENT_WORST];
	uint8_t *p = body;
	uint64_t tsc = BASE_TSC + 10;
	size_t checked = 0;

	event_frames_reset(&frames);
	for (int i = 0; i < 3000; i++) { /* 9 and 7 sites inside: a SEEN or not, over 4 ways */
		p = event_encode(&enc, p, tsc += 40, 1, EVENT_ENTER, 0x401000, 0x7ffc1000);
		p = event_encode(&enc, p, tsc += 40, 2, EVENT_ENTER, 0x402000 + 16 * (i % 9),
				 0x7ffc0ff0 - 16 * (i % 5));
		p = event_encode(&enc, p, tsc += 40, 3, EVENT_ENTER, 0x403000 + 16 * (i % 7),
				 0x7ffc0f00 - 16 * (i % 3));
		p = event_encode(&enc, p, tsc += 40, 3, EVENT_EXIT, 0, 0);
		p = event_encode(&enc, p, tsc += 40, 2, EVENT_EXIT, 0, 0);
		p = event_encode(&enc, p, tsc += 40, 1, EVENT_EXIT, 0, 0);
	}
	feed_chunk(d, &l, body, (size_t)(p - body), enc.count, words, tsc);
	CHECK_EQ_INT(l.n, 18000);
	for (size_t i = 0; i < l.n; i++) {
		const struct delivered_record *x = &l.recs[i];
		uint64_t k = i / 6, ret[3] = { 0x401000, 0x402000 + 16 * (k % 9), 0x403000 + 16 * (k % 7) },
			 slot[3] = { 0x7ffc1000, 0x7ffc0ff0 - 16 * (k % 5), 0x7ffc0f00 - 16 * (k % 3) };

		if (x->kind != EVENT_ENTER || x->return_address == ~0ull)
			continue; /* an exit, or read by event_reader_calls */
		checked++;
		if (x->return_address != ret[i % 6] || x->return_slot != slot[i % 6]) {
			fprintf(stderr, "  event %zu: frame %#" PRIx64 " %#" PRIx64 "\n", i,
				x->return_address, x->return_slot);
			unit_check_failures++;
			break;
		}
	}
	CHECK(checked > 1000);
	event_decoder_free(d);
	free(l.recs);
}

static void test_calls_bases(void)
{
	check_calls_bases(false);
	check_calls_bases(true);
}

/*
 * A loop's enters go out as ENTER_SEEN: 2-3 bytes an event (4 in words),
 * and decode to the frames given.
 */
static void check_seen_frames_round_trip(bool words)
{
	static struct event_frames frames;
	struct event_encoder enc = { .frames = &frames, .words = words };
	struct event_decoder *d = event_decoder_new();
	struct read_log l = { .plain_first = true };
	static uint8_t body[6000 * EVENT_WORST];
	uint8_t *p = body;
	uint64_t tsc = BASE_TSC + 10;

	event_frames_reset(&frames);
	for (int i = 0; i < 1000; i++) { /* outer calls inner twice, from two sites */
		p = event_encode(&enc, p, tsc += 40, 1, EVENT_ENTER, 0x401000, 0x7ffc1000);
		p = event_encode(&enc, p, tsc += 40, 2, EVENT_ENTER, 0x402000, 0x7ffc0ff0);
		p = event_encode(&enc, p, tsc += 40, 2, EVENT_EXIT, 0, 0);
		p = event_encode(&enc, p, tsc += 40, 2, EVENT_ENTER, 0x402010, 0x7ffc0ff0);
		p = event_encode(&enc, p, tsc += 40, 2, EVENT_EXIT, 0, 0);
		p = event_encode(&enc, p, tsc += 40, 1, EVENT_EXIT, 0, 0);
	}
	CHECK((size_t)(p - body) <= 6000 * (words ? 4 : 3) + 20);
	feed_chunk(d, &l, body, (size_t)(p - body), enc.count, words, tsc);
	CHECK_EQ_INT(l.n, 6000);
	CHECK(l.plain >= 5990); /* all but the first few (the clock segment cached) */
	for (size_t i = 0; i < l.n; i += 6) {
		if (l.recs[i].return_address != 0x401000 || l.recs[i + 1].return_address != 0x402000 ||
		    l.recs[i + 3].return_address != 0x402010 ||
		    l.recs[i + 3].return_slot != 0x7ffc0ff0) {
			fprintf(stderr, "  call %zu: wrong frame\n", i / 6);
			unit_check_failures++;
			break;
		}
	}
	event_decoder_free(d);
	free(l.recs);
}

static void test_seen_frames_round_trip(void)
{
	check_seen_frames_round_trip(false);
	check_seen_frames_round_trip(true);
}

/* An EVENTS32 word with a wide tail decodes; cut short, or a VALUES word first, it does not. */
static void test_words_wide_and_hostile(void)
{
	struct event_decoder *d = event_decoder_new();
	struct read_log l = { .plain_first = true };
	uint8_t body[64], *p = body;
	struct event_encoder enc = { .words = true };
	struct builder b;

	p = event_encode(&enc, p, BASE_TSC + 10, 3, EVENT_ENTER, 0x401000, 0x7ffc1000);
	p = event_encode(&enc, p, BASE_TSC + 10 + 40000, 3, EVENT_EXIT, 0, 0); /* delta past 2^15 */
	p = event_encode(&enc, p, BASE_TSC + 10 + 40001, 20000, EVENT_ENTER, 1, 2); /* id past 2^14 */
	/* base 6; ENTER: word, frame 4 + 5; wide EXIT: word, 3 + 1; wide ENTER: word, 1 + 3, 4 + 5 */
	CHECK_EQ_INT(p - body, 6 + (4 + 4 + 5) + (4 + 3 + 1) + (4 + 1 + 3 + 4 + 5));
	builder_init(&b, 0);
	put_pair(&b, BASE_TSC, BASE_MONO);
	put_pair(&b, BASE_TSC + 50000, BASE_MONO + 25000);
	put_chunk(&b, EVENT_CHUNK_EVENTS32, 4, 3, 0, body, (size_t)(p - body));
	builder_flush(&b);
	CHECK_EQ_INT(event_decoder_feed(d, b.out, b.out_len, &chunk_cb, &l, last_err,
					sizeof(last_err)), 0);
	CHECK_EQ_INT(l.n, 3);
	if (l.n == 3) {
		CHECK_EQ_INT(l.recs[1].kind, EVENT_EXIT);
		CHECK_EQ_U64(l.recs[1].mono, BASE_MONO + 20005);
		CHECK_EQ_INT(l.recs[2].func, 20000);
		CHECK_EQ_U64(l.recs[2].return_slot, 2);
	}
	for (size_t cut = 1; cut < (size_t)(p - body); cut++)
		check_bad_body(EVENT_CHUNK_EVENTS32, 3, body, cut, "EVENTS32 body cut short");
	{
		const uint8_t values_first[4] = { 1 << 2 | EVENT_VALUES };

		check_bad_body(EVENT_CHUNK_EVENTS32, 1, values_first, 4, "a VALUES word first");
	}
	builder_fini(&b);
	event_decoder_free(d);
	free(l.recs);
}

/* A SEEN naming a way that holds nothing, or another function's frame: malformed. */
static void test_hostile_seen(void)
{
	static const struct {
		uint64_t v[10];
		size_t n;
		const char *what;
	} cases[] = {
		{ { BASE_TSC, EVENT_ENTER_SEEN, 3 << 2 }, 3, "a SEEN before any ENTER" },
		{ { BASE_TSC, EVENT_ENTER, 3, 2, 2, EVENT_ENTER_SEEN, 3 << 2 | 1 }, 7,
		  "a SEEN of an empty way" },
		{ { BASE_TSC, EVENT_ENTER, 3, 2, 2, EVENT_ENTER_SEEN, (3 + EVENT_FRAME_SETS) << 2 },
		  7, "a SEEN of another function of the set" },
		{ { BASE_TSC, EVENT_ENTER_SEEN, ((uint64_t)UINT32_MAX + 1) << 2 }, 3,
		  "a SEEN of a 33-bit function" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		check_bad_varints(EVENT_CHUNK_EVENTS, cases[i].n == 3 ? 1 : 2, cases[i].v,
				  cases[i].n, cases[i].what);
}

/* A chunk's frames are its own: a SEEN of a frame the chunk before gave is malformed. */
static void test_hostile_seen_across_chunks(void)
{
	const uint64_t first[] = { BASE_TSC + 20, EVENT_ENTER, 3, 2, 2 };
	const uint64_t second[] = { BASE_TSC + 30, EVENT_ENTER_SEEN, 3 << 2 };
	struct event_decoder *d = event_decoder_new();
	struct recorder r = { 0 };
	struct builder b;

	builder_init(&b, 0);
	put_valid_prefix(&b);
	put_varint_chunk(&b, EVENT_CHUNK_EVENTS, 1, first, 5);
	CHECK_EQ_INT(feed_frame(d, &b, &r), 0);
	put_varint_chunk(&b, EVENT_CHUNK_EVENTS, 1, second, 3);
	CHECK_EQ_INT(feed_frame(d, &b, &r), -EBADMSG);
	builder_fini(&b);
	event_decoder_free(d);
	recorder_free(&r);
}

int main(void)
{
	RUN_TEST(test_plain_reads_as_next);
	RUN_TEST(test_calls_read_as_next);
	RUN_TEST(test_calls_bases);
	RUN_TEST(test_seen_frames_round_trip);
	RUN_TEST(test_words_wide_and_hostile);
	RUN_TEST(test_hostile_seen);
	RUN_TEST(test_hostile_seen_across_chunks);
	return unit_summary();
}

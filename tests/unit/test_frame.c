// SPDX-License-Identifier: MIT
/*
 * Unit tests for proto/frame.c (header codec, incremental reader) and
 * proto/frame_io.c (blocking send/receive with a passed descriptor) over
 * socketpairs. Includes a small fuzz of the reader with hostile streams.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proto/frame.h"
#include "proto/frame_io.h"
#include "tests/unit/unit.h"

/* ---- helpers ---------------------------------------------------------------- */

static size_t put_frame(uint8_t *out, uint32_t type, const void *payload, uint32_t len)
{
	frame_header_encode(out, type, len);
	if (len)
		memcpy(out + FRAME_HEADER_SIZE, payload, len);
	return FRAME_HEADER_SIZE + len;
}

static void feed(struct frame_reader *r, const uint8_t *data, size_t len)
{
	while (len > 0) {
		size_t room, n;
		uint8_t *p = frame_reader_space(r, len, &room);

		CHECK(p != NULL);
		if (!p)
			return;
		n = len < room ? len : room;
		memcpy(p, data, n);
		frame_reader_commit(r, n);
		data += n;
		len -= n;
	}
}

static int count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- codec ----------------------------------------------------------------- */

static void test_encode_decode_round_trip(void)
{
	static const uint8_t expect[FRAME_HEADER_SIZE] = { 19, 0, 0, 0, 0x34, 0x12, 0x02, 0 };
	struct frame_header hdr = { 0 };
	uint8_t buf[FRAME_HEADER_SIZE];

	frame_header_encode(buf, FRAME_EVENTS, 0x21234);
	CHECK_MEM_EQ(buf, expect, sizeof(buf));
	CHECK_EQ_INT(frame_header_decode(buf, sizeof(buf), &hdr), 0);
	CHECK_EQ_INT(hdr.type, FRAME_EVENTS);
	CHECK_EQ_INT(hdr.length, 0x21234);
}

static void test_decode_short_header(void)
{
	struct frame_header hdr;
	uint8_t buf[FRAME_HEADER_SIZE];
	size_t len;

	frame_header_encode(buf, FRAME_ERROR, 3);
	for (len = 0; len < FRAME_HEADER_SIZE; len++)
		CHECK_EQ_INT(frame_header_decode(buf, len, &hdr), -EAGAIN);
}

static void test_decode_unknown_type(void)
{
	static const uint32_t bad[] = { 0, FRAME_TYPE_MAX, 0xffffffffu };
	struct frame_header hdr;
	uint8_t buf[FRAME_HEADER_SIZE];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		frame_header_encode(buf, bad[i], 0);
		CHECK_EQ_INT(frame_header_decode(buf, sizeof(buf), &hdr), -EPROTO);
		CHECK_EQ_INT(hdr.type, bad[i]);
		CHECK_EQ_STR(frame_type_name(bad[i]), "unknown");
	}
}

static void test_decode_oversized(void)
{
	struct frame_header hdr;
	uint8_t buf[FRAME_HEADER_SIZE];

	frame_header_encode(buf, FRAME_EVENTS, FRAME_PAYLOAD_MAX);
	CHECK_EQ_INT(frame_header_decode(buf, sizeof(buf), &hdr), 0);
	frame_header_encode(buf, FRAME_EVENTS, FRAME_PAYLOAD_MAX + 1);
	CHECK_EQ_INT(frame_header_decode(buf, sizeof(buf), &hdr), -EMSGSIZE);
	CHECK_EQ_U64(hdr.length, FRAME_PAYLOAD_MAX + 1);
	frame_header_encode(buf, FRAME_EVENTS, 0xffffffffu);
	CHECK_EQ_INT(frame_header_decode(buf, sizeof(buf), &hdr), -EMSGSIZE);
}

static void test_type_names(void)
{
	uint32_t t;
	int known = 0;

	CHECK_EQ_STR(frame_type_name(FRAME_EVENTS), "events");
	CHECK_EQ_STR(frame_type_name(FRAME_AGENT_HELLO), "agent-hello");
	CHECK_EQ_STR(frame_type_name(FRAME_RUN_REQUEST), "run-request");
	for (t = 0; t < FRAME_TYPE_MAX + 2; t++) {
		known += frame_type_known(t);
		CHECK(frame_type_known(t) == (strcmp(frame_type_name(t), "unknown") != 0));
	}
	CHECK_EQ_STR(frame_type_name(FRAME_EVENTS_RAW), "events-raw");
	CHECK_EQ_STR(frame_type_name(FRAME_SNAPSHOT_REQUEST), "snapshot-request");
	CHECK_EQ_STR(frame_type_name(FRAME_AGENT_LINK), "agent-link");
	CHECK_EQ_STR(frame_type_name(FRAME_SPAWNER_LINK), "spawner-link");
	CHECK_EQ_STR(frame_type_name(FRAME_LIVE_REQUEST), "live-request");
	CHECK_EQ_STR(frame_type_name(FRAME_LIVE_FIGURES), "live-figures");
	CHECK_EQ_STR(frame_type_name(FRAME_AUTO_ARGS_QUERY), "auto-args-query");
	CHECK_EQ_STR(frame_type_name(FRAME_AUTO_ARGS), "auto-args");
	CHECK_EQ_STR(frame_type_name(FRAME_AUTO_ARGS_LATE), "auto-args-late");
	CHECK_EQ_INT(known, 28); /* 1..28 */
}

/* ---- reader ---------------------------------------------------------------- */

/* Three frames of different sizes, one of them empty. */
static size_t sample_stream(uint8_t *out)
{
	size_t n = 0;

	n += put_frame(out + n, FRAME_AGENT_HELLO, "hello", 5);
	n += put_frame(out + n, FRAME_AGENT_GOODBYE, NULL, 0);
	n += put_frame(out + n, FRAME_EVENTS, "0123456789abcdefXYZ", 19);
	return n;
}

static void check_sample_frames(struct frame_reader *r, int *seen)
{
	struct frame_header hdr;
	const uint8_t *payload;
	int ret;

	while ((ret = frame_reader_next(r, &hdr, &payload)) == 1) {
		switch (*seen) {
		case 0:
			CHECK_EQ_INT(hdr.type, FRAME_AGENT_HELLO);
			CHECK_EQ_INT(hdr.length, 5);
			CHECK_MEM_EQ(payload, "hello", 5);
			break;
		case 1:
			CHECK_EQ_INT(hdr.type, FRAME_AGENT_GOODBYE);
			CHECK_EQ_INT(hdr.length, 0);
			break;
		case 2:
			CHECK_EQ_INT(hdr.type, FRAME_EVENTS);
			CHECK_EQ_INT(hdr.length, 19);
			CHECK_MEM_EQ(payload, "0123456789abcdefXYZ", 19);
			break;
		default:
			CHECK(!"extra frame");
		}
		(*seen)++;
	}
	CHECK_EQ_INT(ret, 0);
}

static void test_reader_byte_by_byte(void)
{
	struct frame_reader r;
	uint8_t stream[128];
	size_t len = sample_stream(stream), i;
	int seen = 0;

	frame_reader_init(&r);
	for (i = 0; i < len; i++) {
		feed(&r, stream + i, 1);
		check_sample_frames(&r, &seen);
	}
	CHECK_EQ_INT(seen, 3);
	frame_reader_free(&r);
}

static void test_reader_frames_in_one_chunk(void)
{
	struct frame_reader r;
	uint8_t stream[128];
	size_t len = sample_stream(stream);
	int seen = 0;

	frame_reader_init(&r);
	feed(&r, stream, len);
	check_sample_frames(&r, &seen);
	CHECK_EQ_INT(seen, 3);
	frame_reader_free(&r);
}

static void test_reader_truncated_needs_more(void)
{
	struct frame_reader r;
	struct frame_header hdr;
	const uint8_t *payload;
	uint8_t stream[64];
	size_t len = put_frame(stream, FRAME_ERROR, "bad things", 10);

	frame_reader_init(&r);
	CHECK_EQ_INT(frame_reader_next(&r, &hdr, &payload), 0);
	feed(&r, stream, 4);
	CHECK_EQ_INT(frame_reader_next(&r, &hdr, &payload), 0);
	feed(&r, stream + 4, len - 5);
	CHECK_EQ_INT(frame_reader_next(&r, &hdr, &payload), 0);
	feed(&r, stream + len - 1, 1);
	CHECK_EQ_INT(frame_reader_next(&r, &hdr, &payload), 1);
	CHECK_EQ_INT(hdr.type, FRAME_ERROR);
	CHECK_MEM_EQ(payload, "bad things", 10);
	CHECK_EQ_INT(frame_reader_next(&r, &hdr, &payload), 0);
	frame_reader_free(&r);
}

static void test_reader_rejects_oversized_before_alloc(void)
{
	struct frame_reader r;
	struct frame_header hdr;
	const uint8_t *payload;
	uint8_t head[FRAME_HEADER_SIZE];

	frame_reader_init(&r);
	frame_header_encode(head, FRAME_EVENTS, FRAME_PAYLOAD_MAX + 1);
	feed(&r, head, sizeof(head));
	CHECK_EQ_INT(frame_reader_next(&r, &hdr, &payload), -EMSGSIZE);
	CHECK(r.cap <= 64 * 1024);
	/* Sticky: the stream cannot be resynchronised. */
	CHECK_EQ_INT(frame_reader_next(&r, &hdr, &payload), -EMSGSIZE);
	frame_reader_free(&r);
}

static void test_reader_unknown_type(void)
{
	struct frame_reader r;
	struct frame_header hdr;
	const uint8_t *payload;
	uint8_t head[FRAME_HEADER_SIZE];

	frame_reader_init(&r);
	frame_header_encode(head, 99, 4);
	feed(&r, head, sizeof(head));
	CHECK_EQ_INT(frame_reader_next(&r, &hdr, &payload), -EPROTO);
	CHECK_EQ_INT(hdr.type, 99);
	frame_reader_free(&r);
}

/* 10,000 small frames read 1000 bytes at a time: the buffer stays small. */
static void test_reader_memory_reused(void)
{
	uint8_t *stream = malloc(10000 * 32);
	struct frame_reader r;
	struct frame_header hdr;
	const uint8_t *payload;
	size_t len = 0, off, max_cap = 0;
	uint32_t i, seen = 0;

	CHECK(stream != NULL);
	if (!stream)
		return;
	for (i = 0; i < 10000; i++)
		len += put_frame(stream + len, FRAME_EVENTS, &i, sizeof(i));
	frame_reader_init(&r);
	for (off = 0; off < len; off += 1000) {
		feed(&r, stream + off, len - off < 1000 ? len - off : 1000);
		max_cap = r.cap > max_cap ? r.cap : max_cap;
		while (frame_reader_next(&r, &hdr, &payload) == 1) {
			uint32_t v;

			memcpy(&v, payload, sizeof(v));
			CHECK_EQ_INT(v, seen);
			seen++;
		}
	}
	CHECK_EQ_INT(seen, 10000);
	CHECK(max_cap <= 4096);
	frame_reader_free(&r);
	free(stream);
}

/* A 1 MiB frame grows the buffer; it shrinks back once the frame is taken. */
static void test_reader_shrinks_after_big_frame(void)
{
	const uint32_t big = 1u << 20;
	uint8_t *stream = calloc(1, FRAME_HEADER_SIZE + big);
	struct frame_reader r;
	struct frame_header hdr;
	const uint8_t *payload;
	size_t room;

	CHECK(stream != NULL);
	if (!stream)
		return;
	frame_header_encode(stream, FRAME_FUNCTION_TABLE, big);
	frame_reader_init(&r);
	feed(&r, stream, FRAME_HEADER_SIZE + big);
	CHECK(r.cap >= FRAME_HEADER_SIZE + big);
	CHECK_EQ_INT(frame_reader_next(&r, &hdr, &payload), 1);
	CHECK_EQ_INT(hdr.length, big);
	CHECK_EQ_INT(frame_reader_next(&r, &hdr, &payload), 0);
	CHECK(r.cap <= 64 * 1024);
	CHECK(frame_reader_space(&r, 100, &room) != NULL);
	CHECK(r.cap <= 64 * 1024);
	frame_reader_free(&r);
	free(stream);
}

/* The buffer never exceeds its bound, even when the caller asks for more. */
static void test_reader_space_bounded(void)
{
	struct frame_reader r;
	uint8_t *p;
	size_t room;

	frame_reader_init(&r);
	p = frame_reader_space(&r, SIZE_MAX, &room);
	CHECK(p != NULL);
	CHECK_EQ_U64(room, FRAME_READER_CAP_MAX);
	memset(p, 0, FRAME_HEADER_SIZE);
	frame_header_encode(p, FRAME_EVENTS, FRAME_PAYLOAD_MAX);
	frame_reader_commit(&r, room);
	errno = 0;
	CHECK(frame_reader_space(&r, 1, &room) == NULL);
	CHECK_EQ_INT(errno, ENOBUFS);
	CHECK_EQ_U64(room, 0);
	frame_reader_free(&r);
}

/* Mutated streams in random chunk sizes: only 1, 0, -EPROTO or -EMSGSIZE. */
static void fuzz_one_stream(uint64_t *seed)
{
	uint8_t stream[4096];
	struct frame_reader r;
	struct frame_header hdr;
	const uint8_t *payload;
	size_t len = 0, off = 0, i;
	int ret = 0;

	static const uint8_t filler[48] = "mutated frames, random chunks, hostile lengths";

	while (len + 64 < sizeof(stream))
		len += put_frame(stream + len, 1 + unit_rand(seed) % 20, filler,
				 unit_rand(seed) % sizeof(filler));
	for (i = 0; i < 1 + unit_rand(seed) % 4; i++)
		stream[unit_rand(seed) % len] ^= (uint8_t)(1u << (unit_rand(seed) % 8));
	frame_reader_init(&r);
	while (off < len && ret >= 0) {
		size_t chunk = 1 + unit_rand(seed) % 300;

		chunk = chunk > len - off ? len - off : chunk;
		feed(&r, stream + off, chunk);
		off += chunk;
		while ((ret = frame_reader_next(&r, &hdr, &payload)) == 1)
			CHECK(payload + hdr.length <= r.buf + r.len);
	}
	CHECK(ret == 0 || ret == -EPROTO || ret == -EMSGSIZE);
	CHECK(r.cap <= FRAME_READER_CAP_MAX);
	frame_reader_free(&r);
}

static void test_reader_fuzz(void)
{
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	int i;

	for (i = 0; i < 2000; i++)
		fuzz_one_stream(&seed);
}

/* ---- blocking I/O ------------------------------------------------------------ */

static void test_send_recv_with_fd(void)
{
	int sv[2], pipefd[2], got_fd = -2;
	struct frame_header hdr;
	uint8_t *payload = NULL;
	char back[8] = { 0 };

	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	CHECK_EQ_INT(pipe2(pipefd, O_CLOEXEC), 0);
	CHECK_EQ_INT(frame_send(sv[0], FRAME_RUN_REQUEST, "run!", 4, pipefd[1]), 0);
	close(pipefd[1]);
	CHECK_EQ_INT(frame_recv(sv[1], &hdr, &payload, &got_fd, 1000), 0);
	CHECK_EQ_INT(hdr.type, FRAME_RUN_REQUEST);
	CHECK_EQ_INT(hdr.length, 4);
	CHECK(payload && memcmp(payload, "run!", 4) == 0);
	CHECK(got_fd >= 0);
	CHECK(fcntl(got_fd, F_GETFD) & FD_CLOEXEC);
	CHECK_EQ_INT(write(got_fd, "pipe", 4), 4);
	close(got_fd);
	CHECK_EQ_INT(read(pipefd[0], back, sizeof(back)), 4);
	CHECK_EQ_STR(back, "pipe");
	free(payload);
	close(pipefd[0]);
	close(sv[0]);
	close(sv[1]);
}

static void test_send_recv_empty_no_fd(void)
{
	int sv[2], got_fd = -2;
	struct frame_header hdr;
	uint8_t *payload = NULL;

	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	CHECK_EQ_INT(frame_send(sv[0], FRAME_AGENT_GOODBYE, NULL, 0, -1), 0);
	CHECK_EQ_INT(frame_recv(sv[1], &hdr, &payload, &got_fd, -1), 0);
	CHECK_EQ_INT(hdr.type, FRAME_AGENT_GOODBYE);
	CHECK_EQ_INT(hdr.length, 0);
	CHECK(payload != NULL);
	CHECK_EQ_INT(got_fd, -1);
	free(payload);
	close(sv[0]);
	close(sv[1]);
}

static void test_send_rejects_bad_frames(void)
{
	int sv[2];

	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	CHECK_EQ_INT(frame_send(sv[0], 42, "x", 1, -1), -EPROTO);
	CHECK_EQ_INT(frame_send(sv[0], FRAME_EVENTS, "x", (size_t)FRAME_PAYLOAD_MAX + 1, -1),
		     -EMSGSIZE);
	CHECK_EQ_INT(frame_send(sv[0], FRAME_EVENTS, NULL, 1, -1), -EINVAL);
	close(sv[1]);
	CHECK_EQ_INT(frame_send(sv[0], FRAME_EVENTS, "x", 1, -1), -EPIPE);
	close(sv[0]);
}

struct big_sender {
	int fd;
	const uint8_t *data;
	size_t len;
	int ret;
};

static void *big_sender_run(void *arg)
{
	struct big_sender *s = arg;

	s->ret = frame_send(s->fd, FRAME_EVENTS, s->data, s->len, -1);
	return NULL;
}

/* A payload far larger than the socket buffer: partial writes are resumed. */
static void test_send_recv_large(void)
{
	struct big_sender s = { .len = 3u << 20 };
	uint8_t *data = malloc(s.len), *payload = NULL;
	struct frame_header hdr;
	pthread_t thread;
	int sv[2];
	size_t i;

	CHECK(data != NULL);
	if (!data)
		return;
	for (i = 0; i < s.len; i++)
		data[i] = (uint8_t)(i * 131 + (i >> 12));
	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	s.fd = sv[0];
	s.data = data;
	CHECK_EQ_INT(pthread_create(&thread, NULL, big_sender_run, &s), 0);
	CHECK_EQ_INT(frame_recv(sv[1], &hdr, &payload, NULL, 10000), 0);
	pthread_join(thread, NULL);
	CHECK_EQ_INT(s.ret, 0);
	CHECK_EQ_U64(hdr.length, s.len);
	CHECK(payload && memcmp(payload, data, s.len) == 0);
	free(payload);
	free(data);
	close(sv[0]);
	close(sv[1]);
}

static void test_recv_timeout(void)
{
	int sv[2];
	struct frame_header hdr;
	uint8_t *payload = (uint8_t *)1;
	int64_t start;

	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	start = now_ms();
	CHECK_EQ_INT(frame_recv(sv[1], &hdr, &payload, NULL, 100), -ETIMEDOUT);
	CHECK(now_ms() - start >= 90);
	CHECK(payload == NULL);
	/* Still in sync after a timeout with nothing received. */
	CHECK_EQ_INT(frame_send(sv[0], FRAME_ERROR, "e", 1, -1), 0);
	CHECK_EQ_INT(frame_recv(sv[1], &hdr, &payload, NULL, 100), 0);
	CHECK_EQ_INT(hdr.type, FRAME_ERROR);
	free(payload);
	close(sv[0]);
	close(sv[1]);
}

static void test_recv_stalled_frame(void)
{
	int sv[2];
	struct frame_header hdr;
	uint8_t *payload = NULL;
	uint8_t head[FRAME_HEADER_SIZE + 2];

	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	frame_header_encode(head, FRAME_EVENTS, 10);
	memcpy(head + FRAME_HEADER_SIZE, "ab", 2);
	CHECK_EQ_INT(write(sv[0], head, sizeof(head)), sizeof(head));
	CHECK_EQ_INT(frame_recv(sv[1], &hdr, &payload, NULL, 50), -EBADMSG);
	CHECK(payload == NULL);
	close(sv[0]);
	close(sv[1]);
}

static void test_recv_eof(void)
{
	int sv[2];
	struct frame_header hdr;
	uint8_t *payload = NULL;
	uint8_t head[FRAME_HEADER_SIZE];

	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	close(sv[0]);
	CHECK_EQ_INT(frame_recv(sv[1], &hdr, &payload, NULL, 1000), -ECONNRESET);
	close(sv[1]);

	/* EOF inside a frame. */
	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	frame_header_encode(head, FRAME_EVENTS, 100);
	CHECK_EQ_INT(write(sv[0], head, sizeof(head)), sizeof(head));
	close(sv[0]);
	CHECK_EQ_INT(frame_recv(sv[1], &hdr, &payload, NULL, -1), -ECONNRESET);
	CHECK(payload == NULL);
	close(sv[1]);
}

static void test_recv_bad_headers(void)
{
	int sv[2], got_fd = -2, before = count_open_fds();
	struct frame_header hdr;
	uint8_t *payload = NULL;
	uint8_t head[FRAME_HEADER_SIZE];

	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	frame_header_encode(head, FRAME_EVENTS, FRAME_PAYLOAD_MAX + 1);
	CHECK_EQ_INT(write(sv[0], head, sizeof(head)), sizeof(head));
	CHECK_EQ_INT(frame_recv(sv[1], &hdr, &payload, &got_fd, 1000), -EMSGSIZE);
	CHECK_EQ_U64(hdr.length, FRAME_PAYLOAD_MAX + 1);
	CHECK(payload == NULL);
	CHECK_EQ_INT(got_fd, -1);
	close(sv[0]);
	close(sv[1]);

	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	frame_header_encode(head, 77, 0);
	CHECK_EQ_INT(write(sv[0], head, sizeof(head)), sizeof(head));
	CHECK_EQ_INT(frame_recv(sv[1], &hdr, &payload, &got_fd, 1000), -EPROTO);
	CHECK_EQ_INT(hdr.type, 77);
	close(sv[0]);
	close(sv[1]);
	CHECK_EQ_INT(count_open_fds(), before);
}

/* Sends a one-byte frame with two descriptors attached, by hand. */
static void send_two_fds(int sock, int a, int b)
{
	union {
		char buf[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	uint8_t frame[FRAME_HEADER_SIZE + 1];
	struct iovec iov = { .iov_base = frame, .iov_len = sizeof(frame) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
	int fds[2] = { a, b };

	put_frame(frame, FRAME_AGENT_CONFIG, "c", 1);
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cmsg), fds, sizeof(fds));
	CHECK_EQ_INT(sendmsg(sock, &msg, 0), sizeof(frame));
}

static void test_recv_closes_extra_fds(void)
{
	int sv[2], pipefd[2], got_fd = -2, before;
	struct frame_header hdr;
	uint8_t *payload = NULL;

	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	CHECK_EQ_INT(pipe2(pipefd, O_CLOEXEC), 0);
	before = count_open_fds();
	send_two_fds(sv[0], pipefd[0], pipefd[1]);
	CHECK_EQ_INT(frame_recv(sv[1], &hdr, &payload, &got_fd, 1000), 0);
	CHECK(got_fd >= 0);
	CHECK_EQ_INT(count_open_fds(), before + 1);
	close(got_fd);
	free(payload);

	/* Nobody asked for a descriptor: both are closed. */
	send_two_fds(sv[0], pipefd[0], pipefd[1]);
	CHECK_EQ_INT(frame_recv(sv[1], &hdr, &payload, NULL, 1000), 0);
	CHECK_EQ_INT(count_open_fds(), before);
	free(payload);
	close(pipefd[0]);
	close(pipefd[1]);
	close(sv[0]);
	close(sv[1]);
}

static void test_take_passed_fd(void)
{
	union frame_cmsg {
		char buf[FRAME_IO_CMSG_SPACE];
		struct cmsghdr align;
	} ctl;
	uint8_t data[64];
	struct iovec iov = { .iov_base = data, .iov_len = sizeof(data) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf,
			      .msg_controllen = sizeof(ctl.buf) };
	int sv[2], pipefd[2], before, fd;

	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	CHECK_EQ_INT(pipe2(pipefd, O_CLOEXEC), 0);
	before = count_open_fds();
	send_two_fds(sv[0], pipefd[0], pipefd[1]);
	CHECK_EQ_INT(recvmsg(sv[1], &msg, MSG_CMSG_CLOEXEC), FRAME_HEADER_SIZE + 1);
	fd = frame_take_passed_fd(&msg);
	CHECK(fd >= 0);
	CHECK_EQ_INT(count_open_fds(), before + 1);
	CHECK_EQ_INT(frame_take_passed_fd(&msg), -ENOENT);
	close(fd);

	msg.msg_control = ctl.buf;
	msg.msg_controllen = sizeof(ctl.buf);
	CHECK_EQ_INT(write(sv[0], "x", 1), 1);
	CHECK_EQ_INT(recvmsg(sv[1], &msg, 0), 1);
	CHECK_EQ_INT(frame_take_passed_fd(&msg), -ENOENT);
	close(pipefd[0]);
	close(pipefd[1]);
	close(sv[0]);
	close(sv[1]);
}

/* The frame next on fd: its type, length and first payload byte (-1 when empty). */
static void check_next_frame(int fd, uint32_t type, uint32_t len, int first)
{
	struct frame_header hdr;
	uint8_t *payload = NULL;

	CHECK_EQ_INT(frame_recv(fd, &hdr, &payload, NULL, 1000), 0);
	CHECK_EQ_INT(hdr.type, type);
	CHECK_EQ_INT(hdr.length, len);
	CHECK_EQ_INT(len ? payload[0] : -1, first);
	free(payload);
}

static void test_batch_one_write_in_order(void)
{
	uint8_t buf[256], a[10] = { 0xa }, b[100] = { 0xb }, c[300] = { 0xc }, peek;
	struct frame_batch batch = { .buf = buf, .cap = sizeof(buf) };
	int sv[2];

	CHECK_EQ_INT(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	batch.fd = sv[0];
	CHECK_EQ_INT(frame_batch_add(&batch, FRAME_FUNCTION_TABLE, a, sizeof(a)), 0);
	CHECK_EQ_INT(frame_batch_add(&batch, FRAME_EVENTS_RAW, b, sizeof(b)), 0);
	CHECK_EQ_INT(frame_batch_add(&batch, FRAME_AGENT_GOODBYE, NULL, 0), 0);
	/* nothing written before the flush */
	CHECK_EQ_INT(recv(sv[1], &peek, 1, MSG_PEEK | MSG_DONTWAIT), -1);
	CHECK_EQ_INT(frame_batch_flush(&batch), 0);
	CHECK_EQ_INT(batch.len, 0);
	check_next_frame(sv[1], FRAME_FUNCTION_TABLE, sizeof(a), 0xa);
	check_next_frame(sv[1], FRAME_EVENTS_RAW, sizeof(b), 0xb);
	check_next_frame(sv[1], FRAME_AGENT_GOODBYE, 0, -1);
	/* one that does not fit after the queue sends it first; one larger than all, alone */
	CHECK_EQ_INT(frame_batch_add(&batch, FRAME_FUNCTION_TABLE, b, sizeof(b)), 0);
	CHECK_EQ_INT(frame_batch_add(&batch, FRAME_EVENTS_RAW, c, 200), 0);
	CHECK_EQ_INT(batch.len, FRAME_HEADER_SIZE + 200);
	CHECK_EQ_INT(frame_batch_add(&batch, FRAME_EVENTS_RAW, c, 250), 0);
	CHECK_EQ_INT(batch.len, 0);
	CHECK_EQ_INT(frame_batch_add(&batch, FRAME_AGENT_GOODBYE, a, 1), 0);
	CHECK_EQ_INT(frame_batch_flush(&batch), 0);
	check_next_frame(sv[1], FRAME_FUNCTION_TABLE, sizeof(b), 0xb);
	check_next_frame(sv[1], FRAME_EVENTS_RAW, 200, 0xc);
	check_next_frame(sv[1], FRAME_EVENTS_RAW, 250, 0xc);
	check_next_frame(sv[1], FRAME_AGENT_GOODBYE, 1, 0xa);
	CHECK_EQ_INT(frame_batch_add(&batch, 0xffff, a, 1), -EPROTO);
	CHECK_EQ_INT(batch.len, 0);
	close(sv[1]);
	CHECK_EQ_INT(frame_batch_add(&batch, FRAME_AGENT_GOODBYE, a, 1), 0);
	CHECK_EQ_INT(frame_batch_flush(&batch), -EPIPE);
	close(sv[0]);
}

int main(void)
{
	RUN_TEST(test_encode_decode_round_trip);
	RUN_TEST(test_decode_short_header);
	RUN_TEST(test_decode_unknown_type);
	RUN_TEST(test_decode_oversized);
	RUN_TEST(test_type_names);
	RUN_TEST(test_reader_byte_by_byte);
	RUN_TEST(test_reader_frames_in_one_chunk);
	RUN_TEST(test_reader_truncated_needs_more);
	RUN_TEST(test_reader_rejects_oversized_before_alloc);
	RUN_TEST(test_reader_unknown_type);
	RUN_TEST(test_reader_memory_reused);
	RUN_TEST(test_reader_shrinks_after_big_frame);
	RUN_TEST(test_reader_space_bounded);
	RUN_TEST(test_reader_fuzz);
	RUN_TEST(test_send_recv_with_fd);
	RUN_TEST(test_send_recv_empty_no_fd);
	RUN_TEST(test_send_rejects_bad_frames);
	RUN_TEST(test_send_recv_large);
	RUN_TEST(test_recv_timeout);
	RUN_TEST(test_recv_stalled_frame);
	RUN_TEST(test_recv_eof);
	RUN_TEST(test_recv_bad_headers);
	RUN_TEST(test_recv_closes_extra_fds);
	RUN_TEST(test_take_passed_fd);
	RUN_TEST(test_batch_one_write_in_order);
	return unit_summary();
}

/* SPDX-License-Identifier: MIT */
/*
 * The writer's output stage (see trace_sink.h): the block queue, the
 * compression worker, the file writes (whole packets only: a write that
 * fails midway is cut back) and the flight recorder's chunks. Blocks leave
 * in the order they came, whoever compressed them. Never logs, never exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "viewer-export/igzip_block.h"
#include "viewer-export/perfetto_intern.h"
#include "viewer-export/trace_sink.h"

/*
 * Encoders and levels from bench/README.md (compress_cost on a python
 * trace, 256 KiB blocks): deflate by ISA-L's igzip at level 1, 1.25 us per
 * KiB in for 0.155 of it out, where zlib's cheapest useful level (2) costs
 * 3.6 us for 0.111: both far under 4 bytes per event, and igzip keeps
 * compression at zstd's cost. zstd 1-3 cost the same; 3 is a little smaller.
 */
#define SINK_IGZIP_LEVEL 1
#define SINK_IGZIP_LEVEL_BUF ISAL_DEF_LVL1_DEFAULT
#define SINK_ZSTD_LEVEL 3
/* A wrapper packet must stay under 512 KB with its tag and length (perfetto-format.md §1.1). */
#define SINK_MAX_RAW (448u * 1024u)
#define SINK_QUEUE 16  /* blocks in flight: 4 MiB raw, ~20 ms of work at 200 MB/s */
#define SINK_HDR 16    /* room for the wrapper's header in front of the compressed bytes */
#define SINK_CHUNKS_PER_RING 16
/*
 * A trace file gets its blocks ahead of its writes, this many bytes at a
 * time (past its end: its size stays that of what was written): ext4's
 * per-page block reservation on each write was a third of the cost of
 * writing the trace (0.38 -> 0.27 ns/byte, bench/README.md). What the file
 * did not use is given back when the sink is freed.
 */
#define SINK_PREALLOC_STEP (32u << 20)

enum { JOB_FREE, JOB_PENDING, JOB_BUSY, JOB_DONE };

struct sink_job {
	int state;
	uint8_t *raw;
	size_t raw_len, raw_cap;
	uint8_t *out;     /* what is emitted: out + out_off, out_len bytes */
	size_t out_off, out_len, out_cap;
	uint8_t *prologue; /* ring: this block starts a chunk with this prologue (owned) */
	size_t prologue_len;
	bool starts_chunk;
};

/* One compressor per thread that compresses: the worker's and the caller's. */
struct sink_codec {
	uint8_t *igzip_buf; /* igzip's level buffer */
	ZSTD_CCtx *zc;
};

struct sink_blk {
	struct sink_blk *next;
	size_t len;
	uint8_t data[];
};

struct sink_chunk {
	struct sink_chunk *next;
	uint8_t *prologue;
	size_t prologue_len;
	struct sink_blk *first, *last;
	uint64_t stored; /* blocks + prologue */
};

struct trace_sink {
	int fd;
	enum perfetto_compression comp;
	int write_error;
	struct trace_sink_stats st;
	/* queue, in order: jobs[head], jobs[head + 1], ... (n of them) */
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	struct sink_job jobs[SINK_QUEUE];
	unsigned head, n;
	bool has_worker, stop;
	pthread_t worker;
	struct sink_codec worker_codec, caller_codec;
	/* ring */
	uint64_t ring_bytes;
	struct sink_chunk *oldest, *newest;
	uint64_t filling_raw;      /* raw bytes put since the last chunk began */
	uint8_t *next_prologue;    /* for the next block put */
	size_t next_prologue_len;
	bool next_starts_chunk;
	/* plain file output: blocks allocated up to prealloc_end (0: not a file, or no fallocate) */
	off_t prealloc_end;
};

/* ---- compression -------------------------------------------------------------- */

/* One zlib stream (RFC 1950: what compressed_packets holds) by igzip, in one call. */
static int codec_deflate(struct sink_codec *c, const uint8_t *in, size_t n, uint8_t *out,
			 size_t cap, size_t *out_len)
{
	if (!c->igzip_buf && !(c->igzip_buf = malloc(SINK_IGZIP_LEVEL_BUF)))
		return -ENOMEM;
	*out_len = igzip_block(SINK_IGZIP_LEVEL, c->igzip_buf, SINK_IGZIP_LEVEL_BUF, in, n, out, cap);
	return *out_len ? 0 : -EIO; /* did not fit: the block goes out plain */
}

static int codec_zstd(struct sink_codec *c, const uint8_t *in, size_t n, uint8_t *out,
		      size_t cap, size_t *out_len)
{
	size_t r;

	if (!c->zc && !(c->zc = ZSTD_createCCtx()))
		return -ENOMEM;
	r = ZSTD_compressCCtx(c->zc, out, cap, in, n, SINK_ZSTD_LEVEL);
	if (ZSTD_isError(r))
		return -EIO;
	*out_len = r;
	return 0;
}

static void codec_free(struct sink_codec *c)
{
	free(c->igzip_buf);
	ZSTD_freeCCtx(c->zc);
}

/* Room for the wrapper of n raw bytes. */
static size_t wrap_bound(size_t n)
{
	return SINK_HDR + (compressBound(n) > ZSTD_compressBound(n) ? compressBound(n) :
								     ZSTD_compressBound(n));
}

/*
 * Makes job->out the emitted form of job->raw: one TracePacket record whose
 * only field is the compressed block (a block too large for a wrapper, or
 * one that does not compress, goes out as it is). Called without the lock.
 */
static void job_compress(struct trace_sink *s, struct sink_codec *c, struct sink_job *j)
{
	uint32_t field = s->comp == PERFETTO_COMPRESSION_ZSTD ? 133 : 50;
	uint8_t hdr[SINK_HDR], *p = hdr;
	size_t clen = 0, body, hlen;
	int err;

	if (j->raw_len > SINK_MAX_RAW)
		goto plain;
	err = s->comp == PERFETTO_COMPRESSION_ZSTD ?
		      codec_zstd(c, j->raw, j->raw_len, j->out + SINK_HDR, j->out_cap - SINK_HDR, &clen) :
		      codec_deflate(c, j->raw, j->raw_len, j->out + SINK_HDR, j->out_cap - SINK_HDR,
				    &clen);
	if (err)
		goto plain;
	body = pwb_varint_size(((uint64_t)field << 3) | PWB_LEN) + pwb_varint_size(clen) + clen;
	*p++ = 0x0a; /* Trace.packet */
	p = pwb_put_varint(p, body);
	p = pwb_put_varint(p, ((uint64_t)field << 3) | PWB_LEN);
	p = pwb_put_varint(p, clen);
	hlen = (size_t)(p - hdr);
	if (hlen + clen >= j->raw_len)
		goto plain;
	j->out_off = SINK_HDR - hlen;
	memcpy(j->out + j->out_off, hdr, hlen);
	j->out_len = hlen + clen;
	return;
plain:
	j->out_off = 0;
	j->out_len = 0; /* emit raw */
}

static const uint8_t *job_bytes(const struct sink_job *j, size_t *len)
{
	if (!j->out_len) {
		*len = j->raw_len;
		return j->raw;
	}
	*len = j->out_len;
	return j->out + j->out_off;
}

/* The oldest job waiting for a compressor, or NULL. Lock held. */
static struct sink_job *job_pending(struct trace_sink *s)
{
	for (unsigned i = 0; i < s->n; i++) {
		struct sink_job *j = &s->jobs[(s->head + i) % SINK_QUEUE];

		if (j->state == JOB_PENDING)
			return j;
	}
	return NULL;
}

/* Compresses one pending job with codec c, dropping the lock meanwhile. Lock held. */
static void job_run(struct trace_sink *s, struct sink_job *j, struct sink_codec *c)
{
	j->state = JOB_BUSY;
	pthread_mutex_unlock(&s->mu);
	job_compress(s, c, j);
	pthread_mutex_lock(&s->mu);
	j->state = JOB_DONE;
	pthread_cond_broadcast(&s->done);
}

static void *sink_worker(void *arg)
{
	struct trace_sink *s = arg;
	struct sink_job *j;

	pthread_mutex_lock(&s->mu);
	for (;;) {
		while (!s->stop && !(j = job_pending(s)))
			pthread_cond_wait(&s->work, &s->mu);
		if (s->stop && !(j = job_pending(s)))
			break;
		job_run(s, j, &s->worker_codec);
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

/* ---- output: file ----------------------------------------------------------------- */

/* Bytes of p[0..done) that form whole `0A len` records. */
static size_t whole_records(const uint8_t *p, size_t n, size_t done)
{
	size_t off = 0;

	while (off < n) {
		uint64_t len = 0;
		size_t i = off + 1;
		unsigned shift = 0;

		while (i < n && shift < 64) {
			len |= (uint64_t)(p[i] & 0x7f) << shift;
			shift += 7;
			if (!(p[i++] & 0x80))
				break;
		}
		if (len > n - i || i + len > done)
			break;
		off = i + len;
	}
	return off;
}

/*
 * A write failed after `done` of n bytes: the file ends inside a packet,
 * which no reader could load past. Cut it back to the last whole packet
 * (a pipe cannot be cut: its reader sees the end of the stream there).
 */
static size_t cut_partial_record(int fd, const uint8_t *p, size_t n, size_t done)
{
	size_t extra = done - whole_records(p, n, done);
	off_t end;

	if (!extra)
		return 0;
	end = lseek(fd, 0, SEEK_CUR);
	if (end < (off_t)extra || ftruncate(fd, end - (off_t)extra) ||
	    lseek(fd, end - (off_t)extra, SEEK_SET) < 0)
		return 0;
	return extra;
}

/* p holds whole records; *kept: the bytes that stay written. 0 or -errno. */
static int write_records(int fd, const uint8_t *p, size_t n, size_t *kept)
{
	size_t done = 0;

	*kept = 0;
	while (done < n) {
		ssize_t r = write(fd, p + done, n - done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int err = r < 0 ? errno : EIO;

			*kept = done - cut_partial_record(fd, p, n, done);
			return -err;
		}
		done += (size_t)r;
	}
	*kept = done;
	return 0;
}

/* When the file stopped growing: the summary says how far into the session it was cut. */
static void note_cut(struct trace_sink *s)
{
	struct timespec now;

	if (s->st.cut_ns || clock_gettime(CLOCK_MONOTONIC, &now))
		return;
	s->st.cut_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

/*
 * Blocks for the next n bytes, allocated ahead when the file has none yet
 * (FALLOC_FL_KEEP_SIZE: readers see only what was written). Where fallocate
 * does not work (another filesystem, a pipe), writes go as they did.
 */
static void sink_prealloc(struct trace_sink *s, size_t n)
{
	off_t at;

	if (!s->prealloc_end)
		return;
	at = lseek(s->fd, 0, SEEK_CUR);
	if (at < 0 || at + (off_t)n <= s->prealloc_end)
		return;
	if (fallocate(s->fd, FALLOC_FL_KEEP_SIZE, at, (off_t)n + SINK_PREALLOC_STEP) == 0)
		s->prealloc_end = at + (off_t)n + SINK_PREALLOC_STEP;
	else
		s->prealloc_end = 0; /* tried once */
}

/* The blocks allocated past the file's end go back (an ftruncate to its own size). */
static void sink_prealloc_release(struct trace_sink *s)
{
	struct stat st;

	if (s->prealloc_end && !fstat(s->fd, &st) && st.st_size < s->prealloc_end &&
	    ftruncate(s->fd, st.st_size))
		s->prealloc_end = 0; /* nothing to do about it: the file is whole */
}

static void sink_write(struct trace_sink *s, const uint8_t *p, size_t n)
{
	size_t kept;
	int err;

	if (s->write_error)
		return;
	sink_prealloc(s, n);
	err = write_records(s->fd, p, n, &kept);
	s->st.bytes_written += kept;
	if (err) {
		note_cut(s);
		s->write_error = -err;
	}
}

/* ---- output: ring --------------------------------------------------------------------- */

static void chunk_free(struct sink_chunk *c)
{
	struct sink_blk *b, *next;

	for (b = c->first; b; b = next) {
		next = b->next;
		free(b);
	}
	free(c->prologue);
	free(c);
}

static struct sink_chunk *chunk_new(uint8_t *prologue, size_t len)
{
	struct sink_chunk *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->prologue = prologue;
	c->prologue_len = len;
	c->stored = len;
	return c;
}

/* Old chunks go whole while the ring holds more than its size; the newest stays. */
static void ring_trim(struct trace_sink *s)
{
	while (s->st.ring_bytes_held > s->ring_bytes && s->oldest != s->newest) {
		struct sink_chunk *c = s->oldest;

		s->oldest = c->next;
		s->st.ring_bytes_held -= c->stored;
		s->st.chunks_dropped++;
		chunk_free(c);
	}
}

static void ring_append(struct trace_sink *s, struct sink_job *j, const uint8_t *p, size_t n)
{
	struct sink_blk *b;

	if (j->starts_chunk) {
		struct sink_chunk *c = chunk_new(j->prologue, j->prologue_len);

		if (!c) {
			s->write_error = s->write_error ? s->write_error : ENOMEM;
			return;
		}
		j->prologue = NULL;
		s->newest->next = c;
		s->newest = c;
		s->st.ring_bytes_held += c->stored;
	}
	b = malloc(sizeof(*b) + n);
	if (!b) {
		s->write_error = s->write_error ? s->write_error : ENOMEM;
		return;
	}
	b->next = NULL;
	b->len = n;
	memcpy(b->data, p, n);
	if (s->newest->last)
		s->newest->last->next = b;
	else
		s->newest->first = b;
	s->newest->last = b;
	s->newest->stored += n;
	s->st.ring_bytes_held += n;
	ring_trim(s);
}

/* ---- the queue ---------------------------------------------------------------------- */

static void job_emit(struct trace_sink *s, struct sink_job *j)
{
	size_t len;
	const uint8_t *p = job_bytes(j, &len);

	s->st.stored_bytes += len;
	if (s->ring_bytes)
		ring_append(s, j, p, len);
	else
		sink_write(s, p, len);
	free(j->prologue);
	j->prologue = NULL;
	j->starts_chunk = false;
	j->state = JOB_FREE;
}

/* Emits the finished jobs at the head of the queue, in order. Lock held. */
static void queue_reap(struct trace_sink *s)
{
	while (s->n && s->jobs[s->head].state == JOB_DONE) {
		job_emit(s, &s->jobs[s->head]);
		s->head = (s->head + 1) % SINK_QUEUE;
		s->n--;
	}
}

/*
 * Frees a slot: the caller compresses the oldest waiting block itself (the
 * worker is behind); only when every waiting block is done but the head is
 * still the worker's does it wait, for that one block. Lock held.
 */
static void queue_make_room(struct trace_sink *s)
{
	struct sink_job *j;

	for (queue_reap(s); s->n == SINK_QUEUE; queue_reap(s)) {
		j = job_pending(s);
		if (j) {
			job_run(s, j, &s->caller_codec);
			s->st.blocks_helped++;
		} else {
			pthread_cond_wait(&s->done, &s->mu);
		}
	}
}

static int job_fill(struct sink_job *j, const uint8_t *p, size_t n)
{
	if (j->raw_cap < n) {
		uint8_t *raw = realloc(j->raw, n);

		if (!raw)
			return -ENOMEM;
		j->raw = raw;
		j->raw_cap = n;
	}
	if (n <= SINK_MAX_RAW && j->out_cap < wrap_bound(n)) {
		uint8_t *out = realloc(j->out, wrap_bound(n));

		if (!out)
			return -ENOMEM;
		j->out = out;
		j->out_cap = wrap_bound(n);
	}
	memcpy(j->raw, p, n);
	j->raw_len = n;
	j->out_len = 0;
	return 0;
}

/* Without compression there is no queue: the block goes out now, uncopied. */
static int sink_put_plain(struct trace_sink *s, const uint8_t *p, size_t n)
{
	struct sink_job j = { .raw = (uint8_t *)p, .raw_len = n };

	pthread_mutex_lock(&s->mu);
	j.starts_chunk = s->next_starts_chunk;
	j.prologue = s->next_prologue;
	j.prologue_len = s->next_prologue_len;
	s->next_starts_chunk = false;
	s->next_prologue = NULL;
	s->next_prologue_len = 0;
	s->filling_raw += n;
	s->st.raw_bytes += n;
	job_emit(s, &j);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int trace_sink_put(struct trace_sink *s, const uint8_t *p, size_t n)
{
	bool compress = s->comp != PERFETTO_COMPRESSION_NONE;
	struct sink_job *j;
	int err;

	if (!n)
		return 0;
	if (!compress)
		return sink_put_plain(s, p, n);
	pthread_mutex_lock(&s->mu);
	queue_make_room(s);
	j = &s->jobs[(s->head + s->n) % SINK_QUEUE];
	err = job_fill(j, p, n);
	if (err) {
		s->write_error = s->write_error ? s->write_error : -err;
		pthread_mutex_unlock(&s->mu);
		return err;
	}
	j->starts_chunk = s->next_starts_chunk;
	j->prologue = s->next_prologue;
	j->prologue_len = s->next_prologue_len;
	s->next_starts_chunk = false;
	s->next_prologue = NULL;
	s->next_prologue_len = 0;
	s->filling_raw += n;
	s->st.raw_bytes += n;
	s->n++;
	s->st.blocks++;
	j->state = JOB_PENDING;
	pthread_cond_signal(&s->work);
	queue_reap(s);
	pthread_mutex_unlock(&s->mu);
	return 0;
}

int trace_sink_chunk_begin(struct trace_sink *s, const uint8_t *p, size_t n)
{
	uint8_t *copy = NULL;

	if (!s->ring_bytes)
		return -EINVAL;
	if (n && !(copy = malloc(n)))
		return -ENOMEM;
	if (n)
		memcpy(copy, p, n);
	pthread_mutex_lock(&s->mu);
	free(s->next_prologue);
	s->next_prologue = copy;
	s->next_prologue_len = n;
	s->next_starts_chunk = true;
	s->filling_raw = 0;
	pthread_mutex_unlock(&s->mu);
	return 0;
}

bool trace_sink_chunk_due(const struct trace_sink *s)
{
	uint64_t raw = s->st.raw_bytes, stored = s->st.stored_bytes;
	uint64_t share = s->ring_bytes / SINK_CHUNKS_PER_RING;

	if (!s->ring_bytes || s->next_starts_chunk)
		return false;
	/* in stored bytes, estimated from the ratio so far (blocks may still be queued) */
	if (s->comp != PERFETTO_COMPRESSION_NONE && raw && stored)
		return (double)s->filling_raw * (double)stored / (double)raw >= (double)share;
	return s->filling_raw >= share;
}

void trace_sink_poll(struct trace_sink *s)
{
	pthread_mutex_lock(&s->mu);
	queue_reap(s);
	pthread_mutex_unlock(&s->mu);
}

int trace_sink_drain(struct trace_sink *s)
{
	struct sink_job *j;

	pthread_mutex_lock(&s->mu);
	for (queue_reap(s); s->n; queue_reap(s)) {
		j = job_pending(s);
		if (j)
			job_run(s, j, &s->caller_codec);
		else
			pthread_cond_wait(&s->done, &s->mu);
	}
	pthread_mutex_unlock(&s->mu);
	return s->write_error ? -s->write_error : 0;
}

/* Writes p[0..n) to fd and counts what stays written; 0 or -errno. */
static int ring_out(struct trace_sink *s, int fd, const uint8_t *p, size_t n, int64_t *total)
{
	size_t kept;
	int err = n ? write_records(fd, p, n, &kept) : 0;

	*total += n ? (int64_t)kept : 0;
	if (err)
		note_cut(s);
	return err;
}

int64_t trace_sink_write_ring(struct trace_sink *s, int fd, const uint8_t *header, size_t hlen,
			      const uint8_t *trailer, size_t tlen)
{
	int64_t total = 0;
	int err;

	if (!s->ring_bytes)
		return -EINVAL;
	pthread_mutex_lock(&s->mu);
	queue_reap(s);
	err = ring_out(s, fd, header, hlen, &total);
	if (!err)
		err = ring_out(s, fd, s->oldest->prologue, s->oldest->prologue_len, &total);
	for (struct sink_chunk *c = s->oldest; c && !err; c = c->next)
		for (struct sink_blk *b = c->first; b && !err; b = b->next)
			err = ring_out(s, fd, b->data, b->len, &total);
	if (!err)
		err = ring_out(s, fd, trailer, tlen, &total);
	pthread_mutex_unlock(&s->mu);
	return err ? err : total;
}

/* ---- lifetime ------------------------------------------------------------------------- */

struct trace_sink *trace_sink_new(int fd, enum perfetto_compression comp, uint64_t ring_bytes)
{
	struct trace_sink *s;
	struct stat st;

	if (fd < 0 || comp > PERFETTO_COMPRESSION_ZSTD ||
	    (ring_bytes && ring_bytes < PERFETTO_RING_MIN_BYTES)) {
		errno = EINVAL;
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		goto err;
	s->fd = fd;
	s->comp = comp;
	s->ring_bytes = ring_bytes;
	if (!ring_bytes && !fstat(fd, &st) && S_ISREG(st.st_mode))
		s->prealloc_end = 1; /* allocated from the first write on */
	if (ring_bytes && !(s->oldest = s->newest = chunk_new(NULL, 0)))
		goto err_free;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->work, NULL);
	pthread_cond_init(&s->done, NULL);
	if (comp != PERFETTO_COMPRESSION_NONE) {
		if (pthread_create(&s->worker, NULL, sink_worker, s) != 0)
			goto err_sync;
		s->has_worker = true;
	}
	return s;

err_sync:
	pthread_cond_destroy(&s->done);
	pthread_cond_destroy(&s->work);
	pthread_mutex_destroy(&s->mu);
	free(s->oldest);
err_free:
	free(s);
err:
	errno = ENOMEM;
	return NULL;
}

void trace_sink_get_stats(const struct trace_sink *s, struct trace_sink_stats *st)
{
	*st = s->st;
}

int trace_sink_write_error(const struct trace_sink *s)
{
	return s->write_error;
}

bool trace_sink_is_ring(const struct trace_sink *s)
{
	return s->ring_bytes != 0;
}

int trace_sink_free(struct trace_sink *s)
{
	struct sink_chunk *c, *next;
	int ret;

	if (!s)
		return 0;
	ret = trace_sink_drain(s);
	sink_prealloc_release(s);
	if (s->has_worker) {
		pthread_mutex_lock(&s->mu);
		s->stop = true;
		pthread_cond_signal(&s->work);
		pthread_mutex_unlock(&s->mu);
		pthread_join(s->worker, NULL);
	}
	for (unsigned i = 0; i < SINK_QUEUE; i++) {
		free(s->jobs[i].raw);
		free(s->jobs[i].out);
		free(s->jobs[i].prologue);
	}
	for (c = s->oldest; c; c = next) {
		next = c->next;
		chunk_free(c);
	}
	free(s->next_prologue);
	codec_free(&s->worker_codec);
	codec_free(&s->caller_codec);
	pthread_cond_destroy(&s->done);
	pthread_cond_destroy(&s->work);
	pthread_mutex_destroy(&s->mu);
	free(s);
	return ret;
}

/* SPDX-License-Identifier: MIT */
/*
 * The streaming reader's frame: reads the file in a fixed-size window (grown
 * only to hold one larger packet, never the file), splits it into `0A len`
 * records and hands each packet to trd_packet_record; owns the strings that
 * outlive the read and the problem lines. Never mmaps, never reads a file
 * whole, never trusts a length: every one is checked against the bytes that
 * are really there.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "viewer-export/trace_reader_internal.h"

#define TRD_CHUNK_SIZE (64 * 1024)
#define TRD_WINDOW_DEFAULT (1u << 20)
#define TRD_WINDOW_MIN 32 /* a record header: two varints of at most 10 bytes */
#define TRD_HEADER_MAX 20

struct trd_chunk {
	struct trd_chunk *next;
	size_t used, cap;
	char data[];
};

/* ---- allocation helpers -------------------------------------------------- */

bool trd_reserve(struct trd *r, void **arr, size_t *cap, size_t n, size_t size)
{
	size_t new_cap;
	void *p;

	if (n < *cap)
		return true;
	new_cap = *cap ? *cap * 2 : 16;
	if (new_cap > SIZE_MAX / size)
		goto err_oom;
	p = realloc(*arr, new_cap * size);
	if (!p)
		goto err_oom;
	*arr = p;
	*cap = new_cap;
	return true;
err_oom:
	r->oom = true;
	return false;
}

bool trd_keep(struct trd *r, void *p)
{
	struct trace_model_priv *pv = r->store;

	if (!trd_reserve(r, (void **)&pv->allocs, &pv->cap_allocs, pv->n_allocs, sizeof(void *))) {
		free(p);
		return false;
	}
	pv->allocs[pv->n_allocs++] = p;
	return true;
}

/* ---- stable strings ------------------------------------------------------ */

struct trd_strkey {
	const void *data;
	size_t len;
};

static bool trd_str_eq(const void *ctx, uint32_t idx, const void *key)
{
	const struct trace_model_priv *pv = ctx;
	const struct trd_strkey *k = key;

	return pv->lens[idx] == k->len && memcmp(pv->strs[idx], k->data, k->len) == 0;
}

static char *trd_chunk_alloc(struct trace_model_priv *pv, size_t n)
{
	struct trd_chunk *c = pv->chunks;

	if (!c || c->cap - c->used < n) {
		size_t cap = n > TRD_CHUNK_SIZE / 4 ? n : TRD_CHUNK_SIZE;

		c = malloc(sizeof(*c) + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		if (cap == TRD_CHUNK_SIZE || !pv->chunks) {
			c->next = pv->chunks;
			pv->chunks = c;
		} else { /* a big string gets its own chunk, behind the current one */
			c->next = pv->chunks->next;
			pv->chunks->next = c;
			c->used = n;
			return c->data;
		}
	}
	c->used += n;
	return c->data + c->used - n;
}

const char *trd_str(struct trd *r, const void *data, size_t len)
{
	struct trace_model_priv *pv = r->store;
	struct trd_strkey key = { data, len };
	uint32_t hash;
	struct pw_slot *slot;
	char *s;

	if (len >= UINT32_MAX || pw_index_reserve(&pv->str_ix) < 0)
		goto err_oom;
	hash = pw_hash(data, len);
	slot = pw_index_lookup(&pv->str_ix, hash, trd_str_eq, pv, &key);
	if (slot->ref)
		return pv->strs[slot->ref - 1];
	if (pv->n_strs == pv->cap_strs) {
		size_t cap = pv->cap_strs;

		if (!trd_reserve(r, (void **)&pv->strs, &cap, pv->n_strs, sizeof(char *)))
			return NULL;
		cap = pv->cap_strs;
		if (!trd_reserve(r, (void **)&pv->lens, &cap, pv->n_strs, sizeof(uint32_t)))
			return NULL;
		pv->cap_strs = (uint32_t)cap;
	}
	s = trd_chunk_alloc(pv, len + 1);
	if (!s)
		goto err_oom;
	if (len)
		memcpy(s, data, len);
	s[len] = 0;
	pv->strs[pv->n_strs] = s;
	pv->lens[pv->n_strs] = (uint32_t)len;
	pw_index_fill(&pv->str_ix, slot, hash, pv->n_strs++);
	return s;
err_oom:
	r->oom = true;
	return NULL;
}

void trd_store_free(struct trace_model_priv *pv)
{
	struct trd_chunk *c, *next;
	size_t i;

	if (!pv)
		return;
	for (c = pv->chunks; c; c = next) {
		next = c->next;
		free(c);
	}
	for (i = 0; i < pv->n_allocs; i++)
		free(pv->allocs[i]);
	free(pv->allocs);
	free(pv->strs);
	free(pv->lens);
	pw_index_free(&pv->str_ix);
	free(pv);
}

/* ---- problems ------------------------------------------------------------ */

static void trd_problem_add(struct trd *r, const char *prefix, const char *fmt, va_list ap)
{
	char body[512], line[600];

	r->st.problems++;
	if (!r->ops->problem)
		return;
	vsnprintf(body, sizeof(body), fmt, ap);
	snprintf(line, sizeof(line), "%s%s", prefix, body);
	trd_emitted(r, r->ops->problem(r->ctx, line));
}

void trd_problem(struct trd *r, const char *fmt, ...)
{
	char prefix[64];
	va_list ap;

	snprintf(prefix, sizeof(prefix), "packet %zu at offset %zu: ", r->pkt_index,
		 r->pkt_offset);
	va_start(ap, fmt);
	trd_problem_add(r, prefix, fmt, ap);
	va_end(ap);
}

void trd_problem_at(struct trd *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	trd_problem_add(r, "", fmt, ap);
	va_end(ap);
}

/* ---- the window ------------------------------------------------------------ */

/*
 * The bytes of the trace around the current record: buf[0] is at file offset
 * base, buf[0..end) is valid. A buffer source is one window holding it all.
 */
struct trd_src {
	int fd;             /* -1: the caller's buffer */
	const uint8_t *buf;
	uint8_t *win;       /* file sources: the window buf points at */
	size_t cap, end;
	size_t base;
	size_t size;        /* bytes in the trace, when known (regular file, buffer) */
	bool size_known, eof;
	int err;            /* a read error: negative errno */
};

static bool trd_src_grow(struct trd *r, struct trd_src *src, size_t need)
{
	size_t cap = src->cap;
	uint8_t *w;

	while (cap < need)
		cap = !cap || cap > SIZE_MAX / 2 ? need : cap * 2;
	w = realloc(src->win, cap);
	if (!w) {
		r->oom = true;
		return false;
	}
	src->win = w;
	src->buf = w;
	src->cap = cap;
	if (cap > r->st.window_peak)
		r->st.window_peak = cap;
	return true;
}

/*
 * Makes file bytes [off, off + n) readable at buf + (off - base), or as many
 * of them as the trace has. Returns how many are there (< n only at its end).
 * Bytes before off are dropped; off never goes back.
 */
static size_t trd_src_have(struct trd *r, struct trd_src *src, size_t off, size_t n)
{
	ssize_t got;

	if (src->size_known && n > src->size - off)
		n = src->size > off ? src->size - off : 0;
	if (src->fd < 0 || src->base + src->end >= off + n)
		goto out;
	if (off >= src->base + src->end) { /* skipped past the window */
		if (off > src->base + src->end &&
		    lseek(src->fd, (off_t)off, SEEK_SET) < 0) {
			src->err = -errno;
			return 0;
		}
		src->end = 0;
	} else {
		memmove(src->win, src->win + (off - src->base), src->base + src->end - off);
		src->end -= off - src->base;
	}
	src->base = off;
	while (src->end < n && !src->eof) {
		/* grows with the bytes that come, not with what a length claims */
		if (src->end == src->cap &&
		    !trd_src_grow(r, src, n - src->cap < src->cap ? n : src->cap * 2))
			return 0;
		got = read(src->fd, src->win + src->end, src->cap - src->end);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			src->err = -errno;
			return 0;
		}
		if (got == 0)
			src->eof = true;
		src->end += (size_t)got;
	}
out:
	if (off >= src->base + src->end)
		return 0;
	return src->base + src->end - off < n ? src->base + src->end - off : n;
}

/* ---- framing ------------------------------------------------------------------ */

int trd_varint(const uint8_t *buf, size_t len, size_t *off, uint64_t *v)
{
	unsigned shift;
	size_t i = *off;

	*v = 0;
	for (shift = 0; shift < 70; shift += 7) {
		if (i >= len)
			return 0;
		*v |= (uint64_t)(buf[i] & 0x7f) << shift;
		if (!(buf[i++] & 0x80)) {
			*off = i;
			return 1;
		}
	}
	return -1;
}

/* True when the trace holds n more bytes after off (a field to skip). */
static bool trd_src_holds(struct trd *r, struct trd_src *src, size_t off, uint64_t n)
{
	if (src->size_known)
		return off <= src->size && n <= src->size - off;
	/* a pipe: read through, a window at a time */
	while (n > 0) {
		size_t step = n < src->cap ? (size_t)n : src->cap;
		size_t have = trd_src_have(r, src, off, step);

		if (have < step)
			return false;
		off += step;
		n -= step;
	}
	return true;
}

/* Skips a Trace field other than `packet` (header bytes end at lim); false if the framing is broken. */
static bool trd_skip_field(struct trd *r, struct trd_src *src, size_t lim, size_t *off,
			   uint64_t tag)
{
	size_t rel = *off - src->base;
	uint64_t v;

	switch (tag & 7) {
	case PWB_VARINT:
		if (trd_varint(src->buf, lim - src->base, &rel, &v) != 1)
			return false;
		*off = src->base + rel;
		return true;
	case PWB_I64:
		v = 8;
		break;
	case PWB_I32:
		v = 4;
		break;
	case PWB_LEN:
		if (trd_varint(src->buf, lim - src->base, &rel, &v) != 1)
			return false;
		*off = src->base + rel;
		break;
	default:
		return false;
	}
	if (!trd_src_holds(r, src, *off, v))
		return false;
	*off += (size_t)v;
	return true;
}

/* Reads one record's header at off; 1: a packet of *plen bytes at *off, 0: stop, -1: next. */
static int trd_record(struct trd *r, struct trd_src *src, size_t *off, uint64_t *plen)
{
	size_t start = *off, hlen, rel, left;
	uint64_t tag;
	int rc;

	hlen = trd_src_have(r, src, start, TRD_HEADER_MAX);
	if (!hlen)
		return 0;
	rel = start - src->base;
	rc = trd_varint(src->buf, rel + hlen, &rel, &tag);
	if (rc == 1 && tag == 0x0a)
		rc = trd_varint(src->buf, start - src->base + hlen, &rel, plen);
	*off = src->base + rel;
	left = src->size_known ? src->size - start : 0;
	if (rc == 1 && tag == 0x0a && trd_src_have(r, src, *off, *plen) < *plen) {
		if (src->err || r->oom)
			return 0;
		if (!src->size_known)
			left = src->base + src->end - start;
		rc = 0;
	} else if (rc == 0 && !src->size_known) {
		left = hlen;
	}
	if (rc == 0) {
		trd_problem_at(r, "truncated packet at offset %zu (%zu bytes left)", start, left);
		return 0;
	}
	if (rc < 0 || tag == 0 || (tag != 0x0a && !trd_skip_field(r, src, start + hlen, off, tag))) {
		if (src->err || r->oom)
			return 0;
		trd_problem_at(r, "broken record framing at offset %zu: parsing stops", start);
		return 0;
	}
	if (tag != 0x0a) {
		trd_problem_at(r, "record at offset %zu is Trace field %" PRIu64 ", not a "
			       "packet (skipped)", start, tag >> 3);
		return -1;
	}
	return 1;
}

/* nested: the records of a compressed block (problems keep the wrapper's offset). */
static void trd_split(struct trd *r, struct trd_src *src, bool nested)
{
	size_t off = 0;
	uint64_t plen = 0;
	int rc;

	if (trd_src_have(r, src, 0, 1) && src->buf[0] != 0x0a)
		trd_problem_at(r, "first byte is 0x%02x, not 0x0a: not a Perfetto protobuf trace",
			       src->buf[0]);
	for (; !r->oom && !r->stop && !src->err; r->pkt_index++) {
		if (!nested)
			r->pkt_offset = off;
		rc = trd_record(r, src, &off, &plen);
		if (rc == 0)
			return;
		if (rc < 0)
			continue;
		trd_packet_record(r, src->buf + (off - src->base), (size_t)plen, nested);
		off += (size_t)plen;
	}
}

void trd_split_buffer(struct trd *r, const uint8_t *buf, size_t len, bool nested)
{
	struct trd_src src = { .fd = -1, .buf = buf, .end = len, .size = len, .size_known = true,
			       .eof = true };

	trd_split(r, &src, nested);
}

/* ---- entry points --------------------------------------------------------------- */

static const struct trace_stream_ops trd_no_ops;

struct trace_stream *trace_stream_new(const struct trace_stream_ops *ops, void *ctx,
				      const struct trace_stream_opts *opts)
{
	struct trd *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->store = calloc(1, sizeof(*r->store));
	if (!r->store) {
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	r->ops = ops ? ops : &trd_no_ops;
	r->ctx = ctx;
	if (opts)
		r->opts = *opts;
	if (!r->opts.window)
		r->opts.window = TRD_WINDOW_DEFAULT;
	if (r->opts.window < TRD_WINDOW_MIN)
		r->opts.window = TRD_WINDOW_MIN;
	trd_reader_init(r);
	trd_slices_init(r);
	return (struct trace_stream *)r;
}

static int trd_run(struct trd *r, struct trd_src *src)
{
	if (r->used)
		return -EINVAL;
	r->used = true;
	trd_split(r, src, false);
	if (!r->oom && !r->stop && !src->err) {
		trd_reader_finish(r);
		trd_slices_finish(r);
		trd_sched_finish(r);
	}
	if (src->err)
		return src->err;
	if (r->oom)
		return -ENOMEM;
	return r->stop;
}

int trace_stream_read_buffer(struct trace_stream *ts, const uint8_t *buf, size_t len)
{
	struct trd_src src = { .fd = -1, .buf = buf, .end = len, .size = len, .size_known = true,
			       .eof = true };

	((struct trd *)ts)->st.bytes = len;
	return trd_run((struct trd *)ts, &src); /* one window: the whole buffer */
}

int trace_stream_read_file(struct trace_stream *ts, const char *path)
{
	struct trd *r = (struct trd *)ts;
	struct trd_src src = { .fd = -1 };
	struct stat sb;
	int ret;

	src.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (src.fd < 0)
		return -errno;
	if (fstat(src.fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
		src.size = (size_t)sb.st_size;
		src.size_known = true;
	}
	src.cap = 0;
	if (!trd_src_grow(r, &src, r->opts.window)) {
		close(src.fd);
		return -ENOMEM;
	}
	ret = trd_run(r, &src);
	r->st.bytes = src.size_known ? src.size : src.base + src.end;
	free(src.win);
	close(src.fd);
	return ret;
}

const struct trace_stream_stats *trace_stream_get_stats(const struct trace_stream *ts)
{
	return &((const struct trd *)ts)->st;
}

const char *trace_stream_cut_line(const struct trace_stream_stats *st, char *buf, size_t len)
{
	snprintf(buf, len, "note: the trace ends after %" PRIu64 " bytes without profd's closing "
		 "packet: it was cut short (a full disk, a file-size limit, or profd ended before "
		 "finishing it); what it holds is read", st->bytes);
	return buf;
}

const struct trace_thread *trace_stream_threads(const struct trace_stream *ts, size_t *n)
{
	*n = ((const struct trd *)ts)->n_threads;
	return ((const struct trd *)ts)->threads;
}

void trace_stream_free(struct trace_stream *ts)
{
	struct trd *r = (struct trd *)ts;

	if (!r)
		return;
	trd_slices_free(r);
	trd_sched_free(r);
	trd_reader_free(r);
	trd_store_free(r->store);
	free(r);
}

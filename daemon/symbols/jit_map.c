// SPDX-License-Identifier: MIT
/*
 * perf-PID.map reader (see jit_map.h): owns one target's JIT symbols, sorted
 * by start, and the names they point to. Names live in blocks that are never
 * moved or freed before jit_map_free, because callers (the demangle cache)
 * key on their addresses; a byte cap keeps a target that keeps rewriting its
 * map from growing us without bound. Never trusts the file's contents.
 */
#include "daemon/symbols/jit_map.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NAME_BLOCK_BYTES (64u << 10)
#define MAX_NAME_BYTES (4ull * JIT_MAP_MAX_FILE_BYTES) /* over every reread, see the header */
#define LOOKBACK 16              /* overlapping symbols searched before giving up */
#define TAIL_BYTES 64            /* bytes before parsed_upto checked on an incremental read */
#define OPEN_FLAGS (O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)

struct name_block {
	struct name_block *next;
	size_t used, cap;
	char data[];
};

struct jit_entry {
	uint64_t start, end;
	uint64_t seq;            /* line number over every read: the later line wins */
	const char *name;
};

struct jit_map {
	pid_t pid;
	char *path;              /* NULL: the target's /tmp/perf-NSPID.map */
	struct jit_entry *v;     /* sorted by start, then seq */
	size_t n, cap;
	uint64_t next_seq;
	struct name_block *names;
	uint64_t name_bytes;
	bool full;               /* a limit was hit: no more reading */

	/* the file as last read */
	bool have_file;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	off_t parsed_upto;       /* end of the last complete line read */
	char tail[TAIL_BYTES];   /* the bytes just before parsed_upto */
	size_t tail_len;

	/* the target, from /proc/PID/status (kept for when it has exited) */
	bool have_ids;
	uid_t euid, fsuid;
	pid_t nspid;

	uint64_t bad_lines, reads;
	const char *error;
};

struct jit_map *jit_map_new(pid_t pid, const char *path)
{
	struct jit_map *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->pid = pid;
	if (path && !(m->path = strdup(path))) {
		free(m);
		return NULL;
	}
	return m;
}

void jit_map_free(struct jit_map *m)
{
	struct name_block *b, *next;

	if (!m)
		return;
	for (b = m->names; b; b = next) {
		next = b->next;
		free(b);
	}
	free(m->v);
	free(m->path);
	free(m);
}

/* ---- parsing ----------------------------------------------------------------- */

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* 1 to 16 hex digits at *p (a "0x" some writers add is tolerated); advances *p. */
static bool parse_hex(const char **p, const char *end, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	int digits = 0, d;

	if (end - s > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		s += 2;
	for (; s < end && (d = hex_value(*s)) >= 0; s++) {
		if (++digits > 16)
			return false;
		v = v << 4 | (uint64_t)d;
	}
	*p = s;
	*out = v;
	return digits > 0;
}

/* At least one blank at *p; advances past all of them. */
static bool skip_blanks(const char **p, const char *end)
{
	const char *s = *p;

	while (s < end && *s == ' ')
		s++;
	if (s == *p)
		return false;
	*p = s;
	return true;
}

/* "START SIZE name" without its newline: a non-empty range and a printable name. */
static bool parse_line(const char *p, const char *end, uint64_t *start, uint64_t *size,
		       const char **name, size_t *name_len)
{
	const char *s;

	if (end > p && end[-1] == '\r')
		end--;
	if (!parse_hex(&p, end, start) || !skip_blanks(&p, end) || !parse_hex(&p, end, size) ||
	    !skip_blanks(&p, end))
		return false;
	if (*size == 0 || *start + *size < *start)
		return false;
	if (end - p < 1 || end - p > JIT_MAP_MAX_NAME_LEN)
		return false;
	/* control bytes would corrupt the trace's strings; UTF-8 bytes >= 0x80 stay */
	for (s = p; s < end; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	*name = p;
	*name_len = (size_t)(end - p);
	return true;
}

static const char *names_add(struct jit_map *m, const char *s, size_t len)
{
	struct name_block *b = m->names;
	char *d;

	if (m->name_bytes + len + 1 > MAX_NAME_BYTES)
		return NULL;
	if (!b || b->cap - b->used < len + 1) {
		size_t cap = len + 1 > NAME_BLOCK_BYTES ? len + 1 : NAME_BLOCK_BYTES;

		b = malloc(sizeof(*b) + cap);
		if (!b)
			return NULL;
		b->used = 0;
		b->cap = cap;
		b->next = m->names;
		m->names = b;
	}
	d = b->data + b->used;
	memcpy(d, s, len);
	d[len] = '\0';
	b->used += len + 1;
	m->name_bytes += len + 1;
	return d;
}

static int entries_push(struct jit_map *m, uint64_t start, uint64_t size, const char *name,
			size_t name_len)
{
	struct jit_entry *e;

	if (m->n == JIT_MAP_MAX_SYMBOLS)
		return -EFBIG;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;

		e = realloc(m->v, cap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		m->v = e;
		m->cap = cap;
	}
	e = &m->v[m->n];
	e->name = names_add(m, name, name_len);
	if (!e->name)
		return m->name_bytes + name_len + 1 > MAX_NAME_BYTES ? -EFBIG : -ENOMEM;
	e->start = start;
	e->end = start + size;
	e->seq = m->next_seq++;
	m->n++;
	return 0;
}

static int entry_cmp(const void *pa, const void *pb)
{
	const struct jit_entry *a = pa, *b = pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

long jit_map_parse(struct jit_map *m, const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len, *nl, *name;
	uint64_t start, size;
	size_t name_len;
	int err = 0;

	while (p < end && (nl = memchr(p, '\n', (size_t)(end - p)))) {
		if (parse_line(p, nl, &start, &size, &name, &name_len))
			err = entries_push(m, start, size, name, name_len);
		else
			m->bad_lines++;
		if (err < 0)
			break;
		p = nl + 1;
	}
	if (m->n)
		qsort(m->v, m->n, sizeof(*m->v), entry_cmp);
	if (err < 0) {
		m->full = err == -EFBIG;
		return err;
	}
	return (long)(p - buf);
}

/* ---- the file ---------------------------------------------------------------- */

/* The target's effective and filesystem uids and its innermost pid from /proc/PID/status. */
static int read_target_ids(struct jit_map *m)
{
	char path[64], line[256];
	long uid[4], nspid = 0;
	bool found_uid = false;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)m->pid);
	f = fopen(path, "re");
	if (!f)
		return m->have_ids ? 0 : -ESRCH;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "Uid: %ld %ld %ld %ld", &uid[0], &uid[1], &uid[2], &uid[3]) == 4)
			found_uid = true;
		else if (strncmp(line, "NSpid:", 6) == 0 && strrchr(line, '\t'))
			nspid = atol(strrchr(line, '\t') + 1);
	}
	fclose(f);
	if (!found_uid)
		return m->have_ids ? 0 : -ESRCH;
	m->euid = (uid_t)uid[1];
	m->fsuid = (uid_t)uid[3];
	m->nspid = nspid > 0 ? (pid_t)nspid : m->pid;
	m->have_ids = true;
	return 0;
}

/* tmp/perf-NSPID.map inside the target's root; symlinks may not climb out of it. */
static int open_in_target_root(const struct jit_map *m)
{
	struct open_how how = { .flags = OPEN_FLAGS,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	char root[64], name[64];
	int dirfd, fd, e;

	snprintf(root, sizeof(root), "/proc/%d/root", (int)m->pid);
	snprintf(name, sizeof(name), "tmp/perf-%d.map", (int)m->nspid);
	dirfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	fd = (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
	/* openat2 is Linux 5.6: before it, an absolute symlink could leave the root */
	if (fd < 0 && errno == ENOSYS)
		fd = openat(dirfd, name, OPEN_FLAGS);
	e = errno;
	close(dirfd);
	return fd < 0 ? -e : fd;
}

static int open_map_file(const struct jit_map *m)
{
	int fd;

	if (!m->path)
		return open_in_target_root(m);
	fd = open(m->path, OPEN_FLAGS);
	return fd < 0 ? -errno : fd;
}

/* A file only the target's user could have written; sets m->error when not. */
static int check_file(struct jit_map *m, const struct stat *st)
{
	if (!S_ISREG(st->st_mode)) {
		m->error = "perf map is not a regular file";
		return -EPERM;
	}
	if (st->st_uid != m->euid && st->st_uid != m->fsuid) {
		m->error = "perf map is not owned by the target's user";
		return -EPERM;
	}
	if (st->st_mode & S_IWOTH) {
		m->error = "perf map is writable by others";
		return -EPERM;
	}
	if (st->st_size > (off_t)JIT_MAP_MAX_FILE_BYTES) {
		m->error = "perf map is larger than 64 MiB";
		return -EFBIG;
	}
	return 0;
}

static bool same_file(const struct jit_map *m, const struct stat *st)
{
	return m->have_file && st->st_dev == m->dev && st->st_ino == m->ino;
}

static bool unchanged(const struct jit_map *m, const struct stat *st)
{
	return same_file(m, st) && st->st_size == m->size &&
	       st->st_mtim.tv_sec == m->mtime.tv_sec && st->st_mtim.tv_nsec == m->mtime.tv_nsec;
}

/* Keeps the last TAIL_BYTES of the consumed bytes buf[0, len). */
static void keep_tail(struct jit_map *m, const char *buf, size_t len)
{
	m->tail_len = len < TAIL_BYTES ? len : TAIL_BYTES;
	memcpy(m->tail, buf + len - m->tail_len, m->tail_len);
}

/*
 * Parses the complete lines of [from, st_size). From the middle, the bytes
 * before from must still be the ones read last time, else -ESTALE: the file
 * was rewritten, not appended to.
 */
static int read_from(struct jit_map *m, int fd, const struct stat *st, off_t from)
{
	size_t back = from ? m->tail_len : 0, len = (size_t)(st->st_size - from) + back, got = 0;
	off_t start = from - (off_t)back;
	char *buf = malloc(len ? len : 1);
	ssize_t r = 0;
	long used;

	if (!buf)
		return -ENOMEM;
	while (got < len && (r = pread(fd, buf + got, len - got, start + (off_t)got)) > 0)
		got += (size_t)r;
	if (r >= 0 && (got < back || memcmp(buf, m->tail, back) != 0))
		used = -ESTALE;
	else /* short: truncated meanwhile */
		used = r < 0 ? -EIO : jit_map_parse(m, buf + back, got - back);
	if (used >= 0)
		keep_tail(m, buf, back + (size_t)used);
	free(buf);
	if (used < 0) {
		if (used != -ESTALE)
			m->error = used == -EFBIG ? "perf map has too many symbols or names"
						  : "cannot read perf map";
		return (int)used;
	}
	m->parsed_upto = from + used;
	m->reads++;
	return 0;
}

/* Reads what changed: the appended bytes while the file only grew, else everything. */
static int read_changes(struct jit_map *m, int fd, const struct stat *st)
{
	bool again = !same_file(m, st) || st->st_size < m->parsed_upto || st->st_size == m->size;
	int err;

	if (unchanged(m, st))
		return 0;
	err = again ? -ESTALE : read_from(m, fd, st, m->parsed_upto);
	/* replaced, truncated or rewritten: start over (the names stay, see the top) */
	if (err == -ESTALE) {
		m->n = 0;
		m->parsed_upto = 0;
		m->tail_len = 0;
		err = read_from(m, fd, st, 0);
	}
	if (err < 0)
		return err;
	m->have_file = true;
	m->dev = st->st_dev;
	m->ino = st->st_ino;
	m->size = st->st_size;
	m->mtime = st->st_mtim;
	return 1;
}

int jit_map_refresh(struct jit_map *m)
{
	struct stat st;
	int fd, err;

	if (m->full)
		return -EFBIG;
	m->error = NULL;
	err = read_target_ids(m);
	if (err < 0) {
		m->error = "cannot read the target's uid";
		return err;
	}
	fd = open_map_file(m);
	if (fd < 0) {
		if (fd == -ELOOP)
			m->error = "perf map is a symlink";
		else if (fd != -ENOENT)
			m->error = "cannot open perf map";
		return fd;
	}
	err = fstat(fd, &st) < 0 ? -errno : check_file(m, &st);
	if (err == 0)
		err = read_changes(m, fd, &st);
	close(fd);
	return err;
}

int jit_map_find(const struct jit_map *m, uint64_t pc, struct jit_symbol *out)
{
	size_t lo = 0, hi = m->n, i, k;
	const struct jit_entry *best = NULL;

	/* first entry starting above pc */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* code reused by a later function: the later line of those covering pc */
	for (i = lo, k = 0; i > 0 && k < LOOKBACK; i--, k++)
		if (pc < m->v[i - 1].end && (!best || m->v[i - 1].seq > best->seq))
			best = &m->v[i - 1];
	if (!best)
		return -ENOENT;
	*out = (struct jit_symbol){ best->start, best->end, best->name };
	return 0;
}

const char *jit_map_error(const struct jit_map *m)
{
	return m->error;
}

void jit_map_get_stats(const struct jit_map *m, struct jit_map_stats *out)
{
	*out = (struct jit_map_stats){ m->n, m->bad_lines, m->reads };
}

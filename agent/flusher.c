// SPDX-License-Identifier: MIT
/*
 * Flusher thread: every few milliseconds drains all thread rings into a
 * staging buffer of event chunks, compresses it (zstd, one stream per
 * connection, flushed per frame) and sends it. If the daemon stops reading,
 * sends fail after a timeout, recording stops, and target threads only ever
 * see full rings (drops counted), never a blocked call. When the daemon is
 * gone the flusher has the agent unpatch, closes the socket and exits.
 */
#define PR_FMT "profagent: "

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "agent/agent_thread.h"
#include "agent/flusher.h"
#include "common/mono_clock.h"
#include "proto/frame.h"
#include "proto/frame_io.h"
#include "profd.pb-c.h"

#define FLUSH_INTERVAL_NS (5 * 1000 * 1000)
#define STAGE_CAPACITY (4u << 20)
#define ZSTD_LEVEL 1
#define STOP_TIMEOUT_S 3
/* A run commits right after the flusher starts; an attach may stop between the two. */
#define RELEASE_WAIT_NS (2000ull * 1000 * 1000)
/* At detach: how long calls already entered get to return (and record their exit). */
#define RETURN_WAIT_NS (100ull * 1000 * 1000)
#define RETURN_POLL_NS (1000 * 1000)

/* One flusher per process: the agent is a per-process singleton. */
static struct flusher {
	int sock;
	ZSTD_CCtx *cctx;
	uint8_t *stage;
	size_t stage_len;
	uint8_t *out;
	size_t out_cap;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	int running;
	int stop_requested;
	int failed;
	const char *stop_reason;
	bool let_calls_return; /* detach: calls entered before the unpatch may still return */
	_Atomic uint64_t events;
	_Atomic uint64_t dropped;
	struct event_clock_pair initial_pair;
	int initial_pair_pending;
	/* set once the functions are patched: no lock, the patching thread may be alone */
	_Atomic int released;
	_Atomic int exited;      /* the flusher thread has returned */
	_Atomic int table_pending; /* more functions were instrumented (a module was loaded) */
	/*
	 * Held while new functions are patched (by a thread in dlopen) and while
	 * the flusher sends the table and drains: no event reaches the daemon
	 * before the table that names its function.
	 */
	pthread_mutex_t table_lock;
	int table_sent;
	int (*send_table)(void *ctx, int sock);
	void (*lost)(void *ctx);
	void *table_ctx;
} flusher = { .sock = -1, .lock = PTHREAD_MUTEX_INITIALIZER,
	       .table_lock = PTHREAD_MUTEX_INITIALIZER };

void flusher_read_clock_pair(struct event_clock_pair *pair)
{
	uint64_t best_span = UINT64_MAX;

	for (int i = 0; i < 3; i++) {
		struct timespec ts;
		uint64_t before = __builtin_ia32_rdtsc();

		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t after = __builtin_ia32_rdtsc();

		if (after - before < best_span) {
			best_span = after - before;
			pair->tsc = before + (after - before) / 2;
			pair->mono_ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		}
	}
}

static int flusher_send_stage(void)
{
	ZSTD_inBuffer in = { flusher.stage, flusher.stage_len, 0 };
	ZSTD_outBuffer out = { flusher.out, flusher.out_cap, 0 };
	size_t remaining;

	if (flusher.stage_len == 0 || flusher.failed)
		goto done;
	do {
		remaining = ZSTD_compressStream2(flusher.cctx, &out, &in, ZSTD_e_flush);
		if (ZSTD_isError(remaining)) {
			flusher.failed = -EIO;
			goto done;
		}
	} while (remaining != 0 && out.pos < out.size);
	if (remaining != 0 || frame_send(flusher.sock, FRAME_EVENTS, out.dst, out.pos, -1) < 0)
		flusher.failed = -EPIPE;
done:
	flusher.stage_len = 0;
	return flusher.failed;
}

#define CLOCK_PAIR_CHUNK_LEN (sizeof(struct event_chunk_header) + sizeof(struct event_clock_pair))

/*
 * Ends the frame with a clock pair read now: every record staged before it
 * was written earlier, so the daemon can place all of them in time.
 */
static void flusher_end_frame(void)
{
	struct event_chunk_header h = { .kind = EVENT_CHUNK_CLOCK_PAIR };
	struct event_clock_pair pair;

	flusher_read_clock_pair(&pair);
	memcpy(flusher.stage + flusher.stage_len, &h, sizeof(h));
	memcpy(flusher.stage + flusher.stage_len + sizeof(h), &pair, sizeof(pair));
	flusher.stage_len += CLOCK_PAIR_CHUNK_LEN;
	flusher_send_stage();
}

/* Room for len bytes, always leaving room for the frame's closing clock pair. */
static void *flusher_reserve(size_t len)
{
	void *p;

	if (flusher.stage_len + len + CLOCK_PAIR_CHUNK_LEN > STAGE_CAPACITY)
		flusher_end_frame();
	p = flusher.stage + flusher.stage_len;
	flusher.stage_len += len;
	return p;
}

static void flusher_put_chunk(uint32_t kind, uint32_t tid, uint32_t count, uint64_t drops,
			      const void *body, size_t body_len)
{
	struct event_chunk_header h = { .kind = kind, .tid = tid, .count = count, .drops = drops };
	uint8_t *p = flusher_reserve(sizeof(h) + body_len);

	memcpy(p, &h, sizeof(h));
	if (body_len)
		memcpy(p + sizeof(h), body, body_len);
}

static void flusher_put_records(struct agent_thread *t, uint64_t from, uint64_t n, uint64_t drops)
{
	const uint64_t mask = AGENT_RING_RECORDS - 1;
	const uint64_t max_per_chunk = (STAGE_CAPACITY / 2) / sizeof(struct event_record);

	/* do-while: a drops-only update (empty ring) still needs its chunk */
	do {
		uint64_t count = n < max_per_chunk ? n : max_per_chunk;

		/* an enter and its frame stay in one chunk */
		if (count < n && event_unit_is_frame(&t->records[(from + count) & mask]))
			count--;
		uint64_t first = AGENT_RING_RECORDS - (from & mask);
		uint64_t first_part = count < first ? count : first;
		struct event_chunk_header h = { .kind = EVENT_CHUNK_RECORDS, .tid = t->tid,
						.count = (uint32_t)count, .drops = drops };
		uint8_t *p = flusher_reserve(sizeof(h) + count * sizeof(struct event_record));

		memcpy(p, &h, sizeof(h));
		p += sizeof(h);
		memcpy(p, &t->records[from & mask], first_part * sizeof(struct event_record));
		memcpy(p + first_part * sizeof(struct event_record), t->records,
		       (count - first_part) * sizeof(struct event_record));
		from += count;
		n -= count;
	} while (n > 0);
}

static void flusher_drain_thread(struct agent_thread *t, void *ctx)
{
	/* pairs with the release in state_publish() (agent/hooks.c) */
	uint64_t head = state_head(atomic_load_explicit(&t->committed, memory_order_acquire));
	uint64_t tail = atomic_load_explicit(&t->tail, memory_order_relaxed);
	uint64_t drops = atomic_load_explicit(&t->drops, memory_order_relaxed);
	int exited = atomic_load_explicit(&t->state, memory_order_acquire) == AGENT_THREAD_EXITED;

	(void)ctx;
	if (t->flusher_stage == FLUSHER_STAGE_NEW) {
		flusher_put_chunk(EVENT_CHUNK_THREAD_NAME, t->tid, 0, drops, t->name, sizeof(t->name));
		t->flusher_stage = FLUSHER_STAGE_NAMED;
	}
	if (head != tail || drops != t->drops_reported) {
		flusher_put_records(t, tail, head - tail, drops);
		/* ring units: an enter counts twice (record + frame) */
		atomic_fetch_add_explicit(&flusher.events, head - tail, memory_order_relaxed);
		atomic_fetch_add_explicit(&flusher.dropped, drops - t->drops_reported,
					  memory_order_relaxed);
		t->drops_reported = drops;
		/* pairs with the acquire in hooks_ring_has_room() */
		atomic_store_explicit(&t->tail, head, memory_order_release);
	}
	if (exited && t->flusher_stage == FLUSHER_STAGE_NAMED &&
	    state_head(atomic_load_explicit(&t->committed, memory_order_acquire)) == head) {
		flusher_put_chunk(EVENT_CHUNK_THREAD_EXIT, t->tid, 0, drops, NULL, 0);
		t->flusher_stage = FLUSHER_STAGE_EXIT_SENT;
	}
}

/* The daemon closed our connection (it exited or ended the session): nobody listens. */
static int daemon_gone(void)
{
	char byte;
	ssize_t n = recv(flusher.sock, &byte, 1, MSG_PEEK | MSG_DONTWAIT);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void flusher_cycle(void)
{
	if (!flusher.failed && daemon_gone())
		flusher.failed = -ECONNRESET;
	if (!atomic_load_explicit(&flusher.released, memory_order_acquire) || flusher.failed)
		return;
	pthread_mutex_lock(&flusher.table_lock);
	if (!flusher.table_sent || atomic_exchange(&flusher.table_pending, 0)) {
		/* the daemon needs the names before any event */
		if (flusher.send_table(flusher.table_ctx, flusher.sock) < 0)
			flusher.failed = -EPIPE;
		flusher.table_sent = 1;
	}
	if (flusher.initial_pair_pending) {
		flusher_put_chunk(EVENT_CHUNK_CLOCK_PAIR, 0, 0, 0, &flusher.initial_pair,
				  sizeof(flusher.initial_pair));
		flusher.initial_pair_pending = 0;
	}
	threads_for_each(flusher_drain_thread, NULL);
	pthread_mutex_unlock(&flusher.table_lock);
	/* Taken after the drain: every record above was written before it. */
	flusher_end_frame();
	threads_recycle_drained();
}

static void flusher_send_goodbye(void)
{
	Profd__AgentGoodbye bye = PROFD__AGENT_GOODBYE__INIT;
	uint8_t buf[256];
	size_t len;

	bye.events = atomic_load(&flusher.events);
	bye.dropped = atomic_load(&flusher.dropped);
	bye.reason = (char *)(flusher.stop_reason ? flusher.stop_reason : "");
	if (profd__agent_goodbye__get_packed_size(&bye) > sizeof(buf))
		bye.reason = "";
	len = profd__agent_goodbye__pack(&bye, buf);
	frame_send(flusher.sock, FRAME_AGENT_GOODBYE, buf, len, -1);
}

static int flusher_stopping(void)
{
	int stop;

	pthread_mutex_lock(&flusher.lock);
	stop = flusher.stop_requested;
	pthread_mutex_unlock(&flusher.lock);
	return stop;
}

/*
 * Nobody listens and nobody will detach from outside: once the patches are
 * in (released), recording goes off for good and the agent puts the code
 * back (lost); then the socket goes. Its number is forgotten before it is
 * closed: a fork in between must not close a descriptor reusing it.
 */
static void flusher_give_up(void)
{
	uint64_t deadline = mono_clock_ns() + RELEASE_WAIT_NS;
	int sock = flusher.sock;

	while (!atomic_load_explicit(&flusher.released, memory_order_acquire) &&
	       !flusher_stopping() && mono_clock_ns() < deadline)
		nanosleep(&(struct timespec){ 0, FLUSH_INTERVAL_NS }, NULL);
	/* after the release: the commit turns recording on just before it */
	atomic_store(&agent_recording, 0);
	if (!atomic_load_explicit(&flusher.released, memory_order_acquire) || !flusher.lost)
		return;
	flusher.lost(flusher.table_ctx);
	flusher.sock = -1;
	close(sock);
}

/*
 * Detach: the calls entered before the unpatch still return through the exit
 * trampoline and record their exit. Give them a moment, draining meanwhile,
 * so their slices close in this trace rather than after the goodbye. A call
 * that runs on (main, a worker's loop) stays open in the trace: it was.
 */
static void flusher_let_calls_return(void)
{
	uint64_t deadline = mono_clock_ns() + RETURN_WAIT_NS;

	while (threads_with_open_calls() && mono_clock_ns() < deadline && !flusher.failed) {
		flusher_cycle();
		nanosleep(&(struct timespec){ 0, RETURN_POLL_NS }, NULL);
	}
}

static void *flusher_main(void *arg)
{
	struct timespec next;

	(void)arg;
	threads_guard_forever();
	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&flusher.lock);
	while (!flusher.stop_requested && !flusher.failed) {
		next.tv_nsec += FLUSH_INTERVAL_NS;
		if (next.tv_nsec >= 1000000000) {
			next.tv_nsec -= 1000000000;
			next.tv_sec++;
		}
		pthread_cond_timedwait(&flusher.wake, &flusher.lock, &next);
		pthread_mutex_unlock(&flusher.lock);
		flusher_cycle();
		pthread_mutex_lock(&flusher.lock);
	}
	pthread_mutex_unlock(&flusher.lock);
	if (flusher.failed)
		atomic_store(&agent_recording, 0); /* nobody listens: stop paying for events */
	else if (flusher.let_calls_return)
		flusher_let_calls_return();
	flusher_cycle();
	if (!flusher.failed)
		flusher_send_goodbye();
	if (flusher.failed) /* detach will not reach us: leave a usable state */
		flusher_give_up();
	atomic_store(&flusher.exited, 1);
	return NULL;
}

static int flusher_alloc(void)
{
	if (!flusher.cctx)
		flusher.cctx = ZSTD_createCCtx();
	if (!flusher.stage)
		flusher.stage = malloc(STAGE_CAPACITY);
	flusher.out_cap = ZSTD_compressBound(STAGE_CAPACITY) + 1024;
	if (!flusher.out)
		flusher.out = malloc(flusher.out_cap);
	if (!flusher.cctx || !flusher.stage || !flusher.out)
		return -ENOMEM;
	/* a new connection is a new zstd stream */
	ZSTD_CCtx_reset(flusher.cctx, ZSTD_reset_session_only);
	ZSTD_CCtx_setParameter(flusher.cctx, ZSTD_c_compressionLevel, ZSTD_LEVEL);
	return 0;
}

int flusher_start(int sock, int (*send_table)(void *ctx, int sock), void (*lost)(void *ctx),
		  void *ctx)
{
	pthread_condattr_t attr;
	sigset_t all, old;
	struct timeval send_timeout = { .tv_sec = 2 };
	int err;

	if (flusher.running)
		return -EBUSY;
	err = flusher_alloc();
	if (err)
		return err;
	flusher.sock = sock;
	flusher.send_table = send_table;
	flusher.lost = lost;
	flusher.table_ctx = ctx;
	flusher.table_sent = 0;
	flusher.stage_len = 0;
	flusher.stop_requested = 0;
	flusher.failed = 0;
	flusher.stop_reason = NULL;
	flusher.let_calls_return = false;
	atomic_store(&flusher.released, 0);
	atomic_store(&flusher.exited, 0);
	/* A daemon that stops reading makes sends fail instead of hanging the flusher. */
	setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &send_timeout, sizeof(send_timeout));
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&flusher.wake, &attr);
	pthread_condattr_destroy(&attr);
	/* The target's signals must never be delivered to our thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&flusher.thread, NULL, flusher_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err)
		return -err;
	pthread_setname_np(flusher.thread, "profd-flusher");
	flusher.running = 1;
	return 0;
}

void flusher_release(const struct event_clock_pair *initial)
{
	flusher.initial_pair = *initial;
	flusher.initial_pair_pending = 1;
	/* pairs with the acquire in flusher_cycle() */
	atomic_store_explicit(&flusher.released, 1, memory_order_release);
}

int flusher_stop(const char *reason, bool let_calls_return)
{
	struct timespec deadline;

	if (!flusher.running)
		return 0;
	pthread_mutex_lock(&flusher.lock);
	flusher.stop_requested = 1;
	flusher.stop_reason = reason;
	flusher.let_calls_return = let_calls_return;
	pthread_cond_signal(&flusher.wake);
	pthread_mutex_unlock(&flusher.lock);
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += STOP_TIMEOUT_S;
	if (pthread_timedjoin_np(flusher.thread, NULL, &deadline) != 0)
		return -ETIMEDOUT;
	flusher.running = 0;
	return 0;
}

void flusher_table_lock(void)
{
	pthread_mutex_lock(&flusher.table_lock);
}

void flusher_table_unlock(int added)
{
	if (added)
		atomic_store(&flusher.table_pending, 1);
	pthread_mutex_unlock(&flusher.table_lock);
}

int flusher_lost(void)
{
	return !flusher.running || atomic_load(&flusher.exited);
}

void flusher_forget_after_fork(void)
{
	if (flusher.sock >= 0)
		close(flusher.sock); /* the child's copy only: the parent's stream is untouched */
	flusher.sock = -1;
	flusher.running = 0;
}


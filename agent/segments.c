// SPDX-License-Identifier: MIT
/*
 * The session's pool of ring segments (agent/agent_thread.h): every thread's
 * ring grows by taking segments from here, in its slow path with signals
 * blocked, and the flusher gives them back as it drains them. Segments come
 * in power-of-two sizes from SEGMENT_FIRST to SEGMENT_SPAN units. The budget
 * bounds what all threads hold together; past it calls are kept off the
 * timeline (counted), never waited for. Free segments stay resident while
 * they are reused (a fault per page in the hooks cost more than the hooks:
 * +18 ns per call in bench/overhead when every freed segment was handed
 * back); those left unused for TRIM_AFTER_NS go back to the kernel
 * (MADV_DONTNEED), so memory grows only while a burst needs it. Pages are
 * populated in the slow path, never faulted in page by page by the hooks:
 * a segment's first READY_FIRST units (a quarter of a bigger one) when it
 * is taken, then twice as much each time the ring reaches the end of what
 * is (segments_populate), so a process that records a few calls populates
 * a few pages, not the 96 KiB of its first two segments (each 32-45 us of
 * a process's start).
 * Never reached from the hooks' fast path.
 */
#define PR_FMT "profagent: "

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

#include "agent/agent_thread.h"
#include "agent/flusher.h"

#include "common/mono_clock.h"

#define UNIT_BYTES sizeof(struct event_record)
/* the python json round trip of tests/integration/test_exact_calls.sh peaks at 50-64 MiB */
#define DEFAULT_BUDGET_BYTES (128ull << 20)
#define N_CLASSES 6 /* SEGMENT_FIRST << 5 == SEGMENT_SPAN */
/*
 * Free segments unused this long go back to the kernel (segments_trim). A
 * thread that records in bursts takes its segments back from the pool at
 * each burst: trimmed in between, every page faulted in again (a fault per
 * 4 KiB of ring, 3.5 us each on our VM: 20,000 calls every 1.5 s cost 57-88 ns
 * a call with a 1 s window, 26-45 once the ring stayed resident; bench/README.md).
 * Ten seconds keeps a service's ring warm between requests a few seconds
 * apart; what a burst needed past that goes back.
 */
#define TRIM_AFTER_NS (10000ull * 1000 * 1000)
/*
 * Segments held by the process past which a thread taking one wakes the
 * flusher for a drain now (else its next tick): a process of a tree that
 * lives a few milliseconds fills its first segments before that tick, and
 * its exit drains them, without a cycle (and profd's) on the way.
 */
#define POKE_ABOVE_UNITS ((1ull << 20) / UNIT_BYTES)
/* A segment's part populated when it is taken, at least: 8 KiB, a few hundred calls. */
#define READY_FIRST ((8u << 10) / UNIT_BYTES)

_Static_assert(SEGMENT_FIRST << (N_CLASSES - 1) == SEGMENT_SPAN, "size classes");

struct free_segment {
	struct free_segment *next;
	uint64_t freed_ns;  /* when it came back */
	uint32_t ready;     /* units from its start whose pages are (or may be) in memory */
};

/* Global: the hooks read it when a thread has no segment (hooks.c ring_switch). */
_Atomic uint32_t agent_segments_generation = 1;

/* One pool per process (the agent is a per-process singleton); all under lock. */
static struct segment_pool {
	pthread_mutex_t lock;
	struct free_segment *free_lists[N_CLASSES];
	uint64_t budget, in_use, peak, resident_free; /* units */
	uint32_t page_units; /* units a page holds */
} pool = { .lock = PTHREAD_MUTEX_INITIALIZER, .budget = DEFAULT_BUDGET_BYTES / UNIT_BYTES };

static unsigned size_class(uint32_t units)
{
	unsigned c = 0;

	while (c + 1 < N_CLASSES && (SEGMENT_FIRST << c) < units)
		c++;
	return c;
}

void segments_set_budget(uint64_t bytes)
{
	uint64_t units = (bytes ? bytes : DEFAULT_BUDGET_BYTES) / UNIT_BYTES;

	pthread_mutex_lock(&pool.lock);
	pool.budget = units > SEGMENT_FIRST ? units : SEGMENT_FIRST;
	pool.peak = pool.in_use;
	pthread_mutex_unlock(&pool.lock);
	atomic_fetch_add(&agent_segments_generation, 1); /* denied threads may try again */
}

static uint32_t page_units(void)
{
	if (!pool.page_units)
		pool.page_units = (uint32_t)(sysconf(_SC_PAGESIZE) / UNIT_BYTES);
	return pool.page_units;
}

/*
 * Populates seg's units [from, to) (to rounded up to a page, at most units):
 * the new ready. MADV_POPULATE_WRITE (Linux 5.14), else a write to each
 * page, here rather than a fault in the hooks. Nothing reads past the
 * ring's head there: the bytes written are the ring's to overwrite.
 */
static uint32_t populate(struct event_record *seg, uint32_t units, uint32_t from, uint32_t to)
{
	uint32_t page = page_units();

	to = to + page - 1 - (to + page - 1) % page;
	if (to > units)
		to = units;
	if (from >= to)
		return from;
	from -= from % page; /* ready is a page's end, or the capacity */
	if (madvise(seg + from, (size_t)(to - from) * UNIT_BYTES, MADV_POPULATE_WRITE))
		for (uint32_t u = from; u < to; u += page)
			*(volatile uint8_t *)&seg[u] = 0;
	return to;
}

/* A segment of x->units (a class size), or NULL past the budget or out of memory. */
static struct event_record *pool_take_locked(struct seg_extent *x)
{
	struct free_segment **list = &pool.free_lists[size_class(x->units)], *f = *list;
	void *seg;

	if (pool.in_use + x->units > pool.budget)
		return NULL;
	if (f) {
		*list = f->next;
		pool.resident_free -= f->ready;
		seg = f;
		x->ready = f->ready;
	} else {
		/* no MAP_POPULATE: the first part only, below */
		seg = mmap(NULL, (size_t)x->units * UNIT_BYTES, PROT_READ | PROT_WRITE,
			   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (seg == MAP_FAILED)
			return NULL;
		/*
		 * A forked child forgets the parent's segments (segments_after_fork):
		 * zero pages there, rather than copies that pin what the parent
		 * rewrites (Linux 4.14; older kernels copy, as any fork does).
		 */
		madvise(seg, (size_t)x->units * UNIT_BYTES, MADV_WIPEONFORK);
		x->ready = 0;
	}
	/* a quarter of a bigger one: two trips to the slow path, not seven, for 1 MiB */
	if (x->ready < READY_FIRST || x->ready < x->units / 4)
		x->ready = populate(seg, x->units, x->ready,
				    READY_FIRST > x->units / 4 ? READY_FIRST : x->units / 4);
	pool.in_use += x->units;
	if (pool.in_use > pool.peak)
		pool.peak = pool.in_use;
	return seg;
}

static void pool_give_locked(struct event_record *seg, struct seg_extent x)
{
	struct free_segment *f = (struct free_segment *)seg;

	f->ready = x.ready;
	f->freed_ns = mono_clock_ns();
	pool.resident_free += x.ready;
	f->next = pool.free_lists[size_class(x.units)];
	pool.free_lists[size_class(x.units)] = f;
	pool.in_use -= x.units;
}

/* Twice the current segment (a thread that fills one wants a bigger one), within the budget. */
static uint32_t next_size(struct agent_thread *t)
{
	uint64_t head = state_head(atomic_load_explicit(&t->committed, memory_order_relaxed));
	uint32_t slot = (uint32_t)((head / SEGMENT_SPAN) % SEGMENT_SLOTS);
	uint32_t units = atomic_load_explicit(&t->seg_map[slot], memory_order_relaxed) ?
				 t->seg_extent[slot].units * 2 :
				 SEGMENT_FIRST;
	uint64_t left = pool.budget > pool.in_use ? pool.budget - pool.in_use : 0;

	if (units > SEGMENT_SPAN)
		units = SEGMENT_SPAN;
	/* never more than an eighth of what is left: other threads need room too */
	while (units > SEGMENT_FIRST && units > left / 8)
		units /= 2;
	return units;
}

void segments_refill_spare(struct agent_thread *t)
{
	/* before taking: a release after it moves the generation, so the thread retries */
	uint32_t gen = atomic_load(&agent_segments_generation);
	int poke;

	/* a spare a cut-short switch left is cleared by ring_switch(), which asked for this */
	t->want_spare = 0;
	if (t->spare)
		return;
	pthread_mutex_lock(&pool.lock);
	t->spare_extent.units = next_size(t);
	t->spare = pool_take_locked(&t->spare_extent);
	poke = !t->spare || pool.in_use >= POKE_ABOVE_UNITS;
	pthread_mutex_unlock(&pool.lock);
	if (!t->spare)
		t->denied_gen = gen;
	if (poke) /* segments fill: drain them now rather than at the next tick */
		flusher_poke();
}

void segments_populate(struct agent_thread *t)
{
	uint64_t head = state_head(atomic_load_explicit(&t->committed, memory_order_relaxed));
	uint32_t slot = (uint32_t)((head / SEGMENT_SPAN) % SEGMENT_SLOTS);
	struct event_record *seg = atomic_load_explicit(&t->seg_map[slot], memory_order_relaxed);
	struct seg_extent *x = &t->seg_extent[slot];
	uint32_t need = t->want_ready, want;

	t->want_ready = 0;
	if (!seg || x->ready >= x->units)
		return;
	/*
	 * Twice what is: a few trips to the slow path per segment, however it
	 * fills. While the flusher thread is due and waits for a slow path to
	 * start it (flusher_start_due), one every READY_FIRST units: a thread
	 * that records calls starts it within a few hundred of them.
	 */
	want = flusher_start_due() ? x->ready + READY_FIRST : x->ready * 2;
	if (want < need)
		want = need;
	x->ready = populate(seg, x->units, x->ready, want);
}

void segments_release(struct agent_thread *t, uint64_t k)
{
	uint32_t slot = (uint32_t)(k % SEGMENT_SLOTS);
	struct seg_extent x = t->seg_extent[slot]; /* read before the slot is handed back */
	struct event_record *seg =
		atomic_exchange_explicit(&t->seg_map[slot], NULL, memory_order_release);

	if (!seg)
		return;
	/* the owner took it again for the next span (hooks.c ring_switch): it stays its */
	if (seg == atomic_load_explicit(&t->seg_map[(slot + 1) % SEGMENT_SLOTS],
					memory_order_relaxed))
		return;
	pthread_mutex_lock(&pool.lock);
	pool_give_locked(seg, x);
	pthread_mutex_unlock(&pool.lock);
	/* pairs with the acquire in hooks.c ring_switch(): denied threads retry */
	atomic_fetch_add_explicit(&agent_segments_generation, 1, memory_order_release);
}

void segments_release_all(struct agent_thread *t)
{
	struct event_record *segs[SEGMENT_SLOTS];

	for (uint32_t i = 0; i < SEGMENT_SLOTS; i++) {
		segs[i] = atomic_exchange(&t->seg_map[i], NULL);
		atomic_store(&t->span_end[i], 0);
	}
	pthread_mutex_lock(&pool.lock);
	for (uint32_t i = 0; i < SEGMENT_SLOTS; i++)
		/* one taken again for the next span is in that slot too: given back once */
		if (segs[i] && segs[i] != t->spare && segs[i] != segs[(i + 1) % SEGMENT_SLOTS])
			pool_give_locked(segs[i], t->seg_extent[i]);
	if (t->spare)
		pool_give_locked(t->spare, t->spare_extent);
	t->spare = NULL;
	pthread_mutex_unlock(&pool.lock);
	t->ring_base = 0;
	t->ring_end = 0;
	atomic_fetch_add(&agent_segments_generation, 1);
}

void segments_trim(uint64_t now_ns)
{
	pthread_mutex_lock(&pool.lock);
	for (unsigned c = 0; c < N_CLASSES; c++) {
		for (struct free_segment *f = pool.free_lists[c]; f; f = f->next) {
			/* the first page stays: it holds this header */
			uint32_t keep = page_units();

			/*
			 * freed after now_ns: given back by the drain that read the
			 * clock (flusher_cycle), not a second ago. Trimming those
			 * made every process's exit drain an MADV_DONTNEED.
			 */
			if (f->ready <= keep || now_ns < f->freed_ns ||
			    now_ns - f->freed_ns < TRIM_AFTER_NS)
				continue;
			madvise((struct event_record *)f + keep, (size_t)(f->ready - keep) * UNIT_BYTES,
				MADV_DONTNEED);
			pool.resident_free -= f->ready - keep;
			f->ready = keep;
		}
	}
	pthread_mutex_unlock(&pool.lock);
}

/* Async-signal-safe (atfork child handler): the pool starts empty, its lock anew. */
void segments_after_fork(void)
{
	pool.lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	for (unsigned c = 0; c < N_CLASSES; c++)
		pool.free_lists[c] = NULL;
	pool.in_use = 0;
	pool.peak = 0;
	pool.resident_free = 0;
	atomic_fetch_add(&agent_segments_generation, 1);
}

void segments_stats(struct segment_pool_stats *st)
{
	pthread_mutex_lock(&pool.lock);
	st->budget_bytes = pool.budget * UNIT_BYTES;
	st->peak_bytes = pool.peak * UNIT_BYTES;
	st->in_use_bytes = pool.in_use * UNIT_BYTES;
	st->resident_bytes = (pool.in_use + pool.resident_free) * UNIT_BYTES;
	pthread_mutex_unlock(&pool.lock);
}

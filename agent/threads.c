// SPDX-License-Identifier: MIT
/*
 * Thread registry of the agent: creates a thread's state on its first
 * instrumented call (the slow path, entered from the trampoline with all
 * vector state saved), marks it exited when the thread ends, and lets the
 * flusher walk and recycle the states. Only this file allocates them.
 */
#define PR_FMT "profagent: "

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent_thread.h"
#include "trampolines/trampoline_layout.h"

/* The registry: pushed by any thread's slow path, walked by the flusher. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct agent_thread *registry_head;
static struct agent_thread *free_list;
static pthread_key_t thread_exit_key;

#define AGG_PAGE_BYTES (AGG_PAGE_FUNCS * sizeof(struct func_agg))

static struct agent_thread *thread_state_alloc(void)
{
	struct agent_thread *t;

	pthread_mutex_lock(&registry_lock);
	t = free_list;
	if (t)
		free_list = t->next;
	pthread_mutex_unlock(&registry_lock);
	if (t)
		return t;

	/* the ring comes from the segment pool; untouched pages of this cost nothing */
	t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return t == MAP_FAILED ? NULL : t;
}

/* The main thread's stack, when the agent found it already (threads_set_main_stack). */
static uintptr_t main_stack_lo, main_stack_hi;

void threads_set_main_stack(uintptr_t lo, uintptr_t hi)
{
	main_stack_lo = lo;
	main_stack_hi = hi;
}

/* Where this thread's own stack lies: stale shadow entries are only judged there. */
static void thread_stack_bounds(struct agent_thread *t)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	pthread_attr_t attr;
	void *addr;
	size_t size;

	/* the process's first thread, running on its own stack (not a sigaltstack) */
	if (sp >= main_stack_lo && sp < main_stack_hi && t->tid == (uint32_t)getpid()) {
		t->stack_lo = main_stack_lo;
		t->stack_hi = main_stack_hi;
		return;
	}
	t->stack_lo = t->stack_hi = 0;
	if (pthread_getattr_np(pthread_self(), &attr))
		return;
	if (pthread_attr_getstack(&attr, &addr, &size) == 0) {
		t->stack_lo = (uintptr_t)addr;
		t->stack_hi = (uintptr_t)addr + size;
	}
	pthread_attr_destroy(&attr);
}

void threads_map_agg_page(struct agent_thread *t, uint32_t index)
{
	struct func_agg *page;

	t->want_agg_page = 0;
	if (index >= AGG_PAGES || atomic_load_explicit(&t->agg_pages[index], memory_order_relaxed))
		return;
	page = mmap(NULL, AGG_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	if (page == MAP_FAILED) {
		t->memory_failed = 1; /* its calls are counted as unattributed from now on */
		return;
	}
	/* pairs with the acquire in flusher_put_aggregates() */
	atomic_store_explicit(&t->agg_pages[index], page, memory_order_release);
	if (index >= atomic_load_explicit(&t->agg_pages_end, memory_order_relaxed))
		/* after the page: pairs with the acquire in flusher_put_aggregates() */
		atomic_store_explicit(&t->agg_pages_end, index + 1, memory_order_release);
}

/* A new owner (or a new session) starts from zero; the pages stay mapped. */
void threads_clear_aggregates(struct agent_thread *t)
{
	uint32_t end = atomic_load_explicit(&t->agg_pages_end, memory_order_relaxed);

	for (uint32_t i = 0; i < end; i++) {
		struct func_agg *page = atomic_load_explicit(&t->agg_pages[i], memory_order_relaxed);

		if (page)
			memset(page, 0, AGG_PAGE_BYTES);
	}
	for (int i = 0; i < AGG_DROP_REASONS; i++)
		atomic_store(&t->drop_reasons[i], 0);
	atomic_store(&t->unattributed, 0);
	for (int i = 0; i < AGG_FILTER_REASONS; i++)
		atomic_store(&t->filtered_by[i], 0);
	t->memory_failed = 0;
}

static void thread_state_reset(struct agent_thread *t)
{
	atomic_store(&t->committed, 0);
	atomic_store(&t->tail, 0);
	threads_clear_aggregates(t);
	t->ring_base = 0;
	t->ring_end = 0;
	t->spare = NULL;
	t->want_spare = 0;
	t->want_ready = 0;
	t->want_agg_page = 0;
	t->denied_gen = atomic_load(&agent_segments_generation) - 1;
	t->aggregates_sent_ns = 0;
	atomic_store(&t->state, AGENT_THREAD_LIVE);
	t->guard_recoveries = 0;
	t->drops_reported = 0;
	t->flusher_stage = FLUSHER_STAGE_NEW;
	t->tid = (uint32_t)gettid();
	t->returns_restored = 0;
	t->shadow_floor.return_slot = (uintptr_t *)UINTPTR_MAX; /* never stale (agent_thread.h) */
	memset(t->name, 0, sizeof(t->name));
	prctl(PR_GET_NAME, t->name);
	thread_stack_bounds(t);
}

/* Runs at thread exit (TSD destructor): the thread records nothing more. */
static void thread_exit_destructor(void *arg)
{
	struct agent_thread *t = arg;

	agent_thread_guard = 1;
	/* pthread_exit or cancellation left calls open: their frames are gone */
	hooks_close_all(t);
	agent_current_thread = NULL;
	atomic_store_explicit(&t->state, AGENT_THREAD_EXITED, memory_order_release);
}

void profagent_thread_attach_slow(void)
{
	struct agent_thread *t;

	agent_thread_guard = 1;
	t = thread_state_alloc();
	if (!t)
		return; /* guard stays set: this thread runs uninstrumented */
	thread_state_reset(t);
	if (pthread_setspecific(thread_exit_key, t) != 0) {
		/* Without the destructor the state could never be reclaimed safely. */
		pthread_mutex_lock(&registry_lock);
		t->next = free_list;
		free_list = t;
		pthread_mutex_unlock(&registry_lock);
		return;
	}
	pthread_mutex_lock(&registry_lock);
	t->next = registry_head;
	registry_head = t;
	pthread_mutex_unlock(&registry_lock);
	agent_current_thread = t;
	agent_thread_guard = 0;
}

/*
 * In a forked child, from the atfork child handler: only the calling thread
 * exists and only async-signal-safe work is allowed (a lock another parent
 * thread held stays held in the copy: the lock is made anew). The other
 * threads' states are the parent's: forgotten, never drained nor reused.
 * The caller's keeps its shadow stack (those frames return through the exit
 * trampoline here too, recorded no more: the calls are the parent's) and
 * starts over as the first thread of a new process: no segment (its first
 * recorded call takes the slow path, where the child's agent connects),
 * figures from zero, its new tid.
 */
void threads_after_fork(void)
{
	struct agent_thread *t = agent_current_thread;
	uint64_t s;

	registry_lock = (pthread_mutex_t)PTHREAD_MUTEX_INITIALIZER;
	free_list = NULL;
	registry_head = t;
	if (!t)
		return;
	t->next = NULL;
	s = atomic_load(&t->committed);
	for (uint32_t i = 0; i < state_depth(s); i++) {
		t->shadow[i].func_id = 0;
		t->shadow[i].agg = NULL;
		t->shadow[i].flags &= ~(SHADOW_RECORDED | SHADOW_PENDING);
	}
	for (uint32_t i = 0; i < SEGMENT_SLOTS; i++) {
		atomic_store(&t->seg_map[i], NULL);
		atomic_store(&t->span_end[i], 0);
	}
	/*
	 * The span of the head is over (its segment was the parent's): the
	 * flusher skips to the next span, where the first segment will go
	 * (hooks.c ring_switch_to rounds a head without one up to it).
	 */
	atomic_store(&t->span_end[(state_head(s) / SEGMENT_SPAN) % SEGMENT_SLOTS], state_head(s) + 1);
	t->ring_base = 0;
	t->ring_end = 0;
	t->spare = NULL;
	t->want_spare = 0;
	t->want_ready = 0;
	atomic_store(&t->tail, state_head(s));
	t->denied_gen = atomic_load(&agent_segments_generation) - 1;
	threads_clear_aggregates(t);
	t->drops_reported = 0;
	t->aggregates_sent_ns = 0;
	t->flusher_stage = FLUSHER_STAGE_NEW;
	t->tid = (uint32_t)syscall(SYS_gettid);
}

int threads_init(void)
{
	static int initialized; /* a second attach reuses the key */
	int err;

	if (initialized)
		return 0;
	err = pthread_key_create(&thread_exit_key, thread_exit_destructor);
	initialized = !err;
	return -err;
}

void threads_guard_forever(void)
{
	agent_thread_guard = 1;
}

void threads_for_each(void (*fn)(struct agent_thread *t, void *ctx), void *ctx)
{
	struct agent_thread *t;

	pthread_mutex_lock(&registry_lock);
	t = registry_head;
	pthread_mutex_unlock(&registry_lock);
	/* New states are pushed at the head; the list below t never changes shape
	 * except through threads_recycle_drained(), which runs on this thread. */
	for (; t; t = t->next)
		fn(t, ctx);
}

void threads_for_each_stopped(void (*fn)(struct agent_thread *t, void *ctx), void *ctx)
{
	/* a stopped thread may hold registry_lock: never take it here */
	for (struct agent_thread *t = registry_head; t; t = t->next)
		fn(t, ctx);
}

unsigned threads_with_open_calls(void)
{
	unsigned n = 0;
	struct agent_thread *t;

	pthread_mutex_lock(&registry_lock);
	t = registry_head;
	pthread_mutex_unlock(&registry_lock);
	for (; t; t = t->next)
		/* depth is the owner's: a relaxed read sees it a moment late at worst */
		n += atomic_load_explicit(&t->state, memory_order_acquire) == AGENT_THREAD_LIVE &&
		     state_depth(atomic_load_explicit(&t->committed, memory_order_relaxed)) > 0;
	return n;
}

static int thread_is_drained_exit(struct agent_thread *t)
{
	return atomic_load_explicit(&t->state, memory_order_acquire) == AGENT_THREAD_EXITED &&
	       state_head(atomic_load(&t->committed)) == atomic_load(&t->tail) &&
	       t->flusher_stage == FLUSHER_STAGE_EXIT_SENT;
}

void threads_recycle_drained(void)
{
	struct agent_thread **link, *t;

	pthread_mutex_lock(&registry_lock);
	for (link = &registry_head; (t = *link);) {
		if (thread_is_drained_exit(t)) {
			segments_release_all(t);
			*link = t->next;
			t->next = free_list;
			free_list = t;
		} else {
			link = &t->next;
		}
	}
	pthread_mutex_unlock(&registry_lock);
}

/*
 * For tests and debuggers: the return slot of the calling thread's newest
 * recorded open call (its committed shadow-stack top), NULL if none. Reads
 * only: safe in a signal handler, whatever the thread was doing.
 */
__attribute__((visibility("default"))) void *profagent_debug_top_slot(void)
{
	struct agent_thread *t = agent_current_thread;
	uint32_t depth;

	if (!t)
		return NULL;
	depth = state_depth(atomic_load_explicit(&t->committed, memory_order_relaxed));
	return depth ? (void *)t->shadow[depth - 1].return_slot : NULL;
}

/* A persistent pthread pool for parallel regions, a spin barrier, and per-thread scratch memory.
 *
 * Workers start lazily on the first region that wants more than one thread.  Between regions
 * they spin for GC_SPIN_NS (so back-to-back kernels pay no wake-up), then sleep on a condition
 * variable.  Workers join a region when they get to run; the caller does its share and then
 * waits only for workers that joined, and all work is claimed dynamically, so a descheduled
 * worker (a busy machine) slows nobody down.  One region runs at a time: a caller that finds the
 * pool busy (another Python thread in a kernel, or a kernel called from inside a region) runs
 * the work alone.  After fork() the child starts with no workers (pthread_atfork) and creates
 * new ones when needed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GC_PAUSE() _mm_pause()
#elif defined(__aarch64__)
#define GC_PAUSE() __asm__ __volatile__("yield" ::: "memory")
#else
#define GC_PAUSE() ((void)0)
#endif

#define GC_MAX_THREADS 256
#define GC_SPIN_NS 200000L /* workers stay awake this long after a region before sleeping */
#define GC_PAUSE_SPINS 200 /* pause-loop iterations (a few us) before waits start to yield */

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* One mailbox per worker: the caller bumps the ticket of each worker it wants in a region. */
typedef struct {
    _Alignas(64) atomic_uint ticket;
    unsigned ticket0; /* the ticket when the thread was created */
    atomic_int sleeping;
    pthread_cond_t wake;
    pthread_t thread;
} gc_worker;

/* The open region.  state = gen << 32 | closed << 31 | joined: workers join with a CAS while the
 * region is open and has room; the caller closes it when its own work is done and then waits
 * only for the workers that joined.  A worker that wakes late finds the region closed (or a newer
 * generation) and goes back to waiting: nobody ever waits for a thread that is not running. */
#define GC_CLOSED ((uint64_t)1 << 31)
#define GC_JOINED(s) ((int)((s) & 0x7fffffff))
typedef struct {
    pthread_mutex_t lock; /* guards the sleep / wake hand-over */
    atomic_int size;      /* configured threads, including the caller */
    int started;          /* workers running (tids 1..started) */
    atomic_int busy;      /* a region is running (or the pool is being resized) */
    atomic_int stop;
    _Alignas(64) _Atomic uint64_t state;
    _Alignas(64) atomic_int finished; /* joined workers done */
    gc_body body;
    void *ctx;
    int want;
    gc_worker w[GC_MAX_THREADS];
} gc_pool_t;

static gc_pool_t pool = {.lock = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t pool_once = PTHREAD_ONCE_INIT;

static int default_size(void)
{
    const char *env = getenv("GPUCORE_NUM_THREADS");
    if (env && *env) {
        char *end;
        const long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 1)
            return v > GC_MAX_THREADS ? GC_MAX_THREADS : (int)v;
    }
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        const int c = CPU_COUNT(&set);
        if (c >= 1)
            return c > GC_MAX_THREADS ? GC_MAX_THREADS : c;
    }
#endif
    const long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c < 1 ? 1 : (c > GC_MAX_THREADS ? GC_MAX_THREADS : (int)c);
}

/* In the child of fork(): no workers exist; forget them and reset every lock. */
static void pool_atfork_child(void)
{
    pthread_mutex_init(&pool.lock, NULL);
    pool.started = 0;
    atomic_store(&pool.busy, 0);
    atomic_store(&pool.stop, 0);
    atomic_store(&pool.state, atomic_load(&pool.state) | GC_CLOSED);
}

static void pool_init_once(void)
{
    atomic_store(&pool.size, default_size());
    atomic_store(&pool.state, GC_CLOSED);
    pthread_atfork(NULL, NULL, pool_atfork_child);
}

int gc_pool_size(void)
{
    pthread_once(&pool_once, pool_init_once);
    return atomic_load_explicit(&pool.size, memory_order_relaxed);
}

int gc_pool_awake(void)
{
    /* worker 1 only: a small region (two threads) posts to it alone; a worker not started yet
     * reads as awake (it starts once) */
    return gc_pool_size() > 1 && !atomic_load_explicit(&pool.w[1].sleeping, memory_order_relaxed);
}

/* Joins the open region if there is room: runs its body and reports back. */
static void try_join(void)
{
    uint64_t s = atomic_load_explicit(&pool.state, memory_order_acquire);
    for (;;) {
        if ((s & GC_CLOSED) || GC_JOINED(s) >= pool.want)
            return;
        if (atomic_compare_exchange_weak_explicit(&pool.state, &s, s + 1, memory_order_acq_rel,
                                                  memory_order_acquire))
            break;
    }
    /* joined: the region cannot end before we report, so body and ctx are this region's */
    pool.body(pool.ctx, GC_JOINED(s));
    atomic_fetch_add_explicit(&pool.finished, 1, memory_order_release);
}

static void *worker_main(void *arg)
{
    const int me = (int)(intptr_t)arg;
    gc_worker *w = &pool.w[me];
    unsigned seen = w->ticket0; /* not a fresh load: a region may be posted before we run */
    for (;;) {
        /* wait for a new ticket: spin first, then sleep */
        unsigned t = atomic_load_explicit(&w->ticket, memory_order_acquire);
        if (t == seen) {
            /* a short pause loop, then yield (so a thread that needs this CPU gets it) */
            const long long t0 = now_ns();
            for (int i = 0;; i++) {
                if (i < GC_PAUSE_SPINS)
                    GC_PAUSE();
                else
                    sched_yield();
                t = atomic_load_explicit(&w->ticket, memory_order_acquire);
                if (t != seen)
                    break;
                if ((i & 15) == 15 && now_ns() - t0 > GC_SPIN_NS)
                    break;
            }
            if (t == seen) {
                pthread_mutex_lock(&pool.lock);
                atomic_store(&w->sleeping, 1);
                while ((t = atomic_load(&w->ticket)) == seen)
                    pthread_cond_wait(&w->wake, &pool.lock);
                atomic_store(&w->sleeping, 0);
                pthread_mutex_unlock(&pool.lock);
            }
        }
        seen = t;
        if (atomic_load(&pool.stop))
            return NULL;
        try_join();
    }
}

/* Wakes worker t (caller holds busy). */
static void post(int t)
{
    gc_worker *w = &pool.w[t];
    atomic_fetch_add(&w->ticket, 1); /* seq_cst: pairs with the sleeping flag in worker_main */
    if (atomic_load(&w->sleeping)) {
        pthread_mutex_lock(&pool.lock);
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&pool.lock);
    }
}

/* Starts workers up to n - 1 (caller holds busy). */
static void ensure_workers(int n)
{
    while (pool.started < n - 1) {
        const int tid = pool.started + 1;
        gc_worker *w = &pool.w[tid];
        atomic_store(&w->sleeping, 0);
        w->ticket0 = atomic_load(&w->ticket);
        pthread_cond_init(&w->wake, NULL);
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 1 << 20);
        const int rc = pthread_create(&w->thread, &attr, worker_main, (void *)(intptr_t)tid);
        pthread_attr_destroy(&attr);
        if (rc != 0)
            break;
        pool.started++;
    }
}

/* Stops and joins every worker (caller holds busy, no region open). */
static void stop_workers(void)
{
    atomic_store(&pool.stop, 1);
    for (int t = 1; t <= pool.started; t++)
        post(t);
    for (int t = 1; t <= pool.started; t++)
        pthread_join(pool.w[t].thread, NULL);
    pool.started = 0;
    atomic_store(&pool.stop, 0);
}

static void acquire_busy_blocking(void)
{
    int expected = 0;
    while (!atomic_compare_exchange_weak(&pool.busy, &expected, 1)) {
        expected = 0;
        sched_yield();
    }
}

void gc_pool_set_size(int n)
{
    pthread_once(&pool_once, pool_init_once);
    if (n < 1)
        n = 1;
    if (n > GC_MAX_THREADS)
        n = GC_MAX_THREADS;
    acquire_busy_blocking();
    if (n - 1 < pool.started)
        stop_workers();
    atomic_store(&pool.size, n);
    atomic_store(&pool.busy, 0);
}

int gc_region(gc_body body, void *ctx, int want)
{
    if (want > gc_pool_size())
        want = gc_pool_size();
    int expected = 0;
    if (want <= 1 || !atomic_compare_exchange_strong(&pool.busy, &expected, 1)) {
        body(ctx, 0);
        return 1;
    }
    ensure_workers(want);
    if (want > pool.started + 1)
        want = pool.started + 1;
    pool.body = body;
    pool.ctx = ctx;
    pool.want = want;
    atomic_store_explicit(&pool.finished, 0, memory_order_relaxed);
    const uint64_t gen = (atomic_load(&pool.state) >> 32) + 1;
    atomic_store_explicit(&pool.state, gen << 32 | 1, memory_order_release); /* open, caller in */
    for (int t = 1; t < want; t++)
        post(t);
    body(ctx, 0);
    /* close: no more joins; wait only for those that joined */
    const uint64_t s = atomic_fetch_or_explicit(&pool.state, GC_CLOSED, memory_order_acq_rel);
    const int others = GC_JOINED(s) - 1;
    for (int i = 0; atomic_load_explicit(&pool.finished, memory_order_acquire) < others; i++) {
        if (i < 20000) /* the joined workers are running: spin */
            GC_PAUSE();
        else
            sched_yield();
    }
    atomic_store_explicit(&pool.busy, 0, memory_order_release);
    return GC_JOINED(s);
}

/* ---- static-split tasks and ranges on top of regions ------------------------------------- */

typedef struct {
    gc_task task;
    void *ctx;
    int nt;
    ptrdiff_t n, chunk;
    gc_range_fn fn;
    _Alignas(64) atomic_int next;
} gc_task_job;

/* Each participant claims task ids until none are left: every tid < nt runs exactly once, on
 * whichever threads show up. */
static void task_body(void *ctx, int slot)
{
    gc_task_job *J = (gc_task_job *)ctx;
    (void)slot;
    for (int t; (t = atomic_fetch_add_explicit(&J->next, 1, memory_order_relaxed)) < J->nt;)
        J->task(J->ctx, t, J->nt);
}

int gc_parallel(gc_task task, void *ctx, int want)
{
    if (want <= 1) {
        task(ctx, 0, 1);
        return 1;
    }
    gc_task_job J = {.task = task, .ctx = ctx, .nt = want};
    atomic_init(&J.next, 0);
    gc_region(task_body, &J, want);
    return want;
}

static void range_body(void *ctx, int slot)
{
    gc_task_job *J = (gc_task_job *)ctx;
    (void)slot;
    for (int c; (c = atomic_fetch_add_explicit(&J->next, 1, memory_order_relaxed)) < J->nt;) {
        const ptrdiff_t lo = (ptrdiff_t)c * J->chunk;
        const ptrdiff_t hi = lo + J->chunk < J->n ? lo + J->chunk : J->n;
        J->fn(J->ctx, lo, hi);
    }
}

void gc_parallel_range(ptrdiff_t n, ptrdiff_t align, double cost_ns, gc_range_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    int nt = gc_threads_for(cost_ns, GC_GRAIN_NS);
    const ptrdiff_t units = (n + align - 1) / align;
    if (nt > units)
        nt = (int)units;
    if (nt <= 1) {
        fn(ctx, 0, n);
        return;
    }
    /* about 4 chunks per thread, claimed dynamically (a slow thread takes fewer) */
    const ptrdiff_t nchunks = units < 4 * (ptrdiff_t)nt ? units : 4 * (ptrdiff_t)nt;
    gc_task_job J = {.ctx = ctx, .fn = fn, .n = n};
    J.chunk = (units + nchunks - 1) / nchunks * align;
    J.nt = (int)((n + J.chunk - 1) / J.chunk);
    atomic_init(&J.next, 0);
    gc_region(range_body, &J, nt);
}

/* ---- per-thread scratch ------------------------------------------------------------------- */

typedef struct {
    void *p;
    size_t size;
} scratch_t;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *v)
{
    scratch_t *s = (scratch_t *)v;
    if (s) {
        free(s->p);
        free(s);
    }
}

static void scratch_init(void)
{
    pthread_key_create(&scratch_key, scratch_free);
}

void *gc_scratch(size_t bytes)
{
    pthread_once(&scratch_once, scratch_init);
    scratch_t *s = (scratch_t *)pthread_getspecific(scratch_key);
    if (!s) {
        s = (scratch_t *)calloc(1, sizeof *s);
        if (!s)
            return NULL;
        if (pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (s->size < bytes) {
        free(s->p);
        s->p = NULL;
        s->size = 0;
        size_t want = (bytes + 4095) & ~(size_t)4095;
        void *p = NULL;
        if (posix_memalign(&p, 4096, want) != 0)
            return NULL;
        /* kernels keep a tag in the first bytes (attention: whose packed K^T the scratch holds):
         * fresh memory must read as "nothing cached", never as whatever was there */
        memset(p, 0, 64);
        s->p = p;
        s->size = want;
    }
    return s->p;
}

/* A persistent pthread pool for parallel regions, a spin barrier, and per-thread scratch memory.
 *
 * Workers start lazily on the first region that wants more than one thread.  Between regions
 * they spin for GC_SPIN_NS (so back-to-back kernels pay no wake-up), then sleep on a condition
 * variable.  One region runs at a time: a caller that finds the pool busy (another Python thread
 * in a kernel, or a kernel called from inside a region) runs its task alone, with nt = 1.  After
 * fork() the child starts with no workers (pthread_atfork) and creates new ones when needed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
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
#define GC_SPIN_NS 200000L /* workers spin this long after a region before sleeping */

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* One mailbox per worker: the caller posts a region to workers 1..nt-1 only, and never posts
 * again before they are done, so no worker can lag a region behind. */
typedef struct {
    _Alignas(64) atomic_uint ticket; /* bumped once per region posted to this worker */
    unsigned ticket0;                /* the ticket when the thread was created */
    atomic_int sleeping;
    pthread_cond_t wake;
    gc_task task;
    void *ctx;
    int nt;
    pthread_t thread;
} gc_worker;

typedef struct {
    pthread_mutex_t lock; /* guards the sleep / wake hand-over */
    atomic_int size;      /* configured threads, including the caller */
    int started;          /* workers running (tids 1..started) */
    atomic_int busy;      /* a region is running (or the pool is being resized) */
    _Alignas(64) atomic_int pending; /* workers of the current region not yet done */
    atomic_int stop;
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
    atomic_store(&pool.pending, 0);
    atomic_store(&pool.stop, 0);
}

static void pool_init_once(void)
{
    atomic_store(&pool.size, default_size());
    pthread_atfork(NULL, NULL, pool_atfork_child);
}

int gc_pool_size(void)
{
    pthread_once(&pool_once, pool_init_once);
    return atomic_load_explicit(&pool.size, memory_order_relaxed);
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
            const long long t0 = now_ns();
            for (int i = 0;; i++) {
                GC_PAUSE();
                t = atomic_load_explicit(&w->ticket, memory_order_acquire);
                if (t != seen)
                    break;
                if ((i & 63) == 63 && now_ns() - t0 > GC_SPIN_NS)
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
        w->task(w->ctx, me, w->nt);
        atomic_fetch_sub_explicit(&pool.pending, 1, memory_order_release);
    }
}

/* Posts the current job of worker t (caller holds busy). */
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

/* Stops and joins every worker (caller holds busy). */
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

int gc_parallel(gc_task task, void *ctx, int want)
{
    int nt = want < gc_pool_size() ? want : gc_pool_size();
    int expected = 0;
    if (nt <= 1 || !atomic_compare_exchange_strong(&pool.busy, &expected, 1)) {
        task(ctx, 0, 1);
        return 1;
    }
    ensure_workers(nt);
    if (nt > pool.started + 1)
        nt = pool.started + 1;
    if (nt <= 1) {
        atomic_store(&pool.busy, 0);
        task(ctx, 0, 1);
        return 1;
    }
    atomic_store_explicit(&pool.pending, nt - 1, memory_order_relaxed);
    for (int t = 1; t < nt; t++) {
        pool.w[t].task = task;
        pool.w[t].ctx = ctx;
        pool.w[t].nt = nt;
        post(t);
    }
    task(ctx, 0, nt);
    for (int i = 0; atomic_load_explicit(&pool.pending, memory_order_acquire) > 0; i++) {
        if (i < 20000)
            GC_PAUSE();
        else
            sched_yield();
    }
    atomic_store_explicit(&pool.busy, 0, memory_order_release);
    return nt;
}

typedef struct {
    ptrdiff_t n, align;
    gc_range_fn fn;
    void *ctx;
} gc_range_job;

static void range_task(void *ctx, int t, int nt)
{
    const gc_range_job *J = (const gc_range_job *)ctx;
    ptrdiff_t lo, hi;
    gc_split(J->n, J->align, t, nt, &lo, &hi);
    if (hi > lo)
        J->fn(J->ctx, lo, hi);
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
    gc_range_job J = {.n = n, .align = align, .fn = fn, .ctx = ctx};
    gc_parallel(range_task, &J, nt);
}

void gc_barrier_init(gc_barrier *b)
{
    b->count = 0;
    b->phase = 0;
}

void gc_barrier_wait(gc_barrier *b, int nt)
{
    if (nt <= 1)
        return;
    const int phase = __atomic_load_n(&b->phase, __ATOMIC_ACQUIRE);
    if (__atomic_add_fetch(&b->count, 1, __ATOMIC_ACQ_REL) == nt) {
        __atomic_store_n(&b->count, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&b->phase, phase + 1, __ATOMIC_RELEASE);
        return;
    }
    for (int i = 0; __atomic_load_n(&b->phase, __ATOMIC_ACQUIRE) == phase; i++) {
        if (i < 20000)
            GC_PAUSE();
        else
            sched_yield();
    }
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
        s->p = p;
        s->size = want;
    }
    return s->p;
}

/* Caching host allocator: the storage behind every CPU tensor.
 *
 * Why: on our machines each new 4 KiB page costs about 2 us to fault in, so an op writing a
 * freshly allocated 1.6 MiB output spends more time in the kernel's page faults than in its
 * arithmetic, and glibc hands large blocks back to the OS on free.  A training step allocates
 * the same sizes every iteration, so freed blocks are kept in per-size-class free lists and
 * reused warm, as PyTorch's CUDA caching allocator does for device memory.
 *
 * A block is owned by a HostBuffer object (buffer protocol, 64-byte aligned, writable); numpy
 * arrays made with np.frombuffer keep it alive, and its dealloc returns the block to the cache.
 * All entry points run with the GIL held (allocation from Python, dealloc from refcounting), so
 * the GIL guards the lists.  Blocks of 2 MiB and more come from mmap with MADV_HUGEPAGE, so the
 * first touch faults 2 MiB pages where transparent huge pages are enabled.
 *
 * Limit: GPUCORE_HOST_CACHE_MB (default 1024; 0 disables caching).  A block that would push the
 * cached total over the limit is freed instead.
 */
#include "bindings.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HC_ALIGN 64
#define HC_MIN_CACHED 4096             /* smaller blocks: malloc is fast and already warm */
#define HC_MMAP_MIN (2u << 20)         /* from here on: mmap + MADV_HUGEPAGE */
#define HC_SUB 8                       /* size classes per power of two (<= 12.5% waste) */
#define HC_CLASSES (64 * HC_SUB)

typedef struct hc_block {
    struct hc_block *next;
} hc_block;

static hc_block *hc_free[HC_CLASSES];
static size_t hc_cached_bytes, hc_limit;
static unsigned long long hc_hits, hc_misses;
static int hc_limit_read;

/* The size class of n bytes (n > HC_MIN_CACHED) and the block size it allocates. */
static int hc_class(size_t n, size_t *block)
{
    int e = 63 - __builtin_clzll((unsigned long long)(n - 1)); /* 2^e < n <= 2^(e+1) */
    size_t step = ((size_t)1 << e) / HC_SUB;
    size_t k = (n - ((size_t)1 << e) + step - 1) / step; /* 1..HC_SUB */
    *block = ((size_t)1 << e) + k * step;
    return e * HC_SUB + (int)(k - 1);
}

static void hc_read_limit(void)
{
    const char *s = getenv("GPUCORE_HOST_CACHE_MB");
    long long mb = 1024;
    if (s && *s) {
        char *end;
        long long v = strtoll(s, &end, 10);
        if (*end == '\0' && v >= 0)
            mb = v;
    }
    hc_limit = (size_t)mb << 20;
    hc_limit_read = 1;
}

static void *hc_os_alloc(size_t block)
{
    if (block >= HC_MMAP_MIN) {
        void *p = mmap(NULL, block, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
#ifdef MADV_HUGEPAGE
        madvise(p, block, MADV_HUGEPAGE);
#endif
        return p;
    }
    void *p = NULL;
    return posix_memalign(&p, HC_ALIGN, block ? block : HC_ALIGN) == 0 ? p : NULL;
}

static void hc_os_free(void *p, size_t block)
{
    if (block >= HC_MMAP_MIN)
        munmap(p, block);
    else
        free(p);
}

/* The block size of size class i (the inverse of hc_class). */
static size_t hc_class_size(int i)
{
    const int e = i / HC_SUB, k = i % HC_SUB + 1;
    return ((size_t)1 << e) + (size_t)k * (((size_t)1 << e) / HC_SUB);
}

/* Frees every cached block; returns the bytes given back. */
static size_t hc_clear(void)
{
    size_t freed = 0;
    for (int i = 0; i < HC_CLASSES; i++) {
        const size_t bs = hc_class_size(i);
        while (hc_free[i]) {
            hc_block *nb = hc_free[i]->next;
            hc_os_free(hc_free[i], bs);
            freed += bs;
            hc_free[i] = nb;
        }
    }
    hc_cached_bytes = 0;
    return freed;
}

/* A block of at least n bytes; *block receives its real size (pass it back to hc_release). */
static void *hc_acquire(size_t n, size_t *block)
{
    if (!hc_limit_read)
        hc_read_limit();
    if (n <= HC_MIN_CACHED) {
        *block = n;
        return hc_os_alloc(n);
    }
    int c = hc_class(n, block);
    hc_block *b = hc_free[c];
    if (b) {
        hc_free[c] = b->next;
        hc_cached_bytes -= *block;
        hc_hits++;
        return b;
    }
    hc_misses++;
    void *p = hc_os_alloc(*block);
    if (!p && hc_cached_bytes) {
        hc_clear(); /* out of memory: give the cache back to the OS and try once more */
        p = hc_os_alloc(*block);
    }
    return p;
}

static void hc_release(void *p, size_t block)
{
    if (block <= HC_MIN_CACHED || hc_cached_bytes + block > hc_limit) {
        hc_os_free(p, block);
        return;
    }
    size_t bs;
    int c = hc_class(block, &bs);
    hc_block *b = (hc_block *)p;
    b->next = hc_free[c];
    hc_free[c] = b;
    hc_cached_bytes += block;
}

void *gc_host_block_acquire(size_t n, size_t *block)
{
    return hc_acquire(n, block);
}

void gc_host_block_release(void *p, size_t block)
{
    hc_release(p, block);
}

/* ------------------------------------------------------------------------------------------ */

typedef struct {
    PyObject_HEAD
    void *ptr;
    Py_ssize_t nbytes;
    size_t block;
} HostBuffer;

static void hostbuf_dealloc(HostBuffer *self)
{
    if (self->ptr)
        hc_release(self->ptr, self->block);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int hostbuf_getbuffer(HostBuffer *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->ptr, self->nbytes, 0, flags);
}

static PyBufferProcs hostbuf_as_buffer = {(getbufferproc)hostbuf_getbuffer, NULL};

PyTypeObject gc_HostBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpucore._cpu.HostBuffer",
    .tp_basicsize = sizeof(HostBuffer),
    .tp_dealloc = (destructor)hostbuf_dealloc,
    .tp_as_buffer = &hostbuf_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Host memory block from gpucore's caching allocator (64-byte aligned, writable); "
              "returned to the cache when the last reference goes.",
};

GC_DOC(host_empty,
       "host_empty(nbytes) -> HostBuffer\n\nUninitialised, 64-byte-aligned, writable host "
       "memory from the caching allocator (wrap it with numpy.frombuffer); the block returns "
       "to the cache when the buffer is freed.  GPUCORE_HOST_CACHE_MB caps the cache.");

PyObject *gc_py_host_empty(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "host_empty() takes exactly 1 argument (%zd given)", nargs);
        return NULL;
    }
    Py_ssize_t n = PyLong_AsSsize_t(args[0]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    if (n < 0) {
        PyErr_Format(PyExc_ValueError, "host_empty: size must be >= 0, got %zd", n);
        return NULL;
    }
    HostBuffer *b = PyObject_New(HostBuffer, &gc_HostBufferType);
    if (!b)
        return NULL;
    b->ptr = hc_acquire((size_t)n, &b->block);
    b->nbytes = n;
    if (!b->ptr) {
        Py_DECREF(b);
        return PyErr_Format(PyExc_MemoryError,
                            "gpucore: cannot allocate %zd bytes of host memory for a tensor "
                            "(the allocator's cache was released first); free some tensors or "
                            "use smaller batches",
                            n);
    }
    return (PyObject *)b;
}

GC_DOC(host_cache_info,
       "host_cache_info() -> dict\n\ncached_bytes, limit_bytes, hits, misses of the "
       "caching host allocator.");

PyObject *gc_py_host_cache_info(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)args;
    if (nargs != 0) {
        PyErr_SetString(PyExc_TypeError, "host_cache_info() takes no arguments");
        return NULL;
    }
    if (!hc_limit_read)
        hc_read_limit();
    return Py_BuildValue("{s:n,s:n,s:K,s:K}", "cached_bytes", (Py_ssize_t)hc_cached_bytes,
                         "limit_bytes", (Py_ssize_t)hc_limit, "hits", hc_hits, "misses",
                         hc_misses);
}

GC_DOC(host_cache_clear,
       "host_cache_clear() -> int\n\nGive every cached (unused) block back to the OS; "
       "returns the bytes freed.");

PyObject *gc_py_host_cache_clear(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)args;
    if (nargs != 0) {
        PyErr_SetString(PyExc_TypeError, "host_cache_clear() takes no arguments");
        return NULL;
    }
    return PyLong_FromSize_t(hc_clear());
}

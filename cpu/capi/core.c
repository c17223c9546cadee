/* libgpucore core: errors, versions, the kernels' set-up, the handle registry, tensors' life and
 * accessors, scopes (see capi.h). */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */

#include "capi.h"
#include "isa.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GC_VERSION_STRING
#define GC_VERSION_STRING "0.1.0"
#endif

/* ------------------------------------------------------------------------------------------ */
/* Errors, versions                                                                            */

int gc_fail(gc_error *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

int gc_error_occurred(const gc_error *err)
{
    return err && err->code != GC_OK;
}

void gc_error_clear(gc_error *err)
{
    gc_ok(err);
}

const char *gc_status_name(int code)
{
    switch (code) {
    case GC_OK: return "GC_OK";
    case GC_ERR_INVALID_ARGUMENT: return "GC_ERR_INVALID_ARGUMENT";
    case GC_ERR_SHAPE: return "GC_ERR_SHAPE";
    case GC_ERR_DTYPE: return "GC_ERR_DTYPE";
    case GC_ERR_OUT_OF_MEMORY: return "GC_ERR_OUT_OF_MEMORY";
    case GC_ERR_IO: return "GC_ERR_IO";
    case GC_ERR_FORMAT: return "GC_ERR_FORMAT";
    case GC_ERR_DEVICE: return "GC_ERR_DEVICE";
    case GC_ERR_INTERNAL: return "GC_ERR_INTERNAL";
    default: return "GC_ERR_UNKNOWN";
    }
}

const char *gc_version(void)
{
    return GC_VERSION_STRING;
}

int gc_api_version(void)
{
    return GC_API_VERSION;
}

static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static char init_msg[GC_ERROR_MESSAGE_SIZE];
static int init_rc;

static void init_kernels(void)
{
    char msg[512];
    if (gc_cpu_init(getenv("GPUCORE_CPU_ISA"), msg, sizeof msg) < 0) {
        snprintf(init_msg, sizeof init_msg, "%.200s", msg);
        init_rc = GC_ERR_DEVICE;
    }
}

int gc_capi_init(gc_error *err)
{
    pthread_once(&init_once, init_kernels);
    if (init_rc < 0)
        return gc_fail(err, init_rc, "gpucore: %s", init_msg);
    return 0;
}

const char *gc_cpu_isa(gc_error *err)
{
    gc_ok(err);
    if (gc_capi_init(err) < 0)
        return NULL;
    return gc_isa_names[gc_isa.isa];
}

int gc_get_num_threads(void)
{
    return gc_pool_size();
}

int gc_set_num_threads(int n, gc_error *err)
{
    gc_ok(err);
    if (n < 1)
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "gc_set_num_threads: n = %d must be >= 1", n);
    gc_pool_set_size(n);
    return 0;
}

static const char *const dtype_names[] = {
    "bool",    "uint8",   "int8",  "int32",  "int64",  "float16", "bfloat16",
    "float32", "float64", "int16", "uint16", "uint32", "uint64"};
static const int dtype_sizes[] = {1, 1, 1, 4, 8, 2, 2, 4, 8, 2, 2, 4, 8};
#define N_DTYPES ((int)(sizeof dtype_sizes / sizeof dtype_sizes[0]))

const char *gc_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < N_DTYPES ? dtype_names[dtype] : NULL;
}

int gc_dtype_size(int dtype)
{
    return dtype >= 0 && dtype < N_DTYPES ? dtype_sizes[dtype] : -1;
}

/* ------------------------------------------------------------------------------------------ */
/* The registry: every live public handle (tensors and scopes), an open-addressing set of        */
/* pointers under one lock (which also guards scope membership).                                */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t *reg_slots; /* 0 empty, 1 tombstone */
static size_t reg_cap, reg_used, reg_live;

static size_t reg_hash(uintptr_t p)
{
    uint64_t h = (uint64_t)p * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 17);
}

/* Under reg_lock. */
static int reg_find(uintptr_t p, size_t *at)
{
    if (!reg_cap)
        return 0;
    const size_t mask = reg_cap - 1;
    for (size_t i = reg_hash(p) & mask, n = 0; n < reg_cap; i = (i + 1) & mask, n++) {
        if (reg_slots[i] == 0)
            return 0;
        if (reg_slots[i] == p) {
            *at = i;
            return 1;
        }
    }
    return 0;
}

/* Rehashes into a table sized from the live handles (>= 4x them), which also drops the
 * tombstones: create / free churn never grows the table. */
static int reg_grow(void)
{
    size_t cap = 1024;
    while (cap < (reg_live + 1) * 4)
        cap *= 2;
    uintptr_t *s = calloc(cap, sizeof *s);
    if (!s)
        return -1;
    for (size_t i = 0; i < reg_cap; i++) {
        uintptr_t p = reg_slots[i];
        if (p > 1) {
            size_t j = reg_hash(p) & (cap - 1);
            while (s[j])
                j = (j + 1) & (cap - 1);
            s[j] = p;
        }
    }
    free(reg_slots);
    reg_slots = s;
    reg_cap = cap;
    reg_used = reg_live;
    return 0;
}

static int reg_add(const void *ptr)
{
    uintptr_t p = (uintptr_t)ptr;
    if ((reg_used + 1) * 4 >= reg_cap * 3 && reg_grow() < 0)
        return -1;
    size_t i = reg_hash(p) & (reg_cap - 1);
    while (reg_slots[i] > 1)
        i = (i + 1) & (reg_cap - 1);
    if (reg_slots[i] == 0)
        reg_used++;
    reg_slots[i] = p;
    reg_live++;
    return 0;
}

static int reg_remove(const void *ptr)
{
    size_t at;
    if (!reg_find((uintptr_t)ptr, &at))
        return 0;
    reg_slots[at] = 1;
    reg_live--;
    return 1;
}

static int reg_has(const void *ptr)
{
    size_t at;
    return reg_find((uintptr_t)ptr, &at);
}

int gc_handle_add(const void *h)
{
    pthread_mutex_lock(&reg_lock);
    int rc = reg_add(h);
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

int gc_handle_remove(const void *h)
{
    pthread_mutex_lock(&reg_lock);
    int rc = reg_remove(h);
    pthread_mutex_unlock(&reg_lock);
    return rc;
}

int gc_handle_live(const void *h, uint32_t magic)
{
    pthread_mutex_lock(&reg_lock);
    int live = h && reg_has(h) && *(const uint32_t *)h == magic;
    pthread_mutex_unlock(&reg_lock);
    return live;
}

int gc_check(const gc_tensor *t, const char *fn, const char *what, gc_error *err)
{
    if (!t)
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, what);
    pthread_mutex_lock(&reg_lock);
    int live = reg_has(t) && t->magic == GC_TENSOR_MAGIC;
    pthread_mutex_unlock(&reg_lock);
    if (!live)
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT,
                       "%s: %s is not a live gc_tensor (already freed, or not made by gpucore)",
                       fn, what);
    return 0;
}

int gc_check_float(const gc_tensor *t, const char *fn, const char *what, gc_error *err)
{
    if (gc_check(t, fn, what, err) < 0)
        return -1;
    if (t->dtype != GC_DTYPE_FLOAT32 && t->dtype != GC_DTYPE_FLOAT64)
        return gc_fail(err, GC_ERR_DTYPE, "%s: %s is %s; this op takes float32 or float64", fn,
                       what, gc_dtype_name(t->dtype));
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Scopes: a per-thread stack                                                                  */

static _Thread_local gc_scope *scope_top;
static _Thread_local int scope_depth;

/* Under reg_lock: t joins scope s (NULL: none). */
static int scope_attach(gc_scope *s, gc_tensor *t)
{
    t->scope = NULL;
    if (!s)
        return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        gc_tensor **items = realloc(s->items, cap * sizeof *items);
        if (!items)
            return -1;
        s->items = items;
        s->cap = cap;
    }
    t->slot = s->n;
    s->items[s->n++] = t;
    t->scope = s;
    return 0;
}

static void scope_detach(gc_tensor *t)
{
    if (t->scope) {
        t->scope->items[t->slot] = NULL;
        t->scope = NULL;
    }
}

gc_scope *gc_scope_begin(void)
{
    gc_scope *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->magic = GC_SCOPE_MAGIC;
    s->parent = scope_top;
    s->thread = (void *)&scope_top;
    pthread_mutex_lock(&reg_lock);
    int rc = reg_add(s);
    pthread_mutex_unlock(&reg_lock);
    if (rc < 0) {
        free(s);
        return NULL;
    }
    scope_top = s;
    scope_depth++;
    return s;
}

int gc_scope_depth(void)
{
    return scope_depth;
}

static int scope_check(const gc_scope *s, const char *fn, gc_error *err)
{
    if (!s)
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: scope is NULL", fn);
    if (!reg_has(s) || s->magic != GC_SCOPE_MAGIC)
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT,
                       "%s: scope is not an open gc_scope (already ended, or not made by "
                       "gc_scope_begin)",
                       fn);
    return 0;
}

static void tensor_destroy(gc_tensor *t)
{
    t->magic = GC_DEAD_MAGIC;
    gc_storage_unref(t->st);
    free(t);
}

int gc_scope_end(gc_scope *scope, gc_error *err)
{
    gc_ok(err);
    const char *fn = "gc_scope_end";
    pthread_mutex_lock(&reg_lock);
    int rc = scope_check(scope, fn, err);
    if (rc == 0 && scope->thread != (void *)&scope_top)
        rc = gc_fail(err, GC_ERR_INVALID_ARGUMENT,
                     "%s: the scope belongs to another thread; end it on the thread that began it",
                     fn);
    else if (rc == 0 && scope != scope_top)
        rc = gc_fail(err, GC_ERR_INVALID_ARGUMENT,
                     "%s: the scope is not the innermost open scope of this thread; end the "
                     "scopes opened after it first",
                     fn);
    if (rc < 0) {
        pthread_mutex_unlock(&reg_lock);
        return rc;
    }
    for (size_t i = 0; i < scope->n; i++)
        if (scope->items[i] && !reg_remove(scope->items[i]))
            scope->items[i] = NULL;
    reg_remove(scope);
    pthread_mutex_unlock(&reg_lock);
    /* outside the lock: a deleter may call back into gpucore */
    for (size_t i = 0; i < scope->n; i++)
        if (scope->items[i])
            tensor_destroy(scope->items[i]);
    scope_top = scope->parent;
    scope_depth--;
    scope->magic = GC_DEAD_MAGIC;
    free(scope->items);
    free(scope);
    return 0;
}

gc_tensor *gc_scope_escape(gc_scope *scope, gc_tensor *t, gc_error *err)
{
    gc_ok(err);
    const char *fn = "gc_scope_escape";
    if (gc_check(t, fn, "t", err) < 0)
        return NULL;
    pthread_mutex_lock(&reg_lock);
    int rc = scope_check(scope, fn, err);
    if (rc == 0 && (!reg_has(t) || t->scope != scope))
        rc = gc_fail(err, GC_ERR_INVALID_ARGUMENT,
                     "%s: t is not owned by this scope (made outside it, or escaped already)", fn);
    if (rc == 0) {
        scope_detach(t);
        if (scope_attach(scope->parent, t) < 0)
            rc = gc_fail(err, GC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    }
    pthread_mutex_unlock(&reg_lock);
    return rc < 0 ? NULL : t;
}

/* ------------------------------------------------------------------------------------------ */
/* Storage and tensors                                                                         */

gc_storage *gc_storage_alloc(size_t nbytes)
{
    gc_storage *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    size_t sz = (nbytes + 63) / 64 * 64;
    if (posix_memalign(&st->data, 64, sz ? sz : 64) != 0) {
        free(st);
        return NULL;
    }
    st->nbytes = nbytes;
    st->owned = 1;
    atomic_init(&st->refs, 0);
    return st;
}

void gc_storage_unref(gc_storage *st)
{
    if (atomic_fetch_sub(&st->refs, 1) != 1)
        return;
    if (st->owned)
        free(st->data);
    else if (st->deleter)
        st->deleter(st->data, st->ctx);
    free(st);
}

gc_tensor *gc_tensor_make(gc_storage *st, int dtype, int ndim, const int64_t *shape,
                          const int64_t *strides, int64_t offset, int reg, gc_error *err)
{
    gc_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        gc_fail(err, GC_ERR_OUT_OF_MEMORY, "gpucore: out of memory for a tensor handle");
        return NULL;
    }
    t->magic = GC_TENSOR_MAGIC;
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->strides[d] = strides[d];
    }
    t->offset = offset;
    t->st = st;
    if (reg) {
        pthread_mutex_lock(&reg_lock);
        int rc = reg_add(t);
        if (rc == 0 && scope_attach(scope_top, t) < 0) {
            reg_remove(t);
            rc = -1;
        }
        pthread_mutex_unlock(&reg_lock);
        if (rc < 0) {
            free(t);
            gc_fail(err, GC_ERR_OUT_OF_MEMORY, "gpucore: out of memory for a tensor handle");
            return NULL;
        }
    }
    atomic_fetch_add(&st->refs, 1);
    return t;
}

void gc_contig_strides(const int64_t *shape, int ndim, int64_t *strides)
{
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d] > 0 ? shape[d] : 1;
    }
}

int64_t gc_shape_numel(const int64_t *shape, int ndim, int dtype, const char *fn, gc_error *err)
{
    if (gc_dtype_size(dtype) < 0)
        return gc_fail(err, GC_ERR_DTYPE, "%s: unknown dtype %d", fn, dtype);
    if (ndim < 0 || ndim > GC_MAX_NDIM)
        return gc_fail(err, GC_ERR_SHAPE, "%s: ndim = %d is outside [0, %d]", fn, ndim,
                       GC_MAX_NDIM);
    if (ndim > 0 && !shape)
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: shape is NULL with ndim = %d", fn, ndim);
    int64_t n = 1;
    const int64_t limit = ((int64_t)1 << 60) / gc_dtype_size(dtype);
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0)
            return gc_fail(err, GC_ERR_SHAPE, "%s: size %lld of dim %d is negative", fn,
                           (long long)shape[d], d);
        if (shape[d] > 0 && n > limit / shape[d])
            return gc_fail(err, GC_ERR_SHAPE, "%s: the shape holds too many elements", fn);
        n *= shape[d];
    }
    return n;
}

static gc_tensor *tensor_alloc(const int64_t *shape, int ndim, int dtype, int reg, const char *fn,
                               gc_error *err)
{
    int64_t n = gc_shape_numel(shape, ndim, dtype, fn, err);
    if (n < 0)
        return NULL;
    gc_storage *st = gc_storage_alloc((size_t)n * (size_t)gc_dtype_size(dtype));
    if (!st) {
        gc_fail(err, GC_ERR_OUT_OF_MEMORY, "%s: out of memory for %lld elements", fn,
                (long long)n);
        return NULL;
    }
    int64_t strides[GC_MAX_NDIM];
    gc_contig_strides(shape, ndim, strides);
    gc_tensor *t = gc_tensor_make(st, dtype, ndim, shape, strides, 0, reg, err);
    if (!t) {
        free(st->data);
        free(st);
    }
    return t;
}

gc_tensor *gc_tensor_new(const int64_t *shape, int ndim, int dtype, const char *fn, gc_error *err)
{
    return tensor_alloc(shape, ndim, dtype, 1, fn, err);
}

gc_tensor *gc_tensor_tmp(const int64_t *shape, int ndim, int dtype, const char *fn, gc_error *err)
{
    return tensor_alloc(shape, ndim, dtype, 0, fn, err);
}

void gc_tensor_drop(gc_tensor *t)
{
    if (t)
        tensor_destroy(t);
}

int gc_tensor_free(gc_tensor *t, gc_error *err)
{
    gc_ok(err);
    if (!t)
        return 0;
    pthread_mutex_lock(&reg_lock);
    int live = reg_has(t) && t->magic == GC_TENSOR_MAGIC;
    if (live) {
        reg_remove(t);
        scope_detach(t);
    }
    pthread_mutex_unlock(&reg_lock);
    if (!live)
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT,
                       "gc_tensor_free: t is not a live gc_tensor (freed twice, or not made by "
                       "gpucore)");
    tensor_destroy(t);
    return 0;
}

int64_t gc_numel(const gc_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

int gc_is_contig(const gc_tensor *t)
{
    int64_t s = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 0)
            return 1;
        if (t->shape[d] != 1 && t->strides[d] != s)
            return 0;
        s *= t->shape[d];
    }
    return 1;
}

int gc_norm_dim(int dim, int ndim, int *out, const char *fn, gc_error *err)
{
    const int n = ndim > 0 ? ndim : 1;
    if (dim < -n || dim >= n)
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: dim %d is outside [%d, %d)", fn, dim,
                       -n, n);
    *out = dim < 0 ? dim + n : dim;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Accessors                                                                                   */

int gc_tensor_ndim(const gc_tensor *t, gc_error *err)
{
    gc_ok(err);
    int rc = gc_check(t, "gc_tensor_ndim", "t", err);
    return rc < 0 ? rc : t->ndim;
}

static int dims_out(const gc_tensor *t, const int64_t *src, int64_t *out, int cap,
                    const char *fn, gc_error *err)
{
    gc_ok(err);
    int rc = gc_check(t, fn, "t", err);
    if (rc < 0)
        return rc;
    if (cap < 0 || (cap > 0 && !out))
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: out is NULL or cap = %d < 0", fn, cap);
    for (int d = 0; d < t->ndim && d < cap; d++)
        out[d] = src[d];
    return t->ndim;
}

int gc_tensor_shape(const gc_tensor *t, int64_t *out, int cap, gc_error *err)
{
    return dims_out(t, t ? t->shape : NULL, out, cap, "gc_tensor_shape", err);
}

int gc_tensor_strides(const gc_tensor *t, int64_t *out, int cap, gc_error *err)
{
    return dims_out(t, t ? t->strides : NULL, out, cap, "gc_tensor_strides", err);
}

int64_t gc_tensor_numel(const gc_tensor *t, gc_error *err)
{
    gc_ok(err);
    int rc = gc_check(t, "gc_tensor_numel", "t", err);
    return rc < 0 ? rc : gc_numel(t);
}

int gc_tensor_dtype(const gc_tensor *t, gc_error *err)
{
    gc_ok(err);
    int rc = gc_check(t, "gc_tensor_dtype", "t", err);
    return rc < 0 ? rc : t->dtype;
}

int gc_tensor_device(const gc_tensor *t, gc_error *err)
{
    gc_ok(err);
    int rc = gc_check(t, "gc_tensor_device", "t", err);
    return rc < 0 ? rc : GC_DEVICE_CPU;
}

int gc_tensor_is_contiguous(const gc_tensor *t, gc_error *err)
{
    gc_ok(err);
    int rc = gc_check(t, "gc_tensor_is_contiguous", "t", err);
    return rc < 0 ? rc : gc_is_contig(t);
}

void *gc_tensor_data_ptr(const gc_tensor *t, gc_error *err)
{
    gc_ok(err);
    if (gc_check(t, "gc_tensor_data_ptr", "t", err) < 0)
        return NULL;
    return gc_ptr(t);
}

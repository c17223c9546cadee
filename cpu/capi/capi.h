/* libgpucore internals (cpu/capi/): the tensor and scope structs behind the public handles of
 * gpucore/include/gpucore.h, the handle registry and the helpers the op files share.
 *
 * Files: core.c (errors, versions, init, registry, tensors' life, accessors, scopes), views.c
 * (creation from values and buffers, copies, reshape, transpose), ops.c (elementwise, matmul,
 * reductions, softmax), nn.c (conv2d, pooling, layer_norm); deployed models: stfile.c (the
 * safetensors file), sha256.c (its checksums), model.c (reading the saved program), nodes.c
 * (checking its nodes; qnodes.c the int8 ones), run.c (runs, stats); build_lib.py (the build step
 * setup.py calls).
 * The kernels are the cpu/ .c files: the same object files the Python extension links.
 *
 * Only the functions gpucore.h declares are exported (a linker version script); everything
 * here is hidden.
 */
#ifndef GPUCORE_CAPI_H
#define GPUCORE_CAPI_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "gpucore.h"
#include "kernels.h"

#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

#define GC_TENSOR_MAGIC 0x67637431u /* "gct1" */
#define GC_SCOPE_MAGIC 0x67637331u  /* "gcs1" */
#define GC_DEAD_MAGIC 0xdeadbeefu

/* The memory of one or more tensors (views share it): freed with the last reference. */
typedef struct {
    void *data;
    size_t nbytes;
    gc_deleter deleter; /* NULL and owned: free(data) */
    void *ctx;
    int owned; /* data from our allocator */
    atomic_long refs;
} gc_storage;

struct gc_tensor {
    uint32_t magic;
    int dtype, ndim;
    int64_t shape[GC_MAX_NDIM];
    int64_t strides[GC_MAX_NDIM]; /* in elements */
    int64_t offset;               /* of element 0 in storage, in elements */
    gc_storage *st;
    gc_scope *scope; /* the owning scope, or NULL (guarded by the registry lock) */
    size_t slot;     /* index in scope->items */
};

struct gc_scope {
    uint32_t magic;
    gc_tensor **items; /* NULL entries: freed or escaped */
    size_t n, cap;
    gc_scope *parent;
    void *thread; /* the owning thread's stack (tls address) */
};

/* ---- errors (core.c) --------------------------------------------------------------------- */
/* Sets err (may be NULL) to code and the formatted message; returns code. */
int gc_fail(gc_error *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
static inline void gc_ok(gc_error *err)
{
    if (err) {
        err->code = GC_OK;
        err->message[0] = 0;
    }
}
/* The kernels' one-time set-up (ISA choice); 0 or a negative status with err set. */
int gc_capi_init(gc_error *err);

/* The handle registry (core.c): add (0, or -1 out of memory), remove (1 if it was live), and
 * whether h is live with the magic number as its first field. */
int gc_handle_add(const void *h);
int gc_handle_remove(const void *h);
int gc_handle_live(const void *h, uint32_t magic);
#define GC_MODEL_MAGIC 0x67636d31u /* "gcm1" */

/* ---- tensors (core.c) -------------------------------------------------------------------- */
/* t is a live tensor handle; else fails with GC_ERR_INVALID_ARGUMENT naming fn and what. */
int gc_check(const gc_tensor *t, const char *fn, const char *what, gc_error *err);
/* A float32 / float64 tensor (GC_ERR_DTYPE otherwise), after gc_check. */
int gc_check_float(const gc_tensor *t, const char *fn, const char *what, gc_error *err);
/* Validates a shape (0 <= ndim <= 8, sizes >= 0, numel * itemsize fits); returns numel or -1. */
int64_t gc_shape_numel(const int64_t *shape, int ndim, int dtype, const char *fn, gc_error *err);
/* A new handle over storage st (a reference is taken); reg 1: registered and given to the
 * calling thread's innermost scope (a public handle), 0: internal (gc_tensor_drop releases it);
 * NULL with err set.  shape and strides validated by the caller. */
gc_tensor *gc_tensor_make(gc_storage *st, int dtype, int ndim, const int64_t *shape,
                          const int64_t *strides, int64_t offset, int reg, gc_error *err);
/* A new public contiguous tensor with fresh (uninitialised) memory (shape validated). */
gc_tensor *gc_tensor_new(const int64_t *shape, int ndim, int dtype, const char *fn,
                         gc_error *err);
/* The same, internal (not registered, in no scope). */
gc_tensor *gc_tensor_tmp(const int64_t *shape, int ndim, int dtype, const char *fn,
                         gc_error *err);
gc_storage *gc_storage_alloc(size_t nbytes);
void gc_storage_unref(gc_storage *st);
/* Internal release of a handle the library made and never handed out (on error paths). */
void gc_tensor_drop(gc_tensor *t);

int64_t gc_numel(const gc_tensor *t);
int gc_is_contig(const gc_tensor *t);
static inline void *gc_ptr(const gc_tensor *t)
{
    return (char *)t->st->data + t->offset * gc_dtype_size(t->dtype);
}
void gc_contig_strides(const int64_t *shape, int ndim, int64_t *strides);
/* dim in [-ndim, ndim) normalised into *out; ndim 0 accepts -1 / 0 as 0 when allow0. */
int gc_norm_dim(int dim, int ndim, int *out, const char *fn, gc_error *err);

/* ---- copies (views.c) -------------------------------------------------------------------- */
/* dst (contiguous, t's shape and dtype) := t's elements in C order. */
void gc_copy_contig(const gc_tensor *t, void *dst);
/* t itself when contiguous (*tmp NULL), else a contiguous internal copy in *tmp (free it with
 * gc_tensor_drop); NULL on error. */
const gc_tensor *gc_contig_input(const gc_tensor *t, gc_tensor **tmp, const char *fn,
                                 gc_error *err);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif /* GPUCORE_CAPI_H */

/* libgpucore: tensors from values and buffers, copies, reshape and transpose (see capi.h). */
#include "capi.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Copies                                                                                      */

void gc_copy_contig(const gc_tensor *t, void *dst)
{
    const int64_t n = gc_numel(t);
    const int isz = gc_dtype_size(t->dtype);
    if (n == 0)
        return;
    if (gc_is_contig(t)) {
        memcpy(dst, gc_ptr(t), (size_t)n * (size_t)isz);
        return;
    }
    gc_iter it;
    memset(&it, 0, sizeof it);
    it.ndim = t->ndim;
    int64_t cs[GC_MAX_NDIM];
    gc_contig_strides(t->shape, t->ndim, cs);
    for (int d = 0; d < t->ndim; d++) {
        it.shape[d] = t->shape[d];
        it.stride[0][d] = t->strides[d];
        it.stride[1][d] = cs[d];
    }
    gc_iter_collapse(&it, 2);
    gc_copy(&it, gc_ptr(t), dst, (size_t)isz);
}

const gc_tensor *gc_contig_input(const gc_tensor *t, gc_tensor **tmp, const char *fn,
                                 gc_error *err)
{
    *tmp = NULL;
    if (gc_is_contig(t))
        return t;
    *tmp = gc_tensor_tmp(t->shape, t->ndim, t->dtype, fn, err);
    if (!*tmp)
        return NULL;
    gc_copy_contig(t, gc_ptr(*tmp));
    return *tmp;
}

/* ------------------------------------------------------------------------------------------ */
/* Creation                                                                                    */

static int device_ok(int device, const char *fn, gc_error *err)
{
    if (device == GC_DEVICE_CPU)
        return 0;
    if (device == GC_DEVICE_VULKAN)
        return gc_fail(err, GC_ERR_DEVICE,
                       "%s: the C API runs on the CPU; GC_DEVICE_VULKAN is not available from C",
                       fn);
    return gc_fail(err, GC_ERR_DEVICE, "%s: unknown device %d", fn, device);
}

/* float -> IEEE half, round to nearest even. */
static uint16_t to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    const uint32_t sign = (x >> 16) & 0x8000u;
    x &= 0x7fffffffu;
    if (x >= 0x7f800000u) /* inf, nan */
        return (uint16_t)(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0));
    if (x >= 0x477ff000u) /* rounds to >= 65520: inf */
        return (uint16_t)(sign | 0x7c00u);
    if (x < 0x38800000u) { /* below 2^-14: denormal half */
        float a;
        memcpy(&a, &x, 4);
        return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f)); /* a / 2^-24 */
    }
    uint32_t h = ((x - 0x38000000u) >> 13);
    const uint32_t rest = x & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
        h++;
    return (uint16_t)(sign | h);
}

static uint16_t to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* The bytes of value as one dtype item. */
static void item_of(double v, int dtype, unsigned char *out)
{
    switch (dtype) {
    case GC_DTYPE_BOOL: out[0] = v != 0; break;
    case GC_DTYPE_UINT8: out[0] = (unsigned char)(isfinite(v) ? (int64_t)v : 0); break;
    case GC_DTYPE_INT8: {
        int8_t x = (int8_t)(isfinite(v) ? (int64_t)v : 0);
        memcpy(out, &x, 1);
        break;
    }
    case GC_DTYPE_INT32: {
        int32_t x = (int32_t)(isfinite(v) && fabs(v) < 9.2e18 ? (int64_t)v : 0);
        memcpy(out, &x, 4);
        break;
    }
    case GC_DTYPE_INT64: {
        int64_t x = isfinite(v) && fabs(v) < 9.2e18 ? (int64_t)v : 0;
        memcpy(out, &x, 8);
        break;
    }
    case GC_DTYPE_FLOAT16: {
        uint16_t h = to_half((float)v);
        memcpy(out, &h, 2);
        break;
    }
    case GC_DTYPE_BFLOAT16: {
        uint16_t h = to_bf16((float)v);
        memcpy(out, &h, 2);
        break;
    }
    case GC_DTYPE_FLOAT32: {
        float x = (float)v;
        memcpy(out, &x, 4);
        break;
    }
    case GC_DTYPE_INT16:
    case GC_DTYPE_UINT16: {
        uint16_t x = (uint16_t)(isfinite(v) && fabs(v) < 9.2e18 ? (int64_t)v : 0);
        memcpy(out, &x, 2);
        break;
    }
    case GC_DTYPE_UINT32: {
        uint32_t x = (uint32_t)(isfinite(v) && fabs(v) < 9.2e18 ? (int64_t)v : 0);
        memcpy(out, &x, 4);
        break;
    }
    case GC_DTYPE_UINT64: {
        uint64_t x = (uint64_t)(isfinite(v) && fabs(v) < 9.2e18 ? (int64_t)v : 0);
        memcpy(out, &x, 8);
        break;
    }
    default: memcpy(out, &v, 8); break;
    }
}

static gc_tensor *make_full(const int64_t *shape, int ndim, double value, int dtype, int device,
                            const char *fn, gc_error *err)
{
    gc_ok(err);
    if (device_ok(device, fn, err) < 0)
        return NULL;
    gc_tensor *t = gc_tensor_new(shape, ndim, dtype, fn, err);
    if (!t)
        return NULL;
    const int64_t n = gc_numel(t);
    const int isz = gc_dtype_size(dtype);
    unsigned char item[8];
    item_of(value, dtype, item);
    unsigned char *p = (unsigned char *)gc_ptr(t);
    int zero = 1;
    for (int i = 0; i < isz; i++)
        zero &= item[i] == 0;
    if (zero) {
        memset(p, 0, (size_t)n * (size_t)isz);
    } else {
        for (int64_t i = 0; i < n; i++)
            memcpy(p + i * isz, item, (size_t)isz);
    }
    return t;
}

gc_tensor *gc_tensor_empty(const int64_t *shape, int ndim, int dtype, int device, gc_error *err)
{
    gc_ok(err);
    if (device_ok(device, "gc_tensor_empty", err) < 0)
        return NULL;
    return gc_tensor_new(shape, ndim, dtype, "gc_tensor_empty", err);
}

gc_tensor *gc_tensor_zeros(const int64_t *shape, int ndim, int dtype, int device, gc_error *err)
{
    return make_full(shape, ndim, 0.0, dtype, device, "gc_tensor_zeros", err);
}

gc_tensor *gc_tensor_ones(const int64_t *shape, int ndim, int dtype, int device, gc_error *err)
{
    return make_full(shape, ndim, 1.0, dtype, device, "gc_tensor_ones", err);
}

gc_tensor *gc_tensor_full(const int64_t *shape, int ndim, double value, int dtype, int device,
                          gc_error *err)
{
    return make_full(shape, ndim, value, dtype, device, "gc_tensor_full", err);
}

gc_tensor *gc_tensor_randn(const int64_t *shape, int ndim, int dtype, int device, uint64_t seed,
                           gc_error *err)
{
    const char *fn = "gc_tensor_randn";
    gc_ok(err);
    if (device_ok(device, fn, err) < 0)
        return NULL;
    if (gc_dtype_size(dtype) >= 0 && dtype != GC_DTYPE_FLOAT32 && dtype != GC_DTYPE_FLOAT64) {
        gc_fail(err, GC_ERR_DTYPE, "%s: dtype %s; randn makes float32 or float64", fn,
                gc_dtype_name(dtype));
        return NULL;
    }
    gc_tensor *t = gc_tensor_new(shape, ndim, dtype, fn, err);
    if (!t)
        return NULL;
    const int64_t n = gc_numel(t);
    if (dtype == GC_DTYPE_FLOAT32) {
        gc_normal_f32(seed, 0, (float *)gc_ptr(t), n, 0.0f, 1.0f);
        return t;
    }
    /* float64: the float32 stream, widened (in place, from the end) */
    float *f = (float *)gc_ptr(t);
    double *d = (double *)gc_ptr(t);
    gc_normal_f32(seed, 0, f, n, 0.0f, 1.0f);
    for (int64_t i = n - 1; i >= 0; i--)
        d[i] = (double)f[i];
    return t;
}

/* ------------------------------------------------------------------------------------------ */
/* Buffers                                                                                     */

gc_tensor *gc_tensor_from_buffer(void *data, size_t nbytes, const int64_t *shape, int ndim,
                                 int dtype, int mode, gc_deleter deleter, void *ctx,
                                 gc_error *err)
{
    const char *fn = "gc_tensor_from_buffer";
    gc_ok(err);
    int64_t n = gc_shape_numel(shape, ndim, dtype, fn, err);
    if (n < 0)
        return NULL;
    const size_t isz = (size_t)gc_dtype_size(dtype), need = (size_t)n * isz;
    if (mode != GC_BUFFER_COPY && mode != GC_BUFFER_ZERO_COPY) {
        gc_fail(err, GC_ERR_INVALID_ARGUMENT,
                "%s: mode %d is neither GC_BUFFER_COPY nor GC_BUFFER_ZERO_COPY", fn, mode);
        return NULL;
    }
    if (!data && need > 0) {
        gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: data is NULL", fn);
        return NULL;
    }
    if (nbytes != need) {
        gc_fail(err, GC_ERR_SHAPE,
                "%s: the buffer holds %zu bytes; the shape and dtype (%s) need %zu", fn, nbytes,
                gc_dtype_name(dtype), need);
        return NULL;
    }
    if (mode == GC_BUFFER_COPY) {
        gc_tensor *t = gc_tensor_new(shape, ndim, dtype, fn, err);
        if (t && need)
            memcpy(gc_ptr(t), data, need);
        return t;
    }
    if ((uintptr_t)data % isz) {
        gc_fail(err, GC_ERR_INVALID_ARGUMENT,
                "%s: data is not aligned to the item size (%zu bytes) for a zero-copy tensor", fn,
                isz);
        return NULL;
    }
    gc_storage *st = calloc(1, sizeof *st);
    if (!st) {
        gc_fail(err, GC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
        return NULL;
    }
    st->data = data;
    st->nbytes = nbytes;
    st->deleter = deleter;
    st->ctx = ctx;
    atomic_init(&st->refs, 0);
    int64_t strides[GC_MAX_NDIM];
    gc_contig_strides(shape, ndim, strides);
    gc_tensor *t = gc_tensor_make(st, dtype, ndim, shape, strides, 0, 1, err);
    if (!t)
        free(st); /* the deleter is not called: data stays the caller's */
    return t;
}

int gc_tensor_copy_to_buffer(const gc_tensor *t, void *dst, size_t nbytes, gc_error *err)
{
    const char *fn = "gc_tensor_copy_to_buffer";
    gc_ok(err);
    int rc = gc_check(t, fn, "t", err);
    if (rc < 0)
        return rc;
    const size_t need = (size_t)gc_numel(t) * (size_t)gc_dtype_size(t->dtype);
    if (nbytes != need)
        return gc_fail(err, GC_ERR_SHAPE, "%s: dst holds %zu bytes; the tensor has %zu", fn,
                       nbytes, need);
    if (!dst && need > 0)
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: dst is NULL", fn);
    gc_copy_contig(t, dst);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Views and copies                                                                            */

gc_tensor *gc_tensor_clone(const gc_tensor *t, gc_error *err)
{
    gc_ok(err);
    if (gc_check(t, "gc_tensor_clone", "t", err) < 0)
        return NULL;
    gc_tensor *c = gc_tensor_new(t->shape, t->ndim, t->dtype, "gc_tensor_clone", err);
    if (c)
        gc_copy_contig(t, gc_ptr(c));
    return c;
}

gc_tensor *gc_tensor_contiguous(const gc_tensor *t, gc_error *err)
{
    gc_ok(err);
    if (gc_check(t, "gc_tensor_contiguous", "t", err) < 0)
        return NULL;
    if (!gc_is_contig(t))
        return gc_tensor_clone(t, err);
    int64_t strides[GC_MAX_NDIM];
    gc_contig_strides(t->shape, t->ndim, strides);
    return gc_tensor_make(t->st, t->dtype, t->ndim, t->shape, strides, t->offset, 1, err);
}

gc_tensor *gc_tensor_reshape(const gc_tensor *t, const int64_t *shape, int ndim, gc_error *err)
{
    const char *fn = "gc_tensor_reshape";
    gc_ok(err);
    if (gc_check(t, fn, "t", err) < 0)
        return NULL;
    if (ndim < 0 || ndim > GC_MAX_NDIM || (ndim > 0 && !shape)) {
        gc_fail(err, GC_ERR_SHAPE, "%s: ndim = %d is outside [0, %d] or shape is NULL", fn, ndim,
                GC_MAX_NDIM);
        return NULL;
    }
    int64_t sh[GC_MAX_NDIM], known = 1;
    int infer = -1;
    for (int d = 0; d < ndim; d++) {
        sh[d] = shape[d];
        if (sh[d] == -1 && infer < 0) {
            infer = d;
            continue;
        }
        if (sh[d] < 0) {
            gc_fail(err, GC_ERR_SHAPE, "%s: size %lld of dim %d is invalid", fn,
                    (long long)sh[d], d);
            return NULL;
        }
        if (sh[d] > 0 && known > ((int64_t)1 << 62) / sh[d]) {
            gc_fail(err, GC_ERR_SHAPE, "%s: the shape holds too many elements", fn);
            return NULL;
        }
        known *= sh[d];
    }
    const int64_t n = gc_numel(t);
    if (infer >= 0) {
        if (known == 0 || n % known) {
            gc_fail(err, GC_ERR_SHAPE, "%s: cannot infer dim %d: %lld elements into blocks of %lld",
                    fn, infer, (long long)n, (long long)known);
            return NULL;
        }
        sh[infer] = n / known;
        known = n;
    }
    if (known != n) {
        gc_fail(err, GC_ERR_SHAPE, "%s: the new shape holds %lld elements; the tensor has %lld",
                fn, (long long)known, (long long)n);
        return NULL;
    }
    int64_t strides[GC_MAX_NDIM];
    gc_contig_strides(sh, ndim, strides);
    if (gc_is_contig(t))
        return gc_tensor_make(t->st, t->dtype, ndim, sh, strides, t->offset, 1, err);
    gc_tensor *c = gc_tensor_new(sh, ndim, t->dtype, fn, err);
    if (c)
        gc_copy_contig(t, gc_ptr(c));
    return c;
}

gc_tensor *gc_tensor_transpose(const gc_tensor *t, int d0, int d1, gc_error *err)
{
    const char *fn = "gc_tensor_transpose";
    gc_ok(err);
    if (gc_check(t, fn, "t", err) < 0)
        return NULL;
    int a, b;
    if (gc_norm_dim(d0, t->ndim, &a, fn, err) < 0 || gc_norm_dim(d1, t->ndim, &b, fn, err) < 0)
        return NULL;
    int64_t sh[GC_MAX_NDIM], st[GC_MAX_NDIM];
    for (int d = 0; d < t->ndim; d++) {
        sh[d] = t->shape[d];
        st[d] = t->strides[d];
    }
    if (t->ndim > 0) {
        sh[a] = t->shape[b];
        sh[b] = t->shape[a];
        st[a] = t->strides[b];
        st[b] = t->strides[a];
    }
    return gc_tensor_make(t->st, t->dtype, t->ndim, sh, st, t->offset, 1, err);
}

/* libgpucore nn ops: conv2d, max / avg pooling, layer_norm (see capi.h). */
#include "capi.h"

#include <math.h>
#include <string.h>

#define F64(t) ((t)->dtype == GC_DTYPE_FLOAT64)

/* Reads pair v (NULL: dflt) into out[2], each >= lo. */
static int pair(const int64_t *v, int64_t dflt0, int64_t dflt1, int64_t lo, const char *fn,
                const char *name, int64_t *out, gc_error *err)
{
    out[0] = v ? v[0] : dflt0;
    out[1] = v ? v[1] : dflt1;
    if (out[0] < lo || out[1] < lo || out[0] > (1 << 24) || out[1] > (1 << 24))
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: %s (%lld, %lld) must be in [%lld, 2^24]",
                       fn, name, (long long)out[0], (long long)out[1], (long long)lo);
    return 0;
}

/* Output size of a window op along one dim; -1 with err set when none fits. */
static int64_t out_size(int64_t h, int64_t k, int64_t s, int64_t p, int64_t d, const char *fn,
                        gc_error *err)
{
    const int64_t span = d * (k - 1) + 1;
    if (h + 2 * p < span) {
        gc_fail(err, GC_ERR_SHAPE,
                "%s: the input (%lld with padding %lld) is smaller than the window (%lld)", fn,
                (long long)h, (long long)p, (long long)span);
        return -1;
    }
    return (h + 2 * p - span) / s + 1;
}

static int same_dtype(const gc_tensor *a, const gc_tensor *b, const char *fn, const char *bn,
                      gc_error *err)
{
    if (a->dtype != b->dtype)
        return gc_fail(err, GC_ERR_DTYPE, "%s: x is %s and %s is %s; both must have one dtype", fn,
                       gc_dtype_name(a->dtype), bn, gc_dtype_name(b->dtype));
    return 0;
}

gc_tensor *gc_conv2d(const gc_tensor *x, const gc_tensor *w, const gc_tensor *bias,
                     const int64_t *stride, const int64_t *padding, const int64_t *dilation,
                     gc_error *err)
{
    const char *fn = "gc_conv2d";
    gc_ok(err);
    if (gc_check_float(x, fn, "x", err) < 0 || gc_check_float(w, fn, "w", err) < 0 ||
        same_dtype(x, w, fn, "w", err) < 0 ||
        (bias && (gc_check_float(bias, fn, "bias", err) < 0 ||
                  same_dtype(x, bias, fn, "bias", err) < 0)) ||
        gc_capi_init(err) < 0)
        return NULL;
    if (x->ndim != 4 || w->ndim != 4) {
        gc_fail(err, GC_ERR_SHAPE, "%s: x [N, C, H, W] and w [O, C, KH, KW] must be 4-d (got %d "
                "and %d dims)", fn, x->ndim, w->ndim);
        return NULL;
    }
    const int64_t o = w->shape[0];
    if (w->shape[1] != x->shape[1] || o < 1 || x->shape[1] < 1 || w->shape[2] < 1 ||
        w->shape[3] < 1) {
        gc_fail(err, GC_ERR_SHAPE, "%s: w has %lld input channels; x has %lld (groups 1)", fn,
                (long long)w->shape[1], (long long)x->shape[1]);
        return NULL;
    }
    if (bias && (bias->ndim != 1 || bias->shape[0] != o)) {
        gc_fail(err, GC_ERR_SHAPE, "%s: bias must be [%lld]", fn, (long long)o);
        return NULL;
    }
    int64_t s[2], p[2], d[2];
    if (pair(stride, 1, 1, 1, fn, "stride", s, err) < 0 ||
        pair(padding, 0, 0, 0, fn, "padding", p, err) < 0 ||
        pair(dilation, 1, 1, 1, fn, "dilation", d, err) < 0)
        return NULL;
    gc_conv g = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[2], w->shape[3],
                 s[0],        s[1],        p[0],        p[1],        d[0],        d[1], 0, 0};
    if ((g.oh = out_size(g.h, g.kh, g.sh, g.ph, g.dh, fn, err)) < 0 ||
        (g.ow = out_size(g.w, g.kw, g.sw, g.pw, g.dw, fn, err)) < 0)
        return NULL;
    const int64_t oshape[4] = {g.n, o, g.oh, g.ow};
    gc_tensor *out = gc_tensor_new(oshape, 4, x->dtype, fn, err);
    if (!out || gc_numel(out) == 0)
        return out;
    gc_tensor *tx = NULL, *tw = NULL, *tb = NULL;
    const gc_tensor *cx = gc_contig_input(x, &tx, fn, err);
    const gc_tensor *cw = cx ? gc_contig_input(w, &tw, fn, err) : NULL;
    const gc_tensor *cb = cw && bias ? gc_contig_input(bias, &tb, fn, err) : NULL;
    int rc = -1;
    if (cw && (cb || !bias)) {
        const void *bp = cb ? gc_ptr(cb) : NULL;
        rc = F64(x) ? gc_conv2d_forward_f64(gc_ptr(cx), gc_ptr(cw), bp, gc_ptr(out), &g, o)
                    : gc_conv2d_forward_f32(gc_ptr(cx), gc_ptr(cw), bp, gc_ptr(out), &g, o);
        if (rc < 0)
            gc_fail(err, GC_ERR_OUT_OF_MEMORY, "%s: out of memory for the kernel's scratch", fn);
    }
    gc_tensor_drop(tx);
    gc_tensor_drop(tw);
    gc_tensor_drop(tb);
    if (rc < 0) {
        gc_tensor_free(out, NULL);
        return NULL;
    }
    return out;
}

/* The pooling geometry of x ([C, H, W] or [N, C, H, W]) and the output shape. */
static int pool_geometry(const gc_tensor *x, const int64_t *kernel, const int64_t *stride,
                         const int64_t *padding, const int64_t *dilation, gc_pool2d *g,
                         int64_t *oshape, const char *fn, gc_error *err)
{
    if (x->ndim != 3 && x->ndim != 4)
        return gc_fail(err, GC_ERR_SHAPE, "%s: x must be [C, H, W] or [N, C, H, W] (got %d dims)",
                       fn, x->ndim);
    if (!kernel)
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: kernel is NULL", fn);
    int64_t k[2], s[2], p[2], d[2];
    if (pair(kernel, 1, 1, 1, fn, "kernel", k, err) < 0 ||
        pair(stride, k[0], k[1], 1, fn, "stride", s, err) < 0 ||
        pair(padding, 0, 0, 0, fn, "padding", p, err) < 0 ||
        pair(dilation, 1, 1, 1, fn, "dilation", d, err) < 0)
        return -1;
    if (2 * p[0] > k[0] || 2 * p[1] > k[1])
        return gc_fail(err, GC_ERR_INVALID_ARGUMENT,
                       "%s: padding (%lld, %lld) must be at most half the kernel (%lld, %lld)", fn,
                       (long long)p[0], (long long)p[1], (long long)k[0], (long long)k[1]);
    const int nd = x->ndim;
    int64_t planes = 1;
    for (int i = 0; i < nd - 2; i++)
        planes *= x->shape[i];
    *g = (gc_pool2d){planes, x->shape[nd - 2], x->shape[nd - 1], k[0], k[1], s[0], s[1], p[0],
                     p[1], d[0], d[1], 0, 0};
    if ((g->oh = out_size(g->h, g->kh, g->sh, g->ph, g->dh, fn, err)) < 0 ||
        (g->ow = out_size(g->w, g->kw, g->sw, g->pw, g->dw, fn, err)) < 0)
        return -1;
    for (int i = 0; i < nd - 2; i++)
        oshape[i] = x->shape[i];
    oshape[nd - 2] = g->oh;
    oshape[nd - 1] = g->ow;
    return 0;
}

gc_tensor *gc_max_pool2d(const gc_tensor *x, const int64_t *kernel, const int64_t *stride,
                         const int64_t *padding, const int64_t *dilation, gc_error *err)
{
    const char *fn = "gc_max_pool2d";
    gc_ok(err);
    gc_pool2d g;
    int64_t oshape[4];
    if (gc_check_float(x, fn, "x", err) < 0 || gc_capi_init(err) < 0 ||
        pool_geometry(x, kernel, stride, padding, dilation, &g, oshape, fn, err) < 0)
        return NULL;
    gc_tensor *out = gc_tensor_new(oshape, x->ndim, x->dtype, fn, err);
    if (!out || gc_numel(out) == 0)
        return out;
    gc_tensor *tx = NULL;
    const gc_tensor *cx = gc_contig_input(x, &tx, fn, err);
    gc_tensor *idx = cx ? gc_tensor_tmp(oshape, x->ndim, GC_DTYPE_INT64, fn, err) : NULL;
    if (idx) {
        if (F64(x))
            gc_max_pool2d_f64(gc_ptr(cx), (double *)gc_ptr(out), (int64_t *)gc_ptr(idx), &g);
        else
            gc_max_pool2d_f32(gc_ptr(cx), (float *)gc_ptr(out), (int64_t *)gc_ptr(idx), &g);
    }
    gc_tensor_drop(tx);
    gc_tensor_drop(idx);
    if (!idx) {
        gc_tensor_free(out, NULL);
        return NULL;
    }
    return out;
}

gc_tensor *gc_avg_pool2d(const gc_tensor *x, const int64_t *kernel, const int64_t *stride,
                         const int64_t *padding, gc_error *err)
{
    const char *fn = "gc_avg_pool2d";
    gc_ok(err);
    gc_pool2d g;
    int64_t oshape[4];
    if (gc_check_float(x, fn, "x", err) < 0 || gc_capi_init(err) < 0 ||
        pool_geometry(x, kernel, stride, padding, NULL, &g, oshape, fn, err) < 0)
        return NULL;
    gc_tensor *out = gc_tensor_new(oshape, x->ndim, x->dtype, fn, err);
    if (!out || gc_numel(out) == 0)
        return out;
    /* the windows as im2col's columns of [planes, 1, h, w], averaged: padding counts as 0 */
    const gc_conv c = {g.planes, 1, g.h, g.w, g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, 1, 1, g.oh, g.ow};
    const int64_t cshape[3] = {g.planes, g.kh * g.kw, g.oh * g.ow};
    gc_tensor *tx = NULL;
    const gc_tensor *cx = gc_contig_input(x, &tx, fn, err);
    gc_tensor *col = cx ? gc_tensor_tmp(cshape, 3, x->dtype, fn, err) : NULL;
    int rc = -1;
    if (col) {
        if (F64(x))
            gc_im2col_f64(gc_ptr(cx), (double *)gc_ptr(col), &c);
        else
            gc_im2col_f32(gc_ptr(cx), (float *)gc_ptr(col), &c);
        rc = F64(x) ? gc_reduce_f64(GC_REDUCE_MEAN, gc_ptr(col), gc_ptr(out), g.planes, cshape[1],
                                    cshape[2])
                    : gc_reduce_f32(GC_REDUCE_MEAN, gc_ptr(col), gc_ptr(out), g.planes, cshape[1],
                                    cshape[2]);
        if (rc < 0)
            gc_fail(err, GC_ERR_OUT_OF_MEMORY, "%s: out of memory for the kernel's scratch", fn);
    }
    gc_tensor_drop(tx);
    gc_tensor_drop(col);
    if (rc < 0) {
        gc_tensor_free(out, NULL);
        return NULL;
    }
    return out;
}

gc_tensor *gc_layer_norm(const gc_tensor *x, int normalized_ndim, const gc_tensor *weight,
                         const gc_tensor *bias, double eps, gc_error *err)
{
    const char *fn = "gc_layer_norm";
    gc_ok(err);
    if (gc_check_float(x, fn, "x", err) < 0 ||
        (weight && (gc_check_float(weight, fn, "weight", err) < 0 ||
                    same_dtype(x, weight, fn, "weight", err) < 0)) ||
        (bias && (gc_check_float(bias, fn, "bias", err) < 0 ||
                  same_dtype(x, bias, fn, "bias", err) < 0)) ||
        gc_capi_init(err) < 0)
        return NULL;
    if (normalized_ndim < 1 || normalized_ndim > x->ndim) {
        gc_fail(err, GC_ERR_SHAPE, "%s: normalized_ndim = %d is outside [1, %d]", fn,
                normalized_ndim, x->ndim);
        return NULL;
    }
    if (!(eps >= 0) || !isfinite(eps)) {
        gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: eps = %g must be finite and >= 0", fn, eps);
        return NULL;
    }
    const int lead = x->ndim - normalized_ndim;
    const gc_tensor *wb[2] = {weight, bias};
    for (int j = 0; j < 2; j++) {
        const gc_tensor *t = wb[j];
        int ok = !t || t->ndim == normalized_ndim;
        for (int i = 0; ok && t && i < normalized_ndim; i++)
            ok = t->shape[i] == x->shape[lead + i];
        if (!ok) {
            gc_fail(err, GC_ERR_SHAPE, "%s: %s must have x's last %d dims' shape", fn,
                    j ? "bias" : "weight", normalized_ndim);
            return NULL;
        }
    }
    int64_t n = 1;
    for (int i = lead; i < x->ndim; i++)
        n *= x->shape[i];
    gc_tensor *out = gc_tensor_new(x->shape, x->ndim, x->dtype, fn, err);
    if (!out || gc_numel(out) == 0)
        return out;
    const int64_t rows = gc_numel(x) / n;
    gc_tensor *tx = NULL, *tw = NULL, *tb = NULL;
    const gc_tensor *cx = gc_contig_input(x, &tx, fn, err);
    const gc_tensor *cw = cx && weight ? gc_contig_input(weight, &tw, fn, err) : NULL;
    const gc_tensor *cb = cx && bias ? gc_contig_input(bias, &tb, fn, err) : NULL;
    const int ok = cx && (cw || !weight) && (cb || !bias);
    if (ok) {
        const void *wp = cw ? gc_ptr(cw) : NULL, *bp = cb ? gc_ptr(cb) : NULL;
        if (F64(x))
            gc_layer_norm_f64(gc_ptr(cx), wp, bp, (double *)gc_ptr(out), rows, n, eps);
        else
            gc_layer_norm_f32(gc_ptr(cx), wp, bp, (float *)gc_ptr(out), rows, n, eps);
    }
    gc_tensor_drop(tx);
    gc_tensor_drop(tw);
    gc_tensor_drop(tb);
    if (!ok) {
        gc_tensor_free(out, NULL);
        return NULL;
    }
    return out;
}

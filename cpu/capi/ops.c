/* libgpucore ops: elementwise (binary with broadcasting, unary), matmul, sum / mean, softmax
 * (see capi.h).  Each op checks its handles, shapes and dtypes, then calls the kernels of cpu/. */
#include "capi.h"

#include <string.h>

#define F64(t) ((t)->dtype == GC_DTYPE_FLOAT64)

static int oom(gc_error *err, const char *fn)
{
    return gc_fail(err, GC_ERR_OUT_OF_MEMORY, "%s: out of memory for the kernel's scratch", fn);
}

/* ------------------------------------------------------------------------------------------ */
/* Binary ops with numpy broadcasting                                                          */

/* err cleared; a and b float tensors of one dtype (and the kernels ready), else -1 with err set */
static int float_pair(const char *fn, const gc_tensor *a, const gc_tensor *b, gc_error *err)
{
    gc_ok(err);
    if (gc_check_float(a, fn, "a", err) < 0 || gc_check_float(b, fn, "b", err) < 0 ||
        gc_capi_init(err) < 0)
        return -1;
    if (a->dtype != b->dtype)
        return gc_fail(err, GC_ERR_DTYPE, "%s: a is %s and b is %s; both must have one dtype", fn,
                       gc_dtype_name(a->dtype), gc_dtype_name(b->dtype));
    return 0;
}

static gc_tensor *binary(int op, const char *fn, const gc_tensor *a, const gc_tensor *b,
                         gc_error *err)
{
    if (float_pair(fn, a, b, err) < 0)
        return NULL;
    const int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    int64_t shape[GC_MAX_NDIM];
    gc_iter it;
    memset(&it, 0, sizeof it);
    it.ndim = nd > 0 ? nd : 1;
    it.shape[0] = 1;
    for (int d = 0; d < nd; d++) {
        const int da = d - (nd - a->ndim), db = d - (nd - b->ndim);
        const int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            gc_fail(err, GC_ERR_SHAPE,
                    "%s: shapes do not broadcast: dim %d of the result is %lld in a and %lld in "
                    "b",
                    fn, d, (long long)sa, (long long)sb);
            return NULL;
        }
        shape[d] = sa == 1 ? sb : sa;
        it.shape[d] = shape[d];
        it.stride[0][d] = sa == 1 ? 0 : a->strides[da];
        it.stride[1][d] = sb == 1 ? 0 : b->strides[db];
    }
    const int dt = gc_binary_writes_bool(op) ? GC_DTYPE_BOOL : a->dtype;
    gc_tensor *out = gc_tensor_new(shape, nd, dt, fn, err);
    if (!out || gc_numel(out) == 0)
        return out;
    for (int d = 0; d < nd; d++)
        it.stride[2][d] = out->strides[d];
    gc_iter_collapse(&it, 3);
    if (F64(a))
        gc_binary_f64(op, &it, (const double *)gc_ptr(a), (const double *)gc_ptr(b), gc_ptr(out));
    else
        gc_binary_f32(op, &it, (const float *)gc_ptr(a), (const float *)gc_ptr(b), gc_ptr(out));
    return out;
}

#define GC_BINARY_API(name, OP)                                                                 \
    gc_tensor *gc_##name(const gc_tensor *a, const gc_tensor *b, gc_error *err)                 \
    {                                                                                           \
        return binary(GC_BINARY_##OP, "gc_" #name, a, b, err);                                  \
    }
GC_BINARY_API(add, ADD)
GC_BINARY_API(sub, SUB)
GC_BINARY_API(mul, MUL)
GC_BINARY_API(div, DIV)
GC_BINARY_API(pow, POW)
GC_BINARY_API(maximum, MAXIMUM)
GC_BINARY_API(minimum, MINIMUM)
GC_BINARY_API(eq, EQ)
GC_BINARY_API(ne, NE)
GC_BINARY_API(lt, LT)
GC_BINARY_API(le, LE)
GC_BINARY_API(gt, GT)
GC_BINARY_API(ge, GE)

/* ------------------------------------------------------------------------------------------ */
/* Unary ops                                                                                   */

static gc_tensor *unary(int op, const char *fn, const gc_tensor *x, gc_error *err)
{
    gc_ok(err);
    if (gc_check_float(x, fn, "x", err) < 0 || gc_capi_init(err) < 0)
        return NULL;
    gc_tensor *tmp;
    const gc_tensor *c = gc_contig_input(x, &tmp, fn, err);
    if (!c)
        return NULL;
    gc_tensor *out = gc_tensor_new(x->shape, x->ndim, x->dtype, fn, err);
    if (out) {
        if (F64(x))
            gc_unary_f64(op, (const double *)gc_ptr(c), (double *)gc_ptr(out), gc_numel(x));
        else
            gc_unary_f32(op, (const float *)gc_ptr(c), (float *)gc_ptr(out), gc_numel(x));
    }
    gc_tensor_drop(tmp);
    return out;
}

#define GC_UNARY_API(name, OP)                                                                  \
    gc_tensor *gc_##name(const gc_tensor *x, gc_error *err)                                     \
    {                                                                                           \
        return unary(GC_UNARY_##OP, "gc_" #name, x, err);                                       \
    }
GC_UNARY_API(relu, RELU)
GC_UNARY_API(sigmoid, SIGMOID)
GC_UNARY_API(tanh, TANH)
GC_UNARY_API(gelu, GELU)
GC_UNARY_API(exp, EXP)
GC_UNARY_API(log, LOG)
GC_UNARY_API(sqrt, SQRT)
GC_UNARY_API(neg, NEG)
GC_UNARY_API(abs, ABS)

/* ------------------------------------------------------------------------------------------ */
/* matmul                                                                                      */

/* One GEMM operand: a [batch..., r, c] view (broadcast batch strides 0) made directly usable
 * (row-major or transposed matrices, batch stride 0 or r*c) or copied contiguous into *tmp. */
typedef struct {
    const void *p;
    int trans;
    ptrdiff_t stride;
} operand;

static int prep(const gc_tensor *t, int nb, const int64_t *bs, int64_t r, int64_t c,
                const int64_t *mst, const int64_t *bst, operand *o, gc_tensor **tmp,
                const char *fn, gc_error *err)
{
    *tmp = NULL;
    const int rowmaj = (r == 1 || mst[0] == c) && (c == 1 || mst[1] == 1);
    const int colmaj = (r == 1 || mst[0] == 1) && (c == 1 || mst[1] == r);
    int zero = 1, contig = 1;
    int64_t want = r * c;
    for (int d = nb - 1; d >= 0; d--) {
        if (bs[d] != 1) {
            zero &= bst[d] == 0;
            contig &= bst[d] == want;
        }
        want *= bs[d];
    }
    if ((rowmaj || colmaj) && (zero || contig)) {
        o->p = gc_ptr(t);
        o->trans = !rowmaj;
        o->stride = zero ? 0 : (ptrdiff_t)(r * c);
        return 0;
    }
    int64_t shape[GC_MAX_NDIM + 2];
    gc_iter it;
    memset(&it, 0, sizeof it);
    for (int d = 0; d < nb; d++) {
        shape[d] = bs[d];
        it.stride[0][d] = bst[d];
    }
    shape[nb] = r;
    shape[nb + 1] = c;
    it.stride[0][nb] = mst[0];
    it.stride[0][nb + 1] = mst[1];
    it.ndim = nb + 2;
    *tmp = gc_tensor_tmp(shape, nb + 2, t->dtype, fn, err);
    if (!*tmp)
        return -1;
    for (int d = 0; d < nb + 2; d++) {
        it.shape[d] = shape[d];
        it.stride[1][d] = (*tmp)->strides[d];
    }
    if (gc_numel(*tmp) > 0) {
        gc_iter_collapse(&it, 2);
        gc_copy(&it, gc_ptr(t), gc_ptr(*tmp), (size_t)gc_dtype_size(t->dtype));
    }
    o->p = gc_ptr(*tmp);
    o->trans = 0;
    o->stride = (ptrdiff_t)(r * c);
    return 0;
}

gc_tensor *gc_matmul(const gc_tensor *a, const gc_tensor *b, gc_error *err)
{
    const char *fn = "gc_matmul";
    if (float_pair(fn, a, b, err) < 0)
        return NULL;
    if (a->ndim == 0 || b->ndim == 0) {
        gc_fail(err, GC_ERR_SHAPE, "%s: both operands need at least one dim (got %d and %d)", fn,
                a->ndim, b->ndim);
        return NULL;
    }
    const int a1 = a->ndim == 1, b1 = b->ndim == 1;
    const int64_t m = a1 ? 1 : a->shape[a->ndim - 2], k = a->shape[a->ndim - 1];
    const int64_t kb = b1 ? b->shape[0] : b->shape[b->ndim - 2], n = b1 ? 1 : b->shape[b->ndim - 1];
    const int64_t ams[2] = {a1 ? 0 : a->strides[a->ndim - 2], a->strides[a->ndim - 1]};
    const int64_t bms[2] = {b->strides[b->ndim - (b1 ? 1 : 2)], b1 ? 0 : b->strides[b->ndim - 1]};
    if (k != kb) {
        gc_fail(err, GC_ERR_SHAPE, "%s: a has %lld columns and b %lld rows", fn, (long long)k,
                (long long)kb);
        return NULL;
    }
    const int na = a1 ? 0 : a->ndim - 2, nbt = b1 ? 0 : b->ndim - 2;
    const int nb = na > nbt ? na : nbt;
    int64_t bs[GC_MAX_NDIM], ast[GC_MAX_NDIM], bst[GC_MAX_NDIM], batch = 1;
    for (int d = 0; d < nb; d++) {
        const int da = d - (nb - na), db = d - (nb - nbt);
        const int64_t sa = da >= 0 ? a->shape[da] : 1, sb = db >= 0 ? b->shape[db] : 1;
        if (sa != sb && sa != 1 && sb != 1) {
            gc_fail(err, GC_ERR_SHAPE, "%s: batch dims do not broadcast (%lld and %lld)", fn,
                    (long long)sa, (long long)sb);
            return NULL;
        }
        bs[d] = sa == 1 ? sb : sa;
        ast[d] = sa == 1 ? 0 : a->strides[da];
        bst[d] = sb == 1 ? 0 : b->strides[db];
        batch *= bs[d];
    }
    int64_t oshape[GC_MAX_NDIM];
    int od = nb;
    memcpy(oshape, bs, sizeof(int64_t) * (size_t)nb);
    if (!a1)
        oshape[od++] = m;
    if (!b1)
        oshape[od++] = n;
    gc_tensor *out = gc_tensor_new(oshape, od, a->dtype, fn, err);
    if (!out || gc_numel(out) == 0)
        return out;
    gc_tensor *ta = NULL, *tb = NULL;
    operand oa, ob;
    int rc = -1;
    if (prep(a, nb, bs, m, k, ams, ast, &oa, &ta, fn, err) == 0 &&
        prep(b, nb, bs, k, n, bms, bst, &ob, &tb, fn, err) == 0) {
        rc = F64(a) ? gc_gemm_f64(oa.p, ob.p, (double *)gc_ptr(out), batch, m, n, k, oa.trans,
                                  ob.trans, 1.0, 0.0, oa.stride, ob.stride, m * n)
                    : gc_gemm_f32(oa.p, ob.p, (float *)gc_ptr(out), batch, m, n, k, oa.trans,
                                  ob.trans, 1.0f, 0.0f, oa.stride, ob.stride, m * n);
        if (rc < 0)
            oom(err, fn);
    }
    gc_tensor_drop(ta);
    gc_tensor_drop(tb);
    if (rc < 0) {
        gc_tensor_free(out, NULL);
        return NULL;
    }
    return out;
}

/* ------------------------------------------------------------------------------------------ */
/* sum / mean                                                                                  */

static gc_tensor *reduce(int op, const char *fn, const gc_tensor *x, const int *dims, int ndims,
                         int keepdim, gc_error *err)
{
    gc_ok(err);
    if (gc_check_float(x, fn, "x", err) < 0 || gc_capi_init(err) < 0)
        return NULL;
    if (ndims < 0 || (ndims > 0 && !dims)) {
        gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: dims is NULL or ndims = %d < 0", fn, ndims);
        return NULL;
    }
    if (keepdim != 0 && keepdim != 1) {
        gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: keepdim = %d must be 0 or 1", fn, keepdim);
        return NULL;
    }
    int red[GC_MAX_NDIM] = {0};
    for (int i = 0; i < ndims; i++) {
        int d;
        if (gc_norm_dim(dims[i], x->ndim, &d, fn, err) < 0)
            return NULL;
        if (x->ndim > 0 && red[d]) {
            gc_fail(err, GC_ERR_INVALID_ARGUMENT, "%s: dim %d appears twice", fn, dims[i]);
            return NULL;
        }
        red[d] = 1;
    }
    if (ndims == 0)
        for (int d = 0; d < x->ndim; d++)
            red[d] = 1;
    /* [kept..., reduced...] (a permuted view of x) copied contiguous, unless the reduced dims
     * are already consecutive in a contiguous x: then [before, reduced, after] */
    int64_t oshape[GC_MAX_NDIM], pshape[GC_MAX_NDIM], pstr[GC_MAX_NDIM];
    int od = 0, np = 0, first = -1, last = -1, gap = 0;
    int64_t outer = 1, n = 1, inner = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (red[d]) {
            gap |= last >= 0 && last != d - 1;
            first = first < 0 ? d : first;
            last = d;
            n *= x->shape[d];
            if (keepdim)
                oshape[od++] = 1;
        } else {
            oshape[od++] = x->shape[d];
            pshape[np] = x->shape[d];
            pstr[np++] = x->strides[d];
        }
    }
    for (int d = 0; d < x->ndim; d++)
        if (red[d]) {
            pshape[np] = x->shape[d];
            pstr[np++] = x->strides[d];
        }
    gc_tensor *out = gc_tensor_new(oshape, od, x->dtype, fn, err);
    if (!out)
        return NULL;
    gc_tensor *tmp = NULL;
    const void *src = gc_ptr(x);
    if (!gap && gc_is_contig(x)) {
        for (int d = 0; d < x->ndim; d++)
            if (!red[d])
                *(d < first ? &outer : &inner) *= x->shape[d];
    } else {
        gc_tensor view = *x;
        memcpy(view.shape, pshape, sizeof pshape);
        memcpy(view.strides, pstr, sizeof pstr);
        tmp = gc_tensor_tmp(pshape, np, x->dtype, fn, err);
        if (!tmp) {
            gc_tensor_free(out, NULL);
            return NULL;
        }
        gc_copy_contig(&view, gc_ptr(tmp));
        src = gc_ptr(tmp);
        outer = gc_numel(out);
    }
    int rc = F64(x) ? gc_reduce_f64(op, src, gc_ptr(out), outer, n, inner)
                    : gc_reduce_f32(op, src, gc_ptr(out), outer, n, inner);
    gc_tensor_drop(tmp);
    if (rc < 0) {
        oom(err, fn);
        gc_tensor_free(out, NULL);
        return NULL;
    }
    return out;
}

gc_tensor *gc_sum(const gc_tensor *x, const int *dims, int ndims, int keepdim, gc_error *err)
{
    return reduce(GC_REDUCE_SUM, "gc_sum", x, dims, ndims, keepdim, err);
}

gc_tensor *gc_mean(const gc_tensor *x, const int *dims, int ndims, int keepdim, gc_error *err)
{
    return reduce(GC_REDUCE_MEAN, "gc_mean", x, dims, ndims, keepdim, err);
}

/* ------------------------------------------------------------------------------------------ */
/* softmax                                                                                     */

static gc_tensor *softmax(int log, const char *fn, const gc_tensor *x, int dim, gc_error *err)
{
    gc_ok(err);
    int d;
    if (gc_check_float(x, fn, "x", err) < 0 || gc_norm_dim(dim, x->ndim, &d, fn, err) < 0 ||
        gc_capi_init(err) < 0)
        return NULL;
    int64_t outer = 1, n = x->ndim ? x->shape[d] : 1, inner = 1;
    for (int i = 0; i < x->ndim; i++)
        if (i != d)
            *(i < d ? &outer : &inner) *= x->shape[i];
    gc_tensor *tmp;
    const gc_tensor *c = gc_contig_input(x, &tmp, fn, err);
    if (!c)
        return NULL;
    gc_tensor *out = gc_tensor_new(x->shape, x->ndim, x->dtype, fn, err);
    if (out && gc_numel(out) > 0) {
        if (F64(x))
            gc_softmax_f64(gc_ptr(c), (double *)gc_ptr(out), outer, n, inner, log);
        else
            gc_softmax_f32(gc_ptr(c), (float *)gc_ptr(out), outer, n, inner, log);
    }
    gc_tensor_drop(tmp);
    return out;
}

gc_tensor *gc_softmax(const gc_tensor *x, int dim, gc_error *err)
{
    return softmax(0, "gc_softmax", x, dim, err);
}

gc_tensor *gc_log_softmax(const gc_tensor *x, int dim, gc_error *err)
{
    return softmax(1, "gc_log_softmax", x, dim, err);
}

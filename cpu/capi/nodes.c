/* libgpucore: the checks of a deployed model's nodes (see model.h, model.c).
 *
 * Each node kind is checked as its Python binding checks its arguments (cpu/python/<family>.c):
 * dtypes, sizes against every buffer's elements, outputs in the arena, so that no run can read or
 * write outside the memory the model owns.  Anything else is GC_ERR_FORMAT (gc_rd_corrupt). */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */

#include "isa.h"
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static gc_marg *buf(gc_rd *r, gc_mnode *nd, int i, int none_ok)
{
    gc_marg *a = &nd->a[i];
    if (a->tag == GC_ARG_PACKED && none_ok == 2)
        return a; /* a packed operand where the node allows one */
    if (a->tag == GC_ARG_BUF || (none_ok == 1 && a->tag == GC_ARG_NONE))
        return a->tag == GC_ARG_BUF ? a : NULL;
    gc_rd_corrupt(r, "argument is not a buffer");
    return (gc_marg *)r; /* sentinel: error (never dereferenced) */
}

#define BUF_OR_FAIL(var, i, none_ok)                                                            \
    gc_marg *var = buf(r, nd, i, none_ok);                                                      \
    if ((void *)var == (void *)r)                                                               \
        return -1;

static int ival(gc_rd *r, gc_mnode *nd, int i, int64_t lo, int64_t hi, int64_t *v)
{
    if (nd->a[i].tag != GC_ARG_INT || nd->a[i].i < lo || nd->a[i].i > hi) {
        gc_rd_corrupt(r, "integer argument missing or out of range");
        return -1; /* (visibly negative: *v is set whenever this returns 0) */
    }
    *v = nd->a[i].i;
    return 0;
}

/* Float buffers of one dtype, contiguous (NULL entries skipped); sets nd->f64. */
static int floats(gc_rd *r, gc_mnode *nd, gc_marg *const *v, int n)
{
    int dt = -1;
    for (int i = 0; i < n; i++) {
        if (!v[i])
            continue;
        if (v[i]->dtype != GC_DTYPE_FLOAT32 && v[i]->dtype != GC_DTYPE_FLOAT64)
            return gc_rd_corrupt(r, "buffer is not float32 / float64");
        if (dt >= 0 && v[i]->dtype != dt)
            return gc_rd_corrupt(r, "buffers of different dtypes");
        if (!v[i]->contig)
            return gc_rd_corrupt(r, "buffer not contiguous");
        dt = v[i]->dtype;
    }
    nd->f64 = dt == GC_DTYPE_FLOAT64;
    return 0;
}

static int written(gc_rd *r, const gc_marg *a)
{
    return a->region < 0 ? 0 : gc_rd_corrupt(r, "writes a constant");
}

static int need(gc_rd *r, const gc_marg *a, int64_t n)
{
    return a->numel >= n ? 0 : gc_rd_corrupt(r, "buffer holds too few elements");
}


/* (batch - 1) * s + mn elements, or 0 when nothing is touched. */
static int span(int64_t batch, int64_t s, int64_t mn, int64_t *out)
{
    int64_t t;
    *out = 0;
    if (batch == 0 || mn == 0)
        return 0;
    if (gc_mulok(batch - 1, s, &t) < 0 || t > GC_LIM - mn)
        return -1;
    *out = t + mn;
    return 0;
}

static int check_gemm(gc_rd *r, gc_mnode *nd)
{
    const int ex = nd->kind == GC_NK_GEMM_EX;
    if (nd->nargs != (ex ? 16 : 14))
        return gc_rd_corrupt(r, "wrong argument count");
    BUF_OR_FAIL(a, 0, 2);
    BUF_OR_FAIL(b, 1, 2);
    BUF_OR_FAIL(c, 2, 0);
    gc_marg *bias = NULL;
    if (ex) {
        BUF_OR_FAIL(bb, 14, 1);
        bias = bb;
    }
    gc_marg *v[4] = {a, b, c, bias};
    int64_t batch, m, n, k, ta, tb, sa, sb, sc, act = -1, mk, kn, mn, na, nb, nc;
    if (floats(r, nd, v, 4) < 0 || written(r, c) < 0 || ival(r, nd, 3, 0, GC_LIM, &batch) < 0 ||
        ival(r, nd, 4, 0, GC_LIM, &m) < 0 || ival(r, nd, 5, 0, GC_LIM, &n) < 0 ||
        ival(r, nd, 6, 0, GC_LIM, &k) < 0 || ival(r, nd, 7, 0, 1, &ta) < 0 ||
        ival(r, nd, 8, 0, 1, &tb) < 0 || ival(r, nd, 11, 0, GC_LIM, &sa) < 0 ||
        ival(r, nd, 12, 0, GC_LIM, &sb) < 0 || ival(r, nd, 13, 0, GC_LIM, &sc) < 0 ||
        (ex && ival(r, nd, 15, -1, GC_UNARY_COUNT - 1, &act) < 0))
        return -1;
    if (nd->a[9].tag != GC_ARG_FLOAT || nd->a[10].tag != GC_ARG_FLOAT ||
        !isfinite(nd->a[9].f) || !isfinite(nd->a[10].f))
        return gc_rd_corrupt(r, "alpha / beta missing or not finite");
    if (!gc_unary_is_act((int)act))
        return gc_rd_corrupt(r, "not an activation");
    if (gc_mulok(m, k, &mk) < 0 || gc_mulok(k, n, &kn) < 0 || gc_mulok(m, n, &mn) < 0 ||
        span(batch, sa, mk, &na) < 0 || span(batch, sb, kn, &nb) < 0 ||
        span(batch, sc, mn, &nc) < 0)
        return gc_rd_corrupt(r, "sizes overflow");
    if (need(r, a, na) < 0 || need(r, b, nb) < 0 || need(r, c, nc) < 0 ||
        (bias && need(r, bias, n) < 0))
        return -1;
    const int64_t want[2][3] = {{m, k, ta}, {k, n, tb}};
    for (int i = 0; i < 2; i++) {
        const gc_marg *p = i ? b : a;
        if (p->tag == GC_ARG_PACKED &&
            (p->side != i || p->rows != want[i][0] || p->cols != want[i][1] ||
             p->trans != want[i][2] || p->swap == 2 || (batch > 1 && (i ? sb : sa) != 0)))
            return gc_rd_corrupt(r, "packed operand does not fit the product");
    }
    return 0;
}

/* it's operand o from a broadcast to out's shape (element strides). */
static int iter_operand(gc_rd *r, gc_iter *it, int o, const gc_marg *a, const gc_marg *out)
{
    if (a->ndim > out->ndim)
        return gc_rd_corrupt(r, "operand has more dims than the output");
    const int64_t isz = gc_dtype_size(a->dtype);
    for (int d = 0; d < out->ndim; d++) {
        const int da = d - (out->ndim - a->ndim);
        const int64_t n = da >= 0 ? a->shape[da] : 1;
        if (n != out->shape[d] && n != 1)
            return gc_rd_corrupt(r, "operand does not broadcast to the output");
        it->stride[o][d] = n == 1 ? 0 : a->strides[da] / isz;
    }
    return 0;
}

/* nd->it over out's shape with out as operand o (element strides); the other operands are set
 * by the caller (iter_operand).  iter_done then marks an empty node or collapses the nops
 * operands. */
static void iter_out(gc_mnode *nd, const gc_marg *out, int o)
{
    memset(&nd->it, 0, sizeof nd->it);
    nd->it.ndim = out->ndim ? out->ndim : 1;
    nd->it.shape[0] = 1;
    for (int d = 0; d < out->ndim; d++) {
        nd->it.shape[d] = out->shape[d];
        nd->it.stride[o][d] = out->strides[d] / gc_dtype_size(out->dtype);
    }
}

static int iter_done(gc_mnode *nd, const gc_marg *out, int nops)
{
    nd->empty = out->numel == 0;
    if (!nd->empty)
        gc_iter_collapse(&nd->it, nops);
    return 0;
}

static int check_binary(gc_rd *r, gc_mnode *nd)
{
    int64_t op;
    if (nd->nargs != 4 || ival(r, nd, 0, 0, GC_BINARY_COUNT - 1, &op) < 0)
        return gc_rd_corrupt(r, "bad binary node");
    BUF_OR_FAIL(a, 1, 0);
    BUF_OR_FAIL(b, 2, 0);
    BUF_OR_FAIL(out, 3, 0);
    if ((a->dtype != GC_DTYPE_FLOAT32 && a->dtype != GC_DTYPE_FLOAT64) || b->dtype != a->dtype ||
        out->dtype != (gc_binary_writes_bool((int)op) ? GC_DTYPE_BOOL : a->dtype) ||
        !out->contig || written(r, out) < 0)
        return gc_rd_corrupt(r, "bad binary operands");
    nd->f64 = a->dtype == GC_DTYPE_FLOAT64;
    iter_out(nd, out, 2);
    if (iter_operand(r, &nd->it, 0, a, out) < 0 || iter_operand(r, &nd->it, 1, b, out) < 0)
        return -1;
    return iter_done(nd, out, 3);
}

static int check_copy(gc_rd *r, gc_mnode *nd)
{
    if (nd->nargs != 2)
        return gc_rd_corrupt(r, "bad copy node");
    BUF_OR_FAIL(s, 0, 0);
    BUF_OR_FAIL(d, 1, 0);
    const int64_t isz = gc_dtype_size(s->dtype);
    int ok = s->ndim == d->ndim && isz == gc_dtype_size(d->dtype) && written(r, d) == 0;
    for (int i = 0; ok && i < s->ndim; i++)
        ok = s->shape[i] == d->shape[i];
    if (!ok)
        return gc_rd_corrupt(r, "copy between different shapes or item sizes");
    iter_out(nd, d, 1);
    for (int i = 0; i < s->ndim; i++)
        nd->it.stride[0][i] = s->strides[i] / isz;
    return iter_done(nd, d, 2);
}

/* The cast element type of a gc_dtype, or -1 (float16, bfloat16: no cast kernel). */
static int cast_elem(int dtype)
{
    switch (dtype) {
    case GC_DTYPE_BOOL: return GC_ELEM_BOOL;
    case GC_DTYPE_UINT8: return GC_ELEM_U8;
    case GC_DTYPE_INT8: return GC_ELEM_I8;
    case GC_DTYPE_INT32: return GC_ELEM_I32;
    case GC_DTYPE_INT64: return GC_ELEM_I64;
    case GC_DTYPE_FLOAT32: return GC_ELEM_F32;
    case GC_DTYPE_FLOAT64: return GC_ELEM_F64;
    case GC_DTYPE_INT16: return GC_ELEM_I16;
    default: return -1;
    }
}

static int check_cast(gc_rd *r, gc_mnode *nd)
{
    if (nd->nargs != 2)
        return gc_rd_corrupt(r, "bad cast node");
    BUF_OR_FAIL(s, 0, 0);
    BUF_OR_FAIL(d, 1, 0);
    const int st = cast_elem(s->dtype), dt = cast_elem(d->dtype);
    int ok = st >= 0 && dt >= 0 && s->ndim == d->ndim && written(r, d) == 0;
    for (int i = 0; ok && i < s->ndim; i++)
        ok = s->shape[i] == d->shape[i];
    if (!ok)
        return gc_rd_corrupt(r, "cast between different shapes or unsupported dtypes");
    if (d->numel > 0 && s->region == d->region && s->lo < d->hi && d->lo < s->hi)
        return gc_rd_corrupt(r, "cast between overlapping buffers");
    nd->cast[0] = (gc_elem)st;
    nd->cast[1] = (gc_elem)dt;
    iter_out(nd, d, 1);
    for (int i = 0; i < s->ndim; i++)
        nd->it.stride[0][i] = s->strides[i] / gc_dtype_size(s->dtype);
    return iter_done(nd, d, 2);
}

static int check_simple(gc_rd *r, gc_mnode *nd)
{
    int64_t op = -1, outer, n, inner, total, rows, flag;
    switch (nd->kind) {
    case GC_NK_UNARY: {
        if (nd->nargs != 3 || ival(r, nd, 0, 0, GC_UNARY_COUNT - 1, &op) < 0)
            return gc_rd_corrupt(r, "bad unary node");
        BUF_OR_FAIL(x, 1, 0);
        BUF_OR_FAIL(out, 2, 0);
        gc_marg *v[2] = {x, out};
        if (floats(r, nd, v, 2) < 0 || written(r, out) < 0)
            return -1;
        return x->numel == out->numel ? 0 : gc_rd_corrupt(r, "unary: sizes differ");
    }
    case GC_NK_REDUCE:
    case GC_NK_SOFTMAX: {
        const int red = nd->kind == GC_NK_REDUCE;
        if (nd->nargs != 6 || (red && ival(r, nd, 0, 0, GC_REDUCE_COUNT - 1, &op) < 0) ||
            (!red && ival(r, nd, 5, 0, 1, &flag) < 0))
            return gc_rd_corrupt(r, "bad reduce / softmax node");
        BUF_OR_FAIL(x, red ? 1 : 0, 0);
        BUF_OR_FAIL(out, red ? 2 : 1, 0);
        const int o = red ? 3 : 2;
        if (ival(r, nd, o, 0, GC_LIM, &outer) < 0 || ival(r, nd, o + 1, 0, GC_LIM, &n) < 0 ||
            ival(r, nd, o + 2, 0, GC_LIM, &inner) < 0 || gc_mulok(outer, inner, &rows) < 0 ||
            gc_mulok(rows, n, &total) < 0)
            return gc_rd_corrupt(r, "bad sizes");
        const int arg = red && (op == GC_REDUCE_ARGMAX || op == GC_REDUCE_ARGMIN);
        gc_marg *v[2] = {x, arg ? NULL : out};
        if (floats(r, nd, v, 2) < 0 || written(r, out) < 0 || need(r, x, total) < 0 ||
            need(r, out, red ? rows : total) < 0)
            return -1;
        if (arg && (out->dtype != GC_DTYPE_INT64 || !out->contig))
            return gc_rd_corrupt(r, "argmax / argmin write int64");
        if (red && n == 0 && rows > 0 && op != GC_REDUCE_SUM && op != GC_REDUCE_MEAN)
            return gc_rd_corrupt(r, "empty reduction");
        nd->empty = total == 0 && (!red || rows == 0);
        return 0;
    }
    case GC_NK_LAYER_NORM: {
        if (nd->nargs != 7)
            return gc_rd_corrupt(r, "bad layer_norm node");
        BUF_OR_FAIL(x, 0, 0);
        BUF_OR_FAIL(w, 1, 1);
        BUF_OR_FAIL(b, 2, 1);
        BUF_OR_FAIL(out, 3, 0);
        gc_marg *v[4] = {x, w, b, out};
        if (floats(r, nd, v, 4) < 0 || written(r, out) < 0 ||
            ival(r, nd, 4, 0, GC_LIM, &rows) < 0 ||
            ival(r, nd, 5, 0, GC_LIM, &n) < 0 || gc_mulok(rows, n, &total) < 0)
            return -1;
        if (nd->a[6].tag != GC_ARG_FLOAT || !(nd->a[6].f >= 0) || !isfinite(nd->a[6].f))
            return gc_rd_corrupt(r, "bad eps");
        if (need(r, x, total) < 0 || need(r, out, total) < 0 || (w && need(r, w, n) < 0) ||
            (b && need(r, b, n) < 0))
            return -1;
        nd->empty = total == 0;
        return 0;
    }
    default: return gc_rd_corrupt(r, "unknown node kind");
    }
}

static int check_conv_pool(gc_rd *r, gc_mnode *nd)
{
    int64_t g[14];
    if (nd->kind == GC_NK_CONV2D) {
        /* 17 arguments, or 19 with the epilogue (res or None, act -1 or relu) */
        if (nd->nargs != 17 && nd->nargs != 19)
            return gc_rd_corrupt(r, "bad conv2d node");
        BUF_OR_FAIL(x, 0, 0);
        BUF_OR_FAIL(w, 1, 2);
        BUF_OR_FAIL(bias, 2, 1);
        BUF_OR_FAIL(out, 3, 0);
        gc_marg *res = NULL;
        if (nd->nargs == 19) {
            BUF_OR_FAIL(rb, 17, 1);
            res = rb;
            if (nd->a[18].tag != GC_ARG_INT ||
                (nd->a[18].i != -1 && nd->a[18].i != GC_UNARY_RELU))
                return gc_rd_corrupt(r, "conv2d: act is not -1 or relu");
        }
        static const int64_t lo[13] = {0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1};
        for (int i = 0; i < 13; i++)
            if (ival(r, nd, 4 + i, lo[i], 1 << 24, &g[i]) < 0)
                return -1;
        gc_conv c = {g[0], g[1], g[2], g[3], g[4],  g[5], g[6],
                     g[7], g[8], g[9], g[10], g[11], 0,    0};
        const int64_t o = g[12];
        if (c.h + 2 * c.ph < c.dh * (c.kh - 1) + 1 || c.w + 2 * c.pw < c.dw * (c.kw - 1) + 1)
            return gc_rd_corrupt(r, "conv2d: the window is larger than the padded input");
        c.oh = (c.h + 2 * c.ph - c.dh * (c.kh - 1) - 1) / c.sh + 1;
        c.ow = (c.w + 2 * c.pw - c.dw * (c.kw - 1) - 1) / c.sw + 1;
        int64_t nx, nw, no, t;
        gc_marg *v[5] = {x, w, bias, out, res};
        if (floats(r, nd, v, 5) < 0 || written(r, out) < 0 ||
            gc_mulok(c.n * c.c, c.h * c.w, &nx) < 0 ||
            gc_mulok(o * c.c, c.kh * c.kw, &nw) < 0 || gc_mulok(c.n * o, c.oh, &t) < 0 ||
            gc_mulok(t, c.ow, &no) < 0)
            return gc_rd_corrupt(r, "conv2d: bad sizes");
        if (need(r, x, nx) < 0 || need(r, w, nw) < 0 || need(r, out, no) < 0 ||
            (bias && need(r, bias, o) < 0) || (res && need(r, res, no) < 0))
            return -1;
        if (w->tag == GC_ARG_PACKED &&
            (w->side != 0 || w->rows != o || w->cols != nw / o || w->trans != 0 ||
             (w->swap == 2 &&
              (w->dtype != GC_DTYPE_FLOAT32 || !gc_conv2d_winograd_fits(&c, (ptrdiff_t)o)))))
            return gc_rd_corrupt(r, "conv2d: packed weight does not fit");
        nd->cv = c;
        nd->empty = no == 0;
        return 0;
    }
    if (nd->nargs != 16)
        return gc_rd_corrupt(r, "bad max_pool2d node");
    BUF_OR_FAIL(x, 0, 0);
    BUF_OR_FAIL(vals, 1, 0);
    BUF_OR_FAIL(idx, 2, 1); /* NONE: the values only */
    static const int64_t lo[13] = {0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1};
    for (int i = 0; i < 13; i++)
        if (ival(r, nd, 3 + i, lo[i], 1 << 24, &g[i]) < 0)
            return -1;
    gc_pool2d p = {g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12]};
    int64_t nin, nout;
    gc_marg *v[2] = {x, vals};
    if (floats(r, nd, v, 2) < 0 || written(r, vals) < 0 || (idx && written(r, idx) < 0) ||
        gc_mulok(p.planes, p.h * p.w, &nin) < 0 || gc_mulok(p.planes, p.oh * p.ow, &nout) < 0)
        return gc_rd_corrupt(r, "max_pool2d: bad sizes");
    if (idx && (idx->dtype != GC_DTYPE_INT64 || !idx->contig))
        return gc_rd_corrupt(r, "max_pool2d: idx must be contiguous int64");
    if (need(r, x, nin) < 0 || need(r, vals, nout) < 0 || (idx && need(r, idx, nout) < 0))
        return -1;
    nd->pl = p;
    nd->empty = nout == 0;
    return 0;
}

static int check_where(gc_rd *r, gc_mnode *nd)
{
    if (nd->nargs != 4)
        return gc_rd_corrupt(r, "bad where node");
    BUF_OR_FAIL(c, 0, 0);
    BUF_OR_FAIL(a, 1, 0);
    BUF_OR_FAIL(b, 2, 0);
    BUF_OR_FAIL(out, 3, 0);
    if (c->dtype != GC_DTYPE_BOOL ||
        (a->dtype != GC_DTYPE_FLOAT32 && a->dtype != GC_DTYPE_FLOAT64) || b->dtype != a->dtype ||
        out->dtype != a->dtype || !out->contig || written(r, out) < 0)
        return gc_rd_corrupt(r, "bad where operands");
    iter_out(nd, out, 3);
    if (iter_operand(r, &nd->it, 0, c, out) < 0 || iter_operand(r, &nd->it, 1, a, out) < 0 ||
        iter_operand(r, &nd->it, 2, b, out) < 0)
        return -1;
    return iter_done(nd, out, 4);
}

/* attention's rules (cpu/python/attention.c): 4-d q [B|1, H|1, Sq, D], k [.., Skv, D],
 * v [.., Skv, Dv], out [B, H, Sq, Dv] of any strides, out's elements distinct; mask None,
 * bool or q's float type, at most 4 dims broadcast to [B, H, Sq, Skv]. */
static void elem_strides(const gc_marg *a, ptrdiff_t *s)
{
    for (int d = 0; d < 4; d++)
        s[d] = a->shape[d] == 1 ? 0 : (ptrdiff_t)(a->strides[d] / gc_dtype_size(a->dtype));
}

static int distinct(const gc_marg *a)
{
    int64_t st[4], n[4];
    int k = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] == 0)
            return 1;
        if (a->shape[d] > 1) {
            st[k] = a->strides[d] < 0 ? -a->strides[d] : a->strides[d];
            n[k++] = a->shape[d];
        }
    }
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && st[j] < st[j - 1]; j--) {
            int64_t t = st[j];
            st[j] = st[j - 1];
            st[j - 1] = t;
            t = n[j];
            n[j] = n[j - 1];
            n[j - 1] = t;
        }
    int64_t span = gc_dtype_size(a->dtype);
    for (int i = 0; i < k; i++) {
        if (st[i] < span)
            return 0;
        span = st[i] * (n[i] - 1) + span;
    }
    return 1;
}

static int check_attention(gc_rd *r, gc_mnode *nd)
{
    int64_t causal, algo;
    if (nd->nargs != 8 || nd->a[5].tag != GC_ARG_FLOAT || !isfinite(nd->a[5].f) ||
        ival(r, nd, 6, 0, 1, &causal) < 0 || ival(r, nd, 7, 0, 2, &algo) < 0)
        return gc_rd_corrupt(r, "bad attention node");
    BUF_OR_FAIL(q, 0, 0);
    BUF_OR_FAIL(k, 1, 0);
    BUF_OR_FAIL(v, 2, 0);
    BUF_OR_FAIL(mask, 3, 1);
    BUF_OR_FAIL(out, 4, 0);
    const int dt = q->dtype;
    if ((dt != GC_DTYPE_FLOAT32 && dt != GC_DTYPE_FLOAT64) || k->dtype != dt || v->dtype != dt ||
        out->dtype != dt || written(r, out) < 0 ||
        (mask && mask->dtype != GC_DTYPE_BOOL && mask->dtype != dt))
        return gc_rd_corrupt(r, "attention: bad dtypes");
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || out->ndim != 4 || (mask && mask->ndim > 4))
        return gc_rd_corrupt(r, "attention: q, k, v and out must be 4-d");
    const int64_t bb = out->shape[0], hh = out->shape[1], sq = out->shape[2];
    const int64_t dv = out->shape[3], d = q->shape[3], skv = k->shape[2];
    const gc_marg *qkv[3] = {q, k, v};
    const int64_t s2[3] = {sq, skv, skv}, s3[3] = {d, d, dv};
    for (int i = 0; i < 3; i++) {
        const gc_marg *a = qkv[i];
        if ((a->shape[0] != bb && a->shape[0] != 1) || (a->shape[1] != hh && a->shape[1] != 1) ||
            a->shape[2] != s2[i] || a->shape[3] != s3[i])
            return gc_rd_corrupt(r, "attention: q, k, v and out do not fit together");
    }
    gc_attn p = {.b = bb, .h = hh, .sq = sq, .skv = skv, .d = d, .dv = dv, .causal = (int)causal,
                 .algo = (int)algo, .scale = nd->a[5].f};
    p.mask_kind = !mask ? GC_ATTN_MASK_NONE
                  : mask->dtype == GC_DTYPE_BOOL ? GC_ATTN_MASK_BOOL
                                                 : GC_ATTN_MASK_FLOAT;
    elem_strides(q, p.qs);
    elem_strides(k, p.ks);
    elem_strides(v, p.vs);
    elem_strides(out, p.os);
    if (mask) {
        const int64_t target[4] = {bb, hh, sq, skv};
        for (int dd = 0; dd < 4; dd++) {
            const int md = dd - (4 - mask->ndim);
            p.ms[dd] = 0;
            if (md < 0)
                continue;
            const int64_t n = mask->shape[md];
            if (n != target[dd] && n != 1)
                return gc_rd_corrupt(r, "attention: mask does not broadcast");
            if (n > 1)
                p.ms[dd] = (ptrdiff_t)(mask->strides[md] / gc_dtype_size(mask->dtype));
        }
    }
    if (!distinct(out))
        return gc_rd_corrupt(r, "attention: out's elements overlap");
    if (out->numel == 0)
        p.b = 0;
    nd->at = p;
    nd->f64 = dt == GC_DTYPE_FLOAT64;
    return 0;
}

static int check_io(gc_rd *r, const gc_model *m, gc_mnode *nd)
{
    const int in = nd->kind == GC_NK_INPUT;
    int64_t k;
    if (nd->nargs != 2 || ival(r, nd, 0, 0, (in ? m->n_in : m->n_out) - 1, &k) < 0)
        return gc_rd_corrupt(r, "bad input / output node");
    BUF_OR_FAIL(b, 1, 0);
    const gc_mio *io = in ? &m->in[k] : &m->out[k];
    if (!b->contig || b->dtype != io->dtype ||
        (size_t)b->numel * (size_t)gc_dtype_size(b->dtype) != io->nbytes ||
        (in && written(r, b) < 0))
        return gc_rd_corrupt(r, "input / output buffer does not match its declaration");
    return 0;
}

/* Packs the node's packed constants (as gemm_pack does, for the ISA in use). */
static int pack_node(gc_rd *r, const gc_model *m, gc_mnode *nd)
{
    const int first = nd->kind == GC_NK_CONV2D ? 1 : 0, last = 1;
    if (nd->kind != GC_NK_GEMM && nd->kind != GC_NK_GEMM_EX && nd->kind != GC_NK_CONV2D)
        return 0;
    for (int i = first; i <= last; i++) {
        const gc_marg *a = &nd->a[i];
        if (a->tag != GC_ARG_PACKED)
            continue;
        const char kind = a->dtype == GC_DTYPE_FLOAT64 ? 'd' : 'f';
        gc_packed *p = calloc(1, sizeof *p);
        if (!p || gc_gemm_pack_init(p, kind, a->side, a->rows, a->cols, a->trans, a->swap) < 0 ||
            posix_memalign(&p->data, 64,
                           (size_t)(p->elems > 0 ? p->elems : 1) * (kind == 'd' ? 8 : 4)) != 0) {
            free(p);
            return gc_fail(r->err, GC_ERR_OUT_OF_MEMORY,
                           "gc_model_load: out of memory for a packed weight");
        }
        const void *src = (const char *)m->consts[a->region] + a->off;
        if (kind == 'd')
            gc_gemm_pack_f64(src, p);
        else
            gc_gemm_pack_f32(src, p);
        nd->pk[nd->kind == GC_NK_CONV2D ? 0 : i] = p;
    }
    return 0;
}

/* gather's rules (cpu/python/gather.c): x, index (int64) and out of x's ndim, out's shape the
 * index's and at most x's size in every dim but dim; x and out of one item size; out in the
 * arena, apart from x and index.  Index values are checked by the kernel at each run. */
static int check_gather(gc_rd *r, gc_mnode *nd)
{
    int64_t dim;
    if (nd->nargs != 4)
        return gc_rd_corrupt(r, "bad gather node");
    BUF_OR_FAIL(x, 0, 0);
    BUF_OR_FAIL(ix, 1, 0);
    BUF_OR_FAIL(out, 2, 0);
    if (ival(r, nd, 3, 0, x->ndim - 1, &dim) < 0)
        return -1;
    const int64_t isz = gc_dtype_size(x->dtype);
    int ok = ix->dtype == GC_DTYPE_INT64 && gc_dtype_size(out->dtype) == isz &&
             x->ndim == ix->ndim && ix->ndim == out->ndim && written(r, out) == 0;
    for (int d = 0; ok && d < x->ndim; d++)
        ok = ix->shape[d] == out->shape[d] && (d == dim || ix->shape[d] <= x->shape[d]);
    if (!ok)
        return gc_rd_corrupt(r, "gather: operands do not fit together");
    /* out must not share bytes with an input the planner placed in the same region */
    const gc_marg *in[2] = {x, ix};
    for (int i = 0; i < 2; i++)
        if (in[i]->region == out->region && in[i]->lo < out->hi && out->lo < in[i]->hi)
            return gc_rd_corrupt(r, "gather: out overlaps an input");
    iter_out(nd, out, 2);
    for (int d = 0; d < out->ndim; d++) {
        const int live = out->shape[d] > 1;
        nd->it.stride[0][d] = live && d != dim ? x->strides[d] / isz : 0;
        nd->it.stride[1][d] = live ? ix->strides[d] / 8 : 0;
    }
    nd->gx[0] = x->strides[dim] / isz;
    nd->gx[1] = x->shape[dim];
    return iter_done(nd, out, 3);
}

/* im2col's rules (cpu/python/im2col.c): x [n, c, h, w] and col [n, c*kh*kw, oh*ow] contiguous
 * floats of one dtype, the window no larger than the padded input. */
static int check_im2col(gc_rd *r, gc_mnode *nd)
{
    int64_t g[12];
    if (nd->nargs != 14)
        return gc_rd_corrupt(r, "bad im2col node");
    BUF_OR_FAIL(x, 0, 0);
    BUF_OR_FAIL(col, 1, 0);
    static const int64_t lo[12] = {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1};
    for (int i = 0; i < 12; i++)
        if (ival(r, nd, 2 + i, lo[i], 1 << 24, &g[i]) < 0)
            return -1;
    gc_conv c = {g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], 0, 0};
    if (c.h + 2 * c.ph < c.dh * (c.kh - 1) + 1 || c.w + 2 * c.pw < c.dw * (c.kw - 1) + 1)
        return gc_rd_corrupt(r, "im2col: the window is larger than the padded input");
    c.oh = (c.h + 2 * c.ph - c.dh * (c.kh - 1) - 1) / c.sh + 1;
    c.ow = (c.w + 2 * c.pw - c.dw * (c.kw - 1) - 1) / c.sw + 1;
    int64_t nx, rows, t, ncol;
    gc_marg *v[2] = {x, col};
    if (floats(r, nd, v, 2) < 0 || written(r, col) < 0 ||
        gc_mulok(c.n * c.c, c.h * c.w, &nx) < 0 || gc_mulok(c.c, c.kh * c.kw, &rows) < 0 ||
        gc_mulok(c.n * rows, c.oh, &t) < 0 || gc_mulok(t, c.ow, &ncol) < 0)
        return gc_rd_corrupt(r, "im2col: bad sizes");
    if (need(r, x, nx) < 0 || need(r, col, ncol) < 0)
        return -1;
    nd->cv = c;
    nd->empty = ncol == 0;
    return 0;
}

int gc_mnode_check(gc_rd *r, const gc_model *m, gc_mnode *nd)
{
    int ok;
    switch (nd->kind) {
    case GC_NK_INPUT:
    case GC_NK_OUTPUT: ok = check_io(r, m, nd); break;
    case GC_NK_GEMM:
    case GC_NK_GEMM_EX: ok = check_gemm(r, nd); break;
    case GC_NK_BINARY: ok = check_binary(r, nd); break;
    case GC_NK_COPY: ok = check_copy(r, nd); break;
    case GC_NK_CAST: ok = check_cast(r, nd); break;
    case GC_NK_CONV2D:
    case GC_NK_MAX_POOL2D: ok = check_conv_pool(r, nd); break;
    case GC_NK_ATTENTION: ok = check_attention(r, nd); break;
    case GC_NK_WHERE: ok = check_where(r, nd); break;
    case GC_NK_GATHER: ok = check_gather(r, nd); break;
    case GC_NK_IM2COL: ok = check_im2col(r, nd); break;
    case GC_NK_QUANTIZE_U8:
    case GC_NK_DEQUANTIZE_U8:
    case GC_NK_QGEMM:
    case GC_NK_QCONV2D:
    case GC_NK_MAX_POOL2D_U8:
    case GC_NK_QUANTIZE_LINEAR_U8:
    case GC_NK_DYNAMIC_QUANTIZE_U8:
    case GC_NK_DYNAMIC_QUANTIZE_TORCH_U8:
    case GC_NK_QGEMM_DYNAMIC: return gc_qnode_check(r, m, nd);
    default: ok = check_simple(r, nd); break;
    }
    return ok == 0 ? pack_node(r, m, nd) : ok;
}

/* libgpucore: loading a deployed model's program (see model.h, gpucore/runtime/c_program.py).
 *
 * Every number of the file is checked before it is used: counts against limits, every buffer
 * argument's reach (shape and strides) against its region (the arena or a constant), every
 * node's sizes as its Python binding checks them (cpu/python/<family>.c), so that no run can
 * read or write outside the memory the model owns.  Anything else is GC_ERR_FORMAT. */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */

#include "isa.h"
#include "model.h"
#include "stfile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC 0x67637072
#define VERSION 1
#define LIM ((int64_t)1 << 40) /* any size, stride or byte count */

typedef struct {
    const int64_t *w;
    int64_t n, i;
    const char *path;
    int node;
    gc_error *err;
} rd;

static const char *kind_name(int k)
{
    static const char *const names[] = {"?",       "input",  "output",  "gemm",
                                        "gemm_ex", "unary",  "binary",  "reduce",
                                        "softmax", "copy",   "conv2d_forward",
                                        "max_pool2d", "layer_norm", "attention", "where"};
    return k > 0 && k < GC_NK_END ? names[k] : "?";
}

static int corrupt(rd *r, const char *what)
{
    if (r->node >= 0)
        return gc_fail(r->err, GC_ERR_FORMAT, "gc_model_load: %s: corrupt program: node %d: %s",
                       r->path, r->node, what);
    return gc_fail(r->err, GC_ERR_FORMAT, "gc_model_load: %s: corrupt program (word %lld): %s",
                   r->path, (long long)r->i, what);
}

static int next(rd *r, int64_t lo, int64_t hi, int64_t *v, const char *what)
{
    if (r->i >= r->n)
        return corrupt(r, "ends early");
    *v = r->w[r->i++];
    if (*v < lo || *v > hi)
        return corrupt(r, what);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Arguments                                                                                   */

/* A packed constant: region (a constant), byte offset, dtype, side, rows, cols, trans, swap;
 * its rows * cols elements from the offset lie inside the constant. */
static int read_packed(rd *r, const gc_model *m, gc_marg *a)
{
    int64_t region, dt, side, trans, swap;
    if (next(r, 0, m->n_consts - 1, &region, "bad packed operand region") < 0 ||
        next(r, 0, LIM, &a->off, "bad packed operand offset") < 0 ||
        next(r, GC_DTYPE_FLOAT32, GC_DTYPE_FLOAT64, &dt, "bad packed operand dtype") < 0 ||
        next(r, 0, 1, &side, "bad packed operand side") < 0 ||
        next(r, 0, LIM, &a->rows, "bad packed operand rows") < 0 ||
        next(r, 0, LIM, &a->cols, "bad packed operand cols") < 0 ||
        next(r, 0, 1, &trans, "bad packed operand trans") < 0 ||
        next(r, 0, 1, &swap, "bad packed operand swap") < 0)
        return -1;
    a->region = (int)region;
    a->dtype = (int)dt;
    a->side = (int)side;
    a->trans = (int)trans;
    a->swap = (int)swap;
    const int64_t isz = gc_dtype_size(a->dtype);
    if (a->cols && a->rows > LIM / a->cols)
        return corrupt(r, "packed operand too large");
    a->numel = a->rows * a->cols;
    a->ndim = 1;
    a->shape[0] = a->numel;
    a->strides[0] = isz;
    a->contig = 1;
    if (a->off % isz || a->off + a->numel * isz > m->const_bytes[a->region])
        return corrupt(r, "packed operand outside its constant, or misaligned");
    return 0;
}

static int read_arg(rd *r, const gc_model *m, gc_marg *a)
{
    int64_t v;
    memset(a, 0, sizeof *a);
    if (next(r, GC_ARG_NONE, GC_ARG_PACKED, &v, "unknown argument tag") < 0)
        return -1;
    a->tag = (int)v;
    if (a->tag == GC_ARG_INT)
        return next(r, -LIM, LIM, &a->i, "integer out of range");
    if (a->tag == GC_ARG_FLOAT) {
        if (next(r, INT64_MIN, INT64_MAX, &v, "") < 0)
            return -1;
        memcpy(&a->f, &v, sizeof a->f);
        return 0;
    }
    if (a->tag == GC_ARG_PACKED)
        return read_packed(r, m, a);
    if (a->tag != GC_ARG_BUF)
        return 0;
    int64_t region, dt, nd;
    if (next(r, -1, m->n_consts - 1, &region, "bad buffer region") < 0 ||
        next(r, -LIM, LIM, &a->off, "bad buffer offset") < 0 ||
        next(r, 0, GC_DTYPE_FLOAT64, &dt, "bad buffer dtype") < 0 ||
        next(r, 0, GC_MAX_NDIM, &nd, "bad buffer ndim") < 0)
        return -1;
    a->region = (int)region;
    a->dtype = (int)dt;
    a->ndim = (int)nd;
    const int64_t isz = gc_dtype_size(a->dtype);
    a->numel = 1;
    for (int d = 0; d < a->ndim; d++) {
        if (next(r, 0, LIM, &a->shape[d], "bad buffer size") < 0)
            return -1;
        a->numel = a->numel > LIM / (a->shape[d] ? a->shape[d] : 1) ? LIM + 1
                                                                     : a->numel * a->shape[d];
    }
    if (a->numel > LIM)
        return corrupt(r, "buffer too large");
    for (int d = 0; d < a->ndim; d++)
        if (next(r, -LIM, LIM, &a->strides[d], "bad buffer stride") < 0)
            return -1;
    /* the reach: [off + lo, off + hi + itemsize) inside the region; aligned item by item */
    const int64_t size = a->region < 0 ? m->arena_bytes : m->const_bytes[a->region];
    int64_t lo = 0, hi = 0, expect = isz;
    a->contig = 1;
    for (int d = a->ndim - 1; d >= 0; d--) {
        const int64_t n = a->shape[d], s = a->strides[d];
        if (n > 1 && s % isz)
            return corrupt(r, "buffer stride not a multiple of its item size");
        if (n > 1 && s != expect)
            a->contig = 0;
        expect *= n ? n : 1;
        if (n > 0 && s != 0) {
            if ((s > 0 ? s : -s) > LIM / n)
                return corrupt(r, "buffer reach too large");
            if (s > 0)
                hi += (n - 1) * s;
            else
                lo += (n - 1) * s;
        }
    }
    if (a->numel > 0 && (a->off + lo < 0 || a->off + hi + isz > size || a->off % isz))
        return corrupt(r, "buffer outside its region, or misaligned");
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Node checks (the bindings' rules)                                                           */

static gc_marg *buf(rd *r, gc_mnode *nd, int i, int none_ok)
{
    gc_marg *a = &nd->a[i];
    if (a->tag == GC_ARG_PACKED && none_ok == 2)
        return a; /* a packed operand where the node allows one */
    if (a->tag == GC_ARG_BUF || (none_ok == 1 && a->tag == GC_ARG_NONE))
        return a->tag == GC_ARG_BUF ? a : NULL;
    corrupt(r, "argument is not a buffer");
    return (gc_marg *)r; /* sentinel: error (never dereferenced) */
}

#define BUF_OR_FAIL(var, i, none_ok)                                                            \
    gc_marg *var = buf(r, nd, i, none_ok);                                                      \
    if ((void *)var == (void *)r)                                                               \
        return -1;

static int ival(rd *r, gc_mnode *nd, int i, int64_t lo, int64_t hi, int64_t *v)
{
    if (nd->a[i].tag != GC_ARG_INT || nd->a[i].i < lo || nd->a[i].i > hi)
        return corrupt(r, "integer argument missing or out of range");
    *v = nd->a[i].i;
    return 0;
}

/* Float buffers of one dtype, contiguous (NULL entries skipped); sets nd->f64. */
static int floats(rd *r, gc_mnode *nd, gc_marg *const *v, int n)
{
    int dt = -1;
    for (int i = 0; i < n; i++) {
        if (!v[i])
            continue;
        if (v[i]->dtype != GC_DTYPE_FLOAT32 && v[i]->dtype != GC_DTYPE_FLOAT64)
            return corrupt(r, "buffer is not float32 / float64");
        if (dt >= 0 && v[i]->dtype != dt)
            return corrupt(r, "buffers of different dtypes");
        if (!v[i]->contig)
            return corrupt(r, "buffer not contiguous");
        dt = v[i]->dtype;
    }
    nd->f64 = dt == GC_DTYPE_FLOAT64;
    return 0;
}

static int written(rd *r, const gc_marg *a)
{
    return a->region < 0 ? 0 : corrupt(r, "writes a constant");
}

static int need(rd *r, const gc_marg *a, int64_t n)
{
    return a->numel >= n ? 0 : corrupt(r, "buffer holds too few elements");
}

static int mulok(int64_t a, int64_t b, int64_t *out)
{
    if (a > 0 && b > LIM / a)
        return -1;
    *out = a * b;
    return 0;
}

/* (batch - 1) * s + mn elements, or 0 when nothing is touched. */
static int span(int64_t batch, int64_t s, int64_t mn, int64_t *out)
{
    int64_t t;
    *out = 0;
    if (batch == 0 || mn == 0)
        return 0;
    if (mulok(batch - 1, s, &t) < 0 || t > LIM - mn)
        return -1;
    *out = t + mn;
    return 0;
}

static int check_gemm(rd *r, gc_mnode *nd)
{
    const int ex = nd->kind == GC_NK_GEMM_EX;
    if (nd->nargs != (ex ? 16 : 14))
        return corrupt(r, "wrong argument count");
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
    if (floats(r, nd, v, 4) < 0 || written(r, c) < 0 || ival(r, nd, 3, 0, LIM, &batch) < 0 ||
        ival(r, nd, 4, 0, LIM, &m) < 0 || ival(r, nd, 5, 0, LIM, &n) < 0 ||
        ival(r, nd, 6, 0, LIM, &k) < 0 || ival(r, nd, 7, 0, 1, &ta) < 0 ||
        ival(r, nd, 8, 0, 1, &tb) < 0 || ival(r, nd, 11, 0, LIM, &sa) < 0 ||
        ival(r, nd, 12, 0, LIM, &sb) < 0 || ival(r, nd, 13, 0, LIM, &sc) < 0 ||
        (ex && ival(r, nd, 15, -1, GC_UNARY_COUNT - 1, &act) < 0))
        return -1;
    if (nd->a[9].tag != GC_ARG_FLOAT || nd->a[10].tag != GC_ARG_FLOAT ||
        !isfinite(nd->a[9].f) || !isfinite(nd->a[10].f))
        return corrupt(r, "alpha / beta missing or not finite");
    if (!gc_unary_is_act((int)act))
        return corrupt(r, "not an activation");
    if (mulok(m, k, &mk) < 0 || mulok(k, n, &kn) < 0 || mulok(m, n, &mn) < 0 ||
        span(batch, sa, mk, &na) < 0 || span(batch, sb, kn, &nb) < 0 ||
        span(batch, sc, mn, &nc) < 0)
        return corrupt(r, "sizes overflow");
    if (need(r, a, na) < 0 || need(r, b, nb) < 0 || need(r, c, nc) < 0 ||
        (bias && need(r, bias, n) < 0))
        return -1;
    const int64_t want[2][3] = {{m, k, ta}, {k, n, tb}};
    for (int i = 0; i < 2; i++) {
        const gc_marg *p = i ? b : a;
        if (p->tag == GC_ARG_PACKED &&
            (p->side != i || p->rows != want[i][0] || p->cols != want[i][1] ||
             p->trans != want[i][2] || (batch > 1 && (i ? sb : sa) != 0)))
            return corrupt(r, "packed operand does not fit the product");
    }
    return 0;
}

/* it's operand o from a broadcast to out's shape (element strides). */
static int iter_operand(rd *r, gc_iter *it, int o, const gc_marg *a, const gc_marg *out)
{
    if (a->ndim > out->ndim)
        return corrupt(r, "operand has more dims than the output");
    const int64_t isz = gc_dtype_size(a->dtype);
    for (int d = 0; d < out->ndim; d++) {
        const int da = d - (out->ndim - a->ndim);
        const int64_t n = da >= 0 ? a->shape[da] : 1;
        if (n != out->shape[d] && n != 1)
            return corrupt(r, "operand does not broadcast to the output");
        it->stride[o][d] = n == 1 ? 0 : a->strides[da] / isz;
    }
    return 0;
}

static int check_binary(rd *r, gc_mnode *nd)
{
    int64_t op;
    if (nd->nargs != 4 || ival(r, nd, 0, 0, GC_BINARY_COUNT - 1, &op) < 0)
        return corrupt(r, "bad binary node");
    BUF_OR_FAIL(a, 1, 0);
    BUF_OR_FAIL(b, 2, 0);
    BUF_OR_FAIL(out, 3, 0);
    if ((a->dtype != GC_DTYPE_FLOAT32 && a->dtype != GC_DTYPE_FLOAT64) || b->dtype != a->dtype ||
        out->dtype != (gc_binary_writes_bool((int)op) ? GC_DTYPE_BOOL : a->dtype) ||
        !out->contig || written(r, out) < 0)
        return corrupt(r, "bad binary operands");
    nd->f64 = a->dtype == GC_DTYPE_FLOAT64;
    memset(&nd->it, 0, sizeof nd->it);
    nd->it.ndim = out->ndim ? out->ndim : 1;
    nd->it.shape[0] = 1;
    for (int d = 0; d < out->ndim; d++) {
        nd->it.shape[d] = out->shape[d];
        nd->it.stride[2][d] = out->strides[d] / gc_dtype_size(out->dtype);
    }
    if (iter_operand(r, &nd->it, 0, a, out) < 0 || iter_operand(r, &nd->it, 1, b, out) < 0)
        return -1;
    nd->empty = out->numel == 0;
    if (!nd->empty)
        gc_iter_collapse(&nd->it, 3);
    return 0;
}

static int check_copy(rd *r, gc_mnode *nd)
{
    if (nd->nargs != 2)
        return corrupt(r, "bad copy node");
    BUF_OR_FAIL(s, 0, 0);
    BUF_OR_FAIL(d, 1, 0);
    const int64_t isz = gc_dtype_size(s->dtype);
    int ok = s->ndim == d->ndim && isz == gc_dtype_size(d->dtype) && written(r, d) == 0;
    for (int i = 0; ok && i < s->ndim; i++)
        ok = s->shape[i] == d->shape[i];
    if (!ok)
        return corrupt(r, "copy between different shapes or item sizes");
    memset(&nd->it, 0, sizeof nd->it);
    nd->it.ndim = s->ndim ? s->ndim : 1;
    nd->it.shape[0] = 1;
    for (int i = 0; i < s->ndim; i++) {
        nd->it.shape[i] = s->shape[i];
        nd->it.stride[0][i] = s->strides[i] / isz;
        nd->it.stride[1][i] = d->strides[i] / isz;
    }
    nd->empty = s->numel == 0;
    if (!nd->empty)
        gc_iter_collapse(&nd->it, 2);
    return 0;
}

static int check_simple(rd *r, gc_mnode *nd)
{
    int64_t op, outer, n, inner, total, rows, flag;
    switch (nd->kind) {
    case GC_NK_UNARY: {
        if (nd->nargs != 3 || ival(r, nd, 0, 0, GC_UNARY_COUNT - 1, &op) < 0)
            return corrupt(r, "bad unary node");
        BUF_OR_FAIL(x, 1, 0);
        BUF_OR_FAIL(out, 2, 0);
        gc_marg *v[2] = {x, out};
        if (floats(r, nd, v, 2) < 0 || written(r, out) < 0)
            return -1;
        return x->numel == out->numel ? 0 : corrupt(r, "unary: sizes differ");
    }
    case GC_NK_REDUCE:
    case GC_NK_SOFTMAX: {
        const int red = nd->kind == GC_NK_REDUCE;
        if (nd->nargs != 6 || (red && ival(r, nd, 0, 0, GC_REDUCE_COUNT - 1, &op) < 0) ||
            (!red && ival(r, nd, 5, 0, 1, &flag) < 0))
            return corrupt(r, "bad reduce / softmax node");
        BUF_OR_FAIL(x, red ? 1 : 0, 0);
        BUF_OR_FAIL(out, red ? 2 : 1, 0);
        const int o = red ? 3 : 2;
        if (ival(r, nd, o, 0, LIM, &outer) < 0 || ival(r, nd, o + 1, 0, LIM, &n) < 0 ||
            ival(r, nd, o + 2, 0, LIM, &inner) < 0 || mulok(outer, inner, &rows) < 0 ||
            mulok(rows, n, &total) < 0)
            return corrupt(r, "bad sizes");
        const int arg = red && (op == GC_REDUCE_ARGMAX || op == GC_REDUCE_ARGMIN);
        gc_marg *v[2] = {x, arg ? NULL : out};
        if (floats(r, nd, v, 2) < 0 || written(r, out) < 0 || need(r, x, total) < 0 ||
            need(r, out, red ? rows : total) < 0)
            return -1;
        if (arg && (out->dtype != GC_DTYPE_INT64 || !out->contig))
            return corrupt(r, "argmax / argmin write int64");
        if (red && n == 0 && rows > 0 && op != GC_REDUCE_SUM && op != GC_REDUCE_MEAN)
            return corrupt(r, "empty reduction");
        nd->empty = total == 0 && (!red || rows == 0);
        return 0;
    }
    case GC_NK_LAYER_NORM: {
        if (nd->nargs != 7)
            return corrupt(r, "bad layer_norm node");
        BUF_OR_FAIL(x, 0, 0);
        BUF_OR_FAIL(w, 1, 1);
        BUF_OR_FAIL(b, 2, 1);
        BUF_OR_FAIL(out, 3, 0);
        gc_marg *v[4] = {x, w, b, out};
        if (floats(r, nd, v, 4) < 0 || written(r, out) < 0 || ival(r, nd, 4, 0, LIM, &rows) < 0 ||
            ival(r, nd, 5, 0, LIM, &n) < 0 || mulok(rows, n, &total) < 0)
            return -1;
        if (nd->a[6].tag != GC_ARG_FLOAT || !(nd->a[6].f >= 0) || !isfinite(nd->a[6].f))
            return corrupt(r, "bad eps");
        if (need(r, x, total) < 0 || need(r, out, total) < 0 || (w && need(r, w, n) < 0) ||
            (b && need(r, b, n) < 0))
            return -1;
        nd->empty = total == 0;
        return 0;
    }
    default: return corrupt(r, "unknown node kind");
    }
}

static int check_conv_pool(rd *r, gc_mnode *nd)
{
    int64_t g[14];
    if (nd->kind == GC_NK_CONV2D) {
        if (nd->nargs != 17)
            return corrupt(r, "bad conv2d node");
        BUF_OR_FAIL(x, 0, 0);
        BUF_OR_FAIL(w, 1, 2);
        BUF_OR_FAIL(bias, 2, 1);
        BUF_OR_FAIL(out, 3, 0);
        static const int64_t lo[13] = {0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1};
        for (int i = 0; i < 13; i++)
            if (ival(r, nd, 4 + i, lo[i], 1 << 24, &g[i]) < 0)
                return -1;
        gc_conv c = {g[0], g[1], g[2], g[3], g[4],  g[5], g[6],
                     g[7], g[8], g[9], g[10], g[11], 0,    0};
        const int64_t o = g[12];
        if (c.h + 2 * c.ph < c.dh * (c.kh - 1) + 1 || c.w + 2 * c.pw < c.dw * (c.kw - 1) + 1)
            return corrupt(r, "conv2d: the window is larger than the padded input");
        c.oh = (c.h + 2 * c.ph - c.dh * (c.kh - 1) - 1) / c.sh + 1;
        c.ow = (c.w + 2 * c.pw - c.dw * (c.kw - 1) - 1) / c.sw + 1;
        int64_t nx, nw, no, t;
        gc_marg *v[4] = {x, w, bias, out};
        if (floats(r, nd, v, 4) < 0 || written(r, out) < 0 ||
            mulok(c.n * c.c, c.h * c.w, &nx) < 0 ||
            mulok(o * c.c, c.kh * c.kw, &nw) < 0 || mulok(c.n * o, c.oh, &t) < 0 ||
            mulok(t, c.ow, &no) < 0)
            return corrupt(r, "conv2d: bad sizes");
        if (need(r, x, nx) < 0 || need(r, w, nw) < 0 || need(r, out, no) < 0 ||
            (bias && need(r, bias, o) < 0))
            return -1;
        if (w->tag == GC_ARG_PACKED &&
            (w->side != 0 || w->rows != o || w->cols != nw / o || w->trans != 0))
            return corrupt(r, "conv2d: packed weight does not fit");
        nd->cv = c;
        nd->empty = no == 0;
        return 0;
    }
    if (nd->nargs != 16)
        return corrupt(r, "bad max_pool2d node");
    BUF_OR_FAIL(x, 0, 0);
    BUF_OR_FAIL(vals, 1, 0);
    BUF_OR_FAIL(idx, 2, 0);
    static const int64_t lo[13] = {0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1};
    for (int i = 0; i < 13; i++)
        if (ival(r, nd, 3 + i, lo[i], 1 << 24, &g[i]) < 0)
            return -1;
    gc_pool2d p = {g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], g[12]};
    int64_t nin, nout;
    gc_marg *v[2] = {x, vals};
    if (floats(r, nd, v, 2) < 0 || written(r, vals) < 0 || written(r, idx) < 0 ||
        mulok(p.planes, p.h * p.w, &nin) < 0 || mulok(p.planes, p.oh * p.ow, &nout) < 0)
        return corrupt(r, "max_pool2d: bad sizes");
    if (idx->dtype != GC_DTYPE_INT64 || !idx->contig)
        return corrupt(r, "max_pool2d: idx must be contiguous int64");
    if (need(r, x, nin) < 0 || need(r, vals, nout) < 0 || need(r, idx, nout) < 0)
        return -1;
    nd->pl = p;
    nd->empty = nout == 0;
    return 0;
}

static int check_where(rd *r, gc_mnode *nd)
{
    if (nd->nargs != 4)
        return corrupt(r, "bad where node");
    BUF_OR_FAIL(c, 0, 0);
    BUF_OR_FAIL(a, 1, 0);
    BUF_OR_FAIL(b, 2, 0);
    BUF_OR_FAIL(out, 3, 0);
    if (c->dtype != GC_DTYPE_BOOL ||
        (a->dtype != GC_DTYPE_FLOAT32 && a->dtype != GC_DTYPE_FLOAT64) || b->dtype != a->dtype ||
        out->dtype != a->dtype || !out->contig || written(r, out) < 0)
        return corrupt(r, "bad where operands");
    memset(&nd->it, 0, sizeof nd->it);
    nd->it.ndim = out->ndim ? out->ndim : 1;
    nd->it.shape[0] = 1;
    for (int d = 0; d < out->ndim; d++) {
        nd->it.shape[d] = out->shape[d];
        nd->it.stride[3][d] = out->strides[d] / gc_dtype_size(out->dtype);
    }
    if (iter_operand(r, &nd->it, 0, c, out) < 0 || iter_operand(r, &nd->it, 1, a, out) < 0 ||
        iter_operand(r, &nd->it, 2, b, out) < 0)
        return -1;
    nd->empty = out->numel == 0;
    if (!nd->empty)
        gc_iter_collapse(&nd->it, 4);
    return 0;
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

static int check_attention(rd *r, gc_mnode *nd)
{
    int64_t causal, algo;
    if (nd->nargs != 8 || nd->a[5].tag != GC_ARG_FLOAT || !isfinite(nd->a[5].f) ||
        ival(r, nd, 6, 0, 1, &causal) < 0 || ival(r, nd, 7, 0, 2, &algo) < 0)
        return corrupt(r, "bad attention node");
    BUF_OR_FAIL(q, 0, 0);
    BUF_OR_FAIL(k, 1, 0);
    BUF_OR_FAIL(v, 2, 0);
    BUF_OR_FAIL(mask, 3, 1);
    BUF_OR_FAIL(out, 4, 0);
    const int dt = q->dtype;
    if ((dt != GC_DTYPE_FLOAT32 && dt != GC_DTYPE_FLOAT64) || k->dtype != dt || v->dtype != dt ||
        out->dtype != dt || written(r, out) < 0 ||
        (mask && mask->dtype != GC_DTYPE_BOOL && mask->dtype != dt))
        return corrupt(r, "attention: bad dtypes");
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || out->ndim != 4 || (mask && mask->ndim > 4))
        return corrupt(r, "attention: q, k, v and out must be 4-d");
    const int64_t bb = out->shape[0], hh = out->shape[1], sq = out->shape[2];
    const int64_t dv = out->shape[3], d = q->shape[3], skv = k->shape[2];
    const gc_marg *qkv[3] = {q, k, v};
    const int64_t s2[3] = {sq, skv, skv}, s3[3] = {d, d, dv};
    for (int i = 0; i < 3; i++) {
        const gc_marg *a = qkv[i];
        if ((a->shape[0] != bb && a->shape[0] != 1) || (a->shape[1] != hh && a->shape[1] != 1) ||
            a->shape[2] != s2[i] || a->shape[3] != s3[i])
            return corrupt(r, "attention: q, k, v and out do not fit together");
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
                return corrupt(r, "attention: mask does not broadcast");
            if (n > 1)
                p.ms[dd] = (ptrdiff_t)(mask->strides[md] / gc_dtype_size(mask->dtype));
        }
    }
    if (!distinct(out))
        return corrupt(r, "attention: out's elements overlap");
    if (out->numel == 0)
        p.b = 0;
    nd->at = p;
    nd->f64 = dt == GC_DTYPE_FLOAT64;
    return 0;
}

static int check_io(rd *r, const gc_model *m, gc_mnode *nd)
{
    const int in = nd->kind == GC_NK_INPUT;
    int64_t k;
    if (nd->nargs != 2 || ival(r, nd, 0, 0, (in ? m->n_in : m->n_out) - 1, &k) < 0)
        return corrupt(r, "bad input / output node");
    BUF_OR_FAIL(b, 1, 0);
    const gc_mio *io = in ? &m->in[k] : &m->out[k];
    if (!b->contig || b->dtype != io->dtype ||
        (size_t)b->numel * (size_t)gc_dtype_size(b->dtype) != io->nbytes ||
        (in && written(r, b) < 0))
        return corrupt(r, "input / output buffer does not match its declaration");
    return 0;
}

/* Packs the node's packed constants (as gemm_pack does, for the ISA in use). */
static int pack_node(rd *r, const gc_model *m, gc_mnode *nd)
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

/* ------------------------------------------------------------------------------------------ */
/* The file                                                                                    */

static int read_io(rd *r, gc_mio *io, char **names)
{
    int64_t dt, nd;
    if (next(r, 0, GC_DTYPE_FLOAT64, &dt, "bad input / output dtype") < 0 ||
        next(r, 0, GC_MAX_NDIM, &nd, "bad input / output ndim") < 0)
        return -1;
    io->dtype = (int)dt;
    io->ndim = (int)nd;
    int64_t n = 1;
    for (int d = 0; d < io->ndim; d++) {
        if (next(r, 0, LIM, &io->shape[d], "bad input / output size") < 0 ||
            mulok(n, io->shape[d], &n) < 0)
            return corrupt(r, "input / output too large");
    }
    io->nbytes = (size_t)n * (size_t)gc_dtype_size(io->dtype);
    io->name = *names;
    *names += strlen(*names) + 1;
    return 0;
}

static const st_entry *section(const st_file *f, const char *name, int dtype, const char *path,
                               gc_error *err)
{
    const st_entry *e = st_find(f, name);
    if (!e) {
        gc_fail(err, GC_ERR_FORMAT,
                "gc_model_load: %s: no C program in the file (%s missing): save the model again "
                "with this gpucore; models with steps that run in Python, or dynamic sizes "
                "without example sizes, cannot run from C",
                path, name);
        return NULL;
    }
    if (e->dtype != dtype || e->ndim != 1 ||
        (uint64_t)e->shape[0] * (uint64_t)gc_dtype_size(dtype) != e->end - e->begin) {
        gc_fail(err, GC_ERR_FORMAT, "gc_model_load: %s: %s is malformed", path, name);
        return NULL;
    }
    return e;
}

int gc_model_decode(gc_model *m, const char *path, gc_error *err)
{
    st_file f;
    int rc = st_open(path, &f, err);
    if (rc < 0)
        return rc;
    int64_t *words = NULL;
    char *names = NULL;
    rd r = {NULL, 0, 0, path, -1, err};
    const st_entry *pe = section(&f, "capi.program", GC_DTYPE_INT64, path, err);
    const st_entry *ne = pe ? section(&f, "capi.names", GC_DTYPE_UINT8, path, err) : NULL;
    rc = GC_ERR_FORMAT;
    if (!ne || st_verify(&f, pe, path, err) < 0 || st_verify(&f, ne, path, err) < 0)
        goto done;
    words = malloc((size_t)(pe->end - pe->begin) + 8);
    names = malloc((size_t)(ne->end - ne->begin) + 1);
    if (!words || !names) {
        rc = gc_fail(err, GC_ERR_OUT_OF_MEMORY, "gc_model_load: out of memory");
        goto done;
    }
    memcpy(words, f.data + f.data_start + pe->begin, (size_t)(pe->end - pe->begin));
    memcpy(names, f.data + f.data_start + ne->begin, (size_t)(ne->end - ne->begin));
    names[ne->end - ne->begin] = 0;
    r.w = words;
    r.n = (int64_t)((pe->end - pe->begin) / 8);
    int64_t v[7];
    if (next(&r, MAGIC, MAGIC, &v[0], "not a gpucore C program") < 0 ||
        next(&r, VERSION, VERSION, &v[1], "program version not supported by this library") < 0 ||
        next(&r, 0, LIM, &v[2], "bad arena size") < 0 ||
        next(&r, 0, 1 << 20, &v[3], "bad constant count") < 0 ||
        next(&r, 0, 1 << 16, &v[4], "bad input count") < 0 ||
        next(&r, 0, 1 << 16, &v[5], "bad output count") < 0 ||
        next(&r, 0, 1 << 24, &v[6], "bad node count") < 0)
        goto done;
    m->arena_bytes = v[2];
    /* the names: constants, inputs, outputs, each NUL-terminated, inside the blob */
    size_t count = 0, blob = (size_t)(ne->end - ne->begin);
    for (size_t i = 0; i < blob; i++)
        count += names[i] == 0;
    if (count < (size_t)(v[3] + v[4] + v[5]) || (blob && names[blob - 1] != 0)) {
        corrupt(&r, "names missing");
        goto done;
    }
    m->consts = calloc((size_t)v[3] + 1, sizeof *m->consts);
    m->const_bytes = calloc((size_t)v[3] + 1, sizeof *m->const_bytes);
    m->in = calloc((size_t)v[4] + 1, sizeof *m->in);
    m->out = calloc((size_t)v[5] + 1, sizeof *m->out);
    m->nodes = calloc((size_t)v[6] + 1, sizeof *m->nodes);
    m->names = names;
    names = NULL;
    if (!m->consts || !m->const_bytes || !m->in || !m->out || !m->nodes) {
        rc = gc_fail(err, GC_ERR_OUT_OF_MEMORY, "gc_model_load: out of memory");
        goto done;
    }
    char *nm = m->names;
    for (int k = 0; k < v[3]; k++, m->n_consts++) {
        int64_t dt, nb;
        if (next(&r, 0, GC_DTYPE_FLOAT64, &dt, "bad constant dtype") < 0 ||
            next(&r, 0, LIM, &nb, "bad constant size") < 0)
            goto done;
        const st_entry *e = st_find(&f, nm);
        if (!e || e->dtype != dt || e->end - e->begin != (uint64_t)nb) {
            gc_fail(err, GC_ERR_FORMAT, "gc_model_load: %s: constant %d ('%.100s') is missing or "
                    "does not match the program", path, k, nm);
            goto done;
        }
        nm += strlen(nm) + 1;
        if (st_verify(&f, e, path, err) < 0)
            goto done;
        if (posix_memalign(&m->consts[k], 64, nb > 0 ? (size_t)nb : 64) != 0) {
            rc = gc_fail(err, GC_ERR_OUT_OF_MEMORY, "gc_model_load: out of memory for constants");
            goto done;
        }
        memcpy(m->consts[k], f.data + f.data_start + e->begin, (size_t)nb);
        m->const_bytes[k] = nb;
    }
    for (int k = 0; k < v[4]; k++, m->n_in++)
        if (read_io(&r, &m->in[k], &nm) < 0)
            goto done;
    for (int k = 0; k < v[5]; k++, m->n_out++)
        if (read_io(&r, &m->out[k], &nm) < 0)
            goto done;
    for (int j = 0; j < v[6]; j++, m->n_nodes++) {
        gc_mnode *nd = &m->nodes[j];
        int64_t kind, nargs;
        r.node = -1;
        if (next(&r, 1, GC_NK_END - 1, &kind, "unknown node kind") < 0 ||
            next(&r, 0, GC_NODE_MAX_ARGS, &nargs, "too many arguments") < 0)
            goto done;
        nd->kind = (int)kind;
        nd->nargs = (int)nargs;
        for (int i = 0; i < nd->nargs; i++)
            if (read_arg(&r, m, &nd->a[i]) < 0)
                goto done;
        r.node = j;
        int ok;
        switch (nd->kind) {
        case GC_NK_INPUT:
        case GC_NK_OUTPUT: ok = check_io(&r, m, nd); break;
        case GC_NK_GEMM:
        case GC_NK_GEMM_EX: ok = check_gemm(&r, nd); break;
        case GC_NK_BINARY: ok = check_binary(&r, nd); break;
        case GC_NK_COPY: ok = check_copy(&r, nd); break;
        case GC_NK_CONV2D:
        case GC_NK_MAX_POOL2D: ok = check_conv_pool(&r, nd); break;
        case GC_NK_ATTENTION: ok = check_attention(&r, nd); break;
        case GC_NK_WHERE: ok = check_where(&r, nd); break;
        default: ok = check_simple(&r, nd); break;
        }
        if (ok == 0)
            ok = pack_node(&r, m, nd);
        if (ok < 0) {
            if (err)
                snprintf(err->message + strlen(err->message),
                         sizeof err->message - strlen(err->message), " (%s)",
                         kind_name(nd->kind));
            goto done;
        }
    }
    r.node = -1;
    if (r.i != r.n) {
        corrupt(&r, "trailing words");
        goto done;
    }
    for (int k = 0; k < m->n_out; k++) { /* every output is written by some node */
        int found = 0;
        for (int j = 0; j < m->n_nodes && !found; j++)
            found = m->nodes[j].kind == GC_NK_OUTPUT && m->nodes[j].a[0].i == k;
        if (!found) {
            corrupt(&r, "an output no node writes");
            goto done;
        }
    }
    rc = 0;
done:
    free(words);
    free(names);
    st_close(&f);
    if (rc < 0 && err && err->code == GC_OK)
        rc = gc_fail(err, GC_ERR_FORMAT, "gc_model_load: %s: corrupt program", path);
    else if (rc < 0 && err)
        rc = err->code;
    return rc;
}

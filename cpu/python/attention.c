/* Bindings of attention.c and attention_backward.c: attention (a node kind, see nodes.h), and
 * attention_forward / attention_backward, the eager training pair (logsumexp out, gradients). */
#include "args.h"
#include "bindings.h"
#include "nodes.h"

#include <math.h>
#include <stdlib.h>

GC_DOC(attention,
       "attention(q, k, v, mask, out, scale, causal, algo, /)\n--\n\n"
       "Scaled dot-product attention: out = softmax(q @ k^T * scale + mask) @ v over 4-d "
       "arrays of any strides (zero strides broadcast): q [B, H, Sq, D], k [B, H, Skv, D], "
       "v [B, H, Skv, Dv], out [B, H, Sq, Dv] (q, k, v may have 1 for B or H: broadcast).  "
       "mask is None, a float array (q's format) added to the scores, or a bool array "
       "(True = may attend, False = -inf), of at most 4 dims broadcastable to [B, H, Sq, Skv]."
       "  causal=1: query i attends keys j <= i only (top-left aligned, PyTorch's is_causal; "
       "combined with the mask if both are given).  A row whose every score is -inf gives 0 "
       "(as PyTorch's scaled_dot_product_attention).  algo: 0 auto, 1 standard (score rows "
       "in scratch), 2 tiled (online softmax over key blocks).  out's elements must be "
       "distinct and must not overlap any input.");

typedef struct {
    const void *q, *k, *v, *mask;
    void *out;
    gc_attn p;
    char kd;
} attention_node;

/* Element strides of a 4-d buffer; a dim of size 1 gets stride 0. */
static void elem_strides(const Py_buffer *v, ptrdiff_t *s)
{
    for (int d = 0; d < 4; d++)
        s[d] = v->shape[d] == 1 ? 0 : (ptrdiff_t)(buf_stride(v, d) / v->itemsize);
}

/* name's shape must be [B|1, H|1, want2, want3] (want < 0: any, returned); hh is the heads the
 * array must have (the key / value heads for k and v). */
static int attn_shape(const char *fn, const char *name, const Py_buffer *v, Py_ssize_t bb,
                      Py_ssize_t hh, Py_ssize_t *s2, Py_ssize_t *s3, const char *what)
{
    char sh[120];
    if (v->ndim != 4) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be 4-d %s, got shape %s", fn, name, what,
                     shape_str(v, sh, sizeof sh));
        return -1;
    }
    const Py_ssize_t *s = v->shape;
    if ((s[0] != bb && s[0] != 1) || (s[1] != hh && s[1] != 1) || (*s2 >= 0 && s[2] != *s2) ||
        (*s3 >= 0 && s[3] != *s3)) {
        PyErr_Format(PyExc_ValueError,
                     "%s: '%s' has shape %s, expected %s with B=%zd, H=%zd from out (B or H may "
                     "be 1) and the sizes shared with the other arrays",
                     fn, name, shape_str(v, sh, sizeof sh), what, bb, hh);
        return -1;
    }
    *s2 = s[2];
    *s3 = s[3];
    return 0;
}

/* out's elements are distinct: with the dims sorted by stride, each stride exceeds the span of
 * the smaller ones (sufficient; what any non-overlapping view of a contiguous array meets). */
static int distinct_elements(const Py_buffer *v)
{
    Py_ssize_t st[4], n[4];
    int k = 0;
    for (int d = 0; d < v->ndim; d++) {
        if (v->shape[d] == 0)
            return 1;
        if (v->shape[d] > 1) {
            const Py_ssize_t s = buf_stride(v, d);
            st[k] = s < 0 ? -s : s;
            n[k++] = v->shape[d];
        }
    }
    for (int i = 1; i < k; i++) /* insertion sort by stride */
        for (int j = i; j > 0 && st[j] < st[j - 1]; j--) {
            Py_ssize_t t = st[j];
            st[j] = st[j - 1];
            st[j - 1] = t;
            t = n[j];
            n[j] = n[j - 1];
            n[j - 1] = t;
        }
    Py_ssize_t span = v->itemsize; /* bytes from the first to past the last element so far */
    for (int i = 0; i < k; i++) {
        if (st[i] < span)
            return 0;
        span = st[i] * (n[i] - 1) + span;
    }
    return 1;
}

/* The checks shared by the three bindings: q, k, v, mask, out (bv[0..5)) against one another
 * into p (shapes, formats, mask broadcast, element strides); hg query heads per key / value
 * head.  writes_out: out is the result (distinct elements, apart from the inputs), not an
 * input of the backward.  Returns the float kind, or 0 with an exception set. */
static char attn_check(const char *fn, Py_buffer *const *bv, double scale, int causal,
                       Py_ssize_t algo, Py_ssize_t hg, int writes_out, gc_attn *pp)
{
    static const char *const names[5] = {"q", "k", "v", "mask", "out"};
    Py_buffer *q = bv[0], *k = bv[1], *v = bv[2], *mask = bv[3], *out = bv[4];
    if (!isfinite(scale)) {
        char got[32];
        PyErr_Format(PyExc_ValueError, "%s: 'scale' must be finite, got %s", fn,
                     repr_double(got, sizeof got, scale));
        return 0;
    }
    const char kd = float_kind(fn, "q", q);
    if (!kd || need_kind(fn, "k", k, kd) < 0 || need_kind(fn, "v", v, kd) < 0 ||
        need_kind(fn, "out", out, kd) < 0)
        return 0;
    int mask_kind = GC_ATTN_MASK_NONE;
    if (mask) {
        const char mk = fmt_code(mask);
        if (mk == '?' && mask->itemsize == 1)
            mask_kind = GC_ATTN_MASK_BOOL;
        else if (mk == kd && mask->itemsize == q->itemsize)
            mask_kind = GC_ATTN_MASK_FLOAT;
        else {
            PyErr_Format(PyExc_TypeError,
                         "%s: 'mask' must be bool or %s like q, got format '%s' with item size %zd",
                         fn, kind_name(kd), fmt_str(mask), mask->itemsize);
            return 0;
        }
    }
    /* shapes: out gives B, H, Sq, Dv; q gives D; k gives Skv */
    char sh[120];
    if (out->ndim != 4) {
        PyErr_Format(PyExc_ValueError, "%s: 'out' must be 4-d [B, H, Sq, Dv], got shape %s", fn,
                     shape_str(out, sh, sizeof sh));
        return 0;
    }
    const Py_ssize_t bb = out->shape[0], hh = out->shape[1];
    if (hg < 1 || hh % hg) {
        PyErr_Format(PyExc_ValueError,
                     "%s: 'hg' (query heads per key/value head) must be >= 1 and divide the %zd "
                     "heads of out, got %zd",
                     fn, hh, hg);
        return 0;
    }
    Py_ssize_t sq = out->shape[2], dv = out->shape[3], d = -1, skv = -1, dv_v = dv;
    if (attn_shape(fn, "q", q, bb, hh, &sq, &d, "[B, H, Sq, D]") < 0 ||
        attn_shape(fn, "k", k, bb, hh / hg, &skv, &d, "[B, H / hg, Skv, D]") < 0 ||
        attn_shape(fn, "v", v, bb, hh / hg, &skv, &dv_v, "[B, H / hg, Skv, Dv]") < 0)
        return 0;
    gc_attn p = {.b = bb, .h = hh, .sq = sq, .skv = skv, .d = d, .dv = dv, .hg = hg,
                 .mask_kind = mask_kind, .causal = causal, .algo = (int)algo, .scale = scale};
    elem_strides(q, p.qs);
    elem_strides(k, p.ks);
    elem_strides(v, p.vs);
    elem_strides(out, p.os);
    if (mask) { /* right-aligned against [B, H, Sq, Skv] */
        const Py_ssize_t target[4] = {bb, hh, sq, skv};
        if (mask->ndim > 4) {
            PyErr_Format(PyExc_ValueError, "%s: 'mask' has %d dims; at most 4 are allowed", fn,
                         mask->ndim);
            return 0;
        }
        for (int dd = 0; dd < 4; dd++) {
            const int md = dd - (4 - mask->ndim);
            p.ms[dd] = 0;
            if (md < 0)
                continue;
            const Py_ssize_t n = mask->shape[md];
            if (n != target[dd] && n != 1) {
                PyErr_Format(PyExc_ValueError,
                             "%s: 'mask' of shape %s does not broadcast to [B, H, Sq, Skv] = "
                             "[%zd, %zd, %zd, %zd]",
                             fn, shape_str(mask, sh, sizeof sh), bb, hh, sq, skv);
                return 0;
            }
            if (n > 1)
                p.ms[dd] = (ptrdiff_t)(buf_stride(mask, md) / mask->itemsize);
        }
    }
    if (writes_out && buf_nelem(out) > 0) {
        if (!distinct_elements(out)) {
            PyErr_Format(PyExc_ValueError,
                         "%s: the elements of 'out' must not overlap one another (its strides "
                         "map two elements to the same memory)",
                         fn);
            return 0;
        }
        for (int i = 0; i < 4; i++)
            if (bv[i] && need_no_overlap(fn, "out", out, names[i], bv[i], 0) < 0)
                return 0;
    }
    *pp = p;
    return kd;
}

static int attention_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    const char *fn = "attention";
    static const char *const names[5] = {"q", "k", "v", "mask", "out"};
    Py_buffer *bv[5];
    double scale;
    int causal;
    Py_ssize_t algo;
    if (check_nargs(fn, nargs, 8) < 0 || get_double(fn, "scale", args[5], &scale) < 0 ||
        get_flag(fn, "causal", args[6], &causal) < 0 || get_min(fn, "algo", args[7], 0, &algo) < 0)
        return -1;
    if (algo > 2) {
        PyErr_Format(PyExc_ValueError,
                     "%s: 'algo' must be 0 (auto), 1 (standard) or 2 (tiled), got %zd", fn, algo);
        return -1;
    }
    if (get_bufs(bs, fn, args, 5, names, "rrrRw", bv) < 0)
        return -1;
    gc_attn p;
    const char kd = attn_check(fn, bv, scale, causal, algo, 1, 1, &p);
    if (!kd)
        return -1;
    attention_node *s = node;
    *s = (attention_node){.q = bv[0]->buf, .k = bv[1]->buf, .v = bv[2]->buf,
                          .mask = bv[3] ? bv[3]->buf : NULL, .out = bv[4]->buf, .p = p, .kd = kd};
    if (buf_nelem(bv[4]) == 0) /* nothing to write: the kernel returns at once */
        s->p.b = 0;
    return 0;
}

static int attention_exec(const void *node)
{
    const attention_node *s = node;
    if (s->kd == 'f')
        return gc_attention_f32(s->q, s->k, s->v, s->mask, s->out, &s->p);
    return gc_attention_f64(s->q, s->k, s->v, s->mask, s->out, &s->p);
}

GC_NODE_KIND_IO(attention, attention_parse, attention_exec, attention_node, NULL,
                GC_NODE_PTR(attention_node, q), GC_NODE_PTR(attention_node, k),
                GC_NODE_PTR(attention_node, v), GC_NODE_PTR(attention_node, mask),
                GC_NODE_OUT(attention_node, out));
GC_NODE_BINDING(attention)

/* lse [B, H, Sq] of q's float kind, C-contiguous (shape from p). */
static int attn_lse_check(const char *fn, const Py_buffer *lse, char kd, const gc_attn *p)
{
    char sh[120];
    if (need_kind(fn, "lse", lse, kd) < 0 || need_contig(fn, "lse", lse) < 0)
        return -1;
    if (lse->ndim != 3 || lse->shape[0] != p->b || lse->shape[1] != p->h ||
        lse->shape[2] != p->sq) {
        PyErr_Format(PyExc_ValueError, "%s: 'lse' has shape %s, expected [B, H, Sq] = [%zd, %zd, %zd]",
                     fn, shape_str(lse, sh, sizeof sh), p->b, p->h, p->sq);
        return -1;
    }
    return 0;
}

/* name has unit element stride along its last dim (or that dim has at most one element). */
static int attn_unit_rows(const char *fn, const char *name, const Py_buffer *v)
{
    if (v->shape[3] <= 1 || buf_stride(v, 3) == v->itemsize)
        return 0;
    PyErr_Format(PyExc_ValueError,
                 "%s: '%s' must have unit stride along its last dim; pass a contiguous copy", fn,
                 name);
    return -1;
}

GC_DOC(attention_forward,
       "attention_forward(q, k, v, mask, out, lse, scale, causal, hg, /)\n--\n\n"
       "attention(q, k, v, mask, out, scale, causal, 0) that also writes each row's logsumexp "
       "of its scaled, masked scores to lse (C-contiguous [B, H, Sq], q's format; +inf for a "
       "row whose every score is -inf, NaN for a NaN row), for attention_backward.  hg: query "
       "heads per key/value head (grouped-query attention: k and v have H / hg heads, head h "
       "reads head h // hg).  lse must not overlap any other array.");

PyObject *gc_py_attention_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "attention_forward";
    static const char *const names[6] = {"q", "k", "v", "mask", "out", "lse"};
    Py_buffer *bv[6];
    double scale;
    int causal;
    Py_ssize_t hg;
    if (check_nargs(fn, nargs, 9) < 0 || get_double(fn, "scale", args[6], &scale) < 0 ||
        get_flag(fn, "causal", args[7], &causal) < 0 || get_min(fn, "hg", args[8], 1, &hg) < 0)
        return NULL;
    bufset bs = {.n = 0};
    PyObject *res = NULL;
    if (get_bufs(&bs, fn, args, 6, names, "rrrRww", bv) < 0)
        goto done;
    gc_attn p;
    const char kd = attn_check(fn, bv, scale, causal, 0, hg, 1, &p);
    if (!kd || attn_lse_check(fn, bv[5], kd, &p) < 0)
        goto done;
    if (buf_nelem(bv[5]) > 0)
        for (int i = 0; i < 5; i++)
            if (bv[i] && need_no_overlap(fn, "lse", bv[5], names[i], bv[i], 0) < 0)
                goto done;
    if (buf_nelem(bv[4]) == 0)
        p.b = 0;
    int rc;
    const void *q = bv[0]->buf, *k = bv[1]->buf, *v = bv[2]->buf;
    const void *mask = bv[3] ? bv[3]->buf : NULL;
    void *out = bv[4]->buf, *lse = bv[5]->buf;
    Py_BEGIN_ALLOW_THREADS
    rc = kd == 'f' ? gc_attention_lse_f32(q, k, v, mask, out, lse, &p)
                   : gc_attention_lse_f64(q, k, v, mask, out, lse, &p);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_Format(PyExc_MemoryError, "%s: out of memory for the kernel's scratch buffers", fn);
        goto done;
    }
    res = Py_NewRef(Py_None);
done:
    bufs_release(&bs);
    return res;
}

GC_DOC(attention_backward,
       "attention_backward(q, k, v, mask, out, g, lse, dq, dk, dv, scale, causal, hg, /)\n--\n\n"
       "The gradients dq [B, H, Sq, D], dk [B, H / hg, Skv, D] and dv [B, H / hg, Skv, Dv] "
       "(C-contiguous, overwritten, apart from every other array) of out = attention(q, k, v, "
       "mask) for the gradient g of out (out's shape), from the forward's out and lse "
       "(attention_forward with the same q, k, v, mask, scale, causal, hg).  q, k, v, out and "
       "g: any strides with unit stride along the last dim.  FlashAttention-2: the "
       "probabilities are recomputed per tile, no Sq x Skv matrix; bitwise the same for any "
       "thread count.");

PyObject *gc_py_attention_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "attention_backward";
    static const char *const names[10] = {"q", "k", "v", "mask", "out",
                                          "g", "lse", "dq", "dk", "dv"};
    Py_buffer *bv[10];
    double scale;
    int causal;
    Py_ssize_t hg;
    char sh[120];
    if (check_nargs(fn, nargs, 13) < 0 || get_double(fn, "scale", args[10], &scale) < 0 ||
        get_flag(fn, "causal", args[11], &causal) < 0 || get_min(fn, "hg", args[12], 1, &hg) < 0)
        return NULL;
    /* ten buffers: two sets (a bufset holds GC_MAXBUF) */
    bufset bs = {.n = 0}, bs2 = {.n = 0};
    PyObject *res = NULL;
    if (get_bufs(&bs, fn, args, 5, names, "rrrRr", bv) < 0 ||
        get_bufs(&bs2, fn, args + 5, 5, names + 5, "rrwww", bv + 5) < 0)
        goto done;
    gc_attn p;
    const char kd = attn_check(fn, bv, scale, causal, 0, hg, 0, &p);
    if (!kd || attn_lse_check(fn, bv[6], kd, &p) < 0 || need_kind(fn, "g", bv[5], kd) < 0)
        goto done;
    Py_buffer *g = bv[5];
    if (g->ndim != 4 || g->shape[0] != p.b || g->shape[1] != p.h || g->shape[2] != p.sq ||
        g->shape[3] != p.dv) {
        PyErr_Format(PyExc_ValueError, "%s: 'g' has shape %s, expected out's [%zd, %zd, %zd, %zd]",
                     fn, shape_str(g, sh, sizeof sh), p.b, p.h, p.sq, p.dv);
        goto done;
    }
    elem_strides(g, p.gs);
    const Py_ssize_t want[3][4] = {{p.b, p.h, p.sq, p.d},
                                   {p.b, p.h / hg, p.skv, p.d},
                                   {p.b, p.h / hg, p.skv, p.dv}};
    for (int i = 0; i < 3; i++) {
        const Py_buffer *o = bv[7 + i];
        if (need_kind(fn, names[7 + i], o, kd) < 0 || need_contig(fn, names[7 + i], o) < 0)
            goto done;
        if (o->ndim != 4 || o->shape[0] != want[i][0] || o->shape[1] != want[i][1] ||
            o->shape[2] != want[i][2] || o->shape[3] != want[i][3]) {
            PyErr_Format(PyExc_ValueError, "%s: '%s' has shape %s, expected [%zd, %zd, %zd, %zd]",
                         fn, names[7 + i], shape_str(o, sh, sizeof sh), want[i][0], want[i][1],
                         want[i][2], want[i][3]);
            goto done;
        }
    }
    for (int i = 0; i < 6; i++) /* q, k, v, out, g */
        if (i != 3 && attn_unit_rows(fn, names[i], bv[i]) < 0)
            goto done;
    const Py_ssize_t need[10] = {1, 1, 1, 1, 1, 1, 1, buf_nelem(bv[7]), buf_nelem(bv[8]),
                                 buf_nelem(bv[9])};
    const int outs[10] = {0, 0, 0, 0, 0, 0, 0, 1, 1, 1};
    if (need_outputs_apart(fn, 10, bv, names, need, outs) < 0)
        goto done;
    int rc;
    const void *q = bv[0]->buf, *k = bv[1]->buf, *v = bv[2]->buf, *out = bv[4]->buf;
    const void *mask = bv[3] ? bv[3]->buf : NULL, *gb = g->buf, *lse = bv[6]->buf;
    void *dq = bv[7]->buf, *dk = bv[8]->buf, *dv = bv[9]->buf;
    Py_BEGIN_ALLOW_THREADS
    rc = kd == 'f' ? gc_attention_backward_f32(q, k, v, mask, out, gb, lse, dq, dk, dv, &p)
                   : gc_attention_backward_f64(q, k, v, mask, out, gb, lse, dq, dk, dv, &p);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_Format(PyExc_MemoryError, "%s: out of memory for the kernel's scratch buffers", fn);
        goto done;
    }
    res = Py_NewRef(Py_None);
done:
    bufs_release(&bs2);
    bufs_release(&bs);
    return res;
}

/* Bindings of attention.c: attention (a node kind, see nodes.h). */
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

/* name's shape must be [B|1, H|1, want2, want3] (want < 0: any, returned). */
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
    if (!isfinite(scale)) {
        PyErr_Format(PyExc_ValueError, "%s: 'scale' must be finite, got %R", fn, args[5]);
        return -1;
    }
    if (algo > 2) {
        PyErr_Format(PyExc_ValueError,
                     "%s: 'algo' must be 0 (auto), 1 (standard) or 2 (tiled), got %zd", fn, algo);
        return -1;
    }
    if (get_bufs(bs, fn, args, 5, names, "rrrRw", bv) < 0)
        return -1;
    Py_buffer *q = bv[0], *k = bv[1], *v = bv[2], *mask = bv[3], *out = bv[4];
    const char kd = float_kind(fn, "q", q);
    if (!kd || need_kind(fn, "k", k, kd) < 0 || need_kind(fn, "v", v, kd) < 0 ||
        need_kind(fn, "out", out, kd) < 0)
        return -1;
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
            return -1;
        }
    }
    /* shapes: out gives B, H, Sq, Dv; q gives D; k gives Skv */
    char sh[120];
    if (out->ndim != 4) {
        PyErr_Format(PyExc_ValueError, "%s: 'out' must be 4-d [B, H, Sq, Dv], got shape %s", fn,
                     shape_str(out, sh, sizeof sh));
        return -1;
    }
    const Py_ssize_t bb = out->shape[0], hh = out->shape[1];
    Py_ssize_t sq = out->shape[2], dv = out->shape[3], d = -1, skv = -1, dv_v = dv;
    if (attn_shape(fn, "q", q, bb, hh, &sq, &d, "[B, H, Sq, D]") < 0 ||
        attn_shape(fn, "k", k, bb, hh, &skv, &d, "[B, H, Skv, D]") < 0 ||
        attn_shape(fn, "v", v, bb, hh, &skv, &dv_v, "[B, H, Skv, Dv]") < 0)
        return -1;
    gc_attn p = {.b = bb, .h = hh, .sq = sq, .skv = skv, .d = d, .dv = dv,
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
            return -1;
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
                return -1;
            }
            if (n > 1)
                p.ms[dd] = (ptrdiff_t)(buf_stride(mask, md) / mask->itemsize);
        }
    }
    const Py_ssize_t nout = buf_nelem(out);
    if (nout > 0) {
        if (!distinct_elements(out)) {
            PyErr_Format(PyExc_ValueError,
                         "%s: the elements of 'out' must not overlap one another (its strides "
                         "map two elements to the same memory)",
                         fn);
            return -1;
        }
        for (int i = 0; i < 4; i++)
            if (bv[i] && need_no_overlap(fn, "out", out, names[i], bv[i], 0) < 0)
                return -1;
    }
    attention_node *s = node;
    *s = (attention_node){.q = q->buf, .k = k->buf, .v = v->buf, .mask = mask ? mask->buf : NULL,
                          .out = out->buf, .p = p, .kd = kd};
    if (nout == 0) /* nothing to write: the kernel returns at once */
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

GC_NODE_KIND(attention, attention_parse, attention_exec, attention_node, NULL);
GC_NODE_BINDING(attention)

/* Bindings of copy.c and cast.c: copy and cast between any strides (node kinds, see nodes.h). */
#include "args.h"
#include "bindings.h"
#include "nodes.h"

#include <stdlib.h>
#include <string.h>

GC_DOC(copy, "copy(src, dst, /)\n--\n\n"
                       "Copies src into dst: same shape (ndim <= 8) and format (item size 1, 2, "
                       "4 or 8), any strides; dst writable.  Overlapping views are handled.");

/* src and dst of one shape, of at most GC_MAX_DIMS dims; else -1 with ValueError. */
static int same_shapes(const char *fn, const Py_buffer *s, const Py_buffer *d)
{
    int same_shape = s->ndim == d->ndim;
    for (int i = 0; same_shape && i < s->ndim; i++)
        same_shape = s->shape[i] == d->shape[i];
    if (!same_shape) {
        char s1[200], s2[200];
        PyErr_Format(PyExc_ValueError, "%s: src shape %s differs from dst shape %s", fn,
                     shape_str(s, s1, sizeof s1), shape_str(d, s2, sizeof s2));
        return -1;
    }
    if (d->ndim > GC_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: %d dims; at most %d are supported", fn, d->ndim,
                     GC_MAX_DIMS);
        return -1;
    }
    return 0;
}

enum { COPY_NONE, COPY_DIRECT, COPY_VIA_TMP };

/* COPY_DIRECT: it collapsed (operands src, dst); COPY_VIA_TMP (overlapping views): it as
 * parsed, with dst's shape, so that exec can derive the two passes through a temporary. */
typedef struct {
    gc_iter it;
    const void *src;
    void *dst;
    Py_ssize_t total;
    size_t isz;
    int mode;
} copy_node;

static int copy_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    const char *fn = "copy";
    copy_node *p = node;
    if (check_nargs(fn, nargs, 2) < 0)
        return -1;
    Py_buffer *s = get_buf(bs, fn, "src", args[0], 0);
    Py_buffer *d = s ? get_buf(bs, fn, "dst", args[1], 1) : NULL;
    if (!d)
        return -1;
    const Py_ssize_t isz = s->itemsize;
    if (!fmt_is_plain(s) || !(isz == 1 || isz == 2 || isz == 4 || isz == 8)) {
        PyErr_Format(PyExc_TypeError,
                     "copy: 'src' must be a plain (no objects) format of item size 1, 2, 4 or 8, "
                     "got format '%s' with item size %zd",
                     fmt_str(s), isz);
        return -1;
    }
    if (!fmt_same(s, d)) {
        PyErr_Format(PyExc_TypeError,
                     "copy: src has format '%s' (item size %zd) but dst has '%s' (item size %zd); "
                     "they must match",
                     fmt_str(s), isz, fmt_str(d), d->itemsize);
        return -1;
    }
    if (same_shapes(fn, s, d) < 0)
        return -1;
    memset(p, 0, sizeof *p);
    p->src = s->buf;
    p->dst = d->buf;
    p->isz = (size_t)isz;
    p->total = buf_nelem(d);
    p->mode = COPY_NONE;
    if (p->total == 0)
        return 0;
    gc_iter *it = &p->it;
    it->ndim = d->ndim;
    for (int i = 0; i < d->ndim; i++) {
        it->shape[i] = d->shape[i];
        it->stride[0][i] = d->shape[i] > 1 ? buf_stride(s, i) / isz : 0;
        it->stride[1][i] = d->shape[i] > 1 ? buf_stride(d, i) / isz : 0;
    }
    int same_elems = s->buf == d->buf;
    for (int i = 0; same_elems && i < d->ndim; i++)
        same_elems = it->stride[0][i] == it->stride[1][i];
    if (same_elems)
        return 0;
    if (!buf_overlap(s, d)) {
        gc_iter_collapse(it, 2);
        p->mode = COPY_DIRECT;
    } else {
        p->mode = COPY_VIA_TMP;
    }
    return 0;
}

/* -1 when the temporary for overlapping views could not be allocated. */
static int copy_exec(const void *node)
{
    const copy_node *p = node;
    if (p->mode == COPY_DIRECT)
        gc_copy(&p->it, p->src, p->dst, p->isz);
    if (p->mode != COPY_VIA_TMP)
        return 0;
    /* overlapping views: go through a contiguous temporary */
    void *tmp = malloc((size_t)p->total * p->isz);
    if (!tmp)
        return -1;
    gc_iter in = p->it, outit = p->it;
    Py_ssize_t st = 1;
    for (int i = p->it.ndim - 1; i >= 0; i--) {
        in.stride[1][i] = p->it.shape[i] > 1 ? st : 0;    /* src -> tmp */
        outit.stride[0][i] = p->it.shape[i] > 1 ? st : 0; /* tmp -> dst */
        st *= p->it.shape[i];
    }
    gc_iter_collapse(&in, 2);
    gc_iter_collapse(&outit, 2);
    gc_copy(&in, p->src, tmp, p->isz);
    gc_copy(&outit, tmp, p->dst, p->isz);
    free(tmp);
    return 0;
}

GC_NODE_KIND_IO(copy, copy_parse, copy_exec, copy_node, NULL, GC_NODE_PTR(copy_node, src),
                GC_NODE_OUT(copy_node, dst));
GC_NODE_BINDING(copy)

GC_DOC(cast, "cast(src, dst, /)\n--\n\n"
                       "Converts src into dst (Tensor.to(dtype)): same shape (ndim <= 8), any "
                       "strides; element types bool, uint8, int8, int32, int64, float32, float64 "
                       "(numpy's unsafe cast as on x86-64, see cpu/cast.c); dst writable and not "
                       "overlapping src.");

typedef struct {
    gc_iter it;
    const void *src;
    void *dst;
    gc_elem st, dt;
    int empty;
} cast_node;

static int cast_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    const char *fn = "cast";
    cast_node *p = node;
    if (check_nargs(fn, nargs, 2) < 0)
        return -1;
    Py_buffer *s = get_buf(bs, fn, "src", args[0], 0);
    Py_buffer *d = s ? get_buf(bs, fn, "dst", args[1], 1) : NULL;
    if (!d)
        return -1;
    const int st = fmt_elem(s), dt = fmt_elem(d);
    if (st < 0 || dt < 0) {
        PyErr_Format(PyExc_TypeError,
                     "cast: '%s' has format '%s'; src and dst must be bool, uint8, int8, int16, "
                     "int32, int64, float32 or float64",
                     st < 0 ? "src" : "dst", fmt_str(st < 0 ? s : d));
        return -1;
    }
    if (same_shapes(fn, s, d) < 0)
        return -1;
    memset(p, 0, sizeof *p);
    p->src = s->buf;
    p->dst = d->buf;
    p->st = (gc_elem)st;
    p->dt = (gc_elem)dt;
    p->empty = buf_nelem(d) == 0;
    if (p->empty)
        return 0;
    if (buf_overlap(s, d)) {
        PyErr_SetString(PyExc_ValueError,
                        "cast: src and dst overlap; cast into separate memory");
        return -1;
    }
    gc_iter *it = &p->it;
    it->ndim = d->ndim;
    for (int i = 0; i < d->ndim; i++) {
        it->shape[i] = d->shape[i];
        it->stride[0][i] = d->shape[i] > 1 ? buf_stride(s, i) / s->itemsize : 0;
        it->stride[1][i] = d->shape[i] > 1 ? buf_stride(d, i) / d->itemsize : 0;
    }
    gc_iter_collapse(it, 2);
    return 0;
}

static int cast_exec(const void *node)
{
    const cast_node *p = node;
    if (!p->empty)
        gc_cast(&p->it, p->src, p->st, p->dst, p->dt);
    return 0;
}

GC_NODE_KIND_IO(cast, cast_parse, cast_exec, cast_node, NULL, GC_NODE_PTR(cast_node, src),
                GC_NODE_OUT(cast_node, dst));
GC_NODE_BINDING(cast)

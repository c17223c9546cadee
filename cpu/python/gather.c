/* Binding of gather.c: gather along one dim (a node kind, see nodes.h) and index_add_rows. */
#include "args.h"
#include "bindings.h"
#include "nodes.h"

#include <string.h>

GC_DOC(gather, "gather(x, index, out, dim, /)\n--\n\n"
                "out[i] = x[i with its dim-th index replaced by index[i]] (torch.gather): index "
                "int64 of out's shape, of x's ndim (<= 8), at most x's size in every other dim; "
                "x and out of one format (item size 1, 2, 4 or 8), any strides; IndexError when "
                "an index lies outside [0, x.shape[dim]).");

typedef struct {
    gc_iter it;
    const void *x;
    const int64_t *index;
    void *out;
    Py_ssize_t xd, nx;
    size_t isz;
    int empty;
} gather_node;

static int gather_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    const char *fn = "gather";
    gather_node *p = node;
    static const char *const names[] = {"x", "index", "out"};
    Py_buffer *v[3];
    Py_ssize_t dim;
    if (check_nargs(fn, nargs, 4) < 0 || get_bufs(bs, fn, args, 3, names, "rrw", v) < 0 ||
        get_ssize(fn, "dim", args[3], &dim) < 0 || need_kind(fn, "index", v[1], 'q') < 0)
        return -1;
    Py_buffer *x = v[0], *ix = v[1], *out = v[2];
    const Py_ssize_t isz = x->itemsize;
    if (!fmt_is_plain(x) || !(isz == 1 || isz == 2 || isz == 4 || isz == 8) ||
        !fmt_same(x, out)) {
        PyErr_Format(PyExc_TypeError,
                     "gather: x and out must have one plain format of item size 1, 2, 4 or 8; "
                     "got '%s' and '%s'",
                     fmt_str(x), fmt_str(out));
        return -1;
    }
    char s1[200], s2[200], s3[200];
    int ok = x->ndim == ix->ndim && ix->ndim == out->ndim && x->ndim >= 1 &&
             x->ndim <= GC_MAX_DIMS && dim >= 0 && dim < x->ndim;
    for (int d = 0; ok && d < x->ndim; d++)
        ok = ix->shape[d] == out->shape[d] && (d == dim || ix->shape[d] <= x->shape[d]);
    if (!ok) {
        PyErr_Format(PyExc_ValueError,
                     "gather: x %s, index %s, out %s along dim %zd: index and out need one "
                     "shape, x's ndim (1 to %d) and at most x's size in every dim but dim",
                     shape_str(x, s1, sizeof s1), shape_str(ix, s2, sizeof s2),
                     shape_str(out, s3, sizeof s3), dim, GC_MAX_DIMS);
        return -1;
    }
    if (need_no_overlap(fn, "out", out, "x", x, 0) < 0 ||
        need_no_overlap(fn, "out", out, "index", ix, 0) < 0)
        return -1;
    memset(p, 0, sizeof *p);
    p->x = x->buf;
    p->index = ix->buf;
    p->out = out->buf;
    p->isz = (size_t)isz;
    p->nx = x->shape[dim];
    p->xd = buf_stride(x, (int)dim) / isz;
    p->empty = buf_nelem(out) == 0;
    if (p->empty)
        return 0;
    gc_iter *it = &p->it;
    it->ndim = out->ndim;
    for (int d = 0; d < out->ndim; d++) {
        const int live = out->shape[d] > 1;
        it->shape[d] = out->shape[d];
        it->stride[0][d] = live && d != dim ? buf_stride(x, d) / isz : 0;
        it->stride[1][d] = live ? buf_stride(ix, d) / 8 : 0;
        it->stride[2][d] = live ? buf_stride(out, d) / isz : 0;
    }
    gc_iter_collapse(it, 3);
    return 0;
}

/* -1: an index outside [0, nx) (gather_fail). */
static int gather_exec(const void *node)
{
    const gather_node *p = node;
    int64_t bad = 0;
    if (p->empty)
        return 0;
    return gc_gather(&p->it, p->x, p->xd, p->nx, p->index, p->out, p->isz, &bad);
}

static void gather_fail(const char *fn, const void *node, int rc)
{
    (void)rc;
    const gather_node *p = node;
    PyErr_Format(PyExc_IndexError, "%s(): index values must be in [0, %zd)", fn, p->nx);
}

GC_NODE_KIND(gather, gather_parse, gather_exec, gather_node, gather_fail);
GC_NODE_BINDING(gather)

GC_DOC(index_add_rows,
       "index_add_rows(out, index, src, /)\n--\n\n"
       "out[index[i]] += src[i] over rows, in order of i: out [n, ...] and src [m, ...] "
       "C-contiguous, one float dtype, the same trailing dims; index int64 [m] (negative counts "
       "from the end); IndexError for an index outside [-n, n).");

PyObject *gc_py_index_add_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "index_add_rows";
    static const char *const names[] = {"out", "index", "src"};
    bufset bs = {.n = 0};
    Py_buffer *v[3];
    if (check_nargs(fn, nargs, 3) < 0 || get_bufs(&bs, fn, args, 3, names, "wrr", v) < 0)
        goto fail;
    Py_buffer *out = v[0], *ix = v[1], *src = v[2];
    Py_buffer *const fv[3] = {out, ix, src};
    const char kd = need_float_contig(fn, 3, fv, names, "=q=");
    if (!kd)
        goto fail;
    int ok = out->ndim >= 1 && src->ndim == out->ndim && ix->ndim == 1 &&
             src->shape[0] == ix->shape[0];
    for (int d = 1; ok && d < out->ndim; d++)
        ok = src->shape[d] == out->shape[d];
    if (!ok) {
        char s1[200], s2[200], s3[200];
        PyErr_Format(PyExc_ValueError,
                     "%s: out %s, index %s, src %s: index must be 1-D [m], src [m, ...] with "
                     "out's trailing dims",
                     fn, shape_str(out, s1, sizeof s1), shape_str(ix, s2, sizeof s2),
                     shape_str(src, s3, sizeof s3));
        goto fail;
    }
    if (need_no_overlap(fn, "out", out, "src", src, 0) < 0 ||
        need_no_overlap(fn, "out", out, "index", ix, 0) < 0)
        goto fail;
    const Py_ssize_t n = out->shape[0], m = ix->shape[0];
    const Py_ssize_t inner = n > 0 ? buf_nelem(out) / n : 0;
    int64_t bad = 0;
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        rc = gc_index_add_rows_f32((float *)out->buf, n, inner, (const int64_t *)ix->buf, m,
                                   (const float *)src->buf, &bad);
    else
        rc = gc_index_add_rows_f64((double *)out->buf, n, inner, (const int64_t *)ix->buf, m,
                                   (const double *)src->buf, &bad);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_Format(PyExc_IndexError, "%s: index %lld is out of range for %zd rows", fn,
                     (long long)bad, n);
        goto fail;
    }
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

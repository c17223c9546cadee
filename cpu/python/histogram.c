/* Binding of histogram.c: torch.histogram / histogramdd / histc's counting pass. */
#include "args.h"
#include "bindings.h"

GC_DOC(histogram, "histogram(x, npts, dims, edges, nedges, w, hist, mode, /)\n--\n\n"
                  "hist[b] = the number (or, with weights w, the summed weights) of the npts "
                  "points of x (row-major [npts, dims]) in bin b (row-major over the dims) of "
                  "the edges: dim d's nedges[d] >= 2 increasing edges follow dim d - 1's in "
                  "edges; bin i of a dim holds [e[i], e[i + 1]), the last also its right edge; "
                  "NaN or outside the edges in some dim: not counted.  mode: 0 binary search, 1 "
                  "PyTorch's equal-width interpolation with a local search, 2 histc's "
                  "interpolation alone (1 and 2 need finite outer edges, e[0] < e[last]).  x, "
                  "edges, w (None or npts values) and hist (writable, prod(nedges - 1) values, "
                  "apart from the rest) C-contiguous of one float format; nedges int64.  Sums in "
                  "double per fixed chunk of points, added in chunk order: the same bits on any "
                  "thread count.");

PyObject *gc_py_histogram(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "histogram";
    static const char *const names[] = {"x", "edges", "nedges", "w", "hist"};
    bufset bs = {.n = 0};
    Py_buffer *v[5];
    PyObject *bufargs[5];
    Py_ssize_t npts, dims, mode;
    if (check_nargs(fn, nargs, 8) < 0 || get_min(fn, "npts", args[1], 0, &npts) < 0 ||
        get_min(fn, "dims", args[2], 1, &dims) < 0 || get_min(fn, "mode", args[7], 0, &mode) < 0)
        return NULL;
    if (mode > GC_HIST_HISTC) {
        PyErr_Format(PyExc_ValueError, "%s: mode must be 0, 1 or 2, got %zd", fn, mode);
        return NULL;
    }
    bufargs[0] = args[0];
    bufargs[1] = args[3];
    bufargs[2] = args[4];
    bufargs[3] = args[5];
    bufargs[4] = args[6];
    char kd;
    if (get_bufs(&bs, fn, bufargs, 5, names, "rrrRw", v) < 0 ||
        !(kd = need_float_contig(fn, 5, v, names, "==q==")))
        goto fail;
    int ok = 1;
    const Py_ssize_t nx = smul(npts, dims, &ok);
    if (!ok) {
        overflow_error(fn, "the point count");
        goto fail;
    }
    if (need_elems(fn, "nedges", v[2], dims, "one per dim") < 0 ||
        need_elems(fn, "x", v[0], nx, "npts %zd, dims %zd", npts, dims) < 0 ||
        (v[3] && need_elems(fn, "w", v[3], npts, "one per point") < 0))
        goto fail;
    const int64_t *ne = v[2]->buf;
    Py_ssize_t total = 0, bins = 1;
    for (Py_ssize_t d = 0; d < dims; d++) {
        if (ne[d] < 2) {
            PyErr_Format(PyExc_ValueError, "%s: dim %zd has %lld edges; at least 2 are needed",
                         fn, d, (long long)ne[d]);
            goto fail;
        }
        total = sadd(total, (Py_ssize_t)ne[d], &ok);
        bins = smul(bins, (Py_ssize_t)ne[d] - 1, &ok);
    }
    if (!ok) {
        overflow_error(fn, "the edge or bin count");
        goto fail;
    }
    if (need_elems(fn, "edges", v[1], total, "the sum of nedges") < 0 ||
        need_elems(fn, "hist", v[4], bins, "the product of nedges - 1") < 0)
        goto fail;
    for (int i = 0; i < 4; i++) {
        if (v[i] && need_no_overlap(fn, "hist", v[4], names[i], v[i], 0) < 0)
            goto fail;
    }
    /* the kernel's bin searches stay inside the edges only for increasing (non-decreasing)
     * edges, and the interpolation needs a finite, non-empty range */
    for (Py_ssize_t d = 0, o = 0; d < dims; o += (Py_ssize_t)ne[d], d++) {
        int inc = 1, fin = 1;
        for (Py_ssize_t i = 0; i < (Py_ssize_t)ne[d]; i++) {
            const double e = kd == 'f' ? (double)((const float *)v[1]->buf)[o + i]
                                       : ((const double *)v[1]->buf)[o + i];
            const double prev = i == 0 ? e
                                       : (kd == 'f' ? (double)((const float *)v[1]->buf)[o + i - 1]
                                                    : ((const double *)v[1]->buf)[o + i - 1]);
            inc &= e >= prev; /* NaN: not increasing */
            fin &= e - e == 0.0;
            if (i == (Py_ssize_t)ne[d] - 1 && mode != GC_HIST_SEARCH) {
                const double first = kd == 'f' ? (double)((const float *)v[1]->buf)[o]
                                               : ((const double *)v[1]->buf)[o];
                fin &= first < e;
            }
        }
        if (!inc || (mode != GC_HIST_SEARCH && !fin)) {
            PyErr_Format(PyExc_ValueError,
                         "%s: dim %zd's edges must %s", fn, d,
                         !inc ? "increase monotonically (and hold no NaN)"
                              : "be finite with the first below the last (modes 1 and 2)");
            goto fail;
        }
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = kd == 'f' ? gc_histogram_f32(v[0]->buf, npts, dims, v[1]->buf, ne,
                                      v[3] ? v[3]->buf : NULL, v[4]->buf, (int)mode)
                   : gc_histogram_f64(v[0]->buf, npts, dims, v[1]->buf, ne,
                                      v[3] ? v[3]->buf : NULL, v[4]->buf, (int)mode);
    Py_END_ALLOW_THREADS
    return bufs_done(&bs, rc);
fail:
    bufs_release(&bs);
    return NULL;
}

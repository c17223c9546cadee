/* Bindings of isin.c and igemm.c: membership and integer matrix products. */
#include "args.h"
#include "bindings.h"

/* The integer (or, with floats, also float) gc_elem shared by buffers v[0..nb), or -1 with
 * TypeError set. */
static int same_elem(const char *fn, int nb, Py_buffer *const *v, const char *const *names,
                     int floats)
{
    const int t = fmt_elem(v[0]);
    const int ok = t >= 0 && t != GC_ELEM_BOOL && (floats || (t != GC_ELEM_F32 && t != GC_ELEM_F64));
    if (!ok) {
        PyErr_Format(PyExc_TypeError,
                     "%s: '%s' must be uint8, int8, int16, int32 or int64%s, got format '%s'", fn,
                     names[0], floats ? ", float32 or float64" : "", fmt_str(v[0]));
        return -1;
    }
    for (int i = 1; i < nb; i++)
        if (!fmt_same(v[0], v[i])) {
            PyErr_Format(PyExc_TypeError, "%s: '%s' has format '%s' but '%s' has '%s'; they must "
                         "match", fn, names[i], fmt_str(v[i]), names[0], fmt_str(v[0]));
            return -1;
        }
    for (int i = 0; i < nb; i++)
        if (need_contig(fn, names[i], v[i]) < 0)
            return -1;
    return t;
}

GC_DOC(isin, "isin(x, test, scratch, out, invert, /)\n--\n\n"
             "out[i] = (x[i] is among test's elements) != invert (torch.isin): x, test and "
             "scratch C-contiguous of one format (uint8, int8, int16, int32, int64, float32, "
             "float64), scratch writable with at least test's element count (it receives the "
             "sorted test elements) and apart from the others; out bool, C-contiguous, writable, "
             "x's element count, apart from x and test.  NaN is never a member.");

PyObject *gc_py_isin(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "isin";
    static const char *const names[] = {"x", "test", "scratch", "out"};
    bufset bs = {.n = 0};
    Py_buffer *v[4];
    int invert, t;
    if (check_nargs(fn, nargs, 5) < 0 || get_flag(fn, "invert", args[4], &invert) < 0)
        return NULL;
    if (get_bufs(&bs, fn, args, 4, names, "rrww", v) < 0 ||
        (t = same_elem(fn, 3, v, names, 1)) < 0 || need_kind(fn, "out", v[3], '?') < 0 ||
        need_contig(fn, "out", v[3]) < 0)
        goto fail;
    const Py_ssize_t n = buf_nelem(v[0]), m = buf_nelem(v[1]);
    if (need_elems(fn, "scratch", v[2], m, "one per test element") < 0 ||
        need_elems(fn, "out", v[3], n, "one per element of x") < 0)
        goto fail;
    const Py_ssize_t need[4] = {n, m, m, n};
    const int out[4] = {0, 0, 1, 1};
    if (need_outputs_apart(fn, 4, v, names, need, out) < 0)
        goto fail;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = gc_isin((gc_elem)t, v[0]->buf, n, v[1]->buf, m, v[2]->buf, v[3]->buf, invert);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_Format(PyExc_TypeError, "%s: unsupported element type", fn);
        goto fail;
    }
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(igemm, "igemm(a, b, c, batch, m, n, k, sa, sb, sc, /)\n--\n\n"
              "For i in range(batch): C_i = A_i @ B_i, A_i (m x k) from element i*sa of a, B_i "
              "(k x n) from i*sb of b, C_i (m x n) at i*sc of c, row-major; a, b, c C-contiguous "
              "of one integer format (uint8, int8, int16, int32, int64), c writable and apart "
              "from a and b; strides >= 0 (0 broadcasts a or b), sc >= m*n when batch > 1.  "
              "Wraps as PyTorch's CPU integer matmul: the exact sums truncated to the type.");

PyObject *gc_py_igemm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "igemm";
    static const char *const names[] = {"a", "b", "c"};
    bufset bs = {.n = 0};
    Py_buffer *v[3];
    Py_ssize_t batch, m, n, k, sa, sb, sc;
    int t;
    if (check_nargs(fn, nargs, 10) < 0 || get_min(fn, "batch", args[3], 0, &batch) < 0 ||
        get_min(fn, "m", args[4], 0, &m) < 0 || get_min(fn, "n", args[5], 0, &n) < 0 ||
        get_min(fn, "k", args[6], 0, &k) < 0 || get_min(fn, "sa", args[7], 0, &sa) < 0 ||
        get_min(fn, "sb", args[8], 0, &sb) < 0 || get_min(fn, "sc", args[9], 0, &sc) < 0)
        return NULL;
    if (get_bufs(&bs, fn, args, 3, names, "rrw", v) < 0 || (t = same_elem(fn, 3, v, names, 0)) < 0)
        goto fail;
    const int empty = need_batched_product(fn, v, batch, m, n, k, sa, sb, sc);
    if (empty < 0)
        goto fail;
    if (empty) {
        bufs_release(&bs);
        Py_RETURN_NONE;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = gc_igemm((gc_elem)t, v[0]->buf, v[1]->buf, v[2]->buf, batch, m, n, k, sa, sb, sc);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_Format(PyExc_TypeError, "%s: unsupported element type", fn);
        goto fail;
    }
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

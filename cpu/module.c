/* gpucore._cpu: Python bindings for the C kernels (see cpu/README.md for the contract).
 *
 * Every function is METH_FASTCALL with positional arguments only.  Arguments are objects
 * exporting the buffer protocol plus ints / floats.  Before a kernel runs, this file checks the
 * buffer formats (TypeError), writability, alignment, contiguity, sizes and that every element the
 * kernel touches lies inside its buffer (ValueError), and aliasing between outputs and inputs.
 * Kernels run with the GIL released; every buffer is released on every path.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "kernels.h"

/* ------------------------------------------------------------------------------------------ */
/* Names for messages                                                                          */

static const char *const unary_names[GC_UNARY_COUNT] = {
    "NEG", "ABS", "EXP", "LOG", "SQRT", "RELU", "SIGMOID", "TANH", "GELU", "GELU_TANH",
    "SIGN", "SIN", "COS", "RECIPROCAL"};
static const char *const binary_names[GC_BINARY_COUNT] = {
    "ADD", "SUB", "MUL", "DIV", "POW", "MAXIMUM", "MINIMUM", "EQ", "NE", "LT", "LE", "GT", "GE"};
static const char *const reduce_names[GC_REDUCE_COUNT] = {"SUM",    "MEAN",   "MAX",
                                                          "MIN",    "ARGMAX", "ARGMIN"};

/* ------------------------------------------------------------------------------------------ */
/* Buffer sets: every buffer acquired by a call, released together on every path               */

#define GC_MAXBUF 6

typedef struct {
    Py_buffer v[GC_MAXBUF];
    int n;
} bufset;

static void bufs_release(bufset *bs)
{
    while (bs->n > 0)
        PyBuffer_Release(&bs->v[--bs->n]);
}

/* The element stride of dimension d (NULL strides mean C order). */
static Py_ssize_t buf_stride(const Py_buffer *v, int d)
{
    if (v->strides)
        return v->strides[d];
    Py_ssize_t s = v->itemsize;
    for (int e = v->ndim - 1; e > d; e--)
        s *= v->shape[e];
    return s;
}

/* Number of elements; the exporter guarantees the product fits (its len is that times itemsize). */
static Py_ssize_t buf_nelem(const Py_buffer *v)
{
    if (v->ndim == 0 || !v->shape)
        return v->itemsize > 0 ? v->len / v->itemsize : 0;
    Py_ssize_t n = 1;
    for (int d = 0; d < v->ndim; d++) {
        if (v->shape[d] == 0)
            return 0;
    }
    for (int d = 0; d < v->ndim; d++)
        n *= v->shape[d];
    return n;
}

/* "(2, 3)" into s. */
static const char *shape_str(const Py_buffer *v, char *s, size_t cap)
{
    size_t used = 0;
    s[0] = '\0';
    used += (size_t)PyOS_snprintf(s + used, cap - used, "(");
    for (int d = 0; d < v->ndim && used < cap; d++) {
        used += (size_t)PyOS_snprintf(s + used, cap - used, d ? ", %zd" : "%zd",
                                      v->shape ? v->shape[d] : (Py_ssize_t)0);
    }
    if (used < cap)
        PyOS_snprintf(s + used, cap - used, v->ndim == 1 ? ",)" : ")");
    return s;
}

/* Memory range [lo, hi) spanned by a buffer's elements; lo == hi when it has none. */
static void buf_extent(const Py_buffer *v, const char **lo, const char **hi)
{
    const char *l = (const char *)v->buf, *h = (const char *)v->buf;
    if (buf_nelem(v) == 0) {
        *lo = *hi = l;
        return;
    }
    for (int d = 0; d < v->ndim; d++) {
        const Py_ssize_t ext = (v->shape[d] - 1) * buf_stride(v, d);
        if (ext < 0)
            l += ext;
        else
            h += ext;
    }
    *lo = l;
    *hi = h + v->itemsize;
}

static int buf_overlap(const Py_buffer *a, const Py_buffer *b)
{
    const char *alo, *ahi, *blo, *bhi;
    buf_extent(a, &alo, &ahi);
    buf_extent(b, &blo, &bhi);
    if (alo == ahi || blo == bhi)
        return 0;
    return alo < bhi && blo < ahi;
}

/* Acquires obj's buffer (strides + format) into the set.  Outputs must be writable.  Items must
 * be aligned to their size (1, 2, 4 or 8 bytes) and strides of non-trivial dims multiples of it. */
static Py_buffer *get_buf(bufset *bs, const char *fn, const char *name, PyObject *obj,
                          int writable)
{
    Py_buffer *v = &bs->v[bs->n];
    if (!PyObject_CheckBuffer(obj)) {
        PyErr_Format(PyExc_TypeError,
                     "%s: argument '%s' must support the buffer protocol (e.g. a numpy array), "
                     "got %.100s",
                     fn, name, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    if (PyObject_GetBuffer(obj, v, PyBUF_RECORDS_RO) < 0) {
#if PY_VERSION_HEX >= 0x030C0000
        PyObject *ev = PyErr_GetRaisedException();
#else
        PyObject *et, *ev, *tb;
        PyErr_Fetch(&et, &ev, &tb);
        PyErr_NormalizeException(&et, &ev, &tb);
        Py_XDECREF(et);
        Py_XDECREF(tb);
#endif
        PyObject *msg = ev ? PyObject_Str(ev) : NULL;
        Py_XDECREF(ev);
        if (!msg)
            PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "%s: cannot get a strided buffer from argument '%s' (%.100s): %S", fn, name,
                     Py_TYPE(obj)->tp_name, msg ? msg : Py_None);
        Py_XDECREF(msg);
        return NULL;
    }
    bs->n++;
    if (writable && v->readonly) {
        PyErr_Format(PyExc_ValueError, "%s: output '%s' is read-only; pass a writable buffer", fn,
                     name);
        return NULL;
    }
    if (v->ndim > 0 && !v->shape) {
        PyErr_Format(PyExc_TypeError, "%s: argument '%s' exports no shape", fn, name);
        return NULL;
    }
    const Py_ssize_t isz = v->itemsize;
    if (isz == 2 || isz == 4 || isz == 8) {
        if ((uintptr_t)v->buf % (uintptr_t)isz != 0) {
            PyErr_Format(PyExc_ValueError,
                         "%s: '%s' is not aligned to its item size %zd; pass an aligned array", fn,
                         name, isz);
            return NULL;
        }
        for (int d = 0; d < v->ndim; d++) {
            if (v->shape[d] > 1 && buf_stride(v, d) % isz != 0) {
                PyErr_Format(PyExc_ValueError,
                             "%s: '%s' has stride %zd in dim %d, not a multiple of its item size "
                             "%zd",
                             fn, name, buf_stride(v, d), d, isz);
                return NULL;
            }
        }
    }
    return v;
}

/* ------------------------------------------------------------------------------------------ */
/* Formats                                                                                     */

/* The format with a native byte-order prefix ('@', '=', native '<' / '>') stripped. */
static const char *fmt_body(const Py_buffer *v)
{
    const char *f = v->format ? v->format : "B";
#if PY_LITTLE_ENDIAN
    if (*f == '@' || *f == '=' || *f == '<')
        f++;
#else
    if (*f == '@' || *f == '=' || *f == '>' || *f == '!')
        f++;
#endif
    return f;
}

/* Canonical one-letter type code: 'f' float32, 'd' float64, '?' bool, 'q' int64, 'Q' uint64,
 * 'i' int32, 'I' uint32, other single letters as given; 0 for formats we do not understand
 * (structs, non-native byte order). */
static char fmt_code(const Py_buffer *v)
{
    const char *f = fmt_body(v);
    if (f[0] == '\0' || f[1] != '\0')
        return 0;
    const char c = f[0];
    const Py_ssize_t isz = v->itemsize;
    if ((c == 'l' || c == 'q') && isz == 8)
        return 'q';
    if ((c == 'L' || c == 'Q') && isz == 8)
        return 'Q';
    if ((c == 'l' || c == 'i') && isz == 4)
        return 'i';
    if ((c == 'L' || c == 'I') && isz == 4)
        return 'I';
    return c;
}

/* Items that may be moved bytewise (copy, where): anything without object pointers ('O' needs
 * reference counting). */
static int fmt_is_plain(const Py_buffer *v)
{
    return strchr(v->format ? v->format : "B", 'O') == NULL;
}

/* Same element type for a bytewise move: same canonical code, or the same format string. */
static int fmt_same(const Py_buffer *a, const Py_buffer *b)
{
    if (a->itemsize != b->itemsize)
        return 0;
    const char ca = fmt_code(a), cb = fmt_code(b);
    if (ca || cb)
        return ca == cb;
    return strcmp(fmt_body(a), fmt_body(b)) == 0;
}

static const char *fmt_str(const Py_buffer *v)
{
    return v->format ? v->format : "B";
}

/* Expects a float32 / float64 buffer; returns 'f' or 'd', or 0 with TypeError set. */
static char float_kind(const char *fn, const char *name, const Py_buffer *v)
{
    const char c = fmt_code(v);
    if ((c == 'f' && v->itemsize == 4) || (c == 'd' && v->itemsize == 8))
        return c;
    PyErr_Format(PyExc_TypeError,
                 "%s: '%s' must be float32 (format 'f') or float64 (format 'd'), got format '%s' "
                 "with item size %zd",
                 fn, name, fmt_str(v), v->itemsize);
    return 0;
}

static const char *kind_name(char k)
{
    switch (k) {
    case 'f': return "float32 ('f')";
    case 'd': return "float64 ('d')";
    case '?': return "bool ('?')";
    case 'q': return "int64 ('q' or 'l', 8 bytes)";
    case 'I': return "uint32 ('I')";
    default: return "?";
    }
}

static Py_ssize_t kind_size(char k)
{
    switch (k) {
    case 'f': return 4;
    case 'd': return 8;
    case '?': return 1;
    case 'q': return 8;
    case 'I': return 4;
    default: return 0;
    }
}

/* Expects exactly type code k; TypeError otherwise. */
static int need_kind(const char *fn, const char *name, const Py_buffer *v, char k)
{
    if (fmt_code(v) == k && v->itemsize == kind_size(k))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s: '%s' must be %s, got format '%s' with item size %zd", fn,
                 name, kind_name(k), fmt_str(v), v->itemsize);
    return -1;
}

static int need_contig(const char *fn, const char *name, const Py_buffer *v)
{
    if (PyBuffer_IsContiguous(v, 'C'))
        return 0;
    char s[200];
    PyErr_Format(PyExc_ValueError,
                 "%s: '%s' (shape %s) must be C-contiguous; pass a contiguous copy", fn, name,
                 shape_str(v, s, sizeof s));
    return -1;
}

/* v must hold at least need elements; the context message (printf format + args) is formatted
 * only on failure. */
static int need_elems(const char *fn, const char *name, const Py_buffer *v, Py_ssize_t need,
                      const char *what_fmt, ...)
{
    const Py_ssize_t have = buf_nelem(v);
    if (have >= need)
        return 0;
    char what[320];
    va_list ap;
    va_start(ap, what_fmt);
    PyOS_vsnprintf(what, sizeof what, what_fmt, ap);
    va_end(ap);
    PyErr_Format(PyExc_ValueError, "%s: '%s' holds %zd elements but %zd are needed (%s)", fn, name,
                 have, need, what);
    return -1;
}

/* out must not share memory with in, except exactly (same start) when allow_same. */
static int need_no_overlap(const char *fn, const char *oname, const Py_buffer *out,
                           const char *iname, const Py_buffer *in, int allow_same)
{
    if (!buf_overlap(out, in))
        return 0;
    if (allow_same && out->buf == in->buf)
        return 0;
    PyErr_Format(PyExc_ValueError,
                 allow_same ? "%s: '%s' overlaps '%s' without being the same buffer; pass the "
                              "same buffer or a disjoint one"
                            : "%s: '%s' overlaps '%s'; the output must not share memory with "
                              "that input",
                 fn, oname, iname);
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Scalars                                                                                     */

static int check_nargs(const char *fn, Py_ssize_t nargs, Py_ssize_t want)
{
    if (nargs == want)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s() takes exactly %zd positional arguments (%zd given)", fn,
                 want, nargs);
    return -1;
}

static int get_ssize(const char *fn, const char *name, PyObject *o, Py_ssize_t *out)
{
    PyObject *idx = PyNumber_Index(o);
    if (!idx) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s: '%s' must be an int, got %.100s", fn, name,
                         Py_TYPE(o)->tp_name);
        }
        return -1;
    }
    const Py_ssize_t v = PyLong_AsSsize_t(idx);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: '%s' = %S does not fit in a Py_ssize_t", fn, name,
                     idx);
        Py_DECREF(idx);
        return -1;
    }
    Py_DECREF(idx);
    *out = v;
    return 0;
}

/* An int >= lo. */
static int get_min(const char *fn, const char *name, PyObject *o, Py_ssize_t lo, Py_ssize_t *out)
{
    if (get_ssize(fn, name, o, out) < 0)
        return -1;
    if (*out < lo) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be >= %zd, got %zd", fn, name, lo, *out);
        return -1;
    }
    return 0;
}

static int get_flag(const char *fn, const char *name, PyObject *o, int *out)
{
    Py_ssize_t v;
    if (get_ssize(fn, name, o, &v) < 0)
        return -1;
    if (v != 0 && v != 1) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be 0 or 1, got %zd", fn, name, v);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int get_op(const char *fn, PyObject *o, int count, const char *prefix, int *out)
{
    Py_ssize_t v;
    if (get_ssize(fn, "op", o, &v) < 0)
        return -1;
    if (v < 0 || v >= count) {
        PyErr_Format(PyExc_ValueError,
                     "%s: unknown op %zd; expected one of the %s* constants (0..%d)", fn, v,
                     prefix, count - 1);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int get_double(const char *fn, const char *name, PyObject *o, double *out)
{
    const double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: '%s' must be a real number, got %.100s", fn, name,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    *out = v;
    return 0;
}

/* An int in [0, 2**bits). */
static int get_unsigned(const char *fn, const char *name, PyObject *o, int bits, uint64_t *out)
{
    PyObject *idx = PyNumber_Index(o);
    if (!idx) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s: '%s' must be an int, got %.100s", fn, name,
                         Py_TYPE(o)->tp_name);
        }
        return -1;
    }
    const unsigned long long v = PyLong_AsUnsignedLongLong(idx);
    const int bad = (v == (unsigned long long)-1 && PyErr_Occurred()) ||
                    (bits < 64 && v >> bits != 0);
    if (bad) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: '%s' = %S must be in [0, 2**%d)", fn, name, idx, bits);
        Py_DECREF(idx);
        return -1;
    }
    Py_DECREF(idx);
    *out = (uint64_t)v;
    return 0;
}

static int get_i64(const char *fn, const char *name, PyObject *o, int64_t *out)
{
    PyObject *idx = PyNumber_Index(o);
    if (!idx) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s: '%s' must be an int, got %.100s", fn, name,
                         Py_TYPE(o)->tp_name);
        }
        return -1;
    }
    const long long v = PyLong_AsLongLong(idx);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s: '%s' = %S does not fit in int64", fn, name, idx);
        Py_DECREF(idx);
        return -1;
    }
    Py_DECREF(idx);
    *out = (int64_t)v;
    return 0;
}

/* Overflow-checked arithmetic on non-negative sizes; *ok is cleared on overflow. */
static Py_ssize_t smul(Py_ssize_t a, Py_ssize_t b, int *ok)
{
    if (a < 0 || b < 0 || (a != 0 && b > PY_SSIZE_T_MAX / a)) {
        *ok = 0;
        return 0;
    }
    return a * b;
}

static Py_ssize_t sadd(Py_ssize_t a, Py_ssize_t b, int *ok)
{
    if (a < 0 || b < 0 || a > PY_SSIZE_T_MAX - b) {
        *ok = 0;
        return 0;
    }
    return a + b;
}

static int overflow_error(const char *fn, const char *what)
{
    PyErr_Format(PyExc_ValueError, "%s: sizes overflow (%s)", fn, what);
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Broadcast iteration spaces                                                                  */

/* Sets operand o of it (whose shape is out's, ndim nd) from in: shapes right-aligned; a dim of
 * in equal to out's keeps its stride, a dim of 1 broadcasts (stride 0). */
static int iter_broadcast(const char *fn, const char *name, const Py_buffer *in,
                          const Py_buffer *out, gc_iter *it, int o)
{
    const int nd = out->ndim, ni = in->ndim;
    char s1[200], s2[200];
    if (ni > nd) {
        PyErr_Format(PyExc_ValueError,
                     "%s: '%s' of shape %s has more dims than out of shape %s; inputs must "
                     "broadcast to out's shape",
                     fn, name, shape_str(in, s1, sizeof s1), shape_str(out, s2, sizeof s2));
        return -1;
    }
    for (int d = 0; d < nd; d++) {
        const int di = d - (nd - ni);
        Py_ssize_t st = 0;
        if (di >= 0) {
            const Py_ssize_t si = in->shape[di], so = out->shape[d];
            if (si == so) {
                st = so > 1 ? buf_stride(in, di) / in->itemsize : 0;
            } else if (si != 1) {
                PyErr_Format(PyExc_ValueError,
                             "%s: cannot broadcast '%s' of shape %s to out shape %s (dim %d is "
                             "%zd, expected %zd or 1)",
                             fn, name, shape_str(in, s1, sizeof s1),
                             shape_str(out, s2, sizeof s2), di, si, so);
                return -1;
            }
        }
        it->stride[o][d] = st;
    }
    return 0;
}

static int iter_init_out(const char *fn, const Py_buffer *out, gc_iter *it, int o)
{
    if (out->ndim > GC_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "%s: out has %d dims; at most %d are supported", fn,
                     out->ndim, GC_MAX_DIMS);
        return -1;
    }
    it->ndim = out->ndim;
    Py_ssize_t st = 1;
    for (int d = out->ndim - 1; d >= 0; d--) {
        it->shape[d] = out->shape[d];
        it->stride[o][d] = out->shape[d] > 1 ? st : 0;
        st *= out->shape[d];
    }
    return 0;
}

/* Drops size-1 dims and merges dims that are contiguous for every operand.  Requires every
 * shape > 0.  The result has ndim >= 1. */
static void iter_collapse(gc_iter *it, int nops)
{
    gc_iter r;
    memset(&r, 0, sizeof r);
    int nd = 0;
    for (int d = 0; d < it->ndim; d++) {
        if (it->shape[d] == 1)
            continue;
        if (nd > 0) {
            int merge = 1;
            for (int o = 0; o < nops; o++)
                merge &= r.stride[o][nd - 1] == it->stride[o][d] * it->shape[d];
            if (merge) {
                r.shape[nd - 1] *= it->shape[d];
                for (int o = 0; o < nops; o++)
                    r.stride[o][nd - 1] = it->stride[o][d];
                continue;
            }
        }
        r.shape[nd] = it->shape[d];
        for (int o = 0; o < nops; o++)
            r.stride[o][nd] = it->stride[o][d];
        nd++;
    }
    if (nd == 0) {
        r.shape[0] = 1;
        nd = 1;
    }
    r.ndim = nd;
    *it = r;
}

/* An input sharing memory with the (contiguous) output is fine only when it is the very same
 * elements: same start and, on every non-trivial dim, out's strides. */
static int iter_alias_ok(const char *fn, const char *iname, const Py_buffer *in,
                         const Py_buffer *out, const gc_iter *it, int oi, int oo)
{
    if (!buf_overlap(in, out))
        return 0;
    int same = in->buf == out->buf && in->itemsize == out->itemsize;
    for (int d = 0; same && d < it->ndim; d++)
        same = it->shape[d] == 1 || it->stride[oi][d] == it->stride[oo][d];
    if (same)
        return 0;
    PyErr_Format(PyExc_ValueError,
                 "%s: out overlaps '%s' without being the same elements; out may alias an input "
                 "only when that input has out's shape and is contiguous",
                 fn, iname);
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* gemm                                                                                        */

PyDoc_STRVAR(gemm_doc,
             "gemm(a, b, c, batch, m, n, k, trans_a, trans_b, alpha, beta, sa, sb, sc, /)\n--\n\n"
             "For i in range(batch): C_i = alpha * op(A_i) @ op(B_i) + beta * C_i, A_i starting "
             "at element i*sa of a (likewise sb, sc; 0 broadcasts; batches run in order).\n"
             "op(A) is m x k, stored k x m when trans_a; op(B) is k x n, stored n x k when "
             "trans_b.  beta == 0 never reads C.");

PyDoc_STRVAR(gemm_ex_doc,
             "gemm_ex(a, b, c, batch, m, n, k, trans_a, trans_b, alpha, beta, sa, sb, sc, bias, "
             "act, /)\n--\n\n"
             "gemm with a fused epilogue: C_i = act(alpha * op(A_i) @ op(B_i) + beta * C_i + bias)."
             "  bias is None or n values (same float format) added to every row; act is -1 (none) "
             "or UNARY_RELU, UNARY_SIGMOID, UNARY_TANH, UNARY_GELU or UNARY_GELU_TANH.");

/* gemm (14 args) and gemm_ex (16 args: + bias, act). */
static PyObject *gemm_impl(const char *fn, PyObject *const *args, Py_ssize_t nargs, int ex)
{
    bufset bs = {.n = 0};
    Py_ssize_t batch, m, n, k, sa, sb, sc, act = -1;
    int ta, tb;
    double alpha, beta;
    if (check_nargs(fn, nargs, ex ? 16 : 14) < 0)
        return NULL;
    if (get_min(fn, "batch", args[3], 0, &batch) < 0 || get_min(fn, "m", args[4], 0, &m) < 0 ||
        get_min(fn, "n", args[5], 0, &n) < 0 || get_min(fn, "k", args[6], 0, &k) < 0 ||
        get_flag(fn, "trans_a", args[7], &ta) < 0 || get_flag(fn, "trans_b", args[8], &tb) < 0 ||
        get_double(fn, "alpha", args[9], &alpha) < 0 ||
        get_double(fn, "beta", args[10], &beta) < 0 || get_min(fn, "sa", args[11], 0, &sa) < 0 ||
        get_min(fn, "sb", args[12], 0, &sb) < 0 || get_min(fn, "sc", args[13], 0, &sc) < 0)
        return NULL;
    if (ex) {
        if (get_ssize(fn, "act", args[15], &act) < 0)
            return NULL;
        if (act != -1 && act != GC_UNARY_RELU && act != GC_UNARY_SIGMOID &&
            act != GC_UNARY_TANH && act != GC_UNARY_GELU && act != GC_UNARY_GELU_TANH) {
            PyErr_Format(PyExc_ValueError,
                         "%s: 'act' must be -1 (none) or one of UNARY_RELU, UNARY_SIGMOID, "
                         "UNARY_TANH, UNARY_GELU, UNARY_GELU_TANH; got %zd",
                         fn, act);
            return NULL;
        }
    }

    Py_buffer *a = get_buf(&bs, fn, "a", args[0], 0);
    Py_buffer *b = a ? get_buf(&bs, fn, "b", args[1], 0) : NULL;
    Py_buffer *c = b ? get_buf(&bs, fn, "c", args[2], 1) : NULL;
    if (!c)
        goto fail;
    Py_buffer *bias = NULL;
    if (ex && args[14] != Py_None) {
        bias = get_buf(&bs, fn, "bias", args[14], 0);
        if (!bias)
            goto fail;
    }
    const char kd = float_kind(fn, "a", a);
    if (!kd || need_kind(fn, "b", b, kd) < 0 || need_kind(fn, "c", c, kd) < 0 ||
        (bias && need_kind(fn, "bias", bias, kd) < 0))
        goto fail;
    if (need_contig(fn, "a", a) < 0 || need_contig(fn, "b", b) < 0 || need_contig(fn, "c", c) < 0 ||
        (bias && need_contig(fn, "bias", bias) < 0))
        goto fail;

    /* elements touched: A_i spans m*k from i*sa, the last one ends at (batch-1)*sa + m*k */
    int ok = 1;
    const Py_ssize_t mk = smul(m, k, &ok), kn = smul(k, n, &ok), mn = smul(m, n, &ok);
    const Py_ssize_t last = batch > 0 ? batch - 1 : 0;
    const Py_ssize_t need_a = (batch > 0 && mk > 0) ? sadd(smul(last, sa, &ok), mk, &ok) : 0;
    const Py_ssize_t need_b = (batch > 0 && kn > 0) ? sadd(smul(last, sb, &ok), kn, &ok) : 0;
    const Py_ssize_t need_c = (batch > 0 && mn > 0) ? sadd(smul(last, sc, &ok), mn, &ok) : 0;
    if (!ok) {
        overflow_error(fn, "batch, m, n, k and the batch strides");
        goto fail;
    }
#define WHAT                                                                                      \
    "batch=%zd, m=%zd, n=%zd, k=%zd, trans_a=%d, trans_b=%d, sa=%zd, sb=%zd, sc=%zd", batch, m, n, \
        k, ta, tb, sa, sb, sc
    if (need_elems(fn, "a", a, need_a, WHAT) < 0 || need_elems(fn, "b", b, need_b, WHAT) < 0 ||
        need_elems(fn, "c", c, need_c, WHAT) < 0 ||
        (bias && need_c > 0 && need_elems(fn, "bias", bias, n, WHAT) < 0))
        goto fail;
#undef WHAT
    if (need_c > 0 && ((need_a > 0 && need_no_overlap(fn, "c", c, "a", a, 0) < 0) ||
                       (need_b > 0 && need_no_overlap(fn, "c", c, "b", b, 0) < 0) ||
                       (bias && need_no_overlap(fn, "c", c, "bias", bias, 0) < 0)))
        goto fail;

    int rc = 0;
    const int iact = (int)act;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        rc = gc_gemm_ex_f32((const float *)a->buf, (const float *)b->buf, (float *)c->buf, batch,
                            m, n, k, ta, tb, (float)alpha, (float)beta, sa, sb, sc,
                            bias ? (const float *)bias->buf : NULL, iact);
    else
        rc = gc_gemm_ex_f64((const double *)a->buf, (const double *)b->buf, (double *)c->buf,
                            batch, m, n, k, ta, tb, alpha, beta, sa, sb, sc,
                            bias ? (const double *)bias->buf : NULL, iact);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

static PyObject *py_gemm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return gemm_impl("gemm", args, nargs, 0);
}

static PyObject *py_gemm_ex(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return gemm_impl("gemm_ex", args, nargs, 1);
}

/* ------------------------------------------------------------------------------------------ */
/* info, threads                                                                               */

PyDoc_STRVAR(info_doc,
             "info(, /)\n--\n\n"
             "What the extension runs on: {'isa': selected instruction set, 'available': the "
             "sets this CPU and build support (best first), 'threads': thread-pool size, "
             "'caches': {'l1d', 'l2', 'l3' (bytes), 'source'}, 'gemm': {'float32': {'kernel', "
             "'mr', 'nr', 'mc', 'kc', 'nc'}, 'float64': {...}}}.");

static PyObject *blocking_dict(const gc_blocking *b, const char *kernel)
{
    return Py_BuildValue("{s:s,s:i,s:i,s:n,s:n,s:n}", "kernel", kernel, "mr", b->mr, "nr", b->nr,
                         "mc", (Py_ssize_t)b->mc, "kc", (Py_ssize_t)b->kc, "nc",
                         (Py_ssize_t)b->nc);
}

static PyObject *py_info(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)args;
    if (check_nargs("info", nargs, 0) < 0)
        return NULL;
    const int mask = gc_isa_supported_mask();
    PyObject *avail = PyList_New(0);
    if (!avail)
        return NULL;
    for (int i = GC_ISA_COUNT - 1; i >= 0; i--) {
        if (!(mask & (1 << i)))
            continue;
        PyObject *s = PyUnicode_FromString(gc_isa_names[i]);
        if (!s || PyList_Append(avail, s) < 0) {
            Py_XDECREF(s);
            Py_DECREF(avail);
            return NULL;
        }
        Py_DECREF(s);
    }
    PyObject *f32 = blocking_dict(&gc_blk_f32, gc_isa.ukr_f32_name);
    PyObject *f64 = f32 ? blocking_dict(&gc_blk_f64, gc_isa.ukr_f64_name) : NULL;
    PyObject *r = NULL;
    if (f64)
        r = Py_BuildValue("{s:s,s:O,s:i,s:{s:l,s:l,s:l,s:s},s:{s:O,s:O}}", "isa", gc_isa.name,
                          "available", avail, "threads", gc_pool_size(), "caches", "l1d",
                          gc_cache_info.l1d, "l2", gc_cache_info.l2, "l3", gc_cache_info.l3,
                          "source", gc_cache_info.source, "gemm", "float32", f32, "float64",
                          f64);
    Py_DECREF(avail);
    Py_XDECREF(f32);
    Py_XDECREF(f64);
    return r;
}

PyDoc_STRVAR(set_num_threads_doc,
             "set_num_threads(n, /)\n--\n\n"
             "Sets the thread-pool size (n >= 1; the default is GPUCORE_NUM_THREADS or the CPUs "
             "this process may use).  Results do not depend on it.");

static PyObject *py_set_num_threads(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    Py_ssize_t n;
    if (check_nargs("set_num_threads", nargs, 1) < 0 ||
        get_min("set_num_threads", "n", args[0], 1, &n) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    gc_pool_set_size(n > 4096 ? 4096 : (int)n);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------------------------ */
/* unary                                                                                       */

PyDoc_STRVAR(unary_doc, "unary(op, x, out, /)\n--\n\n"
                        "out = f(x) elementwise (op: a UNARY_* constant); x and out C-contiguous, "
                        "same length and float format; out may be x.");

static PyObject *py_unary(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "unary";
    bufset bs = {.n = 0};
    int op;
    if (check_nargs(fn, nargs, 3) < 0 || get_op(fn, args[0], GC_UNARY_COUNT, "UNARY_", &op) < 0)
        return NULL;
    Py_buffer *x = get_buf(&bs, fn, "x", args[1], 0);
    Py_buffer *out = x ? get_buf(&bs, fn, "out", args[2], 1) : NULL;
    if (!out)
        goto fail;
    const char kd = float_kind(fn, "x", x);
    if (!kd || need_kind(fn, "out", out, kd) < 0 || need_contig(fn, "x", x) < 0 ||
        need_contig(fn, "out", out) < 0)
        goto fail;
    const Py_ssize_t nx = buf_nelem(x), no = buf_nelem(out);
    if (nx != no) {
        PyErr_Format(PyExc_ValueError,
                     "unary(%s): x has %zd elements but out has %zd; they must be equal",
                     unary_names[op], nx, no);
        goto fail;
    }
    if (need_no_overlap(fn, "out", out, "x", x, 1) < 0)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_unary_f32(op, (const float *)x->buf, (float *)out->buf, nx);
    else
        gc_unary_f64(op, (const double *)x->buf, (double *)out->buf, nx);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

PyDoc_STRVAR(unary_backward_doc,
             "unary_backward(op, grad, saved, out, /)\n--\n\n"
             "out = grad * f'(...): RELU (saved = x), SIGMOID (saved = y), TANH (saved = y), "
             "GELU and GELU_TANH (saved = x).  All C-contiguous, same length and float format.");

static PyObject *py_unary_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "unary_backward";
    bufset bs = {.n = 0};
    int op;
    if (check_nargs(fn, nargs, 4) < 0 || get_op(fn, args[0], GC_UNARY_COUNT, "UNARY_", &op) < 0)
        return NULL;
    if (op != GC_UNARY_RELU && op != GC_UNARY_SIGMOID && op != GC_UNARY_TANH &&
        op != GC_UNARY_GELU && op != GC_UNARY_GELU_TANH) {
        PyErr_Format(PyExc_ValueError,
                     "unary_backward: op %d (%s) has no backward kernel; supported: RELU, "
                     "SIGMOID, TANH, GELU, GELU_TANH",
                     op, unary_names[op]);
        return NULL;
    }
    Py_buffer *g = get_buf(&bs, fn, "grad", args[1], 0);
    Py_buffer *s = g ? get_buf(&bs, fn, "saved", args[2], 0) : NULL;
    Py_buffer *out = s ? get_buf(&bs, fn, "out", args[3], 1) : NULL;
    if (!out)
        goto fail;
    const char kd = float_kind(fn, "grad", g);
    if (!kd || need_kind(fn, "saved", s, kd) < 0 || need_kind(fn, "out", out, kd) < 0 ||
        need_contig(fn, "grad", g) < 0 || need_contig(fn, "saved", s) < 0 ||
        need_contig(fn, "out", out) < 0)
        goto fail;
    const Py_ssize_t n = buf_nelem(g);
    if (buf_nelem(s) != n || buf_nelem(out) != n) {
        PyErr_Format(PyExc_ValueError,
                     "unary_backward(%s): grad, saved and out must have equal lengths, got %zd, "
                     "%zd and %zd",
                     unary_names[op], n, buf_nelem(s), buf_nelem(out));
        goto fail;
    }
    if (need_no_overlap(fn, "out", out, "grad", g, 1) < 0 ||
        need_no_overlap(fn, "out", out, "saved", s, 1) < 0)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_unary_backward_f32(op, (const float *)g->buf, (const float *)s->buf, (float *)out->buf,
                              n);
    else
        gc_unary_backward_f64(op, (const double *)g->buf, (const double *)s->buf,
                              (double *)out->buf, n);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* binary, where                                                                               */

PyDoc_STRVAR(binary_doc,
             "binary(op, a, b, out, /)\n--\n\n"
             "out = a op b with numpy broadcasting (op: a BINARY_* constant).  a, b: same float "
             "format, any strides, ndim <= out.ndim; out C-contiguous, ndim <= 8, a/b's format "
             "for arithmetic ops and bool for comparisons.");

static PyObject *py_binary(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "binary";
    bufset bs = {.n = 0};
    int op;
    if (check_nargs(fn, nargs, 4) < 0 ||
        get_op(fn, args[0], GC_BINARY_COUNT, "BINARY_", &op) < 0)
        return NULL;
    Py_buffer *a = get_buf(&bs, fn, "a", args[1], 0);
    Py_buffer *b = a ? get_buf(&bs, fn, "b", args[2], 0) : NULL;
    Py_buffer *out = b ? get_buf(&bs, fn, "out", args[3], 1) : NULL;
    if (!out)
        goto fail;
    const char kd = float_kind(fn, "a", a);
    if (!kd || need_kind(fn, "b", b, kd) < 0 ||
        need_kind(fn, "out", out, op >= GC_BINARY_EQ ? '?' : kd) < 0 ||
        need_contig(fn, "out", out) < 0)
        goto fail;
    gc_iter it;
    memset(&it, 0, sizeof it);
    if (iter_init_out(fn, out, &it, 2) < 0 || iter_broadcast(fn, "a", a, out, &it, 0) < 0 ||
        iter_broadcast(fn, "b", b, out, &it, 1) < 0 ||
        iter_alias_ok(fn, "a", a, out, &it, 0, 2) < 0 ||
        iter_alias_ok(fn, "b", b, out, &it, 1, 2) < 0)
        goto fail;
    if (buf_nelem(out) > 0) {
        iter_collapse(&it, 3);
        Py_BEGIN_ALLOW_THREADS
        if (kd == 'f')
            gc_binary_f32(op, &it, (const float *)a->buf, (const float *)b->buf, out->buf);
        else
            gc_binary_f64(op, &it, (const double *)a->buf, (const double *)b->buf, out->buf);
        Py_END_ALLOW_THREADS
    }
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

PyDoc_STRVAR(where_doc, "where(cond, a, b, out, /)\n--\n\n"
                        "out = cond ? a : b with broadcasting as binary; cond bool; a, b and out "
                        "the same format (any item size 1, 2, 4 or 8); out C-contiguous.");

static PyObject *py_where(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "where";
    bufset bs = {.n = 0};
    if (check_nargs(fn, nargs, 4) < 0)
        return NULL;
    Py_buffer *c = get_buf(&bs, fn, "cond", args[0], 0);
    Py_buffer *a = c ? get_buf(&bs, fn, "a", args[1], 0) : NULL;
    Py_buffer *b = a ? get_buf(&bs, fn, "b", args[2], 0) : NULL;
    Py_buffer *out = b ? get_buf(&bs, fn, "out", args[3], 1) : NULL;
    if (!out)
        goto fail;
    if (need_kind(fn, "cond", c, '?') < 0)
        goto fail;
    const Py_ssize_t isz = a->itemsize;
    if (!fmt_is_plain(a) || !(isz == 1 || isz == 2 || isz == 4 || isz == 8)) {
        PyErr_Format(PyExc_TypeError,
                     "where: 'a' must be a plain (no objects) format of item size 1, 2, 4 or 8, "
                     "got format '%s' with item size %zd",
                     fmt_str(a), isz);
        goto fail;
    }
    if (!fmt_same(a, b) || !fmt_same(a, out)) {
        PyErr_Format(PyExc_TypeError,
                     "where: a, b and out must have the same format, got '%s', '%s' and '%s'",
                     fmt_str(a), fmt_str(b), fmt_str(out));
        goto fail;
    }
    if (need_contig(fn, "out", out) < 0)
        goto fail;
    gc_iter it;
    memset(&it, 0, sizeof it);
    if (iter_init_out(fn, out, &it, 3) < 0 || iter_broadcast(fn, "cond", c, out, &it, 0) < 0 ||
        iter_broadcast(fn, "a", a, out, &it, 1) < 0 ||
        iter_broadcast(fn, "b", b, out, &it, 2) < 0 ||
        iter_alias_ok(fn, "cond", c, out, &it, 0, 3) < 0 ||
        iter_alias_ok(fn, "a", a, out, &it, 1, 3) < 0 ||
        iter_alias_ok(fn, "b", b, out, &it, 2, 3) < 0)
        goto fail;
    if (buf_nelem(out) > 0) {
        iter_collapse(&it, 4);
        Py_BEGIN_ALLOW_THREADS
        gc_where(&it, (const unsigned char *)c->buf, a->buf, b->buf, out->buf, (size_t)isz);
        Py_END_ALLOW_THREADS
    }
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* reduce, softmax, cross-entropy                                                              */

/* outer*n*inner and outer*inner, overflow-checked. */
static int three_axis_sizes(const char *fn, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner,
                            Py_ssize_t *total, Py_ssize_t *rows)
{
    int ok = 1;
    *rows = smul(outer, inner, &ok);
    *total = smul(*rows, n, &ok);
    if (!ok)
        return overflow_error(fn, "outer * n * inner");
    return 0;
}

PyDoc_STRVAR(reduce_doc,
             "reduce(op, x, out, outer, n, inner, /)\n--\n\n"
             "Reduces the middle axis of C-contiguous x viewed as [outer, n, inner] into out "
             "[outer, inner] (op: a REDUCE_* constant).  SUM, MEAN, MAX, MIN write x's format; "
             "ARGMAX, ARGMIN write int64.  n == 0 only for SUM (0) and MEAN (nan).");

static PyObject *py_reduce(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "reduce";
    bufset bs = {.n = 0};
    int op;
    Py_ssize_t outer, n, inner, total, rows;
    if (check_nargs(fn, nargs, 6) < 0 ||
        get_op(fn, args[0], GC_REDUCE_COUNT, "REDUCE_", &op) < 0 ||
        get_min(fn, "outer", args[3], 0, &outer) < 0 || get_min(fn, "n", args[4], 0, &n) < 0 ||
        get_min(fn, "inner", args[5], 0, &inner) < 0 ||
        three_axis_sizes(fn, outer, n, inner, &total, &rows) < 0)
        return NULL;
    if (n == 0 && op != GC_REDUCE_SUM && op != GC_REDUCE_MEAN) {
        PyErr_Format(PyExc_ValueError,
                     "reduce(%s): n == 0 (outer=%zd, inner=%zd) has no result; only SUM and MEAN "
                     "accept an empty axis",
                     reduce_names[op], outer, inner);
        return NULL;
    }
    Py_buffer *x = get_buf(&bs, fn, "x", args[1], 0);
    Py_buffer *out = x ? get_buf(&bs, fn, "out", args[2], 1) : NULL;
    if (!out)
        goto fail;
    const char kd = float_kind(fn, "x", x);
    const int is_arg = op == GC_REDUCE_ARGMAX || op == GC_REDUCE_ARGMIN;
    if (!kd || need_kind(fn, "out", out, is_arg ? 'q' : kd) < 0 || need_contig(fn, "x", x) < 0 ||
        need_contig(fn, "out", out) < 0)
        goto fail;
#define WHAT "outer=%zd, n=%zd, inner=%zd", outer, n, inner
    if (need_elems(fn, "x", x, total, WHAT) < 0 || need_elems(fn, "out", out, rows, WHAT) < 0)
        goto fail;
#undef WHAT
    if (rows > 0 && total > 0 && need_no_overlap(fn, "out", out, "x", x, 0) < 0)
        goto fail;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        rc = gc_reduce_f32(op, (const float *)x->buf, out->buf, outer, n, inner);
    else
        rc = gc_reduce_f64(op, (const double *)x->buf, out->buf, outer, n, inner);
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

PyDoc_STRVAR(softmax_doc,
             "softmax(x, out, outer, n, inner, log, /)\n--\n\n"
             "Softmax (log=0) or log-softmax (log=1) over the middle axis of [outer, n, inner]; "
             "x and out C-contiguous, same float format; out may be x.");

static PyObject *py_softmax(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "softmax";
    bufset bs = {.n = 0};
    int lg;
    Py_ssize_t outer, n, inner, total, rows;
    if (check_nargs(fn, nargs, 6) < 0 || get_min(fn, "outer", args[2], 0, &outer) < 0 ||
        get_min(fn, "n", args[3], 0, &n) < 0 || get_min(fn, "inner", args[4], 0, &inner) < 0 ||
        get_flag(fn, "log", args[5], &lg) < 0 ||
        three_axis_sizes(fn, outer, n, inner, &total, &rows) < 0)
        return NULL;
    Py_buffer *x = get_buf(&bs, fn, "x", args[0], 0);
    Py_buffer *out = x ? get_buf(&bs, fn, "out", args[1], 1) : NULL;
    if (!out)
        goto fail;
    const char kd = float_kind(fn, "x", x);
    if (!kd || need_kind(fn, "out", out, kd) < 0 || need_contig(fn, "x", x) < 0 ||
        need_contig(fn, "out", out) < 0)
        goto fail;
#define WHAT "outer=%zd, n=%zd, inner=%zd", outer, n, inner
    if (need_elems(fn, "x", x, total, WHAT) < 0 || need_elems(fn, "out", out, total, WHAT) < 0)
        goto fail;
#undef WHAT
    if (total > 0 && need_no_overlap(fn, "out", out, "x", x, 1) < 0)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_softmax_f32((const float *)x->buf, (float *)out->buf, outer, n, inner, lg);
    else
        gc_softmax_f64((const double *)x->buf, (double *)out->buf, outer, n, inner, lg);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

PyDoc_STRVAR(softmax_backward_doc,
             "softmax_backward(grad, y, out, outer, n, inner, log, /)\n--\n\n"
             "y = the forward output.  softmax: out = y * (g - sum(g*y)); log-softmax: "
             "out = g - exp(y) * sum(g); sums over the middle axis.  out may be grad or y.");

static PyObject *py_softmax_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "softmax_backward";
    bufset bs = {.n = 0};
    int lg;
    Py_ssize_t outer, n, inner, total, rows;
    if (check_nargs(fn, nargs, 7) < 0 || get_min(fn, "outer", args[3], 0, &outer) < 0 ||
        get_min(fn, "n", args[4], 0, &n) < 0 || get_min(fn, "inner", args[5], 0, &inner) < 0 ||
        get_flag(fn, "log", args[6], &lg) < 0 ||
        three_axis_sizes(fn, outer, n, inner, &total, &rows) < 0)
        return NULL;
    Py_buffer *g = get_buf(&bs, fn, "grad", args[0], 0);
    Py_buffer *y = g ? get_buf(&bs, fn, "y", args[1], 0) : NULL;
    Py_buffer *out = y ? get_buf(&bs, fn, "out", args[2], 1) : NULL;
    if (!out)
        goto fail;
    const char kd = float_kind(fn, "grad", g);
    if (!kd || need_kind(fn, "y", y, kd) < 0 || need_kind(fn, "out", out, kd) < 0 ||
        need_contig(fn, "grad", g) < 0 || need_contig(fn, "y", y) < 0 ||
        need_contig(fn, "out", out) < 0)
        goto fail;
#define WHAT "outer=%zd, n=%zd, inner=%zd", outer, n, inner
    if (need_elems(fn, "grad", g, total, WHAT) < 0 || need_elems(fn, "y", y, total, WHAT) < 0 ||
        need_elems(fn, "out", out, total, WHAT) < 0)
        goto fail;
#undef WHAT
    if (total > 0 && (need_no_overlap(fn, "out", out, "grad", g, 1) < 0 ||
                      need_no_overlap(fn, "out", out, "y", y, 1) < 0))
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_softmax_backward_f32((const float *)g->buf, (const float *)y->buf, (float *)out->buf,
                                outer, n, inner, lg);
    else
        gc_softmax_backward_f64((const double *)g->buf, (const double *)y->buf,
                                (double *)out->buf, outer, n, inner, lg);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

/* Every target is ignore_index or in [0, c); IndexError naming the first bad one otherwise. */
static int check_targets(const char *fn, const int64_t *t, Py_ssize_t n, Py_ssize_t c,
                         int64_t ignore_index)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (t[i] != ignore_index && (t[i] < 0 || t[i] >= (int64_t)c)) {
            PyErr_Format(PyExc_IndexError,
                         "%s: target[%zd] = %lld is out of range for c = %zd classes (expected "
                         "0 <= target < %zd or ignore_index = %lld)",
                         fn, i, (long long)t[i], c, c, (long long)ignore_index);
            return -1;
        }
    }
    return 0;
}

PyDoc_STRVAR(ce_forward_doc,
             "cross_entropy_forward(logits, target, loss, lse, n, c, ignore_index, /)\n--\n\n"
             "logits [n, c] float, target [n] int64: lse[i] = logsumexp(logits[i]), loss[i] = "
             "lse[i] - logits[i, target[i]] (0 where target[i] == ignore_index).  A target "
             "outside [0, c) that is not ignore_index raises IndexError.");

static PyObject *py_ce_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "cross_entropy_forward";
    bufset bs = {.n = 0};
    Py_ssize_t n, c;
    int64_t ign;
    if (check_nargs(fn, nargs, 7) < 0 || get_min(fn, "n", args[4], 0, &n) < 0 ||
        get_min(fn, "c", args[5], 0, &c) < 0 || get_i64(fn, "ignore_index", args[6], &ign) < 0)
        return NULL;
    int ok = 1;
    const Py_ssize_t nc = smul(n, c, &ok);
    if (!ok) {
        overflow_error(fn, "n * c");
        return NULL;
    }
    Py_buffer *lg = get_buf(&bs, fn, "logits", args[0], 0);
    Py_buffer *tg = lg ? get_buf(&bs, fn, "target", args[1], 0) : NULL;
    Py_buffer *loss = tg ? get_buf(&bs, fn, "loss", args[2], 1) : NULL;
    Py_buffer *lse = loss ? get_buf(&bs, fn, "lse", args[3], 1) : NULL;
    if (!lse)
        goto fail;
    const char kd = float_kind(fn, "logits", lg);
    if (!kd || need_kind(fn, "target", tg, 'q') < 0 || need_kind(fn, "loss", loss, kd) < 0 ||
        need_kind(fn, "lse", lse, kd) < 0 || need_contig(fn, "logits", lg) < 0 ||
        need_contig(fn, "target", tg) < 0 || need_contig(fn, "loss", loss) < 0 ||
        need_contig(fn, "lse", lse) < 0)
        goto fail;
#define WHAT "n=%zd, c=%zd", n, c
    if (need_elems(fn, "logits", lg, nc, WHAT) < 0 || need_elems(fn, "target", tg, n, WHAT) < 0 ||
        need_elems(fn, "loss", loss, n, WHAT) < 0 || need_elems(fn, "lse", lse, n, WHAT) < 0)
        goto fail;
#undef WHAT
    if (n > 0 && (need_no_overlap(fn, "loss", loss, "logits", lg, 0) < 0 ||
                  need_no_overlap(fn, "loss", loss, "target", tg, 0) < 0 ||
                  need_no_overlap(fn, "loss", loss, "lse", lse, 0) < 0 ||
                  need_no_overlap(fn, "lse", lse, "logits", lg, 0) < 0 ||
                  need_no_overlap(fn, "lse", lse, "target", tg, 0) < 0))
        goto fail;
    if (check_targets(fn, (const int64_t *)tg->buf, n, c, ign) < 0)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_cross_entropy_forward_f32((const float *)lg->buf, (const int64_t *)tg->buf,
                                     (float *)loss->buf, (float *)lse->buf, n, c, ign);
    else
        gc_cross_entropy_forward_f64((const double *)lg->buf, (const int64_t *)tg->buf,
                                     (double *)loss->buf, (double *)lse->buf, n, c, ign);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

PyDoc_STRVAR(ce_backward_doc,
             "cross_entropy_backward(logits, target, lse, grad_loss, out, n, c, ignore_index, "
             "/)\n--\n\n"
             "out[i, j] = grad_loss[i] * (exp(logits[i, j] - lse[i]) - (j == target[i])); rows "
             "with ignore_index get 0.  out may be logits.");

static PyObject *py_ce_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "cross_entropy_backward";
    bufset bs = {.n = 0};
    Py_ssize_t n, c;
    int64_t ign;
    if (check_nargs(fn, nargs, 8) < 0 || get_min(fn, "n", args[5], 0, &n) < 0 ||
        get_min(fn, "c", args[6], 0, &c) < 0 || get_i64(fn, "ignore_index", args[7], &ign) < 0)
        return NULL;
    int ok = 1;
    const Py_ssize_t nc = smul(n, c, &ok);
    if (!ok) {
        overflow_error(fn, "n * c");
        return NULL;
    }
    Py_buffer *lg = get_buf(&bs, fn, "logits", args[0], 0);
    Py_buffer *tg = lg ? get_buf(&bs, fn, "target", args[1], 0) : NULL;
    Py_buffer *lse = tg ? get_buf(&bs, fn, "lse", args[2], 0) : NULL;
    Py_buffer *gl = lse ? get_buf(&bs, fn, "grad_loss", args[3], 0) : NULL;
    Py_buffer *out = gl ? get_buf(&bs, fn, "out", args[4], 1) : NULL;
    if (!out)
        goto fail;
    const char kd = float_kind(fn, "logits", lg);
    if (!kd || need_kind(fn, "target", tg, 'q') < 0 || need_kind(fn, "lse", lse, kd) < 0 ||
        need_kind(fn, "grad_loss", gl, kd) < 0 || need_kind(fn, "out", out, kd) < 0 ||
        need_contig(fn, "logits", lg) < 0 || need_contig(fn, "target", tg) < 0 ||
        need_contig(fn, "lse", lse) < 0 || need_contig(fn, "grad_loss", gl) < 0 ||
        need_contig(fn, "out", out) < 0)
        goto fail;
#define WHAT "n=%zd, c=%zd", n, c
    if (need_elems(fn, "logits", lg, nc, WHAT) < 0 || need_elems(fn, "target", tg, n, WHAT) < 0 ||
        need_elems(fn, "lse", lse, n, WHAT) < 0 || need_elems(fn, "grad_loss", gl, n, WHAT) < 0 ||
        need_elems(fn, "out", out, nc, WHAT) < 0)
        goto fail;
#undef WHAT
    if (nc > 0 && (need_no_overlap(fn, "out", out, "logits", lg, 1) < 0 ||
                   need_no_overlap(fn, "out", out, "target", tg, 0) < 0 ||
                   need_no_overlap(fn, "out", out, "lse", lse, 0) < 0 ||
                   need_no_overlap(fn, "out", out, "grad_loss", gl, 0) < 0))
        goto fail;
    if (check_targets(fn, (const int64_t *)tg->buf, n, c, ign) < 0)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_cross_entropy_backward_f32((const float *)lg->buf, (const int64_t *)tg->buf,
                                      (const float *)lse->buf, (const float *)gl->buf,
                                      (float *)out->buf, n, c, ign);
    else
        gc_cross_entropy_backward_f64((const double *)lg->buf, (const int64_t *)tg->buf,
                                      (const double *)lse->buf, (const double *)gl->buf,
                                      (double *)out->buf, n, c, ign);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* copy                                                                                        */

PyDoc_STRVAR(copy_doc, "copy(src, dst, /)\n--\n\n"
                       "Copies src into dst: same shape (ndim <= 8) and format (item size 1, 2, "
                       "4 or 8), any strides; dst writable.  Overlapping views are handled.");

static PyObject *py_copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "copy";
    bufset bs = {.n = 0};
    void *tmp = NULL;
    if (check_nargs(fn, nargs, 2) < 0)
        return NULL;
    Py_buffer *s = get_buf(&bs, fn, "src", args[0], 0);
    Py_buffer *d = s ? get_buf(&bs, fn, "dst", args[1], 1) : NULL;
    if (!d)
        goto fail;
    const Py_ssize_t isz = s->itemsize;
    if (!fmt_is_plain(s) || !(isz == 1 || isz == 2 || isz == 4 || isz == 8)) {
        PyErr_Format(PyExc_TypeError,
                     "copy: 'src' must be a plain (no objects) format of item size 1, 2, 4 or 8, "
                     "got format '%s' with item size %zd",
                     fmt_str(s), isz);
        goto fail;
    }
    if (!fmt_same(s, d)) {
        PyErr_Format(PyExc_TypeError,
                     "copy: src has format '%s' (item size %zd) but dst has '%s' (item size %zd); "
                     "they must match",
                     fmt_str(s), isz, fmt_str(d), d->itemsize);
        goto fail;
    }
    int same_shape = s->ndim == d->ndim;
    for (int i = 0; same_shape && i < s->ndim; i++)
        same_shape = s->shape[i] == d->shape[i];
    if (!same_shape) {
        char s1[200], s2[200];
        PyErr_Format(PyExc_ValueError, "copy: src shape %s differs from dst shape %s",
                     shape_str(s, s1, sizeof s1), shape_str(d, s2, sizeof s2));
        goto fail;
    }
    if (d->ndim > GC_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "copy: %d dims; at most %d are supported", d->ndim,
                     GC_MAX_DIMS);
        goto fail;
    }
    const Py_ssize_t total = buf_nelem(d);
    if (total == 0)
        goto done;
    gc_iter it;
    memset(&it, 0, sizeof it);
    it.ndim = d->ndim;
    for (int i = 0; i < d->ndim; i++) {
        it.shape[i] = d->shape[i];
        it.stride[0][i] = d->shape[i] > 1 ? buf_stride(s, i) / isz : 0;
        it.stride[1][i] = d->shape[i] > 1 ? buf_stride(d, i) / isz : 0;
    }
    int same_elems = s->buf == d->buf;
    for (int i = 0; same_elems && i < d->ndim; i++)
        same_elems = it.stride[0][i] == it.stride[1][i];
    if (same_elems)
        goto done;
    if (!buf_overlap(s, d)) {
        iter_collapse(&it, 2);
        Py_BEGIN_ALLOW_THREADS
        gc_copy(&it, s->buf, d->buf, (size_t)isz);
        Py_END_ALLOW_THREADS
        goto done;
    }
    /* overlapping views: go through a contiguous temporary */
    tmp = malloc((size_t)total * (size_t)isz);
    if (!tmp) {
        PyErr_NoMemory();
        goto fail;
    }
    gc_iter in = it, outit = it;
    Py_ssize_t st = 1;
    for (int i = d->ndim - 1; i >= 0; i--) {
        in.stride[1][i] = d->shape[i] > 1 ? st : 0;  /* src -> tmp */
        outit.stride[0][i] = d->shape[i] > 1 ? st : 0; /* tmp -> dst */
        st *= d->shape[i];
    }
    iter_collapse(&in, 2);
    iter_collapse(&outit, 2);
    Py_BEGIN_ALLOW_THREADS
    gc_copy(&in, s->buf, tmp, (size_t)isz);
    gc_copy(&outit, tmp, d->buf, (size_t)isz);
    Py_END_ALLOW_THREADS
done:
    free(tmp);
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    free(tmp);
    bufs_release(&bs);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* im2col, col2im                                                                              */

/* Parses the 12 geometry ints args[0..12) (n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw), computes
 * oh, ow and the element counts of x and col. */
static int conv_geometry(const char *fn, PyObject *const *g, gc_conv *p, Py_ssize_t *nx,
                         Py_ssize_t *ncol)
{
    if (get_min(fn, "n", g[0], 0, &p->n) < 0 || get_min(fn, "c", g[1], 0, &p->c) < 0 ||
        get_min(fn, "h", g[2], 0, &p->h) < 0 || get_min(fn, "w", g[3], 0, &p->w) < 0 ||
        get_min(fn, "kh", g[4], 1, &p->kh) < 0 || get_min(fn, "kw", g[5], 1, &p->kw) < 0 ||
        get_min(fn, "sh", g[6], 1, &p->sh) < 0 || get_min(fn, "sw", g[7], 1, &p->sw) < 0 ||
        get_min(fn, "ph", g[8], 0, &p->ph) < 0 || get_min(fn, "pw", g[9], 0, &p->pw) < 0 ||
        get_min(fn, "dh", g[10], 1, &p->dh) < 0 || get_min(fn, "dw", g[11], 1, &p->dw) < 0)
        return -1;
    int ok = 1;
    /* padded extent and dilated kernel extent: h + 2 ph and dh (kh - 1) + 1 */
    const Py_ssize_t hp = sadd(p->h, smul(2, p->ph, &ok), &ok);
    const Py_ssize_t wp = sadd(p->w, smul(2, p->pw, &ok), &ok);
    const Py_ssize_t ekh = sadd(smul(p->dh, p->kh - 1, &ok), 1, &ok);
    const Py_ssize_t ekw = sadd(smul(p->dw, p->kw - 1, &ok), 1, &ok);
    if (!ok)
        return overflow_error(fn, "padded input or dilated kernel size");
    if (ekh > hp || ekw > wp) {
        PyErr_Format(PyExc_ValueError,
                     "%s: the dilated kernel (%zd x %zd) is larger than the padded input "
                     "(%zd x %zd); output size would be < 1",
                     fn, ekh, ekw, hp, wp);
        return -1;
    }
    p->oh = (hp - ekh) / p->sh + 1;
    p->ow = (wp - ekw) / p->sw + 1;
    *nx = smul(smul(p->n, p->c, &ok), smul(p->h, p->w, &ok), &ok);
    const Py_ssize_t rows = smul(p->c, smul(p->kh, p->kw, &ok), &ok);
    *ncol = smul(smul(p->n, rows, &ok), smul(p->oh, p->ow, &ok), &ok);
    if (!ok)
        return overflow_error(fn, "n * c * h * w or n * c*kh*kw * oh*ow");
    return 0;
}

static PyObject *conv_common(const char *fn, PyObject *const *args, Py_ssize_t nargs, int to_col)
{
    bufset bs = {.n = 0};
    gc_conv p;
    Py_ssize_t nx, ncol;
    if (check_nargs(fn, nargs, 14) < 0 || conv_geometry(fn, args + 2, &p, &nx, &ncol) < 0)
        return NULL;
    /* im2col(x, col, ...), col2im(col, x, ...) */
    const char *in_name = to_col ? "x" : "col", *out_name = to_col ? "col" : "x";
    Py_buffer *in = get_buf(&bs, fn, in_name, args[0], 0);
    Py_buffer *out = in ? get_buf(&bs, fn, out_name, args[1], 1) : NULL;
    if (!out)
        goto fail;
    const char kd = float_kind(fn, in_name, in);
    if (!kd || need_kind(fn, out_name, out, kd) < 0 || need_contig(fn, in_name, in) < 0 ||
        need_contig(fn, out_name, out) < 0)
        goto fail;
#define WHAT                                                                                      \
    "n=%zd, c=%zd, h=%zd, w=%zd, kernel %zdx%zd, stride %zdx%zd, padding %zdx%zd, dilation "       \
    "%zdx%zd -> oh=%zd, ow=%zd",                                                                   \
        p.n, p.c, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, p.oh, p.ow
    const Py_ssize_t nin = to_col ? nx : ncol, nout = to_col ? ncol : nx;
    if (need_elems(fn, in_name, in, nin, WHAT) < 0 ||
        need_elems(fn, out_name, out, nout, WHAT) < 0)
        goto fail;
#undef WHAT
    if (nin > 0 && nout > 0 && need_no_overlap(fn, out_name, out, in_name, in, 0) < 0)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (to_col) {
        if (kd == 'f')
            gc_im2col_f32((const float *)in->buf, (float *)out->buf, &p);
        else
            gc_im2col_f64((const double *)in->buf, (double *)out->buf, &p);
    } else {
        if (kd == 'f')
            gc_col2im_f32((const float *)in->buf, (float *)out->buf, &p);
        else
            gc_col2im_f64((const double *)in->buf, (double *)out->buf, &p);
    }
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

PyDoc_STRVAR(im2col_doc,
             "im2col(x, col, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, /)\n--\n\n"
             "x [n, c, h, w] -> col [n, c*kh*kw, oh*ow], oh = (h + 2*ph - dh*(kh-1) - 1) // sh "
             "+ 1 (likewise ow); padding reads as 0; row (ci*kh + ki)*kw + kj.");

static PyObject *py_im2col(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return conv_common("im2col", args, nargs, 1);
}

PyDoc_STRVAR(col2im_doc,
             "col2im(col, x, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, /)\n--\n\n"
             "The adjoint of im2col: x is overwritten with the sum of every col entry that "
             "im2col would have read from it.");

static PyObject *py_col2im(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return conv_common("col2im", args, nargs, 0);
}

/* conv2d_forward(x, w, bias, out, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o) and
 * conv2d_backward(x, w, g, gx, gw, gb, <the same 13 ints>): optional buffers may be None. */
static PyObject *conv2d_common(const char *fn, PyObject *const *args, Py_ssize_t nargs, int fwd)
{
    bufset bs = {.n = 0};
    gc_conv p;
    Py_ssize_t nx, ncol, o;
    const int nb = fwd ? 4 : 6;
    if (check_nargs(fn, nargs, nb + 13) < 0 || conv_geometry(fn, args + nb, &p, &nx, &ncol) < 0 ||
        get_min(fn, "o", args[nb + 12], 0, &o) < 0)
        return NULL;
    static const char *fwd_names[] = {"x", "w", "bias", "out"};
    static const char *bwd_names[] = {"x", "w", "g", "gx", "gw", "gb"};
    const char **names = fwd ? fwd_names : bwd_names;
    /* writable outputs: out (fwd), gx, gw, gb (bwd); optional: bias (fwd), gx, gw, gb (bwd) */
    Py_buffer *v[6] = {NULL};
    int ok = 1;
    const Py_ssize_t ck = smul(p.c, smul(p.kh, p.kw, &ok), &ok);
    const Py_ssize_t ny = smul(smul(p.n, o, &ok), smul(p.oh, p.ow, &ok), &ok);
    const Py_ssize_t nw = smul(o, ck, &ok);
    if (!ok) {
        overflow_error(fn, "the output or weight size");
        return NULL;
    }
    const Py_ssize_t need[6] = {nx, nw, fwd ? o : ny, fwd ? ny : nx, nw, o};
    char kd = 0;
    for (int i = 0; i < nb; i++) {
        const int writable = fwd ? i == 3 : i >= 3;
        const int optional = fwd ? i == 2 : i >= 3;
        if (optional && args[i] == Py_None)
            continue;
        v[i] = get_buf(&bs, fn, names[i], args[i], writable);
        if (!v[i])
            goto fail;
        if (!kd) {
            kd = float_kind(fn, names[i], v[i]);
            if (!kd)
                goto fail;
        }
        if (need_kind(fn, names[i], v[i], kd) < 0 || need_contig(fn, names[i], v[i]) < 0)
            goto fail;
#define WHAT                                                                                      \
    "n=%zd, c=%zd, h=%zd, w=%zd, o=%zd, kernel %zdx%zd, stride %zdx%zd, padding %zdx%zd, "          \
    "dilation %zdx%zd -> oh=%zd, ow=%zd",                                                          \
        p.n, p.c, p.h, p.w, o, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, p.oh, p.ow
        if (need_elems(fn, names[i], v[i], need[i], WHAT) < 0)
            goto fail;
#undef WHAT
    }
    for (int i = 0; i < nb; i++) { /* outputs overlap no other buffer */
        const int writable = fwd ? i == 3 : i >= 3;
        if (!writable || !v[i] || !need[i])
            continue;
        for (int j = 0; j < nb; j++)
            if (j != i && v[j] && need[j] &&
                need_no_overlap(fn, names[i], v[i], names[j], v[j], 0) < 0)
                goto fail;
    }
#define PTR(i) (v[i] ? v[i]->buf : NULL)
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    if (fwd) {
        if (kd == 'f')
            rc = gc_conv2d_forward_f32(PTR(0), PTR(1), PTR(2), PTR(3), &p, o);
        else
            rc = gc_conv2d_forward_f64(PTR(0), PTR(1), PTR(2), PTR(3), &p, o);
    } else {
        if (kd == 'f')
            rc = gc_conv2d_backward_f32(PTR(0), PTR(1), PTR(2), PTR(3), PTR(4), PTR(5), &p, o);
        else
            rc = gc_conv2d_backward_f64(PTR(0), PTR(1), PTR(2), PTR(3), PTR(4), PTR(5), &p, o);
    }
    Py_END_ALLOW_THREADS
#undef PTR
    if (rc < 0) {
        PyErr_NoMemory();
        goto fail;
    }
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

PyDoc_STRVAR(conv2d_forward_doc,
             "conv2d_forward(x, w, bias, out, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o, /)"
             "\n--\n\n"
             "out [n, o, oh, ow] = conv2d(x [n, c, h, w], w [o, c, kh, kw]) + bias [o] (None: no "
             "bias); groups = 1, zero padding.");

static PyObject *py_conv2d_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return conv2d_common("conv2d_forward", args, nargs, 1);
}

PyDoc_STRVAR(conv2d_backward_doc,
             "conv2d_backward(x, w, g, gx, gw, gb, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o, /)"
             "\n--\n\n"
             "Gradients of conv2d_forward given g [n, o, oh, ow]: gx [n, c, h, w], gw [o, c, kh, "
             "kw], gb [o]; each may be None (not computed).  Sums are bitwise independent of the "
             "thread count.");

static PyObject *py_conv2d_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return conv2d_common("conv2d_backward", args, nargs, 0);
}

/* max_pool2d(x, vals, idx, planes, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow) and
 * max_pool2d_backward(g, idx, gx, <the same 13 ints>). */
static PyObject *pool2d_common(const char *fn, PyObject *const *args, Py_ssize_t nargs, int fwd)
{
    bufset bs = {.n = 0};
    gc_pool2d p;
    if (check_nargs(fn, nargs, 16) < 0)
        return NULL;
    PyObject *const *g = args + 3;
    if (get_min(fn, "planes", g[0], 0, &p.planes) < 0 || get_min(fn, "h", g[1], 1, &p.h) < 0 ||
        get_min(fn, "w", g[2], 1, &p.w) < 0 || get_min(fn, "kh", g[3], 1, &p.kh) < 0 ||
        get_min(fn, "kw", g[4], 1, &p.kw) < 0 || get_min(fn, "sh", g[5], 1, &p.sh) < 0 ||
        get_min(fn, "sw", g[6], 1, &p.sw) < 0 || get_min(fn, "ph", g[7], 0, &p.ph) < 0 ||
        get_min(fn, "pw", g[8], 0, &p.pw) < 0 || get_min(fn, "dh", g[9], 1, &p.dh) < 0 ||
        get_min(fn, "dw", g[10], 1, &p.dw) < 0 || get_min(fn, "oh", g[11], 1, &p.oh) < 0 ||
        get_min(fn, "ow", g[12], 1, &p.ow) < 0)
        return NULL;
    int ok = 1;
    const Py_ssize_t nin = smul(p.planes, smul(p.h, p.w, &ok), &ok);
    const Py_ssize_t nout = smul(p.planes, smul(p.oh, p.ow, &ok), &ok);
    if (!ok) {
        overflow_error(fn, "planes * h * w or planes * oh * ow");
        return NULL;
    }
    static const char *fnames[] = {"x", "vals", "idx"}, *bnames[] = {"g", "idx", "gx"};
    const char **names = fwd ? fnames : bnames;
    const Py_ssize_t need[3] = {fwd ? nin : nout, nout, fwd ? nout : nin};
    Py_buffer *v[3];
    for (int i = 0; i < 3; i++) {
        v[i] = get_buf(&bs, fn, names[i], args[i], fwd ? i > 0 : i == 2);
        if (!v[i])
            goto fail;
    }
    const char kd = float_kind(fn, names[0], v[0]);
    const int fl = fwd ? 1 : 2; /* the other float buffer */
    if (!kd || need_kind(fn, names[fl], v[fl], kd) < 0 || need_kind(fn, "idx", v[fwd ? 2 : 1],
                                                                    'q') < 0)
        goto fail;
    for (int i = 0; i < 3; i++) {
        if (need_contig(fn, names[i], v[i]) < 0 ||
            need_elems(fn, names[i], v[i], need[i],
                       "planes=%zd, h=%zd, w=%zd, oh=%zd, ow=%zd", p.planes, p.h, p.w, p.oh,
                       p.ow) < 0)
            goto fail;
    }
    for (int i = 0; i < 3; i++) {
        if (!(fwd ? i > 0 : i == 2) || !need[i])
            continue;
        for (int j = 0; j < 3; j++)
            if (j != i && need[j] && need_no_overlap(fn, names[i], v[i], names[j], v[j], 0) < 0)
                goto fail;
    }
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    if (fwd) {
        if (kd == 'f')
            gc_max_pool2d_f32(v[0]->buf, v[1]->buf, v[2]->buf, &p);
        else
            gc_max_pool2d_f64(v[0]->buf, v[1]->buf, v[2]->buf, &p);
    } else {
        if (kd == 'f')
            rc = gc_max_pool2d_backward_f32(v[0]->buf, v[1]->buf, v[2]->buf, &p);
        else
            rc = gc_max_pool2d_backward_f64(v[0]->buf, v[1]->buf, v[2]->buf, &p);
    }
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_Format(PyExc_IndexError, "%s: an index lies outside [0, h*w = %zd)", fn,
                     p.h * p.w);
        goto fail;
    }
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

PyDoc_STRVAR(max_pool2d_doc,
             "max_pool2d(x, vals, idx, planes, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, /)"
             "\n--\n\n"
             "Max pooling of x [planes, h, w] into vals [planes, oh, ow] and int64 idx (flat "
             "index into h*w of each maximum), PyTorch's rules (padding -inf, first maximum, NaN "
             "wins).");

static PyObject *py_max_pool2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return pool2d_common("max_pool2d", args, nargs, 1);
}

PyDoc_STRVAR(max_pool2d_backward_doc,
             "max_pool2d_backward(g, idx, gx, planes, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, "
             "ow, /)\n--\n\n"
             "gx [planes, h, w] = zeros with g [planes, oh, ow] added at idx; IndexError if an "
             "index lies outside [0, h*w).");

static PyObject *py_max_pool2d_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return pool2d_common("max_pool2d_backward", args, nargs, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* philox streams                                                                              */

/* seed, offset and out (C-contiguous, writable, kind k) for philox / uniform / normal. */
static Py_buffer *rng_common(const char *fn, PyObject *const *args, bufset *bs, char k,
                             uint64_t *seed, uint64_t *offset)
{
    if (get_unsigned(fn, "seed", args[0], 64, seed) < 0 ||
        get_unsigned(fn, "offset", args[1], 64, offset) < 0)
        return NULL;
    Py_buffer *out = get_buf(bs, fn, "out", args[2], 1);
    if (!out || need_kind(fn, "out", out, k) < 0 || need_contig(fn, "out", out) < 0)
        return NULL;
    return out;
}

PyDoc_STRVAR(philox_doc,
             "philox(seed, offset, out, /)\n--\n\n"
             "out uint32 [L]: out[i] = word i % 4 of Philox4x32-10 at counter offset + i // 4 "
             "(c0 = low, c1 = high 32 bits, c2 = c3 = 0), key (seed & 0xffffffff, seed >> 32).");

static PyObject *py_philox(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "philox";
    bufset bs = {.n = 0};
    uint64_t seed, offset;
    if (check_nargs(fn, nargs, 3) < 0)
        return NULL;
    Py_buffer *out = rng_common(fn, args, &bs, 'I', &seed, &offset);
    if (!out)
        goto fail;
    const Py_ssize_t n = buf_nelem(out);
    Py_BEGIN_ALLOW_THREADS
    gc_philox_fill(seed, offset, (uint32_t *)out->buf, n);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

PyDoc_STRVAR(uniform_doc, "uniform(seed, offset, out, low, high, /)\n--\n\n"
                          "out float32: low + (high - low) * u, u = (word_i >> 8) * 2**-24 with "
                          "word_i the i-th word of the philox stream.");

static PyObject *py_uniform(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "uniform";
    bufset bs = {.n = 0};
    uint64_t seed, offset;
    double low, high;
    if (check_nargs(fn, nargs, 5) < 0 || get_double(fn, "low", args[3], &low) < 0 ||
        get_double(fn, "high", args[4], &high) < 0)
        return NULL;
    Py_buffer *out = rng_common(fn, args, &bs, 'f', &seed, &offset);
    if (!out)
        goto fail;
    const Py_ssize_t n = buf_nelem(out);
    Py_BEGIN_ALLOW_THREADS
    gc_uniform_f32(seed, offset, (float *)out->buf, n, (float)low, (float)high);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

PyDoc_STRVAR(normal_doc,
             "normal(seed, offset, out, mean, std, /)\n--\n\n"
             "out float32, Box-Muller over word pairs (2p, 2p+1) of the philox stream, in float32 "
             "arithmetic; consumes 2 * ceil(L / 2) words.");

static PyObject *py_normal(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "normal";
    bufset bs = {.n = 0};
    uint64_t seed, offset;
    double mean, std;
    if (check_nargs(fn, nargs, 5) < 0 || get_double(fn, "mean", args[3], &mean) < 0 ||
        get_double(fn, "std", args[4], &std) < 0)
        return NULL;
    Py_buffer *out = rng_common(fn, args, &bs, 'f', &seed, &offset);
    if (!out)
        goto fail;
    const Py_ssize_t n = buf_nelem(out);
    Py_BEGIN_ALLOW_THREADS
    gc_normal_f32(seed, offset, (float *)out->buf, n, (float)mean, (float)std);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

PyDoc_STRVAR(philox_block_doc,
             "philox_block(c0, c1, c2, c3, k0, k1, /)\n--\n\n"
             "One Philox4x32-10 block for counter (c0..c3) and key (k0, k1), each a uint32; "
             "returns a 4-tuple of ints (for known-answer tests).");

static PyObject *py_philox_block(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char *const names[6] = {"c0", "c1", "c2", "c3", "k0", "k1"};
    uint64_t v[6];
    if (check_nargs("philox_block", nargs, 6) < 0)
        return NULL;
    for (int i = 0; i < 6; i++)
        if (get_unsigned("philox_block", names[i], args[i], 32, &v[i]) < 0)
            return NULL;
    const uint32_t ctr[4] = {(uint32_t)v[0], (uint32_t)v[1], (uint32_t)v[2], (uint32_t)v[3]};
    const uint32_t key[2] = {(uint32_t)v[4], (uint32_t)v[5]};
    uint32_t out[4];
    gc_philox4x32_10(ctr, key, out);
    return Py_BuildValue("(kkkk)", (unsigned long)out[0], (unsigned long)out[1],
                         (unsigned long)out[2], (unsigned long)out[3]);
}

/* ------------------------------------------------------------------------------------------ */
/* fused optimizer updates (optim.c)                                                           */

/* The buffers of one update: args[0] = param (written), args[1] = grad (read), args[2..nbuf) =
 * state buffers (written; None allowed where optional[i]).  All of param's float kind,
 * C-contiguous and of param's element count; no two may share memory.  ptrs[i] is NULL for a
 * None.  Returns the kind ('f' / 'd'), or 0 with an exception set. */
static char optim_bufs(bufset *bs, const char *fn, PyObject *const *args, int nbuf,
                       const char *const *names, const int *optional, void **ptrs,
                       Py_ssize_t *n)
{
    Py_buffer *v[GC_MAXBUF];
    char kd = 0;
    *n = 0;
    for (int i = 0; i < nbuf; i++) {
        v[i] = NULL;
        ptrs[i] = NULL;
        if (args[i] == Py_None) {
            if (!optional[i]) {
                PyErr_Format(PyExc_TypeError, "%s: '%s' must be a float buffer, got None", fn,
                             names[i]);
                return 0;
            }
            continue;
        }
        v[i] = get_buf(bs, fn, names[i], args[i], i != 1);
        if (!v[i])
            return 0;
        if (i == 0) {
            kd = float_kind(fn, names[0], v[0]);
            if (!kd)
                return 0;
            *n = buf_nelem(v[0]);
        } else if (need_kind(fn, names[i], v[i], kd) < 0) {
            return 0;
        }
        if (need_contig(fn, names[i], v[i]) < 0)
            return 0;
        if (i > 0 && buf_nelem(v[i]) != *n) {
            PyErr_Format(PyExc_ValueError,
                         "%s: '%s' holds %zd elements but '%s' holds %zd; every buffer of an "
                         "update has the parameter's size",
                         fn, names[i], buf_nelem(v[i]), names[0], *n);
            return 0;
        }
        ptrs[i] = v[i]->buf;
    }
    /* every buffer is C-contiguous by now: it spans [buf, buf + len) (cheaper than buf_extent,
     * which a multi-tensor call would run for every pair of every parameter) */
    for (int i = 0; i < nbuf; i++) {
        for (int j = i + 1; j < nbuf; j++) {
            if (v[i] && v[j] && v[i]->len > 0 && v[j]->len > 0 &&
                (const char *)v[i]->buf < (const char *)v[j]->buf + v[j]->len &&
                (const char *)v[j]->buf < (const char *)v[i]->buf + v[i]->len) {
                PyErr_Format(PyExc_ValueError,
                             "%s: '%s' and '%s' share memory; the parameter, its gradient and "
                             "each state buffer must be separate arrays",
                             fn, names[i], names[j]);
                return 0;
            }
        }
    }
    return kd;
}

/* A real number that must be finite and >= lo (hyper-parameters). */
static int get_hp(const char *fn, const char *name, PyObject *o, double lo, double *out)
{
    if (get_double(fn, name, o, out) < 0)
        return -1;
    if (!(*out >= lo && *out - *out == 0.0)) { /* NaN, inf and values below lo */
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be a finite number >= %g, got %R", fn, name,
                     lo, o);
        return -1;
    }
    return 0;
}

/* The shared hyper-parameters of each optimizer, parsed and checked the same way by the
 * single-tensor and the multi-tensor entries (a = the arguments after the buffers). */

/* lr, momentum, dampening, weight_decay, nesterov, maximize (SGD's `first` is parsed apart: the
 * multi entry takes one per parameter). */
static int sgd_hp(const char *fn, PyObject *const *a, gc_optim_hp *h)
{
    if (get_hp(fn, "lr", a[0], 0.0, &h->lr) < 0 ||
        get_hp(fn, "momentum", a[1], 0.0, &h->momentum) < 0 ||
        get_double(fn, "dampening", a[2], &h->dampening) < 0 ||
        get_hp(fn, "weight_decay", a[3], 0.0, &h->weight_decay) < 0 ||
        get_flag(fn, "nesterov", a[4], &h->nesterov) < 0 ||
        get_flag(fn, "maximize", a[5], &h->maximize) < 0)
        return -1;
    return 0;
}

/* lr, beta1, beta2, eps, weight_decay, decoupled, maximize (the step comes before them). */
static int adam_hp(const char *fn, PyObject *const *a, gc_optim_hp *h)
{
    if (get_hp(fn, "lr", a[0], 0.0, &h->lr) < 0 ||
        get_hp(fn, "beta1", a[1], 0.0, &h->beta1) < 0 ||
        get_hp(fn, "beta2", a[2], 0.0, &h->beta2) < 0 ||
        get_hp(fn, "eps", a[3], 0.0, &h->eps) < 0 ||
        get_hp(fn, "weight_decay", a[4], 0.0, &h->weight_decay) < 0 ||
        get_flag(fn, "decoupled", a[5], &h->decoupled) < 0 ||
        get_flag(fn, "maximize", a[6], &h->maximize) < 0)
        return -1;
    if (h->beta1 >= 1.0 || h->beta2 >= 1.0) {
        PyErr_Format(PyExc_ValueError, "%s: betas must be in [0, 1), got (%g, %g)", fn, h->beta1,
                     h->beta2);
        return -1;
    }
    return 0;
}

/* lr, alpha, eps, weight_decay, momentum, maximize. */
static int rmsprop_hp(const char *fn, PyObject *const *a, gc_optim_hp *h)
{
    if (get_hp(fn, "lr", a[0], 0.0, &h->lr) < 0 ||
        get_hp(fn, "alpha", a[1], 0.0, &h->alpha) < 0 ||
        get_hp(fn, "eps", a[2], 0.0, &h->eps) < 0 ||
        get_hp(fn, "weight_decay", a[3], 0.0, &h->weight_decay) < 0 ||
        get_hp(fn, "momentum", a[4], 0.0, &h->momentum) < 0 ||
        get_flag(fn, "maximize", a[5], &h->maximize) < 0)
        return -1;
    return 0;
}

/* Adam's step count after the update (>= 1). */
static int adam_step_count(const char *fn, const char *name, PyObject *o, int64_t *out)
{
    if (get_i64(fn, name, o, out) < 0)
        return -1;
    if (*out < 1) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be >= 1, got %lld", fn, name,
                     (long long)*out);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(sgd_step_doc,
             "sgd_step(param, grad, momentum_buffer, lr, momentum, dampening, weight_decay, "
             "nesterov, maximize, first, /)\n--\n\n"
             "One SGD update in place, as torch.optim.SGD: g = (maximize ? -grad : grad) + "
             "weight_decay * param; with momentum != 0, buf = first ? g : momentum * buf + "
             "(1 - dampening) * g and g = nesterov ? g + momentum * buf : buf; param -= lr * g.  "
             "momentum_buffer may be None when momentum == 0.");

static PyObject *py_sgd_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "sgd_step";
    static const char *const names[3] = {"param", "grad", "momentum_buffer"};
    bufset bs = {.n = 0};
    gc_optim_hp h = {0};
    if (check_nargs(fn, nargs, 10) < 0 || sgd_hp(fn, args + 3, &h) < 0 ||
        get_flag(fn, "first", args[9], &h.first) < 0)
        return NULL;
    const int optional[3] = {0, 0, h.momentum == 0.0};
    void *p[3];
    Py_ssize_t n;
    const char kd = optim_bufs(&bs, fn, args, 3, names, optional, p, &n);
    if (!kd)
        goto fail;
    if (h.momentum == 0.0)
        p[2] = NULL;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_sgd_step_f32((float *)p[0], (const float *)p[1], (float *)p[2], n, &h);
    else
        gc_sgd_step_f64((double *)p[0], (const double *)p[1], (double *)p[2], n, &h);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

PyDoc_STRVAR(adam_step_doc,
             "adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, "
             "eps, weight_decay, decoupled, maximize, /)\n--\n\n"
             "One Adam (decoupled=0) or AdamW (decoupled=1) update in place, as torch.optim.Adam: "
             "step is the count after this update (>= 1); max_exp_avg_sq is None unless amsgrad.");

static PyObject *py_adam_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "adam_step";
    static const char *const names[5] = {"param", "grad", "exp_avg", "exp_avg_sq",
                                         "max_exp_avg_sq"};
    bufset bs = {.n = 0};
    gc_optim_hp h = {0};
    if (check_nargs(fn, nargs, 13) < 0 || adam_step_count(fn, "step", args[5], &h.step) < 0 ||
        adam_hp(fn, args + 6, &h) < 0)
        return NULL;
    const int optional[5] = {0, 0, 0, 0, 1};
    void *p[5];
    Py_ssize_t n;
    const char kd = optim_bufs(&bs, fn, args, 5, names, optional, p, &n);
    if (!kd)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_adam_step_f32((float *)p[0], (const float *)p[1], (float *)p[2], (float *)p[3],
                         (float *)p[4], n, &h);
    else
        gc_adam_step_f64((double *)p[0], (const double *)p[1], (double *)p[2], (double *)p[3],
                         (double *)p[4], n, &h);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

PyDoc_STRVAR(rmsprop_step_doc,
             "rmsprop_step(param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps, "
             "weight_decay, momentum, maximize, /)\n--\n\n"
             "One RMSprop update in place, as torch.optim.RMSprop: grad_avg is None unless "
             "centered; momentum_buffer may be None when momentum == 0.");

static PyObject *py_rmsprop_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "rmsprop_step";
    static const char *const names[5] = {"param", "grad", "square_avg", "grad_avg",
                                         "momentum_buffer"};
    bufset bs = {.n = 0};
    gc_optim_hp h = {0};
    if (check_nargs(fn, nargs, 11) < 0 || rmsprop_hp(fn, args + 5, &h) < 0)
        return NULL;
    const int optional[5] = {0, 0, 0, 1, h.momentum == 0.0};
    void *p[5];
    Py_ssize_t n;
    const char kd = optim_bufs(&bs, fn, args, 5, names, optional, p, &n);
    if (!kd)
        goto fail;
    if (h.momentum == 0.0)
        p[4] = NULL;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_rmsprop_step_f32((float *)p[0], (const float *)p[1], (float *)p[2], (float *)p[3],
                            (float *)p[4], n, &h);
    else
        gc_rmsprop_step_f64((double *)p[0], (const double *)p[1], (double *)p[2],
                            (double *)p[3], (double *)p[4], n, &h);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* multi-tensor ("foreach") optimizer updates (optim.c)                                        */

/* One multi-tensor call: the tensor lists as private tuples (validation can run Python code —
 * buffer exporters, __index__ — which must not be able to resize a caller's list under us), k
 * parameters, one buffer set per parameter (every buffer stays acquired until the kernel is
 * done) and one kernel item per parameter. */
typedef struct {
    PyObject *seqs[GC_MAXBUF]; /* NULL for a None list */
    Py_ssize_t k;
    bufset *sets;
    gc_optim_item *items;
} optim_multi;

static void multi_release(optim_multi *m)
{
    if (m->sets) {
        for (Py_ssize_t j = 0; j < m->k; j++)
            bufs_release(&m->sets[j]);
        PyMem_Free(m->sets);
    }
    PyMem_Free(m->items);
    for (int i = 0; i < GC_MAXBUF; i++)
        Py_CLEAR(m->seqs[i]);
    m->sets = NULL;
    m->items = NULL;
}

/* Reads the tensor lists args[0..nbuf) (each a list or tuple, all of param's length; None where
 * optional[i], as if every entry were None) and allocates the items, each with the shared
 * hyper-parameters h.  0, or -1 with an exception set (the caller releases m either way). */
static int multi_lists(optim_multi *m, const char *fn, PyObject *const *args, int nbuf,
                       const char *const *names, const int *optional, const gc_optim_hp *h)
{
    for (int i = 0; i < nbuf; i++) {
        PyObject *o = args[i];
        if (o == Py_None && optional[i])
            continue;
        if (!PyList_Check(o) && !PyTuple_Check(o)) {
            PyErr_Format(PyExc_TypeError,
                         "%s: '%s' must be a list or tuple of arrays, one per parameter%s; got "
                         "%.100s",
                         fn, names[i], optional[i] ? " (or None)" : "", Py_TYPE(o)->tp_name);
            return -1;
        }
        m->seqs[i] = PySequence_Tuple(o);
        if (!m->seqs[i])
            return -1;
        const Py_ssize_t len = PyTuple_GET_SIZE(m->seqs[i]);
        if (i == 0) {
            m->k = len;
        } else if (len != m->k) {
            PyErr_Format(PyExc_ValueError,
                         "%s: '%s' has %zd entries but '%s' has %zd; every list has one entry per "
                         "parameter",
                         fn, names[i], len, names[0], m->k);
            return -1;
        }
    }
    const size_t k1 = m->k > 0 ? (size_t)m->k : 1;
    m->sets = PyMem_Malloc(k1 * sizeof(bufset));
    if (!m->sets) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t j = 0; j < m->k; j++)
        m->sets[j].n = 0; /* before anything can fail: multi_release reads every set */
    m->items = PyMem_Malloc(k1 * sizeof(gc_optim_item));
    if (!m->items) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t j = 0; j < m->k; j++) {
        memset(&m->items[j], 0, sizeof(gc_optim_item));
        m->items[j].h = *h;
    }
    return 0;
}

/* A per-parameter int argument (Adam's step, SGD's first): a list or tuple of k values; returns
 * a new reference to a tuple, or NULL with an exception set. */
static PyObject *multi_ints(const char *fn, const char *name, PyObject *o, Py_ssize_t k)
{
    if (!PyList_Check(o) && !PyTuple_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: '%s' must be a list or tuple of ints, one per "
                     "parameter; got %.100s", fn, name, Py_TYPE(o)->tp_name);
        return NULL;
    }
    PyObject *t = PySequence_Tuple(o);
    if (t && PyTuple_GET_SIZE(t) != k) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' has %zd entries but 'param' has %zd; every list "
                     "has one entry per parameter", fn, name, PyTuple_GET_SIZE(t), k);
        Py_CLEAR(t);
    }
    return t;
}

/* "name[j]" into s (cap >= 32): the name of parameter j's entry in a list, for messages.  By
 * hand, not with PyOS_snprintf: formatting it took half the checking time of a call. */
static const char *indexed_name(char *s, size_t cap, const char *name, Py_ssize_t j)
{
    char digits[24];
    int nd = 0;
    size_t u = (size_t)j;
    do {
        digits[nd++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t len = strlen(name);
    if (len + (size_t)nd + 3 > cap)
        len = cap - (size_t)nd - 3;
    memcpy(s, name, len);
    s[len++] = '[';
    while (nd)
        s[len++] = digits[--nd];
    s[len++] = ']';
    s[len] = '\0';
    return s;
}

/* A buffer's memory for the whole-call overlap check. */
typedef struct {
    uintptr_t lo, hi;
    Py_ssize_t j; /* parameter index */
    int list;     /* 1 = grad (read only) */
} optim_span;

/* Sorts spans by start: heapsort, in place (qsort allocates and calls a comparator per step;
 * this runs on every optimizer step). */
static void span_sift(optim_span *sp, Py_ssize_t root, Py_ssize_t n)
{
    const optim_span x = sp[root];
    for (;;) {
        Py_ssize_t c = 2 * root + 1;
        if (c >= n)
            break;
        if (c + 1 < n && sp[c + 1].lo > sp[c].lo)
            c++;
        if (sp[c].lo <= x.lo)
            break;
        sp[root] = sp[c];
        root = c;
    }
    sp[root] = x;
}

static void span_sort(optim_span *sp, Py_ssize_t n)
{
    for (Py_ssize_t r = n / 2 - 1; r >= 0; r--)
        span_sift(sp, r, n);
    for (Py_ssize_t e = n - 1; e > 0; e--) {
        const optim_span t = sp[0];
        sp[0] = sp[e];
        sp[e] = t;
        span_sift(sp, 0, e);
    }
}

/* No buffer that the call writes may share memory with any other buffer of the call (the items
 * run concurrently, so an overlap between parameters would be a race whose bits depend on the
 * thread count); gradients may share memory with one another.  Sorted by start, a buffer
 * overlaps an earlier one iff the earlier one reaching furthest ends after its start: the
 * furthest of all earlier ones when it is written, of the earlier written ones when it is a
 * gradient.  0, or -1 with ValueError naming the pair. */
static int multi_disjoint(const char *fn, optim_multi *m, int nbuf, const char *const *names)
{
    optim_span *sp = PyMem_Malloc((size_t)m->k * (size_t)nbuf * sizeof(optim_span));
    if (!sp) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t cnt = 0;
    for (Py_ssize_t j = 0; j < m->k; j++) {
        int c = 0; /* the set holds the non-None buffers in list order */
        for (int i = 0; i < nbuf; i++) {
            if (!m->seqs[i] || PyTuple_GET_ITEM(m->seqs[i], j) == Py_None)
                continue;
            const Py_buffer *v = &m->sets[j].v[c++]; /* C-contiguous: buf .. buf + len */
            if (v->len > 0)
                sp[cnt++] = (optim_span){(uintptr_t)v->buf, (uintptr_t)v->buf + (uintptr_t)v->len,
                                         j, i};
        }
    }
    span_sort(sp, cnt);
    Py_ssize_t any = -1, wr = -1; /* the earlier spans reaching furthest: any, written */
    for (Py_ssize_t s = 0; s < cnt; s++) {
        const Py_ssize_t prev = sp[s].list == 1 ? wr : any;
        if (prev >= 0 && sp[prev].hi > sp[s].lo) {
            PyErr_Format(PyExc_ValueError,
                         "%s: '%s[%zd]' and '%s[%zd]' share memory; every parameter and state "
                         "buffer of one call must be a separate array (pass each parameter "
                         "once)",
                         fn, names[sp[prev].list], sp[prev].j, names[sp[s].list], sp[s].j);
            PyMem_Free(sp);
            return -1;
        }
        if (any < 0 || sp[s].hi > sp[any].hi)
            any = s;
        if (sp[s].list != 1 && (wr < 0 || sp[s].hi > sp[wr].hi))
            wr = s;
    }
    PyMem_Free(sp);
    return 0;
}

/* Acquires and checks every buffer (per parameter as the single entry does, one float format for
 * the whole call, no memory shared between parameters) and points the items at them.  Returns
 * the kind ('f' / 'd'), or 0 with an exception set.  Call only with k > 0. */
static char multi_bufs(optim_multi *m, const char *fn, int nbuf, const char *const *names,
                       const int *optional)
{
    char kd0 = 0;
    for (Py_ssize_t j = 0; j < m->k; j++) {
        PyObject *a[GC_MAXBUF];
        char nm[GC_MAXBUF][48];
        const char *nms[GC_MAXBUF];
        for (int i = 0; i < nbuf; i++) {
            a[i] = m->seqs[i] ? PyTuple_GET_ITEM(m->seqs[i], j) : Py_None;
            nms[i] = indexed_name(nm[i], sizeof nm[i], names[i], j);
        }
        void *p[GC_MAXBUF];
        Py_ssize_t n;
        const char kd = optim_bufs(&m->sets[j], fn, a, nbuf, nms, optional, p, &n);
        if (!kd)
            return 0;
        if (j == 0) {
            kd0 = kd;
        } else if (kd != kd0) {
            PyErr_Format(PyExc_TypeError,
                         "%s: 'param[%zd]' is %s but 'param[0]' is %s; every buffer of one call "
                         "has one float format",
                         fn, j, kind_name(kd), kind_name(kd0));
            return 0;
        }
        gc_optim_item *it = &m->items[j];
        it->p = p[0];
        it->g = p[1];
        it->s1 = nbuf > 2 ? p[2] : NULL;
        it->s2 = nbuf > 3 ? p[3] : NULL;
        it->s3 = nbuf > 4 ? p[4] : NULL;
        it->n = n;
    }
    if (m->k > 1 && multi_disjoint(fn, m, nbuf, names) < 0)
        return 0;
    return kd0;
}

/* Runs the checked call with the GIL released; releases m. */
static PyObject *multi_run(optim_multi *m, int opt, char kd)
{
    gc_optim_item *items = m->items;
    const Py_ssize_t k = m->k;
    Py_BEGIN_ALLOW_THREADS
    gc_optim_step_multi(opt, kd == 'd', items, k);
    Py_END_ALLOW_THREADS
    multi_release(m);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(sgd_step_multi_doc,
             "sgd_step_multi(param, grad, momentum_buffer, lr, momentum, dampening, weight_decay, "
             "nesterov, maximize, first, /)\n--\n\n"
             "sgd_step on many parameters in one call: param, grad and momentum_buffer are lists "
             "(or tuples) of arrays, one entry per parameter (momentum_buffer may be None, or "
             "hold None, when momentum == 0); first is 0 / 1 for every parameter or a list of "
             "flags, one per parameter.  Everything is checked before any memory is written; "
             "the result is bitwise that of one sgd_step per parameter.");

static PyObject *py_sgd_step_multi(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "sgd_step_multi";
    static const char *const names[3] = {"param", "grad", "momentum_buffer"};
    gc_optim_hp h = {0};
    optim_multi m = {.k = 0};
    PyObject *first = NULL;
    int first_all = -1; /* the shared flag, or -1 for a list */
    if (check_nargs(fn, nargs, 10) < 0 || sgd_hp(fn, args + 3, &h) < 0)
        return NULL;
    if (!PyList_Check(args[9]) && !PyTuple_Check(args[9]) &&
        get_flag(fn, "first", args[9], &first_all) < 0)
        return NULL;
    const int optional[3] = {0, 0, h.momentum == 0.0};
    if (multi_lists(&m, fn, args, 3, names, optional, &h) < 0)
        goto fail;
    if (first_all < 0) {
        first = multi_ints(fn, "first", args[9], m.k);
        if (!first)
            goto fail;
    }
    for (Py_ssize_t j = 0; j < m.k; j++) {
        char nm[48];
        indexed_name(nm, sizeof nm, "first", j);
        if (first_all >= 0)
            m.items[j].h.first = first_all;
        else if (get_flag(fn, nm, PyTuple_GET_ITEM(first, j), &m.items[j].h.first) < 0)
            goto fail;
    }
    Py_CLEAR(first);
    if (m.k == 0) {
        multi_release(&m);
        Py_RETURN_NONE;
    }
    const char kd = multi_bufs(&m, fn, 3, names, optional);
    if (!kd)
        goto fail;
    if (h.momentum == 0.0) /* as sgd_step: a buffer passed with momentum 0 is checked, not used */
        for (Py_ssize_t j = 0; j < m.k; j++)
            m.items[j].s1 = NULL;
    return multi_run(&m, GC_OPTIM_SGD, kd);
fail:
    Py_XDECREF(first);
    multi_release(&m);
    return NULL;
}

PyDoc_STRVAR(adam_step_multi_doc,
             "adam_step_multi(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, "
             "beta2, eps, weight_decay, decoupled, maximize, /)\n--\n\n"
             "adam_step on many parameters in one call: the tensor arguments are lists (or "
             "tuples) of arrays, one entry per parameter (max_exp_avg_sq may be None: no "
             "amsgrad), and step is a list of ints, each parameter's count after this update "
             "(>= 1).  Everything is checked before any memory is written; the result is bitwise "
             "that of one adam_step per parameter.");

static PyObject *py_adam_step_multi(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "adam_step_multi";
    static const char *const names[5] = {"param", "grad", "exp_avg", "exp_avg_sq",
                                         "max_exp_avg_sq"};
    gc_optim_hp h = {0};
    optim_multi m = {.k = 0};
    PyObject *steps = NULL;
    if (check_nargs(fn, nargs, 13) < 0 || adam_hp(fn, args + 6, &h) < 0)
        return NULL;
    const int optional[5] = {0, 0, 0, 0, 1};
    if (multi_lists(&m, fn, args, 5, names, optional, &h) < 0)
        goto fail;
    steps = multi_ints(fn, "step", args[5], m.k);
    if (!steps)
        goto fail;
    for (Py_ssize_t j = 0; j < m.k; j++) {
        char nm[48];
        indexed_name(nm, sizeof nm, "step", j);
        if (adam_step_count(fn, nm, PyTuple_GET_ITEM(steps, j), &m.items[j].h.step) < 0)
            goto fail;
    }
    Py_CLEAR(steps);
    if (m.k == 0) {
        multi_release(&m);
        Py_RETURN_NONE;
    }
    const char kd = multi_bufs(&m, fn, 5, names, optional);
    if (!kd)
        goto fail;
    return multi_run(&m, GC_OPTIM_ADAM, kd);
fail:
    Py_XDECREF(steps);
    multi_release(&m);
    return NULL;
}

PyDoc_STRVAR(rmsprop_step_multi_doc,
             "rmsprop_step_multi(param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, "
             "eps, weight_decay, momentum, maximize, /)\n--\n\n"
             "rmsprop_step on many parameters in one call: the tensor arguments are lists (or "
             "tuples) of arrays, one entry per parameter; grad_avg may be None (not centered), "
             "momentum_buffer may be None when momentum == 0.  Everything is checked before any "
             "memory is written; the result is bitwise that of one rmsprop_step per parameter.");

static PyObject *py_rmsprop_step_multi(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "rmsprop_step_multi";
    static const char *const names[5] = {"param", "grad", "square_avg", "grad_avg",
                                         "momentum_buffer"};
    gc_optim_hp h = {0};
    optim_multi m = {.k = 0};
    if (check_nargs(fn, nargs, 11) < 0 || rmsprop_hp(fn, args + 5, &h) < 0)
        return NULL;
    const int optional[5] = {0, 0, 0, 1, h.momentum == 0.0};
    if (multi_lists(&m, fn, args, 5, names, optional, &h) < 0)
        goto fail;
    if (m.k == 0) {
        multi_release(&m);
        Py_RETURN_NONE;
    }
    const char kd = multi_bufs(&m, fn, 5, names, optional);
    if (!kd)
        goto fail;
    if (h.momentum == 0.0) /* as rmsprop_step: a buffer passed with momentum 0 is not used */
        for (Py_ssize_t j = 0; j < m.k; j++)
            m.items[j].s3 = NULL;
    return multi_run(&m, GC_OPTIM_RMSPROP, kd);
fail:
    multi_release(&m);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* module                                                                                      */

#define GC_METHOD(name, func, doc)                                                                \
    {                                                                                             \
        name, (PyCFunction)(void (*)(void))func, METH_FASTCALL, doc                               \
    }

/* defined in memory.c */
PyObject *gc_py_data_ptr(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyDoc_STRVAR(data_ptr_doc, "data_ptr(buffer) -> int\n\nAddress of the buffer's first element "
                           "(any strides; the buffer is not copied or kept).");

/* defined in host_cache.c */
extern PyTypeObject gc_HostBufferType;
PyObject *gc_py_host_empty(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *gc_py_host_cache_info(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
PyObject *gc_py_host_cache_clear(PyObject *self, PyObject *const *args, Py_ssize_t nargs);
/* fastpath.c */
#define GC_FAST(name) PyObject *gc_py_##name(PyObject *, PyObject *const *, Py_ssize_t); \
    extern const char gc_##name##_doc[]
GC_FAST(fast_setup);
GC_FAST(set_fast_limit);
GC_FAST(fast_unary);
GC_FAST(fast_binary);
GC_FAST(fast_unary_backward);
#undef GC_FAST

PyDoc_STRVAR(host_empty_doc,
             "host_empty(nbytes) -> HostBuffer\n\nUninitialised, 64-byte-aligned, writable host "
             "memory from the caching allocator (wrap it with numpy.frombuffer); the block returns "
             "to the cache when the buffer is freed.  GPUCORE_HOST_CACHE_MB caps the cache.");
PyDoc_STRVAR(host_cache_info_doc,
             "host_cache_info() -> dict\n\ncached_bytes, limit_bytes, hits, misses of the "
             "caching host allocator.");
PyDoc_STRVAR(host_cache_clear_doc,
             "host_cache_clear() -> int\n\nGive every cached (unused) block back to the OS; "
             "returns the bytes freed.");

static PyMethodDef cpu_methods[] = {
    GC_METHOD("data_ptr", gc_py_data_ptr, data_ptr_doc),
    GC_METHOD("host_empty", gc_py_host_empty, host_empty_doc),
    GC_METHOD("fast_setup", gc_py_fast_setup, gc_fast_setup_doc),
    GC_METHOD("set_fast_limit", gc_py_set_fast_limit, gc_set_fast_limit_doc),
    GC_METHOD("fast_unary", gc_py_fast_unary, gc_fast_unary_doc),
    GC_METHOD("fast_binary", gc_py_fast_binary, gc_fast_binary_doc),
    GC_METHOD("fast_unary_backward", gc_py_fast_unary_backward, gc_fast_unary_backward_doc),
    GC_METHOD("host_cache_info", gc_py_host_cache_info, host_cache_info_doc),
    GC_METHOD("host_cache_clear", gc_py_host_cache_clear, host_cache_clear_doc),
    GC_METHOD("gemm", py_gemm, gemm_doc),
    GC_METHOD("gemm_ex", py_gemm_ex, gemm_ex_doc),
    GC_METHOD("info", py_info, info_doc),
    GC_METHOD("set_num_threads", py_set_num_threads, set_num_threads_doc),
    GC_METHOD("unary", py_unary, unary_doc),
    GC_METHOD("unary_backward", py_unary_backward, unary_backward_doc),
    GC_METHOD("binary", py_binary, binary_doc),
    GC_METHOD("where", py_where, where_doc),
    GC_METHOD("reduce", py_reduce, reduce_doc),
    GC_METHOD("softmax", py_softmax, softmax_doc),
    GC_METHOD("softmax_backward", py_softmax_backward, softmax_backward_doc),
    GC_METHOD("cross_entropy_forward", py_ce_forward, ce_forward_doc),
    GC_METHOD("cross_entropy_backward", py_ce_backward, ce_backward_doc),
    GC_METHOD("copy", py_copy, copy_doc),
    GC_METHOD("im2col", py_im2col, im2col_doc),
    GC_METHOD("col2im", py_col2im, col2im_doc),
    GC_METHOD("max_pool2d", py_max_pool2d, max_pool2d_doc),
    GC_METHOD("max_pool2d_backward", py_max_pool2d_backward, max_pool2d_backward_doc),
    GC_METHOD("conv2d_forward", py_conv2d_forward, conv2d_forward_doc),
    GC_METHOD("conv2d_backward", py_conv2d_backward, conv2d_backward_doc),
    GC_METHOD("philox", py_philox, philox_doc),
    GC_METHOD("uniform", py_uniform, uniform_doc),
    GC_METHOD("normal", py_normal, normal_doc),
    GC_METHOD("philox_block", py_philox_block, philox_block_doc),
    GC_METHOD("sgd_step", py_sgd_step, sgd_step_doc),
    GC_METHOD("adam_step", py_adam_step, adam_step_doc),
    GC_METHOD("rmsprop_step", py_rmsprop_step, rmsprop_step_doc),
    GC_METHOD("sgd_step_multi", py_sgd_step_multi, sgd_step_multi_doc),
    GC_METHOD("adam_step_multi", py_adam_step_multi, adam_step_multi_doc),
    GC_METHOD("rmsprop_step_multi", py_rmsprop_step_multi, rmsprop_step_multi_doc),
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef cpu_module = {
    PyModuleDef_HEAD_INIT,
    "gpucore._cpu",
    "C11 kernels over host buffers for gpucore (see cpu/README.md).  Kernels write into the "
    "output buffers they are given and release the GIL while they run.",
    -1,
    cpu_methods,
    NULL,
    NULL,
    NULL,
    NULL};

static int add_names(PyObject *m, const char *prefix, const char *const *names, int count)
{
    char full[64];
    for (int i = 0; i < count; i++) {
        PyOS_snprintf(full, sizeof full, "%s%s", prefix, names[i]);
        if (PyModule_AddIntConstant(m, full, i) < 0)
            return -1;
    }
    return 0;
}

PyMODINIT_FUNC PyInit__cpu(void)
{
    char err[512];
    if (gc_cpu_init(getenv("GPUCORE_CPU_ISA"), err, sizeof err) < 0) {
        PyErr_SetString(PyExc_ImportError, err);
        return NULL;
    }
    if (PyType_Ready(&gc_HostBufferType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&cpu_module);
    if (!m)
        return NULL;
    if (add_names(m, "UNARY_", unary_names, GC_UNARY_COUNT) < 0 ||
        add_names(m, "BINARY_", binary_names, GC_BINARY_COUNT) < 0 ||
        add_names(m, "REDUCE_", reduce_names, GC_REDUCE_COUNT) < 0 ||
        PyModule_AddIntConstant(m, "MAX_DIMS", GC_MAX_DIMS) < 0 ||
        PyModule_AddObjectRef(m, "HostBuffer", (PyObject *)&gc_HostBufferType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}

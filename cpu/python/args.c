/* Argument checking shared by the Python bindings (see args.h). */
#include "args.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ */
/* Buffer sets: every buffer acquired by a call, released together on every path               */

void bufs_release(bufset *bs)
{
    while (bs->n > 0)
        PyBuffer_Release(&bs->v[--bs->n]);
}

PyObject *bufs_done(bufset *bs, int rc)
{
    bufs_release(bs);
    if (rc < 0)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

/* The element stride of dimension d (NULL strides mean C order). */
Py_ssize_t buf_stride(const Py_buffer *v, int d)
{
    if (v->strides)
        return v->strides[d];
    Py_ssize_t s = v->itemsize;
    for (int e = v->ndim - 1; e > d; e--)
        s *= v->shape[e];
    return s;
}

/* Number of elements; the exporter guarantees the product fits (its len is that times itemsize). */
Py_ssize_t buf_nelem(const Py_buffer *v)
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
const char *shape_str(const Py_buffer *v, char *s, size_t cap)
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

int buf_overlap(const Py_buffer *a, const Py_buffer *b)
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
Py_buffer *get_buf(bufset *bs, const char *fn, const char *name, PyObject *obj,
                          int writable)
{
    if (bs->n >= GC_MAXBUF) { /* a binding taking more buffers than a set holds */
        PyErr_Format(PyExc_SystemError, "%s: more than %d buffers in one call", fn, GC_MAXBUF);
        return NULL;
    }
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

/* See args.h. */
int get_bufs(bufset *bs, const char *fn, PyObject *const *args, int nb,
             const char *const *names, const char *modes, Py_buffer **v)
{
    for (int i = 0; i < nb; i++) {
        const char m = modes[i];
        v[i] = NULL;
        if ((m == 'R' || m == 'W') && args[i] == Py_None)
            continue;
        v[i] = get_buf(bs, fn, names[i], args[i], m == 'w' || m == 'W');
        if (!v[i])
            return -1;
    }
    return 0;
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
char fmt_code(const Py_buffer *v)
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
int fmt_is_plain(const Py_buffer *v)
{
    return strchr(v->format ? v->format : "B", 'O') == NULL;
}

/* Same element type for a bytewise move: same canonical code, or the same format string. */
int fmt_same(const Py_buffer *a, const Py_buffer *b)
{
    if (a->itemsize != b->itemsize)
        return 0;
    const char ca = fmt_code(a), cb = fmt_code(b);
    if (ca || cb)
        return ca == cb;
    return strcmp(fmt_body(a), fmt_body(b)) == 0;
}

const char *fmt_str(const Py_buffer *v)
{
    return v->format ? v->format : "B";
}

/* See args.h. */
int fmt_elem(const Py_buffer *v)
{
    switch (fmt_code(v)) {
    case '?': return v->itemsize == 1 ? GC_ELEM_BOOL : -1;
    case 'B': return GC_ELEM_U8;
    case 'b': return GC_ELEM_I8;
    case 'h': return GC_ELEM_I16;
    case 'i': return GC_ELEM_I32;
    case 'q': return GC_ELEM_I64;
    case 'f': return v->itemsize == 4 ? GC_ELEM_F32 : -1;
    case 'd': return v->itemsize == 8 ? GC_ELEM_F64 : -1;
    default: return -1;
    }
}

/* Expects a float32 / float64 buffer; returns 'f' or 'd', or 0 with TypeError set. */
char float_kind(const char *fn, const char *name, const Py_buffer *v)
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

const char *kind_name(char k)
{
    switch (k) {
    case 'f': return "float32 ('f')";
    case 'd': return "float64 ('d')";
    case '?': return "bool ('?')";
    case 'q': return "int64 ('q' or 'l', 8 bytes)";
    case 'i': return "int32 ('i' or 'l', 4 bytes)";
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
    case 'i': return 4;
    case 'I': return 4;
    default: return 0;
    }
}

/* Expects exactly type code k; TypeError otherwise. */
int need_kind(const char *fn, const char *name, const Py_buffer *v, char k)
{
    if (fmt_code(v) == k && v->itemsize == kind_size(k))
        return 0;
    PyErr_Format(PyExc_TypeError, "%s: '%s' must be %s, got format '%s' with item size %zd", fn,
                 name, kind_name(k), fmt_str(v), v->itemsize);
    return -1;
}

int need_contig(const char *fn, const char *name, const Py_buffer *v)
{
    if (PyBuffer_IsContiguous(v, 'C'))
        return 0;
    char s[200];
    PyErr_Format(PyExc_ValueError,
                 "%s: '%s' (shape %s) must be C-contiguous; pass a contiguous copy", fn, name,
                 shape_str(v, s, sizeof s));
    return -1;
}

/* See args.h. */
char need_float_contig(const char *fn, int nb, Py_buffer *const *v, const char *const *names,
                       const char *kinds)
{
    const char kd = float_kind(fn, names[0], v[0]);
    if (!kd)
        return 0;
    for (int i = 1; i < nb; i++)
        if (v[i] && need_kind(fn, names[i], v[i], kinds[i] == '=' ? kd : kinds[i]) < 0)
            return 0;
    for (int i = 0; i < nb; i++)
        if (v[i] && need_contig(fn, names[i], v[i]) < 0)
            return 0;
    return kd;
}

/* v must hold at least need elements; the context message (printf format + args) is formatted
 * only on failure. */
int need_elems(const char *fn, const char *name, const Py_buffer *v, Py_ssize_t need,
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

/* The operands of a batched product (args.h). */
int need_batched_product(const char *fn, Py_buffer *const *v, Py_ssize_t batch, Py_ssize_t m,
                         Py_ssize_t n, Py_ssize_t k, Py_ssize_t sa, Py_ssize_t sb, Py_ssize_t sc)
{
    int ok = 1;
    const Py_ssize_t mk = smul(m, k, &ok), kn = smul(k, n, &ok), mn = smul(m, n, &ok);
    const Py_ssize_t last = batch > 0 ? batch - 1 : 0;
    const Py_ssize_t na = sadd(smul(last, sa, &ok), mk, &ok);
    const Py_ssize_t nb = sadd(smul(last, sb, &ok), kn, &ok);
    const Py_ssize_t nc = sadd(smul(last, sc, &ok), mn, &ok);
    if (!ok)
        return overflow_error(fn, "the operand sizes");
    if (batch == 0 || mn == 0)
        return 1;
    if (batch > 1 && sc < mn) {
        PyErr_Format(PyExc_ValueError, "%s: sc %zd < m*n %zd: the batch items of c would overlap",
                     fn, sc, mn);
        return -1;
    }
    if ((mk > 0 && need_elems(fn, "a", v[0], na, "batch %zd, m %zd, k %zd, sa %zd", batch, m, k,
                              sa) < 0) ||
        (kn > 0 && need_elems(fn, "b", v[1], nb, "batch %zd, k %zd, n %zd, sb %zd", batch, k, n,
                              sb) < 0) ||
        need_elems(fn, "c", v[2], nc, "batch %zd, m %zd, n %zd, sc %zd", batch, m, n, sc) < 0 ||
        need_no_overlap(fn, "c", v[2], "a", v[0], 0) < 0 ||
        need_no_overlap(fn, "c", v[2], "b", v[1], 0) < 0)
        return -1;
    return 0;
}

/* out must not share memory with in, except exactly (same start) when allow_same. */
int need_no_overlap(const char *fn, const char *oname, const Py_buffer *out,
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

/* See args.h. */
int need_outputs_apart(const char *fn, int nb, Py_buffer *const *v, const char *const *names,
                       const Py_ssize_t *need, const int *out)
{
    for (int i = 0; i < nb; i++) {
        if (!out[i] || !v[i] || !need[i])
            continue;
        for (int j = 0; j < nb; j++)
            if (j != i && v[j] && need[j] &&
                need_no_overlap(fn, names[i], v[i], names[j], v[j], 0) < 0)
                return -1;
    }
    return 0;
}

/* See args.h. */
const char *act_names(char *s, size_t cap, const char *prefix)
{
    size_t used = 0;
    s[0] = '\0';
    for (int op = 0; op < GC_UNARY_COUNT && used < cap; op++)
        if (gc_unary_has_backward(op))
            used += (size_t)PyOS_snprintf(s + used, cap - used, "%s%s%s", used ? ", " : "",
                                          prefix, gc_unary_names[op]);
    return s;
}

/* ------------------------------------------------------------------------------------------ */
/* Scalars                                                                                     */

int check_nargs(const char *fn, Py_ssize_t nargs, Py_ssize_t want)
{
    if (nargs == want)
        return 0;
    PyErr_Format(PyExc_TypeError, "%s() takes exactly %zd positional arguments (%zd given)", fn,
                 want, nargs);
    return -1;
}

/* o as a Python int (PyNumber_Index: a new reference), or NULL with the exception set ("'name'
 * must be an int" where o is none). */
static PyObject *get_index(const char *fn, const char *name, PyObject *o)
{
    PyObject *idx = PyNumber_Index(o);
    if (!idx && PyErr_ExceptionMatches(PyExc_TypeError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "%s: '%s' must be an int, got %.100s", fn, name,
                     Py_TYPE(o)->tp_name);
    }
    return idx;
}

int get_ssize(const char *fn, const char *name, PyObject *o, Py_ssize_t *out)
{
    PyObject *idx = get_index(fn, name, o);
    if (!idx)
        return -1;
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
int get_min(const char *fn, const char *name, PyObject *o, Py_ssize_t lo, Py_ssize_t *out)
{
    if (get_ssize(fn, name, o, out) < 0)
        return -1;
    if (*out < lo) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be >= %zd, got %zd", fn, name, lo, *out);
        return -1;
    }
    return 0;
}

int get_flag(const char *fn, const char *name, PyObject *o, int *out)
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

int get_op(const char *fn, PyObject *o, int count, const char *prefix, int *out)
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

int get_double(const char *fn, const char *name, PyObject *o, double *out)
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

const char *repr_double(char *buf, size_t size, double x)
{
    char *r = PyOS_double_to_string(x, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    snprintf(buf, size, "%s", r ? r : "?");
    if (!r)
        PyErr_Clear(); /* the caller is about to set its own error */
    PyMem_Free(r);
    return buf;
}

/* An int in [0, 2**bits). */
int get_unsigned(const char *fn, const char *name, PyObject *o, int bits, uint64_t *out)
{
    PyObject *idx = get_index(fn, name, o);
    if (!idx)
        return -1;
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

int get_i64(const char *fn, const char *name, PyObject *o, int64_t *out)
{
    PyObject *idx = get_index(fn, name, o);
    if (!idx)
        return -1;
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
Py_ssize_t smul(Py_ssize_t a, Py_ssize_t b, int *ok)
{
    if (a < 0 || b < 0 || (a != 0 && b > PY_SSIZE_T_MAX / a)) {
        *ok = 0;
        return 0;
    }
    return a * b;
}

Py_ssize_t sadd(Py_ssize_t a, Py_ssize_t b, int *ok)
{
    if (a < 0 || b < 0 || a > PY_SSIZE_T_MAX - b) {
        *ok = 0;
        return 0;
    }
    return a + b;
}

int overflow_error(const char *fn, const char *what)
{
    PyErr_Format(PyExc_ValueError, "%s: sizes overflow (%s)", fn, what);
    return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* Broadcast iteration spaces                                                                  */

/* Sets operand o of it (whose shape is out's, ndim nd) from in: shapes right-aligned; a dim of
 * in equal to out's keeps its stride, a dim of 1 broadcasts (stride 0). */
int iter_broadcast(const char *fn, const char *name, const Py_buffer *in,
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

int iter_init_out(const char *fn, const Py_buffer *out, gc_iter *it, int o)
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

/* An input sharing memory with the (contiguous) output is fine only when it is the very same
 * elements: same start and, on every non-trivial dim, out's strides. */
int iter_alias_ok(const char *fn, const char *iname, const Py_buffer *in,
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

/* outer*n*inner and outer*inner, overflow-checked. */
int three_axis_sizes(const char *fn, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner,
                            Py_ssize_t *total, Py_ssize_t *rows)
{
    int ok = 1;
    *rows = smul(outer, inner, &ok);
    *total = smul(*rows, n, &ok);
    if (!ok)
        return overflow_error(fn, "outer * n * inner");
    return 0;
}

/* Parses the 12 geometry ints args[0..12) (n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw), computes
 * oh, ow and the element counts of x and col. */
int conv_geometry(const char *fn, PyObject *const *g, gc_conv *p, Py_ssize_t *nx,
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

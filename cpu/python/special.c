/* Binding of special.c: torch.special's functions of one argument (special) and of two
 * (special2). */
#include "args.h"
#include "bindings.h"

GC_DOC(special, "special(op, x, out, /)\n--\n\n"
                "out = f(x) elementwise for op an OPCODES['special'] code (i0, i0e, i1, i1e, "
                "bessel_j0 ... airy_ai, "
                "erfcx, ndtri, entr), computed in double: x and out C-contiguous of one float "
                "format (float32 or float64) and element count; out writable, x itself or apart "
                "from it.");

PyObject *gc_py_special(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "special";
    static const char *const names[] = {"x", "out"};
    bufset bs = {.n = 0};
    Py_buffer *v[2];
    int op;
    if (check_nargs(fn, nargs, 3) < 0 || get_op(fn, args[0], GC_SPECIAL_COUNT, "SPECIAL_", &op) < 0)
        return NULL;
    char kd;
    if (get_bufs(&bs, fn, args + 1, 2, names, "rw", v) < 0 ||
        !(kd = need_float_contig(fn, 2, v, names, "==")))
        goto fail;
    const Py_ssize_t n = buf_nelem(v[0]);
    if (buf_nelem(v[1]) != n) {
        PyErr_Format(PyExc_ValueError, "%s: x holds %zd elements but out %zd; they must match", fn,
                     n, buf_nelem(v[1]));
        goto fail;
    }
    if (need_no_overlap(fn, "out", v[1], "x", v[0], 1) < 0)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    gc_special(op, kd == 'd', v[0]->buf, v[1]->buf, n);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(special2, "special2(op, a, b, out, /)\n--\n\n"
                 "out = f(a, b) elementwise for op an OPCODES['special2'] code (zeta, igamma, "
                 "igammac, the orthogonal polynomials name(x, n)): a, b and out C-contiguous of "
                 "one float format (float32 or float64); a and b hold out's element count or one "
                 "element (broadcast); out writable, each input itself or apart from it. zeta "
                 "and igamma are computed in double, the polynomials in the format's own type.");

PyObject *gc_py_special2(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "special2";
    static const char *const names[] = {"a", "b", "out"};
    bufset bs = {.n = 0};
    Py_buffer *v[3];
    int op;
    if (check_nargs(fn, nargs, 4) < 0 ||
        get_op(fn, args[0], GC_SPECIAL2_COUNT, "SPECIAL2_", &op) < 0)
        return NULL;
    char kd;
    if (get_bufs(&bs, fn, args + 1, 3, names, "rrw", v) < 0 ||
        !(kd = need_float_contig(fn, 3, v, names, "===")))
        goto fail;
    const Py_ssize_t n = buf_nelem(v[2]);
    Py_ssize_t step[2];
    for (int i = 0; i < 2; i++) {
        const Py_ssize_t m = buf_nelem(v[i]);
        if (m != n && m != 1) {
            PyErr_Format(PyExc_ValueError,
                         "%s: %s holds %zd elements but out %zd; it must hold out's count or one "
                         "(broadcast)",
                         fn, names[i], m, n);
            goto fail;
        }
        step[i] = m == n ? 1 : 0;
        /* out may be the very buffer of a full-size input (each element is read before it is
         * written), never of a broadcast one (out[0] would change it for the rest) */
        if (need_no_overlap(fn, "out", v[2], names[i], v[i], m == n) < 0)
            goto fail;
    }
    if (n > 0) {
        Py_BEGIN_ALLOW_THREADS
        gc_special2(op, kd == 'd', v[0]->buf, step[0], v[1]->buf, step[1], v[2]->buf, n);
        Py_END_ALLOW_THREADS
    }
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

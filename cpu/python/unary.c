/* Bindings of unary.c: unary, unary_backward. */
#include "args.h"
#include "bindings.h"

GC_DOC(unary, "unary(op, x, out, /)\n--\n\n"
              "out = f(x) elementwise (op: a UNARY_* constant); x and out C-contiguous, "
              "same length and float format; out may be x.");

PyObject *gc_py_unary(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "unary";
    static const char *const names[2] = {"x", "out"};
    bufset bs = {.n = 0};
    Py_buffer *v[2];
    int op;
    if (check_nargs(fn, nargs, 3) < 0 || get_op(fn, args[0], GC_UNARY_COUNT, "UNARY_", &op) < 0)
        return NULL;
    if (get_bufs(&bs, fn, args + 1, 2, names, "rw", v) < 0)
        goto fail;
    Py_buffer *x = v[0], *out = v[1];
    const char kd = need_float_contig(fn, 2, v, names, "==");
    if (!kd)
        goto fail;
    const Py_ssize_t nx = buf_nelem(x), no = buf_nelem(out);
    if (nx != no) {
        PyErr_Format(PyExc_ValueError,
                     "unary(%s): x has %zd elements but out has %zd; they must be equal",
                     gc_unary_names[op], nx, no);
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

GC_DOC(unary_backward,
       "unary_backward(op, grad, saved, out, /)\n--\n\n"
       "out = grad * f'(...): RELU (saved = x), SIGMOID (saved = y), TANH (saved = y), "
       "GELU and GELU_TANH (saved = x).  All C-contiguous, same length and float format.");

PyObject *gc_py_unary_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "unary_backward";
    static const char *const names[3] = {"grad", "saved", "out"};
    bufset bs = {.n = 0};
    Py_buffer *v[3];
    int op;
    if (check_nargs(fn, nargs, 4) < 0 || get_op(fn, args[0], GC_UNARY_COUNT, "UNARY_", &op) < 0)
        return NULL;
    if (!gc_unary_has_backward(op)) {
        char acts[200];
        PyErr_Format(PyExc_ValueError,
                     "unary_backward: op %d (%s) has no backward kernel; supported: %s", op,
                     gc_unary_names[op], act_names(acts, sizeof acts, ""));
        return NULL;
    }
    if (get_bufs(&bs, fn, args + 1, 3, names, "rrw", v) < 0)
        goto fail;
    Py_buffer *g = v[0], *s = v[1], *out = v[2];
    const char kd = need_float_contig(fn, 3, v, names, "===");
    if (!kd)
        goto fail;
    const Py_ssize_t n = buf_nelem(g);
    if (buf_nelem(s) != n || buf_nelem(out) != n) {
        PyErr_Format(PyExc_ValueError,
                     "unary_backward(%s): grad, saved and out must have equal lengths, got %zd, "
                     "%zd and %zd",
                     gc_unary_names[op], n, buf_nelem(s), buf_nelem(out));
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

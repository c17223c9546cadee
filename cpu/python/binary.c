/* Bindings of binary.c: binary, where (broadcasting over any input strides). */
#include "args.h"
#include "bindings.h"

#include <string.h>

GC_DOC(binary,
       "binary(op, a, b, out, /)\n--\n\n"
       "out = a op b with numpy broadcasting (op: a BINARY_* constant).  a, b: same float "
       "format, any strides, ndim <= out.ndim; out C-contiguous, ndim <= 8, a/b's format "
       "for arithmetic ops and bool for comparisons.");

PyObject *gc_py_binary(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "binary";
    static const char *const names[3] = {"a", "b", "out"};
    bufset bs = {.n = 0};
    Py_buffer *v[3];
    int op;
    if (check_nargs(fn, nargs, 4) < 0 ||
        get_op(fn, args[0], GC_BINARY_COUNT, "BINARY_", &op) < 0)
        return NULL;
    if (get_bufs(&bs, fn, args + 1, 3, names, "rrw", v) < 0)
        goto fail;
    Py_buffer *a = v[0], *b = v[1], *out = v[2];
    const char kd = float_kind(fn, "a", a);
    if (!kd || need_kind(fn, "b", b, kd) < 0 ||
        need_kind(fn, "out", out, gc_binary_writes_bool(op) ? '?' : kd) < 0 ||
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

GC_DOC(where, "where(cond, a, b, out, /)\n--\n\n"
              "out = cond ? a : b with broadcasting as binary; cond bool; a, b and out "
              "the same format (any item size 1, 2, 4 or 8); out C-contiguous.");

PyObject *gc_py_where(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "where";
    static const char *const names[4] = {"cond", "a", "b", "out"};
    bufset bs = {.n = 0};
    Py_buffer *v[4];
    if (check_nargs(fn, nargs, 4) < 0)
        return NULL;
    if (get_bufs(&bs, fn, args, 4, names, "rrrw", v) < 0)
        goto fail;
    Py_buffer *c = v[0], *a = v[1], *b = v[2], *out = v[3];
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
    if (iter_init_out(fn, out, &it, 3) < 0)
        goto fail;
    for (int o = 0; o < 3; o++)
        if (iter_broadcast(fn, names[o], v[o], out, &it, o) < 0)
            goto fail;
    for (int o = 0; o < 3; o++)
        if (iter_alias_ok(fn, names[o], v[o], out, &it, o, 3) < 0)
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

/* Binding of special.c: torch.special functions of one argument, computed in double. */
#include "args.h"
#include "bindings.h"

GC_DOC(special, "special(op, x, out, /)\n--\n\n"
                "out = f(x) elementwise for op an OPCODES['special'] code (i0, i0e, i1, i1e, "
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

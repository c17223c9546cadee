/* Bindings of conv.c: conv2d_forward, conv2d_backward (groups 1). */
#include "args.h"
#include "bindings.h"

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
    static const int fwd_out[4] = {0, 0, 0, 1}, bwd_out[6] = {0, 0, 0, 1, 1, 1};
    if (need_outputs_apart(fn, nb, v, names, need, fwd ? fwd_out : bwd_out) < 0)
        goto fail;
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

GC_DOC(conv2d_forward,
             "conv2d_forward(x, w, bias, out, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o, /)"
             "\n--\n\n"
             "out [n, o, oh, ow] = conv2d(x [n, c, h, w], w [o, c, kh, kw]) + bias [o] (None: no "
             "bias); groups = 1, zero padding.");

PyObject *gc_py_conv2d_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return conv2d_common("conv2d_forward", args, nargs, 1);
}

GC_DOC(conv2d_backward,
             "conv2d_backward(x, w, g, gx, gw, gb, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o, /)"
             "\n--\n\n"
             "Gradients of conv2d_forward given g [n, o, oh, ow]: gx [n, c, h, w], gw [o, c, kh, "
             "kw], gb [o]; each may be None (not computed).  Sums are bitwise independent of the "
             "thread count.");

PyObject *gc_py_conv2d_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return conv2d_common("conv2d_backward", args, nargs, 0);
}

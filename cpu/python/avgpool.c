/* Bindings of avgpool.c: avg_pool2d, avg_pool2d_backward. */
#include "args.h"
#include "bindings.h"

/* avg_pool2d(x, y, planes, h, w, kh, kw, sh, sw, ph, pw, oh, ow, count_include_pad, divisor)
 * and avg_pool2d_backward(g, gx, <the same 13>): buffer 0 read, buffer 1 written. */
static PyObject *avg_pool_call(const char *fn, PyObject *const *args, Py_ssize_t nargs, int fwd)
{
    gc_pool2d p = {.dh = 1, .dw = 1};
    Py_ssize_t divisor;
    int include_pad;
    if (check_nargs(fn, nargs, 15) < 0)
        return NULL;
    PyObject *const *g = args + 2;
    if (get_min(fn, "planes", g[0], 0, &p.planes) < 0 || get_min(fn, "h", g[1], 1, &p.h) < 0 ||
        get_min(fn, "w", g[2], 1, &p.w) < 0 || get_min(fn, "kh", g[3], 1, &p.kh) < 0 ||
        get_min(fn, "kw", g[4], 1, &p.kw) < 0 || get_min(fn, "sh", g[5], 1, &p.sh) < 0 ||
        get_min(fn, "sw", g[6], 1, &p.sw) < 0 || get_min(fn, "ph", g[7], 0, &p.ph) < 0 ||
        get_min(fn, "pw", g[8], 0, &p.pw) < 0 || get_min(fn, "oh", g[9], 1, &p.oh) < 0 ||
        get_min(fn, "ow", g[10], 1, &p.ow) < 0 ||
        get_flag(fn, "count_include_pad", g[11], &include_pad) < 0 ||
        get_min(fn, "divisor", g[12], 0, &divisor) < 0)
        return NULL;
    int ok = 1;
    const Py_ssize_t nin = smul(p.planes, smul(p.h, p.w, &ok), &ok);
    const Py_ssize_t nout = smul(p.planes, smul(p.oh, p.ow, &ok), &ok);
    if (!ok) {
        overflow_error(fn, "planes * h * w or planes * oh * ow");
        return NULL;
    }
    static const char *fnames[] = {"x", "y"}, *bnames[] = {"g", "gx"};
    const char *const *names = fwd ? fnames : bnames;
    const Py_ssize_t need[2] = {fwd ? nin : nout, fwd ? nout : nin};
    bufset bs = {.n = 0};
    Py_buffer *v[2];
    if (get_bufs(&bs, fn, args, 2, names, "rw", v) < 0)
        goto fail;
    const char kd = need_float_contig(fn, 2, v, names, "==");
    if (!kd)
        goto fail;
    for (int i = 0; i < 2; i++)
        if (need_elems(fn, names[i], v[i], need[i], "planes=%zd, h=%zd, w=%zd, oh=%zd, ow=%zd",
                       p.planes, p.h, p.w, p.oh, p.ow) < 0)
            goto fail;
    if (p.planes > 0 && need_no_overlap(fn, names[1], v[1], names[0], v[0], 0) < 0)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (fwd && kd == 'f')
        gc_avg_pool2d_f32(v[0]->buf, v[1]->buf, &p, include_pad, divisor);
    else if (fwd)
        gc_avg_pool2d_f64(v[0]->buf, v[1]->buf, &p, include_pad, divisor);
    else if (kd == 'f')
        gc_avg_pool2d_backward_f32(v[0]->buf, v[1]->buf, &p, include_pad, divisor);
    else
        gc_avg_pool2d_backward_f64(v[0]->buf, v[1]->buf, &p, include_pad, divisor);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(avg_pool2d,
       "avg_pool2d(x, y, planes, h, w, kh, kw, sh, sw, ph, pw, oh, ow, count_include_pad, "
       "divisor, /)\n--\n\n"
       "Average pooling of x [planes, h, w] into y [planes, oh, ow], PyTorch's rules (zero "
       "padding; the divisor counts the padding when count_include_pad, else only the input; "
       "divisor > 0 overrides it).");

PyObject *gc_py_avg_pool2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return avg_pool_call("avg_pool2d", args, nargs, 1);
}

GC_DOC(avg_pool2d_backward,
       "avg_pool2d_backward(g, gx, planes, h, w, kh, kw, sh, sw, ph, pw, oh, ow, "
       "count_include_pad, divisor, /)\n--\n\n"
       "gx [planes, h, w]: each input's share of the gradients g [planes, oh, ow] of the "
       "windows holding it (each divided by its window's divisor).");

PyObject *gc_py_avg_pool2d_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return avg_pool_call("avg_pool2d_backward", args, nargs, 0);
}

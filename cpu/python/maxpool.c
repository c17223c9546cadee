/* Bindings of maxpool.c: max_pool2d, max_pool2d_backward. */
#include "args.h"
#include "bindings.h"

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
    if (get_bufs(&bs, fn, args, 3, names, fwd ? "rww" : "rrw", v) < 0)
        goto fail;
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
    static const int fwd_out[3] = {0, 1, 1}, bwd_out[3] = {0, 0, 1};
    if (need_outputs_apart(fn, 3, v, names, need, fwd ? fwd_out : bwd_out) < 0)
        goto fail;
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

GC_DOC(max_pool2d,
             "max_pool2d(x, vals, idx, planes, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, /)"
             "\n--\n\n"
             "Max pooling of x [planes, h, w] into vals [planes, oh, ow] and int64 idx (flat "
             "index into h*w of each maximum), PyTorch's rules (padding -inf, first maximum, NaN "
             "wins).");

PyObject *gc_py_max_pool2d(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return pool2d_common("max_pool2d", args, nargs, 1);
}

GC_DOC(max_pool2d_backward,
             "max_pool2d_backward(g, idx, gx, planes, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, "
             "ow, /)\n--\n\n"
             "gx [planes, h, w] = zeros with g [planes, oh, ow] added at idx; IndexError if an "
             "index lies outside [0, h*w).");

PyObject *gc_py_max_pool2d_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return pool2d_common("max_pool2d_backward", args, nargs, 0);
}

/* The fast lane (fastpath.c) for softmax / log_softmax (+ backward) and the normalizations:
 * layer_norm / rms_norm over trailing dims (+ backward), group_norm and batch_norm forward.
 * Each runs the general path's kernel on plain contiguous host Tensors (the weights and biases
 * also a Parameter, fast_accept) in one C call and returns None where the general path must
 * decide (the same results). */
#include "bindings.h"

#include <math.h>

#include "fastpath.h"
#include "kernels.h"

/* ---- softmax / log_softmax ---------------------------------------------------------------- */

GC_DOC(fast_softmax,
       "fast_softmax(x, dim, log, /)\n--\n\n"
       "A new Tensor softmax(x, dim) (log_softmax when log) when x is a plain, contiguous float "
       "host Tensor with at least one dim, -ndim <= dim < ndim, and the lane is open; else "
       "None.  One call of the kernel (cpu/softmax.c), which stays on this thread below ~50 us "
       "of work.");

PyObject *gc_py_fast_softmax(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "fast_softmax takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    const long dim = PyLong_AsLong(args[1]);
    const int log = PyObject_IsTrue(args[2]);
    if ((dim == -1 && PyErr_Occurred()) || log < 0)
        return NULL;
    if (gc_fast_limit == 0 || !gc_fast_tensor_type)
        Py_RETURN_NONE;
    const char k = gc_fast_kind(args[0]);
    Py_buffer a;
    if (!k || !gc_fast_buf(args[0], &a))
        Py_RETURN_NONE;
    const int nd = a.ndim;
    const Py_ssize_t total = a.len / (k == 'f' ? 4 : 8);
    PyObject *res;
    void *out;
    if (nd == 0 || dim < -nd || dim >= nd || total == 0 || total >= gc_fast_limit) {
        res = Py_NewRef(Py_None);
    } else if ((res = gc_fast_new(args[0], k, &out)) != NULL) {
        const int d = (int)(dim < 0 ? dim + nd : dim);
        Py_ssize_t outer = 1, inner = 1;
        for (int i = 0; i < d; i++)
            outer *= a.shape[i];
        for (int i = d + 1; i < nd; i++)
            inner *= a.shape[i];
        const Py_ssize_t n = a.shape[d];
        PyThreadState *ts = total >= 65536 ? PyEval_SaveThread() : NULL;
        if (k == 'f')
            gc_softmax_f32((const float *)a.buf, (float *)out, outer, n, inner, log);
        else
            gc_softmax_f64((const double *)a.buf, (double *)out, outer, n, inner, log);
        if (ts)
            PyEval_RestoreThread(ts);
    }
    PyBuffer_Release(&a);
    return res;
}

/* softmax_backward / log_softmax_backward: the general path's kernel (softmax.c) on g and the
 * forward's output y, both plain contiguous host Tensors of one float dtype and shape. */
GC_DOC(fast_softmax_backward,
       "fast_softmax_backward(g, y, dim, log, /)\n--\n\n"
       "A new Tensor: the gradient of softmax (log_softmax when log) along dim for the incoming "
       "gradient g and the forward's output y, when both are plain, contiguous float host "
       "Tensors of one dtype and shape and the lane is open; else None.  The kernel of the "
       "general path (cpu/softmax.c): the same bits.");

PyObject *gc_py_fast_softmax_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "fast_softmax_backward takes 4 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    const long dim = PyLong_AsLong(args[2]);
    const int log = PyObject_IsTrue(args[3]);
    if ((dim == -1 && PyErr_Occurred()) || log < 0)
        return NULL;
    if (gc_fast_limit == 0 || !gc_fast_tensor_type)
        Py_RETURN_NONE;
    const char k = gc_fast_kind(args[0]);
    if (!k || gc_fast_kind(args[1]) != k)
        Py_RETURN_NONE;
    Py_buffer g, y;
    if (!gc_fast_buf(args[0], &g))
        Py_RETURN_NONE;
    if (!gc_fast_buf(args[1], &y)) {
        PyBuffer_Release(&g);
        Py_RETURN_NONE;
    }
    const int nd = g.ndim;
    const Py_ssize_t total = g.len / (k == 'f' ? 4 : 8);
    PyObject *res;
    void *out;
    if (!gc_fast_same_shape(&g, &y) || nd == 0 || dim < -nd || dim >= nd || total == 0 ||
        total >= gc_fast_limit) {
        res = Py_NewRef(Py_None);
    } else if ((res = gc_fast_new(args[0], k, &out)) != NULL) {
        const int d = (int)(dim < 0 ? dim + nd : dim);
        Py_ssize_t outer = 1, inner = 1;
        for (int i = 0; i < d; i++)
            outer *= g.shape[i];
        for (int i = d + 1; i < nd; i++)
            inner *= g.shape[i];
        PyThreadState *ts = total >= 65536 ? PyEval_SaveThread() : NULL;
        if (k == 'f')
            gc_softmax_backward_f32((const float *)g.buf, (const float *)y.buf, (float *)out,
                                    outer, g.shape[d], inner, log);
        else
            gc_softmax_backward_f64((const double *)g.buf, (const double *)y.buf,
                                    (double *)out, outer, g.shape[d], inner, log);
        if (ts)
            PyEval_RestoreThread(ts);
    }
    PyBuffer_Release(&g);
    PyBuffer_Release(&y);
    return res;
}

/* ---- layer_norm / rms_norm over trailing dims ------------------------------------------- */

/* t None or a contiguous host Tensor (a Parameter too: a module's weight) of kind k whose
 * shape is ns: its buffer into v (v->obj NULL for None); 0 when it is not one. */
static int norm_param(PyObject *t, char k, PyObject *ns, Py_buffer *v)
{
    v->obj = NULL;
    v->buf = NULL;
    if (t == Py_None)
        return 1;
    if (gc_fast_operand_kind(t) != k || !gc_fast_buf(t, v))
        return 0;
    int ok = v->ndim == PyTuple_GET_SIZE(ns);
    for (int d = 0; ok && d < v->ndim; d++)
        ok = PyLong_AsSsize_t(PyTuple_GET_ITEM(ns, d)) == v->shape[d];
    PyErr_Clear();
    if (!ok)
        PyBuffer_Release(v);
    return ok;
}

GC_DOC(fast_norm_rows,
       "fast_norm_rows(x, normalized_shape, weight, bias, eps, rms, stats, /)\n--\n\n"
       "layer_norm (rms_norm when rms; bias then None) of x over its trailing dims "
       "normalized_shape (a tuple of ints) as a new Tensor, when x, weight and bias (None or "
       "normalized_shape) are plain (weight, bias also a Parameter), contiguous host Tensors of "
       "one float dtype, eps is finite "
       ">= 0 and the lane is open; else None.  stats: a tuple (out, mean, rstd) instead, the "
       "row statistics shaped [rows] (mean None when rms).  The general path's kernel "
       "(norm.c): the same bits.");

PyObject *gc_py_fast_norm_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 7) {
        PyErr_Format(PyExc_TypeError, "fast_norm_rows takes 7 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *ns = args[1];
    const double eps = PyFloat_AsDouble(args[4]);
    const int rms = PyObject_IsTrue(args[5]), stats = PyObject_IsTrue(args[6]);
    if ((eps == -1.0 && PyErr_Occurred()) || rms < 0 || stats < 0)
        return NULL;
    if (gc_fast_limit == 0 || !gc_fast_tensor_type || !PyTuple_Check(ns) || !isfinite(eps) ||
        eps < 0 ||
        (rms && args[3] != Py_None))
        Py_RETURN_NONE;
    const char k = gc_fast_kind(args[0]);
    Py_buffer a, w, b;
    if (!k || !gc_fast_buf(args[0], &a))
        Py_RETURN_NONE;
    PyObject *res = Py_None;
    const int have_w = norm_param(args[2], k, ns, &w);
    const int have_b = have_w && norm_param(args[3], k, ns, &b);
    const int nk = (int)PyTuple_GET_SIZE(ns);
    const Py_ssize_t total = a.len / (k == 'f' ? 4 : 8);
    if (!have_b || nk < 1 || nk > a.ndim || total == 0 || total >= gc_fast_limit)
        goto done;
    Py_ssize_t n = 1;
    for (int d = 0; d < nk; d++) {
        const Py_ssize_t s = PyLong_AsSsize_t(PyTuple_GET_ITEM(ns, d));
        if (s != a.shape[a.ndim - nk + d]) {
            PyErr_Clear();
            goto done;
        }
        n *= s;
    }
    const Py_ssize_t rows = total / n;
    void *out, *pm = NULL, *ps = NULL;
    PyObject *o = gc_fast_new(args[0], k, &out), *mean = NULL, *rstd = NULL;
    if (o && stats) {
        PyObject *rs = Py_BuildValue("(n)", rows);
        rstd = rs ? gc_fast_new_shaped(rs, k, &ps) : NULL;
        if (!rms && rstd && (rs = Py_BuildValue("(n)", rows)) != NULL)
            mean = gc_fast_new_shaped(rs, k, &pm);
        if (!rstd || (!rms && !mean)) {
            Py_CLEAR(o);
            Py_XDECREF(rstd);
            Py_XDECREF(mean);
        }
    }
    if (!o) {
        res = NULL;
        goto done;
    }
    PyThreadState *ts = total >= 16384 ? PyEval_SaveThread() : NULL;
    if (k == 'f')
        gc_norm_rows_fwd_f32(a.buf, w.buf, b.buf, out, pm, ps, rows, 1, n, 1, eps,
                             rms);
    else
        gc_norm_rows_fwd_f64(a.buf, w.buf, b.buf, out, pm, ps, rows, 1, n, 1, eps,
                             rms);
    if (ts)
        PyEval_RestoreThread(ts);
    if (stats) {
        res = PyTuple_Pack(3, o, mean ? mean : Py_None, rstd);
        Py_DECREF(o);
        Py_XDECREF(mean);
        Py_DECREF(rstd);
    } else {
        res = o;
    }
done:
    if (have_w && w.obj)
        PyBuffer_Release(&w);
    if (have_b && b.obj)
        PyBuffer_Release(&b);
    PyBuffer_Release(&a);
    return res == Py_None ? Py_NewRef(Py_None) : res;
}

/* the part scratch rows per block: gpucore/backends/cpu/kernels/norm.py's _CHUNK */
#define FAST_NORM_CHUNK 64

GC_DOC(fast_norm_rows_backward,
       "fast_norm_rows_backward(x, weight, mean, rstd, g, n, rms, need, /)\n--\n\n"
       "The gradients (gx, gw, gb) of fast_norm_rows over rows of n values, each a new Tensor "
       "or None as need (three bools) asks, when x, g (one shape), weight (None or n values), "
       "mean (None when rms) and rstd are plain (weight also a Parameter), contiguous host "
       "Tensors of one float dtype "
       "and the lane is open; else None.  The general path's kernel (norm.c, blocks of 64 rows "
       "for gw / gb): the same bits.");

PyObject *gc_py_fast_norm_rows_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "fast_norm_rows_backward takes 8 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    const Py_ssize_t n = PyLong_AsSsize_t(args[5]);
    const int rms = PyObject_IsTrue(args[6]);
    if ((n == -1 && PyErr_Occurred()) || rms < 0)
        return NULL;
    PyObject *need = args[7];
    if (gc_fast_limit == 0 || !gc_fast_tensor_type || n < 1 || !PyTuple_Check(need) ||
        PyTuple_GET_SIZE(need) != 3)
        Py_RETURN_NONE;
    const char k = gc_fast_kind(args[0]);
    const int nw = args[1] != Py_None, nm = args[2] != Py_None;
    if (!k || gc_fast_kind(args[4]) != k || gc_fast_kind(args[3]) != k ||
        (nw && gc_fast_operand_kind(args[1]) != k) || (nm && gc_fast_kind(args[2]) != k) || nm == rms)
        Py_RETURN_NONE;
    Py_buffer v[5];
    int got = 0;
    for (; got < 5; got++) {
        if (args[got] == Py_None) {
            v[got].obj = NULL;
            v[got].buf = NULL;
            v[got].len = 0;
        } else if (!gc_fast_buf(args[got], &v[got])) {
            break;
        }
    }
    PyObject *res = Py_None, *o[3] = {NULL, NULL, NULL};
    double *part = NULL;
    const Py_ssize_t it = k == 'f' ? 4 : 8, total = v[0].len / it, rows = total / n;
    if (got < 5 || !gc_fast_same_shape(&v[0], &v[4]) || total == 0 || total % n ||
        total >= gc_fast_limit ||
        (nw && v[1].len != n * it) || v[3].len != rows * it || (nm && v[2].len != rows * it))
        goto done;
    void *p[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        const int want = PyObject_IsTrue(PyTuple_GET_ITEM(need, i));
        if (want < 0) {
            res = NULL;
            goto done;
        }
        if (!want)
            continue;
        PyObject *shape = i == 0 ? NULL : Py_BuildValue("(n)", n);
        o[i] = i == 0 ? gc_fast_new(args[0], k, &p[i])
                      : (shape ? gc_fast_new_shaped(shape, k, &p[i]) : NULL);
        if (!o[i]) {
            res = NULL;
            goto done;
        }
    }
    if (p[1] || p[2]) {
        const Py_ssize_t nch = (rows + FAST_NORM_CHUNK - 1) / FAST_NORM_CHUNK;
        part = PyMem_Malloc((size_t)(nch * 2 * n) * sizeof *part);
        if (!part) {
            res = PyErr_NoMemory();
            goto done;
        }
    }
    PyThreadState *ts = total >= 16384 ? PyEval_SaveThread() : NULL;
    if (k == 'f')
        gc_norm_rows_bwd_f32(v[0].buf, v[1].buf, v[2].buf, v[3].buf, v[4].buf, p[0], p[1], p[2],
                             part, rows, 1, n, 1, FAST_NORM_CHUNK, rms);
    else
        gc_norm_rows_bwd_f64(v[0].buf, v[1].buf, v[2].buf, v[3].buf, v[4].buf, p[0], p[1], p[2],
                             part, rows, 1, n, 1, FAST_NORM_CHUNK, rms);
    if (ts)
        PyEval_RestoreThread(ts);
    res = PyTuple_Pack(3, o[0] ? o[0] : Py_None, o[1] ? o[1] : Py_None, o[2] ? o[2] : Py_None);
done:
    PyMem_Free(part);
    for (int i = 0; i < 3; i++)
        Py_XDECREF(o[i]);
    for (int i = 0; i < got; i++)
        if (v[i].obj)
            PyBuffer_Release(&v[i]);
    return res == Py_None ? Py_NewRef(Py_None) : res;
}

/* ---- group_norm / batch_norm: per-channel weight, bias (and running statistics) ----------- */

/* t None (v->obj NULL) or a contiguous host Tensor (a Parameter too) of kind k holding c
 * values: its buffer into v; 0 when it is neither. */
static int chan_param(PyObject *t, char k, Py_ssize_t c, Py_buffer *v, int writable)
{
    v->obj = NULL;
    v->buf = NULL;
    if (t == Py_None)
        return 1;
    if (gc_fast_operand_kind(t) != k || !gc_fast_buf_w(t, v, writable))
        return 0;
    if (v->ndim == 1 && v->shape[0] == c)
        return 1;
    PyBuffer_Release(v);
    return 0;
}

/* New Tensors out (like x) and, with stats, mean / rstd of `count` values shaped (count,) or
 * (n, g) when g > 0; without stats mean / rstd point into scratch (2 * count values). */
static int chan_outputs(PyObject *x, char k, Py_ssize_t count, Py_ssize_t n, Py_ssize_t g,
                        int stats, PyObject **o, void **p, void **scratch)
{
    o[0] = gc_fast_new(x, k, &p[0]);
    if (!o[0])
        return -1;
    if (!stats) {
        *scratch = PyMem_Malloc((size_t)(2 * (count > 0 ? count : 1)) * (k == 'f' ? 4 : 8));
        if (!*scratch)
            return PyErr_NoMemory(), -1;
        p[1] = *scratch;
        p[2] = (char *)*scratch + count * (k == 'f' ? 4 : 8);
        return 0;
    }
    for (int i = 1; i < 3; i++) {
        PyObject *shape = g > 0 ? Py_BuildValue("(nn)", n, g) : Py_BuildValue("(n)", count);
        o[i] = shape ? gc_fast_new_shaped(shape, k, &p[i]) : NULL;
        if (!o[i])
            return -1;
    }
    return 0;
}

/* out, or (out, mean, rstd) with stats; o[] released */
static PyObject *chan_result(PyObject **o, int stats)
{
    PyObject *res = stats ? PyTuple_Pack(3, o[0], o[1], o[2]) : Py_NewRef(o[0]);
    for (int i = 0; i < 3; i++)
        Py_XDECREF(o[i]);
    return res;
}

GC_DOC(fast_group_norm,
       "fast_group_norm(x, groups, weight, bias, eps, stats, /)\n--\n\n"
       "group_norm of x [N, C, *] in groups as a new Tensor (with stats: (out, mean, rstd), "
       "the statistics [N, groups]) when x, weight and bias (None or C values) are plain (a "
       "weight or bias also a Parameter), contiguous host Tensors of one float dtype, groups divides C, eps is finite >= 0 and "
       "the lane is open; else None.  The general path's kernel (norm.c): the same bits.");

PyObject *gc_py_fast_group_norm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "fast_group_norm takes 6 arguments (%zd given)", nargs);
        return NULL;
    }
    const Py_ssize_t groups = PyLong_AsSsize_t(args[1]);
    const double eps = PyFloat_AsDouble(args[4]);
    const int stats = PyObject_IsTrue(args[5]);
    if ((groups == -1 || eps == -1.0) && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (stats < 0)
        return NULL;
    const char k = gc_fast_kind(args[0]);
    if (gc_fast_limit == 0 || !k || groups < 1 || !isfinite(eps) || eps < 0)
        Py_RETURN_NONE;
    Py_buffer a, w, b;
    if (!gc_fast_buf(args[0], &a))
        Py_RETURN_NONE;
    const Py_ssize_t total = a.len / (k == 'f' ? 4 : 8);
    const Py_ssize_t n = a.ndim >= 2 ? a.shape[0] : 0, c = a.ndim >= 2 ? a.shape[1] : 0;
    PyObject *res = Py_None, *o[3] = {NULL, NULL, NULL};
    void *p[3], *scratch = NULL;
    const int hw = c > 0 && chan_param(args[2], k, c, &w, 0);
    const int hb = hw && chan_param(args[3], k, c, &b, 0);
    if (!hb || total == 0 || total >= gc_fast_limit || c % groups)
        goto done;
    if (chan_outputs(args[0], k, n * groups, n, groups, stats, o, p, &scratch) < 0) {
        res = NULL;
        goto done;
    }
    const Py_ssize_t cg = c / groups, inner = total / (n * c);
    PyThreadState *ts = total >= 16384 ? PyEval_SaveThread() : NULL;
    if (k == 'f')
        gc_norm_rows_fwd_f32(a.buf, w.buf, b.buf, p[0], p[1], p[2], n * groups, groups, cg, inner,
                             eps, 0);
    else
        gc_norm_rows_fwd_f64(a.buf, w.buf, b.buf, p[0], p[1], p[2], n * groups, groups, cg, inner,
                             eps, 0);
    if (ts)
        PyEval_RestoreThread(ts);
    res = chan_result(o, stats);
    o[0] = o[1] = o[2] = NULL;
done:
    for (int i = 0; i < 3; i++)
        Py_XDECREF(o[i]);
    PyMem_Free(scratch);
    if (hw && w.obj)
        PyBuffer_Release(&w);
    if (hb && b.obj)
        PyBuffer_Release(&b);
    PyBuffer_Release(&a);
    return res == Py_None ? Py_NewRef(Py_None) : res;
}

GC_DOC(fast_batch_norm,
       "fast_batch_norm(x, weight, bias, running_mean, running_var, training, momentum, eps, "
       "stats, /)\n--\n\n"
       "batch_norm of x [N, C, *] over dim 1 as a new Tensor (with stats: (out, mean, rstd), "
       "the statistics [C]), updating running_mean / running_var in place in training, when x "
       "and the others (None or C values; eval: both running tensors) are plain (a weight or "
       "bias also a Parameter), contiguous host Tensors of one float dtype, training has more than 1 value per channel, eps is "
       "finite >= 0 and the lane is open; else None.  The general path's kernel "
       "(norm_batch.c): the same bits.  The caller bumps the running tensors' versions.");

PyObject *gc_py_fast_batch_norm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 9) {
        PyErr_Format(PyExc_TypeError, "fast_batch_norm takes 9 arguments (%zd given)", nargs);
        return NULL;
    }
    const int training = PyObject_IsTrue(args[5]), stats = PyObject_IsTrue(args[8]);
    const double momentum = PyFloat_AsDouble(args[6]), eps = PyFloat_AsDouble(args[7]);
    if ((momentum == -1.0 || eps == -1.0) && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    if (training < 0 || stats < 0)
        return NULL;
    const char k = gc_fast_kind(args[0]);
    if (gc_fast_limit == 0 || !k || !isfinite(eps) || eps < 0 || !isfinite(momentum) ||
        (!training && (args[3] == Py_None || args[4] == Py_None)))
        Py_RETURN_NONE;
    Py_buffer a, v[4];
    if (!gc_fast_buf(args[0], &a))
        Py_RETURN_NONE;
    const Py_ssize_t total = a.len / (k == 'f' ? 4 : 8);
    const Py_ssize_t n = a.ndim >= 2 ? a.shape[0] : 0, c = a.ndim >= 2 ? a.shape[1] : 0;
    const Py_ssize_t inner = c > 0 && n > 0 ? total / (n * c) : 0;
    PyObject *res = Py_None, *o[3] = {NULL, NULL, NULL};
    void *p[3], *scratch = NULL;
    int got = 0;
    for (; c > 0 && got < 4; got++)
        if (!chan_param(args[1 + got], k, c, &v[got], got >= 2 && training))
            break;
    if (got < 4 || total == 0 || total >= gc_fast_limit || (training && n * inner < 2))
        goto done;
    if (chan_outputs(args[0], k, c, 0, 0, stats, o, p, &scratch) < 0) {
        res = NULL;
        goto done;
    }
    PyThreadState *ts = total >= 16384 ? PyEval_SaveThread() : NULL;
    if (k == 'f')
        gc_batch_norm_fwd_f32(a.buf, v[0].buf, v[1].buf, p[0], p[1], p[2], v[2].buf, v[3].buf, n,
                              c, inner, eps, momentum, training);
    else
        gc_batch_norm_fwd_f64(a.buf, v[0].buf, v[1].buf, p[0], p[1], p[2], v[2].buf, v[3].buf, n,
                              c, inner, eps, momentum, training);
    if (ts)
        PyEval_RestoreThread(ts);
    res = chan_result(o, stats);
    o[0] = o[1] = o[2] = NULL;
done:
    for (int i = 0; i < 3; i++)
        Py_XDECREF(o[i]);
    PyMem_Free(scratch);
    for (int i = 0; i < got; i++)
        if (v[i].obj)
            PyBuffer_Release(&v[i]);
    PyBuffer_Release(&a);
    return res == Py_None ? Py_NewRef(Py_None) : res;
}

/* ---- relu_backward + linear's bias gradient ----------------------------------------------- */

GC_DOC(fast_relu_backward_bias,
       "fast_relu_backward_bias(grad, saved, /)\n--\n\n"
       "(relu_backward(grad, saved), its rows summed) as two new Tensors [m, n] and [n] when "
       "grad and saved are plain contiguous host matrices [m, n] of one float dtype, m, n > 0, "
       "and the lane is open; else None.  One pass (unary.c gc_relu_backward_bias): the bits "
       "of relu_backward, then the sum over dim 0 (the linear_relu op's backward).");

PyObject *gc_py_fast_relu_backward_bias(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "fast_relu_backward_bias takes 2 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    const char k = gc_fast_kind(args[0]);
    if (gc_fast_limit == 0 || !k || gc_fast_kind(args[1]) != k)
        Py_RETURN_NONE;
    Py_buffer g, sv;
    if (!gc_fast_buf(args[0], &g))
        Py_RETURN_NONE;
    if (!gc_fast_buf(args[1], &sv)) {
        PyBuffer_Release(&g);
        Py_RETURN_NONE;
    }
    PyObject *res = Py_None, *out = NULL, *bsum = NULL;
    const Py_ssize_t m = g.ndim == 2 ? g.shape[0] : 0, n = g.ndim == 2 ? g.shape[1] : 0;
    if (m == 0 || n == 0 || !gc_fast_same_shape(&g, &sv) || m * n >= gc_fast_limit)
        goto done;
    void *po, *pb;
    out = gc_fast_new(args[0], k, &po);
    PyObject *bshape = out ? Py_BuildValue("(n)", n) : NULL;
    bsum = bshape ? gc_fast_new_shaped(bshape, k, &pb) : NULL;
    if (!bsum) {
        res = NULL;
        goto done;
    }
    PyThreadState *ts = m * n >= 16384 ? PyEval_SaveThread() : NULL;
    if (k == 'f')
        gc_relu_backward_bias_f32(g.buf, sv.buf, po, pb, m, n);
    else
        gc_relu_backward_bias_f64(g.buf, sv.buf, po, pb, m, n);
    if (ts)
        PyEval_RestoreThread(ts);
    res = PyTuple_Pack(2, out, bsum);
done:
    Py_XDECREF(out);
    Py_XDECREF(bsum);
    PyBuffer_Release(&g);
    PyBuffer_Release(&sv);
    return res == Py_None ? Py_NewRef(Py_None) : res;
}

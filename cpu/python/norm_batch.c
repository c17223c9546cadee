/* Bindings of norm_batch.c: eager batch_norm forward (training / eval) and backward
 * (gpucore/ops/norm_batch.py). */
#include "args.h"
#include "bindings.h"

#include <math.h>

/* The 8 buffers v (names) of a call on [n, c, inner], forward or backward: one float kind,
 * contiguous, need[i] elements each (None where the call allows it), the outputs (outs) apart
 * from every other buffer; p := their data (NULL for None).  The kind, or 0 with the exception
 * set. */
static char bn_buffers(const char *fn, Py_buffer *const *v, const char *const *names,
                       const Py_ssize_t *need, const int *outs, Py_ssize_t n, Py_ssize_t c,
                       Py_ssize_t inner, void **p)
{
    const char kd = need_float_contig(fn, 8, v, names, "========");
    if (!kd)
        return 0;
    for (int i = 0; i < 8; i++)
        if (v[i] && need_elems(fn, names[i], v[i], need[i], "n=%zd, c=%zd, inner=%zd", n, c,
                               inner) < 0)
            return 0;
    if (need_outputs_apart(fn, 8, v, names, need, outs) < 0)
        return 0;
    for (int i = 0; i < 8; i++)
        p[i] = v[i] ? v[i]->buf : NULL;
    return kd;
}

GC_DOC(batch_norm_forward,
       "batch_norm_forward(x, weight, bias, out, mean, rstd, running_mean, running_var, n, c, "
       "inner, eps, momentum, training, /)\n--\n\n"
       "batch_norm of x viewed as [n, c, inner] over dim 1 into out, each channel's mean and "
       "1 / sqrt(var + eps) into mean and rstd (c values each).  training: the batch's "
       "statistics (biased variance), and running_mean / running_var (None or c values) "
       "updated in place: (1 - momentum) * running + momentum * batch, with the unbiased "
       "variance; eval: the running statistics (both needed).  weight, bias: None or c "
       "values.  Portable C accumulating in double: the same bits under every ISA and thread "
       "count.");

PyObject *gc_py_batch_norm_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "batch_norm_forward";
    static const char *const names[8] = {"x",    "weight", "bias",         "out",
                                         "mean", "rstd",   "running_mean", "running_var"};
    bufset bs = {.n = 0};
    Py_buffer *v[8];
    Py_ssize_t n, c, inner;
    double eps, momentum;
    int training;
    if (check_nargs(fn, nargs, 14) < 0 || get_min(fn, "n", args[8], 0, &n) < 0 ||
        get_min(fn, "c", args[9], 0, &c) < 0 || get_min(fn, "inner", args[10], 0, &inner) < 0 ||
        get_double(fn, "eps", args[11], &eps) < 0 ||
        get_double(fn, "momentum", args[12], &momentum) < 0 ||
        get_flag(fn, "training", args[13], &training) < 0)
        return NULL;
    if (!isfinite(eps) || eps < 0 || !isfinite(momentum)) {
        PyErr_Format(PyExc_ValueError, "%s: 'eps' (%R) must be finite and >= 0, 'momentum' (%R) "
                     "finite", fn, args[11], args[12]);
        return NULL;
    }
    int ok = 1;
    const Py_ssize_t total = smul(smul(n, c, &ok), inner, &ok);
    if (!ok)
        return overflow_error(fn, "n * c * inner"), NULL;
    if (training && c > 0 && smul(n, inner, &ok) < 2) {
        PyErr_Format(PyExc_ValueError, "%s: training needs more than 1 value per channel, got "
                     "n=%zd, inner=%zd", fn, n, inner);
        return NULL;
    }
    if (get_bufs(&bs, fn, args, 8, names, "rRRwwwWW", v) < 0)
        goto fail;
    if (!training && (!v[6] || !v[7])) {
        PyErr_Format(PyExc_ValueError, "%s: eval needs running_mean and running_var", fn);
        goto fail;
    }
    const Py_ssize_t need[8] = {total, c, c, total, c, c, c, c};
    static const int outs[8] = {0, 0, 0, 1, 1, 1, 1, 1};
    void *p[8];
    const char kd = bn_buffers(fn, v, names, need, outs, n, c, inner, p);
    if (!kd)
        goto fail;
    PyThreadState *ts = total >= 16384 ? PyEval_SaveThread() : NULL;
    if (kd == 'f')
        gc_batch_norm_fwd_f32(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], n, c, inner, eps,
                              momentum, training);
    else
        gc_batch_norm_fwd_f64(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], n, c, inner, eps,
                              momentum, training);
    if (ts)
        PyEval_RestoreThread(ts);
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(batch_norm_backward,
       "batch_norm_backward(x, weight, mean, rstd, g, gx, gw, gb, n, c, inner, training, /)\n"
       "--\n\n"
       "Gradients of batch_norm_forward for the incoming gradient g [n, c, inner]: gx (or "
       "None; training: through the batch statistics), gw = sum(g * xh) and gb = sum(g) per "
       "channel (c values each, or None), with mean / rstd as the forward wrote them.");

PyObject *gc_py_batch_norm_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "batch_norm_backward";
    static const char *const names[8] = {"x", "weight", "mean", "rstd", "g", "gx", "gw", "gb"};
    bufset bs = {.n = 0};
    Py_buffer *v[8];
    Py_ssize_t n, c, inner;
    int training;
    if (check_nargs(fn, nargs, 12) < 0 || get_min(fn, "n", args[8], 0, &n) < 0 ||
        get_min(fn, "c", args[9], 0, &c) < 0 || get_min(fn, "inner", args[10], 0, &inner) < 0 ||
        get_flag(fn, "training", args[11], &training) < 0)
        return NULL;
    int ok = 1;
    const Py_ssize_t total = smul(smul(n, c, &ok), inner, &ok);
    if (!ok)
        return overflow_error(fn, "n * c * inner"), NULL;
    if (get_bufs(&bs, fn, args, 8, names, "rRrrrWWW", v) < 0)
        goto fail;
    const Py_ssize_t need[8] = {total, c, c, c, total, total, c, c};
    static const int outs[8] = {0, 0, 0, 0, 0, 1, 1, 1};
    void *p[8];
    const char kd = bn_buffers(fn, v, names, need, outs, n, c, inner, p);
    if (!kd)
        goto fail;
    PyThreadState *ts = total >= 16384 ? PyEval_SaveThread() : NULL;
    if (kd == 'f')
        gc_batch_norm_bwd_f32(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], n, c, inner,
                              training);
    else
        gc_batch_norm_bwd_f64(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], n, c, inner,
                              training);
    if (ts)
        PyEval_RestoreThread(ts);
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

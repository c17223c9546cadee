/* Bindings of gemm.c: gemm, gemm_ex. */
#include "args.h"
#include "bindings.h"

#include <limits.h>

GC_DOC(gemm,
       "gemm(a, b, c, batch, m, n, k, trans_a, trans_b, alpha, beta, sa, sb, sc, /)\n--\n\n"
       "For i in range(batch): C_i = alpha * op(A_i) @ op(B_i) + beta * C_i, A_i starting "
       "at element i*sa of a (likewise sb, sc; 0 broadcasts; batches run in order).\n"
       "op(A) is m x k, stored k x m when trans_a; op(B) is k x n, stored n x k when "
       "trans_b.  beta == 0 never reads C.");

GC_DOC(gemm_ex,
       "gemm_ex(a, b, c, batch, m, n, k, trans_a, trans_b, alpha, beta, sa, sb, sc, bias, "
       "act, /)\n--\n\n"
       "gemm with a fused epilogue: C_i = act(alpha * op(A_i) @ op(B_i) + beta * C_i + bias)."
       "  bias is None or n values (same float format) added to every row; act is -1 (none) "
       "or UNARY_RELU, UNARY_SIGMOID, UNARY_TANH, UNARY_GELU or UNARY_GELU_TANH.");

/* gemm (14 args) and gemm_ex (16 args: + bias, act). */
static PyObject *gemm_impl(const char *fn, PyObject *const *args, Py_ssize_t nargs, int ex)
{
    static const char *const names[4] = {"a", "b", "c", "bias"};
    bufset bs = {.n = 0};
    Py_ssize_t batch, m, n, k, sa, sb, sc, act = -1;
    int ta, tb;
    double alpha, beta;
    if (check_nargs(fn, nargs, ex ? 16 : 14) < 0)
        return NULL;
    if (get_min(fn, "batch", args[3], 0, &batch) < 0 || get_min(fn, "m", args[4], 0, &m) < 0 ||
        get_min(fn, "n", args[5], 0, &n) < 0 || get_min(fn, "k", args[6], 0, &k) < 0 ||
        get_flag(fn, "trans_a", args[7], &ta) < 0 || get_flag(fn, "trans_b", args[8], &tb) < 0 ||
        get_double(fn, "alpha", args[9], &alpha) < 0 ||
        get_double(fn, "beta", args[10], &beta) < 0 || get_min(fn, "sa", args[11], 0, &sa) < 0 ||
        get_min(fn, "sb", args[12], 0, &sb) < 0 || get_min(fn, "sc", args[13], 0, &sc) < 0)
        return NULL;
    if (ex) {
        if (get_ssize(fn, "act", args[15], &act) < 0)
            return NULL;
        if (act < INT_MIN || act > INT_MAX || !gc_unary_is_act((int)act)) {
            char acts[200];
            PyErr_Format(PyExc_ValueError, "%s: 'act' must be -1 (none) or one of %s; got %zd",
                         fn, act_names(acts, sizeof acts, "UNARY_"), act);
            return NULL;
        }
    }

    Py_buffer *v[4] = {NULL};
    if (get_bufs(&bs, fn, args, 3, names, "rrw", v) < 0)
        goto fail;
    if (ex && args[14] != Py_None && !(v[3] = get_buf(&bs, fn, "bias", args[14], 0)))
        goto fail;
    Py_buffer *a = v[0], *b = v[1], *c = v[2], *bias = v[3];
    const char kd = need_float_contig(fn, 4, v, names, "====");
    if (!kd)
        goto fail;

    /* elements touched: A_i spans m*k from i*sa, the last one ends at (batch-1)*sa + m*k */
    int ok = 1;
    const Py_ssize_t mk = smul(m, k, &ok), kn = smul(k, n, &ok), mn = smul(m, n, &ok);
    const Py_ssize_t last = batch > 0 ? batch - 1 : 0;
    const Py_ssize_t need_a = (batch > 0 && mk > 0) ? sadd(smul(last, sa, &ok), mk, &ok) : 0;
    const Py_ssize_t need_b = (batch > 0 && kn > 0) ? sadd(smul(last, sb, &ok), kn, &ok) : 0;
    const Py_ssize_t need_c = (batch > 0 && mn > 0) ? sadd(smul(last, sc, &ok), mn, &ok) : 0;
    if (!ok) {
        overflow_error(fn, "batch, m, n, k and the batch strides");
        goto fail;
    }
#define WHAT                                                                                      \
    "batch=%zd, m=%zd, n=%zd, k=%zd, trans_a=%d, trans_b=%d, sa=%zd, sb=%zd, sc=%zd", batch, m, n, \
        k, ta, tb, sa, sb, sc
    if (need_elems(fn, "a", a, need_a, WHAT) < 0 || need_elems(fn, "b", b, need_b, WHAT) < 0 ||
        need_elems(fn, "c", c, need_c, WHAT) < 0 ||
        (bias && need_c > 0 && need_elems(fn, "bias", bias, n, WHAT) < 0))
        goto fail;
#undef WHAT
    if (need_c > 0 && ((need_a > 0 && need_no_overlap(fn, "c", c, "a", a, 0) < 0) ||
                       (need_b > 0 && need_no_overlap(fn, "c", c, "b", b, 0) < 0) ||
                       (bias && need_no_overlap(fn, "c", c, "bias", bias, 0) < 0)))
        goto fail;

    int rc = 0;
    const int iact = (int)act;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        rc = gc_gemm_ex_f32((const float *)a->buf, (const float *)b->buf, (float *)c->buf, batch,
                            m, n, k, ta, tb, (float)alpha, (float)beta, sa, sb, sc,
                            bias ? (const float *)bias->buf : NULL, iact);
    else
        rc = gc_gemm_ex_f64((const double *)a->buf, (const double *)b->buf, (double *)c->buf,
                            batch, m, n, k, ta, tb, alpha, beta, sa, sb, sc,
                            bias ? (const double *)bias->buf : NULL, iact);
    Py_END_ALLOW_THREADS
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

PyObject *gc_py_gemm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return gemm_impl("gemm", args, nargs, 0);
}

PyObject *gc_py_gemm_ex(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return gemm_impl("gemm_ex", args, nargs, 1);
}

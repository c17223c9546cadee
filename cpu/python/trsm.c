/* Bindings of trsm.c: triangular solves (trsm) and the LU factorization (getrf). */
#include "args.h"
#include "bindings.h"

GC_DOC(trsm, "trsm(a, x, batch, m, n, sa, upper, trans, unit, /)\n--\n\n"
             "For i in range(batch): solves op(A_i) X_i = B_i in place, X_i (m x n, row-major) at "
             "element i*m*n of x holding B_i on entry, A_i (m x m, row-major) at element i*sa of "
             "a (sa >= 0; 0 broadcasts one matrix); only A's upper (upper=1) or lower triangle "
             "is read, op(A) = A^T when trans, the diagonal taken as ones when unit.  a and x "
             "C-contiguous of one float format, x writable and apart from a.  A zero on the "
             "diagonal gives inf / NaN.  Blocked: GEMM updates and substitution in diagonal "
             "blocks; the same bits on any thread count.");

PyObject *gc_py_trsm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "trsm";
    static const char *const names[] = {"a", "x"};
    bufset bs = {.n = 0};
    Py_buffer *v[2];
    Py_ssize_t batch, m, n, sa;
    int upper, trans, unit;
    if (check_nargs(fn, nargs, 9) < 0 || get_min(fn, "batch", args[2], 0, &batch) < 0 ||
        get_min(fn, "m", args[3], 0, &m) < 0 || get_min(fn, "n", args[4], 0, &n) < 0 ||
        get_min(fn, "sa", args[5], 0, &sa) < 0 || get_flag(fn, "upper", args[6], &upper) < 0 ||
        get_flag(fn, "trans", args[7], &trans) < 0 || get_flag(fn, "unit", args[8], &unit) < 0)
        return NULL;
    char kd;
    if (get_bufs(&bs, fn, args, 2, names, "rw", v) < 0 ||
        !(kd = need_float_contig(fn, 2, v, names, "==")))
        goto fail;
    int ok = 1;
    const Py_ssize_t mm = smul(m, m, &ok), mn = smul(m, n, &ok);
    const Py_ssize_t na = sadd(smul(batch > 0 ? batch - 1 : 0, sa, &ok), mm, &ok);
    const Py_ssize_t nx = smul(batch, mn, &ok);
    if (!ok) {
        overflow_error(fn, "the operand sizes");
        goto fail;
    }
    if (batch == 0 || mn == 0) {
        bufs_release(&bs);
        Py_RETURN_NONE;
    }
    if (need_elems(fn, "a", v[0], na, "batch %zd, m %zd, sa %zd", batch, m, sa) < 0 ||
        need_elems(fn, "x", v[1], nx, "batch %zd, m %zd, n %zd", batch, m, n) < 0 ||
        need_no_overlap(fn, "x", v[1], "a", v[0], 0) < 0)
        goto fail;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = kd == 'f' ? gc_trsm_f32(v[0]->buf, v[1]->buf, batch, m, n, sa, upper, trans, unit)
                   : gc_trsm_f64(v[0]->buf, v[1]->buf, batch, m, n, sa, upper, trans, unit);
    Py_END_ALLOW_THREADS
    return bufs_done(&bs, rc);
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(getrf, "getrf(a, perm, info, batch, n, /)\n--\n\n"
              "P A = L U for each of the batch n x n row-major matrices of a (C-contiguous "
              "float32 / float64, writable: overwritten by L below the diagonal, unit diagonal "
              "implied, and U on and above it), partial pivoting in a's own type: perm (None, or "
              "C-contiguous int32, n per matrix) receives the permutation (row i of P A is row "
              "perm[i] of A), info (C-contiguous int32, batch values) LAPACK getrf's info: 0, or "
              "the 1-based column of the first exactly zero pivot (PyTorch's linalg.inv_ex / "
              "solve_ex info).  perm and info apart from a and each other.");

PyObject *gc_py_getrf(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "getrf";
    static const char *const names[] = {"a", "perm", "info"};
    bufset bs = {.n = 0};
    Py_buffer *v[3];
    Py_ssize_t batch, n;
    if (check_nargs(fn, nargs, 5) < 0 || get_min(fn, "batch", args[3], 0, &batch) < 0 ||
        get_min(fn, "n", args[4], 0, &n) < 0)
        return NULL;
    char kd;
    if (get_bufs(&bs, fn, args, 3, names, "wWw", v) < 0 ||
        !(kd = need_float_contig(fn, 3, v, names, "=ii")))
        goto fail;
    int ok = 1;
    const Py_ssize_t na = smul(batch, smul(n, n, &ok), &ok), np_ = smul(batch, n, &ok);
    if (!ok) {
        overflow_error(fn, "the operand sizes");
        goto fail;
    }
    if (batch == 0) {
        bufs_release(&bs);
        Py_RETURN_NONE;
    }
    if (need_elems(fn, "a", v[0], na, "batch %zd, n %zd", batch, n) < 0 ||
        (v[1] && need_elems(fn, "perm", v[1], np_, "batch %zd, n %zd", batch, n) < 0) ||
        need_elems(fn, "info", v[2], batch, "one per matrix") < 0)
        goto fail;
    const Py_ssize_t need[3] = {na, v[1] ? np_ : 0, batch};
    const int out[3] = {1, 1, 1};
    if (need_outputs_apart(fn, 3, v, names, need, out) < 0)
        goto fail;
    int rc;
    int32_t *perm = v[1] ? v[1]->buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = kd == 'f' ? gc_getrf_f32(v[0]->buf, perm, v[2]->buf, batch, n)
                   : gc_getrf_f64(v[0]->buf, perm, v[2]->buf, batch, n);
    Py_END_ALLOW_THREADS
    return bufs_done(&bs, rc);
fail:
    bufs_release(&bs);
    return NULL;
}

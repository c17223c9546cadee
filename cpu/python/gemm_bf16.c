/* Bindings of cpu/gemm_bf16.c: the bfloat16 GEMM (AVX-512 BF16) and the name of its kernel. */
#include "bindings.h"
#include "gemm_bf16.h"

GC_DOC(gemm_bf16_kernel, "gemm_bf16_kernel()\n--\n\n"
                         "The bfloat16 GEMM's micro-kernel name (e.g. 'gemm_avx512bf16_14x32'), "
                         "or None where the CPU or the ISA in use has none (gemm_bf16 then "
                         "raises; bf16 products take the float32 path).");

PyObject *gc_py_gemm_bf16_kernel(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    (void)args;
    if (check_nargs("gemm_bf16_kernel", nargs, 0) < 0)
        return NULL;
    const char *name;
    if (!gc_bf16_kernel(&name))
        Py_RETURN_NONE;
    return PyUnicode_FromString(name);
}

GC_DOC(gemm_bf16,
       "gemm_bf16(a, b, c, batch, m, n, k, trans_a, trans_b, sa, sb, sc, bias, bias_rows, /)\n--\n\n"
       "For i in range(batch): C_i = op(A_i) @ op(B_i) (+ bias) with A_i at element i*sa of a "
       "(m x k row-major, or k x m when trans_a), B_i at i*sb of b (k x n, or n x k when "
       "trans_b), C_i (m x n row-major) at i*sc of c.  a, b: bfloat16 bit patterns (C-contiguous "
       "uint16); c: C-contiguous float32 (the float32 sums) or uint16 (bfloat16: the sums plus "
       "bias rounded once to nearest even), writable, apart from a and b; bias None or float32 "
       "values: >= n, bias[j] added to column j (bias_rows 0), or >= m, bias[i] to row i "
       "(bias_rows 1).  Sums by the AVX-512 BF16 dot product (see gemm_bf16_kernel); strides "
       ">= 0 (0 broadcasts), sc >= m*n when batch > 1.  The same bits for any thread count.");

static int need_u16(const char *fn, const char *name, const Py_buffer *v)
{
    if (fmt_code(v) == 'H' && v->itemsize == 2)
        return need_contig(fn, name, v);
    PyErr_Format(PyExc_TypeError,
                 "%s: '%s' must be uint16 ('H': bfloat16 bit patterns), got format '%s' with "
                 "item size %zd",
                 fn, name, fmt_str(v), v->itemsize);
    return -1;
}

PyObject *gc_py_gemm_bf16(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "gemm_bf16";
    static const char *const names[] = {"a", "b", "c"};
    bufset bs = {.n = 0};
    Py_buffer *v[3], *bias = NULL;
    Py_ssize_t batch, m, n, k, sa, sb, sc;
    int ta, tb, brow;
    if (check_nargs(fn, nargs, 14) < 0 || get_min(fn, "batch", args[3], 0, &batch) < 0 ||
        get_min(fn, "m", args[4], 0, &m) < 0 || get_min(fn, "n", args[5], 0, &n) < 0 ||
        get_min(fn, "k", args[6], 0, &k) < 0 || get_flag(fn, "trans_a", args[7], &ta) < 0 ||
        get_flag(fn, "trans_b", args[8], &tb) < 0 || get_min(fn, "sa", args[9], 0, &sa) < 0 ||
        get_min(fn, "sb", args[10], 0, &sb) < 0 || get_min(fn, "sc", args[11], 0, &sc) < 0 ||
        get_flag(fn, "bias_rows", args[13], &brow) < 0)
        return NULL;
    if (!gc_bf16_kernel(NULL)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: no bfloat16 GEMM kernel on this CPU / ISA (needs AVX-512 BF16 and the "
                     "avx512 ISA); compute in float32 instead",
                     fn);
        return NULL;
    }
    if (get_bufs(&bs, fn, args, 3, names, "rrw", v) < 0 || need_u16(fn, "a", v[0]) < 0 ||
        need_u16(fn, "b", v[1]) < 0)
        goto fail;
    const char ck = fmt_code(v[2]);
    int out_bf16;
    if (ck == 'H' && v[2]->itemsize == 2)
        out_bf16 = 1;
    else if (ck == 'f' && v[2]->itemsize == 4)
        out_bf16 = 0;
    else {
        PyErr_Format(PyExc_TypeError,
                     "%s: 'c' must be float32 ('f') or uint16 ('H': bfloat16), got format '%s'",
                     fn, fmt_str(v[2]));
        goto fail;
    }
    if (need_contig(fn, "c", v[2]) < 0)
        goto fail;
    if (args[12] != Py_None) {
        if (!(bias = get_buf(&bs, fn, "bias", args[12], 0)) ||
            need_kind(fn, "bias", bias, 'f') < 0 || need_contig(fn, "bias", bias) < 0 ||
            need_elems(fn, "bias", bias, brow ? m : n, brow ? "m %zd" : "n %zd",
                       brow ? m : n) < 0)
            goto fail;
    }
    const int empty = need_batched_product(fn, v, batch, m, n, k, sa, sb, sc);
    if (empty < 0)
        goto fail;
    if (empty) {
        bufs_release(&bs);
        Py_RETURN_NONE;
    }
    if (bias && need_no_overlap(fn, "c", v[2], "bias", bias, 0) < 0)
        goto fail;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = gc_gemm_bf16(v[0]->buf, v[1]->buf, v[2]->buf, out_bf16, batch, m, n, k, ta, tb, sa, sb,
                      sc, bias ? (const float *)bias->buf : NULL, brow);
    Py_END_ALLOW_THREADS
    return bufs_done(&bs, rc);
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(conv2d_bf16,
       "conv2d_bf16(x, w, bias, y, n, c, h, w_, kh, kw, sh, sw, ph, pw, dh, dw, o, /)\n--\n\n"
       "bfloat16 conv2d forward (NCHW): y[n, o, oh, ow] = the zero-padded x windows times "
       "w[o, c, kh, kw] (+ bias[o], float32 or None), the float32 sums rounded once to bf16.  x, "
       "w, y: C-contiguous uint16 (bfloat16 bit patterns), y written.  Column-matrix chunks of "
       "<= 4 MiB, each one gemm_bf16 (the weight as B, n x k): the same bits as gemm_bf16 of "
       "the column matrix [n*oh*ow, kh*kw*c] (taps in (ky, kx, c) order) times the weight "
       "permuted to [o, kh*kw*c], transposed (where n*oh*ow > 8).  RuntimeError where "
       "gemm_bf16_kernel() is None.");

PyObject *gc_py_conv2d_bf16(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "conv2d_bf16";
    static const char *const names[] = {"x", "w"};
    static const char *const dn[] = {"n", "c", "h", "w_", "kh", "kw", "sh", "sw",
                                     "ph", "pw", "dh", "dw", "o"};
    static const Py_ssize_t lows[] = {0, 0, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1};
    bufset bs = {.n = 0};
    Py_buffer *v[2], *bias = NULL, *y;
    Py_ssize_t d[13];
    if (check_nargs(fn, nargs, 17) < 0)
        return NULL;
    for (int i = 0; i < 13; i++)
        if (get_min(fn, dn[i], args[4 + i], lows[i], &d[i]) < 0)
            return NULL;
    if (!gc_bf16_kernel(NULL)) {
        PyErr_Format(PyExc_RuntimeError,
                     "%s: no bfloat16 GEMM kernel on this CPU / ISA (needs AVX-512 BF16 and the "
                     "avx512 ISA); compute in float32 instead",
                     fn);
        return NULL;
    }
    const Py_ssize_t n = d[0], c = d[1], h = d[2], wd = d[3], kh = d[4], kw = d[5], o = d[12];
    const Py_ssize_t oh = (h + 2 * d[8] - d[10] * (kh - 1) - 1), ow = (wd + 2 * d[9] - d[11] * (kw - 1) - 1);
    if (oh < 0 || ow < 0) {
        PyErr_Format(PyExc_ValueError, "%s: the padded input (%zd x %zd) is smaller than the "
                     "dilated kernel", fn, h + 2 * d[8], wd + 2 * d[9]);
        return NULL;
    }
    const Py_ssize_t ohn = oh / d[6] + 1, own = ow / d[7] + 1;
    int ok = 1;
    const Py_ssize_t nx = smul(smul(n, c, &ok), smul(h, wd, &ok), &ok);
    const Py_ssize_t nw = smul(smul(o, c, &ok), smul(kh, kw, &ok), &ok);
    const Py_ssize_t ny = smul(smul(n, o, &ok), smul(ohn, own, &ok), &ok);
    if (!ok) {
        overflow_error(fn, "the operand sizes");
        return NULL;
    }
    if (get_bufs(&bs, fn, args, 2, names, "rr", v) < 0 || need_u16(fn, "x", v[0]) < 0 ||
        need_u16(fn, "w", v[1]) < 0 || !(y = get_buf(&bs, fn, "y", args[3], 1)) ||
        need_u16(fn, "y", y) < 0 ||
        need_elems(fn, "x", v[0], nx, "n %zd, c %zd, h %zd, w %zd", n, c, h, wd) < 0 ||
        need_elems(fn, "w", v[1], nw, "o %zd, c %zd, kh %zd, kw %zd", o, c, kh, kw) < 0 ||
        need_elems(fn, "y", y, ny, "n %zd, o %zd, oh %zd, ow %zd", n, o, ohn, own) < 0 ||
        need_no_overlap(fn, "y", y, "x", v[0], 0) < 0 ||
        need_no_overlap(fn, "y", y, "w", v[1], 0) < 0)
        goto fail;
    if (args[2] != Py_None) {
        if (!(bias = get_buf(&bs, fn, "bias", args[2], 0)) ||
            need_kind(fn, "bias", bias, 'f') < 0 || need_contig(fn, "bias", bias) < 0 ||
            need_elems(fn, "bias", bias, o, "o %zd", o) < 0)
            goto fail;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = gc_conv2d_bf16(v[0]->buf, v[1]->buf, bias ? (const float *)bias->buf : NULL, y->buf, n,
                        c, h, wd, kh, kw, d[6], d[7], d[8], d[9], d[10], d[11], o);
    Py_END_ALLOW_THREADS
    return bufs_done(&bs, rc);
fail:
    bufs_release(&bs);
    return NULL;
}

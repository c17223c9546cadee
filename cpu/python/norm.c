/* Bindings of norm.c: layer_norm (a node kind, see nodes.h). */
#include "args.h"
#include "bindings.h"
#include "nodes.h"

#include <math.h>

GC_DOC(layer_norm,
       "layer_norm(x, weight, bias, out, rows, n, eps, /)\n--\n\n"
       "Layer normalization over the rows of x viewed as [rows, n]: out = (x - mean) / "
       "sqrt(var + eps) * weight + bias per row, with the biased variance (PyTorch's "
       "layer_norm).  weight and bias are None or n values; x, out (and weight, bias) "
       "C-contiguous, one float format; out may be x itself (in place).  eps finite, >= 0.");

typedef struct {
    const void *x, *w, *b;
    void *out;
    Py_ssize_t rows, n;
    double eps;
    char kd;
} layer_norm_node;

static int layer_norm_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    const char *fn = "layer_norm";
    static const char *const names[4] = {"x", "weight", "bias", "out"};
    Py_buffer *v[4];
    Py_ssize_t rows, n;
    double eps;
    if (check_nargs(fn, nargs, 7) < 0 || get_min(fn, "rows", args[4], 0, &rows) < 0 ||
        get_min(fn, "n", args[5], 0, &n) < 0 || get_double(fn, "eps", args[6], &eps) < 0)
        return -1;
    if (!isfinite(eps) || eps < 0) {
        PyErr_Format(PyExc_ValueError, "%s: 'eps' must be finite and >= 0, got %R", fn, args[6]);
        return -1;
    }
    int ok = 1;
    const Py_ssize_t total = smul(rows, n, &ok);
    if (!ok)
        return overflow_error(fn, "rows * n");
    if (get_bufs(bs, fn, args, 4, names, "rRRw", v) < 0)
        return -1;
    Py_buffer *x = v[0], *w = v[1], *b = v[2], *out = v[3];
    const char kd = need_float_contig(fn, 4, v, names, "====");
    if (!kd)
        return -1;
#define WHAT "rows=%zd, n=%zd", rows, n
    if (need_elems(fn, "x", x, total, WHAT) < 0 || need_elems(fn, "out", out, total, WHAT) < 0 ||
        (w && total > 0 && need_elems(fn, "weight", w, n, WHAT) < 0) ||
        (b && total > 0 && need_elems(fn, "bias", b, n, WHAT) < 0))
        return -1;
#undef WHAT
    if (total > 0 && (need_no_overlap(fn, "out", out, "x", x, 1) < 0 ||
                      (w && need_no_overlap(fn, "out", out, "weight", w, 0) < 0) ||
                      (b && need_no_overlap(fn, "out", out, "bias", b, 0) < 0)))
        return -1;
    *(layer_norm_node *)node = (layer_norm_node){.x = x->buf, .w = w ? w->buf : NULL,
                                                 .b = b ? b->buf : NULL, .out = out->buf,
                                                 .rows = rows, .n = n, .eps = eps, .kd = kd};
    return 0;
}

static int layer_norm_exec(const void *node)
{
    const layer_norm_node *s = node;
    if (s->kd == 'f')
        gc_layer_norm_f32(s->x, s->w, s->b, s->out, s->rows, s->n, s->eps);
    else
        gc_layer_norm_f64(s->x, s->w, s->b, s->out, s->rows, s->n, s->eps);
    return 0;
}

GC_NODE_KIND_IO(layer_norm, layer_norm_parse, layer_norm_exec, layer_norm_node, NULL,
                GC_NODE_PTR(layer_norm_node, x), GC_NODE_PTR(layer_norm_node, w),
                GC_NODE_PTR(layer_norm_node, b), GC_NODE_OUT(layer_norm_node, out));
GC_NODE_BINDING(layer_norm)

/* ---- eager row norms (gpucore/ops/norm.py): layer_norm, rms_norm, group_norm ------------- */

/* rows, groups, cg, inner from args[at..at+3]; total = rows * cg * inner, nc = groups * cg */
static int rows_geometry(const char *fn, PyObject *const *args, Py_ssize_t *g, Py_ssize_t *total,
                         Py_ssize_t *nc)
{
    static const char *const dims[4] = {"rows", "groups", "cg", "inner"};
    for (int i = 0; i < 4; i++)
        if (get_min(fn, dims[i], args[i], i == 1 ? 1 : 0, &g[i]) < 0)
            return -1;
    if (g[0] % g[1]) {
        PyErr_Format(PyExc_ValueError, "%s: rows=%zd must be a multiple of groups=%zd", fn, g[0],
                     g[1]);
        return -1;
    }
    int ok = 1;
    *total = smul(smul(g[0], g[2], &ok), g[3], &ok);
    *nc = smul(g[1], g[2], &ok);
    return ok ? 0 : overflow_error(fn, "rows * cg * inner");
}

GC_DOC(norm_rows_forward,
       "norm_rows_forward(x, weight, bias, out, mean, rstd, rows, groups, cg, inner, eps, rms, "
       "/)\n--\n\n"
       "Normalize each row of x viewed as [rows, cg * inner] into out: (x - mean) / sqrt(var + "
       "eps) * weight + bias (rms: x / sqrt(mean(x^2) + eps) * weight), the weight / bias of "
       "row r's element ci * inner + s at channel (r % groups) * cg + ci (layer_norm: groups = "
       "inner = 1; group_norm: cg = C / groups, inner = spatial size).  weight, bias: None or "
       "groups * cg values; mean, rstd: None or rows values each.  Portable C accumulating in "
       "double: the same bits under every ISA and thread count.");

PyObject *gc_py_norm_rows_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "norm_rows_forward";
    static const char *const names[6] = {"x", "weight", "bias", "out", "mean", "rstd"};
    bufset bs = {.n = 0};
    Py_buffer *v[6];
    Py_ssize_t g[4], total, nc;
    double eps;
    int rms;
    if (check_nargs(fn, nargs, 12) < 0 || rows_geometry(fn, args + 6, g, &total, &nc) < 0 ||
        get_double(fn, "eps", args[10], &eps) < 0 || get_flag(fn, "rms", args[11], &rms) < 0)
        return NULL;
    if (!isfinite(eps) || eps < 0) {
        PyErr_Format(PyExc_ValueError, "%s: 'eps' must be finite and >= 0, got %R", fn, args[10]);
        return NULL;
    }
    if (get_bufs(&bs, fn, args, 6, names, "rRRwWW", v) < 0)
        goto fail;
    if (rms && v[2]) {
        PyErr_Format(PyExc_ValueError, "%s: rms takes no bias", fn);
        goto fail;
    }
    const char kd = need_float_contig(fn, 6, v, names, "======");
    if (!kd)
        goto fail;
    const Py_ssize_t rows = g[0];
#define WHAT "rows=%zd, groups=%zd, cg=%zd, inner=%zd", rows, g[1], g[2], g[3]
    const Py_ssize_t need[6] = {total, nc, nc, total, rows, rows};
    for (int i = 0; i < 6; i++) /* empty rows still get their statistics (NaN) */
        if (v[i] && (i >= 4 ? rows : total) > 0 &&
            need_elems(fn, names[i], v[i], need[i], WHAT) < 0)
            goto fail;
#undef WHAT
    static const int outs[6] = {0, 0, 0, 1, 1, 1};
    Py_ssize_t apart[6];
    for (int i = 0; i < 6; i++)
        apart[i] = (i >= 4 ? rows : total) > 0 ? need[i] : 0;
    if (need_outputs_apart(fn, 6, v, names, apart, outs) < 0)
        goto fail;
    void *p[6];
    for (int i = 0; i < 6; i++)
        p[i] = v[i] ? v[i]->buf : NULL;
    /* below ~20 us of work the GIL round trip costs more than it frees */
    PyThreadState *ts = total >= 16384 ? PyEval_SaveThread() : NULL;
    if (kd == 'f')
        gc_norm_rows_fwd_f32(p[0], p[1], p[2], p[3], p[4], p[5], rows, g[1], g[2], g[3], eps,
                             rms);
    else
        gc_norm_rows_fwd_f64(p[0], p[1], p[2], p[3], p[4], p[5], rows, g[1], g[2], g[3], eps,
                             rms);
    if (ts)
        PyEval_RestoreThread(ts);
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(norm_rows_backward,
       "norm_rows_backward(x, weight, mean, rstd, g, gx, gw, gb, part, rows, groups, cg, inner, "
       "chunk, rms, /)\n--\n\n"
       "Gradients of norm_rows_forward for the incoming gradient g: gx (or None), and the "
       "weight / bias gradients gw / gb (groups * cg values each, or None), summed over blocks "
       "of chunk rows into part (float64, >= ceil(rows / chunk) * 2 * groups * cg values; None "
       "when gw and gb are) and the blocks added in order: the same bits for any thread count. "
       "mean: None when rms.");

PyObject *gc_py_norm_rows_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "norm_rows_backward";
    static const char *const names[9] = {"x",  "weight", "mean", "rstd", "g",
                                         "gx", "gw",     "gb",   "part"};
    bufset bs = {.n = 0};
    Py_buffer *v[9];
    Py_ssize_t g[4], total, nc, chunk;
    int rms;
    if (check_nargs(fn, nargs, 15) < 0 || rows_geometry(fn, args + 9, g, &total, &nc) < 0 ||
        get_min(fn, "chunk", args[13], 1, &chunk) < 0 || get_flag(fn, "rms", args[14], &rms) < 0)
        return NULL;
    const Py_ssize_t rows = g[0];
    int ok = 1;
    const Py_ssize_t nch = (rows + chunk - 1) / chunk;
    const Py_ssize_t npart = smul(smul(nch, 2, &ok), nc, &ok);
    if (!ok) {
        overflow_error(fn, "part");
        return NULL;
    }
    if (get_bufs(&bs, fn, args, 9, names, rms ? "rRRrrWWWW" : "rRrrrWWWW", v) < 0)
        goto fail;
    if (!rms && !v[2]) {
        PyErr_Format(PyExc_ValueError, "%s: 'mean' is needed unless rms", fn);
        goto fail;
    }
    const char kd = need_float_contig(fn, 8, v, names, "========");
    if (!kd)
        goto fail;
    if ((v[6] || v[7]) && total > 0) {
        if (!v[8]) {
            PyErr_Format(PyExc_ValueError, "%s: gw / gb need the scratch 'part'", fn);
            goto fail;
        }
        if (need_kind(fn, "part", v[8], 'd') < 0 || need_contig(fn, "part", v[8]) < 0)
            goto fail;
    }
#define WHAT "rows=%zd, groups=%zd, cg=%zd, inner=%zd, chunk=%zd", rows, g[1], g[2], g[3], chunk
    const Py_ssize_t need[9] = {total, nc, rows, rows, total, total, nc, nc, npart};
    for (int i = 0; i < 9; i++) {
        const int used = i == 8 ? (v[6] || v[7]) && total > 0 : (i >= 6 || total > 0);
        if (v[i] && used && need_elems(fn, names[i], v[i], need[i], WHAT) < 0)
            goto fail;
    }
#undef WHAT
    static const int outs[9] = {0, 0, 0, 0, 0, 1, 1, 1, 1};
    Py_ssize_t apart[9];
    for (int i = 0; i < 9; i++)
        apart[i] = (i == 6 || i == 7) ? nc : (total > 0 ? need[i] : 0);
    if (need_outputs_apart(fn, 9, v, names, apart, outs) < 0)
        goto fail;
    void *p[9];
    for (int i = 0; i < 9; i++)
        p[i] = v[i] ? v[i]->buf : NULL;
    PyThreadState *ts = total >= 16384 ? PyEval_SaveThread() : NULL;
    if (kd == 'f')
        gc_norm_rows_bwd_f32(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], rows, g[1],
                             g[2], g[3], chunk, rms);
    else
        gc_norm_rows_bwd_f64(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8], rows, g[1],
                             g[2], g[3], chunk, rms);
    if (ts)
        PyEval_RestoreThread(ts);
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

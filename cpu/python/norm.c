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

GC_NODE_KIND(layer_norm, layer_norm_parse, layer_norm_exec, layer_norm_node, NULL);
GC_NODE_BINDING(layer_norm)

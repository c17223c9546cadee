/* Bindings of softmax.c: softmax, softmax_backward (node kinds, see nodes.h),
 * cross_entropy_forward / _backward (plain bindings: their target check reads the data). */
#include "args.h"
#include "bindings.h"
#include "nodes.h"

/* The arguments after the buffers: outer, n, inner, log; sizes as three_axis_sizes. */
static int softmax_dims(const char *fn, PyObject *const *a, Py_ssize_t *outer, Py_ssize_t *n,
                        Py_ssize_t *inner, int *lg, Py_ssize_t *total)
{
    Py_ssize_t rows;
    if (get_min(fn, "outer", a[0], 0, outer) < 0 || get_min(fn, "n", a[1], 0, n) < 0 ||
        get_min(fn, "inner", a[2], 0, inner) < 0 || get_flag(fn, "log", a[3], lg) < 0 ||
        three_axis_sizes(fn, *outer, *n, *inner, total, &rows) < 0)
        return -1;
    return 0;
}

GC_DOC(softmax,
       "softmax(x, out, outer, n, inner, log, /)\n--\n\n"
       "Softmax (log=0) or log-softmax (log=1) over the middle axis of [outer, n, inner]; "
       "x and out C-contiguous, same float format; out may be x.");

/* softmax: x, out (g unused); softmax_backward: g = grad, x = y, out. */
typedef struct {
    const void *x, *g;
    void *out;
    Py_ssize_t outer, n, inner;
    int lg;
    char kd;
} softmax_node;

static int softmax_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    const char *fn = "softmax";
    static const char *const names[2] = {"x", "out"};
    Py_buffer *v[2];
    int lg;
    Py_ssize_t outer, n, inner, total;
    if (check_nargs(fn, nargs, 6) < 0 ||
        softmax_dims(fn, args + 2, &outer, &n, &inner, &lg, &total) < 0)
        return -1;
    if (get_bufs(bs, fn, args, 2, names, "rw", v) < 0)
        return -1;
    Py_buffer *x = v[0], *out = v[1];
    const char kd = need_float_contig(fn, 2, v, names, "==");
    if (!kd)
        return -1;
#define WHAT "outer=%zd, n=%zd, inner=%zd", outer, n, inner
    if (need_elems(fn, "x", x, total, WHAT) < 0 || need_elems(fn, "out", out, total, WHAT) < 0)
        return -1;
#undef WHAT
    if (total > 0 && need_no_overlap(fn, "out", out, "x", x, 1) < 0)
        return -1;
    *(softmax_node *)node = (softmax_node){.x = x->buf, .out = out->buf, .outer = outer, .n = n,
                                           .inner = inner, .lg = lg, .kd = kd};
    return 0;
}

static int softmax_exec(const void *node)
{
    const softmax_node *s = node;
    if (s->kd == 'f')
        gc_softmax_f32(s->x, s->out, s->outer, s->n, s->inner, s->lg);
    else
        gc_softmax_f64(s->x, s->out, s->outer, s->n, s->inner, s->lg);
    return 0;
}

GC_NODE_KIND_IO(softmax, softmax_parse, softmax_exec, softmax_node, NULL,
                GC_NODE_PTR(softmax_node, x), GC_NODE_PTR(softmax_node, g),
                GC_NODE_OUT(softmax_node, out));
GC_NODE_BINDING(softmax)

GC_DOC(softmax_backward,
       "softmax_backward(grad, y, out, outer, n, inner, log, /)\n--\n\n"
       "y = the forward output.  softmax: out = y * (g - sum(g*y)); log-softmax: "
       "out = g - exp(y) * sum(g); sums over the middle axis.  out may be grad or y.");

static int softmax_backward_parse(PyObject *const *args, Py_ssize_t nargs, void *node,
                                  bufset *bs)
{
    const char *fn = "softmax_backward";
    static const char *const names[3] = {"grad", "y", "out"};
    Py_buffer *v[3];
    int lg;
    Py_ssize_t outer, n, inner, total;
    if (check_nargs(fn, nargs, 7) < 0 ||
        softmax_dims(fn, args + 3, &outer, &n, &inner, &lg, &total) < 0)
        return -1;
    if (get_bufs(bs, fn, args, 3, names, "rrw", v) < 0)
        return -1;
    Py_buffer *g = v[0], *y = v[1], *out = v[2];
    const char kd = need_float_contig(fn, 3, v, names, "===");
    if (!kd)
        return -1;
#define WHAT "outer=%zd, n=%zd, inner=%zd", outer, n, inner
    if (need_elems(fn, "grad", g, total, WHAT) < 0 || need_elems(fn, "y", y, total, WHAT) < 0 ||
        need_elems(fn, "out", out, total, WHAT) < 0)
        return -1;
#undef WHAT
    if (total > 0 && (need_no_overlap(fn, "out", out, "grad", g, 1) < 0 ||
                      need_no_overlap(fn, "out", out, "y", y, 1) < 0))
        return -1;
    *(softmax_node *)node = (softmax_node){.x = y->buf, .g = g->buf, .out = out->buf,
                                           .outer = outer, .n = n, .inner = inner, .lg = lg,
                                           .kd = kd};
    return 0;
}

static int softmax_backward_exec(const void *node)
{
    const softmax_node *s = node;
    if (s->kd == 'f')
        gc_softmax_backward_f32(s->g, s->x, s->out, s->outer, s->n, s->inner, s->lg);
    else
        gc_softmax_backward_f64(s->g, s->x, s->out, s->outer, s->n, s->inner, s->lg);
    return 0;
}

GC_NODE_KIND(softmax_backward, softmax_backward_parse, softmax_backward_exec, softmax_node, NULL);
GC_NODE_BINDING(softmax_backward)

/* n, c, ignore_index (args a[0..3)) and n * c. */
static int ce_dims(const char *fn, PyObject *const *a, Py_ssize_t *n, Py_ssize_t *c,
                   int64_t *ign, Py_ssize_t *nc)
{
    if (get_min(fn, "n", a[0], 0, n) < 0 || get_min(fn, "c", a[1], 0, c) < 0 ||
        get_i64(fn, "ignore_index", a[2], ign) < 0)
        return -1;
    int ok = 1;
    *nc = smul(*n, *c, &ok);
    return ok ? 0 : overflow_error(fn, "n * c");
}

/* Every target is ignore_index or in [0, c); IndexError naming the first bad one otherwise. */
static int check_targets(const char *fn, const int64_t *t, Py_ssize_t n, Py_ssize_t c,
                         int64_t ignore_index)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        if (t[i] != ignore_index && (t[i] < 0 || t[i] >= (int64_t)c)) {
            PyErr_Format(PyExc_IndexError,
                         "%s: target[%zd] = %lld is out of range for c = %zd classes (expected "
                         "0 <= target < %zd or ignore_index = %lld)",
                         fn, i, (long long)t[i], c, c, (long long)ignore_index);
            return -1;
        }
    }
    return 0;
}

GC_DOC(cross_entropy_forward,
       "cross_entropy_forward(logits, target, loss, lse, n, c, ignore_index, /)\n--\n\n"
       "logits [n, c] float, target [n] int64: lse[i] = logsumexp(logits[i]), loss[i] = "
       "lse[i] - logits[i, target[i]] (0 where target[i] == ignore_index).  A target "
       "outside [0, c) that is not ignore_index raises IndexError.");

PyObject *gc_py_cross_entropy_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "cross_entropy_forward";
    static const char *const names[4] = {"logits", "target", "loss", "lse"};
    bufset bs = {.n = 0};
    Py_buffer *v[4];
    Py_ssize_t n, c, nc;
    int64_t ign;
    if (check_nargs(fn, nargs, 7) < 0 || ce_dims(fn, args + 4, &n, &c, &ign, &nc) < 0)
        return NULL;
    if (get_bufs(&bs, fn, args, 4, names, "rrww", v) < 0)
        goto fail;
    Py_buffer *lg = v[0], *tg = v[1], *loss = v[2], *lse = v[3];
    const char kd = need_float_contig(fn, 4, v, names, "=q==");
    if (!kd)
        goto fail;
#define WHAT "n=%zd, c=%zd", n, c
    if (need_elems(fn, "logits", lg, nc, WHAT) < 0 || need_elems(fn, "target", tg, n, WHAT) < 0 ||
        need_elems(fn, "loss", loss, n, WHAT) < 0 || need_elems(fn, "lse", lse, n, WHAT) < 0)
        goto fail;
#undef WHAT
    if (n > 0 && (need_no_overlap(fn, "loss", loss, "logits", lg, 0) < 0 ||
                  need_no_overlap(fn, "loss", loss, "target", tg, 0) < 0 ||
                  need_no_overlap(fn, "loss", loss, "lse", lse, 0) < 0 ||
                  need_no_overlap(fn, "lse", lse, "logits", lg, 0) < 0 ||
                  need_no_overlap(fn, "lse", lse, "target", tg, 0) < 0))
        goto fail;
    if (check_targets(fn, (const int64_t *)tg->buf, n, c, ign) < 0)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_cross_entropy_forward_f32((const float *)lg->buf, (const int64_t *)tg->buf,
                                     (float *)loss->buf, (float *)lse->buf, n, c, ign);
    else
        gc_cross_entropy_forward_f64((const double *)lg->buf, (const int64_t *)tg->buf,
                                     (double *)loss->buf, (double *)lse->buf, n, c, ign);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(cross_entropy_backward,
       "cross_entropy_backward(logits, target, lse, grad_loss, out, n, c, ignore_index, "
       "/)\n--\n\n"
       "out[i, j] = grad_loss[i] * (exp(logits[i, j] - lse[i]) - (j == target[i])); rows "
       "with ignore_index get 0.  out may be logits.");

PyObject *gc_py_cross_entropy_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "cross_entropy_backward";
    static const char *const names[5] = {"logits", "target", "lse", "grad_loss", "out"};
    bufset bs = {.n = 0};
    Py_buffer *v[5];
    Py_ssize_t n, c, nc;
    int64_t ign;
    if (check_nargs(fn, nargs, 8) < 0 || ce_dims(fn, args + 5, &n, &c, &ign, &nc) < 0)
        return NULL;
    if (get_bufs(&bs, fn, args, 5, names, "rrrrw", v) < 0)
        goto fail;
    Py_buffer *lg = v[0], *tg = v[1], *lse = v[2], *gl = v[3], *out = v[4];
    const char kd = need_float_contig(fn, 5, v, names, "=q===");
    if (!kd)
        goto fail;
#define WHAT "n=%zd, c=%zd", n, c
    if (need_elems(fn, "logits", lg, nc, WHAT) < 0 || need_elems(fn, "target", tg, n, WHAT) < 0 ||
        need_elems(fn, "lse", lse, n, WHAT) < 0 || need_elems(fn, "grad_loss", gl, n, WHAT) < 0 ||
        need_elems(fn, "out", out, nc, WHAT) < 0)
        goto fail;
#undef WHAT
    if (nc > 0 && (need_no_overlap(fn, "out", out, "logits", lg, 1) < 0 ||
                   need_no_overlap(fn, "out", out, "target", tg, 0) < 0 ||
                   need_no_overlap(fn, "out", out, "lse", lse, 0) < 0 ||
                   need_no_overlap(fn, "out", out, "grad_loss", gl, 0) < 0))
        goto fail;
    if (check_targets(fn, (const int64_t *)tg->buf, n, c, ign) < 0)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_cross_entropy_backward_f32((const float *)lg->buf, (const int64_t *)tg->buf,
                                      (const float *)lse->buf, (const float *)gl->buf,
                                      (float *)out->buf, n, c, ign);
    else
        gc_cross_entropy_backward_f64((const double *)lg->buf, (const int64_t *)tg->buf,
                                      (const double *)lse->buf, (const double *)gl->buf,
                                      (double *)out->buf, n, c, ign);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

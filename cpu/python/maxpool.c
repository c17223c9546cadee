/* Bindings of maxpool.c: max_pool2d, max_pool2d_backward (node kinds, see nodes.h). */
#include "args.h"
#include "bindings.h"
#include "nodes.h"

/* ptr: forward x, vals, idx; backward g, idx, gx, and the pooled values masking g (relu fused)
 * or NULL. */
typedef struct {
    gc_pool2d p;
    void *ptr[4];
    int fwd;
    char kd;
} pool_node;

/* max_pool2d(x, vals, idx, planes, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow) and
 * max_pool2d_backward(g, idx, gx, <the same 13 ints>[, vals]). */
static int pool2d_parse_common(const char *fn, PyObject *const *args, Py_ssize_t nargs,
                               pool_node *node, bufset *bs, int fwd)
{
    gc_pool2d p;
    const int masked = !fwd && nargs == 17;
    if (check_nargs(fn, nargs, masked ? 17 : 16) < 0)
        return -1;
    PyObject *const *g = args + 3;
    if (get_min(fn, "planes", g[0], 0, &p.planes) < 0 || get_min(fn, "h", g[1], 1, &p.h) < 0 ||
        get_min(fn, "w", g[2], 1, &p.w) < 0 || get_min(fn, "kh", g[3], 1, &p.kh) < 0 ||
        get_min(fn, "kw", g[4], 1, &p.kw) < 0 || get_min(fn, "sh", g[5], 1, &p.sh) < 0 ||
        get_min(fn, "sw", g[6], 1, &p.sw) < 0 || get_min(fn, "ph", g[7], 0, &p.ph) < 0 ||
        get_min(fn, "pw", g[8], 0, &p.pw) < 0 || get_min(fn, "dh", g[9], 1, &p.dh) < 0 ||
        get_min(fn, "dw", g[10], 1, &p.dw) < 0 || get_min(fn, "oh", g[11], 1, &p.oh) < 0 ||
        get_min(fn, "ow", g[12], 1, &p.ow) < 0)
        return -1;
    int ok = 1;
    const Py_ssize_t nin = smul(p.planes, smul(p.h, p.w, &ok), &ok);
    const Py_ssize_t nout = smul(p.planes, smul(p.oh, p.ow, &ok), &ok);
    if (!ok)
        return overflow_error(fn, "planes * h * w or planes * oh * ow");
    static const char *fnames[] = {"x", "vals", "idx"}, *bnames[] = {"g", "idx", "gx"};
    const char **names = fwd ? fnames : bnames;
    const Py_ssize_t need[3] = {fwd ? nin : nout, nout, fwd ? nout : nin};
    Py_buffer *v[3];
    if (get_bufs(bs, fn, args, 3, names, fwd ? "rwW" : "rrw", v) < 0) /* idx None: values only */
        return -1;
    const char kd = float_kind(fn, names[0], v[0]);
    const int fl = fwd ? 1 : 2; /* the other float buffer */
    if (!kd || need_kind(fn, names[fl], v[fl], kd) < 0 ||
        (v[fwd ? 2 : 1] && need_kind(fn, "idx", v[fwd ? 2 : 1], 'q') < 0))
        return -1;
    for (int i = 0; i < 3; i++) {
        if (!v[i])
            continue;
        if (need_contig(fn, names[i], v[i]) < 0 ||
            need_elems(fn, names[i], v[i], need[i],
                       "planes=%zd, h=%zd, w=%zd, oh=%zd, ow=%zd", p.planes, p.h, p.w, p.oh,
                       p.ow) < 0)
            return -1;
    }
    static const int fwd_out[3] = {0, 1, 1}, bwd_out[3] = {0, 0, 1};
    if (need_outputs_apart(fn, 3, v, names, need, fwd ? fwd_out : bwd_out) < 0)
        return -1;
    void *mv = NULL;
    if (masked && args[16] != Py_None) {
        static const char *const mnames[1] = {"vals"};
        Py_buffer *m[1];
        if (get_bufs(bs, fn, args + 16, 1, mnames, "r", m) < 0 ||
            need_kind(fn, "vals", m[0], kd) < 0 || need_contig(fn, "vals", m[0]) < 0 ||
            need_elems(fn, "vals", m[0], nout, "planes=%zd, oh=%zd, ow=%zd", p.planes, p.oh,
                       p.ow) < 0)
            return -1;
        if (buf_overlap(m[0], v[2])) {
            PyErr_Format(PyExc_ValueError, "%s: vals and gx overlap", fn);
            return -1;
        }
        mv = m[0]->buf;
    }
    *node = (pool_node){.p = p,
                        .ptr = {v[0]->buf, v[1]->buf, v[2] ? v[2]->buf : NULL, mv},
                        .fwd = fwd,
                        .kd = kd};
    return 0;
}

static int max_pool2d_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    return pool2d_parse_common("max_pool2d", args, nargs, node, bs, 1);
}

static int max_pool2d_backward_parse(PyObject *const *args, Py_ssize_t nargs, void *node,
                                     bufset *bs)
{
    return pool2d_parse_common("max_pool2d_backward", args, nargs, node, bs, 0);
}

/* The backward gives -1 when an index lies outside its plane, -2 out of memory (pool2d_fail). */
static int pool2d_exec(const void *node)
{
    const pool_node *q = node;
    void *const *v = q->ptr;
    if (q->fwd) {
        if (q->kd == 'f')
            gc_max_pool2d_f32(v[0], v[1], v[2], &q->p);
        else
            gc_max_pool2d_f64(v[0], v[1], v[2], &q->p);
        return 0;
    }
    if (q->kd == 'f')
        return gc_max_pool2d_relu_backward_f32(v[0], v[1], v[3], v[2], &q->p);
    return gc_max_pool2d_relu_backward_f64(v[0], v[1], v[3], v[2], &q->p);
}

static void pool2d_fail(const char *fn, const void *node, int rc)
{
    const pool_node *q = node;
    if (rc == -2) {
        PyErr_NoMemory();
        return;
    }
    PyErr_Format(PyExc_IndexError, "%s: an index lies outside [0, h*w = %zd)", fn,
                 q->p.h * q->p.w);
}

GC_NODE_KIND(max_pool2d, max_pool2d_parse, pool2d_exec, pool_node, NULL);
GC_NODE_KIND(max_pool2d_backward, max_pool2d_backward_parse, pool2d_exec, pool_node,
             pool2d_fail);

GC_DOC(max_pool2d,
             "max_pool2d(x, vals, idx, planes, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow, /)"
             "\n--\n\n"
             "Max pooling of x [planes, h, w] into vals [planes, oh, ow] and int64 idx (flat "
             "index into h*w of each maximum; None: the values only), PyTorch's rules (padding "
             "-inf, first maximum, NaN wins).");

GC_NODE_BINDING(max_pool2d)

GC_DOC(max_pool2d_backward,
             "max_pool2d_backward(g, idx, gx, planes, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, "
             "ow, vals=None, /)\n--\n\n"
             "gx [planes, h, w] = zeros with g [planes, oh, ow] added at idx; IndexError if an "
             "index lies outside [0, h*w).  With vals (the pooled values [planes, oh, ow] of a "
             "relu's output) g is taken where vals > 0 and +0 elsewhere: relu_backward fused, "
             "the bits of relu_backward(max_pool2d_backward(g), relu input).");

GC_NODE_BINDING(max_pool2d_backward)

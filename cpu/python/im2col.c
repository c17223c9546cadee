/* Bindings of im2col.c: im2col, col2im (node kinds, see nodes.h). */
#include "args.h"
#include "bindings.h"
#include "nodes.h"

typedef struct {
    gc_conv p;
    const void *in;
    void *out;
    int to_col;
    char kd;
} im2col_node;

static int im2col_parse_common(const char *fn, PyObject *const *args, Py_ssize_t nargs,
                               im2col_node *node, bufset *bs, int to_col)
{
    gc_conv p;
    Py_ssize_t nx, ncol;
    if (check_nargs(fn, nargs, 14) < 0 || conv_geometry(fn, args + 2, &p, &nx, &ncol) < 0)
        return -1;
    /* im2col(x, col, ...), col2im(col, x, ...) */
    static const char *const col_names[2] = {"x", "col"}, *const im_names[2] = {"col", "x"};
    const char *const *names = to_col ? col_names : im_names;
    const char *in_name = names[0], *out_name = names[1];
    Py_buffer *v[2];
    if (get_bufs(bs, fn, args, 2, names, "rw", v) < 0)
        return -1;
    Py_buffer *in = v[0], *out = v[1];
    const char kd = need_float_contig(fn, 2, v, names, "==");
    if (!kd)
        return -1;
#define WHAT                                                                                      \
    "n=%zd, c=%zd, h=%zd, w=%zd, kernel %zdx%zd, stride %zdx%zd, padding %zdx%zd, dilation "       \
    "%zdx%zd -> oh=%zd, ow=%zd",                                                                   \
        p.n, p.c, p.h, p.w, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, p.oh, p.ow
    const Py_ssize_t nin = to_col ? nx : ncol, nout = to_col ? ncol : nx;
    if (need_elems(fn, in_name, in, nin, WHAT) < 0 ||
        need_elems(fn, out_name, out, nout, WHAT) < 0)
        return -1;
#undef WHAT
    if (nin > 0 && nout > 0 && need_no_overlap(fn, out_name, out, in_name, in, 0) < 0)
        return -1;
    *node = (im2col_node){.p = p, .in = in->buf, .out = out->buf, .to_col = to_col, .kd = kd};
    return 0;
}

static int im2col_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    return im2col_parse_common("im2col", args, nargs, node, bs, 1);
}

static int col2im_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    return im2col_parse_common("col2im", args, nargs, node, bs, 0);
}

static int im2col_exec(const void *node)
{
    const im2col_node *q = node;
    if (q->to_col) {
        if (q->kd == 'f')
            gc_im2col_f32(q->in, q->out, &q->p);
        else
            gc_im2col_f64(q->in, q->out, &q->p);
    } else {
        if (q->kd == 'f')
            gc_col2im_f32(q->in, q->out, &q->p);
        else
            gc_col2im_f64(q->in, q->out, &q->p);
    }
    return 0;
}

GC_NODE_KIND(im2col, im2col_parse, im2col_exec, im2col_node, NULL);
GC_NODE_KIND(col2im, col2im_parse, im2col_exec, im2col_node, NULL);

GC_DOC(im2col,
             "im2col(x, col, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, /)\n--\n\n"
             "x [n, c, h, w] -> col [n, c*kh*kw, oh*ow], oh = (h + 2*ph - dh*(kh-1) - 1) // sh "
             "+ 1 (likewise ow); padding reads as 0; row (ci*kh + ki)*kw + kj.");

GC_NODE_BINDING(im2col)

GC_DOC(col2im,
             "col2im(col, x, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, /)\n--\n\n"
             "The adjoint of im2col: x is overwritten with the sum of every col entry that "
             "im2col would have read from it.");

GC_NODE_BINDING(col2im)

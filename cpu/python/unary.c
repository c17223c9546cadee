/* Bindings of unary.c: unary, unary_backward (node kinds, see nodes.h). */
#include "args.h"
#include "bindings.h"
#include "nodes.h"

GC_DOC(unary, "unary(op, x, out, /)\n--\n\n"
              "out = f(x) elementwise (op: a UNARY_* constant); x and out C-contiguous, "
              "same length and float format; out may be x.");

/* unary: g NULL; unary_backward: x = grad, g = saved. */
typedef struct {
    const void *x, *g;
    void *out;
    Py_ssize_t n;
    int op;
    char kd;
} unary_node;

static int unary_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    const char *fn = "unary";
    static const char *const names[2] = {"x", "out"};
    Py_buffer *v[2];
    int op;
    if (check_nargs(fn, nargs, 3) < 0 || get_op(fn, args[0], GC_UNARY_COUNT, "UNARY_", &op) < 0)
        return -1;
    if (get_bufs(bs, fn, args + 1, 2, names, "rw", v) < 0)
        return -1;
    Py_buffer *x = v[0], *out = v[1];
    const char kd = need_float_contig(fn, 2, v, names, "==");
    if (!kd)
        return -1;
    const Py_ssize_t nx = buf_nelem(x), no = buf_nelem(out);
    if (nx != no) {
        PyErr_Format(PyExc_ValueError,
                     "unary(%s): x has %zd elements but out has %zd; they must be equal",
                     gc_unary_names[op], nx, no);
        return -1;
    }
    if (need_no_overlap(fn, "out", out, "x", x, 1) < 0)
        return -1;
    *(unary_node *)node = (unary_node){.x = x->buf, .out = out->buf, .n = nx, .op = op, .kd = kd};
    return 0;
}

static int unary_exec(const void *node)
{
    const unary_node *u = node;
    if (u->kd == 'f')
        gc_unary_f32(u->op, u->x, u->out, u->n);
    else
        gc_unary_f64(u->op, u->x, u->out, u->n);
    return 0;
}

GC_NODE_KIND_IO(unary, unary_parse, unary_exec, unary_node, NULL, GC_NODE_PTR(unary_node, x),
                GC_NODE_PTR(unary_node, g), GC_NODE_OUT(unary_node, out));
GC_NODE_BINDING(unary)

GC_DOC(unary_backward,
       "unary_backward(op, grad, saved, out, /)\n--\n\n"
       "out = grad * f'(...): RELU (saved = x), SIGMOID (saved = y), TANH (saved = y), "
       "GELU and GELU_TANH (saved = x).  All C-contiguous, same length and float format.");

static int unary_backward_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    const char *fn = "unary_backward";
    static const char *const names[3] = {"grad", "saved", "out"};
    Py_buffer *v[3];
    int op;
    if (check_nargs(fn, nargs, 4) < 0 || get_op(fn, args[0], GC_UNARY_COUNT, "UNARY_", &op) < 0)
        return -1;
    if (!gc_unary_has_backward(op)) {
        char acts[200];
        PyErr_Format(PyExc_ValueError,
                     "unary_backward: op %d (%s) has no backward kernel; supported: %s", op,
                     gc_unary_names[op], act_names(acts, sizeof acts, ""));
        return -1;
    }
    if (get_bufs(bs, fn, args + 1, 3, names, "rrw", v) < 0)
        return -1;
    Py_buffer *g = v[0], *s = v[1], *out = v[2];
    const char kd = need_float_contig(fn, 3, v, names, "===");
    if (!kd)
        return -1;
    const Py_ssize_t n = buf_nelem(g);
    if (buf_nelem(s) != n || buf_nelem(out) != n) {
        PyErr_Format(PyExc_ValueError,
                     "unary_backward(%s): grad, saved and out must have equal lengths, got %zd, "
                     "%zd and %zd",
                     gc_unary_names[op], n, buf_nelem(s), buf_nelem(out));
        return -1;
    }
    if (need_no_overlap(fn, "out", out, "grad", g, 1) < 0 ||
        need_no_overlap(fn, "out", out, "saved", s, 1) < 0)
        return -1;
    *(unary_node *)node =
        (unary_node){.x = g->buf, .g = s->buf, .out = out->buf, .n = n, .op = op, .kd = kd};
    return 0;
}

static int unary_backward_exec(const void *node)
{
    const unary_node *u = node;
    if (u->kd == 'f')
        gc_unary_backward_f32(u->op, u->x, u->g, u->out, u->n);
    else
        gc_unary_backward_f64(u->op, u->x, u->g, u->out, u->n);
    return 0;
}

GC_NODE_KIND(unary_backward, unary_backward_parse, unary_backward_exec, unary_node, NULL);
GC_NODE_BINDING(unary_backward)

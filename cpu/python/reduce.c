/* Bindings of reduce.c: reduce over the middle axis of [outer, n, inner] (a node kind, see
 * nodes.h). */
#include "args.h"
#include "bindings.h"
#include "nodes.h"

GC_DOC(reduce,
       "reduce(op, x, out, outer, n, inner, /)\n--\n\n"
       "Reduces the middle axis of C-contiguous x viewed as [outer, n, inner] into out "
       "[outer, inner] (op: a REDUCE_* constant).  SUM, MEAN, MAX, MIN write x's format; "
       "ARGMAX, ARGMIN write int64.  n == 0 only for SUM (0) and MEAN (nan).");

typedef struct {
    const void *x;
    void *out;
    Py_ssize_t outer, n, inner;
    int op;
    char kd;
} reduce_node;

static int reduce_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    const char *fn = "reduce";
    static const char *const names[2] = {"x", "out"};
    Py_buffer *v[2];
    int op;
    Py_ssize_t outer, n, inner, total, rows;
    if (check_nargs(fn, nargs, 6) < 0 ||
        get_op(fn, args[0], GC_REDUCE_COUNT, "REDUCE_", &op) < 0 ||
        get_min(fn, "outer", args[3], 0, &outer) < 0 || get_min(fn, "n", args[4], 0, &n) < 0 ||
        get_min(fn, "inner", args[5], 0, &inner) < 0 ||
        three_axis_sizes(fn, outer, n, inner, &total, &rows) < 0)
        return -1;
    if (n == 0 && op != GC_REDUCE_SUM && op != GC_REDUCE_MEAN) {
        PyErr_Format(PyExc_ValueError,
                     "reduce(%s): n == 0 (outer=%zd, inner=%zd) has no result; only SUM and MEAN "
                     "accept an empty axis",
                     gc_reduce_names[op], outer, inner);
        return -1;
    }
    if (get_bufs(bs, fn, args + 1, 2, names, "rw", v) < 0)
        return -1;
    Py_buffer *x = v[0], *out = v[1];
    const int is_arg = op == GC_REDUCE_ARGMAX || op == GC_REDUCE_ARGMIN;
    const char kd = need_float_contig(fn, 2, v, names, is_arg ? "=q" : "==");
    if (!kd)
        return -1;
#define WHAT "outer=%zd, n=%zd, inner=%zd", outer, n, inner
    if (need_elems(fn, "x", x, total, WHAT) < 0 || need_elems(fn, "out", out, rows, WHAT) < 0)
        return -1;
#undef WHAT
    if (rows > 0 && total > 0 && need_no_overlap(fn, "out", out, "x", x, 0) < 0)
        return -1;
    *(reduce_node *)node = (reduce_node){
        .x = x->buf, .out = out->buf, .outer = outer, .n = n, .inner = inner, .op = op, .kd = kd};
    return 0;
}

/* -1 when the kernel's scratch could not be allocated. */
static int reduce_exec(const void *node)
{
    const reduce_node *r = node;
    if (r->kd == 'f')
        return gc_reduce_f32(r->op, r->x, r->out, r->outer, r->n, r->inner);
    return gc_reduce_f64(r->op, r->x, r->out, r->outer, r->n, r->inner);
}

GC_NODE_KIND_IO(reduce, reduce_parse, reduce_exec, reduce_node, NULL, GC_NODE_PTR(reduce_node, x),
                GC_NODE_OUT(reduce_node, out));
GC_NODE_BINDING(reduce)

/* Bindings of binary.c: binary, where (broadcasting over any input strides; node kinds, see
 * nodes.h). */
#include "args.h"
#include "bindings.h"
#include "nodes.h"

#include <string.h>

GC_DOC(binary,
       "binary(op, a, b, out, /)\n--\n\n"
       "out = a op b with numpy broadcasting (op: a BINARY_* constant).  a, b: same float "
       "format, any strides, ndim <= out.ndim; out C-contiguous, ndim <= 8, a/b's format "
       "for arithmetic ops and bool for comparisons.");

/* binary: operands a, b, out (cond unused); where: cond, a, b, out.  empty: out has no element
 * (the iteration space is not collapsed then and the kernel does not run). */
typedef struct {
    gc_iter it;
    const void *cond, *a, *b;
    void *out;
    size_t isz; /* where's item size */
    int op, empty;
    char kd;
} binary_node;

static int binary_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    const char *fn = "binary";
    static const char *const names[3] = {"a", "b", "out"};
    binary_node *p = node;
    Py_buffer *v[3];
    int op;
    if (check_nargs(fn, nargs, 4) < 0 ||
        get_op(fn, args[0], GC_BINARY_COUNT, "BINARY_", &op) < 0)
        return -1;
    if (get_bufs(bs, fn, args + 1, 3, names, "rrw", v) < 0)
        return -1;
    Py_buffer *a = v[0], *b = v[1], *out = v[2];
    const char kd = float_kind(fn, "a", a);
    if (!kd || need_kind(fn, "b", b, kd) < 0 ||
        need_kind(fn, "out", out, gc_binary_writes_bool(op) ? '?' : kd) < 0 ||
        need_contig(fn, "out", out) < 0)
        return -1;
    memset(p, 0, sizeof *p);
    if (iter_init_out(fn, out, &p->it, 2) < 0 || iter_broadcast(fn, "a", a, out, &p->it, 0) < 0 ||
        iter_broadcast(fn, "b", b, out, &p->it, 1) < 0 ||
        iter_alias_ok(fn, "a", a, out, &p->it, 0, 2) < 0 ||
        iter_alias_ok(fn, "b", b, out, &p->it, 1, 2) < 0)
        return -1;
    p->empty = buf_nelem(out) == 0;
    if (!p->empty)
        gc_iter_collapse(&p->it, 3);
    p->a = a->buf;
    p->b = b->buf;
    p->out = out->buf;
    p->op = op;
    p->kd = kd;
    return 0;
}

static int binary_exec(const void *node)
{
    const binary_node *p = node;
    if (p->empty)
        return 0;
    if (p->kd == 'f')
        gc_binary_f32(p->op, &p->it, p->a, p->b, p->out);
    else
        gc_binary_f64(p->op, &p->it, p->a, p->b, p->out);
    return 0;
}

#define BINARY_PTRS                                                                               \
    GC_NODE_PTR(binary_node, cond), GC_NODE_PTR(binary_node, a), GC_NODE_PTR(binary_node, b),    \
        GC_NODE_OUT(binary_node, out)
GC_NODE_KIND_IO(binary, binary_parse, binary_exec, binary_node, NULL, BINARY_PTRS);
GC_NODE_BINDING(binary)

GC_DOC(where, "where(cond, a, b, out, /)\n--\n\n"
              "out = cond ? a : b with broadcasting as binary; cond bool; a, b and out "
              "the same format (any item size 1, 2, 4 or 8); out C-contiguous.");

static int where_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    const char *fn = "where";
    static const char *const names[4] = {"cond", "a", "b", "out"};
    binary_node *p = node;
    Py_buffer *v[4];
    if (check_nargs(fn, nargs, 4) < 0)
        return -1;
    if (get_bufs(bs, fn, args, 4, names, "rrrw", v) < 0)
        return -1;
    Py_buffer *c = v[0], *a = v[1], *b = v[2], *out = v[3];
    if (need_kind(fn, "cond", c, '?') < 0)
        return -1;
    const Py_ssize_t isz = a->itemsize;
    if (!fmt_is_plain(a) || !(isz == 1 || isz == 2 || isz == 4 || isz == 8)) {
        PyErr_Format(PyExc_TypeError,
                     "where: 'a' must be a plain (no objects) format of item size 1, 2, 4 or 8, "
                     "got format '%s' with item size %zd",
                     fmt_str(a), isz);
        return -1;
    }
    if (!fmt_same(a, b) || !fmt_same(a, out)) {
        PyErr_Format(PyExc_TypeError,
                     "where: a, b and out must have the same format, got '%s', '%s' and '%s'",
                     fmt_str(a), fmt_str(b), fmt_str(out));
        return -1;
    }
    if (need_contig(fn, "out", out) < 0)
        return -1;
    memset(p, 0, sizeof *p);
    if (iter_init_out(fn, out, &p->it, 3) < 0)
        return -1;
    for (int o = 0; o < 3; o++)
        if (iter_broadcast(fn, names[o], v[o], out, &p->it, o) < 0)
            return -1;
    for (int o = 0; o < 3; o++)
        if (iter_alias_ok(fn, names[o], v[o], out, &p->it, o, 3) < 0)
            return -1;
    p->empty = buf_nelem(out) == 0;
    if (!p->empty)
        gc_iter_collapse(&p->it, 4);
    p->cond = c->buf;
    p->a = a->buf;
    p->b = b->buf;
    p->out = out->buf;
    p->isz = (size_t)isz;
    return 0;
}

static int where_exec(const void *node)
{
    const binary_node *p = node;
    if (!p->empty)
        gc_where(&p->it, p->cond, p->a, p->b, p->out, p->isz);
    return 0;
}

GC_NODE_KIND_IO(where, where_parse, where_exec, binary_node, NULL, BINARY_PTRS);
GC_NODE_BINDING(where)

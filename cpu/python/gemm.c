/* Bindings of gemm.c: gemm, gemm_ex (node kinds, see nodes.h). */
#include "args.h"
#include "bindings.h"
#include "nodes.h"

#include <limits.h>

GC_DOC(gemm,
       "gemm(a, b, c, batch, m, n, k, trans_a, trans_b, alpha, beta, sa, sb, sc, /)\n--\n\n"
       "For i in range(batch): C_i = alpha * op(A_i) @ op(B_i) + beta * C_i, A_i starting "
       "at element i*sa of a (likewise sb, sc; 0 broadcasts; batches run in order).\n"
       "op(A) is m x k, stored k x m when trans_a; op(B) is k x n, stored n x k when "
       "trans_b.  beta == 0 never reads C.  a (b) may be a PackedMatrix of gemm_pack for side "
       "'a' ('b') with these dims and trans, and batch stride 0.");

GC_DOC(gemm_ex,
       "gemm_ex(a, b, c, batch, m, n, k, trans_a, trans_b, alpha, beta, sa, sb, sc, bias, "
       "act, bias_rows=0, /)\n--\n\n"
       "gemm with a fused epilogue: C_i = act(alpha * op(A_i) @ op(B_i) + beta * C_i + bias)."
       "  bias is None or n values (same float format) added to every row; act is -1 (none) "
       "or UNARY_RELU, UNARY_SIGMOID, UNARY_TANH, UNARY_GELU or UNARY_GELU_TANH.  bias_rows "
       "= 1: bias holds m values, bias[i] added to row i (C^T of a Linear layer), for batch 1, "
       "alpha 1 and act -1 or UNARY_RELU.");

typedef struct {
    const void *a, *b, *bias; /* bias NULL: none */
    const gc_packed *pa, *pb; /* a / b packed (gemm_pack), or NULL */
    void *c;
    Py_ssize_t batch, m, n, k, sa, sb, sc;
    double alpha, beta;
    int ta, tb, act;
    int bias_rows; /* bias per row of C, through the convolution's epilogue (gc_gemm_pxe) */
    char kd;       /* 'f' or 'd' */
} gemm_node;

/* gemm (14 args) and gemm_ex (16 args: + bias, act; 17: + bias_rows). */
static int gemm_parse_common(const char *fn, PyObject *const *args, Py_ssize_t nargs,
                             gemm_node *g, bufset *bs, int ex)
{
    static const char *const names[4] = {"a", "b", "c", "bias"};
    Py_ssize_t batch, m, n, k, sa, sb, sc, act = -1;
    int ta, tb, bias_rows = 0;
    double alpha, beta;
    if (ex && nargs != 16 && nargs != 17) {
        PyErr_Format(PyExc_TypeError, "%s() takes 16 or 17 positional arguments (%zd given)", fn,
                     nargs);
        return -1;
    }
    if (!ex && check_nargs(fn, nargs, 14) < 0)
        return -1;
    if (get_min(fn, "batch", args[3], 0, &batch) < 0 || get_min(fn, "m", args[4], 0, &m) < 0 ||
        get_min(fn, "n", args[5], 0, &n) < 0 || get_min(fn, "k", args[6], 0, &k) < 0 ||
        get_flag(fn, "trans_a", args[7], &ta) < 0 || get_flag(fn, "trans_b", args[8], &tb) < 0 ||
        get_double(fn, "alpha", args[9], &alpha) < 0 ||
        get_double(fn, "beta", args[10], &beta) < 0 || get_min(fn, "sa", args[11], 0, &sa) < 0 ||
        get_min(fn, "sb", args[12], 0, &sb) < 0 || get_min(fn, "sc", args[13], 0, &sc) < 0)
        return -1;
    if (ex) {
        if (get_ssize(fn, "act", args[15], &act) < 0)
            return -1;
        if (act < INT_MIN || act > INT_MAX || !gc_unary_is_act((int)act)) {
            char acts[200];
            PyErr_Format(PyExc_ValueError, "%s: 'act' must be -1 (none) or one of %s; got %zd",
                         fn, act_names(acts, sizeof acts, "UNARY_"), act);
            return -1;
        }
        if (nargs == 17 && get_flag(fn, "bias_rows", args[16], &bias_rows) < 0)
            return -1;
        /* (the rows' bias goes through gc_gemm_pxe's epilogue: one item, alpha 1, after relu's
         * add as the Linear's bias add and relu are) */
        if (bias_rows && (batch != 1 || alpha != 1.0 || (act != -1 && act != GC_UNARY_RELU))) {
            char got[32];
            PyErr_Format(PyExc_ValueError,
                         "%s: bias_rows=1 needs batch 1, alpha 1 and act -1 or UNARY_RELU; got "
                         "batch=%zd, alpha=%s, act=%zd",
                         fn, batch, repr_double(got, sizeof got, alpha), act);
            return -1;
        }
    }

    Py_buffer *v[4] = {NULL};
    const int packed[2] = {gc_is_packed(args[0]), gc_is_packed(args[1])};
    for (int i = 0; i < 3; i++) /* a PackedMatrix is checked once the call's format is known */
        if (!(i < 2 && packed[i]) && !(v[i] = get_buf(bs, fn, names[i], args[i], i == 2)))
            return -1;
    if (ex && args[14] != Py_None && !(v[3] = get_buf(bs, fn, "bias", args[14], 0)))
        return -1;
    Py_buffer *a = v[0], *b = v[1], *c = v[2], *bias = v[3];
    Py_buffer *vv[4] = {NULL}; /* the buffers given (a PackedMatrix is none), in order */
    const char *nn[4] = {NULL};
    int nv = 0;
    for (int i = 0; i < 4; i++)
        if (v[i]) {
            vv[nv] = v[i];
            nn[nv++] = names[i];
        }
    const char kd = need_float_contig(fn, nv, vv, nn, "====");
    if (!kd)
        return -1;
    const gc_packed *pk[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        if (!packed[i])
            continue;
        pk[i] = gc_packed_arg(bs, fn, names[i], args[i], i, i ? k : m, i ? n : k, i ? tb : ta, kd);
        if (!pk[i])
            return -1;
        if (pk[i]->swap == 2) {
            PyErr_Format(PyExc_ValueError,
                         "%s: '%s' is a Winograd convolution weight (gemm_pack swap=2), which "
                         "only conv2d_forward takes; pack it with swap 0 or 1",
                         fn, names[i]);
            return -1;
        }
        if (batch > 1 && (i ? sb : sa) != 0) {
            PyErr_Format(PyExc_ValueError,
                         "%s: '%s' is packed (one matrix): its batch stride '%s' must be 0, got "
                         "%zd",
                         fn, names[i], i ? "sb" : "sa", i ? sb : sa);
            return -1;
        }
    }

    /* elements touched: A_i spans m*k from i*sa, the last one ends at (batch-1)*sa + m*k */
    int ok = 1;
    const Py_ssize_t mk = smul(m, k, &ok), kn = smul(k, n, &ok), mn = smul(m, n, &ok);
    const Py_ssize_t last = batch > 0 ? batch - 1 : 0;
    const Py_ssize_t need_a = (batch > 0 && mk > 0) ? sadd(smul(last, sa, &ok), mk, &ok) : 0;
    const Py_ssize_t need_b = (batch > 0 && kn > 0) ? sadd(smul(last, sb, &ok), kn, &ok) : 0;
    const Py_ssize_t need_c = (batch > 0 && mn > 0) ? sadd(smul(last, sc, &ok), mn, &ok) : 0;
    if (!ok)
        return overflow_error(fn, "batch, m, n, k and the batch strides");
#define WHAT                                                                                      \
    "batch=%zd, m=%zd, n=%zd, k=%zd, trans_a=%d, trans_b=%d, sa=%zd, sb=%zd, sc=%zd", batch, m, n, \
        k, ta, tb, sa, sb, sc
    if ((a && need_elems(fn, "a", a, need_a, WHAT) < 0) ||
        (b && need_elems(fn, "b", b, need_b, WHAT) < 0) ||
        need_elems(fn, "c", c, need_c, WHAT) < 0 ||
        (bias && need_c > 0 && need_elems(fn, "bias", bias, bias_rows ? m : n, WHAT) < 0))
        return -1;
#undef WHAT
    if (need_c > 0 && ((a && need_a > 0 && need_no_overlap(fn, "c", c, "a", a, 0) < 0) ||
                       (b && need_b > 0 && need_no_overlap(fn, "c", c, "b", b, 0) < 0) ||
                       (bias && need_no_overlap(fn, "c", c, "bias", bias, 0) < 0)))
        return -1;
    *g = (gemm_node){.a = a ? a->buf : NULL, .b = b ? b->buf : NULL, .pa = pk[0], .pb = pk[1],
                     .bias = bias ? bias->buf : NULL, .c = c->buf,
                     .batch = batch, .m = m, .n = n, .k = k, .sa = sa, .sb = sb, .sc = sc,
                     .alpha = alpha, .beta = beta, .ta = ta, .tb = tb, .act = (int)act,
                     .bias_rows = bias_rows, .kd = kd};
    return 0;
}

static int gemm_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    return gemm_parse_common("gemm", args, nargs, node, bs, 0);
}

static int gemm_ex_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    return gemm_parse_common("gemm_ex", args, nargs, node, bs, 1);
}

/* -1 when the packing buffers could not be allocated. */
static int gemm_exec(const void *node)
{
    const gemm_node *g = node;
    if (g->bias_rows) {
        const gc_epi e = {.rb = g->bias, .res = NULL, .relu = g->act == GC_UNARY_RELU};
        return g->kd == 'f' ? gc_gemm_pxe_f32(g->a, g->pa, g->b, g->pb, g->c, g->m, g->n, g->k,
                                              g->ta, g->tb, (float)g->beta, &e)
                            : gc_gemm_pxe_f64(g->a, g->pa, g->b, g->pb, g->c, g->m, g->n, g->k,
                                              g->ta, g->tb, g->beta, &e);
    }
    if (g->kd == 'f')
        return gc_gemm_px_f32(g->a, g->pa, g->b, g->pb, g->c, g->batch, g->m, g->n, g->k, g->ta,
                              g->tb, (float)g->alpha, (float)g->beta, g->sa, g->sb, g->sc,
                              g->bias, g->act);
    return gc_gemm_px_f64(g->a, g->pa, g->b, g->pb, g->c, g->batch, g->m, g->n, g->k, g->ta,
                          g->tb, g->alpha, g->beta, g->sa, g->sb, g->sc, g->bias, g->act);
}

/* a, b, bias, c: the buffers (pa / pb point to PackedMatrix data, never a run buffer) */
#define GEMM_PTRS                                                                                 \
    GC_NODE_PTR(gemm_node, a), GC_NODE_PTR(gemm_node, b), GC_NODE_PTR(gemm_node, bias),          \
        GC_NODE_OUT(gemm_node, c)
GC_NODE_KIND_IO(gemm, gemm_parse, gemm_exec, gemm_node, NULL, GEMM_PTRS);
GC_NODE_KIND_IO(gemm_ex, gemm_ex_parse, gemm_exec, gemm_node, NULL, GEMM_PTRS);
GC_NODE_BINDING(gemm)
GC_NODE_BINDING(gemm_ex)

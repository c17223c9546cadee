/* Bindings of conv.c: conv2d_forward, conv2d_backward (groups 1; node kinds, see nodes.h). */
#include "args.h"
#include "bindings.h"
#include "nodes.h"

/* ptr: forward x, w, bias, out, res; backward x, w, g, gx, gw, gb (NULL: None). */
typedef struct {
    gc_conv p;
    void *ptr[6];
    const gc_packed *pw; /* forward: w packed (gemm_pack), or NULL */
    Py_ssize_t o;
    int fwd, relu; /* relu: forward's epilogue (act UNARY_RELU) */
    char kd;
} conv_node;

/* conv2d_forward(x, w, bias, out, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o[, res, act]) and
 * conv2d_backward(x, w, g, gx, gw, gb, <the same 13 ints>): optional buffers may be None. */
static int conv2d_parse_common(const char *fn, PyObject *const *args, Py_ssize_t nargs,
                               conv_node *node, bufset *bs, int fwd)
{
    gc_conv p;
    Py_ssize_t nx, ncol, o, act = -1;
    const int nb = fwd ? 4 : 6;
    const int epi = fwd && nargs == nb + 15; /* + res, act */
    if ((!epi && check_nargs(fn, nargs, nb + 13) < 0) ||
        conv_geometry(fn, args + nb, &p, &nx, &ncol) < 0 ||
        get_min(fn, "o", args[nb + 12], 0, &o) < 0)
        return -1;
    if (epi && get_ssize(fn, "act", args[nb + 14], &act) < 0)
        return -1;
    if (act != -1 && act != GC_UNARY_RELU) {
        PyErr_Format(PyExc_ValueError, "%s: 'act' must be -1 (none) or UNARY_RELU (%d); got %zd",
                     fn, (int)GC_UNARY_RELU, act);
        return -1;
    }
    static const char *fwd_names[] = {"x", "w", "bias", "out", "res"};
    static const char *bwd_names[] = {"x", "w", "g", "gx", "gw", "gb"};
    const char **names = fwd ? fwd_names : bwd_names;
    /* writable outputs: out (fwd), gx, gw, gb (bwd); optional: bias (fwd), gx, gw, gb (bwd) */
    Py_buffer *v[6] = {NULL};
    int ok = 1;
    const Py_ssize_t ck = smul(p.c, smul(p.kh, p.kw, &ok), &ok);
    const Py_ssize_t ny = smul(smul(p.n, o, &ok), smul(p.oh, p.ow, &ok), &ok);
    const Py_ssize_t nw = smul(o, ck, &ok);
    if (!ok)
        return overflow_error(fn, "the output or weight size");
    const Py_ssize_t need[6] = {nx, nw, fwd ? o : ny, fwd ? ny : nx, fwd ? ny : nw, o};
    char kd = 0;
    const int packed = fwd && gc_is_packed(args[1]); /* checked once x gave the format */
    const int nbuf = epi ? 5 : nb; /* the forward's res: args[nb + 13] */
    for (int i = 0; i < nbuf; i++) {
        const int writable = fwd ? i == 3 : i >= 3;
        const int optional = fwd ? i == 2 || i == 4 : i >= 3;
        PyObject *arg = fwd && i == 4 ? args[nb + 13] : args[i];
        if ((optional && arg == Py_None) || (packed && i == 1))
            continue;
        v[i] = get_buf(bs, fn, names[i], arg, writable);
        if (!v[i])
            return -1;
        if (!kd) {
            kd = float_kind(fn, names[i], v[i]);
            if (!kd)
                return -1;
        }
        if (need_kind(fn, names[i], v[i], kd) < 0 || need_contig(fn, names[i], v[i]) < 0)
            return -1;
#define WHAT                                                                                      \
    "n=%zd, c=%zd, h=%zd, w=%zd, o=%zd, kernel %zdx%zd, stride %zdx%zd, padding %zdx%zd, "          \
    "dilation %zdx%zd -> oh=%zd, ow=%zd",                                                          \
        p.n, p.c, p.h, p.w, o, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw, p.oh, p.ow
        if (need_elems(fn, names[i], v[i], need[i], WHAT) < 0)
            return -1;
#undef WHAT
    }
    const gc_packed *pw = NULL;
    if (packed && !(pw = gc_packed_arg(bs, fn, "w", args[1], 0, o, ck, 0, kd)))
        return -1;
    if (pw && pw->swap == 2 && !gc_conv2d_winograd_fits(&p, o)) {
        PyErr_Format(PyExc_ValueError,
                     "%s: 'w' is a Winograd weight (gemm_pack swap=2), which needs a 3x3 kernel "
                     "with stride 1 and dilation 1; got kernel %zdx%zd, stride %zdx%zd, dilation "
                     "%zdx%zd: pack it with swap 0 or 1",
                     fn, p.kh, p.kw, p.sh, p.sw, p.dh, p.dw);
        return -1;
    }
    static const int fwd_out[5] = {0, 0, 0, 1, 0}, bwd_out[6] = {0, 0, 0, 1, 1, 1};
    if (need_outputs_apart(fn, nbuf, v, names, need, fwd ? fwd_out : bwd_out) < 0)
        return -1;
    *node = (conv_node){.p = p, .pw = pw, .o = o, .fwd = fwd, .relu = act >= 0, .kd = kd};
    for (int i = 0; i < nbuf; i++)
        node->ptr[i] = v[i] ? v[i]->buf : NULL;
    return 0;
}

static int conv2d_forward_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    return conv2d_parse_common("conv2d_forward", args, nargs, node, bs, 1);
}

static int conv2d_backward_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    return conv2d_parse_common("conv2d_backward", args, nargs, node, bs, 0);
}

/* -1 when the per-thread column buffers could not be allocated. */
static int conv2d_exec(const void *node)
{
    const conv_node *q = node;
    void *const *v = q->ptr;
    if (q->fwd) {
        if (q->kd == 'f')
            return gc_conv2d_forward_ex_f32(v[0], v[1], q->pw, v[2], v[4], q->relu, v[3], &q->p,
                                            q->o);
        return gc_conv2d_forward_ex_f64(v[0], v[1], q->pw, v[2], v[4], q->relu, v[3], &q->p,
                                        q->o);
    }
    if (q->kd == 'f')
        return gc_conv2d_backward_f32(v[0], v[1], v[2], v[3], v[4], v[5], &q->p, q->o);
    return gc_conv2d_backward_f64(v[0], v[1], v[2], v[3], v[4], v[5], &q->p, q->o);
}

GC_NODE_KIND(conv2d_forward, conv2d_forward_parse, conv2d_exec, conv_node, NULL);
GC_NODE_KIND(conv2d_backward, conv2d_backward_parse, conv2d_exec, conv_node, NULL);

GC_DOC(conv2d_forward,
             "conv2d_forward(x, w, bias, out, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o, "
             "res=None, act=-1, /)"
             "\n--\n\n"
             "out [n, o, oh, ow] = conv2d(x [n, c, h, w], w [o, c, kh, kw]) + bias [o] (None: no "
             "bias); groups = 1, zero padding.  The optional epilogue (both or neither given): "
             "+ res (out's shape, apart from out; None: none), then relu when act is UNARY_RELU "
             "(-1: none), fused into the kernels' tiles with the bits of the separate add and "
             "relu.  w may be a PackedMatrix of gemm_pack (side 'a', "
             "rows o, cols c*kh*kw, trans 0): the same bits; one packed with swap 2 (3x3, stride 1, "
             "dilation 1) runs the Winograd F(4x4, 3x3) path (conv_winograd.c), which float32 "
             "also takes where conv2d_winograd says so (slightly different bits).");

GC_NODE_BINDING(conv2d_forward)

GC_DOC(conv2d_backward,
             "conv2d_backward(x, w, g, gx, gw, gb, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o, /)"
             "\n--\n\n"
             "Gradients of conv2d_forward given g [n, o, oh, ow]: gx [n, c, h, w], gw [o, c, kh, "
             "kw], gb [o]; each may be None (not computed).  Sums are bitwise independent of the "
             "thread count.");

GC_NODE_BINDING(conv2d_backward)

GC_DOC(conv2d_direct,
       "conv2d_direct(n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o, /)\n--\n\n"
       "True when float32 conv2d_forward of this geometry runs the direct convolution "
       "(conv_direct.c: the image read in place by the micro-kernel, the weight packed as "
       "gemm_pack(w, 'a', o, c*kh*kw, 0, 1)), False when it runs im2col + GEMM.  The rule is "
       "documented in conv_direct.c; GPUCORE_CONV=im2col / direct forces a path.  Winograd "
       "(conv2d_winograd) comes first where it applies.");

PyObject *gc_py_conv2d_direct(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char fn[] = "conv2d_direct";
    gc_conv p;
    Py_ssize_t nx, ncol, o;
    if (check_nargs(fn, nargs, 13) < 0 || conv_geometry(fn, args, &p, &nx, &ncol) < 0 ||
        get_min(fn, "o", args[12], 0, &o) < 0)
        return NULL;
    return PyBool_FromLong(gc_conv2d_direct_use(&p, o));
}

GC_DOC(conv2d_direct_lanes,
       "conv2d_direct_lanes(n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o, /)\n--\n\n"
       "True when float32 conv2d_forward of this geometry runs the direct convolution through "
       "the pixels x channels tile (conv_direct_lanes.c: output channels along the vector lanes, "
       "7 pixels along an output row; the weight packed as conv2d_direct's, the same bits).  The "
       "rule is documented in conv_direct_lanes.c; GPUCORE_CONV=direct_t forces it where the ISA "
       "has the tile (AVX-512) and the direct path runs.");

PyObject *gc_py_conv2d_direct_lanes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char fn[] = "conv2d_direct_lanes";
    gc_conv p;
    Py_ssize_t nx, ncol, o;
    if (check_nargs(fn, nargs, 13) < 0 || conv_geometry(fn, args, &p, &nx, &ncol) < 0 ||
        get_min(fn, "o", args[12], 0, &o) < 0)
        return NULL;
    return PyBool_FromLong(gc_conv2d_dlanes_use(&p, o));
}

GC_DOC(conv2d_c1,
       "conv2d_c1(n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o, /)\n--\n\n"
       "True when float32 conv2d_forward of this geometry (its weight unpacked) runs the few "
       "input channels direct path (conv_c1.c: output pixels along the vector lanes, every "
       "output channel's accumulators in registers; the same bits as the im2col GEMM).  The "
       "rule is documented in conv_c1.c; GPUCORE_CONV=direct_c1 forces it where it applies.");

PyObject *gc_py_conv2d_c1(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char fn[] = "conv2d_c1";
    gc_conv p;
    Py_ssize_t nx, ncol, o;
    if (check_nargs(fn, nargs, 13) < 0 || conv_geometry(fn, args, &p, &nx, &ncol) < 0 ||
        get_min(fn, "o", args[12], 0, &o) < 0)
        return NULL;
    return PyBool_FromLong(gc_conv2d_c1_use(&p, o));
}

GC_DOC(conv2d_relu_max_pool2d,
       "conv2d_relu_max_pool2d(x, w, bias, vals, idx, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, "
       "o, pkh, pkw, psh, psw, pph, ppw, pdh, pdw, poh, pow, /)\n--\n\n"
       "conv2d_forward with relu, then max_pool2d (kernel pkh x pkw, stride, padding, dilation, "
       "output poh x pow) over its n*o planes into vals and idx (int64, or None), in one pass "
       "where conv_c1.c's few-input-channels path applies (conv2d_c1; float32, w unpacked): "
       "each image's convolution output stays in the thread's cache, never written to memory; "
       "the bits of the two calls.  Returns False (nothing written) where the path does not "
       "apply, or with fewer images than threads or an image's output beyond half the L2 "
       "(it declines): the caller then makes the two calls.");

PyObject *gc_py_conv2d_relu_max_pool2d(PyObject *self, PyObject *const *args,
                                       Py_ssize_t nargs)
{
    (void)self;
    static const char fn[] = "conv2d_relu_max_pool2d";
    gc_conv p;
    gc_pool2d q;
    Py_ssize_t nx, ncol, o;
    if (check_nargs(fn, nargs, 28) < 0 || conv_geometry(fn, args + 5, &p, &nx, &ncol) < 0 ||
        get_min(fn, "o", args[17], 0, &o) < 0)
        return NULL;
    PyObject *const *g = args + 18;
    if (get_min(fn, "pkh", g[0], 1, &q.kh) < 0 || get_min(fn, "pkw", g[1], 1, &q.kw) < 0 ||
        get_min(fn, "psh", g[2], 1, &q.sh) < 0 || get_min(fn, "psw", g[3], 1, &q.sw) < 0 ||
        get_min(fn, "pph", g[4], 0, &q.ph) < 0 || get_min(fn, "ppw", g[5], 0, &q.pw) < 0 ||
        get_min(fn, "pdh", g[6], 1, &q.dh) < 0 || get_min(fn, "pdw", g[7], 1, &q.dw) < 0 ||
        get_min(fn, "poh", g[8], 1, &q.oh) < 0 || get_min(fn, "pow", g[9], 1, &q.ow) < 0)
        return NULL;
    q.planes = o;
    q.h = p.oh;
    q.w = p.ow;
    if (gc_is_packed(args[1]) || !gc_conv2d_c1_use(&p, o))
        Py_RETURN_FALSE;
    int ok = 1;
    const Py_ssize_t nw = smul(o, smul(p.c, smul(p.kh, p.kw, &ok), &ok), &ok);
    const Py_ssize_t nv = smul(smul(p.n, o, &ok), smul(q.oh, q.ow, &ok), &ok);
    if (!ok) {
        overflow_error(fn, "the weight or pooled size");
        return NULL;
    }
    static const char *names[] = {"x", "w", "bias", "vals", "idx"};
    const Py_ssize_t need[5] = {nx, nw, o, nv, nv};
    bufset bs = {.n = 0};
    Py_buffer *v[5];
    if (get_bufs(&bs, fn, args, 5, names, "rrRwW", v) < 0)
        goto fail;
    const char kd = need_float_contig(fn, 5, v, names, "====q");
    if (!kd)
        goto fail;
    if (kd != 'f') { /* float64: the two calls */
        bufs_release(&bs);
        Py_RETURN_FALSE;
    }
    for (int i = 0; i < 5; i++)
        if (v[i] && need_elems(fn, names[i], v[i], need[i], "n=%zd, o=%zd, oh=%zd, ow=%zd, "
                               "pooled %zdx%zd", p.n, o, p.oh, p.ow, q.oh, q.ow) < 0)
            goto fail;
    static const int out[5] = {0, 0, 0, 1, 1};
    if (need_outputs_apart(fn, 5, v, names, need, out) < 0)
        goto fail;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = gc_conv2d_c1_pool_f32(v[0]->buf, v[1]->buf, v[2] ? v[2]->buf : NULL, 1, v[3]->buf,
                               v[4] ? v[4]->buf : NULL, &p, o, &q);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    if (rc < 0)
        return PyErr_NoMemory();
    return PyBool_FromLong(rc == 0);
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(conv2d_pointwise,
       "conv2d_pointwise(n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o, /)\n--\n\n"
       "1 when float32 conv2d_forward of this geometry runs the pointwise path (conv_pw.c: "
       "a 1x1 convolution without padding, any stride, as a GEMM whose tiles are output "
       "channels x pixels with the epilogue in registers; the weight packed as gemm_pack(w, "
       "'a', o, c, 0, 0), the same bits as the GEMM path), 2 when it runs that path's pixels x "
       "channels tiles (images of few pixels; the weight packed gemm_pack(w, 'a', o, c, 0, 1)), "
       "else 0.  The rule is documented in "
       "conv_pw.c; GPUCORE_CONV=im2col / direct force it off, pointwise on (every 1x1 geometry "
       "without padding), pointwise_t its pixels x channels tiles (where the ISA has them, "
       "at most 256 pixels).");

PyObject *gc_py_conv2d_pointwise(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char fn[] = "conv2d_pointwise";
    gc_conv p;
    Py_ssize_t nx, ncol, o;
    if (check_nargs(fn, nargs, 13) < 0 || conv_geometry(fn, args, &p, &nx, &ncol) < 0 ||
        get_min(fn, "o", args[12], 0, &o) < 0)
        return NULL;
    return PyLong_FromLong(gc_conv2d_pw_use(&p, o));
}

GC_DOC(conv2d_winograd,
       "conv2d_winograd(n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o, /)\n--\n\n"
       "True when float32 conv2d_forward of this geometry runs Winograd F(4x4, 3x3) "
       "(conv_winograd.c; before the direct and im2col paths): with the weight transformed per "
       "call, or once by gemm_pack(w, 'a', o, c*9, 0, 2) (what the compiled executor packs when "
       "this says True; the same bits).  The rule, of the geometry alone, is documented in "
       "conv_winograd.c; GPUCORE_CONV=winograd forces it for every 3x3 stride-1 dilation-1 "
       "geometry, im2col / direct force it off.");

PyObject *gc_py_conv2d_winograd(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char fn[] = "conv2d_winograd";
    gc_conv p;
    Py_ssize_t nx, ncol, o;
    if (check_nargs(fn, nargs, 13) < 0 || conv_geometry(fn, args, &p, &nx, &ncol) < 0 ||
        get_min(fn, "o", args[12], 0, &o) < 0)
        return NULL;
    return PyBool_FromLong(gc_conv2d_winograd_use(&p, o));
}

/* libgpucore: the checks of a deployed model's int8 nodes (see model.h; the float kinds are in
 * nodes.c): quantize_u8, dequantize_u8, qgemm, qconv2d, max_pool2d_u8 of static quantization
 * (gpucore/runtime/ir/quantized.py lowers to them), and quantize_linear_u8 and qgemm / qconv2d's
 * int32 bias of imported ONNX int8 models (ONNX Runtime's QuantizeLinear and quantized bias),
 * dynamic_quantize_u8 and qgemm_dynamic of their dynamic quantization (DynamicQuantizeLinear,
 * MatMulInteger with its zero point read at run time, MatMulIntegerToFloat).
 *
 * Each is checked as its Python binding (cpu/python/qgemm.c) checks its arguments: formats,
 * contiguity, sizes against every buffer's elements, outputs in the arena and apart from their
 * inputs, scales finite and > 0 in float32, zero points in their types' ranges, and the
 * per-column factors of the requantizing epilogue finite and > 0.  The scales and biases must be
 * constants, so that those factors are checked once, here.  The int8 weights are stored plainly
 * (GC_ARG_QPACKED: the constant qgemm_pack read) and packed here for the ISA in use, as
 * GC_ARG_PACKED's float operands are.  Anything else is GC_ERR_FORMAT (gc_rd_corrupt). */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */

#include "isa.h"
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "<kind>: <what>" as the corrupt-program message; -1 (visibly negative: every output of a
 * check is set whenever it returns 0). */
static int bad(gc_rd *r, const char *kind, const char *what)
{
    char msg[256];
    snprintf(msg, sizeof msg, "%s: %s", kind, what);
    gc_rd_corrupt(r, msg);
    return -1;
}

/* Argument i: a C-contiguous buffer of one of dtypes[0..nd) (GC_DTYPE_*), into *out. */
static int qbuf(gc_rd *r, gc_mnode *nd, int i, const char *kind, const char *name,
                const int *dtypes, int ndt, gc_marg **out)
{
    char what[120];
    gc_marg *a = &nd->a[i];
    int ok = a->tag == GC_ARG_BUF && a->contig;
    int dt_ok = 0;
    for (int k = 0; ok && k < ndt; k++)
        dt_ok |= a->dtype == dtypes[k];
    if (!ok || !dt_ok) {
        int len = snprintf(what, sizeof what, "'%s' must be a contiguous buffer of ", name);
        for (int k = 0; k < ndt && len > 0 && (size_t)len < sizeof what; k++)
            len += snprintf(what + len, sizeof what - (size_t)len, "%s%s", k ? " or " : "",
                            gc_dtype_name(dtypes[k]));
        return bad(r, kind, what);
    }
    *out = a;
    return 0;
}

static int qint(gc_rd *r, gc_mnode *nd, int i, const char *kind, const char *name, int64_t lo,
                int64_t hi, int64_t *v)
{
    char what[120];
    if (nd->a[i].tag != GC_ARG_INT || nd->a[i].i < lo || nd->a[i].i > hi) {
        snprintf(what, sizeof what, "'%s' must be an integer in [%lld, %lld]", name,
                 (long long)lo, (long long)hi);
        return bad(r, kind, what);
    }
    *v = nd->a[i].i;
    return 0;
}

/* A scale: a number (float or int, as get_double reads both) finite and > 0 as float32. */
static int qscale(gc_rd *r, gc_mnode *nd, int i, const char *kind, const char *name, float *v)
{
    const gc_marg *a = &nd->a[i];
    char what[120];
    *v = a->tag == GC_ARG_FLOAT ? (float)a->f : a->tag == GC_ARG_INT ? (float)a->i : NAN;
    if (!(isfinite(*v) && *v > 0.0f)) {
        snprintf(what, sizeof what, "'%s' must be finite and > 0 (as float32)", name);
        return bad(r, kind, what);
    }
    return 0;
}

static int need(gc_rd *r, const char *kind, const char *name, const gc_marg *a, int64_t n)
{
    char what[120];
    if (a->numel >= n)
        return 0;
    snprintf(what, sizeof what, "'%s' holds %lld elements but %lld are needed", name,
             (long long)a->numel, (long long)n);
    return bad(r, kind, what);
}

/* out is written: it lies in the arena and shares no byte with input `in` (need_no_overlap). */
static int out_apart(gc_rd *r, const char *kind, const char *oname, const gc_marg *out,
                     const char *iname, const gc_marg *in)
{
    char what[120];
    if (out->region >= 0) {
        snprintf(what, sizeof what, "'%s' writes a constant", oname);
        return bad(r, kind, what);
    }
    if (in && in->region == out->region && in->lo < out->hi && out->lo < in->hi) {
        snprintf(what, sizeof what, "'%s' overlaps '%s'", oname, iname);
        return bad(r, kind, what);
    }
    return 0;
}

/* The 12 geometry integers n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw from argument i on
 * (conv_geometry's rules): the dilated window no larger than the padded input; oh, ow set;
 * *nx = n*c*h*w. */
static int qgeometry(gc_rd *r, gc_mnode *nd, int i, const char *kind, gc_conv *c, int64_t *nx)
{
    static const char *const names[12] = {"n", "c", "h", "w", "kh", "kw",
                                           "sh", "sw", "ph", "pw", "dh", "dw"};
    static const int64_t lo[12] = {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1};
    int64_t g[12], t;
    for (int k = 0; k < 12; k++)
        if (qint(r, nd, i + k, kind, names[k], lo[k], 1 << 24, &g[k]) < 0)
            return -1;
    *c = (gc_conv){g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8], g[9], g[10], g[11], 0, 0};
    if (c->h + 2 * c->ph < c->dh * (c->kh - 1) + 1 || c->w + 2 * c->pw < c->dw * (c->kw - 1) + 1)
        return bad(r, kind, "the dilated kernel is larger than the padded input");
    c->oh = (c->h + 2 * c->ph - c->dh * (c->kh - 1) - 1) / c->sh + 1;
    c->ow = (c->w + 2 * c->pw - c->dw * (c->kw - 1) - 1) / c->sw + 1;
    if (gc_mulok(c->n, c->c, &t) < 0 || gc_mulok(t, c->h * c->w, nx) < 0)
        return bad(r, kind, "n * c * h * w overflows");
    return 0;
}

/* quantize_u8 / quantize_linear_u8(x, out, n, scale, zero_point) / dequantize_u8(q, out, n,
 * scale, zero_point). */
static int check_qcast(gc_rd *r, gc_mnode *nd)
{
    const int to_q = nd->kind != GC_NK_DEQUANTIZE_U8;
    const char *kind = nd->kind == GC_NK_QUANTIZE_U8          ? "quantize_u8"
                       : nd->kind == GC_NK_QUANTIZE_LINEAR_U8 ? "quantize_linear_u8"
                                                               : "dequantize_u8";
    const char *in_name = to_q ? "x" : "q";
    const int f32 = GC_DTYPE_FLOAT32, u8 = GC_DTYPE_UINT8;
    gc_marg *x = NULL, *out = NULL;
    int64_t n = 0, zp = 0;
    if (nd->nargs != 5)
        return bad(r, kind, "wrong argument count");
    if (qbuf(r, nd, 0, kind, in_name, to_q ? &f32 : &u8, 1, &x) < 0 ||
        qbuf(r, nd, 1, kind, "out", to_q ? &u8 : &f32, 1, &out) < 0 ||
        qint(r, nd, 2, kind, "n", 0, GC_LIM, &n) < 0 ||
        qscale(r, nd, 3, kind, "scale", &nd->q.a_scale) < 0 ||
        qint(r, nd, 4, kind, "zero_point", 0, 255, &zp) < 0 || need(r, kind, in_name, x, n) < 0 ||
        need(r, kind, "out", out, n) < 0 ||
        out_apart(r, kind, "out", out, in_name, n > 0 ? x : NULL) < 0)
        return -1;
    nd->q.a_zp = (int32_t)zp;
    nd->empty = n == 0;
    return 0;
}

/* max_pool2d_u8(x, out, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw): padding at most half the
 * kernel. */
static int check_qpool(gc_rd *r, gc_mnode *nd)
{
    const char *kind = "max_pool2d_u8";
    const int u8 = GC_DTYPE_UINT8;
    gc_marg *x = NULL, *out = NULL;
    int64_t nx = 0, no = 0, t = 0;
    gc_conv c;
    if (nd->nargs != 14)
        return bad(r, kind, "wrong argument count");
    if (qgeometry(r, nd, 2, kind, &c, &nx) < 0)
        return -1;
    if (2 * c.ph > c.kh || 2 * c.pw > c.kw)
        return bad(r, kind, "padding must be at most half the kernel");
    if (gc_mulok(c.n, c.c, &t) < 0 || gc_mulok(t, c.oh * c.ow, &no) < 0)
        return bad(r, kind, "n * c * oh * ow overflows");
    if (qbuf(r, nd, 0, kind, "x", &u8, 1, &x) < 0 || qbuf(r, nd, 1, kind, "out", &u8, 1, &out) < 0 ||
        need(r, kind, "x", x, nx) < 0 || need(r, kind, "out", out, no) < 0 ||
        out_apart(r, kind, "out", out, "x", no > 0 ? x : NULL) < 0)
        return -1;
    nd->cv = c;
    nd->empty = no == 0;
    return 0;
}

/* The epilogue arguments e = i, i+1, ...: a_scale, a_zero_point, w_scales, bias, relu, out_scale,
 * out_zero_point into nd->q (its mode and a_signed set), for n output columns (q_epilogue).  The
 * bias is float32 (q->bias) or int32 (q->ibias: ONNX's quantized bias, added to the int32 sums;
 * any value is valid, as for the binding's q_bias). */
static int check_epilogue(gc_rd *r, const gc_model *m, gc_mnode *nd, int i, int64_t n,
                          const char *kind)
{
    gc_qargs *q = &nd->q;
    int64_t relu = 0, zp = 0;
    if (qint(r, nd, i + 4, kind, "relu", 0, 1, &relu) < 0 ||
        qint(r, nd, i + 1, kind, "a_zero_point", q->a_signed ? -128 : 0, q->a_signed ? 127 : 255,
             &zp) < 0)
        return -1;
    q->relu = (int)relu;
    q->a_zp = (int32_t)zp;
    if (q->mode == GC_QOUT_I32) {
        if (q->relu || nd->a[i + 3].tag != GC_ARG_NONE)
            return bad(r, kind, "an int32 'out' takes no bias and relu=0");
        return 0;
    }
    const int requant = q->mode != GC_QOUT_F32, f32 = GC_DTYPE_FLOAT32;
    static const int bias_dts[2] = {GC_DTYPE_FLOAT32, GC_DTYPE_INT32};
    gc_marg *ws = NULL, *bias = NULL;
    if (qscale(r, nd, i, kind, "a_scale", &q->a_scale) < 0 ||
        qbuf(r, nd, i + 2, kind, "w_scales", &f32, 1, &ws) < 0 ||
        need(r, kind, "w_scales", ws, n) < 0 ||
        (nd->a[i + 3].tag != GC_ARG_NONE &&
         (qbuf(r, nd, i + 3, kind, "bias", bias_dts, 2, &bias) < 0 ||
          need(r, kind, "bias", bias, n) < 0)))
        return -1;
    if (ws->region < 0 || (bias && bias->region < 0))
        return bad(r, kind, "'w_scales' and 'bias' must be constants");
    if (requant &&
        (qscale(r, nd, i + 5, kind, "out_scale", &q->out_scale) < 0 ||
         qint(r, nd, i + 6, kind, "out_zero_point", q->mode == GC_QOUT_U8 ? 0 : -128,
              q->mode == GC_QOUT_U8 ? 255 : 127, &zp) < 0))
        return -1;
    q->out_zp = requant ? (int32_t)zp : 0;
    q->w_scale = (const float *)((const char *)m->consts[ws->region] + ws->off);
    if (bias) {
        const void *b = (const char *)m->consts[bias->region] + bias->off;
        if (bias->dtype == GC_DTYPE_INT32)
            q->ibias = b;
        else
            q->bias = b;
    }
    /* the kernel's per-column factors finite and > 0, the bias terms finite (as the binding) */
    for (int64_t j = 0; j < n; j++) {
        const float s = q->a_scale * q->w_scale[j], f = requant ? s / q->out_scale : s;
        const float b = q->bias ? (requant ? q->bias[j] / q->out_scale : q->bias[j]) : 0.0f;
        if (!(isfinite(f) && f > 0.0f && isfinite(b))) {
            char what[160];
            snprintf(what, sizeof what, "column %lld: w_scales[j] (%g) * a_scale%s must be "
                     "finite and > 0 and bias[j]%s finite in float32", (long long)j,
                     (double)q->w_scale[j], requant ? " / out_scale" : "",
                     requant ? " / out_scale" : "");
            return bad(r, kind, what);
        }
    }
    return 0;
}

/* The output mode of out's dtype (q_out_mode). */
static int out_mode(gc_rd *r, gc_mnode *nd, int i, const char *kind, gc_marg **out)
{
    static const int dts[4] = {GC_DTYPE_INT32, GC_DTYPE_FLOAT32, GC_DTYPE_UINT8, GC_DTYPE_INT8};
    if (qbuf(r, nd, i, kind, "out", dts, 4, out) < 0)
        return -1;
    const int dt = (*out)->dtype;
    nd->q.mode = dt == GC_DTYPE_INT32     ? GC_QOUT_I32
                 : dt == GC_DTYPE_FLOAT32 ? GC_QOUT_F32
                 : dt == GC_DTYPE_UINT8   ? GC_QOUT_U8
                                          : GC_QOUT_S8;
    return 0;
}

static int qpacked_arg(gc_rd *r, gc_mnode *nd, int i, const char *kind)
{
    if (nd->a[i].tag != GC_ARG_QPACKED)
        return bad(r, kind, "'packed' must be packed int8 weights");
    return 0;
}

/* qgemm(a, packed, out, m, a_scale, a_zero_point, w_scales, bias, relu, out_scale,
 * out_zero_point). */
static int check_qgemm(gc_rd *r, const gc_model *m, gc_mnode *nd)
{
    const char *kind = "qgemm";
    static const int a_dts[2] = {GC_DTYPE_UINT8, GC_DTYPE_INT8};
    gc_marg *a = NULL, *out = NULL;
    int64_t rows = 0, na, no;
    memset(&nd->q, 0, sizeof nd->q);
    if (nd->nargs != 11)
        return bad(r, kind, "wrong argument count");
    if (qpacked_arg(r, nd, 1, kind) < 0 || qint(r, nd, 3, kind, "m", 0, GC_LIM, &rows) < 0 ||
        qbuf(r, nd, 0, kind, "a", a_dts, 2, &a) < 0 || out_mode(r, nd, 2, kind, &out) < 0)
        return -1;
    const gc_marg *B = &nd->a[1];
    nd->q.a_signed = a->dtype == GC_DTYPE_INT8;
    if (gc_mulok(rows, B->rows, &na) < 0 || gc_mulok(rows, B->cols, &no) < 0)
        return bad(r, kind, "m * k or m * n overflows");
    if (need(r, kind, "a", a, na) < 0 || need(r, kind, "out", out, no) < 0 ||
        out_apart(r, kind, "out", out, "a", a) < 0 ||
        check_epilogue(r, m, nd, 4, B->cols, kind) < 0)
        return -1;
    nd->empty = no == 0;
    return 0;
}

/* qconv2d(x, packed, out, work, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, a_scale,
 * a_zero_point, w_scales, bias, relu, out_scale, out_zero_point). */
static int check_qconv(gc_rd *r, const gc_model *m, gc_mnode *nd)
{
    const char *kind = "qconv2d";
    const int u8 = GC_DTYPE_UINT8;
    gc_marg *x = NULL, *out = NULL, *work = NULL;
    gc_conv c;
    int64_t nx = 0, k = 0, mm = 0, no = 0, rows_b = 0, t_b = 0, pad = 0, nw = 0, t = 0;
    memset(&nd->q, 0, sizeof nd->q);
    if (nd->nargs != 23)
        return bad(r, kind, "wrong argument count");
    if (qgeometry(r, nd, 4, kind, &c, &nx) < 0 || qpacked_arg(r, nd, 1, kind) < 0)
        return -1;
    const gc_marg *B = &nd->a[1];
    const int64_t o = B->cols;
    if (gc_mulok(c.c, c.kh * c.kw, &k) < 0 || B->rows != k || !B->trans)
        return bad(r, kind, "'packed' does not hold the weight [o, c, kh, kw] (k = c*kh*kw, "
                            "trans = 1)");
    if (qbuf(r, nd, 0, kind, "x", &u8, 1, &x) < 0 || out_mode(r, nd, 2, kind, &out) < 0 ||
        qbuf(r, nd, 3, kind, "work", &u8, 1, &work) < 0)
        return -1;
    const int64_t esz = nd->q.mode == GC_QOUT_I32 || nd->q.mode == GC_QOUT_F32 ? 4 : 1;
    /* gc_qconv2d_work_bytes, overflow-checked (q_work_need) */
    if (gc_mulok(c.n, c.oh * c.ow, &mm) < 0 || gc_mulok(mm, o, &no) < 0 ||
        gc_mulok(mm, k, &rows_b) < 0 || gc_mulok(no, esz, &t_b) < 0 ||
        gc_mulok(c.n * c.c, (c.h + 2 * c.ph) * (c.w + 2 * c.pw), &pad) < 0 ||
        (t = (rows_b + 8 + 63) / 64 * 64 + (t_b + 63) / 64 * 64) > GC_LIM - pad - 8)
        return bad(r, kind, "sizes overflow");
    nw = t + pad + 8;
    if (need(r, kind, "x", x, nx) < 0 || need(r, kind, "out", out, no) < 0 ||
        need(r, kind, "work", work, nw) < 0 || out_apart(r, kind, "out", out, "x", x) < 0 ||
        out_apart(r, kind, "work", work, "x", x) < 0 ||
        out_apart(r, kind, "work", work, "out", out) < 0 ||
        check_epilogue(r, m, nd, 16, o, kind) < 0)
        return -1;
    nd->cv = c;
    nd->empty = mm == 0 || o == 0;
    return 0;
}

/* Argument i: NONE (*out = NULL) when allowed, else a buffer as qbuf takes it. */
static int qbuf_opt(gc_rd *r, gc_mnode *nd, int i, const char *kind, const char *name, int dtype,
                    gc_marg **out)
{
    *out = NULL;
    return nd->a[i].tag == GC_ARG_NONE ? 0 : qbuf(r, nd, i, kind, name, &dtype, 1, out);
}

/* dynamic_quantize_u8 / dynamic_quantize_torch_u8(x, y, scale, zero_point, n): y, scale,
 * zero_point each NONE or written (n, 1, 1 values), apart from x and from each other. */
static int check_dynq(gc_rd *r, gc_mnode *nd)
{
    const char *kind = nd->kind == GC_NK_DYNAMIC_QUANTIZE_U8 ? "dynamic_quantize_u8"
                                                             : "dynamic_quantize_torch_u8";
    static const char *const names[4] = {"x", "y", "scale", "zero_point"};
    const int f32 = GC_DTYPE_FLOAT32, u8 = GC_DTYPE_UINT8;
    gc_marg *v[4] = {NULL, NULL, NULL, NULL};
    int64_t n = 0;
    if (nd->nargs != 5)
        return bad(r, kind, "wrong argument count");
    if (qint(r, nd, 4, kind, "n", 0, GC_LIM, &n) < 0 ||
        qbuf(r, nd, 0, kind, "x", &f32, 1, &v[0]) < 0 ||
        qbuf_opt(r, nd, 1, kind, "y", u8, &v[1]) < 0 ||
        qbuf_opt(r, nd, 2, kind, "scale", f32, &v[2]) < 0 ||
        qbuf_opt(r, nd, 3, kind, "zero_point", u8, &v[3]) < 0 || need(r, kind, "x", v[0], n) < 0)
        return -1;
    const int64_t want[4] = {n, n, 1, 1};
    for (int i = 1; i < 4; i++) {
        if (!v[i])
            continue;
        if (need(r, kind, names[i], v[i], want[i]) < 0)
            return -1;
        for (int j = 0; j < 4; j++)
            if (j != i && v[j] && want[j] > 0 &&
                out_apart(r, kind, names[i], v[i], names[j], want[i] > 0 ? v[j] : NULL) < 0)
                return -1;
    }
    nd->empty = 0; /* (n = 0 still writes the scale and zero point) */
    return 0;
}

/* qgemm_dynamic(a, packed, out, m, a_scale, a_zero_point, w_scales, bias, relu): the scale and
 * zero point are read when the node runs, so any buffers serve (the kernel takes any value). */
static int check_qgemm_dynamic(gc_rd *r, gc_mnode *nd)
{
    const char *kind = "qgemm_dynamic";
    static const int out_dts[2] = {GC_DTYPE_INT32, GC_DTYPE_FLOAT32};
    const int u8 = GC_DTYPE_UINT8, f32 = GC_DTYPE_FLOAT32;
    gc_marg *a = NULL, *out = NULL, *zp = NULL, *sc = NULL, *ws = NULL, *bias = NULL;
    int64_t rows = 0, na, no, relu = 0;
    memset(&nd->q, 0, sizeof nd->q);
    if (nd->nargs != 9)
        return bad(r, kind, "wrong argument count");
    if (qpacked_arg(r, nd, 1, kind) < 0 || qint(r, nd, 3, kind, "m", 0, GC_LIM, &rows) < 0 ||
        qint(r, nd, 8, kind, "relu", 0, 1, &relu) < 0 ||
        qbuf(r, nd, 0, kind, "a", &u8, 1, &a) < 0 ||
        qbuf(r, nd, 2, kind, "out", out_dts, 2, &out) < 0 ||
        qbuf(r, nd, 5, kind, "a_zero_point", &u8, 1, &zp) < 0 ||
        need(r, kind, "a_zero_point", zp, 1) < 0)
        return -1;
    const gc_marg *B = &nd->a[1];
    nd->q.mode = out->dtype == GC_DTYPE_INT32 ? GC_QOUT_I32 : GC_QOUT_F32;
    nd->q.relu = (int)relu;
    if (gc_mulok(rows, B->rows, &na) < 0 || gc_mulok(rows, B->cols, &no) < 0)
        return bad(r, kind, "m * k or m * n overflows");
    if (need(r, kind, "a", a, na) < 0 || need(r, kind, "out", out, no) < 0 ||
        out_apart(r, kind, "out", out, "a", a) < 0 ||
        out_apart(r, kind, "out", out, "a_zero_point", zp) < 0)
        return -1;
    if (nd->q.mode == GC_QOUT_I32) {
        if (relu || nd->a[4].tag != GC_ARG_NONE || nd->a[6].tag != GC_ARG_NONE ||
            nd->a[7].tag != GC_ARG_NONE)
            return bad(r, kind, "an int32 'out' takes no a_scale, w_scales or bias and relu=0");
    } else if (qbuf(r, nd, 4, kind, "a_scale", &f32, 1, &sc) < 0 ||
               need(r, kind, "a_scale", sc, 1) < 0 ||
               qbuf(r, nd, 6, kind, "w_scales", &f32, 1, &ws) < 0 ||
               need(r, kind, "w_scales", ws, B->cols) < 0 ||
               qbuf_opt(r, nd, 7, kind, "bias", f32, &bias) < 0 ||
               (bias && need(r, kind, "bias", bias, B->cols) < 0) ||
               out_apart(r, kind, "out", out, "a_scale", sc) < 0 ||
               out_apart(r, kind, "out", out, "w_scales", ws) < 0 ||
               (bias && out_apart(r, kind, "out", out, "bias", bias) < 0))
        return -1;
    nd->empty = no == 0;
    return 0;
}

/* Packs the node's int8 weights (as qgemm_pack does, for the ISA in use) into nd->qp. */
static int pack_qnode(gc_rd *r, const gc_model *m, gc_mnode *nd)
{
    if (nd->kind != GC_NK_QGEMM && nd->kind != GC_NK_QCONV2D &&
        nd->kind != GC_NK_QGEMM_DYNAMIC)
        return 0;
    const gc_marg *a = &nd->a[1];
    gc_qpacked *p = calloc(1, sizeof *p);
    if (!p)
        return gc_fail(r->err, GC_ERR_OUT_OF_MEMORY, "gc_model_load: out of memory");
    nd->qp = p; /* (freed with the model, also when a later check fails) */
    if (gc_qgemm_pack_init(p, a->rows, a->cols, a->trans) < 0)
        return bad(r, "qgemm_pack", "the packed size overflows");
    void *mem = NULL;
    if (posix_memalign(&mem, 64, p->bytes > 0 ? (size_t)p->bytes : 64) != 0)
        return gc_fail(r->err, GC_ERR_OUT_OF_MEMORY,
                       "gc_model_load: out of memory for packed int8 weights");
    p->data = mem;
    gc_qgemm_pack((const int8_t *)((const char *)m->consts[a->region] + a->off), p);
    return 0;
}

int gc_qnode_check(gc_rd *r, const gc_model *m, gc_mnode *nd)
{
    int ok;
    switch (nd->kind) {
    case GC_NK_QUANTIZE_U8:
    case GC_NK_QUANTIZE_LINEAR_U8:
    case GC_NK_DEQUANTIZE_U8: ok = check_qcast(r, nd); break;
    case GC_NK_QGEMM: ok = check_qgemm(r, m, nd); break;
    case GC_NK_QCONV2D: ok = check_qconv(r, m, nd); break;
    case GC_NK_MAX_POOL2D_U8: ok = check_qpool(r, nd); break;
    case GC_NK_DYNAMIC_QUANTIZE_U8:
    case GC_NK_DYNAMIC_QUANTIZE_TORCH_U8: ok = check_dynq(r, nd); break;
    case GC_NK_QGEMM_DYNAMIC: ok = check_qgemm_dynamic(r, nd); break;
    default: return gc_rd_corrupt(r, "unknown node kind");
    }
    return ok == 0 ? pack_qnode(r, m, nd) : ok;
}

/* Bindings of qgemm.c, qconv.c and qdynamic.c: qgemm_pack and its result type QPackedMatrix; the
 * node kinds (nodes.h) qgemm, qconv2d, quantize_u8, quantize_linear_u8, dequantize_u8,
 * max_pool2d_u8, and dynamic quantization: dynamic_quantize_u8 (ONNX's), dynamic_quantize_torch_u8
 * (PyTorch's), qgemm_dynamic. */
#include "args.h"
#include "bindings.h"
#include "isa.h"
#include "nodes.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

typedef struct {
    PyObject_HEAD
    gc_qpacked p; /* p.data: this object's own memory (posix_memalign, freed with it) */
} QPackedMatrix;

static void qpacked_dealloc(QPackedMatrix *self)
{
    free(self->p.data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *qpacked_repr(QPackedMatrix *self)
{
    const gc_qpacked *p = &self->p;
    return PyUnicode_FromFormat("<gpucore._cpu.QPackedMatrix k=%zd n=%zd trans=%d isa=%s panels "
                                "of %d, kc=%zd%s>",
                                p->k, p->n, p->trans, gc_isa_names[p->isa], p->nr, p->kc,
                                p->full ? ", holds -128" : "");
}

#define GETTER(name, expr)                                                                        \
    static PyObject *qpacked_get_##name(QPackedMatrix *self, void *closure)                       \
    {                                                                                             \
        (void)closure;                                                                            \
        const gc_qpacked *p = &self->p;                                                           \
        (void)p;                                                                                  \
        return expr;                                                                              \
    }
GETTER(k, PyLong_FromSsize_t(p->k))
GETTER(n, PyLong_FromSsize_t(p->n))
GETTER(trans, PyLong_FromLong(p->trans))
GETTER(isa, PyUnicode_FromString(gc_isa_names[p->isa]))
GETTER(kernel, PyUnicode_FromString(gc_isa.q_name))
GETTER(width, PyLong_FromLong(p->nr))
GETTER(kc, PyLong_FromSsize_t(p->kc))
GETTER(nbytes, PyLong_FromSsize_t(p->bytes))
GETTER(full_range, PyBool_FromLong(p->full))
#undef GETTER

#define G(name, doc) {#name, (getter)qpacked_get_##name, NULL, doc, NULL}
static PyGetSetDef qpacked_getset[] = {
    G(k, "rows of B (the reduction length)"),
    G(n, "columns of B (output features)"),
    G(trans, "1: packed from w stored n x k (nn.Linear's weight), 0: from k x n"),
    G(isa, "the instruction set it was packed for (the one in use)"),
    G(kernel, "the micro-kernel that reads it"),
    G(width, "panel width (the micro-kernel's NR)"),
    G(kc, "K block of the panels"),
    G(nbytes, "bytes held: the panels and the int32 column sums"),
    G(full_range, "some weight is -128 (AVX2 then runs its slower exact kernel)"),
    {NULL, NULL, NULL, NULL, NULL},
};
#undef G

static PyTypeObject QPackedMatrixType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpucore._cpu.QPackedMatrix",
    .tp_basicsize = sizeof(QPackedMatrix),
    .tp_dealloc = (destructor)qpacked_dealloc,
    .tp_repr = (reprfunc)qpacked_repr,
    .tp_getset = qpacked_getset,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Int8 weights packed once by qgemm_pack in the layout the int8 micro-kernel reads, "
              "with their column sums; qgemm takes it.  Opaque and immutable.",
};

/* v must be C-contiguous of one of the single-letter formats in kinds (b int8, B uint8, i int32,
 * f float32); returns the letter, or 0 with TypeError / ValueError set. */
static char q_kind(const char *fn, const char *name, const Py_buffer *v, const char *kinds,
                   const char *want)
{
    const char c = fmt_code(v);
    const Py_ssize_t size = c == 'i' || c == 'f' ? 4 : 1;
    if (!c || !strchr(kinds, c) || v->itemsize != size) {
        PyErr_Format(PyExc_TypeError, "%s: '%s' must be %s, got format '%s' with item size %zd",
                     fn, name, want, fmt_str(v), v->itemsize);
        return 0;
    }
    return need_contig(fn, name, v) < 0 ? 0 : c;
}

GC_DOC(qgemm_pack,
       "qgemm_pack(w, k, n, trans, /) -> QPackedMatrix\n--\n\n"
       "Packs int8 weights B (k x n) once for qgemm: w is C-contiguous int8 holding >= k*n "
       "elements, stored n x k when trans = 1 (nn.Linear's weight: out = a @ w.T) or k x n when "
       "trans = 0.  The column sums (for the activations' zero point) are computed here.  "
       "0 <= k <= 65536.  The result is for the instruction set in use.");

PyObject *gc_py_qgemm_pack(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char fn[] = "qgemm_pack";
    Py_ssize_t k, n;
    int trans;
    if (check_nargs(fn, nargs, 4) < 0 || get_min(fn, "k", args[1], 0, &k) < 0 ||
        get_min(fn, "n", args[2], 0, &n) < 0 || get_flag(fn, "trans", args[3], &trans) < 0)
        return NULL;
    if (k > GC_QGEMM_MAX_K) {
        PyErr_Format(PyExc_ValueError, "%s: k = %zd exceeds %d (the int32 sums would overflow)",
                     fn, k, GC_QGEMM_MAX_K);
        return NULL;
    }
    if (!(QPackedMatrixType.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&QPackedMatrixType) < 0)
        return NULL;
    bufset bs = {.n = 0};
    PyObject *res = NULL;
    Py_buffer *v = get_buf(&bs, fn, "w", args[0], 0);
    if (!v || !q_kind(fn, "w", v, "b", "int8 ('b')"))
        goto done;
    int ok = 1;
    const Py_ssize_t need = smul(k, n, &ok);
    if (!ok) {
        overflow_error(fn, "k * n");
        goto done;
    }
    if (need_elems(fn, "w", v, need, "k=%zd, n=%zd", k, n) < 0)
        goto done;
    gc_qpacked p;
    if (gc_qgemm_pack_init(&p, k, n, trans) < 0) {
        overflow_error(fn, "the packed size");
        goto done;
    }
    void *mem;
    if (posix_memalign(&mem, 64, p.bytes ? (size_t)p.bytes : 64) != 0) {
        PyErr_Format(PyExc_MemoryError, "%s: cannot allocate %zd bytes of packed panels", fn,
                     p.bytes);
        goto done;
    }
    p.data = (int8_t *)mem;
    QPackedMatrix *pm = PyObject_New(QPackedMatrix, &QPackedMatrixType);
    if (!pm) {
        free(mem);
        goto done;
    }
    pm->p = p;
    const int8_t *w = (const int8_t *)v->buf;
    Py_BEGIN_ALLOW_THREADS
    gc_qgemm_pack(w, &pm->p);
    Py_END_ALLOW_THREADS
    res = (PyObject *)pm;
done:
    bufs_release(&bs);
    return res;
}

GC_DOC(qgemm,
       "qgemm(a, packed, out, m, a_scale, a_zero_point, w_scales, bias, relu, out_scale, "
       "out_zero_point, /)\n--\n\n"
       "Int8 GEMM: c[i, j] = sum_p (a[i, p] - a_zero_point) * B[p, j] (exact, int32) for a "
       "(m x k, C-contiguous uint8 or int8) and B = packed (qgemm_pack), written to out "
       "(m x n, C-contiguous) by its format:\n"
       "  int32: c (the scales, bias and out_* are ignored; relu must be 0);\n"
       "  float32: v = float32(c) * s[j] + bias[j], s = float32(a_scale) * w_scales[j] (float32 "
       "products), relu: max(v, 0);\n"
       "  uint8 / int8: clip(rint(float32(c) * (s[j] / out_scale) + bias[j] / out_scale) + "
       "out_zero_point) (round half to even; relu clips at out_zero_point).\n"
       "Every float operation is rounded on its own (no FMA): the same bits on every ISA.  "
       "w_scales: float32, n values > 0 (None for int32 out); bias: None or n finite float32 "
       "values, or n int32 values added to c first (ONNX's quantized bias: v = float32(c + "
       "bias[j]) * ...); scales finite and > 0; zero points in their types' ranges.");

/* A float argument that must be finite and > 0 (as float32 too). */
static int q_scale(const char *fn, const char *name, PyObject *o, float *out)
{
    double v;
    if (get_double(fn, name, o, &v) < 0)
        return -1;
    *out = (float)v;
    if (!(isfinite(*out) && *out > 0.0f)) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be finite and > 0 (as float32), got %R",
                     fn, name, o);
        return -1;
    }
    return 0;
}

static int q_int_in(const char *fn, const char *name, PyObject *o, int lo, int hi, int32_t *out)
{
    Py_ssize_t v;
    if (get_ssize(fn, name, o, &v) < 0)
        return -1;
    if (v < lo || v > hi) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be in [%d, %d], got %zd", fn, name, lo, hi,
                     v);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

/* float32 buffer of at least n values, C-contiguous, apart from out. */
static const float *q_vec(bufset *bs, const char *fn, const char *name, PyObject *o,
                          Py_ssize_t n, const Py_buffer *out)
{
    Py_buffer *v = get_buf(bs, fn, name, o, 0);
    if (!v || !q_kind(fn, name, v, "f", "float32 ('f')") ||
        need_elems(fn, name, v, n, "n=%zd", n) < 0 || need_no_overlap(fn, "out", out, name, v, 0))
        return NULL;
    return (const float *)v->buf;
}

/* The bias: float32 (q->bias) or int32 (q->ibias, ONNX's quantized bias), n values,
 * C-contiguous, apart from out. */
static int q_bias(bufset *bs, const char *fn, PyObject *o, Py_ssize_t n, const Py_buffer *out,
                  gc_qargs *q)
{
    Py_buffer *v = get_buf(bs, fn, "bias", o, 0);
    char k;
    if (!v || !(k = q_kind(fn, "bias", v, "fi", "float32 ('f') or int32 ('i')")) ||
        need_elems(fn, "bias", v, n, "n=%zd", n) < 0 ||
        need_no_overlap(fn, "out", out, "bias", v, 0))
        return -1;
    if (k == 'f')
        q->bias = (const float *)v->buf;
    else
        q->ibias = (const int32_t *)v->buf;
    return 0;
}

/* The QPackedMatrix argument, packed for the ISA in use; a reference to it is held in bs (with
 * the call's buffers: a Program keeps it for its life). */
static const gc_qpacked *q_packed_arg(bufset *bs, const char *fn, PyObject *obj)
{
    if (!(QPackedMatrixType.tp_flags & Py_TPFLAGS_READY) ||
        !PyObject_TypeCheck(obj, &QPackedMatrixType)) {
        PyErr_Format(PyExc_TypeError, "%s: 'packed' must be a QPackedMatrix (qgemm_pack), got "
                     "%.100s", fn, Py_TYPE(obj)->tp_name);
        return NULL;
    }
    const gc_qpacked *B = &((QPackedMatrix *)obj)->p;
    if (B->isa != gc_isa.isa || B->nr != gc_isa.q_nr || B->ku != gc_isa.q_ku) {
        PyErr_Format(PyExc_ValueError, "%s: 'packed' was packed for ISA %s (panels of %d), this "
                     "process runs %s (%d)", fn, gc_isa_names[B->isa], B->nr, gc_isa.name,
                     gc_isa.q_nr);
        return NULL;
    }
    if (bs->n >= GC_MAXBUF) {
        PyErr_Format(PyExc_SystemError, "%s: too many buffers", fn);
        return NULL;
    }
    if (PyBuffer_FillInfo(&bs->v[bs->n], obj, B->data, 0, 1, PyBUF_SIMPLE) < 0)
        return NULL;
    bs->n++;
    return B;
}

/* The output format of out ('i', 'f', 'B', 'b') as a GC_QOUT_* mode, or -1. */
static int q_out_mode(const char *fn, const Py_buffer *vo)
{
    const char ko =
        q_kind(fn, "out", vo, "ifBb", "int32 ('i'), float32 ('f'), uint8 ('B') or int8 ('b')");
    if (!ko)
        return -1;
    return ko == 'i' ? GC_QOUT_I32 : ko == 'f' ? GC_QOUT_F32 : ko == 'B' ? GC_QOUT_U8 : GC_QOUT_S8;
}

/* The epilogue arguments e[0..7) = a_scale, a_zero_point, w_scales, bias, relu, out_scale,
 * out_zero_point into q (whose mode and a_signed are set), for n output columns. */
static int q_epilogue(const char *fn, bufset *bs, PyObject *const *e, Py_ssize_t n,
                      const Py_buffer *vo, gc_qargs *q)
{
    if (get_flag(fn, "relu", e[4], &q->relu) < 0 ||
        q_int_in(fn, "a_zero_point", e[1], q->a_signed ? -128 : 0, q->a_signed ? 127 : 255,
                 &q->a_zp) < 0)
        return -1;
    if (q->mode == GC_QOUT_I32) {
        if (q->relu || e[3] != Py_None) {
            PyErr_Format(PyExc_ValueError, "%s: an int32 'out' takes no bias and relu=0", fn);
            return -1;
        }
        return 0;
    }
    const int requant = q->mode != GC_QOUT_F32;
    if (q_scale(fn, "a_scale", e[0], &q->a_scale) < 0 ||
        !(q->w_scale = q_vec(bs, fn, "w_scales", e[2], n, vo)) ||
        (e[3] != Py_None && q_bias(bs, fn, e[3], n, vo, q) < 0))
        return -1;
    if (requant && (q_scale(fn, "out_scale", e[5], &q->out_scale) < 0 ||
                    q_int_in(fn, "out_zero_point", e[6], q->mode == GC_QOUT_U8 ? 0 : -128,
                             q->mode == GC_QOUT_U8 ? 255 : 127, &q->out_zp) < 0))
        return -1;
    /* the kernel's per-column factors must be finite and > 0, the bias terms finite: then no
     * output can be NaN and every ISA's min / max agree */
    for (Py_ssize_t j = 0; j < n; j++) {
        const float s = q->a_scale * q->w_scale[j], f = requant ? s / q->out_scale : s;
        const float b = q->bias ? (requant ? q->bias[j] / q->out_scale : q->bias[j]) : 0.0f;
        if (!(isfinite(f) && f > 0.0f && isfinite(b))) {
            char got[32];
            PyErr_Format(PyExc_ValueError,
                         "%s: column %zd: w_scales[j] (%s) times a_scale%s must be finite and "
                         "> 0 and bias[j]%s finite in float32",
                         fn, j, repr_double(got, sizeof got, (double)q->w_scale[j]),
                         requant ? " / out_scale" : "", requant ? " / out_scale" : "");
            return -1;
        }
    }
    return 0;
}

typedef struct {
    const uint8_t *a;
    const gc_qpacked *B;
    void *out;
    Py_ssize_t m;
    gc_qargs q;
} qgemm_node;

static int qgemm_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    static const char fn[] = "qgemm";
    if (check_nargs(fn, nargs, 11) < 0)
        return -1;
    const gc_qpacked *B = q_packed_arg(bs, fn, args[1]);
    Py_ssize_t m;
    if (!B || get_min(fn, "m", args[3], 0, &m) < 0)
        return -1;
    gc_qargs q = {.relu = 0};
    Py_buffer *va = get_buf(bs, fn, "a", args[0], 0);
    Py_buffer *vo = va ? get_buf(bs, fn, "out", args[2], 1) : NULL;
    char ka;
    if (!vo || !(ka = q_kind(fn, "a", va, "Bb", "uint8 ('B') or int8 ('b')")) ||
        (q.mode = q_out_mode(fn, vo)) < 0)
        return -1;
    q.a_signed = ka == 'b';
    int ok = 1;
    const Py_ssize_t na = smul(m, B->k, &ok), no = smul(m, B->n, &ok);
    if (!ok)
        return overflow_error(fn, "m * k or m * n");
    if (need_elems(fn, "a", va, na, "m=%zd, k=%zd", m, B->k) < 0 ||
        need_elems(fn, "out", vo, no, "m=%zd, n=%zd", m, B->n) < 0 ||
        need_no_overlap(fn, "out", vo, "a", va, 0) < 0 ||
        q_epilogue(fn, bs, args + 4, B->n, vo, &q) < 0)
        return -1;
    *(qgemm_node *)node = (qgemm_node){.a = va->buf, .B = B, .out = vo->buf, .m = m, .q = q};
    return 0;
}

static int qgemm_exec(const void *node)
{
    const qgemm_node *s = node;
    return gc_qgemm(s->a, s->m, s->B->k, s->B, s->out, s->B->n, &s->q);
}

GC_NODE_KIND(qgemm, qgemm_parse, qgemm_exec, qgemm_node, NULL);
GC_NODE_BINDING(qgemm)

/* ------------------------------------------------------------------------------------------ */
/* qconv2d                                                                                     */

GC_DOC(qconv2d,
       "qconv2d(x, packed, out, work, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, a_scale, "
       "a_zero_point, w_scales, bias, relu, out_scale, out_zero_point, /)\n--\n\n"
       "Int8 convolution (groups = 1): x [n, c, h, w] uint8 (C-contiguous) with the weights "
       "[o, c, kh, kw] packed by qgemm_pack(w, c*kh*kw, o, 1), into out [n, o, oh, ow] (its "
       "format picks the output form, as qgemm's).  The padding reads as a_zero_point (the "
       "quantized 0.0).  Computed as im2col rows of uint8 in work (a uint8 buffer of at least "
       "qconv2d_work_bytes(...) bytes) + qgemm + a transpose to NCHW, so the values are qgemm's "
       "bit for bit.");

typedef struct {
    const uint8_t *x;
    const gc_qpacked *B;
    void *out;
    uint8_t *work;
    gc_conv p;
    gc_qargs q;
} qconv2d_node;

/* bytes of work for geometry p, o output channels and output items of esz bytes, overflow-checked
 * (gc_qconv2d_work_bytes's sum) */
static int q_work_need(const char *fn, const gc_conv *p, Py_ssize_t o, int esz, Py_ssize_t *need)
{
    int ok = 1;
    const Py_ssize_t m = smul(smul(p->n, p->oh, &ok), p->ow, &ok);
    const Py_ssize_t k = smul(p->c, smul(p->kh, p->kw, &ok), &ok);
    const Py_ssize_t rows = sadd(smul(m, k, &ok), 8 + 63, &ok) / 64 * 64;
    const Py_ssize_t t = sadd(smul(smul(m, o, &ok), esz, &ok), 63, &ok) / 64 * 64;
    const Py_ssize_t hp = sadd(p->h, smul(2, p->ph, &ok), &ok);
    const Py_ssize_t wp = sadd(p->w, smul(2, p->pw, &ok), &ok);
    const Py_ssize_t pad = smul(smul(p->n, p->c, &ok), smul(hp, wp, &ok), &ok);
    *need = sadd(sadd(rows, t, &ok), sadd(pad, 8, &ok), &ok); /* = gc_qconv2d_work_bytes */
    if (!ok)
        return overflow_error(fn, "the work buffer's size");
    return 0;
}

static int qconv2d_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    static const char fn[] = "qconv2d";
    gc_conv p;
    Py_ssize_t nx, ncol;
    if (check_nargs(fn, nargs, 23) < 0 || conv_geometry(fn, args + 4, &p, &nx, &ncol) < 0)
        return -1;
    const gc_qpacked *B = q_packed_arg(bs, fn, args[1]);
    if (!B)
        return -1;
    const Py_ssize_t k = p.c * p.kh * p.kw; /* <= ncol: no overflow */
    if (B->k != k || !B->trans) {
        PyErr_Format(PyExc_ValueError,
                     "%s: 'packed' holds %zd x %zd weights (trans=%d); c*kh*kw = %zd needs "
                     "qgemm_pack(w, %zd, o, 1) of the weight [o, c, kh, kw]", fn, B->k, B->n,
                     B->trans, k, k);
        return -1;
    }
    static const char *const names[3] = {"x", "out", "work"};
    Py_buffer *v[3];
    if (get_bufs(bs, fn, args, 1, names, "r", v) < 0 ||
        get_bufs(bs, fn, args + 2, 2, names + 1, "ww", v + 1) < 0)
        return -1;
    Py_buffer *vx = v[0], *vo = v[1], *vw = v[2];
    gc_qargs q = {.relu = 0};
    if (!q_kind(fn, "x", vx, "B", "uint8 ('B')") || (q.mode = q_out_mode(fn, vo)) < 0 ||
        !q_kind(fn, "work", vw, "B", "uint8 ('B')"))
        return -1;
    const int esz = q.mode == GC_QOUT_I32 || q.mode == GC_QOUT_F32 ? 4 : 1;
    int ok = 1;
    const Py_ssize_t no = smul(smul(smul(p.n, B->n, &ok), p.oh, &ok), p.ow, &ok);
    Py_ssize_t nw;
    if (!ok)
        return overflow_error(fn, "n * o * oh * ow");
    if (q_work_need(fn, &p, B->n, esz, &nw) < 0)
        return -1;
#define WHAT "n=%zd, c=%zd, h=%zd, w=%zd, o=%zd -> oh=%zd, ow=%zd", p.n, p.c, p.h, p.w, B->n, p.oh, p.ow
    if (need_elems(fn, "x", vx, nx, WHAT) < 0 || need_elems(fn, "out", vo, no, WHAT) < 0 ||
        need_elems(fn, "work", vw, nw, WHAT) < 0)
        return -1;
#undef WHAT
    if (need_no_overlap(fn, "out", vo, "x", vx, 0) < 0 ||
        need_no_overlap(fn, "work", vw, "x", vx, 0) < 0 ||
        need_no_overlap(fn, "work", vw, "out", vo, 0) < 0 ||
        q_epilogue(fn, bs, args + 16, B->n, vo, &q) < 0)
        return -1;
    *(qconv2d_node *)node =
        (qconv2d_node){.x = vx->buf, .B = B, .out = vo->buf, .work = vw->buf, .p = p, .q = q};
    return 0;
}

static int qconv2d_exec(const void *node)
{
    const qconv2d_node *s = node;
    return gc_qconv2d(s->x, s->B, s->out, s->work, &s->p, &s->q);
}

GC_NODE_KIND(qconv2d, qconv2d_parse, qconv2d_exec, qconv2d_node, NULL);
GC_NODE_BINDING(qconv2d)

GC_DOC(qconv2d_work_bytes,
       "qconv2d_work_bytes(n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, o, out_itemsize, /)\n"
       "--\n\nBytes of qconv2d's work buffer for this geometry, o output channels and an output "
       "of out_itemsize (1 or 4) bytes per element.");

PyObject *gc_py_qconv2d_work_bytes(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char fn[] = "qconv2d_work_bytes";
    gc_conv p;
    Py_ssize_t nx, ncol, o, esz, need;
    if (check_nargs(fn, nargs, 14) < 0 || conv_geometry(fn, args, &p, &nx, &ncol) < 0 ||
        get_min(fn, "o", args[12], 0, &o) < 0 || get_min(fn, "out_itemsize", args[13], 1, &esz) < 0)
        return NULL;
    if (esz != 1 && esz != 4) {
        PyErr_Format(PyExc_ValueError, "%s: 'out_itemsize' must be 1 or 4, got %zd", fn, esz);
        return NULL;
    }
    if (q_work_need(fn, &p, o, (int)esz, &need) < 0)
        return NULL;
    return PyLong_FromSsize_t(need);
}

/* ------------------------------------------------------------------------------------------ */
/* quantize_u8, dequantize_u8                                                                  */

GC_DOC(quantize_u8,
       "quantize_u8(x, out, n, scale, zero_point, /)\n--\n\n"
       "out[i] = clamp(rint(x[i] * (1 / scale) + zero_point), 0, 255) for n float32 values "
       "(each operation rounded to float32, as quantize_per_tensor; NaN -> 255).  x float32, "
       "out uint8, both C-contiguous; scale finite > 0, zero_point in [0, 255].");

GC_DOC(quantize_linear_u8,
       "quantize_linear_u8(x, out, n, scale, zero_point, /)\n--\n\n"
       "ONNX QuantizeLinear to uint8: out[i] = clamp(round_half_even(x[i] / scale) + "
       "zero_point, 0, 255) for n float32 values (a float32 division, as ONNX Runtime; NaN -> "
       "0).  x float32, out uint8, both C-contiguous; scale finite > 0, zero_point in [0, 255].");

GC_DOC(dequantize_u8,
       "dequantize_u8(q, out, n, scale, zero_point, /)\n--\n\n"
       "out[i] = (q[i] - zero_point) * scale in float32 for n uint8 values (as dequantize).");

typedef struct {
    const void *in;
    void *out;
    Py_ssize_t n;
    float scale;
    int32_t zp;
    int to_q;
} qcast_node;

static int qcast_parse_common(const char *fn, PyObject *const *args, Py_ssize_t nargs,
                              qcast_node *node, bufset *bs, int to_q)
{
    Py_ssize_t n;
    float scale;
    int32_t zp;
    static const char *const qn[2] = {"x", "out"}, *const dn[2] = {"q", "out"};
    const char *const *names = to_q ? qn : dn;
    Py_buffer *v[2];
    if (check_nargs(fn, nargs, 5) < 0 || get_min(fn, "n", args[2], 0, &n) < 0 ||
        q_scale(fn, "scale", args[3], &scale) < 0 ||
        q_int_in(fn, "zero_point", args[4], 0, 255, &zp) < 0 ||
        get_bufs(bs, fn, args, 2, names, "rw", v) < 0)
        return -1;
    if (!q_kind(fn, names[0], v[0], to_q ? "f" : "B", to_q ? "float32 ('f')" : "uint8 ('B')") ||
        !q_kind(fn, "out", v[1], to_q ? "B" : "f", to_q ? "uint8 ('B')" : "float32 ('f')") ||
        need_elems(fn, names[0], v[0], n, "n=%zd", n) < 0 ||
        need_elems(fn, "out", v[1], n, "n=%zd", n) < 0 ||
        (n > 0 && need_no_overlap(fn, "out", v[1], names[0], v[0], 0) < 0))
        return -1;
    *node = (qcast_node){.in = v[0]->buf, .out = v[1]->buf, .n = n, .scale = scale, .zp = zp,
                         .to_q = to_q};
    return 0;
}

static int quantize_u8_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    return qcast_parse_common("quantize_u8", args, nargs, node, bs, 1);
}

static int quantize_linear_u8_parse(PyObject *const *args, Py_ssize_t nargs, void *node,
                                    bufset *bs)
{
    int rc = qcast_parse_common("quantize_linear_u8", args, nargs, node, bs, 1);
    ((qcast_node *)node)->to_q = 2;
    return rc;
}

static int dequantize_u8_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    return qcast_parse_common("dequantize_u8", args, nargs, node, bs, 0);
}

static int qcast_exec(const void *node)
{
    const qcast_node *s = node;
    if (s->to_q == 2)
        gc_quantize_linear_u8(s->in, s->out, s->n, s->scale, s->zp);
    else if (s->to_q)
        gc_quantize_u8(s->in, s->out, s->n, s->scale, s->zp);
    else
        gc_dequantize_u8(s->in, s->out, s->n, s->scale, s->zp);
    return 0;
}

GC_NODE_KIND(quantize_u8, quantize_u8_parse, qcast_exec, qcast_node, NULL);
GC_NODE_KIND(dequantize_u8, dequantize_u8_parse, qcast_exec, qcast_node, NULL);
GC_NODE_KIND(quantize_linear_u8, quantize_linear_u8_parse, qcast_exec, qcast_node, NULL);
GC_NODE_BINDING(quantize_u8)
GC_NODE_BINDING(quantize_linear_u8)
GC_NODE_BINDING(dequantize_u8)

/* ------------------------------------------------------------------------------------------ */
/* max_pool2d_u8                                                                               */

GC_DOC(max_pool2d_u8,
       "max_pool2d_u8(x, out, n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, /)\n--\n\n"
       "Max pooling of uint8 x [n, c, h, w] into out [n, c, oh, ow] (C-contiguous; the padding "
       "never wins: max commutes with quantization, so this is max_pool2d of the dequantized "
       "values, quantized again with the same parameters).  pad <= kernel / 2, as PyTorch.");

typedef struct {
    const uint8_t *x;
    uint8_t *out;
    gc_conv p;
} qpool_node;

static int max_pool2d_u8_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    static const char fn[] = "max_pool2d_u8";
    static const char *const names[2] = {"x", "out"};
    gc_conv p;
    Py_ssize_t nx, ncol;
    Py_buffer *v[2];
    if (check_nargs(fn, nargs, 14) < 0 || conv_geometry(fn, args + 2, &p, &nx, &ncol) < 0)
        return -1;
    if (2 * p.ph > p.kh || 2 * p.pw > p.kw) {
        PyErr_Format(PyExc_ValueError, "%s: padding %zdx%zd must be at most half the kernel "
                     "%zdx%zd", fn, p.ph, p.pw, p.kh, p.kw);
        return -1;
    }
    if (get_bufs(bs, fn, args, 2, names, "rw", v) < 0 ||
        !q_kind(fn, "x", v[0], "B", "uint8 ('B')") || !q_kind(fn, "out", v[1], "B", "uint8 ('B')"))
        return -1;
    int ok = 1;
    const Py_ssize_t no = smul(smul(p.n, p.c, &ok), smul(p.oh, p.ow, &ok), &ok);
    if (!ok)
        return overflow_error(fn, "n * c * oh * ow");
    if (need_elems(fn, "x", v[0], nx, "n=%zd, c=%zd, h=%zd, w=%zd", p.n, p.c, p.h, p.w) < 0 ||
        need_elems(fn, "out", v[1], no, "oh=%zd, ow=%zd", p.oh, p.ow) < 0 ||
        (no > 0 && need_no_overlap(fn, "out", v[1], "x", v[0], 0) < 0))
        return -1;
    *(qpool_node *)node = (qpool_node){.x = v[0]->buf, .out = v[1]->buf, .p = p};
    return 0;
}

static int max_pool2d_u8_exec(const void *node)
{
    const qpool_node *s = node;
    gc_max_pool2d_u8(s->x, s->out, &s->p);
    return 0;
}

GC_NODE_KIND(max_pool2d_u8, max_pool2d_u8_parse, max_pool2d_u8_exec, qpool_node, NULL);
GC_NODE_BINDING(max_pool2d_u8)

/* ------------------------------------------------------------------------------------------ */
/* dynamic_quantize_u8, qgemm_dynamic: ONNX's dynamic quantization (qdynamic.c)                */

GC_DOC(dynamic_quantize_u8,
       "dynamic_quantize_u8(x, y, scale, zero_point, n, /)\n--\n\n"
       "ONNX DynamicQuantizeLinear of n float32 values x (onnx.reference's float32 arithmetic): "
       "the range [lo, hi] of x with 0 in it, scale = (hi - lo) / 255 (1/255 when hi == lo, "
       "also for n = 0), zero_point = round_half_even(clamp(-lo / scale, 0, 255)), y = "
       "clamp(round_half_even(x / scale) + zero_point, 0, 255) (quantize_linear_u8's formula).  "
       "A NaN in x gives scale NaN, zero_point 255 and y all 0.  Writes y (uint8, n values), "
       "scale (float32, its first value) and zero_point (uint8, its first value); each may be "
       "None (not written).  All C-contiguous; the outputs apart from x and each other.");

typedef struct {
    const float *x;
    uint8_t *y, *zp;
    float *scale;
    Py_ssize_t n;
} dynq_node;

/* The arguments of both dynamic quantizations (fn: the binding's name, for the messages). */
static int dynq_parse(const char *fn, PyObject *const *args, Py_ssize_t nargs, void *node,
                      bufset *bs)
{
    static const char *const names[4] = {"x", "y", "scale", "zero_point"};
    Py_buffer *v[4];
    Py_ssize_t n;
    if (check_nargs(fn, nargs, 5) < 0 || get_min(fn, "n", args[4], 0, &n) < 0 ||
        get_bufs(bs, fn, args, 4, names, "rWWW", v) < 0)
        return -1;
    static const char *const kinds[4] = {"f", "B", "f", "B"};
    static const char *const want[4] = {"float32 ('f')", "uint8 ('B')", "float32 ('f')",
                                        "uint8 ('B')"};
    const Py_ssize_t need[4] = {n, n, 1, 1};
    const int out[4] = {0, 1, 1, 1};
    for (int i = 0; i < 4; i++)
        if (v[i] && (!q_kind(fn, names[i], v[i], kinds[i], want[i]) ||
                     need_elems(fn, names[i], v[i], need[i], "n=%zd", n) < 0))
            return -1;
    if (need_outputs_apart(fn, 4, v, names, need, out) < 0)
        return -1;
    *(dynq_node *)node = (dynq_node){.x = v[0]->buf, .y = v[1] ? v[1]->buf : NULL,
                                     .scale = v[2] ? v[2]->buf : NULL,
                                     .zp = v[3] ? v[3]->buf : NULL, .n = n};
    return 0;
}

static int dynamic_quantize_u8_parse(PyObject *const *args, Py_ssize_t nargs, void *node,
                                     bufset *bs)
{
    return dynq_parse("dynamic_quantize_u8", args, nargs, node, bs);
}

static int dynamic_quantize_u8_exec(const void *node)
{
    const dynq_node *s = node;
    gc_dynamic_quantize_u8(s->x, s->n, s->y, s->scale, s->zp);
    return 0;
}

GC_NODE_KIND(dynamic_quantize_u8, dynamic_quantize_u8_parse, dynamic_quantize_u8_exec, dynq_node,
             NULL);
GC_NODE_BINDING(dynamic_quantize_u8)

GC_DOC(dynamic_quantize_torch_u8,
       "dynamic_quantize_torch_u8(x, y, scale, zero_point, n, /)\n--\n\n"
       "PyTorch's quantize_dynamic activation quantization of n float32 values x (float32 "
       "arithmetic): the range [lo, hi] of x with 0 in it, scale = max((hi - lo) / 255, "
       "FLT_EPSILON), zero_point = clamp(-round_half_even(lo / scale), 0, 255), y = "
       "quantize_u8's formula (x * (1 / scale) + zero_point, rounded half to even, saturated).  "
       "An inf or NaN in x, or a range hi - lo that overflows float32, gives scale NaN and "
       "zero_point 0 (y all 255).  Arguments as dynamic_quantize_u8's.");

static int dynamic_quantize_torch_u8_parse(PyObject *const *args, Py_ssize_t nargs, void *node,
                                           bufset *bs)
{
    return dynq_parse("dynamic_quantize_torch_u8", args, nargs, node, bs);
}

static int dynamic_quantize_torch_u8_exec(const void *node)
{
    const dynq_node *s = node;
    gc_dynamic_quantize_torch_u8(s->x, s->n, s->y, s->scale, s->zp);
    return 0;
}

GC_NODE_KIND(dynamic_quantize_torch_u8, dynamic_quantize_torch_u8_parse,
             dynamic_quantize_torch_u8_exec, dynq_node, NULL);
GC_NODE_BINDING(dynamic_quantize_torch_u8)

GC_DOC(qgemm_dynamic,
       "qgemm_dynamic(a, packed, out, m, a_scale, a_zero_point, w_scales, bias, relu, /)\n--\n\n"
       "qgemm with the activations' parameters read from buffers when it runs (what "
       "dynamic_quantize_u8 wrote): a_zero_point a uint8 buffer (its first value), a_scale a "
       "float32 buffer (its first value).  a uint8 (m x k), out by its format:\n"
       "  int32: c = sum_p (a[i, p] - a_zero_point) * B[p, j] (ONNX MatMulInteger; a_scale, "
       "w_scales and bias None, relu 0);\n"
       "  float32: float32(c) * (a_scale * w_scales[j]) + bias[j], relu: max(v, 0) (ONNX "
       "Runtime's MatMulIntegerToFloat: MatMulInteger -> Cast -> Mul [-> Add]).\n"
       "Each float operation rounded on its own, as qgemm; any scale value is taken as it is "
       "(a NaN or inf scale gives NaN / inf products, as the unfused ops).  w_scales and bias: "
       "n float32 values.");

typedef struct {
    const uint8_t *a, *zp;
    const float *scale;
    const gc_qpacked *B;
    void *out;
    Py_ssize_t m;
    gc_qargs q;
} qgemm_dyn_node;

static int qgemm_dynamic_parse(PyObject *const *args, Py_ssize_t nargs, void *node, bufset *bs)
{
    static const char fn[] = "qgemm_dynamic";
    if (check_nargs(fn, nargs, 9) < 0)
        return -1;
    const gc_qpacked *B = q_packed_arg(bs, fn, args[1]);
    Py_ssize_t m;
    gc_qargs q = {.relu = 0};
    if (!B || get_min(fn, "m", args[3], 0, &m) < 0 || get_flag(fn, "relu", args[8], &q.relu) < 0)
        return -1;
    Py_buffer *va = get_buf(bs, fn, "a", args[0], 0);
    Py_buffer *vo = va ? get_buf(bs, fn, "out", args[2], 1) : NULL;
    Py_buffer *vz = vo ? get_buf(bs, fn, "a_zero_point", args[5], 0) : NULL;
    if (!vz || !q_kind(fn, "a", va, "B", "uint8 ('B')") ||
        !q_kind(fn, "out", vo, "if", "int32 ('i') or float32 ('f')") ||
        !q_kind(fn, "a_zero_point", vz, "B", "uint8 ('B')") ||
        need_elems(fn, "a_zero_point", vz, 1, "one value") < 0)
        return -1;
    q.mode = q_out_mode(fn, vo);
    int ok = 1;
    const Py_ssize_t na = smul(m, B->k, &ok), no = smul(m, B->n, &ok);
    if (!ok)
        return overflow_error(fn, "m * k or m * n");
    if (need_elems(fn, "a", va, na, "m=%zd, k=%zd", m, B->k) < 0 ||
        need_elems(fn, "out", vo, no, "m=%zd, n=%zd", m, B->n) < 0 ||
        need_no_overlap(fn, "out", vo, "a", va, 0) < 0 ||
        need_no_overlap(fn, "out", vo, "a_zero_point", vz, 0) < 0)
        return -1;
    const float *scale = NULL;
    if (q.mode == GC_QOUT_I32) {
        if (q.relu || args[4] != Py_None || args[6] != Py_None || args[7] != Py_None) {
            PyErr_Format(PyExc_ValueError, "%s: an int32 'out' takes no a_scale, w_scales or "
                         "bias and relu=0", fn);
            return -1;
        }
    } else {
        if (!(scale = q_vec(bs, fn, "a_scale", args[4], 1, vo)) ||
            !(q.w_scale = q_vec(bs, fn, "w_scales", args[6], B->n, vo)) ||
            (args[7] != Py_None && !(q.bias = q_vec(bs, fn, "bias", args[7], B->n, vo))))
            return -1;
    }
    *(qgemm_dyn_node *)node = (qgemm_dyn_node){.a = va->buf, .zp = vz->buf, .scale = scale,
                                               .B = B, .out = vo->buf, .m = m, .q = q};
    return 0;
}

static int qgemm_dynamic_exec(const void *node)
{
    const qgemm_dyn_node *s = node;
    gc_qargs q = s->q;
    q.a_zp = *s->zp;
    q.a_scale = s->scale ? *s->scale : 1.0f;
    return gc_qgemm(s->a, s->m, s->B->k, s->B, s->out, s->B->n, &q);
}

GC_NODE_KIND(qgemm_dynamic, qgemm_dynamic_parse, qgemm_dynamic_exec, qgemm_dyn_node, NULL);
GC_NODE_BINDING(qgemm_dynamic)

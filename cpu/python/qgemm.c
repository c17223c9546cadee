/* Bindings of qgemm.c: qgemm_pack and its result type QPackedMatrix, and qgemm. */
#include "args.h"
#include "bindings.h"
#include "isa.h"

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
       "values; scales finite and > 0; zero points in their types' ranges.");

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

/* float32 buffer of exactly... at least n values, C-contiguous, apart from out. */
static const float *q_vec(bufset *bs, const char *fn, const char *name, PyObject *o,
                          Py_ssize_t n, const Py_buffer *out)
{
    Py_buffer *v = get_buf(bs, fn, name, o, 0);
    if (!v || !q_kind(fn, name, v, "f", "float32 ('f')") ||
        need_elems(fn, name, v, n, "n=%zd", n) < 0 || need_no_overlap(fn, "out", out, name, v, 0))
        return NULL;
    return (const float *)v->buf;
}

PyObject *gc_py_qgemm(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char fn[] = "qgemm";
    if (check_nargs(fn, nargs, 11) < 0)
        return NULL;
    if (!(QPackedMatrixType.tp_flags & Py_TPFLAGS_READY) ||
        !PyObject_TypeCheck(args[1], &QPackedMatrixType)) {
        PyErr_Format(PyExc_TypeError, "%s: 'packed' must be a QPackedMatrix (qgemm_pack), got "
                     "%.100s", fn, Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    const gc_qpacked *B = &((QPackedMatrix *)args[1])->p;
    if (B->isa != gc_isa.isa || B->nr != gc_isa.q_nr || B->ku != gc_isa.q_ku) {
        PyErr_Format(PyExc_ValueError, "%s: 'packed' was packed for ISA %s (panels of %d), this "
                     "process runs %s (%d)", fn, gc_isa_names[B->isa], B->nr, gc_isa.name,
                     gc_isa.q_nr);
        return NULL;
    }
    Py_ssize_t m;
    int relu;
    if (get_min(fn, "m", args[3], 0, &m) < 0 || get_flag(fn, "relu", args[8], &relu) < 0)
        return NULL;
    bufset bs = {.n = 0};
    PyObject *res = NULL;
    gc_qargs q = {.relu = relu};
    Py_buffer *va = get_buf(&bs, fn, "a", args[0], 0);
    Py_buffer *vo = va ? get_buf(&bs, fn, "out", args[2], 1) : NULL;
    char ka, ko;
    if (!vo || !(ka = q_kind(fn, "a", va, "Bb", "uint8 ('B') or int8 ('b')")) ||
        !(ko = q_kind(fn, "out", vo, "ifBb",
                      "int32 ('i'), float32 ('f'), uint8 ('B') or int8 ('b')")))
        goto done;
    q.a_signed = ka == 'b';
    q.mode = ko == 'i' ? GC_QOUT_I32 : ko == 'f' ? GC_QOUT_F32 : ko == 'B' ? GC_QOUT_U8
                                                                           : GC_QOUT_S8;
    int ok = 1;
    const Py_ssize_t na = smul(m, B->k, &ok), no = smul(m, B->n, &ok);
    if (!ok) {
        overflow_error(fn, "m * k or m * n");
        goto done;
    }
    if (need_elems(fn, "a", va, na, "m=%zd, k=%zd", m, B->k) < 0 ||
        need_elems(fn, "out", vo, no, "m=%zd, n=%zd", m, B->n) < 0 ||
        need_no_overlap(fn, "out", vo, "a", va, 0) < 0 ||
        q_int_in(fn, "a_zero_point", args[5], q.a_signed ? -128 : 0, q.a_signed ? 127 : 255,
                 &q.a_zp) < 0)
        goto done;
    if (q.mode == GC_QOUT_I32) {
        if (relu || args[7] != Py_None) {
            PyErr_Format(PyExc_ValueError, "%s: an int32 'out' takes no bias and relu=0", fn);
            goto done;
        }
    } else {
        const int requant = q.mode != GC_QOUT_F32;
        if (q_scale(fn, "a_scale", args[4], &q.a_scale) < 0 ||
            !(q.w_scale = q_vec(&bs, fn, "w_scales", args[6], B->n, vo)) ||
            (args[7] != Py_None && !(q.bias = q_vec(&bs, fn, "bias", args[7], B->n, vo))))
            goto done;
        if (requant && (q_scale(fn, "out_scale", args[9], &q.out_scale) < 0 ||
                        q_int_in(fn, "out_zero_point", args[10], q.mode == GC_QOUT_U8 ? 0 : -128,
                                 q.mode == GC_QOUT_U8 ? 255 : 127, &q.out_zp) < 0))
            goto done;
        /* the kernel's per-column factors must be finite and > 0, the bias terms finite: then no
         * output can be NaN and every ISA's min / max agree */
        for (Py_ssize_t j = 0; j < B->n; j++) {
            const float s = q.a_scale * q.w_scale[j], f = requant ? s / q.out_scale : s;
            const float b = q.bias ? (requant ? q.bias[j] / q.out_scale : q.bias[j]) : 0.0f;
            if (!(isfinite(f) && f > 0.0f && isfinite(b))) {
                PyErr_Format(PyExc_ValueError,
                             "%s: column %zd: w_scales[j] (%g) times a_scale%s must be finite and "
                             "> 0 and bias[j]%s finite in float32", fn, j, (double)q.w_scale[j],
                             requant ? " / out_scale" : "", requant ? " / out_scale" : "");
                goto done;
            }
        }
    }
    const uint8_t *a = (const uint8_t *)va->buf;
    void *out = vo->buf;
    int rc;
    Py_INCREF(args[1]);
    Py_BEGIN_ALLOW_THREADS
    rc = gc_qgemm(a, m, B->k, B, out, B->n, &q);
    Py_END_ALLOW_THREADS
    Py_DECREF(args[1]);
    if (rc < 0) {
        PyErr_Format(PyExc_MemoryError, "%s: cannot allocate scratch memory", fn);
        goto done;
    }
    res = Py_NewRef(Py_None);
done:
    bufs_release(&bs);
    return res;
}

/* Bindings of pack.c: gemm_pack and its result type PackedMatrix, and the argument helper that
 * lets gemm, gemm_ex and conv2d_forward take a PackedMatrix in place of an array. */
#include "args.h"
#include "bindings.h"
#include "isa.h"

#include <limits.h>
#include <stddef.h>
#include <stdlib.h>

typedef struct {
    PyObject_HEAD
    gc_packed p; /* p.data: this object's own block of the caching allocator (block bytes) */
    size_t block;
    PyObject *weakrefs;
    Py_buffer raw; /* swap 2 from a read-only x: x itself, held (p.raw = raw.buf) */
    int has_raw;
} PackedMatrix;

static void packed_dealloc(PackedMatrix *self)
{
    if (self->weakrefs)
        PyObject_ClearWeakRefs((PyObject *)self);
    if (self->p.data)
        gc_host_block_release(self->p.data, self->block);
    if (self->has_raw)
        PyBuffer_Release(&self->raw);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Memory for `bytes` of panels, 64-byte aligned, from the caching host allocator (host_cache.c):
 * packing writes every byte of fresh memory once, and faulting it in cost about as much as the
 * packing itself (ResNet-18's weights at load, even on 2 MiB pages, which the allocator's large
 * blocks are marked for); a model loaded again (a reload, a second session) gets the blocks the
 * last one freed, already mapped. */
static void *packed_alloc(size_t bytes, size_t *block)
{
    return gc_host_block_acquire(bytes ? bytes : 64, block);
}

static const char *side_name(int side)
{
    return side == 0 ? "a" : "b";
}

static PyObject *packed_repr(PackedMatrix *self)
{
    const gc_packed *p = &self->p;
    return PyUnicode_FromFormat("<gpucore._cpu.PackedMatrix side='%s' %zd x %zd %s trans=%d "
                                "swap=%d isa=%s panels of %d, kc=%zd>",
                                side_name(p->side), p->rows, p->cols,
                                p->kind == 'f' ? "float32" : "float64", p->trans, p->swap,
                                gc_isa_names[p->isa], p->w, p->kc);
}

#define GETTER(name, expr)                                                                        \
    static PyObject *packed_get_##name(PackedMatrix *self, void *closure)                         \
    {                                                                                             \
        (void)closure;                                                                            \
        const gc_packed *p = &self->p;                                                            \
        return expr;                                                                              \
    }
GETTER(side, PyUnicode_FromString(side_name(p->side)))
GETTER(rows, PyLong_FromSsize_t(p->rows))
GETTER(cols, PyLong_FromSsize_t(p->cols))
GETTER(trans, PyLong_FromLong(p->trans))
GETTER(swap, PyLong_FromLong(p->swap))
GETTER(dtype, PyUnicode_FromString(p->kind == 'f' ? "float32" : "float64"))
GETTER(isa, PyUnicode_FromString(gc_isa_names[p->isa]))
GETTER(width, PyLong_FromLong(p->w))
GETTER(kc, PyLong_FromSsize_t(p->kc))
GETTER(nbytes, PyLong_FromSsize_t(p->elems * (p->kind == 'f' ? 4 : 8)))
#undef GETTER

#define G(name, doc) {#name, (getter)packed_get_##name, NULL, doc, NULL}
static PyGetSetDef packed_getset[] = {
    G(side, "'a' or 'b': the gemm argument it stands in for"),
    G(rows, "rows of op(X): m (side 'a') or k (side 'b')"),
    G(cols, "columns of op(X): k (side 'a') or n (side 'b')"),
    G(trans, "the stored layout it was packed from (trans_a / trans_b of the calls)"),
    G(swap, "1: packed for the other side of the register tile (the product runs as C^T)"),
    G(dtype, "'float32' or 'float64'"),
    G(isa, "the instruction set it was packed for (the one in use)"),
    G(width, "panel width (the micro-kernel's MR or NR)"),
    G(kc, "K block of the panels"),
    G(nbytes, "bytes of packed panels held"),
    {NULL, NULL, NULL, NULL, NULL},
};
#undef G

PyTypeObject gc_PackedMatrixType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "gpucore._cpu.PackedMatrix",
    .tp_basicsize = sizeof(PackedMatrix),
    .tp_dealloc = (destructor)packed_dealloc,
    .tp_repr = (reprfunc)packed_repr,
    .tp_getset = packed_getset,
    .tp_weaklistoffset = offsetof(PackedMatrix, weakrefs),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A constant GEMM operand packed once by gemm_pack, in the layout the micro-kernel "
              "reads; gemm, gemm_ex (a or b) and conv2d_forward (w) take it in place of the "
              "array.  Opaque: exports no buffer, holds its own memory (and, packed with swap "
              "2 from a read-only array, that array), immutable.",
};

GC_DOC(gemm_pack,
       "gemm_pack(x, side, rows, cols, trans, swap, /) -> PackedMatrix\n--\n\n"
       "Packs the GEMM operand x once for side 'a' (op(A), rows = m, cols = k, trans = "
       "trans_a) or 'b' (op(B), rows = k, cols = n, trans = trans_b): x is C-contiguous "
       "float32 / float64 holding the matrix as gemm reads it.  swap = 0 packs it for its own "
       "side of the register tile, 1 for the other side (the product then runs as C^T = "
       "op(B)^T op(A)^T; better when the other free dimension tiles badly).  gemm / gemm_ex "
       "swap = 2 (float32 side 'a', trans 0, x a 3x3 convolution weight [o, c, 3, 3] as rows = "
       "o, cols = c*9) holds it transformed for the Winograd F(4x4, 3x3) convolution "
       "(conv_winograd.c): only conv2d_forward of a 3x3 stride-1 dilation-1 geometry takes it, "
       "and then always runs that path.  gemm / gemm_ex "
       "calls with the same side, dims and trans (and batch stride 0) give the unpacked call's "
       "bits.  No alpha is applied.");

PyObject *gc_py_gemm_pack(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char fn[] = "gemm_pack";
    Py_ssize_t rows, cols;
    int trans, swap, side;
    if (check_nargs(fn, nargs, 6) < 0)
        return NULL;
    if (!PyUnicode_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "%s: 'side' must be 'a' or 'b', got %.100s", fn,
                     Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    if (PyUnicode_CompareWithASCIIString(args[1], "a") == 0)
        side = 0;
    else if (PyUnicode_CompareWithASCIIString(args[1], "b") == 0)
        side = 1;
    else {
        PyErr_Format(PyExc_ValueError, "%s: 'side' must be 'a' or 'b', got %R", fn, args[1]);
        return NULL;
    }
    if (get_min(fn, "rows", args[2], 0, &rows) < 0 || get_min(fn, "cols", args[3], 0, &cols) < 0 ||
        get_flag(fn, "trans", args[4], &trans) < 0)
        return NULL;
    Py_ssize_t swap_v;
    if (get_ssize(fn, "swap", args[5], &swap_v) < 0)
        return NULL;
    if (swap_v < 0 || swap_v > 2) {
        PyErr_Format(PyExc_ValueError, "%s: 'swap' must be 0, 1 or 2 (Winograd), got %zd", fn,
                     swap_v);
        return NULL;
    }
    swap = (int)swap_v;
    bufset bs = {.n = 0};
    Py_buffer *v = get_buf(&bs, fn, "x", args[0], 0);
    PyObject *res = NULL;
    if (!v)
        goto done;
    static const char *const names[1] = {"x"};
    const char kd = need_float_contig(fn, 1, &v, names, "=");
    if (!kd)
        goto done;
    int ok = 1;
    const Py_ssize_t need = smul(rows, cols, &ok);
    if (!ok) {
        overflow_error(fn, "rows * cols");
        goto done;
    }
    if (need_elems(fn, "x", v, need, "side '%s', rows=%zd, cols=%zd, trans=%d", side_name(side),
                   rows, cols, trans) < 0)
        goto done;
    gc_packed p;
    const int init = gc_gemm_pack_init(&p, kd, side, rows, cols, trans, swap);
    if (init == -2) {
        PyErr_Format(PyExc_ValueError,
                     "%s: swap=2 (the Winograd weight) packs a float32 3x3 convolution weight "
                     "as side 'a', trans 0, cols = c*9; got side '%s', %s, trans=%d, cols=%zd",
                     fn, side_name(side), kd == 'f' ? "float32" : "float64", trans, cols);
        goto done;
    }
    if (init < 0) {
        overflow_error(fn, "the packed size");
        goto done;
    }
    /* The Winograd weight of a read-only x (a constant: the compiled executor packs only those)
     * keeps x for the non-finite-input fallback instead of a copy after U (a fifth less to
     * write at load). */
    Py_buffer raw;
    int has_raw = 0;
    if (swap == 2 && v->readonly) {
        if (PyObject_GetBuffer(args[0], &raw, PyBUF_C_CONTIGUOUS) < 0)
            goto done;
        has_raw = 1;
        p.raw = raw.buf;
        p.elems -= rows * cols;
    }
    const size_t bytes = (size_t)p.elems * (kd == 'f' ? 4 : 8);
    size_t block = 0;
    if (!(p.data = packed_alloc(bytes, &block))) {
        PyErr_Format(PyExc_MemoryError, "%s: cannot allocate %zu bytes of packed panels", fn,
                     bytes);
        if (has_raw)
            PyBuffer_Release(&raw);
        goto done;
    }
    PackedMatrix *pm = PyObject_New(PackedMatrix, &gc_PackedMatrixType);
    if (!pm) {
        gc_host_block_release(p.data, block);
        if (has_raw)
            PyBuffer_Release(&raw);
        goto done;
    }
    pm->p = p;
    pm->block = block;
    pm->has_raw = has_raw;
    if (has_raw)
        pm->raw = raw;
    pm->weakrefs = NULL;
    const void *x = v->buf;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_gemm_pack_f32(x, &pm->p);
    else
        gc_gemm_pack_f64(x, &pm->p);
    Py_END_ALLOW_THREADS
    res = (PyObject *)pm;
done:
    bufs_release(&bs);
    return res;
}

int gc_is_packed(PyObject *obj)
{
    return PyObject_TypeCheck(obj, &gc_PackedMatrixType);
}

const gc_packed *gc_packed_arg(bufset *bs, const char *fn, const char *name, PyObject *obj,
                               int side, Py_ssize_t rows, Py_ssize_t cols, int trans, char kind)
{
    const gc_packed *p = &((PackedMatrix *)obj)->p;
    const int w = gc_packed_width(p->kind, p->side, p->swap);
    if (p->side != side) {
        PyErr_Format(PyExc_ValueError,
                     "%s: '%s' is a PackedMatrix for side '%s' (the %s operand); pack it with "
                     "side='%s'",
                     fn, name, side_name(p->side), p->side == 0 ? "A" : "B", side_name(side));
        return NULL;
    }
    if (p->kind != kind) {
        PyErr_Format(PyExc_TypeError, "%s: '%s' is a PackedMatrix of %s, the call's format is %s",
                     fn, name, kind_name(p->kind), kind_name(kind));
        return NULL;
    }
    if (p->rows != rows || p->cols != cols || p->trans != trans) {
        PyErr_Format(PyExc_ValueError,
                     "%s: '%s' is a PackedMatrix of %zd x %zd with trans=%d, the call needs "
                     "%zd x %zd with trans=%d",
                     fn, name, p->rows, p->cols, p->trans, rows, cols, trans);
        return NULL;
    }
    if (p->isa != gc_isa.isa || p->w != w || p->kc != gc_gemm_kc(p->kind, p->k)) {
        PyErr_Format(PyExc_ValueError,
                     "%s: '%s' was packed for ISA %s (panels of %d, kc=%zd), this process runs "
                     "%s (%d, kc=%zd)",
                     fn, name, gc_isa_names[p->isa], p->w, p->kc, gc_isa.name, w,
                     gc_gemm_kc(p->kind, p->k));
        return NULL;
    }
    if (bs->n >= GC_MAXBUF) {
        PyErr_Format(PyExc_SystemError, "%s: too many buffers", fn);
        return NULL;
    }
    /* a reference held with the call's buffers (a Program keeps it for its life) */
    if (PyBuffer_FillInfo(&bs->v[bs->n], obj, p->data, 0, 1, PyBUF_SIMPLE) < 0)
        return NULL;
    bs->n++;
    return p;
}

/* The small-op fast lane: a whole elementwise op on host tensors in one C call.
 *
 * Eager autograd on small tensors is bound by Python bookkeeping, not arithmetic: `a + b` on 64
 * floats spent ~4 us in Python (operand checks, the registry's lane, the output allocation, the
 * Tensor's construction) around a ~30 ns kernel.  Here one call checks that the operands are
 * plain host Tensors of one float dtype and one shape below the lane's size limit, takes the
 * output block from the host cache (host_cache.c, so autograd's ownership test still applies),
 * wraps it in an ndarray, runs the kernel and builds the result Tensor, whose slots it writes
 * directly.  Anything unusual returns None and the caller takes the general path, which gives
 * the same result; the graph is recorded by the Python caller.
 *
 * The limit is set from Python (gpucore/dispatch.py) whenever the device policy, the threshold,
 * tracing or profiling change: 0 while any of them needs the general path. */
#include "bindings.h"

#include <math.h>
#include <structmember.h>
#include <string.h>

#include "fastpath.h"
#include "kernels.h"

/* What the lane knows about the Python side, from fast_setup(). */
PyTypeObject *gc_fast_tensor_type;
/* A subclass of it whose instances the matmul and linear lanes read as operands
 * (gpucore.nn.Parameter, from fast_accept()): a layer's weight reaches them as it is.  Results
 * are always plain Tensors, as on the general path. */
static PyTypeObject *gc_fast_operand_type;
static PyObject *dt_f32, *dt_f64;   /* gpucore.float32 / float64 */
static PyObject *np_f32, *np_f64;   /* numpy dtypes */
static PyObject *np_ndarray;        /* numpy.ndarray */
static PyObject *zero;              /* the int 0 of a fresh version box */
Py_ssize_t gc_fast_limit; /* elements; 0 = lane closed */

/* Byte offsets of the Tensor's slots, from its member descriptors: by name the slots the lane
 * reads or sets to something other than None; and every object slot of the class and its bases,
 * each of which a new Tensor starts as None (so this file names no slot it does not use). */
enum { F_DATA, F_DTYPE, F_VBOX, F_REQ, F_RETAIN, F_DEV, F_COUNT };
static const char *const field_names[F_COUNT] = {"_data",          "_dtype",  "_vbox",
                                                 "_requires_grad", "_retain", "_dev"};
static Py_ssize_t field_off[F_COUNT];
static Py_ssize_t *slot_off, slot_count;

#define FIELD_AT(obj, off) (*(PyObject **)((char *)(obj) + (off)))
#define FIELD(obj, f) FIELD_AT(obj, field_off[f])

/* A writable object slot (__slots__ entry) of a type. */
static int is_object_slot(const PyMemberDef *m)
{
    return m->type == T_OBJECT_EX && !(m->flags & READONLY);
}

/* Every object slot of tp and its bases into slot_off / slot_count; -1 with an exception set. */
static int collect_slots(PyTypeObject *tp)
{
    PyObject *mro = tp->tp_mro;
    if (!mro || !PyTuple_Check(mro)) {
        PyErr_Format(PyExc_TypeError, "fast_setup: %s has no MRO", tp->tp_name);
        return -1;
    }
    Py_ssize_t count = 0;
    for (int pass = 0; pass < 2; pass++) { /* count, then fill */
        Py_ssize_t *off = NULL;
        if (pass == 1) {
            off = PyMem_Malloc((size_t)(count > 0 ? count : 1) * sizeof *off);
            if (!off) {
                PyErr_NoMemory();
                return -1;
            }
        }
        Py_ssize_t k = 0;
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(mro); i++) {
            const PyMemberDef *m = ((PyTypeObject *)PyTuple_GET_ITEM(mro, i))->tp_members;
            for (; m && m->name; m++)
                if (is_object_slot(m) && pass == 1)
                    off[k++] = m->offset;
                else if (is_object_slot(m))
                    count++;
        }
        if (pass == 1) {
            PyMem_Free(slot_off);
            slot_off = off;
            slot_count = k;
        }
    }
    return 0;
}

/* The byte offset of tp's __slots__ member name, or -1 with an exception set. */
static Py_ssize_t slot_offset(PyTypeObject *tp, const char *name)
{
    PyObject *d = PyObject_GetAttrString((PyObject *)tp, name);
    if (!d)
        PyErr_Clear();
    const int ok = d && Py_IS_TYPE(d, &PyMemberDescr_Type) &&
                   is_object_slot(((PyMemberDescrObject *)d)->d_member);
    const Py_ssize_t off = ok ? ((PyMemberDescrObject *)d)->d_member->offset : -1;
    Py_XDECREF(d);
    if (!ok)
        PyErr_Format(PyExc_TypeError, "fast_setup: %s.%s is not a __slots__ member", tp->tp_name,
                     name);
    return off;
}

Py_ssize_t gc_fast_slot_offset(const char *name)
{
    if (!gc_fast_tensor_type) {
        PyErr_SetString(PyExc_SystemError, "the fast lane is used before fast_setup");
        return -1;
    }
    return slot_offset(gc_fast_tensor_type, name);
}

PyObject *gc_fast_alloc(void)
{
    PyObject *t = gc_fast_tensor_type->tp_alloc(gc_fast_tensor_type, 0);
    if (!t)
        return NULL;
    for (Py_ssize_t i = 0; i < slot_count; i++) /* every slot None (_dev: host memory) ... */
        FIELD_AT(t, slot_off[i]) = Py_NewRef(Py_None);
    Py_SETREF(FIELD(t, F_REQ), Py_NewRef(Py_False)); /* ... but these two */
    Py_SETREF(FIELD(t, F_RETAIN), Py_NewRef(Py_False));
    return t;
}

GC_DOC(fast_setup,
       "fast_setup(Tensor, float32, float64, np_float32, np_float64, ndarray, /)\n--\n\n"
       "Tell the fast lane the Tensor class (its slots), gpucore's two float dtypes and "
       "numpy's, and numpy.ndarray.  Called once by gpucore.ops.registry.");

PyObject *gc_py_fast_setup(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6 || !PyType_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "fast_setup(Tensor, float32, float64, np_float32, np_float64, ndarray)");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)args[0];
    Py_ssize_t off[F_COUNT];
    for (int i = 0; i < F_COUNT; i++)
        if ((off[i] = slot_offset(tp, field_names[i])) < 0)
            return NULL;
    if (collect_slots(tp) < 0)
        return NULL;
    memcpy(field_off, off, sizeof off);
    PyObject **keep[] = {(PyObject **)&gc_fast_tensor_type, &dt_f32, &dt_f64, &np_f32, &np_f64,
                         &np_ndarray};
    for (int i = 0; i < 6; i++)
        Py_XSETREF(*keep[i], Py_NewRef(args[i]));
    if (!zero)
        zero = PyLong_FromLong(0);
    Py_RETURN_NONE;
}

GC_DOC(fast_accept,
       "fast_accept(cls, /)\n--\n\n"
       "Let the matmul and linear lanes read instances of cls, a subclass of the Tensor class "
       "that adds no slots and overrides no op (gpucore.nn.Parameter), as operands; their "
       "results stay plain Tensors.  Called once by gpucore.nn.parameter.");

PyObject *gc_py_fast_accept(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 1 || !PyType_Check(args[0]) || !gc_fast_tensor_type) {
        PyErr_SetString(PyExc_TypeError, "fast_accept(cls) takes one class, after fast_setup");
        return NULL;
    }
    PyTypeObject *tp = (PyTypeObject *)args[0];
    if (!PyType_IsSubtype(tp, gc_fast_tensor_type) ||
        tp->tp_basicsize != gc_fast_tensor_type->tp_basicsize) {
        PyErr_Format(PyExc_TypeError,
                     "fast_accept: %s must be a subclass of %s with no slots of its own",
                     tp->tp_name, gc_fast_tensor_type->tp_name);
        return NULL;
    }
    Py_XSETREF(gc_fast_operand_type, (PyTypeObject *)Py_NewRef(tp));
    Py_RETURN_NONE;
}

GC_DOC(set_fast_limit,
       "set_fast_limit(n, /)\n--\n\n"
       "Ops whose tensors have fewer than n elements may take the fast lane; 0 closes it.");

PyObject *gc_py_set_fast_limit(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 1) {
        PyErr_SetString(PyExc_TypeError, "set_fast_limit(n) takes one int");
        return NULL;
    }
    const Py_ssize_t n = PyLong_AsSsize_t(args[0]);
    if (n == -1 && PyErr_Occurred())
        return NULL;
    gc_fast_limit = n < 0 ? 0 : n;
    Py_RETURN_NONE;
}

/* 'f' or 'd' when t is a plain host Tensor of float32 / float64, else 0. */
char gc_fast_kind(PyObject *t)
{
    if (Py_TYPE(t) != gc_fast_tensor_type || FIELD(t, F_DEV) != Py_None)
        return 0;
    PyObject *dt = FIELD(t, F_DTYPE);
    return dt == dt_f32 ? 'f' : (dt == dt_f64 ? 'd' : 0);
}

/* gc_fast_kind, also for a Parameter (fast_accept): the operands of the GEMM lanes and the
 * normalizations' weights. The elementwise lanes keep to plain Tensors. */
char gc_fast_operand_kind(PyObject *t)
{
    if (Py_TYPE(t) == gc_fast_operand_type && Py_TYPE(t) != gc_fast_tensor_type) {
        if (FIELD(t, F_DEV) != Py_None)
            return 0;
        PyObject *dt = FIELD(t, F_DTYPE);
        return dt == dt_f32 ? 'f' : (dt == dt_f64 ? 'd' : 0);
    }
    return gc_fast_kind(t);
}

/* The one place a lane reads t's data: its buffer (flags as PyObject_GetBuffer's) into v, or 0
 * (no error set) when there is none: a Tensor made by __new__ alone has no _data yet, and the
 * general path then raises a clear error. */
int gc_fast_buf_flags(PyObject *t, Py_buffer *v, int flags)
{
    PyObject *d = FIELD(t, F_DATA);
    if (!d || PyObject_GetBuffer(d, v, flags) < 0) {
        PyErr_Clear();
        return 0;
    }
    return 1;
}

/* A C-contiguous buffer of t's data, or 0 (no error set) when it is not one. */
int gc_fast_buf(PyObject *t, Py_buffer *v)
{
    return gc_fast_buf_w(t, v, 0);
}

int gc_fast_buf_w(PyObject *t, Py_buffer *v, int writable)
{
    return gc_fast_buf_flags(t, v,
                             PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0));
}

int gc_fast_same_shape(const Py_buffer *a, const Py_buffer *b)
{
    if (a->ndim != b->ndim || a->len != b->len)
        return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    return 1;
}

/* A new host Tensor (and its ndarray over a host-cache block) of the given shape (a tuple,
 * stolen). */
PyObject *gc_fast_new_shaped(PyObject *shape, char kind, void **ptr);

/* A new host Tensor (and its ndarray over a host-cache block) shaped like src's data. */
PyObject *gc_fast_new(PyObject *src, char kind, void **ptr)
{
    PyObject *d = FIELD(src, F_DATA); /* the callers read src's buffer first: set */
    if (!d) {
        PyErr_SetString(PyExc_SystemError, "gc_fast_new: the source Tensor has no data");
        return NULL;
    }
    static PyObject *s_shape; /* "shape", interned once: no string made per call */
    if (!s_shape && !(s_shape = PyUnicode_InternFromString("shape")))
        return NULL;
    PyObject *shape = PyObject_GetAttr(d, s_shape);
    return shape ? gc_fast_new_shaped(shape, kind, ptr) : NULL;
}

PyObject *gc_fast_new_shaped(PyObject *shape, char kind, void **ptr)
{
    const Py_ssize_t itemsize = kind == 'f' ? 4 : 8;
    Py_ssize_t n = itemsize;
    for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(shape); d++)
        n *= PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, d));
    PyObject *nb = PyLong_FromSsize_t(n);
    PyObject *block = nb ? gc_py_host_empty(NULL, &nb, 1) : NULL;
    Py_XDECREF(nb);
    if (!block) {
        Py_DECREF(shape);
        return NULL;
    }
    /* the data pointer from the block (host_cache.c fills a plain buffer): numpy's own buffer
     * export would malloc its buffer info for each new array */
    Py_buffer v;
    if (PyObject_GetBuffer(block, &v, PyBUF_SIMPLE | PyBUF_WRITABLE) < 0) {
        Py_DECREF(shape);
        Py_DECREF(block);
        return NULL;
    }
    *ptr = v.buf;
    PyBuffer_Release(&v);
    PyObject *argv[3] = {shape, kind == 'f' ? np_f32 : np_f64, block};
    PyObject *arr = PyObject_Vectorcall(np_ndarray, argv, 3, NULL); /* (it keeps the block) */
    Py_DECREF(shape);
    Py_DECREF(block);
    if (!arr)
        return NULL;
    PyObject *vbox = PyList_New(1);
    PyObject *t = vbox ? gc_fast_alloc() : NULL;
    if (!t) {
        Py_XDECREF(vbox);
        Py_DECREF(arr);
        return NULL;
    }
    PyList_SET_ITEM(vbox, 0, Py_NewRef(zero));
    Py_XSETREF(FIELD(t, F_DATA), arr);
    Py_XSETREF(FIELD(t, F_DTYPE), Py_NewRef(kind == 'f' ? dt_f32 : dt_f64));
    Py_XSETREF(FIELD(t, F_VBOX), vbox);
    return t;
}

/* Shared body: n_in operands (1 or 2), kernel picked by kind. */
enum { K_UNARY, K_BINARY, K_UNARY_BWD };

static PyObject *fast_op(const char *fn, PyObject *const *args, Py_ssize_t nargs, int kind,
                         int nops, int nmax)
{
    if (nargs != nops + 1) {
        PyErr_Format(PyExc_TypeError, "%s takes %d arguments (%zd given)", fn, nops + 1, nargs);
        return NULL;
    }
    const long op = PyLong_AsLong(args[0]);
    if (op < 0 || op >= nmax || (kind == K_BINARY && gc_binary_writes_bool((int)op))) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "%s: op %ld is out of range", fn, op);
        return NULL;
    }
    if (gc_fast_limit == 0 || !gc_fast_tensor_type)
        Py_RETURN_NONE;
    const char k = gc_fast_kind(args[1]);
    if (!k || (nops == 2 && gc_fast_kind(args[2]) != k))
        Py_RETURN_NONE;
    Py_buffer a, b;
    if (!gc_fast_buf(args[1], &a))
        Py_RETURN_NONE;
    int have_b = 0;
    if (nops == 2) {
        if (!gc_fast_buf(args[2], &b)) {
            PyBuffer_Release(&a);
            Py_RETURN_NONE;
        }
        have_b = 1;
    }
    const Py_ssize_t n = a.len / (k == 'f' ? 4 : 8);
    PyObject *res = NULL;
    if (n >= gc_fast_limit || n == 0 || (have_b && !gc_fast_same_shape(&a, &b))) {
        res = Py_NewRef(Py_None);
        goto done;
    }
    void *out;
    res = gc_fast_new(args[1], k, &out);
    if (!res)
        goto done;
    /* tiny and single-threaded: no GIL release */
    if (kind == K_UNARY) {
        if (k == 'f')
            gc_unary_f32((int)op, (const float *)a.buf, (float *)out, n);
        else
            gc_unary_f64((int)op, (const double *)a.buf, (double *)out, n);
    } else if (kind == K_UNARY_BWD) {
        if (k == 'f')
            gc_unary_backward_f32((int)op, (const float *)a.buf, (const float *)b.buf,
                                  (float *)out, n);
        else
            gc_unary_backward_f64((int)op, (const double *)a.buf, (const double *)b.buf,
                                  (double *)out, n);
    } else {
        gc_iter it;
        it.ndim = 1;
        it.shape[0] = n;
        it.stride[0][0] = it.stride[1][0] = it.stride[2][0] = 1;
        if (k == 'f')
            gc_binary_f32((int)op, &it, (const float *)a.buf, (const float *)b.buf, out);
        else
            gc_binary_f64((int)op, &it, (const double *)a.buf, (const double *)b.buf, out);
    }
done:
    PyBuffer_Release(&a);
    if (have_b)
        PyBuffer_Release(&b);
    return res;
}

GC_DOC(fast_unary,
       "fast_unary(op, x, /)\n--\n\n"
       "A new Tensor f(x) (op: a UNARY_* constant) when x is a plain, small, contiguous "
       "float host Tensor and the lane is open; else None.");

PyObject *gc_py_fast_unary(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    return fast_op("fast_unary", args, nargs, K_UNARY, 1, GC_UNARY_COUNT);
}

GC_DOC(fast_binary,
       "fast_binary(op, a, b, /)\n--\n\n"
       "A new Tensor a op b (op: an arithmetic BINARY_* constant) when a and b are plain, "
       "small, contiguous host Tensors of one float dtype and one shape, or one of them is "
       "such a Tensor and the other a Python float, int (|v| <= 2**53) or bool (the result "
       "in the Tensor's dtype, as PyTorch promotes), and the lane is open; else None.");

/* A Python float, int or bool operand (exact types; ints up to 2^53, which a double holds
 * exactly, so the one rounding to float32 is PyTorch's) as a double: 1, else 0 (no error). */
static int scalar_value(PyObject *o, double *v)
{
    if (PyFloat_CheckExact(o)) {
        *v = PyFloat_AS_DOUBLE(o);
        return 1;
    }
    if (!PyLong_CheckExact(o) && !PyBool_Check(o))
        return 0;
    int overflow;
    const long long i = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (i == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    if (i > (1LL << 53) || i < -(1LL << 53))
        return 0;
    *v = (double)i;
    return 1;
}

/* a op s or s op a (scalar_first) for a plain float host Tensor a and a Python number s, as
 * PyTorch promotes them: the tensor's float dtype, s rounded to it once; the number is a
 * stride-0 operand of the broadcasting kernel (the general path's 0-d tensor gives the same
 * iteration, so the same bits).  None when the lane does not take it. */
static PyObject *fast_scalar_binary(int op, PyObject *t, double sv, int scalar_first)
{
    const char k = gc_fast_kind(t);
    Py_buffer a;
    if (!k || !gc_fast_buf(t, &a))
        Py_RETURN_NONE;
    const Py_ssize_t n = a.len / (k == 'f' ? 4 : 8);
    PyObject *res;
    void *out;
    if (n >= gc_fast_limit || n == 0) {
        res = Py_NewRef(Py_None);
    } else if ((res = gc_fast_new(t, k, &out)) != NULL) {
        gc_iter it;
        it.ndim = 1;
        it.shape[0] = n;
        it.stride[0][0] = scalar_first ? 0 : 1;
        it.stride[1][0] = scalar_first ? 1 : 0;
        it.stride[2][0] = 1;
        if (k == 'f') {
            const float f = (float)sv;
            const float *x = (const float *)a.buf;
            gc_binary_f32(op, &it, scalar_first ? &f : x, scalar_first ? x : &f, out);
        } else {
            const double *x = (const double *)a.buf;
            gc_binary_f64(op, &it, scalar_first ? &sv : x, scalar_first ? x : &sv, out);
        }
    }
    PyBuffer_Release(&a);
    return res;
}

PyObject *gc_py_fast_binary(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    double sv;
    if (nargs == 3 && gc_fast_limit != 0 && gc_fast_tensor_type) {
        const int s1 = Py_TYPE(args[1]) != gc_fast_tensor_type && scalar_value(args[1], &sv);
        const int s2 = !s1 && Py_TYPE(args[2]) != gc_fast_tensor_type && scalar_value(args[2], &sv);
        if (s1 || s2) {
            const long op = PyLong_AsLong(args[0]);
            if (op < 0 || op >= GC_BINARY_COUNT || gc_binary_writes_bool((int)op)) {
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_ValueError, "fast_binary: op %ld is out of range", op);
                return NULL;
            }
            return fast_scalar_binary((int)op, s1 ? args[2] : args[1], sv, s1);
        }
    }
    return fast_op("fast_binary", args, nargs, K_BINARY, 2, GC_BINARY_COUNT);
}

GC_DOC(fast_unary_backward,
       "fast_unary_backward(op, grad, saved, /)\n--\n\n"
       "unary_backward's gradient as a new Tensor under fast_binary's conditions; else "
       "None.");

PyObject *gc_py_fast_unary_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs == 3) {
        const long op = PyLong_AsLong(args[0]);
        if (op < 0 || op >= GC_UNARY_COUNT || !gc_unary_has_backward((int)op)) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_ValueError,
                             "fast_unary_backward: op %ld has no backward kernel", op);
            return NULL;
        }
    }
    return fast_op("fast_unary_backward", args, nargs, K_UNARY_BWD, 2, GC_UNARY_COUNT);
}


/* ---- matmul ------------------------------------------------------------------------------ */

/* How a matmul operand of ndim dims lies: row-major matrices (trans 0) or each matrix stored
 * transposed (trans 1: a transpose(-2, -1) view of contiguous data), the matrices one after
 * another (batch stride rows * cols).  0 (no error set) for any other layout. */
static int mm_layout(const Py_buffer *v, int *trans)
{
    const int nd = v->ndim;
    const Py_ssize_t it = v->itemsize, r = v->shape[nd - 2], c = v->shape[nd - 1];
    Py_ssize_t want = it * r * c; /* batch dims: C order over whole matrices */
    for (int d = nd - 3; d >= 0; d--) {
        if (v->shape[d] > 1 && v->strides[d] != want)
            return 0;
        want *= v->shape[d];
    }
    if ((c <= 1 || v->strides[nd - 1] == it) && (r <= 1 || v->strides[nd - 2] == it * c)) {
        *trans = 0;
        return 1;
    }
    if ((r <= 1 || v->strides[nd - 2] == it) && (c <= 1 || v->strides[nd - 1] == it * r)) {
        *trans = 1;
        return 1;
    }
    return 0;
}

/* Products below this many multiply-adds run with the GIL held (the call is shorter than a
 * release and re-take of the GIL would make worthwhile). */
#define MM_GIL_FMA 65536.0

GC_DOC(fast_matmul,
       "fast_matmul(a, b, trans_a=False, /)\n--\n\n"
       "A new Tensor a @ b (with trans_a: a.mT @ b, no view made) when a and b are host "
       "Tensors (plain or a Parameter, fast_accept) of one float dtype with the same "
       "number of dims (2 to 4), equal batch dims and a[-1] == b[-2], each matrix stored "
       "row-major or transposed (a transpose(-2, -1) view), and the lane is open; else None "
       "(the caller's general path gives the same result).  One GEMM call: no packing where "
       "the operands are small (gemm.c), the thread count by the work.");

PyObject *gc_py_fast_matmul(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 && nargs != 3) {
        PyErr_Format(PyExc_TypeError, "fast_matmul takes 2 or 3 arguments (%zd given)", nargs);
        return NULL;
    }
    const int trans = nargs == 3 ? PyObject_IsTrue(args[2]) : 0;
    if (trans < 0)
        return NULL;
    if (gc_fast_limit == 0 || !gc_fast_tensor_type)
        Py_RETURN_NONE;
    const char k = gc_fast_operand_kind(args[0]);
    if (!k || gc_fast_operand_kind(args[1]) != k)
        Py_RETURN_NONE;
    Py_buffer a, b;
    if (!gc_fast_buf_flags(args[0], &a, PyBUF_RECORDS_RO))
        Py_RETURN_NONE;
    if (!gc_fast_buf_flags(args[1], &b, PyBUF_RECORDS_RO)) {
        PyBuffer_Release(&a);
        Py_RETURN_NONE;
    }
    PyObject *res = Py_None;
    const Py_ssize_t it = k == 'f' ? 4 : 8;
    const int nd = a.ndim;
    int ta = 0, tb = 0;
    if (nd < 2 || nd > 4 || b.ndim != nd || a.itemsize != it || b.itemsize != it ||
        !mm_layout(&a, &ta) || !mm_layout(&b, &tb))
        goto done;
    /* the product's A: a's matrices, or with trans_a their transposes (the other layout) */
    const Py_ssize_t m = a.shape[nd - 2 + trans], kk = a.shape[nd - 1 - trans];
    ta ^= trans;
    if (kk != b.shape[nd - 2])
        goto done;
    Py_ssize_t batch = 1;
    for (int d = 0; d < nd - 2; d++) {
        if (a.shape[d] != b.shape[d])
            goto done;
        batch *= a.shape[d];
    }
    const Py_ssize_t n = b.shape[nd - 1];
    const Py_ssize_t na = a.len / it, nb = b.len / it, nc = batch * m * n;
    if (nc == 0 || kk == 0 || na >= gc_fast_limit || nb >= gc_fast_limit || nc >= gc_fast_limit)
        goto done;
    PyObject *shape = PyTuple_New(nd);
    if (!shape) {
        res = NULL;
        goto done;
    }
    for (int d = 0; d < nd; d++) {
        const Py_ssize_t v = d < nd - 2 ? a.shape[d] : (d == nd - 2 ? m : n);
        PyObject *o = PyLong_FromSsize_t(v);
        if (!o) {
            Py_DECREF(shape);
            res = NULL;
            goto done;
        }
        PyTuple_SET_ITEM(shape, d, o);
    }
    void *out;
    res = gc_fast_new_shaped(shape, k, &out);
    if (!res)
        goto done;
    /* a view's buffer starts at its first element: with the layouts above that is element
     * (0, 0) of the first matrix, and the matrices follow at stride m*k (k*n) */
    const int big = (double)nc * (double)kk >= MM_GIL_FMA;
    int rc;
    PyThreadState *ts = big ? PyEval_SaveThread() : NULL;
    if (k == 'f')
        rc = gc_gemm_f32((const float *)a.buf, (const float *)b.buf, (float *)out, batch, m, n,
                         kk, ta, tb, 1.0f, 0.0f, m * kk, kk * n, m * n);
    else
        rc = gc_gemm_f64((const double *)a.buf, (const double *)b.buf, (double *)out, batch, m,
                         n, kk, ta, tb, 1.0, 0.0, m * kk, kk * n, m * n);
    if (ts)
        PyEval_RestoreThread(ts);
    if (rc < 0) {
        Py_DECREF(res);
        res = PyErr_NoMemory();
    }
done:
    PyBuffer_Release(&a);
    PyBuffer_Release(&b);
    return res == Py_None ? Py_NewRef(Py_None) : res;
}

/* ---- linear ------------------------------------------------------------------------------ */

GC_DOC(fast_linear,
       "fast_linear(x, weight, bias, relu=False, /)\n--\n\n"
       "A new Tensor x @ weight.T + bias when x [m, k] and weight [n, k] are host matrices of one "
       "float dtype, each row-major or a transposed view, bias None or a contiguous [n] of that "
       "dtype, m, n, k > 0 and the lane is open; else None (the caller's general path, the "
       "linear op's kernel, gives the same bits).  One gemm_ex call: the bias is added while the "
       "tile is in registers, and with relu true relu follows there too (the linear_relu op's "
       "kernel: the bits of linear, then relu).");

PyObject *gc_py_fast_linear(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 && nargs != 4) {
        PyErr_Format(PyExc_TypeError, "fast_linear takes 3 or 4 arguments (%zd given)", nargs);
        return NULL;
    }
    int relu = 0;
    if (nargs == 4 && (relu = PyObject_IsTrue(args[3])) < 0)
        return NULL;
    const int act = relu ? GC_UNARY_RELU : -1;
    if (gc_fast_limit == 0 || !gc_fast_tensor_type)
        Py_RETURN_NONE;
    const char k = gc_fast_operand_kind(args[0]);
    const int has_bias = args[2] != Py_None;
    if (!k || gc_fast_operand_kind(args[1]) != k ||
        (has_bias && gc_fast_operand_kind(args[2]) != k))
        Py_RETURN_NONE;
    Py_buffer x, w, bv;
    int nbuf = 0;
    PyObject *res = Py_None;
    if (!gc_fast_buf_flags(args[0], &x, PyBUF_RECORDS_RO))
        goto done;
    nbuf = 1;
    if (!gc_fast_buf_flags(args[1], &w, PyBUF_RECORDS_RO))
        goto done;
    nbuf = 2;
    if (has_bias) {
        if (!gc_fast_buf(args[2], &bv))
            goto done;
        nbuf = 3;
    }
    const Py_ssize_t it = k == 'f' ? 4 : 8;
    int tx = 0, tw = 0;
    if (x.ndim != 2 || w.ndim != 2 || x.itemsize != it || w.itemsize != it ||
        x.shape[1] != w.shape[1] || !mm_layout(&x, &tx) || !mm_layout(&w, &tw))
        goto done;
    const Py_ssize_t m = x.shape[0], kk = x.shape[1], n = w.shape[0];
    if (has_bias && (bv.ndim != 1 || bv.shape[0] != n || bv.itemsize != it))
        goto done;
    if (m == 0 || n == 0 || kk == 0 || x.len / it >= gc_fast_limit ||
        w.len / it >= gc_fast_limit || m * n >= gc_fast_limit)
        goto done;
    PyObject *shape = Py_BuildValue("(nn)", m, n);
    if (!shape) {
        res = NULL;
        goto done;
    }
    void *out;
    res = gc_fast_new_shaped(shape, k, &out);
    if (!res)
        goto done;
    /* w is [n, k]: the product takes it transposed, which folds into the packing (the linear
     * kernel's call, gpucore/backends/cpu/kernels/linalg.py) */
    const int big = (double)m * (double)n * (double)kk >= MM_GIL_FMA;
    const void *bias = has_bias ? bv.buf : NULL;
    int rc;
    PyThreadState *ts = big ? PyEval_SaveThread() : NULL;
    if (k == 'f')
        rc = gc_gemm_ex_f32((const float *)x.buf, (const float *)w.buf, (float *)out, 1, m, n, kk,
                            tx, 1 - tw, 1.0f, 0.0f, 0, 0, m * n, (const float *)bias, act);
    else
        rc = gc_gemm_ex_f64((const double *)x.buf, (const double *)w.buf, (double *)out, 1, m, n,
                            kk, tx, 1 - tw, 1.0, 0.0, 0, 0, m * n, (const double *)bias, act);
    if (ts)
        PyEval_RestoreThread(ts);
    if (rc < 0) {
        Py_DECREF(res);
        res = PyErr_NoMemory();
    }
done:
    if (nbuf >= 1)
        PyBuffer_Release(&x);
    if (nbuf >= 2)
        PyBuffer_Release(&w);
    if (nbuf >= 3)
        PyBuffer_Release(&bv);
    return res == Py_None ? Py_NewRef(Py_None) : res;
}

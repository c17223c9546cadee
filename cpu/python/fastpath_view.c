/* The view lane (fastpath.c): a view Tensor built in one C call, Tensor._make_view's body (and
 * a kernel output's fresh Tensor, Tensor._from_kernel's).
 *
 * A view is only metadata around a numpy view of its source's data, but in Python its
 * construction (the Tensor's eleven slots, its base, its view chain) cost ~0.5 us, so that
 * split's three pieces cost more than PyTorch's whole split.  Here the slots are written
 * directly: the numpy view arr, the source's dtype, version counter (the same list: a view and
 * its base see each other's in-place writes) and device, the base (the source's base when it is
 * a view itself) and the view chain (the source's, plus (op, attrs)), which autograd replays on
 * the base after an in-place write. */
#include "args.h"
#include "bindings.h"

#include "fastpath.h"
#include "kernels.h"

#define FIELD_AT(obj, off) (*(PyObject **)((char *)(obj) + (off)))

enum { V_DATA, V_DTYPE, V_VBOX, V_DEV, V_BASE, V_VIEW_OPS, V_COUNT };
static const char *const view_names[V_COUNT] = {"_data", "_dtype",   "_vbox",
                                                "_dev",  "_base",    "_view_ops"};
static Py_ssize_t view_off[V_COUNT]; /* view_off[V_DATA] == 0: not read yet */
static PyObject *s_ndim;             /* "ndim", interned */

static int view_setup(void)
{
    if (view_off[V_DATA])
        return 0;
    Py_ssize_t off[V_COUNT];
    for (int i = 0; i < V_COUNT; i++)
        if ((off[i] = gc_fast_slot_offset(view_names[i])) < 0)
            return -1;
    if (!s_ndim && !(s_ndim = PyUnicode_InternFromString("ndim")))
        return -1;
    memcpy(view_off, off, sizeof off);
    return 0;
}

GC_DOC(fast_view,
       "fast_view(src, arr, op, attrs, /)\n--\n\n"
       "The Tensor view of Tensor src over arr (a numpy view of src's data that op made with "
       "attrs): src's dtype, version counter and device, src's base, src's view chain plus "
       "(op, attrs), no grad.  None when src is not a Tensor with those slots set or arr has "
       "more than 8 dims (Tensor._make_view's Python body then decides, with its errors).");

PyObject *gc_py_fast_view(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "fast_view takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!gc_fast_tensor_type)
        Py_RETURN_NONE;
    if (view_setup() < 0)
        return NULL;
    PyObject *src = args[0], *arr = args[1];
    if (!PyObject_TypeCheck(src, gc_fast_tensor_type))
        Py_RETURN_NONE;
    PyObject *dtype = FIELD_AT(src, view_off[V_DTYPE]), *vbox = FIELD_AT(src, view_off[V_VBOX]);
    PyObject *dev = FIELD_AT(src, view_off[V_DEV]), *base = FIELD_AT(src, view_off[V_BASE]);
    PyObject *chain = FIELD_AT(src, view_off[V_VIEW_OPS]);
    if (!dtype || !vbox || !dev || !base || !chain || (chain != Py_None && !PyTuple_Check(chain)))
        Py_RETURN_NONE; /* a Tensor made by __new__ alone, or slots set oddly */
    PyObject *nd = PyObject_GetAttr(arr, s_ndim);
    const long ndim = nd && PyLong_Check(nd) ? PyLong_AsLong(nd) : -1;
    Py_XDECREF(nd);
    if (ndim < 0 || ndim > GC_MAX_DIMS) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    const Py_ssize_t k = chain == Py_None ? 0 : PyTuple_GET_SIZE(chain);
    PyObject *link = PyTuple_Pack(2, args[2], args[3]);
    PyObject *ops = link ? PyTuple_New(k + 1) : NULL;
    if (!ops) {
        Py_XDECREF(link);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < k; i++)
        PyTuple_SET_ITEM(ops, i, Py_NewRef(PyTuple_GET_ITEM(chain, i)));
    PyTuple_SET_ITEM(ops, k, link);
    PyObject *t = gc_fast_alloc();
    if (!t) {
        Py_DECREF(ops);
        return NULL;
    }
    Py_SETREF(FIELD_AT(t, view_off[V_DATA]), Py_NewRef(arr));
    Py_SETREF(FIELD_AT(t, view_off[V_DTYPE]), Py_NewRef(dtype));
    Py_SETREF(FIELD_AT(t, view_off[V_VBOX]), Py_NewRef(vbox));
    Py_SETREF(FIELD_AT(t, view_off[V_DEV]), Py_NewRef(dev));
    Py_SETREF(FIELD_AT(t, view_off[V_BASE]), Py_NewRef(base == Py_None ? src : base));
    Py_SETREF(FIELD_AT(t, view_off[V_VIEW_OPS]), ops);
    return t;
}

GC_DOC(fast_tensor,
       "fast_tensor(arr, dtype, /)\n--\n\n"
       "A fresh host Tensor over arr (a kernel's output, its shape checked by the op) of gpucore "
       "dtype dtype: its own version counter, no base, no grad.  Tensor._from_kernel's body; "
       "None before fast_setup.");

PyObject *gc_py_fast_tensor(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "fast_tensor takes 2 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!gc_fast_tensor_type)
        Py_RETURN_NONE;
    if (view_setup() < 0)
        return NULL;
    PyObject *zero = PyLong_FromLong(0);
    PyObject *vbox = zero ? PyList_New(1) : NULL;
    if (!vbox) {
        Py_XDECREF(zero);
        return NULL;
    }
    PyList_SET_ITEM(vbox, 0, zero);
    PyObject *t = gc_fast_alloc();
    if (!t) {
        Py_DECREF(vbox);
        return NULL;
    }
    Py_SETREF(FIELD_AT(t, view_off[V_DATA]), Py_NewRef(args[0]));
    Py_SETREF(FIELD_AT(t, view_off[V_DTYPE]), Py_NewRef(args[1]));
    Py_SETREF(FIELD_AT(t, view_off[V_VBOX]), vbox);
    return t;
}

/* Whether numpy can reshape a [nd] array of shape / strides (elements) to new[nn] without a copy
 * (C order; numpy's rule: each run of old dims that multiplies into a run of new dims must be
 * contiguous within itself).  Sizes are all positive. */
static int reshape_is_view(int nd, const Py_ssize_t *shape, const Py_ssize_t *strides, int nn,
                           const Py_ssize_t *new_shape)
{
    Py_ssize_t od[GC_MAX_DIMS], os[GC_MAX_DIMS];
    int k = 0;
    for (int i = 0; i < nd; i++)
        if (shape[i] != 1) {
            od[k] = shape[i];
            os[k++] = strides[i];
        }
    int oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < nn && oi < k) {
        Py_ssize_t np_ = new_shape[ni], op = od[oi];
        while (np_ != op) {
            if (np_ < op) {
                if (nj >= nn)
                    return 0;
                np_ *= new_shape[nj++];
            } else {
                if (oj >= k)
                    return 0;
                op *= od[oj++];
            }
        }
        for (int i = oi; i < oj - 1; i++)
            if (os[i] != od[i + 1] * os[i + 1])
                return 0;
        ni = nj++;
        oi = oj++;
    }
    return 1;
}

GC_DOC(fast_reshape_copy,
       "fast_reshape_copy(x, shape, /)\n--\n\n"
       "A new Tensor of shape (a tuple of ints, x's element count) holding x's elements in C "
       "order, when x is a plain float32 / float64 host Tensor of at least one element that "
       "numpy cannot reshape to shape without a copy; else None (the caller's numpy reshape: a "
       "view).  The values of numpy's copy, in one C call (copy.c's strided copy).");

PyObject *gc_py_fast_reshape_copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "fast_reshape_copy(x, shape) takes a Tensor and a tuple");
        return NULL;
    }
    if (!gc_fast_tensor_type)
        Py_RETURN_NONE;
    const char kind = gc_fast_kind(args[0]);
    Py_buffer a;
    if (!kind || !gc_fast_buf_flags(args[0], &a, PyBUF_RECORDS_RO))
        Py_RETURN_NONE;
    PyObject *shape = args[1];
    const Py_ssize_t nn = PyTuple_GET_SIZE(shape), isz = kind == 'f' ? 4 : 8;
    Py_ssize_t ns[GC_MAX_DIMS], total = 1, count = a.len / isz;
    int ok = a.ndim >= 1 && a.ndim <= GC_MAX_DIMS && nn <= GC_MAX_DIMS && count > 0;
    for (Py_ssize_t i = 0; ok && i < nn; i++) {
        ns[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        ok = ns[i] > 0;
        total *= ok ? ns[i] : 1;
    }
    PyErr_Clear();
    Py_ssize_t st[GC_MAX_DIMS];
    for (int i = 0; ok && i < a.ndim; i++)
        st[i] = a.strides[i] / isz;
    if (!ok || total != count || reshape_is_view(a.ndim, a.shape, st, (int)nn, ns)) {
        PyBuffer_Release(&a);
        Py_RETURN_NONE;
    }
    void *out;
    PyObject *res = gc_fast_new_shaped(Py_NewRef(shape), kind, &out);
    if (res) {
        gc_iter it;
        it.ndim = a.ndim;
        Py_ssize_t c = 1;
        for (int i = a.ndim - 1; i >= 0; i--) {
            it.shape[i] = a.shape[i];
            it.stride[0][i] = a.shape[i] > 1 ? st[i] : 0;
            it.stride[1][i] = a.shape[i] > 1 ? c : 0;
            c *= a.shape[i];
        }
        gc_iter_collapse(&it, 2);
        gc_copy(&it, a.buf, out, (size_t)isz);
    }
    PyBuffer_Release(&a);
    return res;
}

/* What the fast lane's files share (fastpath.c: the lane's state, its Tensor helpers and the
 * elementwise / matmul lanes; fastpath_nn.c: softmax and the normalizations; fastpath_view.c:
 * view Tensors). */
#ifndef GC_FASTPATH_H
#define GC_FASTPATH_H

#include <Python.h>

extern PyTypeObject *gc_fast_tensor_type; /* gpucore.Tensor, once fast_setup ran */
extern Py_ssize_t gc_fast_limit;          /* elements; 0 = lane closed */

/* 'f' or 'd' when t is a plain host Tensor of float32 / float64, else 0. */
char gc_fast_kind(PyObject *t);
/* gc_fast_kind, also for a Parameter (fast_accept): GEMM operands, normalization weights. */
char gc_fast_operand_kind(PyObject *t);
/* Every lane reads a Tensor's data through these: its buffer, or 0 (no error set) when it has
 * none (no _data yet) or not one of that kind. flags: as PyObject_GetBuffer's. */
int gc_fast_buf_flags(PyObject *t, Py_buffer *v, int flags);
/* A C-contiguous buffer of t's data, or 0 (no error set) when it is not one. */
int gc_fast_buf(PyObject *t, Py_buffer *v);
int gc_fast_buf_w(PyObject *t, Py_buffer *v, int writable); /* writable: for in-place updates */
int gc_fast_same_shape(const Py_buffer *a, const Py_buffer *b);
/* A new host Tensor (its ndarray over a host-cache block) shaped like src's data, or of the
 * given shape (a tuple, stolen); *ptr its first element. */
PyObject *gc_fast_new(PyObject *src, char kind, void **ptr);
PyObject *gc_fast_new_shaped(PyObject *shape, char kind, void **ptr);
/* A new bare Tensor: every slot None but _requires_grad and _retain (False); NULL on error. */
PyObject *gc_fast_alloc(void);
/* The byte offset of the Tensor's __slots__ member name, or -1 with an exception set. */
Py_ssize_t gc_fast_slot_offset(const char *name);

#endif

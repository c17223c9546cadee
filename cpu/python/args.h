/* Argument checking shared by the Python bindings of gpucore._cpu (cpu/python/<family>.c).
 *
 * Every binding acquires its buffers into a bufset (released together on every path), checks
 * their formats (TypeError), writability, alignment, contiguity, sizes and that every element
 * the kernel touches lies inside its buffer (ValueError), and aliasing between outputs and
 * inputs, before the kernel runs with the GIL released.  fn is the Python function's name; every
 * message starts with it.  Functions returning int give 0, or -1 with an exception set.
 */
#ifndef GPUCORE_PYTHON_ARGS_H
#define GPUCORE_PYTHON_ARGS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include "kernels.h"

/* The helpers below are internal to the extension: hidden, so that their short names can never
 * bind to another library's symbols. */
#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* ------------------------------------------------------------------------------------------ */
/* Buffers                                                                                     */

#define GC_MAXBUF 12

typedef struct {
    Py_buffer v[GC_MAXBUF];
    int n;
} bufset;

void bufs_release(bufset *bs);
/* The end of a binding whose kernel returned rc: the buffers released, then None, or NULL with a
 * MemoryError when rc < 0 (the kernel's scratch allocation failed). */
PyObject *bufs_done(bufset *bs, int rc);

/* Acquires obj's buffer (strides + format) into the set.  Outputs (writable) must be writable.
 * Items must be aligned to their size (1, 2, 4 or 8 bytes) and strides of non-trivial dims
 * multiples of it.  NULL with an exception set on failure. */
Py_buffer *get_buf(bufset *bs, const char *fn, const char *name, PyObject *obj, int writable);

/* Acquires args[0..nb) in order, v[i] named names[i], by modes[i]: 'r' read, 'w' written, or
 * 'R' / 'W' the same where None is allowed (then v[i] = NULL). */
int get_bufs(bufset *bs, const char *fn, PyObject *const *args, int nb,
             const char *const *names, const char *modes, Py_buffer **v);

Py_ssize_t buf_stride(const Py_buffer *v, int d); /* in bytes; NULL strides mean C order */
Py_ssize_t buf_nelem(const Py_buffer *v);
const char *shape_str(const Py_buffer *v, char *s, size_t cap); /* "(2, 3)" */
int buf_overlap(const Py_buffer *a, const Py_buffer *b);

/* ------------------------------------------------------------------------------------------ */
/* Formats                                                                                     */

/* Canonical one-letter type code: 'f' float32, 'd' float64, '?' bool, 'q' int64, 'Q' uint64,
 * 'i' int32, 'I' uint32, other single letters as given; 0 for formats we do not understand. */
char fmt_code(const Py_buffer *v);
int fmt_is_plain(const Py_buffer *v);                     /* no object pointers */
int fmt_same(const Py_buffer *a, const Py_buffer *b);     /* same element type */
const char *fmt_str(const Py_buffer *v);
/* The gc_elem of a buffer's format (bool, uint8, int8, int16, int32, int64, float32, float64),
 * or -1 for any other. */
int fmt_elem(const Py_buffer *v);
const char *kind_name(char k);

/* 'f' or 'd' for a float32 / float64 buffer, else 0 with TypeError set. */
char float_kind(const char *fn, const char *name, const Py_buffer *v);
/* Exactly type code k; TypeError otherwise. */
int need_kind(const char *fn, const char *name, const Py_buffer *v, char k);
int need_contig(const char *fn, const char *name, const Py_buffer *v);

/* The common case in one call: v[0..nb) (NULL entries skipped) checked in order, v[0] float32 or
 * float64 (its kind K), v[i] of kind kinds[i] ('=' for K, or a type code such as 'q', '?'), then
 * every one C-contiguous.  Returns K, or 0 with an exception set. */
char need_float_contig(const char *fn, int nb, Py_buffer *const *v, const char *const *names,
                       const char *kinds);

/* v must hold at least need elements; the context message (printf format + args) is formatted
 * only on failure. */
int need_elems(const char *fn, const char *name, const Py_buffer *v, Py_ssize_t need,
               const char *what_fmt, ...);

/* out must not share memory with in, except exactly (same start) when allow_same. */
int need_no_overlap(const char *fn, const char *oname, const Py_buffer *out, const char *iname,
                    const Py_buffer *in, int allow_same);

/* The operands of a batched product: for i < batch, A_i (m x k) from element i*sa of v[0], B_i
 * (k x n) from i*sb of v[1], C_i (m x n) at i*sc of v[2].  Checks the sizes (overflow-checked),
 * that the items of c do not overlap (sc >= m*n when batch > 1), that every buffer holds the
 * items read or written, and that c is apart from a and b.  Returns 1 when there is nothing to
 * compute (batch 0 or an empty C), 0 to go on, -1 with an exception set. */
int need_batched_product(const char *fn, Py_buffer *const *v, Py_ssize_t batch, Py_ssize_t m,
                         Py_ssize_t n, Py_ssize_t k, Py_ssize_t sa, Py_ssize_t sb, Py_ssize_t sc);

/* No written buffer v[i] (out[i] != 0) shares memory with another buffer v[j]; buffers that are
 * NULL or touch no element (need[i] == 0) are left out. */
int need_outputs_apart(const char *fn, int nb, Py_buffer *const *v, const char *const *names,
                       const Py_ssize_t *need, const int *out);

/* ------------------------------------------------------------------------------------------ */
/* Scalars                                                                                     */

int check_nargs(const char *fn, Py_ssize_t nargs, Py_ssize_t want);
int get_ssize(const char *fn, const char *name, PyObject *o, Py_ssize_t *out);
int get_min(const char *fn, const char *name, PyObject *o, Py_ssize_t lo, Py_ssize_t *out);
int get_flag(const char *fn, const char *name, PyObject *o, int *out); /* 0 or 1 */
/* An op code in [0, count), for messages named by the constants' prefix ("UNARY_"). */
int get_op(const char *fn, PyObject *o, int count, const char *prefix, int *out);
int get_double(const char *fn, const char *name, PyObject *o, double *out);
int get_unsigned(const char *fn, const char *name, PyObject *o, int bits, uint64_t *out);
int get_i64(const char *fn, const char *name, PyObject *o, int64_t *out);
/* x as Python's repr() writes it, into buf (for messages: PyErr_Format has no %g); returns buf. */
const char *repr_double(char *buf, size_t size, double x);

/* Overflow-checked arithmetic on non-negative sizes; *ok is cleared on overflow. */
Py_ssize_t smul(Py_ssize_t a, Py_ssize_t b, int *ok);
Py_ssize_t sadd(Py_ssize_t a, Py_ssize_t b, int *ok);
int overflow_error(const char *fn, const char *what); /* ValueError; returns -1 */
/* outer*n*inner and outer*inner, overflow-checked. */
int three_axis_sizes(const char *fn, Py_ssize_t outer, Py_ssize_t n, Py_ssize_t inner,
                     Py_ssize_t *total, Py_ssize_t *rows);

/* ------------------------------------------------------------------------------------------ */
/* Op names (cpu/python/module.c, from opcodes.def)                                            */

extern const char *const gc_unary_names[GC_UNARY_COUNT];   /* "NEG", ... */
extern const char *const gc_binary_names[GC_BINARY_COUNT]; /* "ADD", ... */
extern const char *const gc_reduce_names[GC_REDUCE_COUNT]; /* "SUM", ... */
/* "<prefix>RELU, <prefix>SIGMOID, ..." (the unary ops with a backward kernel, by code) into s. */
const char *act_names(char *s, size_t cap, const char *prefix);

/* ------------------------------------------------------------------------------------------ */
/* Broadcast iteration spaces                                                                  */

/* Sets operand o of it (whose shape is out's) from in: shapes right-aligned; a dim of in equal
 * to out's keeps its stride, a dim of 1 broadcasts (stride 0). */
int iter_broadcast(const char *fn, const char *name, const Py_buffer *in, const Py_buffer *out,
                   gc_iter *it, int o);
/* it's shape := out's (ndim <= GC_MAX_DIMS), operand o := out's C-order strides. */
int iter_init_out(const char *fn, const Py_buffer *out, gc_iter *it, int o);
/* An input sharing memory with the (contiguous) output is fine only when it is the very same
 * elements: same start and, on every non-trivial dim, out's strides. */
int iter_alias_ok(const char *fn, const char *iname, const Py_buffer *in, const Py_buffer *out,
                  const gc_iter *it, int oi, int oo);

/* ------------------------------------------------------------------------------------------ */
/* Convolution geometry (the bindings of im2col.c and conv.c)                                 */

/* Parses the 12 geometry ints g[0..12) (n, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw), computes
 * oh, ow and the element counts of x and col. */
int conv_geometry(const char *fn, PyObject *const *g, gc_conv *p, Py_ssize_t *nx,
                  Py_ssize_t *ncol);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif /* GPUCORE_PYTHON_ARGS_H */

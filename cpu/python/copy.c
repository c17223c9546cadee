/* Bindings of copy.c: copy between any strides. */
#include "args.h"
#include "bindings.h"

#include <stdlib.h>
#include <string.h>

GC_DOC(copy, "copy(src, dst, /)\n--\n\n"
                       "Copies src into dst: same shape (ndim <= 8) and format (item size 1, 2, "
                       "4 or 8), any strides; dst writable.  Overlapping views are handled.");

PyObject *gc_py_copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "copy";
    bufset bs = {.n = 0};
    void *tmp = NULL;
    if (check_nargs(fn, nargs, 2) < 0)
        return NULL;
    Py_buffer *s = get_buf(&bs, fn, "src", args[0], 0);
    Py_buffer *d = s ? get_buf(&bs, fn, "dst", args[1], 1) : NULL;
    if (!d)
        goto fail;
    const Py_ssize_t isz = s->itemsize;
    if (!fmt_is_plain(s) || !(isz == 1 || isz == 2 || isz == 4 || isz == 8)) {
        PyErr_Format(PyExc_TypeError,
                     "copy: 'src' must be a plain (no objects) format of item size 1, 2, 4 or 8, "
                     "got format '%s' with item size %zd",
                     fmt_str(s), isz);
        goto fail;
    }
    if (!fmt_same(s, d)) {
        PyErr_Format(PyExc_TypeError,
                     "copy: src has format '%s' (item size %zd) but dst has '%s' (item size %zd); "
                     "they must match",
                     fmt_str(s), isz, fmt_str(d), d->itemsize);
        goto fail;
    }
    int same_shape = s->ndim == d->ndim;
    for (int i = 0; same_shape && i < s->ndim; i++)
        same_shape = s->shape[i] == d->shape[i];
    if (!same_shape) {
        char s1[200], s2[200];
        PyErr_Format(PyExc_ValueError, "copy: src shape %s differs from dst shape %s",
                     shape_str(s, s1, sizeof s1), shape_str(d, s2, sizeof s2));
        goto fail;
    }
    if (d->ndim > GC_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "copy: %d dims; at most %d are supported", d->ndim,
                     GC_MAX_DIMS);
        goto fail;
    }
    const Py_ssize_t total = buf_nelem(d);
    if (total == 0)
        goto done;
    gc_iter it;
    memset(&it, 0, sizeof it);
    it.ndim = d->ndim;
    for (int i = 0; i < d->ndim; i++) {
        it.shape[i] = d->shape[i];
        it.stride[0][i] = d->shape[i] > 1 ? buf_stride(s, i) / isz : 0;
        it.stride[1][i] = d->shape[i] > 1 ? buf_stride(d, i) / isz : 0;
    }
    int same_elems = s->buf == d->buf;
    for (int i = 0; same_elems && i < d->ndim; i++)
        same_elems = it.stride[0][i] == it.stride[1][i];
    if (same_elems)
        goto done;
    if (!buf_overlap(s, d)) {
        iter_collapse(&it, 2);
        Py_BEGIN_ALLOW_THREADS
        gc_copy(&it, s->buf, d->buf, (size_t)isz);
        Py_END_ALLOW_THREADS
        goto done;
    }
    /* overlapping views: go through a contiguous temporary */
    tmp = malloc((size_t)total * (size_t)isz);
    if (!tmp) {
        PyErr_NoMemory();
        goto fail;
    }
    gc_iter in = it, outit = it;
    Py_ssize_t st = 1;
    for (int i = d->ndim - 1; i >= 0; i--) {
        in.stride[1][i] = d->shape[i] > 1 ? st : 0;  /* src -> tmp */
        outit.stride[0][i] = d->shape[i] > 1 ? st : 0; /* tmp -> dst */
        st *= d->shape[i];
    }
    iter_collapse(&in, 2);
    iter_collapse(&outit, 2);
    Py_BEGIN_ALLOW_THREADS
    gc_copy(&in, s->buf, tmp, (size_t)isz);
    gc_copy(&outit, tmp, d->buf, (size_t)isz);
    Py_END_ALLOW_THREADS
done:
    free(tmp);
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    free(tmp);
    bufs_release(&bs);
    return NULL;
}

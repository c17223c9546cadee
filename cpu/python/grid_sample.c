/* Bindings of grid_sample.c: grid_sample, grid_sample_backward. */
#include "args.h"
#include "bindings.h"

#include <string.h>

/* A mode given by PyTorch's name: its index in names[0..count), or -1 with ValueError set. */
static int get_name(const char *fn, const char *what, PyObject *o, const char *const *names,
                    int count)
{
    const char *s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : NULL;
    if (s)
        for (int i = 0; i < count; i++)
            if (strcmp(s, names[i]) == 0)
                return i;
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s: %s must be one of '%s', '%s', '%s', got %R", fn, what,
                 names[0], names[1], names[2], o);
    return -1;
}

/* The 10 trailing arguments n, c, d, h, w, p, nd, mode, padding, align into *q, and the element
 * counts of x, grid and out. */
static int grid_args(const char *fn, PyObject *const *g, gc_grid *q, Py_ssize_t need[3])
{
    static const char *modes[] = {"bilinear", "nearest", "bicubic"};
    static const char *pads[] = {"zeros", "border", "reflection"};
    Py_ssize_t nd;
    if (get_min(fn, "n", g[0], 0, &q->n) < 0 || get_min(fn, "c", g[1], 0, &q->c) < 0 ||
        get_min(fn, "d", g[2], 1, &q->d) < 0 || get_min(fn, "h", g[3], 1, &q->h) < 0 ||
        get_min(fn, "w", g[4], 1, &q->w) < 0 || get_min(fn, "p", g[5], 0, &q->p) < 0 ||
        get_min(fn, "nd", g[6], 2, &nd) < 0)
        return -1;
    if (nd > 3) {
        PyErr_Format(PyExc_ValueError, "%s: nd must be 2 or 3, got %zd", fn, nd);
        return -1;
    }
    q->nd = (int)nd;
    if ((q->mode = get_name(fn, "mode", g[7], modes, 3)) < 0 ||
        (q->pad = get_name(fn, "padding", g[8], pads, 3)) < 0 ||
        get_flag(fn, "align", g[9], &q->align) < 0)
        return -1;
    if (q->nd == 2 && q->d != 1) {
        PyErr_Format(PyExc_ValueError, "%s: d must be 1 when nd = 2, got %zd", fn, q->d);
        return -1;
    }
    if (q->mode == GC_GRID_BICUBIC && q->nd != 2) {
        PyErr_Format(PyExc_ValueError, "%s: bicubic sampling needs nd = 2, got %d", fn, q->nd);
        return -1;
    }
    int ok = 1;
    const Py_ssize_t plane = smul(q->d, smul(q->h, q->w, &ok), &ok);
    need[0] = smul(smul(q->n, q->c, &ok), plane, &ok);
    need[1] = smul(smul(q->n, q->p, &ok), nd, &ok);
    need[2] = smul(smul(q->n, q->c, &ok), q->p, &ok);
    if (!ok)
        return overflow_error(fn, "n * c * d * h * w, n * p * nd or n * c * p");
    return 0;
}

#define GRID_CTX "n=%zd, c=%zd, d=%zd, h=%zd, w=%zd, p=%zd, nd=%d"
#define GRID_VALS q.n, q.c, q.d, q.h, q.w, q.p, q.nd

GC_DOC(grid_sample,
       "grid_sample(x, grid, out, n, c, d, h, w, p, nd, mode, padding, align, /)\n--\n\n"
       "out [n, c, p] sampled from x [n, c, d, h, w] (d = 1 and nd = 2 for a 4-D input) at the "
       "points grid [n, p, nd] in [-1, 1] (coordinate 0 along w), as "
       "torch.nn.functional.grid_sample: mode 'bilinear' / 'nearest' / 'bicubic' (nd = 2), "
       "padding 'zeros' / 'border' / 'reflection', align = align_corners.  x, grid, out "
       "C-contiguous of one float format; out apart from the inputs.");

PyObject *gc_py_grid_sample(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char *fn = "grid_sample";
    static const char *names[] = {"x", "grid", "out"};
    gc_grid q;
    Py_ssize_t need[3];
    bufset bs = {.n = 0};
    Py_buffer *v[3];
    if (check_nargs(fn, nargs, 13) < 0 || grid_args(fn, args + 3, &q, need) < 0)
        return NULL;
    if (get_bufs(&bs, fn, args, 3, names, "rrw", v) < 0)
        goto fail;
    const char kd = need_float_contig(fn, 3, v, names, "===");
    if (!kd)
        goto fail;
    for (int i = 0; i < 3; i++)
        if (need_elems(fn, names[i], v[i], need[i], GRID_CTX, GRID_VALS) < 0)
            goto fail;
    static const int out[3] = {0, 0, 1};
    if (need_outputs_apart(fn, 3, v, names, need, out) < 0)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_grid_sample_f32(v[0]->buf, v[1]->buf, v[2]->buf, &q);
    else
        gc_grid_sample_f64(v[0]->buf, v[1]->buf, v[2]->buf, &q);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(grid_sample_backward,
       "grid_sample_backward(g, x, grid, gx, ggrid, n, c, d, h, w, p, nd, mode, padding, align, "
       "/)\n--\n\n"
       "The gradients of grid_sample given g [n, c, p]: gx (x's size, or None) and ggrid "
       "(grid's size, or None; zeros for 'nearest'), PyTorch's formulas.  Outputs apart from "
       "each other and from the inputs.");

PyObject *gc_py_grid_sample_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char *fn = "grid_sample_backward";
    static const char *names[] = {"g", "x", "grid", "gx", "ggrid"};
    gc_grid q;
    Py_ssize_t sz[3];
    bufset bs = {.n = 0};
    Py_buffer *v[5];
    if (check_nargs(fn, nargs, 15) < 0 || grid_args(fn, args + 5, &q, sz) < 0)
        return NULL;
    if (get_bufs(&bs, fn, args, 5, names, "rrrWW", v) < 0)
        goto fail;
    const char kd = need_float_contig(fn, 5, v, names, "=====");
    if (!kd)
        goto fail;
    const Py_ssize_t need[5] = {sz[2], sz[0], sz[1], sz[0], sz[1]};
    for (int i = 0; i < 5; i++)
        if (v[i] && need_elems(fn, names[i], v[i], need[i], GRID_CTX, GRID_VALS) < 0)
            goto fail;
    static const int out[5] = {0, 0, 0, 1, 1};
    if (need_outputs_apart(fn, 5, v, names, need, out) < 0)
        goto fail;
    void *gx = v[3] ? v[3]->buf : NULL, *gg = v[4] ? v[4]->buf : NULL;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_grid_sample_backward_f32(v[0]->buf, v[1]->buf, v[2]->buf, gx, gg, &q);
    else
        gc_grid_sample_backward_f64(v[0]->buf, v[1]->buf, v[2]->buf, gx, gg, &q);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

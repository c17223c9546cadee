/* Bindings of optim.c: sgd_step, adam_step, rmsprop_step and their multi-tensor entries. */
#include "args.h"
#include "bindings.h"

#include <string.h>

/* The buffers of one update: args[0] = param (written), args[1] = grad (read), args[2..nbuf) =
 * state buffers (written; None allowed where optional[i]).  All of param's float kind,
 * C-contiguous and of param's element count; no two may share memory.  ptrs[i] is NULL for a
 * None.  Returns the kind ('f' / 'd'), or 0 with an exception set. */
static char optim_bufs(bufset *bs, const char *fn, PyObject *const *args, int nbuf,
                       const char *const *names, const int *optional, void **ptrs,
                       Py_ssize_t *n)
{
    Py_buffer *v[GC_MAXBUF];
    char kd = 0;
    *n = 0;
    for (int i = 0; i < nbuf; i++) {
        v[i] = NULL;
        ptrs[i] = NULL;
        if (args[i] == Py_None) {
            if (!optional[i]) {
                PyErr_Format(PyExc_TypeError, "%s: '%s' must be a float buffer, got None", fn,
                             names[i]);
                return 0;
            }
            continue;
        }
        v[i] = get_buf(bs, fn, names[i], args[i], i != 1);
        if (!v[i])
            return 0;
        if (i == 0) {
            kd = float_kind(fn, names[0], v[0]);
            if (!kd)
                return 0;
            *n = buf_nelem(v[0]);
        } else if (need_kind(fn, names[i], v[i], kd) < 0) {
            return 0;
        }
        if (need_contig(fn, names[i], v[i]) < 0)
            return 0;
        if (i > 0 && buf_nelem(v[i]) != *n) {
            PyErr_Format(PyExc_ValueError,
                         "%s: '%s' holds %zd elements but '%s' holds %zd; every buffer of an "
                         "update has the parameter's size",
                         fn, names[i], buf_nelem(v[i]), names[0], *n);
            return 0;
        }
        ptrs[i] = v[i]->buf;
    }
    /* every buffer is C-contiguous by now: it spans [buf, buf + len) (cheaper than buf_extent,
     * which a multi-tensor call would run for every pair of every parameter) */
    for (int i = 0; i < nbuf; i++) {
        for (int j = i + 1; j < nbuf; j++) {
            if (v[i] && v[j] && v[i]->len > 0 && v[j]->len > 0 &&
                (const char *)v[i]->buf < (const char *)v[j]->buf + v[j]->len &&
                (const char *)v[j]->buf < (const char *)v[i]->buf + v[i]->len) {
                PyErr_Format(PyExc_ValueError,
                             "%s: '%s' and '%s' share memory; the parameter, its gradient and "
                             "each state buffer must be separate arrays",
                             fn, names[i], names[j]);
                return 0;
            }
        }
    }
    return kd;
}

/* A real number that must be finite and >= lo (hyper-parameters). */
static int get_hp(const char *fn, const char *name, PyObject *o, double lo, double *out)
{
    if (get_double(fn, name, o, out) < 0)
        return -1;
    if (!(*out >= lo && *out - *out == 0.0)) { /* NaN, inf and values below lo */
        char low[32];
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be a finite number >= %s, got %R", fn, name,
                     repr_double(low, sizeof low, lo), o);
        return -1;
    }
    return 0;
}

/* The shared hyper-parameters of each optimizer, parsed and checked the same way by the
 * single-tensor and the multi-tensor entries (a = the arguments after the buffers). */

/* lr, momentum, dampening, weight_decay, nesterov, maximize (SGD's `first` is parsed apart: the
 * multi entry takes one per parameter). */
static int sgd_hp(const char *fn, PyObject *const *a, gc_optim_hp *h)
{
    if (get_hp(fn, "lr", a[0], 0.0, &h->lr) < 0 ||
        get_hp(fn, "momentum", a[1], 0.0, &h->momentum) < 0 ||
        get_double(fn, "dampening", a[2], &h->dampening) < 0 ||
        get_hp(fn, "weight_decay", a[3], 0.0, &h->weight_decay) < 0 ||
        get_flag(fn, "nesterov", a[4], &h->nesterov) < 0 ||
        get_flag(fn, "maximize", a[5], &h->maximize) < 0)
        return -1;
    return 0;
}

/* lr, beta1, beta2, eps, weight_decay, decoupled, maximize (the step comes before them). */
static int adam_hp(const char *fn, PyObject *const *a, gc_optim_hp *h)
{
    if (get_hp(fn, "lr", a[0], 0.0, &h->lr) < 0 ||
        get_hp(fn, "beta1", a[1], 0.0, &h->beta1) < 0 ||
        get_hp(fn, "beta2", a[2], 0.0, &h->beta2) < 0 ||
        get_hp(fn, "eps", a[3], 0.0, &h->eps) < 0 ||
        get_hp(fn, "weight_decay", a[4], 0.0, &h->weight_decay) < 0 ||
        get_flag(fn, "decoupled", a[5], &h->decoupled) < 0 ||
        get_flag(fn, "maximize", a[6], &h->maximize) < 0)
        return -1;
    if (h->beta1 >= 1.0 || h->beta2 >= 1.0) {
        char b1[32], b2[32];
        PyErr_Format(PyExc_ValueError, "%s: betas must be in [0, 1), got (%s, %s)", fn,
                     repr_double(b1, sizeof b1, h->beta1), repr_double(b2, sizeof b2, h->beta2));
        return -1;
    }
    return 0;
}

/* lr, alpha, eps, weight_decay, momentum, maximize. */
static int rmsprop_hp(const char *fn, PyObject *const *a, gc_optim_hp *h)
{
    if (get_hp(fn, "lr", a[0], 0.0, &h->lr) < 0 ||
        get_hp(fn, "alpha", a[1], 0.0, &h->alpha) < 0 ||
        get_hp(fn, "eps", a[2], 0.0, &h->eps) < 0 ||
        get_hp(fn, "weight_decay", a[3], 0.0, &h->weight_decay) < 0 ||
        get_hp(fn, "momentum", a[4], 0.0, &h->momentum) < 0 ||
        get_flag(fn, "maximize", a[5], &h->maximize) < 0)
        return -1;
    return 0;
}

/* Adam's step count after the update (>= 1). */
static int adam_step_count(const char *fn, const char *name, PyObject *o, int64_t *out)
{
    if (get_i64(fn, name, o, out) < 0)
        return -1;
    if (*out < 1) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' must be >= 1, got %lld", fn, name,
                     (long long)*out);
        return -1;
    }
    return 0;
}

GC_DOC(sgd_step,
             "sgd_step(param, grad, momentum_buffer, lr, momentum, dampening, weight_decay, "
             "nesterov, maximize, first, /)\n--\n\n"
             "One SGD update in place, as torch.optim.SGD: g = (maximize ? -grad : grad) + "
             "weight_decay * param; with momentum != 0, buf = first ? g : momentum * buf + "
             "(1 - dampening) * g and g = nesterov ? g + momentum * buf : buf; param -= lr * g.  "
             "momentum_buffer may be None when momentum == 0.");

PyObject *gc_py_sgd_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "sgd_step";
    static const char *const names[3] = {"param", "grad", "momentum_buffer"};
    bufset bs = {.n = 0};
    gc_optim_hp h = {0};
    if (check_nargs(fn, nargs, 10) < 0 || sgd_hp(fn, args + 3, &h) < 0 ||
        get_flag(fn, "first", args[9], &h.first) < 0)
        return NULL;
    const int optional[3] = {0, 0, h.momentum == 0.0};
    void *p[3];
    Py_ssize_t n;
    const char kd = optim_bufs(&bs, fn, args, 3, names, optional, p, &n);
    if (!kd)
        goto fail;
    if (h.momentum == 0.0)
        p[2] = NULL;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_sgd_step_f32((float *)p[0], (const float *)p[1], (float *)p[2], n, &h);
    else
        gc_sgd_step_f64((double *)p[0], (const double *)p[1], (double *)p[2], n, &h);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(adam_step,
             "adam_step(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, beta2, "
             "eps, weight_decay, decoupled, maximize, /)\n--\n\n"
             "One Adam (decoupled=0) or AdamW (decoupled=1) update in place, as torch.optim.Adam: "
             "step is the count after this update (>= 1); max_exp_avg_sq is None unless amsgrad.");

PyObject *gc_py_adam_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "adam_step";
    static const char *const names[5] = {"param", "grad", "exp_avg", "exp_avg_sq",
                                         "max_exp_avg_sq"};
    bufset bs = {.n = 0};
    gc_optim_hp h = {0};
    if (check_nargs(fn, nargs, 13) < 0 || adam_step_count(fn, "step", args[5], &h.step) < 0 ||
        adam_hp(fn, args + 6, &h) < 0)
        return NULL;
    const int optional[5] = {0, 0, 0, 0, 1};
    void *p[5];
    Py_ssize_t n;
    const char kd = optim_bufs(&bs, fn, args, 5, names, optional, p, &n);
    if (!kd)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_adam_step_f32((float *)p[0], (const float *)p[1], (float *)p[2], (float *)p[3],
                         (float *)p[4], n, &h);
    else
        gc_adam_step_f64((double *)p[0], (const double *)p[1], (double *)p[2], (double *)p[3],
                         (double *)p[4], n, &h);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(rmsprop_step,
             "rmsprop_step(param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, eps, "
             "weight_decay, momentum, maximize, /)\n--\n\n"
             "One RMSprop update in place, as torch.optim.RMSprop: grad_avg is None unless "
             "centered; momentum_buffer may be None when momentum == 0.");

PyObject *gc_py_rmsprop_step(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "rmsprop_step";
    static const char *const names[5] = {"param", "grad", "square_avg", "grad_avg",
                                         "momentum_buffer"};
    bufset bs = {.n = 0};
    gc_optim_hp h = {0};
    if (check_nargs(fn, nargs, 11) < 0 || rmsprop_hp(fn, args + 5, &h) < 0)
        return NULL;
    const int optional[5] = {0, 0, 0, 1, h.momentum == 0.0};
    void *p[5];
    Py_ssize_t n;
    const char kd = optim_bufs(&bs, fn, args, 5, names, optional, p, &n);
    if (!kd)
        goto fail;
    if (h.momentum == 0.0)
        p[4] = NULL;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_rmsprop_step_f32((float *)p[0], (const float *)p[1], (float *)p[2], (float *)p[3],
                            (float *)p[4], n, &h);
    else
        gc_rmsprop_step_f64((double *)p[0], (const double *)p[1], (double *)p[2],
                            (double *)p[3], (double *)p[4], n, &h);
    Py_END_ALLOW_THREADS
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* multi-tensor ("foreach") optimizer updates (optim.c)                                        */

/* One multi-tensor call: the tensor lists as private tuples (validation can run Python code —
 * buffer exporters, __index__ — which must not be able to resize a caller's list under us), k
 * parameters, one buffer set per parameter (every buffer stays acquired until the kernel is
 * done) and one kernel item per parameter. */
typedef struct {
    PyObject *seqs[GC_MAXBUF]; /* NULL for a None list */
    Py_ssize_t k;
    bufset *sets;
    gc_optim_item *items;
} optim_multi;

static void multi_release(optim_multi *m)
{
    if (m->sets) {
        for (Py_ssize_t j = 0; j < m->k; j++)
            bufs_release(&m->sets[j]);
        PyMem_Free(m->sets);
    }
    PyMem_Free(m->items);
    for (int i = 0; i < GC_MAXBUF; i++)
        Py_CLEAR(m->seqs[i]);
    m->sets = NULL;
    m->items = NULL;
}

/* Reads the tensor lists args[0..nbuf) (each a list or tuple, all of param's length; None where
 * optional[i], as if every entry were None) and allocates the items, each with the shared
 * hyper-parameters h.  0, or -1 with an exception set (the caller releases m either way). */
static int multi_lists(optim_multi *m, const char *fn, PyObject *const *args, int nbuf,
                       const char *const *names, const int *optional, const gc_optim_hp *h)
{
    for (int i = 0; i < nbuf; i++) {
        PyObject *o = args[i];
        if (o == Py_None && optional[i])
            continue;
        if (!PyList_Check(o) && !PyTuple_Check(o)) {
            PyErr_Format(PyExc_TypeError,
                         "%s: '%s' must be a list or tuple of arrays, one per parameter%s; got "
                         "%.100s",
                         fn, names[i], optional[i] ? " (or None)" : "", Py_TYPE(o)->tp_name);
            return -1;
        }
        m->seqs[i] = PySequence_Tuple(o);
        if (!m->seqs[i])
            return -1;
        const Py_ssize_t len = PyTuple_GET_SIZE(m->seqs[i]);
        if (i == 0) {
            m->k = len;
        } else if (len != m->k) {
            PyErr_Format(PyExc_ValueError,
                         "%s: '%s' has %zd entries but '%s' has %zd; every list has one entry per "
                         "parameter",
                         fn, names[i], len, names[0], m->k);
            return -1;
        }
    }
    const size_t k1 = m->k > 0 ? (size_t)m->k : 1;
    m->sets = PyMem_Malloc(k1 * sizeof(bufset));
    if (!m->sets) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t j = 0; j < m->k; j++)
        m->sets[j].n = 0; /* before anything can fail: multi_release reads every set */
    m->items = PyMem_Malloc(k1 * sizeof(gc_optim_item));
    if (!m->items) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t j = 0; j < m->k; j++) {
        memset(&m->items[j], 0, sizeof(gc_optim_item));
        m->items[j].h = *h;
    }
    return 0;
}

/* A per-parameter int argument (Adam's step, SGD's first): a list or tuple of k values; returns
 * a new reference to a tuple, or NULL with an exception set. */
static PyObject *multi_ints(const char *fn, const char *name, PyObject *o, Py_ssize_t k)
{
    if (!PyList_Check(o) && !PyTuple_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s: '%s' must be a list or tuple of ints, one per "
                     "parameter; got %.100s", fn, name, Py_TYPE(o)->tp_name);
        return NULL;
    }
    PyObject *t = PySequence_Tuple(o);
    if (t && PyTuple_GET_SIZE(t) != k) {
        PyErr_Format(PyExc_ValueError, "%s: '%s' has %zd entries but 'param' has %zd; every list "
                     "has one entry per parameter", fn, name, PyTuple_GET_SIZE(t), k);
        Py_CLEAR(t);
    }
    return t;
}

/* "name[j]" into s (cap >= 32): the name of parameter j's entry in a list, for messages.  By
 * hand, not with PyOS_snprintf: formatting it took half the checking time of a call. */
static const char *indexed_name(char *s, size_t cap, const char *name, Py_ssize_t j)
{
    char digits[24];
    int nd = 0;
    size_t u = (size_t)j;
    do {
        digits[nd++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    size_t len = strlen(name);
    if (len + (size_t)nd + 3 > cap)
        len = cap - (size_t)nd - 3;
    memcpy(s, name, len);
    s[len++] = '[';
    while (nd)
        s[len++] = digits[--nd];
    s[len++] = ']';
    s[len] = '\0';
    return s;
}

/* A buffer's memory for the whole-call overlap check. */
typedef struct {
    uintptr_t lo, hi;
    Py_ssize_t j; /* parameter index */
    int list;     /* 1 = grad (read only) */
} optim_span;

/* Sorts spans by start: heapsort, in place (qsort allocates and calls a comparator per step;
 * this runs on every optimizer step). */
static void span_sift(optim_span *sp, Py_ssize_t root, Py_ssize_t n)
{
    const optim_span x = sp[root];
    for (;;) {
        Py_ssize_t c = 2 * root + 1;
        if (c >= n)
            break;
        if (c + 1 < n && sp[c + 1].lo > sp[c].lo)
            c++;
        if (sp[c].lo <= x.lo)
            break;
        sp[root] = sp[c];
        root = c;
    }
    sp[root] = x;
}

static void span_sort(optim_span *sp, Py_ssize_t n)
{
    for (Py_ssize_t r = n / 2 - 1; r >= 0; r--)
        span_sift(sp, r, n);
    for (Py_ssize_t e = n - 1; e > 0; e--) {
        const optim_span t = sp[0];
        sp[0] = sp[e];
        sp[e] = t;
        span_sift(sp, 0, e);
    }
}

/* No buffer that the call writes may share memory with any other buffer of the call (the items
 * run concurrently, so an overlap between parameters would be a race whose bits depend on the
 * thread count); gradients may share memory with one another.  Sorted by start, a buffer
 * overlaps an earlier one iff the earlier one reaching furthest ends after its start: the
 * furthest of all earlier ones when it is written, of the earlier written ones when it is a
 * gradient.  0, or -1 with ValueError naming the pair. */
static int multi_disjoint(const char *fn, optim_multi *m, int nbuf, const char *const *names)
{
    optim_span *sp = PyMem_Malloc((size_t)m->k * (size_t)nbuf * sizeof(optim_span));
    if (!sp) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t cnt = 0;
    for (Py_ssize_t j = 0; j < m->k; j++) {
        int c = 0; /* the set holds the non-None buffers in list order */
        for (int i = 0; i < nbuf; i++) {
            if (!m->seqs[i] || PyTuple_GET_ITEM(m->seqs[i], j) == Py_None)
                continue;
            const Py_buffer *v = &m->sets[j].v[c++]; /* C-contiguous: buf .. buf + len */
            if (v->len > 0)
                sp[cnt++] = (optim_span){(uintptr_t)v->buf, (uintptr_t)v->buf + (uintptr_t)v->len,
                                         j, i};
        }
    }
    span_sort(sp, cnt);
    Py_ssize_t any = -1, wr = -1; /* the earlier spans reaching furthest: any, written */
    for (Py_ssize_t s = 0; s < cnt; s++) {
        const Py_ssize_t prev = sp[s].list == 1 ? wr : any;
        if (prev >= 0 && sp[prev].hi > sp[s].lo) {
            PyErr_Format(PyExc_ValueError,
                         "%s: '%s[%zd]' and '%s[%zd]' share memory; every parameter and state "
                         "buffer of one call must be a separate array (pass each parameter "
                         "once)",
                         fn, names[sp[prev].list], sp[prev].j, names[sp[s].list], sp[s].j);
            PyMem_Free(sp);
            return -1;
        }
        if (any < 0 || sp[s].hi > sp[any].hi)
            any = s;
        if (sp[s].list != 1 && (wr < 0 || sp[s].hi > sp[wr].hi))
            wr = s;
    }
    PyMem_Free(sp);
    return 0;
}

/* Acquires and checks every buffer (per parameter as the single entry does, one float format for
 * the whole call, no memory shared between parameters) and points the items at them.  Returns
 * the kind ('f' / 'd'), or 0 with an exception set.  Call only with k > 0. */
static char multi_bufs(optim_multi *m, const char *fn, int nbuf, const char *const *names,
                       const int *optional)
{
    char kd0 = 0;
    for (Py_ssize_t j = 0; j < m->k; j++) {
        PyObject *a[GC_MAXBUF];
        char nm[GC_MAXBUF][48];
        const char *nms[GC_MAXBUF];
        for (int i = 0; i < nbuf; i++) {
            a[i] = m->seqs[i] ? PyTuple_GET_ITEM(m->seqs[i], j) : Py_None;
            nms[i] = indexed_name(nm[i], sizeof nm[i], names[i], j);
        }
        void *p[GC_MAXBUF];
        Py_ssize_t n;
        const char kd = optim_bufs(&m->sets[j], fn, a, nbuf, nms, optional, p, &n);
        if (!kd)
            return 0;
        if (j == 0) {
            kd0 = kd;
        } else if (kd != kd0) {
            PyErr_Format(PyExc_TypeError,
                         "%s: 'param[%zd]' is %s but 'param[0]' is %s; every buffer of one call "
                         "has one float format",
                         fn, j, kind_name(kd), kind_name(kd0));
            return 0;
        }
        gc_optim_item *it = &m->items[j];
        it->p = p[0];
        it->g = p[1];
        it->s1 = nbuf > 2 ? p[2] : NULL;
        it->s2 = nbuf > 3 ? p[3] : NULL;
        it->s3 = nbuf > 4 ? p[4] : NULL;
        it->n = n;
    }
    if (m->k > 1 && multi_disjoint(fn, m, nbuf, names) < 0)
        return 0;
    return kd0;
}

/* Runs the checked call with the GIL released; releases m. */
static PyObject *multi_run(optim_multi *m, int opt, char kd)
{
    gc_optim_item *items = m->items;
    const Py_ssize_t k = m->k;
    Py_BEGIN_ALLOW_THREADS
    gc_optim_step_multi(opt, kd == 'd', items, k);
    Py_END_ALLOW_THREADS
    multi_release(m);
    Py_RETURN_NONE;
}

GC_DOC(sgd_step_multi,
             "sgd_step_multi(param, grad, momentum_buffer, lr, momentum, dampening, weight_decay, "
             "nesterov, maximize, first, /)\n--\n\n"
             "sgd_step on many parameters in one call: param, grad and momentum_buffer are lists "
             "(or tuples) of arrays, one entry per parameter (momentum_buffer may be None, or "
             "hold None, when momentum == 0); first is 0 / 1 for every parameter or a list of "
             "flags, one per parameter.  Everything is checked before any memory is written; "
             "the result is bitwise that of one sgd_step per parameter.");

PyObject *gc_py_sgd_step_multi(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "sgd_step_multi";
    static const char *const names[3] = {"param", "grad", "momentum_buffer"};
    gc_optim_hp h = {0};
    optim_multi m = {.k = 0};
    PyObject *first = NULL;
    int first_all = -1; /* the shared flag, or -1 for a list */
    if (check_nargs(fn, nargs, 10) < 0 || sgd_hp(fn, args + 3, &h) < 0)
        return NULL;
    if (!PyList_Check(args[9]) && !PyTuple_Check(args[9]) &&
        get_flag(fn, "first", args[9], &first_all) < 0)
        return NULL;
    const int optional[3] = {0, 0, h.momentum == 0.0};
    if (multi_lists(&m, fn, args, 3, names, optional, &h) < 0)
        goto fail;
    if (first_all < 0) {
        first = multi_ints(fn, "first", args[9], m.k);
        if (!first)
            goto fail;
    }
    for (Py_ssize_t j = 0; j < m.k; j++) {
        char nm[48];
        indexed_name(nm, sizeof nm, "first", j);
        if (first_all >= 0)
            m.items[j].h.first = first_all;
        else if (get_flag(fn, nm, PyTuple_GET_ITEM(first, j), &m.items[j].h.first) < 0)
            goto fail;
    }
    Py_CLEAR(first);
    if (m.k == 0) {
        multi_release(&m);
        Py_RETURN_NONE;
    }
    const char kd = multi_bufs(&m, fn, 3, names, optional);
    if (!kd)
        goto fail;
    if (h.momentum == 0.0) /* as sgd_step: a buffer passed with momentum 0 is checked, not used */
        for (Py_ssize_t j = 0; j < m.k; j++)
            m.items[j].s1 = NULL;
    return multi_run(&m, GC_OPTIM_SGD, kd);
fail:
    Py_XDECREF(first);
    multi_release(&m);
    return NULL;
}

GC_DOC(adam_step_multi,
             "adam_step_multi(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, step, lr, beta1, "
             "beta2, eps, weight_decay, decoupled, maximize, /)\n--\n\n"
             "adam_step on many parameters in one call: the tensor arguments are lists (or "
             "tuples) of arrays, one entry per parameter (max_exp_avg_sq may be None: no "
             "amsgrad), and step is a list of ints, each parameter's count after this update "
             "(>= 1).  Everything is checked before any memory is written; the result is bitwise "
             "that of one adam_step per parameter.");

PyObject *gc_py_adam_step_multi(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "adam_step_multi";
    static const char *const names[5] = {"param", "grad", "exp_avg", "exp_avg_sq",
                                         "max_exp_avg_sq"};
    gc_optim_hp h = {0};
    optim_multi m = {.k = 0};
    PyObject *steps = NULL;
    if (check_nargs(fn, nargs, 13) < 0 || adam_hp(fn, args + 6, &h) < 0)
        return NULL;
    const int optional[5] = {0, 0, 0, 0, 1};
    if (multi_lists(&m, fn, args, 5, names, optional, &h) < 0)
        goto fail;
    steps = multi_ints(fn, "step", args[5], m.k);
    if (!steps)
        goto fail;
    for (Py_ssize_t j = 0; j < m.k; j++) {
        char nm[48];
        indexed_name(nm, sizeof nm, "step", j);
        if (adam_step_count(fn, nm, PyTuple_GET_ITEM(steps, j), &m.items[j].h.step) < 0)
            goto fail;
    }
    Py_CLEAR(steps);
    if (m.k == 0) {
        multi_release(&m);
        Py_RETURN_NONE;
    }
    const char kd = multi_bufs(&m, fn, 5, names, optional);
    if (!kd)
        goto fail;
    return multi_run(&m, GC_OPTIM_ADAM, kd);
fail:
    Py_XDECREF(steps);
    multi_release(&m);
    return NULL;
}

GC_DOC(rmsprop_step_multi,
             "rmsprop_step_multi(param, grad, square_avg, grad_avg, momentum_buffer, lr, alpha, "
             "eps, weight_decay, momentum, maximize, /)\n--\n\n"
             "rmsprop_step on many parameters in one call: the tensor arguments are lists (or "
             "tuples) of arrays, one entry per parameter; grad_avg may be None (not centered), "
             "momentum_buffer may be None when momentum == 0.  Everything is checked before any "
             "memory is written; the result is bitwise that of one rmsprop_step per parameter.");

PyObject *gc_py_rmsprop_step_multi(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "rmsprop_step_multi";
    static const char *const names[5] = {"param", "grad", "square_avg", "grad_avg",
                                         "momentum_buffer"};
    gc_optim_hp h = {0};
    optim_multi m = {.k = 0};
    if (check_nargs(fn, nargs, 11) < 0 || rmsprop_hp(fn, args + 5, &h) < 0)
        return NULL;
    const int optional[5] = {0, 0, 0, 1, h.momentum == 0.0};
    if (multi_lists(&m, fn, args, 5, names, optional, &h) < 0)
        goto fail;
    if (m.k == 0) {
        multi_release(&m);
        Py_RETURN_NONE;
    }
    const char kd = multi_bufs(&m, fn, 5, names, optional);
    if (!kd)
        goto fail;
    if (h.momentum == 0.0) /* as rmsprop_step: a buffer passed with momentum 0 is not used */
        for (Py_ssize_t j = 0; j < m.k; j++)
            m.items[j].s3 = NULL;
    return multi_run(&m, GC_OPTIM_RMSPROP, kd);
fail:
    multi_release(&m);
    return NULL;
}

/* Bindings of recurrent.c: rnn_forward, rnn_backward (one layer, one direction, the whole
 * sequence per call; plain bindings: they read batch_sizes to check it). */
#include "args.h"
#include "bindings.h"

/* mode, reverse, T, B, H (args a[0..5)), each checked; G and E from the mode. */
static int rnn_dims(const char *fn, PyObject *const *a, gc_rnn *p, Py_ssize_t *g,
                    Py_ssize_t *e)
{
    Py_ssize_t mode;
    if (get_ssize(fn, "mode", a[0], &mode) < 0 || get_flag(fn, "reverse", a[1], &p->reverse) < 0 ||
        get_min(fn, "T", a[2], 0, &p->t) < 0 || get_min(fn, "B", a[3], 0, &p->b) < 0 ||
        get_min(fn, "H", a[4], 0, &p->h) < 0)
        return -1;
    if (mode < GC_RNN_TANH || mode > GC_RNN_GRU) {
        PyErr_Format(PyExc_ValueError,
                     "%s: unknown mode %zd; expected RNN_TANH, RNN_RELU, RNN_LSTM or RNN_GRU "
                     "(0..3)",
                     fn, mode);
        return -1;
    }
    p->mode = (int)mode;
    *g = gc_rnn_gates(p->mode);
    *e = gc_rnn_extra(p->mode, 1);
    return 0;
}

/* Sizes of the call: T*B*G*H, T*B*H, B*H, G*H*H, (T + 1 + lstm)*B*H, overflow-checked. */
typedef struct {
    Py_ssize_t tbgh, tbh, bh, ghh, gh, ny, tbe;
} rnn_sizes;

static int rnn_size(const char *fn, const gc_rnn *p, Py_ssize_t g, Py_ssize_t e, rnn_sizes *s)
{
    int ok = 1;
    const Py_ssize_t tb = smul(p->t, p->b, &ok);
    s->gh = smul(g, p->h, &ok);
    s->tbgh = smul(tb, s->gh, &ok);
    s->tbh = smul(tb, p->h, &ok);
    s->tbe = smul(s->tbh, e, &ok);
    s->bh = smul(p->b, p->h, &ok);
    s->ghh = smul(s->gh, p->h, &ok);
    s->ny = smul(sadd(p->t, p->mode == GC_RNN_LSTM ? 2 : 1, &ok), s->bh, &ok);
    return ok ? 0 : overflow_error(fn, "the sequence size");
}

/* batch_sizes (int64, T entries) each in [0, B]. */
static int rnn_batch_sizes(const char *fn, const Py_buffer *v, const gc_rnn *p)
{
    if (!v)
        return 0;
    const int64_t *bs = (const int64_t *)v->buf;
    for (Py_ssize_t t = 0; t < p->t; t++)
        if (bs[t] < 0 || bs[t] > (int64_t)p->b) {
            PyErr_Format(PyExc_ValueError,
                         "%s: batch_sizes[%zd] = %lld is outside [0, B] with B = %zd", fn, t,
                         (long long)bs[t], p->b);
            return -1;
        }
    return 0;
}

#define WHAT "mode=%d, T=%zd, B=%zd, H=%zd", p.mode, p.t, p.b, p.h

GC_DOC(rnn_forward,
       "rnn_forward(xg, w_hh, b_hh, h0, c0, batch_sizes, y, gates, hprev, extra, mode, reverse, "
       "T, B, H, /)\n--\n\n"
       "One recurrent layer in one direction over the whole sequence: xg [T, B, G*H] the input "
       "projection of every step, w_hh [G*H, H], b_hh [G*H] or None, h0 [B, H], c0 [B, H] "
       "(LSTM, else None), batch_sizes int64 [T] or None (rows active per step).  Writes y "
       "[T + 1 (+1 LSTM), B, H] (outputs, h_n, c_n) and the backward's records gates "
       "[T, B, G*H], hprev [T, B, H], extra [T, B, E] (E = 2H LSTM, H GRU, 0 RNN).  mode: "
       "RNN_TANH, RNN_RELU, RNN_LSTM, RNN_GRU.");

PyObject *gc_py_rnn_forward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "rnn_forward";
    static const char *const names[10] = {"xg", "w_hh",  "b_hh",  "h0",    "c0",
                                          "batch_sizes", "y", "gates", "hprev", "extra"};
    bufset bs = {.n = 0};
    Py_buffer *v[10];
    gc_rnn p = {0};
    Py_ssize_t g, e;
    rnn_sizes s;
    if (check_nargs(fn, nargs, 15) < 0 || rnn_dims(fn, args + 10, &p, &g, &e) < 0 ||
        rnn_size(fn, &p, g, e, &s) < 0)
        return NULL;
    const int lstm = p.mode == GC_RNN_LSTM;
    if (get_bufs(&bs, fn, args, 10, names, lstm ? "rrRrrRwwww" : "rrRrRRwwww", v) < 0)
        goto fail;
    if (!lstm && v[4]) {
        PyErr_Format(PyExc_ValueError, "%s: c0 is for RNN_LSTM only; pass None", fn);
        goto fail;
    }
    const char kd = need_float_contig(fn, 10, v, names, "=====q====");
    if (!kd)
        goto fail;
    const Py_ssize_t need[10] = {s.tbgh, s.ghh, s.gh, s.bh, s.bh, p.t, s.ny, s.tbgh, s.tbh, s.tbe};
    for (int i = 0; i < 10; i++)
        if (v[i] && need_elems(fn, names[i], v[i], need[i], WHAT) < 0)
            goto fail;
    static const int out[10] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1};
    if (need_outputs_apart(fn, 10, v, names, need, out) < 0 ||
        rnn_batch_sizes(fn, v[5], &p) < 0)
        goto fail;
    p.bs = v[5] ? (const int64_t *)v[5]->buf : NULL;
    void *q[10];
    for (int i = 0; i < 10; i++)
        q[i] = v[i] ? v[i]->buf : NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        rc = gc_rnn_forward_f32(q[0], q[1], q[2], q[3], q[4], q[6], q[7], q[8], q[9], &p);
    else
        rc = gc_rnn_forward_f64(q[0], q[1], q[2], q[3], q[4], q[6], q[7], q[8], q[9], &p);
    Py_END_ALLOW_THREADS
    return bufs_done(&bs, rc);
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(rnn_backward,
       "rnn_backward(gy, gates, hprev, extra, w_hh, batch_sizes, dxg, dw_hh, db_hh, dh0, dc0, "
       "mode, reverse, T, B, H, /)\n--\n\n"
       "The backward of rnn_forward: gy (like y) the gradient of its outputs, h_n (and c_n); "
       "gates, hprev, extra its records.  Writes dxg [T, B, G*H], dw_hh [G*H, H], db_hh [G*H] "
       "(or None), dh0 [B, H] and dc0 [B, H] (LSTM, else None).");

PyObject *gc_py_rnn_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    const char *fn = "rnn_backward";
    static const char *const names[11] = {"gy",  "gates", "hprev", "extra", "w_hh", "batch_sizes",
                                          "dxg", "dw_hh", "db_hh", "dh0",   "dc0"};
    bufset bs = {.n = 0};
    Py_buffer *v[11];
    gc_rnn p = {0};
    Py_ssize_t g, e;
    rnn_sizes s;
    if (check_nargs(fn, nargs, 16) < 0 || rnn_dims(fn, args + 11, &p, &g, &e) < 0 ||
        rnn_size(fn, &p, g, e, &s) < 0)
        return NULL;
    const int lstm = p.mode == GC_RNN_LSTM;
    if (get_bufs(&bs, fn, args, 11, names, lstm ? "rrrrrRwwWww" : "rrrrrRwwWwW", v) < 0)
        goto fail;
    if (!lstm && v[10]) {
        PyErr_Format(PyExc_ValueError, "%s: dc0 is for RNN_LSTM only; pass None", fn);
        goto fail;
    }
    const char kd = need_float_contig(fn, 11, v, names, "=====q=====");
    if (!kd)
        goto fail;
    const Py_ssize_t need[11] = {s.ny,   s.tbgh, s.tbh, s.tbe, s.ghh, p.t,
                                 s.tbgh, s.ghh,  s.gh,  s.bh,  s.bh};
    for (int i = 0; i < 11; i++)
        if (v[i] && need_elems(fn, names[i], v[i], need[i], WHAT) < 0)
            goto fail;
    static const int out[11] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
    if (need_outputs_apart(fn, 11, v, names, need, out) < 0 ||
        rnn_batch_sizes(fn, v[5], &p) < 0)
        goto fail;
    p.bs = v[5] ? (const int64_t *)v[5]->buf : NULL;
    void *q[11];
    for (int i = 0; i < 11; i++)
        q[i] = v[i] ? v[i]->buf : NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        rc = gc_rnn_backward_f32(q[0], q[1], q[2], q[3], q[4], q[6], q[7], q[8], q[9], q[10], &p);
    else
        rc = gc_rnn_backward_f64(q[0], q[1], q[2], q[3], q[4], q[6], q[7], q[8], q[9], q[10], &p);
    Py_END_ALLOW_THREADS
    return bufs_done(&bs, rc);
fail:
    bufs_release(&bs);
    return NULL;
}
#undef WHAT

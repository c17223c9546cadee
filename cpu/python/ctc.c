/* Bindings of ctc.c: ctc_loss, ctc_loss_backward. */
#include "args.h"
#include "bindings.h"

#include <stdlib.h>
#include <string.h>

/* The trailing ints t, n, c, s, blank, zero_infinity into *p. */
static int ctc_ints(const char *fn, PyObject *const *g, gc_ctc *p)
{
    if (get_min(fn, "t", g[0], 0, &p->t) < 0 || get_min(fn, "n", g[1], 0, &p->n) < 0 ||
        get_min(fn, "c", g[2], 1, &p->c) < 0 || get_min(fn, "s", g[3], 0, &p->s) < 0 ||
        get_min(fn, "blank", g[4], 0, &p->blank) < 0 ||
        get_flag(fn, "zero_infinity", g[5], &p->zero_inf) < 0)
        return -1;
    if (p->blank >= p->c) {
        PyErr_Format(PyExc_IndexError, "%s: blank %zd is not a class of c=%zd", fn, p->blank,
                     p->c);
        return -1;
    }
    return 0;
}

/* Frees ctc_copy_targets's copies. */
static void ctc_free(int64_t **cp)
{
    for (int i = 0; i < 4; i++) {
        free(cp[i]);
        cp[i] = NULL;
    }
}

/* targets (v[0]), off, il, tl (v[1..3], n int64 each) copied into private memory cp[0..3] (the
 * kernel reads them after the GIL is released, when another thread could change the caller's
 * arrays), then checked on the copies: every length and label the kernel will read lies in its
 * range. On failure the copies are freed and an exception is set; on success free them with
 * ctc_free. */
static int ctc_copy_targets(const char *fn, Py_buffer *const *v, const gc_ctc *p, int64_t **cp)
{
    const Py_ssize_t ntg = buf_nelem(v[0]);
    const Py_ssize_t cnt[4] = {ntg, p->n, p->n, p->n};
    for (int i = 0; i < 4; i++) {
        cp[i] = malloc((size_t)(cnt[i] > 0 ? cnt[i] : 1) * sizeof(int64_t));
        if (!cp[i]) {
            ctc_free(cp);
            PyErr_NoMemory();
            return -1;
        }
        if (cnt[i] > 0)
            memcpy(cp[i], v[i]->buf, (size_t)cnt[i] * sizeof(int64_t));
    }
    const int64_t *tg = cp[0], *off = cp[1], *il = cp[2], *tl = cp[3];
    for (Py_ssize_t b = 0; b < p->n; b++) {
        if (il[b] < 0 || il[b] > p->t) {
            PyErr_Format(PyExc_ValueError, "%s: input length %lld of sequence %zd is outside "
                         "[0, t=%zd]", fn, (long long)il[b], b, p->t);
            goto bad;
        }
        if (tl[b] < 0 || tl[b] > p->s || off[b] < 0 || off[b] > ntg - tl[b]) {
            PyErr_Format(PyExc_ValueError, "%s: target length %lld at offset %lld of sequence "
                         "%zd is outside s=%zd or the %zd targets", fn, (long long)tl[b],
                         (long long)off[b], b, p->s, ntg);
            goto bad;
        }
        for (int64_t i = off[b]; i < off[b] + tl[b]; i++)
            if (tg[i] < 0 || tg[i] >= p->c) {
                PyErr_Format(PyExc_IndexError, "%s: target %lld of sequence %zd is not a class "
                             "of c=%zd", fn, (long long)tg[i], b, p->c);
                goto bad;
            }
    }
    return 0;
bad:
    ctc_free(cp);
    return -1;
}

/* Both bindings' buffers: nb of them from args (rw, types: get_bufs / need_float_contig's
 * codes), each holding need[i] elements except the targets at index tgt (any count; need[tgt]
 * becomes it), outputs (out[i]) apart from every other buffer, and the int64 arrays copied and
 * checked into cp (ctc_copy_targets). Returns the float kind ('f' / 'd'), or 0 with an
 * exception set and nothing to free but bs. */
static char ctc_buffers(const char *fn, PyObject *const *args, int nb, const char **names,
                        const char *rw, const char *types, Py_ssize_t *need, int tgt,
                        const int *out, const gc_ctc *p, bufset *bs, Py_buffer **v, int64_t **cp)
{
    if (get_bufs(bs, fn, args, nb, names, rw, v) < 0)
        return 0;
    const char kd = need_float_contig(fn, nb, v, names, types);
    if (!kd)
        return 0;
    for (int i = 0; i < nb; i++)
        if (i != tgt && need_elems(fn, names[i], v[i], need[i], "t=%zd, n=%zd, c=%zd, s=%zd",
                                   p->t, p->n, p->c, p->s) < 0)
            return 0;
    need[tgt] = buf_nelem(v[tgt]);
    if (need_outputs_apart(fn, nb, v, names, need, out) < 0 ||
        ctc_copy_targets(fn, v + tgt, p, cp) < 0)
        return 0;
    return kd;
}

GC_DOC(ctc_loss,
       "ctc_loss(log_probs, targets, off, il, tl, nll, log_alpha, t, n, c, s, blank, "
       "zero_infinity, /)\n--\n\n"
       "CTC negative log-likelihoods nll [n] of log_probs [t, n, c] (float32 / float64), "
       "sequence b's tl[b] int64 labels at targets[off[b]:], il[b] of its t steps; log_alpha "
       "[n, t, 2 s + 1] (s >= every tl) receives the alpha recursion (-inf past the lengths).  "
       "zero_infinity is applied by the caller (kept for the backward's signature).");

PyObject *gc_py_ctc_loss(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char *fn = "ctc_loss";
    static const char *names[] = {"log_probs", "targets", "off", "il", "tl", "nll", "log_alpha"};
    gc_ctc p;
    bufset bs = {.n = 0};
    Py_buffer *v[7];
    if (check_nargs(fn, nargs, 13) < 0 || ctc_ints(fn, args + 7, &p) < 0)
        return NULL;
    int ok = 1;
    const Py_ssize_t S = sadd(smul(2, p.s, &ok), 1, &ok);
    Py_ssize_t need[7] = {smul(smul(p.t, p.n, &ok), p.c, &ok), 0, p.n, p.n, p.n, p.n,
                          smul(smul(p.n, p.t, &ok), S, &ok)};
    if (!ok)
        return overflow_error(fn, "t * n * c or n * t * (2 s + 1)"), NULL;
    static const int out[7] = {0, 0, 0, 0, 0, 1, 1};
    int64_t *cp[4] = {NULL, NULL, NULL, NULL};
    const char kd = ctc_buffers(fn, args, 7, names, "rrrrrww", "=qqqq==", need, 1, out, &p, &bs,
                                v, cp);
    if (!kd)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_ctc_loss_f32(v[0]->buf, cp[0], cp[1], cp[2], cp[3], v[5]->buf, v[6]->buf, &p);
    else
        gc_ctc_loss_f64(v[0]->buf, cp[0], cp[1], cp[2], cp[3], v[5]->buf, v[6]->buf, &p);
    Py_END_ALLOW_THREADS
    ctc_free(cp);
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

GC_DOC(ctc_loss_backward,
       "ctc_loss_backward(gout, log_probs, targets, off, il, tl, nll, log_alpha, log_beta, grad, "
       "t, n, c, s, blank, zero_infinity, /)\n--\n\n"
       "grad [t, n, c]: the gradient of ctc_loss's nll (scaled by gout [n]) with respect to "
       "log_probs, from ctc_loss's nll and log_alpha; log_beta [n, t, 2 s + 1] is scratch.  "
       "Sequences with an infinite nll get zeros when zero_infinity; steps past il[b] zeros.");

PyObject *gc_py_ctc_loss_backward(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    static const char *fn = "ctc_loss_backward";
    static const char *names[] = {"gout", "log_probs", "targets",  "off", "il",
                                  "tl",   "nll",       "log_alpha", "log_beta", "grad"};
    gc_ctc p;
    bufset bs = {.n = 0};
    Py_buffer *v[10];
    if (check_nargs(fn, nargs, 16) < 0 || ctc_ints(fn, args + 10, &p) < 0)
        return NULL;
    int ok = 1;
    const Py_ssize_t S = sadd(smul(2, p.s, &ok), 1, &ok);
    const Py_ssize_t lps = smul(smul(p.t, p.n, &ok), p.c, &ok);
    const Py_ssize_t las = smul(smul(p.n, p.t, &ok), S, &ok);
    Py_ssize_t need[10] = {p.n, lps, 0, p.n, p.n, p.n, p.n, las, las, lps};
    if (!ok)
        return overflow_error(fn, "t * n * c or n * t * (2 s + 1)"), NULL;
    static const int out[10] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1};
    int64_t *cp[4] = {NULL, NULL, NULL, NULL};
    const char kd = ctc_buffers(fn, args, 10, names, "rrrrrrrrww", "==qqqq====", need, 2, out, &p,
                                &bs, v, cp);
    if (!kd)
        goto fail;
    Py_BEGIN_ALLOW_THREADS
    if (kd == 'f')
        gc_ctc_loss_backward_f32(v[0]->buf, v[1]->buf, cp[0], cp[1], cp[2], cp[3], v[6]->buf,
                                 v[7]->buf, v[8]->buf, v[9]->buf, &p);
    else
        gc_ctc_loss_backward_f64(v[0]->buf, v[1]->buf, cp[0], cp[1], cp[2], cp[3], v[6]->buf,
                                 v[7]->buf, v[8]->buf, v[9]->buf, &p);
    Py_END_ALLOW_THREADS
    ctc_free(cp);
    bufs_release(&bs);
    Py_RETURN_NONE;
fail:
    bufs_release(&bs);
    return NULL;
}

/* CTC loss (torch.nn.functional.ctc_loss): the negative log-likelihood of each sequence by the
 * log-space alpha recursion, and its gradient with respect to the log-probabilities by the beta
 * recursion, PyTorch's LossCTC.cpp step by step.
 *
 * log_probs lp [t, n, c] (C-contiguous), targets: int64, sequence b's tl[b] labels starting at
 * element off[b] (padded [n, s] and concatenated targets both reduce to this); il / tl the input
 * and target lengths.  The extended label sequence of b has 2 tl[b] + 1 entries: blank, l0,
 * blank, l1, ..., blank.  log_alpha / log_beta are [n, t, 2 s + 1]; entries past a sequence's
 * lengths are -inf.  Sequences split over the pool (one thread owns each b's rows), computed the
 * same way whatever the split. */
#ifndef GC_T

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "isa.h"
#include "kernels.h"

#define GC_BODY "ctc.c"
#include "each_float.h"

#else /* type-generic body, T = GC_T */

typedef struct {
    const GC_T *lp, *nll, *gout, *lar; /* lar: log_alpha, read by the backward */
    const int64_t *tg, *off, *il, *tl;
    GC_T *out, *la, *lb, *grad;
    const gc_ctc *p;
} GC_FN(ctc_job);

/* label s of b's extended sequence */
static inline int64_t GC_FN(ctc_prime)(const GC_FN(ctc_job) * J, ptrdiff_t b, ptrdiff_t s)
{
    return (s & 1) ? J->tg[J->off[b] + s / 2] : J->p->blank;
}

/* log(exp(a) + exp(b) + exp(c)), PyTorch's form (max 0 when all are -inf) */
static inline GC_T GC_FN(ctc_lse3)(GC_T a, GC_T b, GC_T c)
{
    GC_T m = a > b ? a : b;
    m = c > m ? c : m;
    if (m == -(GC_T)INFINITY)
        m = 0;
    return GC_M(log)(GC_M(exp)(a - m) + GC_M(exp)(b - m) + GC_M(exp)(c - m)) + m;
}

static void GC_FN(ctc_fwd_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(ctc_job) *J = (const GC_FN(ctc_job) *)ctx;
    const gc_ctc *p = J->p;
    const ptrdiff_t S = 2 * p->s + 1;
    const GC_T ninf = -(GC_T)INFINITY;
    for (ptrdiff_t b = lo; b < hi; b++) {
        GC_T *la = J->la + b * p->t * S;
        const ptrdiff_t T = J->il[b], L = J->tl[b], E = 2 * L + 1;
        for (ptrdiff_t i = 0; i < p->t * S; i++)
            la[i] = ninf;
        if (T == 0) {
            J->out[b] = L == 0 ? 0 : (GC_T)INFINITY;
            continue;
        }
        const GC_T *lp = J->lp + b * p->c; /* row t at lp + t * n * c */
        const ptrdiff_t row = p->n * p->c;
        la[0] = lp[p->blank];
        if (L > 0)
            la[1] = lp[GC_FN(ctc_prime)(J, b, 1)];
        for (ptrdiff_t t = 1; t < T; t++) {
            const GC_T *prev = la + (t - 1) * S, *lpt = lp + t * row;
            GC_T *cur = la + t * S;
            for (ptrdiff_t s = 0; s < E; s++) {
                const int64_t k = GC_FN(ctc_prime)(J, b, s);
                const GC_T a2 = s > 0 ? prev[s - 1] : ninf;
                const GC_T a3 = s > 1 && GC_FN(ctc_prime)(J, b, s - 2) != k ? prev[s - 2] : ninf;
                cur[s] = GC_FN(ctc_lse3)(prev[s], a2, a3) + lpt[k];
            }
        }
        const GC_T *last = la + (T - 1) * S;
        J->out[b] = L == 0 ? -last[0] : -GC_FN(ctc_lse3)(last[2 * L], last[2 * L - 1], ninf);
    }
}

static void GC_FN(ctc_bwd_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(ctc_job) *J = (const GC_FN(ctc_job) *)ctx;
    const gc_ctc *p = J->p;
    const ptrdiff_t S = 2 * p->s + 1, row = p->n * p->c, C = p->c;
    const GC_T ninf = -(GC_T)INFINITY;
    for (ptrdiff_t b = lo; b < hi; b++) {
        const GC_T *la = J->lar + b * p->t * S, *lp = J->lp + b * C;
        GC_T *lb = J->lb + b * p->t * S, *gr = J->grad + b * C;
        const ptrdiff_t T = J->il[b], L = J->tl[b], E = 2 * L + 1;
        const GC_T nll = J->nll[b], go = J->gout[b];
        if (T == 0 || (p->zero_inf && nll == (GC_T)INFINITY)) { /* no path, or zeroed */
            for (ptrdiff_t t = 0; t < p->t; t++)
                for (ptrdiff_t c = 0; c < C; c++)
                    gr[t * row + c] = 0;
            continue;
        }
        for (ptrdiff_t i = 0; i < p->t * S; i++)
            lb[i] = ninf;
        /* grad rows t < T first hold log(sum over s with label c of alpha * beta) */
        for (ptrdiff_t t = 0; t < T; t++)
            for (ptrdiff_t c = 0; c < C; c++)
                gr[t * row + c] = ninf;
        GC_T *lbT = lb + (T - 1) * S, *gT = gr + (T - 1) * row;
        const GC_T *laT = la + (T - 1) * S, *lpT = lp + (T - 1) * row;
        lbT[2 * L] = lpT[p->blank];
        gT[p->blank] = laT[2 * L] + lbT[2 * L];
        if (L > 0) {
            const int64_t k = GC_FN(ctc_prime)(J, b, 2 * L - 1);
            lbT[2 * L - 1] = lpT[k];
            gT[k] = laT[2 * L - 1] + lbT[2 * L - 1];
        }
        for (ptrdiff_t t = T - 2; t >= 0; t--) {
            const GC_T *next = lb + (t + 1) * S, *lpt = lp + t * row, *lat = la + t * S;
            GC_T *cur = lb + t * S, *gt = gr + t * row;
            for (ptrdiff_t s = E - 1; s >= 0; s--) {
                const int64_t k = GC_FN(ctc_prime)(J, b, s);
                const GC_T b2 = s < 2 * L ? next[s + 1] : ninf;
                const GC_T b3 =
                    s < 2 * L - 1 && GC_FN(ctc_prime)(J, b, s + 2) != k ? next[s + 2] : ninf;
                cur[s] = GC_FN(ctc_lse3)(next[s], b2, b3) + lpt[k];
                const GC_T ab = lat[s] + cur[s], lcab = gt[k];
                if (lcab == ninf) {
                    gt[k] = ab;
                } else {
                    const GC_T m = lcab > ab ? lcab : ab;
                    gt[k] = GC_M(log)(GC_M(exp)(lcab - m) + GC_M(exp)(ab - m)) + m;
                }
            }
        }
        for (ptrdiff_t t = 0; t < p->t; t++) {
            GC_T *g = gr + t * row;
            const GC_T *l = lp + t * row;
            if (t >= T) {
                for (ptrdiff_t c = 0; c < C; c++)
                    g[c] = 0;
                continue;
            }
            for (ptrdiff_t c = 0; c < C; c++)
                g[c] = (GC_M(exp)(l[c]) - GC_M(exp)(g[c] + nll - l[c])) * go;
        }
    }
}

static double GC_FN(ctc_cost)(const gc_ctc *p)
{
    return (double)p->n * (double)p->t * ((double)(2 * p->s + 1) * 30.0 + (double)p->c * 2.0);
}

void GC_FN(gc_ctc_loss)(const GC_T *lp, const int64_t *tg, const int64_t *off, const int64_t *il,
                        const int64_t *tl, GC_T *nll, GC_T *la, const gc_ctc *p)
{
    GC_FN(ctc_job)
    J = {.lp = lp, .tg = tg, .off = off, .il = il, .tl = tl, .out = nll, .la = la, .p = p};
    gc_parallel_range(p->n, 1, GC_FN(ctc_cost)(p), GC_FN(ctc_fwd_range), &J);
}

void GC_FN(gc_ctc_loss_backward)(const GC_T *gout, const GC_T *lp, const int64_t *tg,
                                 const int64_t *off, const int64_t *il, const int64_t *tl,
                                 const GC_T *nll, const GC_T *la, GC_T *lb, GC_T *grad,
                                 const gc_ctc *p)
{
    GC_FN(ctc_job)
    J = {.gout = gout, .lp = lp, .tg = tg, .off = off, .il = il, .tl = tl, .nll = nll,
         
         .lar = la, .lb = lb, .grad = grad, .p = p};
    gc_parallel_range(p->n, 1, 2.5 * GC_FN(ctc_cost)(p), GC_FN(ctc_bwd_range), &J);
}

#endif

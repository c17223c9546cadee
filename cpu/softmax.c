/* Softmax / log-softmax over the middle axis of [outer, n, inner], their backward, and the
 * fused cross-entropy forward / backward over [n, c] logits.
 *
 * Numerically stable: the row max is subtracted before exp; sums accumulate in double.  For
 * inner > 1 the columns are processed in chunks of GC_SM_CHUNK with contiguous inner loops. */
#ifndef GC_T

#include <math.h>

#include "kernels.h"

#define GC_SM_CHUNK 128

#define GC_T float
#define GC_SFX f32
#define GC_M(fn) fn##f
#include "softmax.c"
#undef GC_T
#undef GC_SFX
#undef GC_M

#define GC_T double
#define GC_SFX f64
#define GC_M(fn) fn
#include "softmax.c"
#undef GC_T
#undef GC_SFX
#undef GC_M

#else /* type-generic body, T = GC_T */

/* Max of a row, NaN-propagating (a NaN max makes the whole row NaN, as it should). */
static inline GC_T GC_FN(row_max)(const GC_T *x, ptrdiff_t n)
{
    GC_T m = (GC_T)-INFINITY;
    for (ptrdiff_t j = 0; j < n; j++)
        m = (x[j] > m || x[j] != x[j]) ? x[j] : m;
    return m;
}

/* out may equal x exactly (each pass reads x[j] before writing out[j]). */
static void GC_FN(softmax_row)(const GC_T *x, GC_T *out, ptrdiff_t n, int log_softmax)
{
    const GC_T m = GC_FN(row_max)(x, n);
    double s = 0.0;
    if (log_softmax) {
        for (ptrdiff_t j = 0; j < n; j++)
            s += (double)GC_M(exp)(x[j] - m);
        const GC_T ls = (GC_T)log(s);
        for (ptrdiff_t j = 0; j < n; j++)
            out[j] = (x[j] - m) - ls;
    } else {
        for (ptrdiff_t j = 0; j < n; j++) {
            const GC_T e = GC_M(exp)(x[j] - m);
            out[j] = e;
            s += (double)e;
        }
        const GC_T inv = (GC_T)(1.0 / s);
        for (ptrdiff_t j = 0; j < n; j++)
            out[j] *= inv;
    }
}

static void GC_FN(softmax_cols)(const GC_T *x, GC_T *out, ptrdiff_t n, ptrdiff_t inner,
                                ptrdiff_t w, int log_softmax)
{
    GC_T m[GC_SM_CHUNK];
    double s[GC_SM_CHUNK];
    for (ptrdiff_t t = 0; t < w; t++) {
        m[t] = (GC_T)-INFINITY;
        s[t] = 0.0;
    }
    for (ptrdiff_t j = 0; j < n; j++) {
        const GC_T *row = x + j * inner;
        for (ptrdiff_t t = 0; t < w; t++)
            m[t] = (row[t] > m[t] || row[t] != row[t]) ? row[t] : m[t];
    }
    if (log_softmax) {
        for (ptrdiff_t j = 0; j < n; j++) {
            const GC_T *row = x + j * inner;
            for (ptrdiff_t t = 0; t < w; t++)
                s[t] += (double)GC_M(exp)(row[t] - m[t]);
        }
        GC_T ls[GC_SM_CHUNK];
        for (ptrdiff_t t = 0; t < w; t++)
            ls[t] = (GC_T)log(s[t]);
        for (ptrdiff_t j = 0; j < n; j++) {
            const GC_T *row = x + j * inner;
            GC_T *orow = out + j * inner;
            for (ptrdiff_t t = 0; t < w; t++)
                orow[t] = (row[t] - m[t]) - ls[t];
        }
    } else {
        for (ptrdiff_t j = 0; j < n; j++) {
            const GC_T *row = x + j * inner;
            GC_T *orow = out + j * inner;
            for (ptrdiff_t t = 0; t < w; t++) {
                const GC_T e = GC_M(exp)(row[t] - m[t]);
                orow[t] = e;
                s[t] += (double)e;
            }
        }
        GC_T inv[GC_SM_CHUNK];
        for (ptrdiff_t t = 0; t < w; t++)
            inv[t] = (GC_T)(1.0 / s[t]);
        for (ptrdiff_t j = 0; j < n; j++) {
            GC_T *orow = out + j * inner;
            for (ptrdiff_t t = 0; t < w; t++)
                orow[t] *= inv[t];
        }
    }
}

void GC_FN(gc_softmax)(const GC_T *x, GC_T *out, ptrdiff_t outer, ptrdiff_t n, ptrdiff_t inner,
                       int log_softmax)
{
    if (n == 0 || inner == 0)
        return;
    for (ptrdiff_t o = 0; o < outer; o++) {
        const ptrdiff_t base = o * n * inner;
        if (inner == 1) {
            GC_FN(softmax_row)(x + base, out + base, n, log_softmax);
            continue;
        }
        for (ptrdiff_t t0 = 0; t0 < inner; t0 += GC_SM_CHUNK) {
            const ptrdiff_t w = (inner - t0 < GC_SM_CHUNK) ? inner - t0 : GC_SM_CHUNK;
            GC_FN(softmax_cols)(x + base + t0, out + base + t0, n, inner, w, log_softmax);
        }
    }
}

/* softmax: out = y (g - sum(g y)); log-softmax: out = g - exp(y) sum(g).  out may equal grad or
 * y exactly: the sums are complete before out is written. */
void GC_FN(gc_softmax_backward)(const GC_T *grad, const GC_T *y, GC_T *out, ptrdiff_t outer,
                                ptrdiff_t n, ptrdiff_t inner, int log_softmax)
{
    if (n == 0 || inner == 0)
        return;
    for (ptrdiff_t o = 0; o < outer; o++) {
        const ptrdiff_t base = o * n * inner;
        for (ptrdiff_t t0 = 0; t0 < inner; t0 += GC_SM_CHUNK) {
            const ptrdiff_t w = (inner - t0 < GC_SM_CHUNK) ? inner - t0 : GC_SM_CHUNK;
            const GC_T *g = grad + base + t0, *yy = y + base + t0;
            GC_T *ou = out + base + t0;
            double s[GC_SM_CHUNK];
            GC_T st[GC_SM_CHUNK];
            for (ptrdiff_t t = 0; t < w; t++)
                s[t] = 0.0;
            if (log_softmax) {
                for (ptrdiff_t j = 0; j < n; j++)
                    for (ptrdiff_t t = 0; t < w; t++)
                        s[t] += (double)g[j * inner + t];
                for (ptrdiff_t t = 0; t < w; t++)
                    st[t] = (GC_T)s[t];
                for (ptrdiff_t j = 0; j < n; j++)
                    for (ptrdiff_t t = 0; t < w; t++)
                        ou[j * inner + t] =
                            g[j * inner + t] - GC_M(exp)(yy[j * inner + t]) * st[t];
            } else {
                for (ptrdiff_t j = 0; j < n; j++)
                    for (ptrdiff_t t = 0; t < w; t++)
                        s[t] += (double)g[j * inner + t] * (double)yy[j * inner + t];
                for (ptrdiff_t t = 0; t < w; t++)
                    st[t] = (GC_T)s[t];
                for (ptrdiff_t j = 0; j < n; j++)
                    for (ptrdiff_t t = 0; t < w; t++)
                        ou[j * inner + t] = yy[j * inner + t] * (g[j * inner + t] - st[t]);
            }
        }
    }
}

/* lse[i] = logsumexp(logits[i]); loss[i] = lse[i] - logits[i, target[i]] or 0 if ignored. */
void GC_FN(gc_cross_entropy_forward)(const GC_T *restrict logits, const int64_t *restrict target,
                                     GC_T *restrict loss, GC_T *restrict lse, ptrdiff_t n,
                                     ptrdiff_t c, int64_t ignore_index)
{
    for (ptrdiff_t i = 0; i < n; i++) {
        const GC_T *row = logits + i * c;
        const GC_T m = GC_FN(row_max)(row, c);
        double s = 0.0;
        for (ptrdiff_t j = 0; j < c; j++)
            s += (double)GC_M(exp)(row[j] - m);
        /* c == 0: m = -inf, s = 0 -> lse = -inf (only ignored rows can exist then) */
        const double l = c > 0 ? (double)m + log(s) : -INFINITY;
        lse[i] = (GC_T)l;
        const int64_t t = target[i];
        loss[i] = (t == ignore_index) ? (GC_T)0 : (GC_T)(l - (double)row[t]);
    }
}

/* out[i, j] = grad_loss[i] (exp(logits[i, j] - lse[i]) - (j == target[i])); 0 on ignored rows.
 * out may equal logits exactly. */
void GC_FN(gc_cross_entropy_backward)(const GC_T *logits, const int64_t *target, const GC_T *lse,
                                      const GC_T *grad_loss, GC_T *out, ptrdiff_t n, ptrdiff_t c,
                                      int64_t ignore_index)
{
    for (ptrdiff_t i = 0; i < n; i++) {
        const GC_T *row = logits + i * c;
        GC_T *orow = out + i * c;
        const int64_t t = target[i];
        if (t == ignore_index) {
            for (ptrdiff_t j = 0; j < c; j++)
                orow[j] = (GC_T)0;
            continue;
        }
        const GC_T g = grad_loss[i], l = lse[i];
        for (ptrdiff_t j = 0; j < c; j++)
            orow[j] = g * GC_M(exp)(row[j] - l);
        orow[t] -= g;
    }
}

#endif

/* Reductions over the middle axis of a C-contiguous [outer, n, inner] array into [outer, inner].
 *
 * Sums accumulate in double for both float types (8 partial sums when inner == 1).  For
 * inner > 1 the columns are processed in chunks of GC_RED_CHUNK with the innermost loop running
 * over contiguous columns.  MAX/MIN propagate NaN; ARGMAX/ARGMIN give the first NaN if there is
 * one, else the first extreme. */
#ifndef GC_T

#include <math.h>

#include "kernels.h"

#define GC_RED_CHUNK 256

#define GC_T float
#define GC_SFX f32
#include "reduce.c"
#undef GC_T
#undef GC_SFX

#define GC_T double
#define GC_SFX f64
#include "reduce.c"
#undef GC_T
#undef GC_SFX

#else /* type-generic body, T = GC_T */

static double GC_FN(sum_row)(const GC_T *restrict x, ptrdiff_t n)
{
    double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    ptrdiff_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int u = 0; u < 8; u++)
            acc[u] += (double)x[i + u];
    double s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (; i < n; i++)
        s += (double)x[i];
    return s;
}

/* Row reduction (inner == 1) of n >= 1 elements (n >= 0 for SUM / MEAN). */
static void GC_FN(reduce_row)(int op, const GC_T *restrict x, ptrdiff_t n, GC_T *restrict out,
                              int64_t *restrict iout)
{
    switch (op) {
    case GC_REDUCE_SUM: *out = (GC_T)GC_FN(sum_row)(x, n); break;
    case GC_REDUCE_MEAN: *out = n > 0 ? (GC_T)(GC_FN(sum_row)(x, n) / (double)n) : (GC_T)NAN; break;
    case GC_REDUCE_MAX:
    case GC_REDUCE_MIN: {
        GC_T m = x[0];
        if (op == GC_REDUCE_MAX) {
            for (ptrdiff_t i = 1; i < n; i++)
                m = (x[i] > m || x[i] != x[i]) ? x[i] : m; /* once m is NaN it stays */
        } else {
            for (ptrdiff_t i = 1; i < n; i++)
                m = (x[i] < m || x[i] != x[i]) ? x[i] : m;
        }
        *out = m;
        break;
    }
    case GC_REDUCE_ARGMAX:
    case GC_REDUCE_ARGMIN: {
        ptrdiff_t best = 0;
        GC_T bv = x[0];
        if (bv == bv) {
            for (ptrdiff_t i = 1; i < n; i++) {
                const GC_T v = x[i];
                if (v != v) {
                    best = i;
                    break;
                }
                if (op == GC_REDUCE_ARGMAX ? v > bv : v < bv) {
                    bv = v;
                    best = i;
                }
            }
        }
        *iout = (int64_t)best;
        break;
    }
    default: break;
    }
}

/* Columns [0, w) of one [n, inner] slab, w <= GC_RED_CHUNK, x pointing at column 0. */
static void GC_FN(reduce_cols)(int op, const GC_T *restrict x, ptrdiff_t n, ptrdiff_t inner,
                               ptrdiff_t w, GC_T *restrict out, int64_t *restrict iout)
{
    switch (op) {
    case GC_REDUCE_SUM:
    case GC_REDUCE_MEAN: {
        double acc[GC_RED_CHUNK];
        for (ptrdiff_t t = 0; t < w; t++)
            acc[t] = 0.0;
        for (ptrdiff_t j = 0; j < n; j++) {
            const GC_T *restrict row = x + j * inner;
            for (ptrdiff_t t = 0; t < w; t++)
                acc[t] += (double)row[t];
        }
        if (op == GC_REDUCE_SUM) {
            for (ptrdiff_t t = 0; t < w; t++)
                out[t] = (GC_T)acc[t];
        } else {
            for (ptrdiff_t t = 0; t < w; t++)
                out[t] = n > 0 ? (GC_T)(acc[t] / (double)n) : (GC_T)NAN;
        }
        break;
    }
    case GC_REDUCE_MAX:
    case GC_REDUCE_MIN: {
        for (ptrdiff_t t = 0; t < w; t++)
            out[t] = x[t];
        for (ptrdiff_t j = 1; j < n; j++) {
            const GC_T *restrict row = x + j * inner;
            if (op == GC_REDUCE_MAX) {
                for (ptrdiff_t t = 0; t < w; t++)
                    out[t] = (row[t] > out[t] || row[t] != row[t]) ? row[t] : out[t];
            } else {
                for (ptrdiff_t t = 0; t < w; t++)
                    out[t] = (row[t] < out[t] || row[t] != row[t]) ? row[t] : out[t];
            }
        }
        break;
    }
    case GC_REDUCE_ARGMAX:
    case GC_REDUCE_ARGMIN: {
        GC_T bv[GC_RED_CHUNK];
        for (ptrdiff_t t = 0; t < w; t++) {
            bv[t] = x[t];
            iout[t] = 0;
        }
        for (ptrdiff_t j = 1; j < n; j++) {
            const GC_T *restrict row = x + j * inner;
            for (ptrdiff_t t = 0; t < w; t++) {
                const GC_T v = row[t];
                /* a NaN best is final; a NaN v replaces a non-NaN best */
                const int take = (bv[t] == bv[t]) &&
                                 (v != v || (op == GC_REDUCE_ARGMAX ? v > bv[t] : v < bv[t]));
                if (take) {
                    bv[t] = v;
                    iout[t] = (int64_t)j;
                }
            }
        }
        break;
    }
    default: break;
    }
}

void GC_FN(gc_reduce)(int op, const GC_T *x, void *out, ptrdiff_t outer, ptrdiff_t n,
                      ptrdiff_t inner)
{
    const int is_arg = (op == GC_REDUCE_ARGMAX || op == GC_REDUCE_ARGMIN);
    GC_T *fout = is_arg ? NULL : (GC_T *)out;
    int64_t *iout = is_arg ? (int64_t *)out : NULL;
    for (ptrdiff_t o = 0; o < outer; o++) {
        const GC_T *xo = x + o * n * inner;
        if (inner == 1) {
            GC_FN(reduce_row)(op, xo, n, fout ? fout + o : NULL, iout ? iout + o : NULL);
            continue;
        }
        for (ptrdiff_t t0 = 0; t0 < inner; t0 += GC_RED_CHUNK) {
            const ptrdiff_t w = (inner - t0 < GC_RED_CHUNK) ? inner - t0 : GC_RED_CHUNK;
            const ptrdiff_t oi = o * inner + t0;
            GC_FN(reduce_cols)(op, xo + t0, n, inner, w, fout ? fout + oi : NULL,
                               iout ? iout + oi : NULL);
        }
    }
}

#endif

/* Reductions over the middle axis of a C-contiguous [outer, n, inner] array into [outer, inner].
 *
 * Sums accumulate in double for both float types (8 partial sums when inner == 1).  For
 * inner > 1 the columns are processed in chunks of GC_RED_CHUNK with the innermost loop running
 * over contiguous columns.  MAX/MIN propagate NaN; ARGMAX/ARGMIN give the first NaN if there is
 * one, else the first extreme. */
#ifndef GC_T

#include <math.h>

#include "isa.h"
#include "kernels.h"

#define GC_RED_CHUNK 256
/* Rows longer than this reduce as fixed chunks of this many elements (spread over the threads)
 * whose partial results combine in order: the chunking depends on n only, never on the thread
 * count, so results are identical for any number of threads. */
#define GC_RED_SPLIT 65536
#define GC_RED_NS 0.3 /* estimated ns per element */

#define GC_BODY "reduce.c"
#include "each_float.h"

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
        /* four rows per pass over acc (one load and store of it per four adds), each column
         * still summed row by row in order: the same bits as one row per pass */
        ptrdiff_t j = 0;
        for (; j + 4 <= n; j += 4) {
            const GC_T *restrict r0 = x + j * inner, *restrict r1 = r0 + inner;
            const GC_T *restrict r2 = r1 + inner, *restrict r3 = r2 + inner;
            for (ptrdiff_t t = 0; t < w; t++)
                acc[t] = (((acc[t] + (double)r0[t]) + (double)r1[t]) + (double)r2[t]) +
                         (double)r3[t];
        }
        for (; j < n; j++) {
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

typedef struct {
    int op;
    const GC_T *x;
    GC_T *fout;
    int64_t *iout;
    ptrdiff_t outer, n, inner, chunks;
    double *psum;     /* split rows: per-chunk partial sums ... */
    GC_T *pval;       /* ... or extremes */
    int64_t *pidx;    /* ... and their indices */
} GC_FN(reduce_job);

/* Work units [lo, hi): for inner == 1 a unit is a row; else (row o, column chunk). */
static void GC_FN(reduce_units)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(reduce_job) *J = (const GC_FN(reduce_job) *)ctx;
    const ptrdiff_t n = J->n, inner = J->inner;
    for (ptrdiff_t u = lo; u < hi; u++) {
        if (inner == 1) {
            GC_FN(reduce_row)(J->op, J->x + u * n, n, J->fout ? J->fout + u : NULL,
                              J->iout ? J->iout + u : NULL);
            continue;
        }
        const ptrdiff_t o = u / J->chunks, t0 = (u % J->chunks) * GC_RED_CHUNK;
        const ptrdiff_t w = (inner - t0 < GC_RED_CHUNK) ? inner - t0 : GC_RED_CHUNK;
        const ptrdiff_t oi = o * inner + t0;
        GC_FN(reduce_cols)(J->op, J->x + o * n * inner + t0, n, inner, w,
                           J->fout ? J->fout + oi : NULL, J->iout ? J->iout + oi : NULL);
    }
}

/* Chunks [lo, hi) of one long row (J->x): partial results into psum / pval + pidx. */
static void GC_FN(reduce_chunks)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(reduce_job) *J = (const GC_FN(reduce_job) *)ctx;
    for (ptrdiff_t q = lo; q < hi; q++) {
        const ptrdiff_t s0 = q * GC_RED_SPLIT;
        const ptrdiff_t len = (J->n - s0 < GC_RED_SPLIT) ? J->n - s0 : GC_RED_SPLIT;
        if (J->op == GC_REDUCE_SUM || J->op == GC_REDUCE_MEAN) {
            J->psum[q] = GC_FN(sum_row)(J->x + s0, len);
        } else if (J->op == GC_REDUCE_MAX || J->op == GC_REDUCE_MIN) {
            GC_FN(reduce_row)(J->op, J->x + s0, len, J->pval + q, NULL);
        } else {
            GC_FN(reduce_row)(J->op, J->x + s0, len, NULL, J->pidx + q);
            J->pval[q] = J->x[s0 + J->pidx[q]];
            J->pidx[q] += s0;
        }
    }
}

/* One row of n > GC_RED_SPLIT elements, chunked; returns -1 if scratch memory fails. */
static int GC_FN(reduce_long_row)(GC_FN(reduce_job) * J, const GC_T *x, GC_T *fout,
                                  int64_t *iout)
{
    const int op = J->op;
    const ptrdiff_t nq = (J->n + GC_RED_SPLIT - 1) / GC_RED_SPLIT;
    char *ws = (char *)gc_scratch((size_t)nq * (sizeof(double) + sizeof(GC_T) + sizeof(int64_t)));
    if (!ws)
        return -1;
    J->psum = (double *)ws;
    J->pidx = (int64_t *)(ws + (size_t)nq * sizeof(double));
    J->pval = (GC_T *)(ws + (size_t)nq * (sizeof(double) + sizeof(int64_t)));
    const GC_T *saved = J->x;
    J->x = x;
    gc_parallel_range(nq, 1, (double)J->n * GC_RED_NS, GC_FN(reduce_chunks), J);
    J->x = saved;
    if (op == GC_REDUCE_SUM || op == GC_REDUCE_MEAN) {
        double s = 0.0;
        for (ptrdiff_t q = 0; q < nq; q++)
            s += J->psum[q];
        *fout = (GC_T)(op == GC_REDUCE_SUM ? s : s / (double)J->n);
    } else if (op == GC_REDUCE_MAX || op == GC_REDUCE_MIN) {
        GC_T m = J->pval[0];
        for (ptrdiff_t q = 1; q < nq; q++) {
            const GC_T v = J->pval[q];
            m = ((op == GC_REDUCE_MAX ? v > m : v < m) || v != v) ? v : m;
        }
        *fout = m;
    } else { /* the first NaN, else the first extreme */
        GC_T bv = J->pval[0];
        int64_t bi = J->pidx[0];
        for (ptrdiff_t q = 1; q < nq && bv == bv; q++) {
            const GC_T v = J->pval[q];
            if (v != v || (op == GC_REDUCE_ARGMAX ? v > bv : v < bv)) {
                bv = v;
                bi = J->pidx[q];
            }
        }
        *iout = bi;
    }
    return 0;
}

int GC_FN(gc_reduce)(int op, const GC_T *x, void *out, ptrdiff_t outer, ptrdiff_t n,
                     ptrdiff_t inner)
{
    const int is_arg = (op == GC_REDUCE_ARGMAX || op == GC_REDUCE_ARGMIN);
    GC_FN(reduce_job) J = {.op = op, .x = x, .outer = outer, .n = n, .inner = inner};
    J.fout = is_arg ? NULL : (GC_T *)out;
    J.iout = is_arg ? (int64_t *)out : NULL;
    if (outer <= 0 || inner <= 0)
        return 0;
    if (inner == 1 && n > GC_RED_SPLIT) {
        for (ptrdiff_t o = 0; o < outer; o++)
            if (GC_FN(reduce_long_row)(&J, x + o * n, J.fout ? J.fout + o : NULL,
                                       J.iout ? J.iout + o : NULL) < 0)
                return -1;
        return 0;
    }
    J.chunks = (inner + GC_RED_CHUNK - 1) / GC_RED_CHUNK;
    const ptrdiff_t units = inner == 1 ? outer : outer * J.chunks;
    gc_parallel_range(units, 1, (double)outer * (double)n * (double)inner * GC_RED_NS,
                      GC_FN(reduce_units), &J);
    return 0;
}

#endif

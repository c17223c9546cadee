/* layer_norm over the rows of a C-contiguous [rows, n] array, one kernel call:
 *   out = (x - mean) / sqrt(var + eps) * weight + bias   per row (biased variance, as PyTorch),
 * with weight and bias optional (NULL) and out allowed to be x itself.  Each row runs through
 * the ISA's gc_isa.ln_row_* (isa/stream.h): a first pass estimates the mean, a second sums the
 * deviations and their squares (correcting the mean by the deviations' mean: accurate for rows
 * whose mean is large next to their spread), a third writes the result.  The row stays in cache
 * between the passes; nothing is allocated.  Rows are split over the thread pool when the call
 * has enough work (gc_parallel_range: ~50 us); each row is computed the same way in any split. */
#include <math.h>

#include "isa.h"
#include "kernels.h"

/* single-thread cost per element (three passes over cached data, AVX-512: ~0.15 ns; the
 * estimate covers the narrower ISAs too), for the thread count */
#define GC_LN_NS 0.25

typedef struct {
    const void *x, *w, *b;
    void *y;
    ptrdiff_t n;
    double eps;
} gc_ln_job;

static void ln_range_f32(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const gc_ln_job *J = (const gc_ln_job *)ctx;
    const float *x = (const float *)J->x;
    float *y = (float *)J->y;
    for (ptrdiff_t r = lo; r < hi; r++)
        gc_isa.ln_row_f32(x + r * J->n, (const float *)J->w, (const float *)J->b, y + r * J->n,
                          J->n, J->eps);
}

static void ln_range_f64(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const gc_ln_job *J = (const gc_ln_job *)ctx;
    const double *x = (const double *)J->x;
    double *y = (double *)J->y;
    for (ptrdiff_t r = lo; r < hi; r++)
        gc_isa.ln_row_f64(x + r * J->n, (const double *)J->w, (const double *)J->b,
                          y + r * J->n, J->n, J->eps);
}

void gc_layer_norm_f32(const float *x, const float *weight, const float *bias, float *out,
                       ptrdiff_t rows, ptrdiff_t n, double eps)
{
    if (rows <= 0 || n <= 0)
        return;
    gc_ln_job J = {.x = x, .w = weight, .b = bias, .y = out, .n = n, .eps = eps};
    gc_parallel_range(rows, 1, (double)rows * (double)n * GC_LN_NS, ln_range_f32, &J);
}

void gc_layer_norm_f64(const double *x, const double *weight, const double *bias, double *out,
                       ptrdiff_t rows, ptrdiff_t n, double eps)
{
    if (rows <= 0 || n <= 0)
        return;
    gc_ln_job J = {.x = x, .w = weight, .b = bias, .y = out, .n = n, .eps = eps};
    gc_parallel_range(rows, 1, (double)rows * (double)n * 2.0 * GC_LN_NS, ln_range_f64, &J);
}

/* ---- eager row norms: layer_norm, rms_norm, group_norm, forward with statistics + backward -- */

/* x is [rows, cg * inner] with row r = (sample, group g = r % groups); its element
 * j = ci * inner + s belongs to channel c = g * cg + ci (weight / bias index).  layer_norm and
 * rms_norm: groups = 1, cg = n, inner = 1; group_norm: cg = C / groups, inner = H * W ...
 * Portable C (no ISA kernels: the same bits under every ISA), accumulating in double over 8
 * independent lanes that the compiler vectorizes; each row is computed the same way whichever
 * thread runs it.  Forward, per row: mean (0 for rms), then the mean square of the deviations
 * (two passes over the cached row), rstd = 1 / sqrt(var + eps), y = (x - mean) * rstd * w + b.
 * Backward, per row with xh = (x - mean) * rstd and gh = g * w:
 *   gx = rstd * (gh - mean(gh) - xh * mean(gh * xh))      (rms: without the mean(gh) term),
 * and the weight / bias gradients sum g * xh / g per channel: per block of `chunk` rows into
 * its own double partial (the blocks depend on the row count alone), added in block order. */
#define LN_LANES 8

#define LN_DEFINE(T, S)                                                                           \
    /* sum of x (sq = 0) or of (x - m)^2 (sq = 1), lane l of LN_LANES taking j % LN_LANES */      \
    GC_VECTOR_CLONES static double ln_sum_##S(const T *x, ptrdiff_t n, double m, int sq)          \
    {                                                                                             \
        double acc[LN_LANES] = {0};                                                               \
        ptrdiff_t j = 0;                                                                          \
        if (sq) {                                                                                 \
            for (; j + LN_LANES <= n; j += LN_LANES)                                              \
                for (int l = 0; l < LN_LANES; l++) {                                              \
                    const double d = (double)x[j + l] - m;                                        \
                    acc[l] += d * d;                                                              \
                }                                                                                 \
            for (int l = 0; j < n; j++, l++) {                                                    \
                const double d = (double)x[j] - m;                                                \
                acc[l] += d * d;                                                                  \
            }                                                                                     \
        } else {                                                                                  \
            for (; j + LN_LANES <= n; j += LN_LANES)                                              \
                for (int l = 0; l < LN_LANES; l++)                                                \
                    acc[l] += (double)x[j + l];                                                   \
            for (int l = 0; j < n; j++, l++)                                                      \
                acc[l] += (double)x[j];                                                           \
        }                                                                                         \
        double s = 0.0;                                                                           \
        for (int l = 0; l < LN_LANES; l++)                                                        \
            s += acc[l];                                                                          \
        return s;                                                                                 \
    }                                                                                             \
                                                                                                  \
    /* y = (x - m) * s [* w] [+ b] over n values, w / b per value (wc = 0) or one constant */     \
    GC_VECTOR_CLONES                                                                              \
    static void ln_out_##S(const T *x, T *y, ptrdiff_t n, T m, T s, const T *w, const T *b,       \
                           int wc)                                                                \
    {                                                                                             \
        const T wv = w ? w[0] : (T)1, bv = b ? b[0] : (T)0;                                       \
        if (w && b && !wc)                                                                        \
            for (ptrdiff_t j = 0; j < n; j++)                                                     \
                y[j] = (x[j] - m) * s * w[j] + b[j];                                              \
        else if (w && b)                                                                          \
            for (ptrdiff_t j = 0; j < n; j++)                                                     \
                y[j] = (x[j] - m) * s * wv + bv;                                                  \
        else if (w && !wc)                                                                        \
            for (ptrdiff_t j = 0; j < n; j++)                                                     \
                y[j] = (x[j] - m) * s * w[j];                                                     \
        else if (w)                                                                               \
            for (ptrdiff_t j = 0; j < n; j++)                                                     \
                y[j] = (x[j] - m) * s * wv;                                                       \
        else if (b && !wc)                                                                        \
            for (ptrdiff_t j = 0; j < n; j++)                                                     \
                y[j] = (x[j] - m) * s + b[j];                                                     \
        else if (b)                                                                               \
            for (ptrdiff_t j = 0; j < n; j++)                                                     \
                y[j] = (x[j] - m) * s + bv;                                                       \
        else                                                                                      \
            for (ptrdiff_t j = 0; j < n; j++)                                                     \
                y[j] = (x[j] - m) * s;                                                            \
    }                                                                                             \
                                                                                                  \
    /* one layer/rms_norm row of the backward: the lane sums of gh = g [* w] and gh * xh into     \
     * sa / sb, and (pw non-NULL) g * xh and g added into the weight / bias partials value by     \
     * value (local accumulators and restrict, so that both loops vectorize) */                   \
    GC_VECTOR_CLONES static void ln_bwd_row_##S(const T *restrict x, const T *restrict g,         \
                                                const T *restrict w, double m, double s,          \
                                                ptrdiff_t n, double *sa, double *sb,              \
                                                double *restrict pw, double *restrict pb)         \
    {                                                                                             \
        double a[LN_LANES] = {0}, b[LN_LANES] = {0};                                              \
        ptrdiff_t j = 0;                                                                          \
        for (; j + LN_LANES <= n; j += LN_LANES)                                                  \
            for (int l = 0; l < LN_LANES; l++) {                                                  \
                const double xh = ((double)x[j + l] - m) * s;                                     \
                const double gh = w ? (double)g[j + l] * (double)w[j + l] : (double)g[j + l];     \
                a[l] += gh;                                                                       \
                b[l] += gh * xh;                                                                  \
            }                                                                                     \
        for (int l = 0; j < n; j++, l++) {                                                        \
            const double xh = ((double)x[j] - m) * s;                                             \
            const double gh = w ? (double)g[j] * (double)w[j] : (double)g[j];                     \
            a[l] += gh;                                                                           \
            b[l] += gh * xh;                                                                      \
        }                                                                                         \
        for (int l = 0; l < LN_LANES; l++) {                                                      \
            sa[l] = a[l];                                                                         \
            sb[l] = b[l];                                                                         \
        }                                                                                         \
        if (pw)                                                                                   \
            for (ptrdiff_t e = 0; e < n; e++) {                                                   \
                const double gv = (double)g[e];                                                   \
                pw[e] += gv * (((double)x[e] - m) * s);                                           \
                pb[e] += gv;                                                                      \
            }                                                                                     \
    }                                                                                             \
                                                                                                  \
    typedef struct {                                                                              \
        const T *x, *w, *b, *g;                                                                   \
        T *y, *mean, *rstd, *gx;                                                                  \
        double *part;                                                                             \
        ptrdiff_t rows, groups, cg, inner, chunk;                                                 \
        double eps;                                                                               \
        int rms;                                                                                  \
    } ln_job_##S;                                                                                 \
                                                                                                  \
    GC_VECTOR_CLONES static void ln_fwd_range_##S(void *ctx, ptrdiff_t lo, ptrdiff_t hi)          \
    {                                                                                             \
        const ln_job_##S *J = (const ln_job_##S *)ctx;                                            \
        const ptrdiff_t inner = J->inner, n = J->cg * inner;                                      \
        for (ptrdiff_t r = lo; r < hi; r++) {                                                     \
            const T *x = J->x + r * n;                                                            \
            T *y = J->y + r * n;                                                                  \
            const double mean = J->rms ? 0.0 : ln_sum_##S(x, n, 0.0, 0) / (double)n;              \
            const double q = ln_sum_##S(x, n, mean, 1);                                           \
            const double rstd = 1.0 / sqrt(q / (double)n + J->eps);                               \
            const T m = (T)mean, s = (T)rstd;                                                     \
            if (J->mean)                                                                          \
                J->mean[r] = m;                                                                   \
            if (J->rstd)                                                                          \
                J->rstd[r] = s;                                                                   \
            const ptrdiff_t c0 = (r % J->groups) * J->cg;                                         \
            const T *w = J->w ? J->w + c0 : NULL, *b = J->b ? J->b + c0 : NULL;                   \
            if (inner == 1) /* layer_norm, rms_norm: weight / bias per value */                   \
                ln_out_##S(x, y, n, m, s, w, b, 0);                                               \
            else /* group_norm: one weight / bias per channel of inner values */                  \
                for (ptrdiff_t ci = 0; ci < J->cg; ci++)                                          \
                    ln_out_##S(x + ci * inner, y + ci * inner, inner, m, s, w ? w + ci : NULL,    \
                               b ? b + ci : NULL, 1);                                             \
        }                                                                                         \
    }                                                                                             \
                                                                                                  \
    void gc_norm_rows_fwd_##S(const T *x, const T *w, const T *b, T *y, T *mean, T *rstd,         \
                              ptrdiff_t rows, ptrdiff_t groups, ptrdiff_t cg, ptrdiff_t inner,    \
                              double eps, int rms)                                                \
    {                                                                                             \
        if (rows <= 0 || groups <= 0) /* an empty row gets mean and rstd NaN */                   \
            return;                                                                               \
        ln_job_##S J = {.x = x, .w = w, .b = b, .y = y, .mean = mean, .rstd = rstd,               \
                        .groups = groups, .cg = cg, .inner = inner, .eps = eps, .rms = rms};      \
        gc_parallel_range(rows, 1, (double)rows * (double)(cg * inner), ln_fwd_range_##S, &J);    \
    }                                                                                             \
                                                                                                  \
    /* blocks [lo, hi) of J->chunk rows: gx rows and the block's partial sums */                  \
    GC_VECTOR_CLONES static void ln_bwd_range_##S(void *ctx, ptrdiff_t lo, ptrdiff_t hi)          \
    {                                                                                             \
        const ln_job_##S *J = (const ln_job_##S *)ctx;                                            \
        const ptrdiff_t inner = J->inner, n = J->cg * inner, nc = J->groups * J->cg;              \
        for (ptrdiff_t c = lo; c < hi; c++) {                                                     \
            double *pw = J->part ? J->part + c * 2 * nc : NULL, *pb = pw ? pw + nc : NULL;        \
            if (pw)                                                                               \
                for (ptrdiff_t j = 0; j < 2 * nc; j++)                                            \
                    pw[j] = 0.0;                                                                  \
            const ptrdiff_t r1 = (c + 1) * J->chunk < J->rows ? (c + 1) * J->chunk : J->rows;     \
            for (ptrdiff_t r = c * J->chunk; r < r1; r++) {                                       \
                const T *x = J->x + r * n, *g = J->g + r * n;                                     \
                const double m = J->mean ? (double)J->mean[r] : 0.0, s = (double)J->rstd[r];      \
                const ptrdiff_t c0 = (r % J->groups) * J->cg;                                     \
                double sa[LN_LANES] = {0}, sb[LN_LANES] = {0};                                    \
                if (inner == 1) /* layer_norm, rms_norm: weight / bias per value */               \
                    ln_bwd_row_##S(x, g, J->w ? J->w + c0 : NULL, m, s, n, sa, sb,                \
                                   pw ? pw + c0 : NULL, pw ? pb + c0 : NULL);                     \
                for (ptrdiff_t ci = 0, j = 0; inner > 1 && ci < J->cg; ci++) {                    \
                    const double wv = J->w ? (double)J->w[c0 + ci] : 1.0;                         \
                    double aw = 0.0, ab = 0.0;                                                    \
                    for (ptrdiff_t e = 0; e < inner; e++, j++) {                                  \
                        const double xh = ((double)x[j] - m) * s;                                 \
                        const double gh = J->w ? (double)g[j] * wv : (double)g[j];                \
                        sa[j % LN_LANES] += gh;                                                   \
                        sb[j % LN_LANES] += gh * xh;                                              \
                        aw += (double)g[j] * xh;                                                  \
                        ab += (double)g[j];                                                       \
                    }                                                                             \
                    if (pw) {                                                                     \
                        pw[c0 + ci] += aw;                                                        \
                        pb[c0 + ci] += ab;                                                        \
                    }                                                                             \
                }                                                                                 \
                double a = 0.0, bb = 0.0;                                                         \
                for (int l = 0; l < LN_LANES; l++) {                                              \
                    a += sa[l];                                                                   \
                    bb += sb[l];                                                                  \
                }                                                                                 \
                a = J->rms ? 0.0 : a / (double)n;                                                 \
                bb /= (double)n;                                                                  \
                if (J->gx) {                                                                      \
                    T *gx = J->gx + r * n;                                                        \
                    const T *w = J->w ? J->w + c0 : NULL;                                         \
                    if (inner == 1 && w)                                                          \
                        for (ptrdiff_t j = 0; j < n; j++) {                                       \
                            const double xh = ((double)x[j] - m) * s;                             \
                            gx[j] = (T)(s * ((double)g[j] * (double)w[j] - a - xh * bb));         \
                        }                                                                         \
                    else if (inner == 1 || !w)                                                    \
                        for (ptrdiff_t j = 0; j < n; j++) {                                       \
                            const double xh = ((double)x[j] - m) * s;                             \
                            gx[j] = (T)(s * ((double)g[j] - a - xh * bb));                        \
                        }                                                                         \
                    else                                                                          \
                        for (ptrdiff_t ci = 0; ci < J->cg; ci++) {                                \
                            const double wv = (double)w[ci];                                      \
                            for (ptrdiff_t e = ci * inner; e < (ci + 1) * inner; e++) {           \
                                const double xh = ((double)x[e] - m) * s;                         \
                                gx[e] = (T)(s * ((double)g[e] * wv - a - xh * bb));               \
                            }                                                                     \
                        }                                                                         \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
                                                                                                  \
    void gc_norm_rows_bwd_##S(const T *x, const T *w, const T *mean, const T *rstd, const T *g,   \
                              T *gx, T *gw, T *gb, double *part, ptrdiff_t rows,                  \
                              ptrdiff_t groups, ptrdiff_t cg, ptrdiff_t inner, ptrdiff_t chunk,   \
                              int rms)                                                            \
    {                                                                                             \
        const ptrdiff_t nc = groups * cg;                                                         \
        if (rows <= 0 || groups <= 0 || cg * inner == 0) {                                        \
            for (ptrdiff_t j = 0; j < nc; j++) {                                                  \
                if (gw)                                                                           \
                    gw[j] = (T)0;                                                                 \
                if (gb)                                                                           \
                    gb[j] = (T)0;                                                                 \
            }                                                                                     \
            return;                                                                               \
        }                                                                                         \
        const ptrdiff_t nch = (rows + chunk - 1) / chunk;                                         \
        ln_job_##S J = {.x = x, .w = w, .g = g, .gx = gx, .mean = (T *)mean,                      \
                        .rstd = (T *)rstd, .part = (gw || gb) ? part : NULL, .rows = rows,        \
                        .groups = groups, .cg = cg, .inner = inner, .chunk = chunk, .rms = rms};  \
        gc_parallel_range(nch, 1, (double)rows * (double)(cg * inner) * 2.0, ln_bwd_range_##S,    \
                          &J);                                                                    \
        if (!J.part)                                                                              \
            return;                                                                               \
        for (ptrdiff_t j = 0; j < nc; j++) {                                                      \
            double sw = 0.0, sb = 0.0;                                                            \
            for (ptrdiff_t c = 0; c < nch; c++) {                                                 \
                sw += part[c * 2 * nc + j];                                                       \
                sb += part[c * 2 * nc + nc + j];                                                  \
            }                                                                                     \
            if (gw)                                                                               \
                gw[j] = (T)sw;                                                                    \
            if (gb)                                                                               \
                gb[j] = (T)sb;                                                                    \
        }                                                                                         \
    }

LN_DEFINE(float, f32)
LN_DEFINE(double, f64)

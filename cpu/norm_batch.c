/* batch_norm over dim 1 of a C-contiguous [N, C, inner] array, forward (training: the batch's
 * statistics, and the running statistics updated in place; eval: the running statistics) and
 * backward.  Portable C (no ISA kernels: the same bits under every ISA), accumulating in double
 * over 8 independent lanes; each channel is computed whole by one thread (channels are split
 * over the pool), so the bits do not depend on the thread count either.
 *   training, per channel c over its cnt = N * inner values: mean, then the biased variance of
 *     the deviations (two passes), rstd = 1 / sqrt(var + eps); with running statistics:
 *     rmean = (1 - momentum) * rmean + momentum * mean,
 *     rvar = (1 - momentum) * rvar + momentum * var * cnt / (cnt - 1)   (PyTorch's unbiased);
 *   eval: mean = rmean, rstd = 1 / sqrt(rvar + eps);
 *   y = (x - mean) * rstd * w + b, and mean / rstd saved for the backward.
 * Backward with xh = (x - mean) * rstd: gw = sum(g * xh), gb = sum(g) per channel, and
 *   training: gx = rstd * w * (g - gb / cnt - xh * gw / cnt);   eval: gx = rstd * w * g. */
#include <math.h>

#include "isa.h"
#include "kernels.h"

#define BN_LANES 8

#define BN_DEFINE(T, S)                                                                           \
    typedef struct {                                                                              \
        const T *x, *w, *b, *g;                                                                   \
        T *y, *mean, *rstd, *rmean, *rvar, *gx, *gw, *gb;                                         \
        ptrdiff_t n, c, inner;                                                                    \
        double eps, momentum;                                                                     \
        int training;                                                                             \
    } bn_job_##S;                                                                                 \
                                                                                                  \
    /* sum over the channel's values of x (sq = 0) or of (x - m)^2 (sq = 1); in each sample's     \
     * run of inner values, value j goes to lane j % BN_LANES */                                  \
    GC_VECTOR_CLONES                                                                              \
    static double bn_sum_##S(const bn_job_##S *J, ptrdiff_t ch, double m, int sq)                 \
    {                                                                                             \
        double acc[BN_LANES] = {0};                                                               \
        const ptrdiff_t inner = J->inner;                                                         \
        for (ptrdiff_t i = 0; i < J->n; i++) {                                                    \
            const T *x = J->x + (i * J->c + ch) * inner;                                          \
            ptrdiff_t j = 0;                                                                      \
            if (sq) {                                                                             \
                for (; j + BN_LANES <= inner; j += BN_LANES)                                      \
                    for (int l = 0; l < BN_LANES; l++) {                                          \
                        const double d = (double)x[j + l] - m;                                    \
                        acc[l] += d * d;                                                          \
                    }                                                                             \
                for (int l = 0; j < inner; j++, l++) {                                            \
                    const double d = (double)x[j] - m;                                            \
                    acc[l] += d * d;                                                              \
                }                                                                                 \
            } else {                                                                              \
                for (; j + BN_LANES <= inner; j += BN_LANES)                                      \
                    for (int l = 0; l < BN_LANES; l++)                                            \
                        acc[l] += (double)x[j + l];                                               \
                for (int l = 0; j < inner; j++, l++)                                              \
                    acc[l] += (double)x[j];                                                       \
            }                                                                                     \
        }                                                                                         \
        double s = 0.0;                                                                           \
        for (int l = 0; l < BN_LANES; l++)                                                        \
            s += acc[l];                                                                          \
        return s;                                                                                 \
    }                                                                                             \
                                                                                                  \
    GC_VECTOR_CLONES static void bn_fwd_range_##S(void *ctx, ptrdiff_t lo, ptrdiff_t hi)          \
    {                                                                                             \
        const bn_job_##S *J = (const bn_job_##S *)ctx;                                            \
        const double cnt = (double)J->n * (double)J->inner;                                       \
        for (ptrdiff_t ch = lo; ch < hi; ch++) {                                                  \
            double mean, rstd;                                                                    \
            if (J->training) {                                                                    \
                mean = bn_sum_##S(J, ch, 0.0, 0) / cnt;                                           \
                const double var = bn_sum_##S(J, ch, mean, 1) / cnt;                              \
                rstd = 1.0 / sqrt(var + J->eps);                                                  \
                const double mo = J->momentum;                                                    \
                if (J->rmean)                                                                     \
                    J->rmean[ch] = (T)((1.0 - mo) * (double)J->rmean[ch] + mo * mean);            \
                if (J->rvar)                                                                      \
                    J->rvar[ch] = (T)((1.0 - mo) * (double)J->rvar[ch] +                          \
                                      mo * var * cnt / (cnt - 1.0));                              \
            } else {                                                                              \
                mean = (double)J->rmean[ch];                                                      \
                rstd = 1.0 / sqrt((double)J->rvar[ch] + J->eps);                                  \
            }                                                                                     \
            const T m = (T)mean, s = (T)rstd;                                                     \
            J->mean[ch] = m;                                                                      \
            J->rstd[ch] = s;                                                                      \
            /* y = x * sc + sh would round differently: the row norms' formula */                 \
            const T wv = J->w ? J->w[ch] : (T)1, bv = J->b ? J->b[ch] : (T)0;                     \
            for (ptrdiff_t i = 0; i < J->n; i++) {                                                \
                const ptrdiff_t off = (i * J->c + ch) * J->inner;                                 \
                const T *x = J->x + off;                                                          \
                T *y = J->y + off;                                                                \
                if (J->w && J->b)                                                                 \
                    for (ptrdiff_t j = 0; j < J->inner; j++)                                      \
                        y[j] = (x[j] - m) * s * wv + bv;                                          \
                else if (J->w)                                                                    \
                    for (ptrdiff_t j = 0; j < J->inner; j++)                                      \
                        y[j] = (x[j] - m) * s * wv;                                               \
                else if (J->b)                                                                    \
                    for (ptrdiff_t j = 0; j < J->inner; j++)                                      \
                        y[j] = (x[j] - m) * s + bv;                                               \
                else                                                                              \
                    for (ptrdiff_t j = 0; j < J->inner; j++)                                      \
                        y[j] = (x[j] - m) * s;                                                    \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
                                                                                                  \
    void gc_batch_norm_fwd_##S(const T *x, const T *w, const T *b, T *y, T *mean, T *rstd,        \
                               T *rmean, T *rvar, ptrdiff_t n, ptrdiff_t c, ptrdiff_t inner,      \
                               double eps, double momentum, int training)                         \
    {                                                                                             \
        if (c <= 0 || (training && n * inner <= 0))                                               \
            return;                                                                               \
        bn_job_##S J = {.x = x, .w = w, .b = b, .y = y, .mean = mean, .rstd = rstd,               \
                        .rmean = rmean, .rvar = rvar, .n = n, .c = c, .inner = inner,             \
                        .eps = eps, .momentum = momentum, .training = training};                  \
        gc_parallel_range(c, 1, (double)n * (double)c * (double)inner * 1.5, bn_fwd_range_##S,    \
                          &J);                                                                    \
    }                                                                                             \
                                                                                                  \
    GC_VECTOR_CLONES static void bn_bwd_range_##S(void *ctx, ptrdiff_t lo, ptrdiff_t hi)          \
    {                                                                                             \
        const bn_job_##S *J = (const bn_job_##S *)ctx;                                            \
        const double cnt = (double)J->n * (double)J->inner;                                       \
        for (ptrdiff_t ch = lo; ch < hi; ch++) {                                                  \
            const double m = (double)J->mean[ch], s = (double)J->rstd[ch];                        \
            double sg[BN_LANES] = {0}, sx[BN_LANES] = {0};                                        \
            const ptrdiff_t inner = J->inner;                                                     \
            for (ptrdiff_t i = 0; i < J->n; i++) { /* lanes as bn_sum */                          \
                const ptrdiff_t off = (i * J->c + ch) * inner;                                    \
                const T *x = J->x + off, *g = J->g + off;                                         \
                ptrdiff_t j = 0;                                                                  \
                for (; j + BN_LANES <= inner; j += BN_LANES)                                      \
                    for (int l = 0; l < BN_LANES; l++) {                                          \
                        sg[l] += (double)g[j + l];                                                \
                        sx[l] += (double)g[j + l] * (((double)x[j + l] - m) * s);                 \
                    }                                                                             \
                for (int l = 0; j < inner; j++, l++) {                                            \
                    sg[l] += (double)g[j];                                                        \
                    sx[l] += (double)g[j] * (((double)x[j] - m) * s);                             \
                }                                                                                 \
            }                                                                                     \
            double a = 0.0, bb = 0.0;                                                             \
            for (int l = 0; l < BN_LANES; l++) {                                                  \
                a += sg[l];                                                                       \
                bb += sx[l];                                                                      \
            }                                                                                     \
            if (J->gw)                                                                            \
                J->gw[ch] = (T)bb;                                                                \
            if (J->gb)                                                                            \
                J->gb[ch] = (T)a;                                                                 \
            if (!J->gx)                                                                           \
                continue;                                                                         \
            const double sw = s * (J->w ? (double)J->w[ch] : 1.0);                                \
            const double ma = J->training ? a / cnt : 0.0, mb = J->training ? bb / cnt : 0.0;     \
            for (ptrdiff_t i = 0; i < J->n; i++) {                                                \
                const ptrdiff_t off = (i * J->c + ch) * J->inner;                                 \
                const T *x = J->x + off, *g = J->g + off;                                         \
                T *gx = J->gx + off;                                                              \
                for (ptrdiff_t j = 0; j < J->inner; j++) {                                        \
                    const double xh = ((double)x[j] - m) * s;                                     \
                    gx[j] = (T)(sw * ((double)g[j] - ma - xh * mb));                              \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
                                                                                                  \
    void gc_batch_norm_bwd_##S(const T *x, const T *w, const T *mean, const T *rstd, const T *g,  \
                               T *gx, T *gw, T *gb, ptrdiff_t n, ptrdiff_t c, ptrdiff_t inner,    \
                               int training)                                                      \
    {                                                                                             \
        if (c <= 0)                                                                               \
            return;                                                                               \
        bn_job_##S J = {.x = x, .w = w, .g = g, .mean = (T *)mean, .rstd = (T *)rstd, .gx = gx,   \
                        .gw = gw, .gb = gb, .n = n, .c = c, .inner = inner,                       \
                        .training = training};                                                    \
        gc_parallel_range(c, 1, (double)n * (double)c * (double)inner * 2.0, bn_bwd_range_##S,    \
                          &J);                                                                    \
    }

BN_DEFINE(float, f32)
BN_DEFINE(double, f64)

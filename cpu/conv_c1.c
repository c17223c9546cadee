/* Direct float32 conv2d forward for few input channels (c <= 4: a CNN's first layer on grey or
 * RGB images) with output pixels along the vector lanes: per output row, each tap is one vector
 * of consecutive input pixels (stride 1 along the row) read from zero-padded rows, every output
 * channel's weight for that tap broadcast, one FMA per tap and channel into accumulators held in
 * registers (gc_isa.c1ukr_f32, isa/ukr_c1.h: AVX-512 16 pixels x 16 channels, AVX2 and SSE2
 * 8 x 8, scalar 1 x 4); then + bias, + residual, relu and one store per vector, in NCHW.
 *
 * Why: with 9 taps (1 -> 16, 3x3) the im2col GEMM writes and reads a column matrix 9x the
 * image and runs a 16-row product on its gemv path; conv_direct.c's 14 x 32 tile is half empty
 * with 16 output channels and its transposed store weighs as much as its FMAs.  Here the only
 * memory traffic is the image (read once, padded on the fly into a cached buffer) and the output.
 *
 * Bits: each element is the FMA chain over the taps in im2col's order (ci, ki, kj) from zero in
 * one K block (the rule keeps c*kh*kw within one), then + bias, + residual, relu, each rounded on
 * its own: the im2col GEMM's bits (gemv_n up to 24 output channels, the blocked tile beyond)
 * and conv_direct.c's, apart from NaN payloads (where two NaNs meet, e.g. a NaN sum and a NaN
 * residual of the other sign, SSE2 and scalar keep either operand's: conv_direct.c and im2col
 * differ alike; the NaNs themselves agree).  A missing bias adds -0
 * (isa/ukr_c1.h: +0 would turn the -0 of a chain of negative underflows into +0).  Each element
 * is computed by one thread: no thread count changes a bit.
 *
 * Work: units of (image, group of output rows), in one of two modes.  Stride 1 (flat): the
 * unit copies each input channel's rows once per kernel column, cut to the output's width and
 * shifted by that column's offset (zeros where the padding is: c1_copies, kw x the input), so
 * that a tap's values for consecutive output pixels are consecutive across output rows too; one
 * kernel call then runs all the unit's pixels in whole vectors (28 x 28 outputs: 49 vectors of
 * 16 a plane, against 2 x 16 lanes for each 28-pixel row, and 64-byte aligned stores).  Strided
 * rows: the zero-padded input rows (c1_pad) and one call per output row.  Units are whole
 * images, or groups of rows where there are fewer images than threads or an image's copies
 * would pass c1_copy_budget (the L2).  When: gc_conv2d_c1_use.
 *
 * Pooled (gc_conv2d_c1_pool_f32, conv2d_relu_max_pool2d's kernel): units of whole images, each
 * image's output made in the thread's buffer and max-pooled from there by maxpool.c's own pass
 * (the bits of the separate max_pool2d call): the output is never written to memory and read
 * back (the training CNN's 1 -> 16 layer: 3.2 MB each way).  Only where that buffer fits
 * c1_pool_budget (half the L2) and there are at least as many images as threads; elsewhere
 * it declines (the caller's two calls run the layer on every thread). */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conv_direct.h"
#include "conv_fwd.h"
#include "isa.h"
#include "kernels.h"

/* the most input channels and taps (c * kh * kw: one FMA chain, the accumulators' reuse) */
#define C1_MAXC 4
#define C1_MAXK 64

/* The rule (measured on the AVX-512 Zen 4, one thread, eager forward, ms: this path against the
 * im2col GEMM and conv_direct.c; AVX2 forced on the same machine in brackets; same bits): where
 * the ISA has the row kernel, c <= C1_MAXC input channels, stride 1 along the row,
 * c * kh * kw <= C1_MAXK taps within one of the GEMM's K blocks, and at most C1_MAXO output
 * channels (the most measured).  Batch 64 3x3 padding 1: 1 -> 16 at 28 x 28 (the training
 * CNN's first layer) 0.17 / 0.26 / 0.39 (0.36 / 0.46 / 0.99); 1 -> 32 0.38 / 0.53 / 0.60;
 * 1 -> 64 0.84 / 1.46 / 2.00 (1.04 / 1.55 / 4.02); 3 -> 16 at 32 x 32 0.72 / 0.88 / 1.37 (0.93 /
 * 1.94 / 1.13); 3 -> 64 2.48 / 3.55 / 3.70 (3.01 / 3.48 / 4.63); 4 -> 128 at 28 x 28 4.66 / 6.23
 * / 6.89 (6.14 / 6.24 / 9.55); 1 -> 16 at 8 x 8 0.023 / 0.042 / 0.043; 5x5 padding 2, 1 -> 16
 * 0.45 / 0.63 / 0.83; batch 1, 3 -> 64 at 224 x 224 2.25 / 3.68 / 3.02 (2.51 / 3.14 / 3.23).
 * Winograd (at least 32 input channels) never meets it.  1x1 layers without padding stay on
 * conv_pw.c's rule (and the GEMM on the image itself), not measured against this path. */
#define C1_MAXO 128

/* A unit's copies (either mode) within the L2: the row groups are sized to it, so a large
 * image (3 x 224 x 224 copied kw = 3 times: 1.8 MB) runs in several units (each re-copies its
 * (kh - 1) * dh rows of overlap) and the per-thread scratch kept after the call stays bounded.
 * Measured (Zen 4, 1 MB L2, one thread, batch 8, 3 -> 64 3x3 at 224 x 224, ms): whole images
 * 13.9 - 14.1, the L2 (2 units an image) 13.9 - 14.2, half of it 14.3 - 14.4, a quarter
 * 14.5 - 14.9 (the output's 64 planes then written in shorter runs). */
static size_t c1_copy_budget(void)
{
    return (size_t)(gc_cache_info.l2 > 0 ? gc_cache_info.l2 : 512 * 1024);
}

/* The pooled path's unit buffer (copies and one image's output) within half the L2, and at
 * least as many images as threads (its units are whole images: a batch-1 inference would run
 * on one thread); elsewhere it declines and the caller makes the two calls. */
static size_t c1_pool_budget(void)
{
    return (size_t)(gc_cache_info.l2 > 0 ? gc_cache_info.l2 : 512 * 1024) / 2;
}

int gc_conv2d_c1_use(const gc_conv *p, ptrdiff_t o)
{
    if (!gc_isa.c1ukr_f32 || o <= 0 || p->n <= 0 || p->c <= 0 || p->oh <= 0 || p->ow <= 0)
        return 0;
    const ptrdiff_t ck = p->c * p->kh * p->kw;
    if (p->c > C1_MAXC || p->sw != 1 || ck > C1_MAXK || ck > gc_blk_f32.kc)
        return 0;
    /* koff is int32: a unit's buffer (either mode's) must stay below 2^31 elements */
    const double wp = (double)p->w + 2.0 * (double)p->pw + (double)p->kw * (double)p->ow +
                      2.0 * (double)gc_isa.c1_vl;
    if ((double)p->c * ((double)p->h + 2.0 * (double)p->ph + 1.0) * wp >= 2147483647.0)
        return 0;
    const char *e = getenv("GPUCORE_CONV");
    if (e && gc_env_is(e, "direct_c1"))
        return 1;
    /* every other forced path (im2col, direct, direct_t, direct_gw, winograd, pointwise,
     * pointwise_t) turns it off, so that the forced one runs */
    if (e && (dconv_forced() || gc_env_is(e, "winograd") || gc_env_is(e, "pointwise") ||
              gc_env_is(e, "pointwise_t")))
        return 0;
    /* 1x1 without padding: conv_pw.c's measured rule (or the GEMM on the image itself) */
    if (p->kh == 1 && p->kw == 1 && p->ph == 0 && p->pw == 0)
        return 0;
    return o <= C1_MAXO;
}

typedef struct {
    gc_conv_fwd f; /* the call (conv_fwd.h; pooled: no out, no res) */
    const float *wt;
    const int32_t *koff;
    ptrdiff_t wpp, rows, grows, ngrp, cstride, vl;
    int flat; /* flat: stride 1, the kj-shifted copies (c1_copies); else padded rows */
    /* pooled (gc_conv2d_c1_pool_f32): each image's output made in the unit's buffer at tofs,
     * then max-pooled from there into vals / idx (pool: one image's o planes) */
    gc_pool2d pool;
    float *vals;
    int64_t *idx;
    ptrdiff_t tofs;
    int pooled;
} c1_job;

/* The copies of the flat mode (stride 1): for each input channel ci and kernel column kj, the
 * padded rows r0 .. r0 + nr - 1 cut to the output's width and shifted by the column's offset,
 * cp[r * ow + ox] = x[ci][r0 + r - ph][ox + kj * dw - pw] (0 outside the image), then vl zeros:
 * tap (ci, ki, kj) of flat output pixel q (= oy * ow + ox, from r0's row) at
 * cp[q + ki * dh * ow], consecutive pixels consecutive across output rows. */
static void c1_copies(const c1_job *J, float *buf, const float *x, ptrdiff_t r0, ptrdiff_t nr)
{
    const gc_conv *p = J->f.p;
    const ptrdiff_t ow = p->ow;
    /* the rows that lie in the image: ra .. rb - 1 */
    const ptrdiff_t ra = p->ph - r0 > 0 ? (p->ph - r0 < nr ? p->ph - r0 : nr) : 0;
    ptrdiff_t rb = p->h + p->ph - r0 < nr ? p->h + p->ph - r0 : nr;
    if (rb < ra)
        rb = ra;
    for (ptrdiff_t ci = 0; ci < p->c; ci++)
        for (ptrdiff_t kj = 0; kj < p->kw; kj++) {
            float *cp = buf + (ci * p->kw + kj) * J->cstride;
            const ptrdiff_t sh = kj * p->dw - p->pw; /* input column of output column 0 */
            if (ow == p->w) { /* rows as wide as the image's ("same" padding): whole runs of rows
                               * copied at once, the columns shifted past an edge zeroed after
                               * (per-row copies of a 28-wide image cost a quarter of the
                               * kernel's time) */
                const ptrdiff_t a = ra * ow + (sh < 0 ? -sh : 0), e = rb * ow - (sh > 0 ? sh : 0);
                memset(cp, 0, sizeof(float) * (size_t)(ra * ow));
                if (e > a)
                    memcpy(cp + a, x + (ci * p->h + r0 - p->ph) * p->w + a + sh,
                           sizeof(float) * (size_t)(e - a));
                for (ptrdiff_t r = ra; r < rb; r++) {
                    float *row = cp + r * ow;
                    for (ptrdiff_t ox = 0; ox < ow && ox + sh < 0; ox++)
                        row[ox] = 0.0f;
                    for (ptrdiff_t ox = ow - sh > 0 ? ow - sh : 0; ox < ow; ox++)
                        row[ox] = 0.0f;
                }
                memset(cp + rb * ow, 0, sizeof(float) * (size_t)((nr - rb) * ow + J->vl));
                continue;
            }
            const ptrdiff_t lo = sh < 0 ? (-sh < ow ? -sh : ow) : 0;
            ptrdiff_t hi = p->w - sh < ow ? p->w - sh : ow;
            if (hi < lo)
                hi = lo;
            for (ptrdiff_t r = 0; r < nr; r++, cp += ow) {
                const ptrdiff_t sy = r0 + r - p->ph;
                if (sy < 0 || sy >= p->h) {
                    memset(cp, 0, sizeof(float) * (size_t)ow);
                    continue;
                }
                const float *xr = x + (ci * p->h + sy) * p->w + sh;
                memset(cp, 0, sizeof(float) * (size_t)lo);
                memcpy(cp + lo, xr + lo, sizeof(float) * (size_t)(hi - lo));
                memset(cp + hi, 0, sizeof(float) * (size_t)(ow - hi));
            }
            memset(cp, 0, sizeof(float) * (size_t)J->vl);
        }
}

/* The padded rows of the row mode (strided rows): rows r0 .. r0 + nr - 1 of the zero-padded
 * image, J->wpp wide (at least a vector plus the kernel's reach). */
static void c1_pad(const c1_job *J, float *buf, const float *x, ptrdiff_t r0, ptrdiff_t nr)
{
    const gc_conv *p = J->f.p;
    const ptrdiff_t wpp = J->wpp, right = wpp - p->pw - p->w;
    for (ptrdiff_t ci = 0; ci < p->c; ci++)
        for (ptrdiff_t r = 0; r < nr; r++) {
            float *d = buf + (ci * J->rows + r) * wpp;
            const ptrdiff_t sy = r0 + r - p->ph;
            if (sy < 0 || sy >= p->h) {
                memset(d, 0, sizeof(float) * (size_t)wpp);
                continue;
            }
            memset(d, 0, sizeof(float) * (size_t)p->pw);
            memcpy(d + p->pw, x + (ci * p->h + sy) * p->w, sizeof(float) * (size_t)p->w);
            memset(d + p->pw + p->w, 0, sizeof(float) * (size_t)right);
        }
}

/* one unit (gc_conv_claim_units): image u / ngrp, its output rows of group u % ngrp */
static void c1_unit(void *job, void *scratch, long u, long prev)
{
    (void)prev;
    const c1_job *J = (const c1_job *)job;
    const gc_conv *p = J->f.p;
    float *buf = (float *)scratch;
    const ptrdiff_t b = u / J->ngrp, y0 = u % J->ngrp * J->grows;
    const ptrdiff_t y1 = y0 + J->grows < p->oh ? y0 + J->grows : p->oh;
    /* the padded input rows of outputs y0 .. y1 - 1: rows r0 .. r0 + nr - 1 of the padded image */
    const ptrdiff_t r0 = y0 * p->sh, nr = (y1 - 1 - y0) * p->sh + (p->kh - 1) * p->dh + 1;
    const float *x = J->f.x + b * p->c * p->h * p->w;
    /* the output: out's image, or (pooled: whole images) the unit's buffer */
    const ptrdiff_t at = J->pooled ? 0 : b * J->f.o * J->f.l + y0 * p->ow;
    float *out = J->pooled ? buf + J->tofs : J->f.out;
    if (J->flat) { /* all the unit's pixels in one run */
        c1_copies(J, buf, x, r0, nr);
        gc_isa.c1ukr_f32(J->f.ck, buf, J->koff, J->wt, J->f.o, J->f.bias,
                         J->f.res ? J->f.res + at : NULL, J->f.relu, out + at, J->f.l,
                         (y1 - y0) * p->ow);
    } else {
        c1_pad(J, buf, x, r0, nr);
        for (ptrdiff_t oy = y0; oy < y1; oy++) {
            const ptrdiff_t ar = at + (oy - y0) * p->ow;
            gc_isa.c1ukr_f32(J->f.ck, buf + (oy - y0) * p->sh * J->wpp, J->koff, J->wt, J->f.o,
                             J->f.bias, J->f.res ? J->f.res + ar : NULL, J->f.relu, out + ar,
                             J->f.l, p->ow);
        }
    }
    if (J->pooled) { /* max_pool2d's own pass over the image's planes, read from cache (a nested
                      * region: this thread alone), the bits of the separate call */
        const ptrdiff_t pl = J->f.o * J->pool.oh * J->pool.ow;
        gc_max_pool2d_f32(out, J->vals + b * pl, J->idx ? J->idx + b * pl : NULL, &J->pool);
    }
}

/* the path, J's call (J.f) and outputs set by the caller */
static int c1_run(const c1_job *init, const float *w)
{
    c1_job J = *init;
    const gc_conv *p = J.f.p;
    const ptrdiff_t o = J.f.o;
    if (p->n <= 0 || o <= 0 || J.f.l <= 0)
        return 0;
    /* the weight in blocks of ob channels, [nblk][nt][ob], channels past o zero (computed, never
     * stored) */
    const ptrdiff_t ob = gc_isa.c1_ob, nblk = (o + ob - 1) / ob, vl = gc_isa.c1_vl;
    float *wt = (float *)gc_conv_scratch(4, sizeof(float) * (size_t)(nblk * J.f.ck * ob));
    int32_t *koff = (int32_t *)gc_conv_scratch(5, sizeof(int32_t) * (size_t)J.f.ck);
    if (!wt || !koff)
        return -1;
    memset(wt, 0, sizeof(float) * (size_t)(nblk * J.f.ck * ob));
    for (ptrdiff_t j = 0; j < o; j++)
        for (ptrdiff_t t = 0; t < J.f.ck; t++)
            wt[(j / ob * J.f.ck + t) * ob + j % ob] = w[j * J.f.ck + t];
    J.wt = wt;
    /* the threads, and the output rows per unit: whole images, or groups of rows when there
     * are fewer images than threads */
    const int nt = gc_conv_fwd_threads(&J.f);
    if (J.pooled && p->n < nt)
        return 1;
    J.vl = vl;
    J.flat = p->sh == 1;
    /* padded rows (strided mode): the image's with its padding, at least a vector plus the
     * kernel's reach (a row narrower than a vector is read a whole vector wide) */
    const ptrdiff_t reach = (p->kw - 1) * p->dw;
    J.wpp = p->w + 2 * p->pw < vl + reach ? vl + reach : p->w + 2 * p->pw;
    J.ngrp = p->n < nt && !J.pooled ? (nt + p->n - 1) / p->n : 1;
    if (J.ngrp > p->oh)
        J.ngrp = p->oh;
    J.grows = (p->oh + J.ngrp - 1) / J.ngrp;
    if (!J.pooled) { /* the copies within c1_copy_budget: bytes of one output row's group, and
                      * of each further row */
        const ptrdiff_t span = (p->kh - 1) * p->dh + 1;
        const double one = J.flat ? 4.0 * (double)(p->c * p->kw) * (double)(span * p->ow + vl)
                                  : 4.0 * (double)(p->c * span * J.wpp);
        const double more = J.flat ? 4.0 * (double)(p->c * p->kw * p->ow)
                                   : 4.0 * (double)(p->c * p->sh * J.wpp);
        const double fit = 1.0 + ((double)c1_copy_budget() - one) / more;
        const ptrdiff_t g = fit < 1.0 ? 1 : fit < (double)p->oh ? (ptrdiff_t)fit : p->oh;
        if (J.grows > g)
            J.grows = g;
    }
    J.ngrp = (p->oh + J.grows - 1) / J.grows;
    J.rows = (J.grows - 1) * p->sh + (p->kh - 1) * p->dh + 1;
    size_t bytes;
    if (J.flat) {
        J.cstride = J.rows * p->ow + vl;
        for (ptrdiff_t ci = 0, t = 0; ci < p->c; ci++)
            for (ptrdiff_t ki = 0; ki < p->kh; ki++)
                for (ptrdiff_t kj = 0; kj < p->kw; kj++)
                    koff[t++] = (int32_t)((ci * p->kw + kj) * J.cstride + ki * p->dh * p->ow);
        bytes = sizeof(float) * (size_t)(p->c * p->kw * J.cstride);
    } else {
        for (ptrdiff_t ci = 0, t = 0; ci < p->c; ci++)
            for (ptrdiff_t ki = 0; ki < p->kh; ki++)
                for (ptrdiff_t kj = 0; kj < p->kw; kj++)
                    koff[t++] = (int32_t)((ci * J.rows + ki * p->dh) * J.wpp + kj * p->dw);
        bytes = sizeof(float) * (size_t)(p->c * J.rows * J.wpp);
    }
    J.koff = koff;
    if (J.pooled) { /* + the image's output, 64-byte aligned */
        J.tofs = (ptrdiff_t)((bytes + 63) / 64 * 16);
        bytes = sizeof(float) * (size_t)(J.tofs + o * J.f.l);
        if (bytes > c1_pool_budget())
            return 1;
    }
    return gc_conv_claim_units(&J, (long)(p->n * J.ngrp), nt, 0, bytes, c1_unit);
}

int gc_conv2d_c1_f32(const float *x, const float *w, const float *bias, const gc_epi *e,
                     float *out, const gc_conv *p, ptrdiff_t o)
{
    c1_job J;
    memset(&J, 0, sizeof J);
    gc_conv_fwd_init(&J.f, x, bias, e, out, p, o);
    return c1_run(&J, w);
}

int gc_conv2d_c1_pool_f32(const float *x, const float *w, const float *bias, int relu,
                          float *vals, int64_t *idx, const gc_conv *p, ptrdiff_t o,
                          const gc_pool2d *pool)
{
    if (!gc_conv2d_c1_use(p, o) || pool->h != p->oh || pool->w != p->ow)
        return 1;
    c1_job J;
    memset(&J, 0, sizeof J);
    gc_conv_fwd_init(&J.f, x, bias, NULL, NULL, p, o);
    J.f.relu = relu;
    J.pooled = 1;
    J.pool = *pool;
    J.pool.planes = o;
    J.vals = vals;
    J.idx = idx;
    return c1_run(&J, w);
}

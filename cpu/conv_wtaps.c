/* The weight (and bias) gradient of a float32 stride-1 conv2d with few kernel taps (c*kh*kw, the
 * train.py CNN's 1 -> 16 layer: 9), straight from the image: no column matrix, no GEMM.
 *
 *   gw[o, t] = sum over images b, pixels p of g[b, o, p] * x_t[b, p]
 *
 * with x_t the image seen through tap t = (c, ki, kj).  With stride 1 the tap's values at
 * consecutive pixels are consecutive in a copy of channel c shifted by column kj*dw - pw, its
 * rows the padded image's and its width the output's (one copy per (c, kj): ph rows of zeros
 * above and below, kj's columns outside the image zero): x_t[p] = copy[(c, kj)][p + ki*dh*ow].
 * The ISA kernel (isa/conv_wtaps.h) then multiplies each g vector into every tap, the products
 * summed in VL pixel lanes (p mod VL) over the images of a chunk, the lanes added pairwise at
 * the chunk's end; the bias gradient rides along in conv.c's gc_conv_rowsum lanes (the same bits
 * as the other paths).  Chunks are conv.c's (the batch size alone decides them) and their
 * partials are summed there in order: the bits never depend on the thread count.
 *
 * Why: with so few taps the GEMM's register tile (taps x channels, or channels x taps) is
 * mostly empty, and its small-M path (16 dot products per tap over an im2col matrix) ran
 * the CNN's 1 -> 16 weight gradient at 2.5x its FLOPs at the SGEMM rate (one thread, AVX-512);
 * here each g vector, loaded once, feeds 9 FMAs. */
#define _POSIX_C_SOURCE 200112L
#include <stdlib.h>
#include <string.h>

#include "conv_bwd.h"
#include "conv_claim.h"
#include "conv_direct.h"
#include "isa.h"
#include "kernels.h"

/* The rule (GPUCORE_CONV=im2col forces the GEMM path off it; direct keeps it, the pixel minimum
 * below off; direct_gw gives the weight gradient to conv_direct_backward.c's tile, for tests):
 * up to 16 taps always (the GEMM's small-M dot products and the direct tile, whose rows are
 * taps, both ran at ~40 GFLOP/s: one thread, batch 64, AVX-512, 1 -> 16 on 28x28 0.37 ms
 * against 0.17 here; 1 -> 64 batch 16 0.33 against 0.19); up to GC_WTAPS_MAX_TAPS while the
 * accumulators (o * taps vectors, loaded and stored by every tile of every image) fit a 32 KiB
 * L1 (3 -> 16 on 28x28 0.51 against the direct tile's 0.61 ms, 2 -> 16 0.35 against 0.42, on
 * AVX2 alike; but 3 -> 64 on 14x14, 110 KiB of them, 0.24 against 0.14, 4 -> 32 0.51 against
 * 0.46). */
#define GC_WTAPS_MAX_TAPS 27
#define GC_WTAPS_ACC_BYTES 32768
/* Small images go to the GEMM: each image's tiles load and store all o * taps accumulators for
 * a few pixel vectors, and the GEMM's K is n * pixels long there.  Measured (one thread,
 * AVX-512, weight + bias gradient, ms here against im2col's, load 5-8,
 * benchmarks/conv_wtaps_rule.py): 1x1, 16 -> 128 channels, batch 64: 4x4 0.41 / 0.21, 6x6
 * 0.57 / 0.34, 8x8 0.53 / 0.44, 10x10 0.78 / 0.71, 12x12 0.95 / 1.02, 16x16 1.95 / 2.13;
 * 3x3 padding 1, 1 -> 128: 4x4 0.26 / 0.17, 6x6 0.36 / 0.29, 8x8 0.36 / 0.40, 10x10 0.46 /
 * 0.58, 16x16 0.80 / 1.49; 2x2, 4 -> 64: 6x6 out 0.31 / 0.23, 8x8 0.28 / 0.28, 12x12 0.47 /
 * 0.56; batch 1 alike (1x1 16 -> 128 on 4x4 0.013 / 0.004, 8x8 0.015 / 0.008).  A 1x1 without
 * padding needs twice the pixels (10x10 still slower here; 2x2 and 3x3 even at 8x8). */
#define GC_WTAPS_MIN_PIXELS 64
#define GC_WTAPS_MIN_PIXELS_1X1 128
/* The shifted copies hold every padded row (oh + dh (kh - 1) of them), im2col's columns kh
 * rows per output row: with a dilation far beyond the output the copies grew hundreds of times
 * larger than the GEMM path's buffer (1 -> 4 channels, 2x1 kernel, dilation 250000, padding
 * 125000 on 2 x 200: 225 MB and 168 ms against 35 MB and 0.1 ms).  Past twice that buffer the
 * GEMM path takes it, whatever GPUCORE_CONV says. */
#define GC_WTAPS_MAX_SCRATCH_RATIO 2.0

/* GPUCORE_CONV=direct_gw: the direct paths, the weight gradient on conv_direct_backward.c's
 * tile even where this path applies (tests: that kernel's few-taps geometries) */
static int wtaps_forced_off(void)
{
    const char *e = getenv("GPUCORE_CONV");
    return e && gc_env_is(e, "direct_gw");
}

int gc_conv2d_wtaps_use(const gc_conv *p, ptrdiff_t o)
{
    if (!gc_isa.wtaps_f32 || o <= 0 || p->n <= 0 || p->c <= 0 || p->kh <= 0 || p->kw <= 0)
        return 0;
    const int forced = dconv_forced();
    if (p->sh != 1 || p->sw != 1 || forced == 1 || wtaps_forced_off())
        return 0;
    const double rows = (double)p->h + 2.0 * (double)p->ph, pix = (double)p->oh * (double)p->ow;
    const double copies = (double)p->c * (double)p->kw * rows * (double)p->ow;
    if (copies > GC_WTAPS_MAX_SCRATCH_RATIO * (double)p->c * (double)(p->kh * p->kw) * pix)
        return 0;
    const int plain_1x1 = p->kh == 1 && p->kw == 1 && p->ph == 0 && p->pw == 0;
    if (forced != 2 && pix < (plain_1x1 ? GC_WTAPS_MIN_PIXELS_1X1 : GC_WTAPS_MIN_PIXELS))
        return 0;
    const ptrdiff_t taps = p->c * p->kh * p->kw;
    if (taps <= GC_DCONV_MIN_TAPS)
        return 1;
    const double acc = (double)o * (double)taps * (double)gc_isa.wtaps_vl * sizeof(float);
    return taps <= GC_WTAPS_MAX_TAPS && acc <= GC_WTAPS_ACC_BYTES;
}

typedef struct {
    const float *x, *g;
    float *gw, *gb; /* per-chunk partials [nchunks, o, nt] / [nchunks, o] */
    const gc_conv *p;
    ptrdiff_t o, nt, l, rows, chunk, nchunks;
    ptrdiff_t tb[GC_WTAPS_MAX_TAPS]; /* tap t's offset in the copies */
    gc_conv_claim claim;
} wtaps_job;

/* image x [c, h, w] into its shifted copies xs [c, kw, rows, ow] (rows = h + 2 ph):
 * xs[c, kj, r, j] = x[c, r - ph, j + kj*dw - pw], zero outside the image.  Only the in-image
 * part is written: the zeros around it are the same for every image, written once per call
 * (wtaps_body); rows of a few dozen floats copied inline, not by memcpy / memset calls (those
 * were a fifth of the CNN's 1 -> 16 weight gradient). */
static void wtaps_copy(const float *restrict x, float *restrict xs, const gc_conv *p,
                       ptrdiff_t rows)
{
    const ptrdiff_t ow = p->ow;
    for (ptrdiff_t c = 0; c < p->c; c++)
        for (ptrdiff_t kj = 0; kj < p->kw; kj++) {
            const ptrdiff_t sh = kj * p->dw - p->pw; /* input column of output column j: j + sh */
            const ptrdiff_t lo = sh < 0 ? -sh : 0, hi = p->w - sh < ow ? p->w - sh : ow;
            float *d = xs + (c * p->kw + kj) * rows * ow + p->ph * ow + lo;
            const float *s = x + c * p->h * p->w + lo + sh;
            for (ptrdiff_t iy = 0; iy < p->h && lo < hi; iy++, d += ow, s += p->w)
                for (ptrdiff_t j = 0; j < hi - lo; j++)
                    d[j] = s[j];
        }
}

/* v[0..8) and v[0..16) added pairwise, halves first (gc_conv_rowsum's end), in registers: the
 * loop form's stores and reloads were most of this file's time */
static inline float wtaps_tree8(const float *v)
{
    const float a0 = v[0] + v[4], a1 = v[1] + v[5], a2 = v[2] + v[6], a3 = v[3] + v[7];
    return (a0 + a2) + (a1 + a3);
}

static inline float wtaps_tree(const float *v, int n)
{
    if (n == 8)
        return wtaps_tree8(v);
    float h[8];
    for (int k = 0; k < 8; k++)
        h[k] = v[k] + v[k + 8];
    return wtaps_tree8(h);
}

static void wtaps_body(void *ctx, int slot)
{
    (void)slot;
    wtaps_job *J = (wtaps_job *)ctx;
    const gc_conv *p = J->p;
    const int vl = gc_isa.wtaps_vl;
    const ptrdiff_t o = J->o, nt = J->nt, xsz = p->c * p->h * p->w, gs = o * J->l;
    float *xs = (float *)gc_conv_scratch(0, sizeof(float) * (size_t)(p->c * p->kw * J->rows *
                                                                      p->ow));
    float *acc = (float *)gc_conv_scratch(1, sizeof(float) * (size_t)(o * nt * vl + o * 8));
    float *gacc = acc ? acc + o * nt * vl : NULL;
    if (xs) /* the copies' zeros (wtaps_copy writes the rest, image by image) */
        memset(xs, 0, sizeof(float) * (size_t)(p->c * p->kw * J->rows * p->ow));
    for (long ch; (ch = gc_conv_next(&J->claim, J->nchunks, !xs || !acc)) >= 0;) {
        ptrdiff_t b0, b1;
        float *gb = (float *)gc_conv_bwd_chunk(ch, J->chunk, p->n, J->gb, o, sizeof(float), &b0,
                                               &b1);
        float *gw = J->gw + ch * o * nt;
        memset(acc, 0, sizeof(float) * (size_t)(o * nt * vl));
        for (ptrdiff_t b = b0; b < b1; b++) {
            wtaps_copy(J->x + b * xsz, xs, p, J->rows);
            if (gb)
                memset(gacc, 0, sizeof(float) * (size_t)(o * 8));
            gc_isa.wtaps_f32(J->l, J->g + b * gs, o, xs, J->tb, nt, acc, gb ? gacc : NULL);
            if (gb) /* gc_conv_rowsum's pairwise end, image by image as conv.c adds them */
                for (ptrdiff_t i = 0; i < o; i++)
                    gb[i] += wtaps_tree8(gacc + i * 8);
        }
        for (ptrdiff_t i = 0; i < o * nt; i++)
            gw[i] = wtaps_tree(acc + i * vl, vl);
    }
}

int gc_conv2d_wtaps_f32(const float *x, const float *g, float *gw, float *gb, const gc_conv *p,
                        ptrdiff_t o, ptrdiff_t chunk, ptrdiff_t nchunks, float *part)
{
    wtaps_job J;
    memset(&J, 0, sizeof J);
    J.x = x;
    J.g = g;
    J.p = p;
    J.o = o;
    J.nt = p->c * p->kh * p->kw;
    J.l = p->oh * p->ow;
    J.rows = p->h + 2 * p->ph;
    J.chunk = chunk;
    J.nchunks = nchunks;
    J.gw = part;
    J.gb = gb ? part + nchunks * o * J.nt : NULL;
    (void)gw;
    for (ptrdiff_t c = 0, t = 0; c < p->c; c++)
        for (ptrdiff_t ki = 0; ki < p->kh; ki++)
            for (ptrdiff_t kj = 0; kj < p->kw; kj++)
                J.tb[t++] = (c * p->kw + kj) * J.rows * p->ow + ki * p->dh * p->ow;
    const double flops = 2.0 * (double)p->n * (double)o * (double)J.nt * (double)J.l;
    return gc_conv_run(&J.claim, wtaps_body, &J, gc_threads_for(flops, 0.25e6), (long)nchunks);
}

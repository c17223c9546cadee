/* Direct float32 conv2d forward (groups 1, NCHW): the GEMM's register tile with its A operand
 * read straight from the (zero-padded) image, no column matrix.
 *
 *   out[b]^T [L, O] = col(x[b])^T [L, CK] @ W^T [CK, O]    (L = oh*ow pixels, CK = c*kh*kw)
 *
 * The rows of the micro-tile are MR output pixels, its columns NR output channels.  Row i of
 * K step p = (ci, ki, kj) reads pad[rows[l] + koff[p]] with rows[l] = oy*sh*wp + ox*sw (the
 * window's corner in the padded image, wp its padded width) and koff[p] = ci*hp*wp + ki*dh*wp +
 * kj*dw: any kernel size, stride and dilation, and every pixel of a panel may lie on a different
 * output row, so no lanes are lost to narrow images (7x7 outputs: 49 pixels in 9 panels of 6,
 * where the im2col GEMM fills 49 of the 64 columns of its 16-wide panels).  W is packed once per
 * call as the GEMM packs the weight of a swapped product (pack.c: side A, swap 1: panels of NR
 * output channels per K block); a weight the compiled executor pre-packed that way (gemm_pack)
 * is used where it lies.
 *
 * Bits: every output element is the GEMM micro-kernel's FMA chain over the same K blocks
 * (gc_gemm_kc), the blocks added in order (acc + C), then + bias: exactly what the im2col GEMM
 * (gemm.c's blocked path; not its small-m gemv path, O <= 24) computes for that element.  Each
 * element is computed by one thread from start to end, so the result never depends on the
 * thread count or on how the work is split.
 *
 * Work: units of (image, group of pixel panels), or, in a batch whose images' pixel count is no
 * multiple of MR, of several whole images whose pixels run on across panels (dconv_group); each
 * unit walks K blocks, then chunks of
 * GC_DCONV_CHUNK pixel panels (their image rows stay in L1/L2), then the weight panels (one K
 * block of one panel: kb x NR floats, in L2), then the chunk's pixel panels.  A batch with at
 * least as many images as threads gives one unit per image; smaller batches split each image's
 * pixels into groups so that every thread gets work.
 *
 * When this path runs instead of im2col + GEMM: gc_conv2d_direct_use (the rule, from the
 * measurements in benchmarks/README.md, *Direct convolution*). */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "conv_direct.h"
#include "conv_fwd.h"
#include "kernels.h"
#include "vec.h"

/* pixel panels per chunk of a unit (6-pixel panels on AVX2: ~100 pixels, about two rows of a
 * 56-wide image and all three input rows of their windows per channel in L1/L2) */
#define GC_DCONV_CHUNK 16

/* 1 when s, less surrounding white space, is word in any case (gpucore/config.py's rule) */
int gc_env_is(const char *s, const char *word)
{
    while (*s == ' ' || *s == '\t' || *s == '\n')
        s++;
    for (; *word; s++, word++)
        if ((*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s) != *word)
            return 0;
    while (*s == ' ' || *s == '\t' || *s == '\n')
        s++;
    return *s == 0;
}

/* a test / benchmark switch (GPUCORE_CONV_WIDE, GPUCORE_CONV_TILE_LOOP) set to anything but
 * "0" (gpucore/config.py's choices "0" and "1") */
int dconv_env_on(const char *name)
{
    const char *e = getenv(name);
    return e && *e && !gc_env_is(e, "0");
}

/* GPUCORE_CONV: "im2col" or "direct" forces a path where both apply (tests, benchmarks;
 * "direct_t" is "direct" with conv_direct_lanes.c's tile where that applies, "direct_gw" with
 * conv_direct_backward.c's weight gradient where conv_wtaps.c's would apply);
 * anything else ("auto"), or unset, is the rule.  Read on every call (a getenv is ~0.1 us; a
 * convolution is >= ~10 us), so a process can time both paths side by side. */
int dconv_forced(void)
{
    const char *e = getenv("GPUCORE_CONV");
    if (!e)
        return 0;
    if (gc_env_is(e, "im2col"))
        return 1;
    return gc_env_is(e, "direct") || gc_env_is(e, "direct_t") || gc_env_is(e, "direct_gw") ? 2 : 0;
}

/* The rule for the forward (fwd) or the backward (the caller's further conditions apply). */
int dconv_use(const gc_conv *p, ptrdiff_t o, int fwd)
{
    if (!gc_isa.cukr_f32 || gc_isa.cukr_mr != gc_blk_f32.mr || gc_isa.cukr_nr != gc_blk_f32.nr)
        return 0;
    if (o <= 0 || p->c <= 0 || p->n <= 0)
        return 0;
    /* a 1x1 convolution with stride 1 and no padding is a plain GEMM on the image (conv.c) */
    if (p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->ph == 0 && p->pw == 0)
        return 0;
    /* koff is int32: the padded image must have fewer than 2^31 elements */
    const double hp = (double)p->h + 2.0 * (double)p->ph, wp = (double)p->w + 2.0 * (double)p->pw;
    if ((double)p->c * hp * wp >= 2147483647.0)
        return 0;
    const int forced = dconv_forced();
    if (forced)
        return forced == 2;
    /* a strided 1x1 forward without padding: im2col + GEMM (its columns are the subsampled
     * image) measured at least as fast (bench_conv.py, one thread: ResNet-50's downsamples
     * 2048 x 49 x 1024 4.9 against 7.1 ms, 512 x 784 x 256 4.1 against 4.5, 1024 x 196 x 512
     * alike) */
    if (fwd && p->kh == 1 && p->kw == 1 && p->ph == 0 && p->pw == 0)
        return 0;
    /* the forward's tile columns are output channels: with half a panel or less of them every
     * tile is half empty, and with few taps per output (c * kh * kw) its transposed store weighs
     * as much as its FMAs (AVX-512's 32-wide panels, bench_conv.py one thread: the training
     * CNN's 1 -> 16 layer 0.28 im2col against 0.70 ms direct, the digits CNN's 0.04 against
     * 0.06). With more taps the FMAs dominate and direct wins again (3x3, batch 64: 8 -> 16 at
     * 14x14 0.67 direct against 1.21 im2col, 32 -> 16 at 8x8 0.88 against 2.01; AVX2's 8 -> 8
     * 0.37 against 0.65) */
    if (fwd && 2 * o <= gc_blk_f32.nr && (ptrdiff_t)p->c * p->kh * p->kw <= 32)
        return 0;
    return 1;
}

int gc_conv2d_direct_use(const gc_conv *p, ptrdiff_t o)
{
    return dconv_use(p, o, 1);
}

typedef struct {
    gc_conv_fwd f; /* the call (conv_fwd.h) */
    ptrdiff_t hp, wp, kc, npo, npx, gpan, upi;
    int padded, mr, nr; /* padded: 1 a zero-padded copy, 2 a subsampled one (dconv_sub) */
    const float *wpk;      /* packed weight: K block pc at wpk + pc * npo * nr */
    const ptrdiff_t *rows; /* npx * mr pixel corners (past l: pixel 0's) */
    const int32_t *koff;   /* ck offsets */
    gc_ctile_f32 ctile;    /* the ISA's store of MR-pixel tiles, or NULL (dconv_tile_out) */
    ptrdiff_t grp;         /* images per unit whose pixels share panels (dconv_group), or 1 */
} dconv_job;

/* The image x [c, h, w] into pad [c, hp, wp], zero borders. */
void dconv_pad(const float *restrict x, float *restrict pad, const gc_conv *p, ptrdiff_t hp,
               ptrdiff_t wp)
{
    for (ptrdiff_t ci = 0; ci < p->c; ci++) {
        float *d = pad + ci * hp * wp;
        const float *s = x + ci * p->h * p->w;
        memset(d, 0, sizeof(float) * (size_t)(p->ph * wp));
        for (ptrdiff_t y = 0; y < p->h; y++) {
            float *r = d + (p->ph + y) * wp;
            for (ptrdiff_t j = 0; j < p->pw; j++)
                r[j] = 0.0f;
            memcpy(r + p->pw, s + y * p->w, sizeof(float) * (size_t)p->w);
            for (ptrdiff_t j = p->pw + p->w; j < wp; j++)
                r[j] = 0.0f;
        }
        memset(d + (p->ph + p->h) * wp, 0, sizeof(float) * (size_t)((hp - p->ph - p->h) * wp));
    }
}

/* A strided 1x1 convolution's image: the pixels it reads, x [c, h, w] -> sub [c, oh, ow] (the
 * image of a 1x1 stride-1 one: ResNet-50's 2048 x 49 x 1024 downsample read its 14x14 input in
 * place, ~2 elements per cache line over 800 KB once per weight panel, at 1/3 of the rate). */
static void dconv_sub(const float *restrict x, float *restrict sub, const gc_conv *p)
{
    for (ptrdiff_t ci = 0; ci < p->c; ci++)
        for (ptrdiff_t y = 0; y < p->oh; y++) {
            const float *s = x + (ci * p->h + y * p->sh) * p->w;
            float *d = sub + (ci * p->oh + y) * p->ow;
            for (ptrdiff_t j = 0; j < p->ow; j++)
                d[j] = s[j * p->sw];
        }
}

/* The epilogue (gc_epi: + res at c's offset, relu) on rows [0, nv) x [0, n) of c (row stride
 * l), after the bias; the flags constant per instance (the loop vectorizes). */
static inline __attribute__((always_inline)) void dconv_epi_rows(float *c, ptrdiff_t l,
                                                                 const float *res, const int relu,
                                                                 ptrdiff_t nv, ptrdiff_t n)
{
    for (ptrdiff_t j = 0; j < nv; j++) {
        float *restrict cj = c + j * l;
        const float *restrict rj = res ? res + j * l : NULL;
        for (ptrdiff_t ii = 0; ii < n; ii++) {
            float v = cj[ii];
            if (res)
                v += rj[ii];
            cj[ii] = relu && v <= 0.0f ? 0.0f : v;
        }
    }
}

static void dconv_epi(float *c, ptrdiff_t l, const float *res, int relu, ptrdiff_t nv,
                      ptrdiff_t n)
{
    if (res && relu)
        dconv_epi_rows(c, l, res, 1, nv, n);
    else if (res)
        dconv_epi_rows(c, l, res, 0, nv, n);
    else if (relu)
        dconv_epi_rows(c, l, NULL, 1, nv, n);
}

/* Pixel panels [i0, i1) of one image (src: its padded image) into outb [o, l]. */
static void dconv_unit(const dconv_job *J, const float *src, float *outb, ptrdiff_t i0,
                       ptrdiff_t i1)
{
    const int mr = J->mr, nr = J->nr;
    const ptrdiff_t l = J->f.l, o = J->f.o;
    _Alignas(64) float t[GC_TILE_MAX];
    memset(t, 0, sizeof t); /* rows past the image's pixels are computed, never stored */
    for (ptrdiff_t pc = 0; pc < J->f.ck; pc += J->kc) {
        const ptrdiff_t kb = J->f.ck - pc < J->kc ? J->f.ck - pc : J->kc;
        const int first = pc == 0, last = pc + kb >= J->f.ck;
        const float *wblk = J->wpk + pc * J->npo * nr;
        for (ptrdiff_t c0 = i0; c0 < i1; c0 += GC_DCONV_CHUNK) {
            const ptrdiff_t c1 = c0 + GC_DCONV_CHUNK < i1 ? c0 + GC_DCONV_CHUNK : i1;
            for (ptrdiff_t q = 0; q < J->npo; q++) {
                const float *wpan = wblk + q * nr * kb;
                const ptrdiff_t o0 = q * nr, nv = o - o0 < nr ? o - o0 : nr;
                if (last && J->f.res) { /* the epilogue's residual, requested before the tiles */
                    const ptrdiff_t p0 = c0 * J->mr, p1 = c1 * J->mr < l ? c1 * J->mr : l;
                    const float *r = J->f.res + (outb - J->f.out) + o0 * l + p0;
                    for (ptrdiff_t j = 0; j < nv; j++)
                        for (ptrdiff_t ii = 0; ii < p1 - p0 + 16; ii += 16)
                            __builtin_prefetch(r + j * l + (ii < p1 - p0 ? ii : p1 - p0 - 1), 0, 3);
                }
                for (ptrdiff_t i = c0; i < c1; i++) {
                    const ptrdiff_t l0 = i * mr, mv = l - l0 < mr ? l - l0 : mr;
                    float *c = outb + o0 * l + l0; /* element (pixel ii, channel j): c[j*l + ii] */
                    const float *bias = last && J->f.bias ? J->f.bias + o0 : NULL;
                    if (J->ctile && mv == mr) { /* the ISA's transposing store */
                        gc_isa.cukr_f32(kb, src, J->rows + l0, J->koff + pc, wpan, t, 0);
                        J->ctile(t, c, l, nv, !first, bias);
                        continue;
                    }
                    if (!first)
                        for (ptrdiff_t j = 0; j < nv; j++)
                            for (ptrdiff_t ii = 0; ii < mv; ii++)
                                t[ii * nr + j] = c[j * l + ii];
                    gc_isa.cukr_f32(kb, src, J->rows + l0, J->koff + pc, wpan, t, !first);
                    if (mr == 6 && nr == 16 && mv == 6 && nv == 16) /* AVX2's full tile */
                        dconv_tile_out(c, l, t, 16, 6, 16, bias);
                    else if (mr == 14 && nr == 32 && mv == 14 && nv == 32) /* AVX-512's */
                        dconv_tile_out(c, l, t, 32, 14, 32, bias);
                    else
                        dconv_tile_out(c, l, t, nr, mv, nv, bias);
                }
                /* the epilogue on the chunk's finished pixels of these channels (in L1 / L2) */
                if (last && (J->f.res || J->f.relu)) {
                    const ptrdiff_t p0 = c0 * mr, p1 = c1 * mr < l ? c1 * mr : l;
                    const ptrdiff_t off = (outb - J->f.out) + o0 * l + p0;
                    dconv_epi(outb + o0 * l + p0, l, J->f.res ? J->f.res + off : NULL, J->f.relu,
                              nv, p1 - p0);
                }
            }
        }
    }
}

/* Images [b0, b0 + g) as one run of g*l pixels (src: their images, padded or not, one after
 * another c*hp*wp apart; J->rows holds grp*l corners): a panel may hold the end of one image
 * and the start of the next, so no tile rows are lost where l is not a multiple of MR (the
 * digits CNN's 8x8 images: 64 pixels in 5 panels of 14, 9% of the FMAs wasted; ResNet's 7x7: 49
 * in 4, 12.5%).  Each element's chain is the single image's (same K blocks, same order): the
 * same bits. */
static void dconv_group(const dconv_job *J, const float *src, ptrdiff_t b0, ptrdiff_t g)
{
    const int mr = J->mr, nr = J->nr;
    const ptrdiff_t l = J->f.l, o = J->f.o, lg = g * l, npx = (lg + mr - 1) / mr, os = o * l;
    float *outg = J->f.out + b0 * os;
    _Alignas(64) float t[GC_TILE_MAX];
    ptrdiff_t rl[GC_TILE_MAX]; /* the last panel's corners, past lg: pixel 0's */
    memset(t, 0, sizeof t);
    for (ptrdiff_t ii = 0; ii < mr; ii++)
        rl[ii] = (npx - 1) * mr + ii < lg ? J->rows[(npx - 1) * mr + ii] : J->rows[0];
    for (ptrdiff_t pc = 0; pc < J->f.ck; pc += J->kc) {
        const ptrdiff_t kb = J->f.ck - pc < J->kc ? J->f.ck - pc : J->kc;
        const int first = pc == 0, last = pc + kb >= J->f.ck;
        const float *wblk = J->wpk + pc * J->npo * nr;
        for (ptrdiff_t c0 = 0; c0 < npx; c0 += GC_DCONV_CHUNK) {
            const ptrdiff_t c1 = c0 + GC_DCONV_CHUNK < npx ? c0 + GC_DCONV_CHUNK : npx;
            for (ptrdiff_t q = 0; q < J->npo; q++) {
                const float *wpan = wblk + q * nr * kb;
                const ptrdiff_t o0 = q * nr, nv = o - o0 < nr ? o - o0 : nr;
                const float *bias = last && J->f.bias ? J->f.bias + o0 : NULL;
                for (ptrdiff_t i = c0; i < c1; i++) {
                    const ptrdiff_t l0 = i * mr, mv = lg - l0 < mr ? lg - l0 : mr;
                    const ptrdiff_t *rows = i == npx - 1 ? rl : J->rows + l0;
                    const ptrdiff_t img = l0 / l, p0 = l0 % l;
                    float *c = outg + img * os + o0 * l + p0;
                    if (p0 + mv <= l) { /* within one image: the single image's stores */
                        if (J->ctile && mv == mr) {
                            gc_isa.cukr_f32(kb, src, rows, J->koff + pc, wpan, t, 0);
                            J->ctile(t, c, l, nv, !first, bias);
                            continue;
                        }
                        if (!first)
                            for (ptrdiff_t j = 0; j < nv; j++)
                                for (ptrdiff_t ii = 0; ii < mv; ii++)
                                    t[ii * nr + j] = c[j * l + ii];
                        gc_isa.cukr_f32(kb, src, rows, J->koff + pc, wpan, t, !first);
                        dconv_tile_out(c, l, t, nr, mv, nv, bias);
                        continue;
                    }
                    /* across images: row ii's pixel is (l0 + ii) of the run */
                    if (!first)
                        for (ptrdiff_t ii = 0; ii < mv; ii++) {
                            const ptrdiff_t P = l0 + ii;
                            const float *ci = outg + P / l * os + o0 * l + P % l;
                            for (ptrdiff_t j = 0; j < nv; j++)
                                t[ii * nr + j] = ci[j * l];
                        }
                    gc_isa.cukr_f32(kb, src, rows, J->koff + pc, wpan, t, !first);
                    for (ptrdiff_t ii = 0; ii < mv; ii++) {
                        const ptrdiff_t P = l0 + ii;
                        dconv_tile_out(outg + P / l * os + o0 * l + P % l, l, t + ii * nr, nr, 1,
                                       nv, bias);
                    }
                }
                /* the epilogue on the chunk's finished pixels, image by image */
                if (last && (J->f.res || J->f.relu)) {
                    const ptrdiff_t e0 = c0 * mr, e1 = c1 * mr < lg ? c1 * mr : lg;
                    for (ptrdiff_t s0 = e0; s0 < e1;) {
                        const ptrdiff_t img = s0 / l, s1 = (img + 1) * l < e1 ? (img + 1) * l : e1;
                        const ptrdiff_t off = (b0 + img) * os + o0 * l + s0 % l;
                        dconv_epi(J->f.out + off, l, J->f.res ? J->f.res + off : NULL,
                                  J->f.relu, nv, s1 - s0);
                        s0 = s1;
                    }
                }
            }
        }
    }
}

/* One unit of grp images sharing pixel panels (gc_conv_claim_units; scratch: their padded or
 * subsampled copies, or NULL). */
static void dconv_group_unit(void *job, void *scratch, long u, long prev)
{
    (void)prev;
    const dconv_job *J = (const dconv_job *)job;
    const gc_conv *p = J->f.p;
    const ptrdiff_t xs = p->c * p->h * p->w, ps = p->c * J->hp * J->wp; /* ps: a padded image */
    float *pad = (float *)scratch;
    const ptrdiff_t b0 = u * J->grp, g = p->n - b0 < J->grp ? p->n - b0 : J->grp;
    const float *src = J->f.x + b0 * xs;
    if (pad) {
        for (ptrdiff_t k = 0; k < g; k++) {
            if (J->padded == 2)
                dconv_sub(src + k * xs, pad + k * ps, p);
            else
                dconv_pad(src + k * xs, pad + k * ps, p, J->hp, J->wp);
        }
        src = pad;
    }
    dconv_group(J, src, b0, g);
}

/* One unit of one image's pixel panels (gc_conv_claim_units; scratch: the image padded or
 * subsampled, kept from the thread's previous unit when that had the same image, or NULL). */
static void dconv_image_unit(void *job, void *scratch, long u, long prev)
{
    const dconv_job *J = (const dconv_job *)job;
    const gc_conv *p = J->f.p;
    float *pad = (float *)scratch;
    const ptrdiff_t b = u / J->upi, g = u % J->upi;
    const float *src = J->f.x + b * p->c * p->h * p->w;
    if (pad && (prev < 0 || prev / J->upi != b)) {
        if (J->padded == 2)
            dconv_sub(src, pad, p);
        else
            dconv_pad(src, pad, p, J->hp, J->wp);
    }
    if (pad)
        src = pad;
    const ptrdiff_t i0 = g * J->gpan, i1 = i0 + J->gpan < J->npx ? i0 + J->gpan : J->npx;
    if (i0 < i1)
        dconv_unit(J, src, J->f.out + b * J->f.o * J->f.l, i0, i1);
}

typedef struct {
    const gc_packed *P;
    const float *w;
} dconv_pack_job;

/* Panels [lo, hi) of the (K block, panel) grid of P (side A, swap 1: NR output channels) from
 * the weight w [o, ck], by blocks of 8 K steps: NR weight rows read 8 floats at a time (NR
 * sequential streams), 8 panel rows written whole (a gather of NR rows a weight row apart per
 * step, or one panel column per pass over a panel larger than L1, measured ~2x slower). */
static void dconv_pack_range(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const dconv_pack_job *J = (const dconv_pack_job *)ctx;
    const gc_packed *P = J->P;
    const ptrdiff_t w = P->w;
    for (ptrdiff_t u = lo; u < hi; u++) {
        const ptrdiff_t pc = u / P->npan * P->kc, q = u % P->npan;
        const ptrdiff_t kb = P->k - pc < P->kc ? P->k - pc : P->kc;
        const ptrdiff_t fv = P->f - q * w < w ? P->f - q * w : w;
        float *d = (float *)P->data + pc * P->npan * w + q * w * kb;
        const float *s = J->w + q * w * P->k + pc;
        for (ptrdiff_t t0 = 0; t0 < kb; t0 += 8) {
            const ptrdiff_t tn = kb - t0 < 8 ? kb - t0 : 8;
            float *dt = d + t0 * w;
            for (ptrdiff_t j = 0; j < fv; j++) {
                const float *sj = s + j * P->k + t0;
                for (ptrdiff_t t = 0; t < tn; t++)
                    dt[t * w + j] = sj[t];
            }
            for (ptrdiff_t j = fv; j < w; j++)
                for (ptrdiff_t t = 0; t < tn; t++)
                    dt[t * w + j] = 0.0f;
        }
    }
}

/* P (side A swap 1, pack_init'ed for o x ck) := the weight held by pw in its own layout. */
static void dconv_repack(const gc_packed *pw, const gc_packed *P)
{
    const float *s = (const float *)pw->data;
    float *d = (float *)P->data;
    for (ptrdiff_t pc = 0; pc < P->k; pc += P->kc) {
        const ptrdiff_t kb = P->k - pc < P->kc ? P->k - pc : P->kc;
        memset(d + pc * P->npan * P->w, 0, sizeof(float) * (size_t)(P->npan * P->w * kb));
    }
    for (ptrdiff_t f = 0; f < P->f; f++)
        for (ptrdiff_t k = 0; k < P->k; k++)
            d[gc_conv_packed_at(P, f, k)] = s[gc_conv_packed_at(pw, f, k)];
}

int gc_conv2d_direct_f32(const float *x, const float *w, const gc_packed *pw, const float *bias,
                         const gc_epi *e, float *out, const gc_conv *p, ptrdiff_t o)
{
    dconv_job J;
    memset(&J, 0, sizeof J);
    gc_conv_fwd_init(&J.f, x, bias, e, out, p, o);
    J.mr = gc_blk_f32.mr;
    J.nr = gc_blk_f32.nr;
    J.ctile = dconv_env_on("GPUCORE_CONV_TILE_LOOP") ? NULL : gc_isa.ctile_f32;
    J.padded = p->ph > 0 || p->pw > 0;
    J.hp = p->h + 2 * p->ph;
    J.wp = p->w + 2 * p->pw;
    /* 2: a strided 1x1 convolution without padding reads a subsampled copy (dconv_sub) as a
     * stride-1 image: the same elements in the same order, the same bits */
    const int sub = p->kh == 1 && p->kw == 1 && !J.padded && (p->sh > 1 || p->sw > 1);
    if (sub) {
        J.padded = 2;
        J.hp = p->oh;
        J.wp = p->ow;
    }
    J.npx = (J.f.l + J.mr - 1) / J.mr;
    if (p->n <= 0 || o <= 0 || J.f.l <= 0)
        return 0;
    /* the weight panels, then the tables, on the calling thread's buffers */
    gc_packed P;
    if (gc_gemm_pack_init(&P, 'f', 0, o, J.f.ck, 0, 1) < 0)
        return -1;
    J.kc = P.kc;
    J.npo = P.npan;
    if (pw && pw->kind == 'f' && pw->side == 0 && pw->swap == 1 && pw->data &&
        pw->isa == gc_isa.isa && pw->w == P.w && pw->kc == P.kc && pw->f == o && pw->k == J.f.ck) {
        J.wpk = (const float *)pw->data;
    } else {
        P.data = gc_conv_scratch(4, sizeof(float) * (size_t)P.elems);
        if (!P.data)
            return -1;
        if (pw)
            dconv_repack(pw, &P);
        else {
            dconv_pack_job pj = {.P = &P, .w = w};
            gc_parallel_range(P.kc ? (P.k + P.kc - 1) / P.kc * P.npan : 0, 1,
                              0.5 * (double)P.elems, dconv_pack_range, &pj);
        }
        J.wpk = (const float *)P.data;
    }
    /* threads by the work (as conv.c), images first, then groups of each image's pixel panels */
    const int nt = gc_conv_fwd_threads(&J.f);
    /* images whose pixels fill no whole number of panels: units of several images sharing
     * panels (dconv_group), the fewest that fill whole panels (at most 8), as long as every
     * thread keeps a unit and their padded images stay in L2 */
    J.grp = 1;
    if (p->n >= 2 && p->n >= nt && J.f.l % J.mr != 0) {
        ptrdiff_t g = 2;
        while (g < 8 && g * J.f.l % J.mr != 0)
            g++;
        if (g > p->n)
            g = p->n;
        while (g > 1 && ((p->n + g - 1) / g < nt ||
                         (double)g * (double)(p->c * J.hp * J.wp) * 4.0 > (double)gc_cache_info.l2))
            g--;
        J.grp = g;
    }
    const ptrdiff_t nrow = J.grp > 1 ? (J.grp * J.f.l + J.mr - 1) / J.mr * J.mr : J.npx * J.mr;
    const size_t rbytes = sizeof(ptrdiff_t) * (size_t)nrow;
    char *tab = (char *)gc_conv_scratch(5, rbytes + sizeof(int32_t) * (size_t)J.f.ck);
    if (!tab)
        return -1;
    ptrdiff_t *rows = (ptrdiff_t *)tab;
    int32_t *koff = (int32_t *)(tab + rbytes);
    for (ptrdiff_t i = 0; i < nrow; i++) { /* past the pixels (of grp images): pixel 0's */
        const ptrdiff_t pi = i < J.grp * J.f.l ? i : 0, li = pi % J.f.l;
        rows[i] = pi / J.f.l * p->c * J.hp * J.wp + li / p->ow * (sub ? 1 : p->sh) * J.wp +
                  li % p->ow * (sub ? 1 : p->sw);
    }
    for (ptrdiff_t ci = 0, k = 0; ci < p->c; ci++)
        for (ptrdiff_t ki = 0; ki < p->kh; ki++)
            for (ptrdiff_t kj = 0; kj < p->kw; kj++)
                koff[k++] = (int32_t)(ci * J.hp * J.wp + ki * p->dh * J.wp + kj * p->dw);
    J.rows = rows;
    J.koff = koff;
    J.upi = 1;
    if (p->n < nt) {
        J.upi = 2 * ((nt + p->n - 1) / p->n);
        if (J.upi > J.npx)
            J.upi = J.npx;
    }
    J.gpan = (J.npx + J.upi - 1) / J.upi;
    /* each thread's padded (or subsampled) images: slot 3 */
    const size_t pbytes = sizeof(float) * (size_t)(J.grp * p->c * J.hp * J.wp);
    if (J.grp > 1)
        return gc_conv_claim_units(&J, (long)((p->n + J.grp - 1) / J.grp), nt,
                                   J.padded ? 3 : -1, pbytes, dconv_group_unit);
    return gc_conv_claim_units(&J, (long)(p->n * J.upi), nt, J.padded ? 3 : -1, pbytes,
                               dconv_image_unit);
}

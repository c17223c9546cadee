/* Direct float32 conv2d backward (groups 1, NCHW): the weight gradient and, for stride 1, the
 * input gradient with the forward's register tiles (conv_direct.c describes the tile, the
 * packing and why the bits never depend on the thread count). */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conv_bwd.h"
#include "conv_claim.h"
#include "conv_direct.h"
#include "isa.h"
#include "kernels.h"
#include "vec.h"

/* ---- backward: the weight gradient and, for stride 1, the input gradient --------------------
 *
 *   gw^T [CK, O] (+)= col(x[b]) [CK, L] @ g[b]^T [L, O]: rows of the tile are kernel taps (row
 *     base koff[p] in the padded image), the K steps pixels (offset rows[l]), the columns output
 *     channels (g[b]^T packed per image, K blocks of gc_gemm_kc(L)); images of a chunk add in
 *     order (acc + C), chunks as conv.c's (GC_CONV_CHUNK): the bits of conv.c's GEMM path for
 *     more than 24 channels, and never dependent on the thread count;
 *   gx[b] = the direct convolution of g[b], zero-padded by (k-1)*d - p on each side, with the
 *     weight flipped and transposed (K' = (o, kh-1-ki, kw-1-kj), columns input channels): no
 *     column-gradient matrix and no col2im.  Stride 1, padding within the kernel's reach and
 *     more than half a panel of input channels only.
 * Each by its own rule (gc_conv2d_direct_backward_use); conv.c's GEMM path takes the other. */

/* The backward kernel for a product whose tile columns are cols channels: the ISA's 16-column
 * one (cukr16_f32) for up to 16 of them (the train.py CNN's 16 -> 32 input gradient: 16 input
 * channels, half of AVX-512's 32-wide tile empty), else its own.  Not for more channels, where
 * 16-wide panels would also waste fewer cells (33..48): Zen 4 issues two 8-wide FMAs a cycle
 * against one 16-wide one and measured the 6 x 16 tile faster there, but a core with two full
 * 512-bit FMA units (Zen 5, Intel) runs it at half the wide tile's peak.  Every element's FMA
 * chain is the same, so is every bit. */
static gc_cukr_f32 dconv_bwd_kernel(ptrdiff_t cols, int *mr, int *nr)
{
    if (gc_isa.cukr16_f32 && gc_blk_f32.nr > 16 && cols <= 16 &&
        !dconv_env_on("GPUCORE_CONV_WIDE")) {
        *mr = gc_isa.cukr16_mr;
        *nr = 16;
        return gc_isa.cukr16_f32;
    }
    *mr = gc_blk_f32.mr;
    *nr = gc_blk_f32.nr;
    return gc_isa.cukr_f32;
}

int gc_conv2d_direct_backward_use(const gc_conv *p, ptrdiff_t o, int gx_rule)
{
    if (!dconv_use(p, o, 0))
        return 0;
    /* the weight gradient's K steps are one image's pixels: with few of them each tile is
     * mostly its transposed load and store (ResNet-18's 7x7 layer4, 49 pixels: 24.3 against
     * 19.9 ms; 196 pixels: 10.9 against 12.1) */
    if (p->oh * p->ow < GC_DCONV_MIN_PIXELS && dconv_forced() != 2)
        return 0;
    /* few kernel taps (c * kh * kw <= 16: a 3x3 on one input channel): the weight gradient's
     * tile rows are taps, mostly empty, and each image's g^T is packed for a handful of them;
     * conv.c's GEMM takes it as 16-row dot products of contiguous rows (gemv_t).  Measured, one
     * thread, batch 64 (train.py's 1 -> 16 layer on 28x28): AVX-512 0.50 im2col against 1.06 ms
     * direct, AVX2 0.44 against 0.57; 27 taps (3 -> 16) 1.32 / 1.63 on AVX-512, 1.02 / 0.91 on
     * AVX2; 72 taps direct on both (0.83 / 1.04, 0.43 / 0.93).  On AVX2 and AVX-512 conv.c
     * gives the stride-1 ones of few taps to conv_wtaps.c first (its rule). */
    if (!gx_rule) /* the weight gradient: any stride, padding and dilation */
        return p->c * p->kh * p->kw > GC_DCONV_MIN_TAPS || dconv_forced() == 2;
    const ptrdiff_t eh = (p->kh - 1) * p->dh - p->ph, ew = (p->kw - 1) * p->dw - p->pw;
    if (p->sh != 1 || p->sw != 1 || eh < 0 || ew < 0)
        return 0;
    /* the padded gradient's offsets are int32 too */
    if ((double)o * (double)(p->oh + 2 * eh) * (double)(p->ow + 2 * ew) >= 2147483647.0)
        return 0;
    /* the input gradient's tile columns are input channels: up to half a panel of them the
     * im2col path is faster (measured: 1 channel 4.98 against 1.93 ms, 16 channels 4.92
     * against 7.5 ms; a 28x28 / 14x14 batch of 64, one thread; then on Zen 4, 14x14 -> 32
     * channels, batch 64, one thread, im2col against direct: AVX2's 16-wide panels 8 channels
     * 1.03 / 1.80 ms, 16 1.97 / 1.40; AVX-512's 32-wide 16 channels 2.40 / 2.48, 24 3.33 /
     * 2.63, 32 4.27 / 2.67): the panel width is the kernel's that the input channels get
     * (dconv_bwd_kernel: on AVX-512 16 for up to 16 channels: the CNN's 16 -> 32 layer, one
     * thread on Zen 4, 1.85 ms im2col against 1.35 direct 6 x 16, 2.43 direct 14 x 32).  The
     * narrower kernel costs about the same for 9..16 channels while im2col's GEMM gets cheaper
     * with fewer (28x28 -> 64 channels, batch 8, one thread, input gradient alone: 9 channels
     * 0.73 im2col against 1.22 direct, 14 1.15 / 1.26, 16 1.31 / 1.21): there it takes a full
     * panel only. */
    int mr, nr;
    dconv_bwd_kernel(p->c, &mr, &nr);
    if (dconv_forced() == 2)
        return 1;
    return nr < gc_blk_f32.nr ? p->c >= nr : 2 * p->c > nr;
}

/* P := the packing of an f x k side-A swap-1 operand (panels of f) in panels of w columns (the
 * backward kernel's NR, which may be narrower than the GEMM's). */
static int dconv_pack_init(gc_packed *P, ptrdiff_t f, ptrdiff_t k, int w)
{
    if (gc_gemm_pack_init(P, 'f', 0, f, k, 0, 1) < 0)
        return -1;
    if (P->w != w) {
        P->w = w;
        P->npan = (f + w - 1) / w;
        P->elems = P->k * P->npan * w;
    }
    return 0;
}

typedef struct {
    const float *x, *w, *g;
    float *gx, *gw, *gb; /* gw, gb: per-chunk partials */
    const gc_conv *p;
    ptrdiff_t o, ck, l, hp, wp, ghp, gwp, kcl, kcx, npt, npx, npc, nchunks, chunk, kx;
    int padded;
    gc_cukr_f32 wk, xk; /* the kernels of the weight and the input gradient (dconv_bwd_kernel) */
    int wmr, wnr, xmr, xnr; /* their tiles */
    gc_ctile_f32 wct, xct;  /* their full tiles' ISA store (the ISA's own kernel), or NULL */
    const ptrdiff_t *taps, *pix; /* npt*mr tap bases in the padded image; npx*mr input pixels */
    const int32_t *lofs, *gofs;  /* l pixel corners (int32); kx = o*kh*kw offsets in padded g */
    const float *wf;             /* the flipped weight packed: panels of nr input channels */
    gc_conv_claim claim;
} dconv_bwd_job;

/* One backward tile: kernel k's mv x nv tile into c (row ii, column j at c[j*ldc + ii]), added
 * to what c holds when acc (acc + c: the kernel's order).  A full tile of the ISA's own kernel
 * goes through its transposing store (ctile; NULL elsewhere): no scalar gather and scatter of
 * the tile (one thread, the CNN's 16 -> 32 weight gradient ~1.59 -> ~1.45 ms together with
 * dconv_pack_gt); a full 6 x 16 one through the loops with constant bounds.  The same bits
 * every way. */
static inline void dconv_bwd_tile(gc_cukr_f32 k, gc_ctile_f32 ctile, int mr, int nr,
                                  ptrdiff_t kb, const float *img, const ptrdiff_t *rows,
                                  const int32_t *koff, const float *b, float *t, float *c,
                                  ptrdiff_t ldc, ptrdiff_t mv, ptrdiff_t nv, int acc)
{
    if (ctile && mv == mr) {
        k(kb, img, rows, koff, b, t, 0);
        ctile(t, c, ldc, nv, acc, NULL);
        return;
    }
    if (mr == 6 && nr == 16 && mv == 6 && nv == 16) {
        if (acc)
            for (ptrdiff_t j = 0; j < 16; j++)
                for (ptrdiff_t ii = 0; ii < 6; ii++)
                    t[ii * 16 + j] = c[j * ldc + ii];
        k(kb, img, rows, koff, b, t, acc);
        dconv_tile_out(c, ldc, t, 16, 6, 16, NULL);
        return;
    }
    if (acc)
        for (ptrdiff_t j = 0; j < nv; j++)
            for (ptrdiff_t ii = 0; ii < mv; ii++)
                t[ii * nr + j] = c[j * ldc + ii];
    k(kb, img, rows, koff, b, t, acc);
    dconv_tile_out(c, ldc, t, nr, mv, nv, NULL);
}

/* One image's output gradient g [o, l] into P's panels (dconv_pack_init'ed for o x l: panels
 * of P->w channels over K blocks of pixels), the weight gradient's B operand g^T: 4 x 4 blocks
 * by register transposes (vec.h), the edges one by one (the scalar gather, dconv_pack_range's
 * loop, was ~7% of the CNN's 16 -> 32 backward). */
static void dconv_pack_gt(const gc_packed *P, const float *restrict g)
{
    const ptrdiff_t w = P->w, k = P->k;
    for (ptrdiff_t pc = 0; pc < k; pc += P->kc) {
        const ptrdiff_t kb = k - pc < P->kc ? k - pc : P->kc;
        for (ptrdiff_t q = 0; q < P->npan; q++) {
            float *restrict d = (float *)P->data + pc * P->npan * w + q * w * kb;
            const ptrdiff_t fv = P->f - q * w < w ? P->f - q * w : w;
            const float *s = g + q * w * k + pc;
            ptrdiff_t j = 0;
            for (; j + 4 <= fv; j += 4) {
                ptrdiff_t t = 0;
                for (; t + 4 <= kb; t += 4) {
                    gc_v4f x[4];
                    for (int r = 0; r < 4; r++)
                        memcpy(&x[r], s + (j + r) * k + t, sizeof x[r]);
                    GC_TRANSPOSE4(x);
                    for (int r = 0; r < 4; r++)
                        memcpy(d + (t + r) * w + j, &x[r], sizeof x[r]);
                }
                for (; t < kb; t++)
                    for (int r = 0; r < 4; r++)
                        d[t * w + j + r] = s[(j + r) * k + t];
            }
            for (; j < fv; j++)
                for (ptrdiff_t t = 0; t < kb; t++)
                    d[t * w + j] = s[j * k + t];
            for (; j < w; j++)
                for (ptrdiff_t t = 0; t < kb; t++)
                    d[t * w + j] = 0.0f;
        }
    }
}

/* One image's weight gradient into gwp [o, ck] (acc: add to it). */
static void dconv_bwd_w(const dconv_bwd_job *J, const float *xpad, const float *gpk, float *gwp,
                        int acc)
{
    const int mr = J->wmr, nr = J->wnr;
    const ptrdiff_t ck = J->ck, o = J->o, npo = (o + nr - 1) / nr;
    _Alignas(64) float t[GC_TILE_MAX];
    memset(t, 0, sizeof t);
    for (ptrdiff_t pc = 0; pc < J->l; pc += J->kcl) {
        const ptrdiff_t kb = J->l - pc < J->kcl ? J->l - pc : J->kcl;
        const int add = acc || pc > 0;
        for (ptrdiff_t q = 0; q < npo; q++) {
            const float *gpan = gpk + pc * npo * nr + q * nr * kb;
            const ptrdiff_t o0 = q * nr, nv = o - o0 < nr ? o - o0 : nr;
            for (ptrdiff_t i = 0; i < J->npt; i++) {
                const ptrdiff_t p0 = i * mr, mv = ck - p0 < mr ? ck - p0 : mr;
                float *c = gwp + o0 * ck + p0; /* (tap ii, channel j) at c[j*ck + ii] */
                dconv_bwd_tile(J->wk, J->wct, mr, nr, kb, xpad, J->taps + p0, J->lofs + pc, gpan,
                               t, c, ck, mv, nv, add);
            }
        }
    }
}

/* One image's input gradient gxb [c, h*w] from its padded output gradient. */
static void dconv_bwd_x(const dconv_bwd_job *J, const float *gpad, float *gxb)
{
    const int mr = J->xmr, nr = J->xnr;
    const ptrdiff_t hw = J->p->h * J->p->w, c = J->p->c;
    _Alignas(64) float t[GC_TILE_MAX];
    memset(t, 0, sizeof t);
    for (ptrdiff_t pc = 0; pc < J->kx; pc += J->kcx) {
        const ptrdiff_t kb = J->kx - pc < J->kcx ? J->kx - pc : J->kcx;
        for (ptrdiff_t q = 0; q < J->npc; q++) {
            const float *wpan = J->wf + pc * J->npc * nr + q * nr * kb;
            const ptrdiff_t c0 = q * nr, nv = c - c0 < nr ? c - c0 : nr;
            for (ptrdiff_t i = 0; i < J->npx; i++) {
                const ptrdiff_t l0 = i * mr, mv = hw - l0 < mr ? hw - l0 : mr;
                float *d = gxb + c0 * hw + l0;
                dconv_bwd_tile(J->xk, J->xct, mr, nr, kb, gpad, J->pix + l0, J->gofs + pc, wpan,
                               t, d, hw, mv, nv, pc > 0);
            }
        }
    }
}

/* The image x [c, h, w] into the interior of pad [c, hp, wp] (dconv_pad's layout) whose
 * borders were zeroed once for the call: the rows copied inline (dconv_pad's memset / memcpy
 * calls per row of a 14x14 image were ~6% of the CNN's 16 -> 32 backward, one thread). */
static void dconv_bwd_interior(const float *restrict x, float *restrict pad, const gc_conv *p,
                               ptrdiff_t hp, ptrdiff_t wp)
{
    for (ptrdiff_t ci = 0; ci < p->c; ci++) {
        float *d = pad + ci * hp * wp + p->ph * wp + p->pw;
        const float *s = x + ci * p->h * p->w;
        for (ptrdiff_t y = 0; y < p->h; y++, d += wp, s += p->w)
            for (ptrdiff_t j = 0; j < p->w; j++)
                d[j] = s[j];
    }
}

static void dconv_bwd_body(void *ctx, int slot)
{
    (void)slot;
    dconv_bwd_job *J = (dconv_bwd_job *)ctx;
    const gc_conv *p = J->p;
    const ptrdiff_t xs = p->c * p->h * p->w, gs = J->o * J->l;
    const ptrdiff_t eh = (J->ghp - p->oh) / 2, ew = (J->gwp - p->ow) / 2;
    gc_packed G; /* g[b]^T: panels of nr output channels over K blocks of pixels */
    float *xpad = NULL, *gpk = NULL, *gpad = NULL;
    int bad = 0;
    if (J->gw) {
        bad |= dconv_pack_init(&G, J->o, J->l, J->wnr) < 0;
        if (!bad) {
            G.data = gc_conv_scratch(1, sizeof(float) * (size_t)G.elems);
            gpk = (float *)G.data;
            if (J->padded)
                xpad = (float *)gc_conv_scratch(3, sizeof(float) * (size_t)(p->c * J->hp * J->wp));
            bad |= !gpk || (J->padded && !xpad);
        }
    }
    if (J->gx) {
        gpad = (float *)gc_conv_scratch(0, sizeof(float) * (size_t)(J->o * J->ghp * J->gwp));
        bad |= !gpad;
    }
    gc_conv gp = *p; /* g's padding, for dconv_bwd_interior */
    gp.c = J->o;
    gp.h = p->oh;
    gp.w = p->ow;
    gp.ph = eh;
    gp.pw = ew;
    /* the padded buffers' borders, the same for every image: zeroed once */
    if (!bad && xpad)
        memset(xpad, 0, sizeof(float) * (size_t)(p->c * J->hp * J->wp));
    if (!bad && gpad)
        memset(gpad, 0, sizeof(float) * (size_t)(J->o * J->ghp * J->gwp));
    for (long ch; (ch = gc_conv_next(&J->claim, J->nchunks, bad)) >= 0;) {
        ptrdiff_t b0, b1;
        float *gb = (float *)gc_conv_bwd_chunk(ch, J->chunk, p->n, J->gb, J->o, sizeof(float),
                                               &b0, &b1);
        float *gwp = J->gw ? J->gw + ch * J->o * J->ck : NULL;
        for (ptrdiff_t b = b0; b < b1; b++) {
            const float *g = J->g + b * gs;
            if (gwp) {
                const float *src = J->x + b * xs;
                if (xpad) {
                    dconv_bwd_interior(src, xpad, p, J->hp, J->wp);
                    src = xpad;
                }
                dconv_pack_gt(&G, g);
                dconv_bwd_w(J, src, gpk, gwp, b > b0);
            }
            if (gb)
                for (ptrdiff_t i = 0; i < J->o; i++)
                    gb[i] += gc_conv_rowsum_f32(g + i * J->l, J->l); /* (conv.c's bits) */
            if (J->gx) {
                dconv_bwd_interior(g, gpad, &gp, J->ghp, J->gwp);
                dconv_bwd_x(J, gpad, J->gx + b * xs);
            }
        }
    }
}

int gc_conv2d_direct_backward_f32(const float *x, const float *w, const float *g, float *gx,
                                  float *gw, float *gb, const gc_conv *p, ptrdiff_t o,
                                  ptrdiff_t chunk, ptrdiff_t nchunks, float *part)
{
    dconv_bwd_job J;
    memset(&J, 0, sizeof J);
    J.x = x;
    J.w = w;
    J.g = g;
    J.gx = gx;
    J.p = p;
    J.o = o;
    J.ck = p->c * p->kh * p->kw;
    J.l = p->oh * p->ow;
    J.wk = dconv_bwd_kernel(o, &J.wmr, &J.wnr);
    J.xk = dconv_bwd_kernel(p->c, &J.xmr, &J.xnr);
    const gc_ctile_f32 ct = dconv_env_on("GPUCORE_CONV_TILE_LOOP") ? NULL : gc_isa.ctile_f32;
    J.wct = J.wk == gc_isa.cukr_f32 ? ct : NULL;
    J.xct = J.xk == gc_isa.cukr_f32 ? ct : NULL;
    J.padded = p->ph > 0 || p->pw > 0;
    J.hp = p->h + 2 * p->ph;
    J.wp = p->w + 2 * p->pw;
    J.ghp = p->h + (p->kh - 1) * p->dh; /* oh + 2 * eh at stride 1 */
    J.gwp = p->w + (p->kw - 1) * p->dw;
    J.chunk = chunk;
    J.nchunks = nchunks;
    J.kcl = gc_gemm_kc('f', J.l);
    J.kx = o * p->kh * p->kw;
    J.kcx = gc_gemm_kc('f', J.kx);
    J.npt = (J.ck + J.wmr - 1) / J.wmr;
    J.npx = (p->h * p->w + J.xmr - 1) / J.xmr;
    J.npc = (p->c + J.xnr - 1) / J.xnr;
    const ptrdiff_t pw_ = gw ? nchunks * o * J.ck : 0;
    J.gw = gw ? part : NULL;
    J.gb = gb ? part + pw_ : NULL;
    /* tables and the flipped weight on the calling thread's buffers */
    const size_t nt = (size_t)(J.npt * J.wmr), npx = (size_t)(J.npx * J.xmr);
    const size_t tb = sizeof(ptrdiff_t) * (nt + npx) + sizeof(int32_t) * (size_t)(J.l + J.kx);
    char *tab = (char *)gc_conv_scratch(5, tb);
    if (!tab)
        return -1;
    ptrdiff_t *taps = (ptrdiff_t *)tab, *pix = taps + nt;
    int32_t *lofs = (int32_t *)(pix + npx), *gofs = lofs + J.l;
    for (ptrdiff_t i = 0; i < (ptrdiff_t)nt; i++) {
        const ptrdiff_t k = i < J.ck ? i : 0, khw = p->kh * p->kw;
        taps[i] = k / khw * J.hp * J.wp + k % khw / p->kw * p->dh * J.wp + k % p->kw * p->dw;
    }
    for (ptrdiff_t i = 0; i < J.l; i++)
        lofs[i] = (int32_t)(i / p->ow * p->sh * J.wp + i % p->ow * p->sw);
    for (ptrdiff_t i = 0; i < (ptrdiff_t)npx; i++) {
        const ptrdiff_t li = i < p->h * p->w ? i : 0;
        pix[i] = li / p->w * J.gwp + li % p->w;
    }
    for (ptrdiff_t oc = 0, k = 0; oc < o; oc++)
        for (ptrdiff_t ki = 0; ki < p->kh; ki++)
            for (ptrdiff_t kj = 0; kj < p->kw; kj++)
                gofs[k++] = (int32_t)(oc * J.ghp * J.gwp + ki * p->dh * J.gwp + kj * p->dw);
    J.taps = taps;
    J.pix = pix;
    J.lofs = lofs;
    J.gofs = gofs;
    if (gx) { /* Wf[(o, ki', kj'), c] = w[o, c, kh-1-ki', kw-1-kj'] in panels of nr channels */
        gc_packed P;
        if (dconv_pack_init(&P, p->c, J.kx, J.xnr) < 0)
            return -1;
        float *d = (float *)gc_conv_scratch(4, sizeof(float) * (size_t)P.elems);
        if (!d)
            return -1;
        const ptrdiff_t khw = p->kh * p->kw;
        for (ptrdiff_t pc = 0; pc < J.kx; pc += P.kc) {
            const ptrdiff_t kb = J.kx - pc < P.kc ? J.kx - pc : P.kc;
            for (ptrdiff_t k = pc; k < pc + kb; k++) {
                const ptrdiff_t oc = k / khw, tap = khw - 1 - k % khw; /* flipped (ki, kj) */
                for (ptrdiff_t c = 0; c < P.npan * P.w; c++)
                    d[pc * P.npan * P.w + c / P.w * P.w * kb + (k - pc) * P.w + c % P.w] =
                        c < p->c ? w[(oc * p->c + c) * khw + tap] : 0.0f;
            }
        }
        J.wf = d;
    }
    const double flops = 2.0 * (double)p->n * (double)o * (double)J.ck * (double)J.l;
    return gc_conv_run(&J.claim, dconv_bwd_body, &J, gc_threads_for(flops, 0.25e6), (long)nchunks);
}

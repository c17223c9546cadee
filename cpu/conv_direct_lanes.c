/* Direct float32 conv2d forward with output channels along the vector lanes: the pointwise
 * path's pixels x channels tile (gc_isa.pwtukr_f32, AVX-512's 7 pixels x 64 channels; isa.h)
 * reading its 7 pixels, consecutive along an output row, straight from the zero-padded image at
 * each tap's offset (x[koff[p] + i * sw]), the weight the GEMM's swapped panels (gemm_pack(w, 'a',
 * o, c*kh*kw, 0, 1): the direct path's own layout, so the runtime packs nothing new).
 *
 * For images whose pixels fill conv_direct.c's 14-pixel tile rows poorly (7 x 7 outputs: 49
 * pixels, 7/8 of four rows) and whose output rows fill 7-pixel ones: this tile broadcasts 7
 * pixels at constant strides from a tap's offset and loads 64 channels' weights (4 loads and 7
 * broadcasts per 28 FMAs, against the 14 x 32 tile's 2 loads and 14 broadcasts at 14 table
 * offsets).
 *
 * Bits: each element is the GEMM micro-kernel's FMA chain over the taps in im2col's order
 * (ci, ki, kj), in gc_gemm_kc's K blocks added in order, then + bias, + residual, relu
 * (gc_isa.pwtstore_f32): conv_direct.c's and the im2col GEMM's bits.  Each element is computed
 * by one thread.
 *
 * Work: units of (image, block of 64 output channels, group of output rows); per output row, the
 * K blocks outer and its 7-pixel tiles inner into a buffer [ow][64], stored transposed to the
 * row's NCHW segments with the epilogue.  When: gc_conv2d_dlanes_use. */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conv_direct.h"
#include "conv_fwd.h"
#include "isa.h"
#include "kernels.h"

#define DL_MR 7
#define DL_NC 64
/* the widest output row the unit's buffer (DL_MAXW x 64) holds */
#define DL_MAXW 256

/* The rule (measured on AVX-512, Zen 4, one thread, batch 1, against conv_direct.c's 14 x 32 tile;
 * same bits): where the ISA has the tile and its store, the direct path runs
 * (gc_conv2d_direct_use), one image (conv_direct.c fills its panels with several images' pixels),
 * the direct tile's 14-pixel rows fill less than DL_DIRECT_USE of their cells, output rows of at
 * most DL_MAXW pixels fill DL_USE of 7-pixel tiles and the output channels DL_USE of 64-wide blocks
 * (a last block of one 32-wide panel computes its second half again: -> 32 ran 1.4-1.6x
 * conv_direct.c's time, -> 96 1.13x), the column stride 1 or 2.  ResNet-50's 3x3 layers on 7 x 7
 * outputs (49 pixels: 7/8 of four 14-pixel rows, all of seven 7-pixel ones), 512 -> 512 and the
 * strided 512 -> 512 from 14 x 14: 2.45 -> 2.13 and 2.43 -> 2.16 ms; its stem (12544 pixels) and
 * the 3x3/2 128 -> 128 to 28 x 28, whose pixels fill 14-pixel rows: even (2.43 / 2.40, 2.12 /
 * 2.16). */
#define DL_USE 0.95
#define DL_DIRECT_USE 0.95

static double dl_fill(ptrdiff_t v, ptrdiff_t r)
{
    return (double)v / (double)((v + r - 1) / r * r);
}

int gc_conv2d_dlanes_use(const gc_conv *p, ptrdiff_t o)
{
    if (!gc_isa.pwtukr_f32 || !gc_isa.pwtstore_f32 || o <= 0 || p->n <= 0 || p->ow <= 0)
        return 0;
    if (p->ow > DL_MAXW || p->sw > 2 || !gc_conv2d_direct_use(p, o))
        return 0;
    const char *e = getenv("GPUCORE_CONV");
    if (e && gc_env_is(e, "direct_t"))
        return 1;
    if (dconv_forced())
        return 0;
    return p->n == 1 && dl_fill(p->oh * p->ow, gc_blk_f32.mr) < DL_DIRECT_USE &&
           dl_fill(p->ow, DL_MR) >= DL_USE && dl_fill(o, DL_NC) >= DL_USE;
}

typedef struct {
    gc_conv_fwd f; /* the call (conv_fwd.h; x: the image, or its zero-padded copy) */
    const float *wpk;
    const int32_t *koff;
    ptrdiff_t img, wp, kc, npa, nblk, ngrp, grows;
} dl_job;

/* one unit (gc_conv_claim_units), its rows' tiles in t [DL_MAXW + DL_MR][DL_NC] */
static void dl_unit(void *job, void *scratch, long u, long prev)
{
    (void)prev;
    const dl_job *J = (const dl_job *)job;
    float *t = (float *)scratch;
    const gc_conv *p = J->f.p;
    const ptrdiff_t per_img = J->nblk * J->ngrp, nr = gc_blk_f32.nr, ow = p->ow, l = J->f.l;
    const ptrdiff_t b = u / per_img, o0 = u % per_img / J->ngrp * DL_NC, grp = u % J->ngrp;
    const ptrdiff_t nch = J->f.o - o0 < DL_NC ? J->f.o - o0 : DL_NC, ip = o0 / nr;
    const ptrdiff_t y0 = grp * J->grows, y1 = y0 + J->grows < p->oh ? y0 + J->grows : p->oh;
    const float *x = J->f.x + b * J->img;
    const float *rb = J->f.bias ? J->f.bias + o0 : NULL;
    for (ptrdiff_t oy = y0; oy < y1; oy++) {
        const float *xr = x + oy * p->sh * J->wp;
        for (ptrdiff_t pc = 0; pc < J->f.ck; pc += J->kc) {
            const ptrdiff_t kb = J->f.ck - pc < J->kc ? J->f.ck - pc : J->kc;
            const float *b0 = J->wpk + pc * J->npa * nr + ip * nr * kb;
            /* a block of one panel: its second half computed again, never stored */
            const float *b1 = nch > nr ? b0 + nr * kb : b0;
            for (ptrdiff_t ox = 0; ox < ow; ox += DL_MR) {
                const int mv = (int)(ow - ox < DL_MR ? ow - ox : DL_MR);
                gc_isa.pwtukr_f32(kb, xr + ox * p->sw, 0, J->koff + pc, (int)p->sw, mv, b0, b1,
                                  t + ox * DL_NC, pc > 0, NULL, 0);
            }
        }
        const ptrdiff_t at = (b * J->f.o + o0) * l + oy * ow;
        gc_isa.pwtstore_f32(t, ow, J->f.out + at, l, nch, rb, J->f.res ? J->f.res + at : NULL,
                            J->f.relu);
    }
}

int gc_conv2d_dlanes_f32(const float *x, const float *w, const gc_packed *pw, const float *bias,
                         const gc_epi *e, float *out, const gc_conv *p, ptrdiff_t o)
{
    dl_job J;
    memset(&J, 0, sizeof J);
    gc_conv_fwd_init(&J.f, x, bias, e, out, p, o);
    if (p->n <= 0 || o <= 0 || J.f.l <= 0)
        return 0;
    gc_packed P;
    const int rc = gc_conv_weight_panels(&J.f, w, pw, 1, &P, &J.wpk);
    if (rc) /* 1: another layout, which conv_direct.c repacks */
        return rc;
    J.kc = P.kc;
    J.npa = P.npan;
    const ptrdiff_t hp = p->h + 2 * p->ph, wp = p->w + 2 * p->pw;
    J.wp = wp;
    J.img = p->c * hp * wp;
    if (p->ph || p->pw) { /* the zero-padded images (the calling thread's buffer) */
        float *pad = (float *)gc_conv_scratch(3, sizeof(float) * (size_t)(p->n * J.img));
        if (!pad)
            return -1;
        for (ptrdiff_t b = 0; b < p->n; b++)
            dconv_pad(x + b * p->c * p->h * p->w, pad + b * J.img, p, hp, wp);
        J.f.x = pad;
    }
    int32_t *koff = (int32_t *)gc_conv_scratch(5, sizeof(int32_t) * (size_t)J.f.ck);
    if (!koff)
        return -1;
    for (ptrdiff_t ci = 0, k = 0; ci < p->c; ci++)
        for (ptrdiff_t ki = 0; ki < p->kh; ki++)
            for (ptrdiff_t kj = 0; kj < p->kw; kj++)
                koff[k++] = (int32_t)(ci * hp * wp + ki * p->dh * wp + kj * p->dw);
    J.koff = koff;
    J.nblk = (o + DL_NC - 1) / DL_NC;
    const int nt = gc_conv_fwd_threads(&J.f);
    /* too few (image, channel block) units for the threads: output rows split in groups */
    J.ngrp = p->n * J.nblk < nt ? (nt + p->n * J.nblk - 1) / (p->n * J.nblk) : 1;
    if (J.ngrp > p->oh)
        J.ngrp = p->oh;
    J.grows = (p->oh + J.ngrp - 1) / J.ngrp;
    J.ngrp = (p->oh + J.grows - 1) / J.grows;
    return gc_conv_claim_units(&J, (long)(p->n * J.nblk * J.ngrp), nt, 0,
                               sizeof(float) * (size_t)(DL_MAXW + DL_MR) * DL_NC, dl_unit);
}

/* Pointwise float32 conv2d forward: a 1x1 convolution without padding (any stride; groups 1,
 * NCHW) as its own small GEMM driver around the ISA's pointwise micro-kernel (isa/ukr_pw.h):
 *
 *   out[b] [O, L] = W [O, C] @ X[b] [C, L]  (+ bias per row, + residual, relu)
 *
 * with L = oh*ow pixels and X[b] the image (stride 1) or its subsampled pixels (stride > 1),
 * packed per K block and column block straight from the image (the stride folded into the
 * packing: no column matrix).  The rows of the register tile are output channels (the weight's
 * gemm_pack, side A, swap 0: what the compiled executor pre-packs), the columns pixels, so every
 * tile is stored as MR row segments of out[b], and the epilogue runs in the tile's registers
 * (gemm.c runs a convolution's epilogue as a pass over the finished rows, and swapped products
 * through a transposing pass: ResNet-50's 1x1 layers spent ~1/4 of their time there, one
 * thread).
 *
 * Bits: each element runs the GEMM micro-kernel's FMA chain over the K blocks gc_gemm_kc(C)
 * gives, the blocks added in order (acc + C), then + bias, + residual, relu: what conv.c's GEMM
 * path computes (gemm.c, any mode), so both paths give the same results.  Each element is
 * computed by one thread from start to end: the result never depends on the thread count.
 *
 * Work: units of (image, block of columns, group of row panels); a unit walks the K blocks,
 * packs its columns of each (~L2 / 4), then runs every row panel of its group over them (the A
 * panel stays in L1 across the column panels).  Images of few pixels (and 196 pixels with a long
 * K) run the pixels x channels mode below instead (the tile turned around: output channels along
 * the vector lanes).  When this path runs, and which mode: gc_conv2d_pw_use. */
#define _POSIX_C_SOURCE 200112L
#include <stdlib.h>
#include <string.h>

#include "conv_fwd.h"
#include "isa.h"
#include "kernels.h"
#include "vec.h"

/* bytes of a unit's packed column block (one K block): ~a quarter of a Zen 4 / current Intel L2 */
#define GC_PW_BBYTES (256 * 1024)
/* at most this many columns per block (a short K block would otherwise make very wide ones) */
#define GC_PW_MAXCOLS 4096

typedef struct {
    gc_conv_fwd f; /* the call (conv_fwd.h; ck: the input channels) */
    /* the packed weight: K block pc at wpk + pc * npa * mr, its panel ir at + ir * mr * kb */
    const float *wpk;
    ptrdiff_t kc, npa, mr, nr;
    /* columns per block, blocks per image, row panels per group, groups, units */
    ptrdiff_t ncb, nblk, gpan, ngrp;
    size_t bbytes; /* a unit's scratch: packed pixel panels, then ncb pixel offsets */
    gc_pwukr_f32 ukr;
    /* the GEMM's short-row kernels for a last row panel of fewer than MR channels (the same
     * bits as the full tile's rows; NULL: the pointwise kernel computes the padded rows) */
    gc_ukr_rows_f32 rows;
    gc_pwukr_f32 half; /* the half-width tile (gc_isa.pwukr_half_f32), or NULL */
    gc_pwukr_f32 quarter; /* the quarter-width tile (gc_isa.pwukr_quarter_f32), or NULL */
} pw_job;

/* GPUCORE_CONV: 1 when it forces another path (im2col: conv.c's GEMM; direct, direct_t,
 * direct_gw: the direct paths),
 * 2 when it forces this one (pointwise: every 1x1 geometry without padding; tests), 3 its
 * pixels x channels tiles (pointwise_t: the same where the ISA has them), else 0 */
static int pw_forced(void)
{
    const char *e = getenv("GPUCORE_CONV");
    if (!e)
        return 0;
    if (gc_env_is(e, "im2col") || gc_env_is(e, "direct") || gc_env_is(e, "direct_t") ||
        gc_env_is(e, "direct_gw"))
        return 1;
    return gc_env_is(e, "pointwise") ? 2 : gc_env_is(e, "pointwise_t") ? 3 : 0;
}

/* the share of a dimension's padded tile cells that hold elements */
static double pw_use(ptrdiff_t v, ptrdiff_t r)
{
    return (double)v / (double)((v + r - 1) / r * r);
}

/* The columns the tiles of a last column panel of t pixels (0 < t < nr) compute: a half-width
 * tile and / or a quarter-width one where the ISA has them and they cover t with fewer columns
 * (AVX-512: t <= 8 -> 8, <= 16 -> 16, <= 24 -> 16 + 8), else the full tile. */
static ptrdiff_t pw_tail_cols(ptrdiff_t t, ptrdiff_t nr)
{
    const ptrdiff_t h = gc_isa.pwukr_half_f32 ? nr / 2 : 0;
    const ptrdiff_t q = gc_isa.pwukr_quarter_f32 ? nr / 4 : 0;
    if (q && t <= q)
        return q;
    if (h && t <= h)
        return h;
    if (h && q && t <= h + q)
        return h + q;
    return nr;
}

/* ... of the pixels' columns, a last panel run by the narrower tiles (pw_tail_cols) */
static double pw_col_use(ptrdiff_t l, ptrdiff_t nr)
{
    const ptrdiff_t t = l % nr;
    return t == 0 ? 1.0 : (double)l / (double)(l - t + pw_tail_cols(t, nr));
}

/* The rule, measured on AVX-512 (14 x 32 tiles, Zen 4, one thread, against conv.c's GEMM path
 * with the compiled executor's packing; benchmarks/README.md, *Pointwise convolution*): taken
 * when the tile's columns (pixels) mostly fill (PW_COL_USE of the cells the tiles compute,
 * pw_tail_cols: 49 pixels, 32 + 16 + 8 columns, 7/8 used, still lose 5-20 % against the product
 * run transposed, which fills 56 rows as well), its rows (output channels) too where the ISA
 * has no short-row kernels (PW_ROW_USE; AVX-512 has them: 64 and 128 output channels then run
 * as fast or faster), and the GEMM path would not run the product transposed for a better fill
 * (more than 256 channels in, as the runtime's rule in gpucore/runtime/ir/packing.py, and 5 %
 * more of the tile used) unless the convolution is strided (the stride folded into the packing
 * saves the column matrix).  Gains: ResNet-50's 64 -> 256 at 3136 pixels 10-20 %, 256 -> 1024
 * at 196 ~11 %, 128 -> 512 at 784 ~9 % (the epilogue in registers), strided downsamples 3-15 %,
 * 512 -> 128 at 784 5-8 %, 64 -> 64 at 3136 ~5 %, 1024 -> 256 / 512 at 196 (196 of 200
 * columns with the half- and quarter-width tiles) 1-7 %, 256 -> 64 alike.  Never at
 * GC_GEMV_MAX_M_N output channels or fewer (on AVX-512 `rows` is 1 for any count): gemm.c's
 * small-m path runs those 1.3 - 3x faster. */
#define PW_ROW_USE 0.95
#define PW_COL_USE 0.9
/* ... where the ISA has no narrower tiles (AVX2, SSE2: the line measured before them) */
#define PW_COL_USE_FULL 0.85
#define PW_SWAP_GAIN 1.05
#define PW_SWAP_MIN_K 257

/* The pixels x channels tiles (gc_isa.pwtukr_f32, 7 pixels: PWT_MR; measured on AVX-512, Zen 4, one
 * thread, benchmarks/conv_pointwise.py): at most PWT_MAXL pixels (the unit's buffer, PWT_MAXL x 64,
 * in L2), filling PWT_USE of 7-pixel rows, the channels PW_ROW_USE of 64-wide blocks (a last block
 * of one 32-wide panel computes its second half again: 7 x 7 2048 -> 32 ran 1.34x the GEMM's time,
 * 1024 -> 96 1.1-1.2x), and either the channels x pixels tiles' columns fill too little (49 pixels:
 * 7 x 7 images, 7/8 of 32 + 16 + 8 columns; ResNet-50's 512 -> 2048, 2048 -> 512 and the strided
 * 1024 -> 2048 10-14 % faster than the GEMM's transposed product, which the rule took before) or K
 * is at least PWT_MIN_K (196 pixels: 1024 -> 256 / 512 8-10 % faster than the channels x pixels
 * tiles, 256 -> 1024 + res ~4 % (with the store's residual and output lines requested during the
 * last K block; 3 % slower without), the strided 512 -> 1024 even to 2 %; 256 pixels, 16 x 16: 512
 * / 256 -> 64 1.04-1.06x the GEMM's time, but the channels x pixels tiles, which 196 pixels at most
 * would leave them to, 1.08-1.12x). */
#define PWT_MR 7
#define PWT_NC 64
#define PWT_MAXL 256
#define PWT_USE 0.95
#define PWT_MIN_K 256

static int pwt_use(ptrdiff_t l, ptrdiff_t o)
{
    return gc_isa.pwtukr_f32 && l <= PWT_MAXL && pw_use(l, PWT_MR) >= PWT_USE &&
           pw_use(o, PWT_NC) >= PW_ROW_USE;
}

int gc_conv2d_pw_use(const gc_conv *p, ptrdiff_t o)
{
    if (!gc_isa.pwukr_f32 || gc_isa.cukr_mr != gc_blk_f32.mr || gc_isa.cukr_nr != gc_blk_f32.nr)
        return 0;
    if (p->kh != 1 || p->kw != 1 || p->ph != 0 || p->pw != 0 || o <= 0 || p->c <= 0 || p->n <= 0)
        return 0;
    const ptrdiff_t l = p->oh * p->ow, mr = gc_blk_f32.mr, nr = gc_blk_f32.nr;
    const int forced = pw_forced();
    if (forced)
        return forced == 3 && gc_isa.pwtukr_f32 && l <= PWT_MAXL ? 2 : forced >= 2;
    if (o <= GC_GEMV_MAX_M_N) /* gemm.c's small-m path, faster (kernels.h) */
        return 0;
    const double rows = gc_isa.ukr_rows_f32 ? 1.0 : pw_use(o, mr); /* (short-row kernels) */
    const double col_min = gc_isa.pwukr_half_f32 ? PW_COL_USE : PW_COL_USE_FULL;
    if (pw_col_use(l, nr) < col_min)
        return pwt_use(l, o) ? 2 : 0;
    if (p->c >= PWT_MIN_K && pwt_use(l, o))
        return 2;
    if (rows < PW_ROW_USE)
        return 0;
    const double use = rows * pw_col_use(l, nr), use_t = pw_use(l, mr) * pw_use(o, nr);
    return p->sh > 1 || p->sw > 1 || p->c < PW_SWAP_MIN_K || use * PW_SWAP_GAIN >= use_t;
}

/* Columns [j0, j0 + nc) of K rows [pc, pc + kb) of image x into panels of nr (panel q at
 * d + q * nr * kb, row p of it at + p * nr; zero past nc).  off: the columns' offsets in a
 * channel plane (strided convolutions), or NULL (stride 1: the columns are j0..).  As gemm's
 * pack_across: rows in groups of 8, each panel receiving a contiguous run, the row pieces three
 * groups ahead requested first (each row is a new stream, channel planes apart: packed panel by
 * panel, the copy waited on L3 / memory one row at a time and took ~1/3 of a K = 256 layer). */
GC_NO_MEMCPY_IDIOM static void pw_pack(float *restrict d, const float *restrict x,
                                       const pw_job *J, ptrdiff_t pc, ptrdiff_t kb, ptrdiff_t j0,
                                       ptrdiff_t nc, const ptrdiff_t *restrict off)
{
    const ptrdiff_t nr = J->nr, plane = J->f.p->h * J->f.p->w;
    /* the span of a row piece in the plane, for the prefetches */
    const ptrdiff_t lo = off ? off[0] : j0, hi = off ? off[nc - 1] + 1 : j0 + nc;
    const float *src = x + pc * plane;
    for (ptrdiff_t p0 = 0; p0 < kb; p0 += 8) {
        const ptrdiff_t p1 = p0 + 8 < kb ? p0 + 8 : kb;
        for (ptrdiff_t p = p0 == 0 ? 0 : p0 + 24; p < p0 + 32 && p < kb; p++)
            for (ptrdiff_t i = lo; i < hi + 16; i += 16)
                __builtin_prefetch(src + p * plane + (i < hi ? i : hi - 1));
        for (ptrdiff_t q = 0; q * nr < nc; q++) {
            const ptrdiff_t nv = nc - q * nr < nr ? nc - q * nr : nr;
            float *restrict dq = d + q * nr * kb + p0 * nr;
            for (ptrdiff_t p = p0; p < p1; p++, dq += nr) {
                const float *restrict s = src + p * plane;
                ptrdiff_t j = 0;
                if (off) {
                    const ptrdiff_t *restrict oq = off + q * nr;
                    for (; j < nv; j++)
                        dq[j] = s[oq[j]];
                } else {
                    const float *restrict sq = s + j0 + q * nr;
                    for (; j < nv; j++)
                        dq[j] = sq[j];
                }
                for (; j < nr; j++)
                    dq[j] = 0.0f;
            }
        }
    }
}

/* The epilogue on finished rows of a tile whose product ran through the GEMM's short-row kernels
 * (gc_isa.ukr_rows_f32): epi_rows_f32(rb, res, relu, c, l, 0, 0, mv, nv), gemm.c's own. */
#define GC_T float
#define GC_SFX f32
#include "gemm_epi_rows.h"
#undef GC_SFX
#undef GC_T

/* one unit (gc_conv_claim_units) on its scratch: the pixel panels bp, the pixel offsets off */
static void pw_unit(void *job, void *scratch, long u, long prev)
{
    (void)prev;
    const pw_job *J = (const pw_job *)job;
    float *bp = (float *)scratch;
    ptrdiff_t *off = (ptrdiff_t *)((char *)scratch + J->bbytes);
    const gc_conv *p = J->f.p;
    const ptrdiff_t per_img = J->nblk * J->ngrp;
    const ptrdiff_t b = u / per_img, blk = u % per_img / J->ngrp, grp = u % J->ngrp;
    const ptrdiff_t j0 = blk * J->ncb, nc = J->f.l - j0 < J->ncb ? J->f.l - j0 : J->ncb;
    const ptrdiff_t ir0 = grp * J->gpan;
    const ptrdiff_t ir1 = ir0 + J->gpan < J->npa ? ir0 + J->gpan : J->npa;
    const ptrdiff_t mr = J->mr, nr = J->nr, l = J->f.l;
    const float *x = J->f.x + b * J->f.ck * p->h * p->w;
    float *out = J->f.out + b * J->f.o * l;
    const float *res = J->f.res ? J->f.res + b * J->f.o * l : NULL;
    const ptrdiff_t *of = NULL;
    if (p->sh != 1 || p->sw != 1) { /* the block's pixels' offsets in a plane */
        for (ptrdiff_t j = 0; j < nc; j++) {
            const ptrdiff_t q = j0 + j;
            off[j] = q / p->ow * p->sh * p->w + q % p->ow * p->sw;
        }
        of = off;
    }
    for (ptrdiff_t pc = 0; pc < J->f.ck; pc += J->kc) {
        const ptrdiff_t kb = J->f.ck - pc < J->kc ? J->f.ck - pc : J->kc;
        const int last = pc + kb >= J->f.ck, acc_in = pc > 0;
        pw_pack(bp, x, J, pc, kb, j0, nc, of);
        for (ptrdiff_t ir = ir0; ir < ir1; ir++) {
            const float *a = J->wpk + pc * J->npa * mr + ir * mr * kb;
            const ptrdiff_t i0 = ir * mr, mv = J->f.o - i0 < mr ? J->f.o - i0 : mr;
            const float *rb = last && J->f.bias ? J->f.bias + i0 : NULL;
            for (ptrdiff_t q = 0; q * nr < nc; q++) {
                const ptrdiff_t jj = j0 + q * nr, nv = nc - q * nr < nr ? nc - q * nr : nr;
                float *c = out + i0 * l + jj;
                const float *rs = last && res ? res + i0 * l + jj : NULL;
                const float *bq = bp + q * nr * kb;
                /* the next tile, for the kernel's prefetches: in this row panel, and full */
                const int nxt = mv == mr && (q + 2) * nr <= nc;
                const float *cn = nxt ? c + nr : NULL, *rn = nxt && rs ? rs + nr : NULL;
                const ptrdiff_t tc = nv < nr ? pw_tail_cols(nv, nr) : nr;
                if (tc < nr) { /* a last panel through the narrower tiles: half, then quarter */
                    const ptrdiff_t nh = tc == nr / 4 ? 0 : nv < nr / 2 ? nv : nr / 2;
                    const int relu = last && J->f.relu;
                    if (nh)
                        J->half(kb, a, bq, c, l, (int)mv, (int)nh, acc_in, rb, rs, relu, NULL,
                                NULL);
                    if (nv > nh)
                        J->quarter(kb, a, bq + nh, c + nh, l, (int)mv, (int)(nv - nh), acc_in,
                                   rb, rs ? rs + nh : NULL, relu, NULL, NULL);
                } else if (mv < mr && nv == nr && J->rows) { /* the last row panel: mv rows alone */
                    J->rows((int)mv, kb, a, bq, nr, c, l, acc_in ? 1.0f : 0.0f, NULL, 0);
                    if (rb || rs || (last && J->f.relu))
                        epi_rows_f32(rb, rs, last && J->f.relu, c, l, 0, 0, mv, nv);
                } else {
                    J->ukr(kb, a, bq, c, l, (int)mv, (int)nv, acc_in, rb, rs, last && J->f.relu,
                           cn, rn);
                }
            }
        }
    }
}

/* ---- the pixels x channels mode (gc_isa.pwtukr_f32; pwt_use) ---------------------------------
 * Units of (image, block of 64 output channels: two 32-wide panels of the GEMM's swapped weight
 * packing, side A swap 1, group of 7-pixel tiles: all of the image's unless the threads need
 * more units).  A unit runs its tiles over the K blocks (gc_gemm_kc: acc + the previous blocks'
 * sum, as the GEMM) into a buffer t [pixels][64] (L1 / L2), then stores it transposed to the
 * image's NCHW rows with the epilogue (+ bias, + residual, relu, each rounded on its own:
 * epi_rows' operations; gc_isa.pwtstore_f32).  Each element is computed by one thread: the bits
 * never depend on the thread count.  x: the image, or its strided pixels gathered [C][L] by the
 * caller. */
typedef struct {
    gc_conv_fwd f; /* the call (conv_fwd.h; ck: the input channels, x: the image or the pixels) */
    const float *wpk;
    /* channel blocks per image, pixel-tile groups per block (units enough for the threads) and
     * tiles per group, units */
    ptrdiff_t ldx, img, kc, npa, nblk, ngrp, gtiles;
} pwt_job;

/* The weights of the two panels from panel ip of the K block at pc (pc < c): *n floats. */
static const float *pwt_panels(const pwt_job *J, ptrdiff_t pc, ptrdiff_t ip, ptrdiff_t *n)
{
    const ptrdiff_t nr = gc_blk_f32.nr, kb = J->f.ck - pc < J->kc ? J->f.ck - pc : J->kc;
    *n = (J->npa - ip < 2 ? J->npa - ip : 2) * nr * kb;
    return J->wpk + pc * J->npa * nr + ip * nr * kb;
}

/* Rows [r0, r1) of the unit's nch output rows (t of nt shares), pixels [j0, j1): their
 * residual and output lines requested (the transposed store waited on them: ~7 % of a 256 ->
 * 1024 + res layer's time at 196 pixels). */
static void pwt_prefetch_rows(const pwt_job *J, ptrdiff_t b, ptrdiff_t o0, ptrdiff_t nch,
                              ptrdiff_t t, ptrdiff_t nt, ptrdiff_t j0, ptrdiff_t j1)
{
    const ptrdiff_t r0 = t * nch / nt, r1 = (t + 1) * nch / nt, l = J->f.l;
    for (ptrdiff_t r = r0; r < r1; r++) {
        const ptrdiff_t at = (b * J->f.o + o0 + r) * l;
        for (ptrdiff_t j = j0; j < j1 + 15; j += 16) {
            const ptrdiff_t q = at + (j < j1 ? j : j1 - 1);
            if (J->f.res)
                __builtin_prefetch(J->f.res + q, 0, 2);
            __builtin_prefetch(J->f.out + q, 1, 2);
        }
    }
}

/* one unit (gc_conv_claim_units), its tiles in t [PWT_MAXL + PWT_MR][PWT_NC] */
static void pwt_unit(void *job, void *scratch, long u, long prev)
{
    (void)prev;
    const pwt_job *J = (const pwt_job *)job;
    float *t = (float *)scratch;
    const ptrdiff_t per_img = J->nblk * J->ngrp, l = J->f.l, nr = gc_blk_f32.nr;
    const ptrdiff_t b = u / per_img, o0 = u % per_img / J->ngrp * PWT_NC, grp = u % J->ngrp;
    const ptrdiff_t nch = J->f.o - o0 < PWT_NC ? J->f.o - o0 : PWT_NC, ip = o0 / nr;
    /* this unit's pixel tiles [jt0, jt1), pixels [j0, j1) */
    const ptrdiff_t ntile = (l + PWT_MR - 1) / PWT_MR, jt0 = grp * J->gtiles;
    const ptrdiff_t jt1 = jt0 + J->gtiles < ntile ? jt0 + J->gtiles : ntile;
    const ptrdiff_t j0 = jt0 * PWT_MR, j1 = jt1 * PWT_MR < l ? jt1 * PWT_MR : l;
    const float *x = J->f.x + b * J->img;
    /* K blocks outer: a block's weights (64 x kc) re-read from L2 by each pixel tile, while
     * the tiles after the first request the next block's (or the next channel block's) from
     * memory, a share each (in a whole model the weights come from memory, and one tile
     * streaming them alone waited on them) */
    for (ptrdiff_t pc = 0; pc < J->f.ck; pc += J->kc) {
        const ptrdiff_t kb = J->f.ck - pc < J->kc ? J->f.ck - pc : J->kc;
        ptrdiff_t nw, nn = 0;
        const float *b0 = pwt_panels(J, pc, ip, &nw), *nx = NULL;
        /* a block of one panel: its second half computed again, never stored */
        const float *b1 = nch > nr ? b0 + nr * kb : b0;
        if (pc + kb < J->f.ck)
            nx = pwt_panels(J, pc + kb, ip, &nn);
        else if (ip + 2 < J->npa)
            nx = pwt_panels(J, 0, ip + 2, &nn);
        const ptrdiff_t lines = (nn + 15) / 16, nt = jt1 - jt0;
        const ptrdiff_t share = nt > 1 ? (lines + nt - 2) / (nt - 1) : 0;
        const int last = pc + kb >= J->f.ck;
        for (ptrdiff_t jt = jt0; jt < jt1; jt++) {
            const ptrdiff_t j = jt * PWT_MR, f0 = (jt - jt0 - 1) * share;
            if (last) /* the store's residual and output lines, a share of the rows a tile */
                pwt_prefetch_rows(J, b, o0, nch, jt - jt0, nt, j0, j1);
            const int mv = (int)(l - j < PWT_MR ? l - j : PWT_MR);
            ptrdiff_t npf = jt > jt0 && f0 < lines ? (lines - f0 < share ? lines - f0 : share) : 0;
            if (npf > kb)
                npf = kb;
            gc_isa.pwtukr_f32(kb, x + pc * J->ldx + j, J->ldx, NULL, 1, mv, b0, b1,
                              t + j * PWT_NC, pc > 0, npf ? nx + f0 * 16 : NULL, npf);
        }
    }
    float *out = J->f.out + (b * J->f.o + o0) * l + j0;
    const float *res = J->f.res ? J->f.res + (b * J->f.o + o0) * l + j0 : NULL;
    const float *rb = J->f.bias ? J->f.bias + o0 : NULL, *tt = t + j0 * PWT_NC;
    if (gc_isa.pwtstore_f32) {
        gc_isa.pwtstore_f32(tt, j1 - j0, out, l, nch, rb, res, J->f.relu);
        return;
    }
    for (ptrdiff_t i = 0; i < nch; i++) {
        float *restrict d = out + i * l;
        for (ptrdiff_t j = 0; j < j1 - j0; j++)
            d[j] = tt[j * PWT_NC + i];
    }
    if (rb || res || J->f.relu)
        epi_rows_f32(rb, res, J->f.relu, out, l, 0, 0, nch, j1 - j0);
}

/* The pixels x channels mode (gc_conv2d_pw_use 2): w, or pw packed side A swap 1. */
static int pwt_run(const float *x, const float *w, const gc_packed *pw, const float *bias,
                   const gc_epi *e, float *out, const gc_conv *p, ptrdiff_t o)
{
    pwt_job J;
    memset(&J, 0, sizeof J);
    gc_conv_fwd_init(&J.f, x, bias, e, out, p, o);
    gc_packed P;
    const int rc = gc_conv_weight_panels(&J.f, w, pw, 1, &P, &J.wpk);
    if (rc) /* 1: another layout, for the caller's other paths */
        return rc;
    J.kc = P.kc;
    J.npa = P.npan;
    const ptrdiff_t plane = p->h * p->w;
    if (p->sh == 1 && p->sw == 1) { /* the image's planes as they are */
        J.ldx = plane;
        J.img = J.f.ck * plane;
    } else { /* the strided pixels gathered [C][L] per image (the calling thread's buffer) */
        float *g = (float *)gc_conv_scratch(3, sizeof(float) * (size_t)(p->n * J.f.ck * J.f.l));
        if (!g)
            return -1;
        for (ptrdiff_t r = 0; r < p->n * J.f.ck; r++)
            for (ptrdiff_t q = 0; q < J.f.l; q++)
                g[r * J.f.l + q] = x[r * plane + q / p->ow * p->sh * p->w + q % p->ow * p->sw];
        J.f.x = g;
        J.ldx = J.f.l;
        J.img = J.f.ck * J.f.l;
    }
    J.nblk = (o + PWT_NC - 1) / PWT_NC;
    const int nt = gc_conv_fwd_threads(&J.f);
    /* too few (image, channel block) units for the threads: the pixel tiles split in groups */
    const ptrdiff_t ntile = (J.f.l + PWT_MR - 1) / PWT_MR;
    J.ngrp = p->n * J.nblk < nt ? (nt + p->n * J.nblk - 1) / (p->n * J.nblk) : 1;
    if (J.ngrp > ntile)
        J.ngrp = ntile;
    J.gtiles = (ntile + J.ngrp - 1) / J.ngrp;
    J.ngrp = (ntile + J.gtiles - 1) / J.gtiles;
    return gc_conv_claim_units(&J, (long)(p->n * J.nblk * J.ngrp), nt, 0,
                               sizeof(float) * (size_t)(PWT_MAXL + PWT_MR) * PWT_NC, pwt_unit);
}

int gc_conv2d_pw_f32(const float *x, const float *w, const gc_packed *pw, const float *bias,
                     const gc_epi *e, float *out, const gc_conv *p, ptrdiff_t o)
{
    if (p->n > 0 && o > 0 && p->oh * p->ow > 0 && gc_conv2d_pw_use(p, o) == 2)
        return pwt_run(x, w, pw, bias, e, out, p, o);
    pw_job J;
    memset(&J, 0, sizeof J);
    gc_conv_fwd_init(&J.f, x, bias, e, out, p, o);
    J.mr = gc_blk_f32.mr;
    J.nr = gc_blk_f32.nr;
    J.ukr = gc_isa.pwukr_f32;
    J.rows = gc_isa.ukr_rows_f32;
    J.half = gc_isa.pwukr_half_f32;
    J.quarter = gc_isa.pwukr_quarter_f32;
    if (p->n <= 0 || o <= 0 || J.f.l <= 0)
        return 0;
    gc_packed P;
    const int rc = gc_conv_weight_panels(&J.f, w, pw, 0, &P, &J.wpk);
    if (rc) /* 1: another layout (a swapped or Winograd pack), for the caller's other paths */
        return rc;
    J.kc = P.kc;
    J.npa = P.npan;
    /* column blocks of near-equal width, each within GC_PW_BBYTES for one K block */
    const ptrdiff_t kb = J.f.ck < J.kc ? J.f.ck : J.kc;
    const ptrdiff_t npx = (J.f.l + J.nr - 1) / J.nr;
    ptrdiff_t maxp = GC_PW_BBYTES / (ptrdiff_t)(sizeof(float) * (size_t)(kb * J.nr));
    if (maxp * J.nr > GC_PW_MAXCOLS)
        maxp = GC_PW_MAXCOLS / J.nr;
    if (maxp < 1)
        maxp = 1;
    const int nt = gc_conv_fwd_threads(&J.f);
    ptrdiff_t nblk = (npx + maxp - 1) / maxp;
    if (nt > 1 && p->n < nt && nblk > 1 && nblk % nt) /* blocks in multiples of the threads */
        nblk += nt - nblk % nt;
    if (nblk > npx)
        nblk = npx;
    J.ncb = (npx + nblk - 1) / nblk * J.nr;
    J.nblk = (J.f.l + J.ncb - 1) / J.ncb;
    /* too few units for the threads (one image, few columns): row panels split into groups */
    J.ngrp = 1;
    if (p->n * J.nblk < nt) {
        J.ngrp = (nt + p->n * J.nblk - 1) / (p->n * J.nblk);
        if (J.ngrp > J.npa)
            J.ngrp = J.npa;
    }
    J.gpan = (J.npa + J.ngrp - 1) / J.ngrp;
    J.ngrp = (J.npa + J.gpan - 1) / J.gpan;
    J.bbytes = sizeof(float) * (size_t)((J.ncb + J.nr - 1) / J.nr * J.nr * kb);
    return gc_conv_claim_units(&J, (long)(p->n * J.nblk * J.ngrp), nt, 0,
                               J.bbytes + sizeof(ptrdiff_t) * (size_t)J.ncb, pw_unit);
}

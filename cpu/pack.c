/* GEMM operand packing: the panel packer the blocked GEMM (gemm.c) runs on every call, and the
 * whole-operand packing done once for a constant operand (gc_packed, kernels.h; bound as
 * gemm_pack / PackedMatrix).  gemm.c includes this file with GC_PACK_PANELS_ONLY defined for
 * its own static copy of the panel packer and of the unpacking (its fallback), so that it links
 * without this file (tools/check_neon.sh builds it alone).
 *
 * A pre-packed operand holds exactly the panels that gemm.c would pack from the same matrix on
 * every call (the same gc_pack_panel with alpha = 1, the same K blocks and panel width), laid out
 * one after the other: K block by K block, each holding every panel across the free dimension.
 * A compute unit then finds its panels at a computed offset instead of packing them, so the
 * products are bitwise those of the unpacked call. */
#ifndef GC_T

#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "kernels.h"
#include "vec.h"

#ifndef GC_PACK_PANELS_ONLY
int gc_gemm_pack_init(gc_packed *p, char kind, int side, ptrdiff_t rows, ptrdiff_t cols,
                      int trans, int swap)
{
    memset(p, 0, sizeof *p);
    p->kind = kind;
    p->side = side;
    p->rows = rows;
    p->cols = cols;
    p->trans = trans;
    p->swap = swap;
    p->isa = gc_isa.isa;
    p->f = side == 0 ? rows : cols;
    p->k = side == 0 ? cols : rows;
    /* rows of the register tile (A side, or B swapped), else its columns */
    p->w = gc_packed_width(kind, side, swap);
    p->kc = gc_gemm_kc(kind, p->k);
    p->npan = (p->f + p->w - 1) / p->w;
    if (p->npan > PTRDIFF_MAX / p->w || (p->k && p->npan * p->w > PTRDIFF_MAX / 8 / p->k))
        return -1;
    p->elems = p->k * p->npan * p->w;
    if (swap == 2) { /* conv_winograd.c's transformed 3x3 weight: rows o, cols c*9 */
        if (kind != 'f' || side != 0 || trans != 0 || cols % 9 != 0)
            return -2;
        p->elems = gc_winograd_weight_elems(rows, cols / 9);
        if (p->elems < 0)
            return -1;
    }
    return 0;
}
#endif

#define GC_T float
#define GC_SFX f32
#define GC_VT gc_v4f
#define GC_VN 4
#define GC_PK 16
#define GC_VT_REST , alpha, alpha
#define GC_TRANSPOSE GC_TRANSPOSE4
#include "pack.c"
#undef GC_T
#undef GC_SFX
#undef GC_VT
#undef GC_VN
#undef GC_PK
#undef GC_VT_REST
#undef GC_TRANSPOSE

#define GC_T double
#define GC_SFX f64
#define GC_VT gc_v2d
#define GC_VN 2
#define GC_PK 8
#define GC_VT_REST
#define GC_TRANSPOSE GC_TRANSPOSE2
#include "pack.c"
#undef GC_T
#undef GC_SFX
#undef GC_VT
#undef GC_VN
#undef GC_PK
#undef GC_VT_REST
#undef GC_TRANSPOSE

#else /* type-generic body, T = GC_T */

/* rows rows (< GC_VN) of lanes from x to d (constant-size moves). */
static inline void GC_FN(store_lanes)(GC_T *restrict d, const GC_VT *x, int rows)
{
    switch (rows) {
    case 1: memcpy(d, x, sizeof(GC_T)); break;
    case 2: memcpy(d, x, 2 * sizeof(GC_T)); break;
    default: memcpy(d, x, 3 * sizeof(GC_T)); break;
    }
}

/* rows full pieces of exactly W elements into one panel (dq: W apart, sq: ld apart), as
 * constant-size moves: the generic loop below spends more on its per-row control (a vector, then
 * scalars for the rest of 6 / 14 / 12, then the zero tail) than on the bytes, and packing a
 * transposed A (dW = dY^T X: an MR piece of every row of dY) or a wide row-major B took about
 * half the micro-kernel's time (512 x 2048 x 128 with A^T, one AVX2 thread).  W: the register
 * tile's MR and NR of every ISA (isa.h); another width takes the generic loop.  The same
 * products (alpha * x, each rounded once) as the vector loop: the same bits. */
#define GC_PACK_FULL_W(W)                                                                         \
    case W:                                                                                       \
        for (ptrdiff_t p = 0; p < rows; p++, dq += W, sq += ld) {                                 \
            if (scale) {                                                                          \
                for (int i = 0; i < W; i++)                                                       \
                    dq[i] = alpha * sq[i];                                                        \
            } else {                                                                              \
                memcpy(dq, sq, W * sizeof(GC_T));                                                 \
            }                                                                                     \
        }                                                                                         \
        return 1;
static inline int GC_FN(pack_full)(GC_T *restrict dq, const GC_T *restrict sq, ptrdiff_t ld,
                                   int w, ptrdiff_t rows, int scale, GC_T alpha)
{
    switch (w) {
        GC_PACK_FULL_W(4)
        GC_PACK_FULL_W(6)
        GC_PACK_FULL_W(8)
        GC_PACK_FULL_W(12)
        GC_PACK_FULL_W(14)
        GC_PACK_FULL_W(16)
        GC_PACK_FULL_W(32)
    default: return 0;
    }
}
#undef GC_PACK_FULL_W

/* np panels of width w from a row-major source, row by row: panel q gets src[p*ld + q*w + i]
 * (times alpha) at d[q*w*kb + p*w + i] for p < kb and i < min(w, valid - q*w), zeros up to w.
 * Each source row piece is read once, in order, and rows go in groups of 8 so that each panel
 * receives a contiguous run of 8 rows: packed panel by panel instead, the w-wide pieces of one
 * panel lie a row apart (a TLB miss each for wide rows) and the next panel comes back to the
 * same rows (B of 64 x 3136 x 576 on AVX2: 23 -> 50 GFLOP/s). */
GC_NO_MEMCPY_IDIOM static void GC_FN(pack_across)(GC_T *restrict d, const GC_T *restrict src,
                                                   ptrdiff_t ld, int w, ptrdiff_t valid,
                                                   ptrdiff_t np, ptrdiff_t kb, GC_T alpha)
{
    const int scale = alpha != (GC_T)1;
    const GC_VT va = {alpha, alpha GC_VT_REST};
    const ptrdiff_t span = valid < np * w ? valid : np * w, line = 64 / (ptrdiff_t)sizeof(GC_T);
    for (ptrdiff_t p0 = 0; p0 < kb; p0 += 8) {
        const ptrdiff_t p1 = p0 + 8 < kb ? p0 + 8 : kb;
        /* the row pieces three groups ahead (at the start: the next two groups), requested
         * now: with a narrow piece (few panels) and a long stride each row is a new cache line or
         * two (A^T of dW = dY^T X: the copy waited on L3 / memory one row at a time) */
        for (ptrdiff_t p = p0 == 0 ? 8 : p0 + 24; p < p0 + 32 && p < kb; p++)
            for (ptrdiff_t i = 0; i < span + line; i += line)
                __builtin_prefetch(src + p * ld + (i < span ? i : span - 1));
        for (ptrdiff_t q = 0; q < np; q++) {
            const ptrdiff_t n = valid - q * w < w ? valid - q * w : w;
            GC_T *restrict dq = d + q * w * kb + p0 * w;
            const GC_T *restrict sq = src + p0 * ld + q * w;
            if (n == w && GC_FN(pack_full)(dq, sq, ld, w, p1 - p0, scale, alpha))
                continue;
            for (ptrdiff_t p = p0; p < p1; p++, dq += w, sq += ld) {
                ptrdiff_t i = 0;
                for (; i + GC_VN <= n; i += GC_VN) {
                    GC_VT x;
                    memcpy(&x, sq + i, sizeof x);
                    if (scale)
                        x *= va;
                    memcpy(dq + i, &x, sizeof x);
                }
                for (; i < n; i++)
                    dq[i] = scale ? alpha * sq[i] : sq[i];
                for (; i < w; i++)
                    dq[i] = (GC_T)0;
            }
        }
    }
}

/* One packed panel of width w (mr for A, nr for B) over kb steps: d[p*w + i] = alpha * X(p, i)
 * for i < valid, 0 for valid <= i < w, where X(p, i) = src[p*ld + i] (trans == 0: the panel's
 * rows are contiguous in memory) or src[i*ld + p] (trans == 1: it is stored transposed; moved
 * with 4x4 (float) / 2x2 (double) register transposes). */
static void GC_FN(pack_panel)(GC_T *restrict d, const GC_T *restrict src, ptrdiff_t ld, int w,
                              ptrdiff_t valid, ptrdiff_t kb, GC_T alpha, int trans)
{
    const int scale = alpha != (GC_T)1;
    const GC_VT va = {alpha, alpha GC_VT_REST};
    if (!trans) {
        GC_FN(pack_across)(d, src, ld, w, valid, 1, kb, alpha);
        return;
    }
    /* stored transposed: GC_VN x GC_VN register transposes, one cache line of k steps (GC_PK)
     * of every row of the panel at a time, so that all its rows are read at once: row group by
     * row group, each group's GC_VN rows were the only lines in flight (a 32 x 256 panel of an
     * activation just out of L2 took ~3.5 us on Zen 4) */
    const ptrdiff_t pend = kb / GC_VN * GC_VN;
    const int full = (int)(valid / GC_VN) * GC_VN, rows = (int)(valid - full);
    for (ptrdiff_t p0 = 0; p0 < pend; p0 += GC_PK) {
        const ptrdiff_t p1 = p0 + GC_PK < pend ? p0 + GC_PK : pend;
        if (p1 < pend) /* the next line of every row, requested now */
            for (ptrdiff_t i = 0; i < valid; i++)
                __builtin_prefetch(src + i * ld + p1);
        for (int i = 0; i < full; i += GC_VN) {
            const GC_T *restrict r = src + i * ld;
            for (ptrdiff_t p = p0; p < p1; p += GC_VN) {
                GC_VT x[GC_VN];
                for (int q = 0; q < GC_VN; q++) {
                    memcpy(&x[q], r + q * ld + p, sizeof x[q]);
                    if (scale)
                        x[q] *= va;
                }
                GC_TRANSPOSE(x);
                for (int q = 0; q < GC_VN; q++)
                    memcpy(d + (p + q) * w + i, &x[q], sizeof x[q]);
            }
        }
        if (rows) { /* fewer than GC_VN rows left: zero vectors for the missing ones */
            const GC_T *restrict r = src + full * ld;
            for (ptrdiff_t p = p0; p < p1; p += GC_VN) {
                GC_VT x[GC_VN] = {{0}};
                for (int q = 0; q < rows; q++) {
                    memcpy(&x[q], r + q * ld + p, sizeof x[q]);
                    if (scale)
                        x[q] *= va;
                }
                GC_TRANSPOSE(x);
                for (int q = 0; q < GC_VN; q++)
                    GC_FN(store_lanes)(d + (p + q) * w + full, &x[q], rows);
            }
        }
    }
    for (ptrdiff_t p = pend; p < kb; p++)
        for (ptrdiff_t i = 0; i < valid; i++)
            d[p * w + i] = alpha * src[i * ld + p];
    /* the rows past valid: zero, step by step (contiguous stores) */
    if (valid < w)
        for (ptrdiff_t p = 0; p < kb; p++)
            for (ptrdiff_t i = valid; i < w; i++)
                d[p * w + i] = (GC_T)0;
}

/* Element (f, p) of the source sits at x[f*sf + p*sp]. */
static void GC_FN(pack_strides)(const gc_packed *P, ptrdiff_t *sf, ptrdiff_t *sp)
{
    const int fcontig = P->side == 0 ? P->trans : !P->trans;
    /* side A: trans 0 stores m x k (x[f*k + p]), trans 1 k x m (x[p*m + f]);
     * side B: trans 0 stores k x n (x[p*n + f]), trans 1 n x k (x[f*k + p]) */
    const ptrdiff_t ld = P->trans ? P->rows : P->cols;
    *sf = fcontig ? 1 : ld;
    *sp = fcontig ? ld : 1;
}

typedef struct {
    const gc_packed *P;
    const GC_T *x;
    GC_T *out; /* unpack */
} GC_FN(pack_job);

/* Panels [lo, hi) of the (K block, panel) grid, K block major. */
static void GC_FN(pack_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(pack_job) *J = (const GC_FN(pack_job) *)ctx;
    const gc_packed *P = J->P;
    ptrdiff_t sf, sp;
    GC_FN(pack_strides)(P, &sf, &sp);
    for (ptrdiff_t u = lo; u < hi; u++) {
        const ptrdiff_t pc = (u / P->npan) * P->kc, q = u % P->npan;
        const ptrdiff_t kb = P->k - pc < P->kc ? P->k - pc : P->kc;
        const ptrdiff_t f0 = q * P->w, fv = P->f - f0 < P->w ? P->f - f0 : P->w;
        GC_T *d = (GC_T *)P->data + pc * P->npan * P->w + q * P->w * kb;
        const GC_T *s = J->x + f0 * sf + pc * sp;
        if (!J->out) {
            if (sf == 1) /* the panel's rows (fixed p) are contiguous */
                GC_FN(pack_panel)(d, s, sp, P->w, fv, kb, (GC_T)1, 0);
            else
                GC_FN(pack_panel)(d, s, sf, P->w, fv, kb, (GC_T)1, 1);
        } else {
            GC_T *o = J->out + f0 * sf + pc * sp;
            for (ptrdiff_t p = 0; p < kb; p++)
                for (ptrdiff_t i = 0; i < fv; i++)
                    o[i * sf + p * sp] = d[p * P->w + i];
        }
    }
}

/* x := the matrix of P in its stored layout (a virtual P's panels made first); -1 if malloc
 * fails. */
static int GC_FN(gemm_unpack)(const gc_packed *P, GC_T *x)
{
    gc_packed V = *P;
    if (!P->data) {
        if (!(V.data = malloc(sizeof(GC_T) * (size_t)(P->elems > 0 ? P->elems : 1))))
            return -1;
        for (ptrdiff_t pc = 0; pc < P->k; pc += P->kc)
            P->fill(P->fill_ctx, (GC_T *)V.data + pc * P->npan * P->w, pc,
                    P->k - pc < P->kc ? P->k - pc : P->kc, 0, P->f);
    }
    GC_FN(pack_job) J = {.P = &V, .x = x, .out = x};
    const ptrdiff_t units = P->kc ? (P->k + P->kc - 1) / P->kc * P->npan : 0;
    gc_parallel_range(units, 1, 1.0 * (double)P->elems, GC_FN(pack_range), &J);
    if (!P->data)
        free(V.data);
    return 0;
}

#ifndef GC_PACK_PANELS_ONLY
void GC_FN(gc_gemm_pack)(const GC_T *x, const gc_packed *P)
{
    if (P->swap == 2) { /* float32 only (gc_gemm_pack_init) */
        gc_winograd_weight((const float *)x, (float *)P->data, P->rows, P->cols / 9,
                           P->raw ? 2 : 1);
        return;
    }
    GC_FN(pack_job) J = {.P = P, .x = x, .out = NULL};
    const ptrdiff_t units = P->kc ? (P->k + P->kc - 1) / P->kc * P->npan : 0;
    gc_parallel_range(units, 1, 0.5 * (double)P->elems, GC_FN(pack_range), &J);
}
#endif

#endif

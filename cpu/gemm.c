/* Batched GEMM in the BLIS / GotoBLAS structure, with a fused bias + activation epilogue:
 *   C_i = act(alpha * op(A_i) @ op(B_i) + beta * C_i + bias)   for i < batch, in order.
 *
 * Shared by every ISA (only the register micro-kernel, gc_isa.ukr_*, is ISA-specific):
 *
 *   for ic in M by MC:                        A block  MC x KC  (packed once, shared, ~L3)
 *     for pc in K by KC:                        the threads pack it together, then one barrier
 *       for jc in this thread's columns by NC:  B block  KC x NC  (packed per thread, ~L2)
 *         for ir over this thread's MR-row panels of the A block:
 *           for jr over the NR-column panels of the B block:
 *             micro-kernel: MR x NR tile of C  (the A micro-panel MR x KC stays in L1)
 *
 * Packing folds the transpose flags (and alpha, into A) in and zero-pads the edge panels.  The
 * A block is double-buffered so one barrier per (ic, pc) step suffices.  Threads form a tm x tn
 * grid: tn splits N (aligned to NR), tm splits the MR panels of each A block; a thread's tiles
 * are always on the global MR x NR grid and every C element is summed over k in the same order,
 * so results are bitwise identical for any thread count.  beta applies on the first K block,
 * the bias / activation after the last one, while the tile is in registers (bias, relu) or in L1
 * (the other activations, applied per tile row with the vectorized unary functions).
 *
 * Batch items with a C stride of at least m*n are independent; when one item is too small to
 * split, the items are spread over the threads instead.  Items whose C overlap (sc == 0
 * accumulates) run in order. */
#ifndef GC_T

#include <stdlib.h>
#include <string.h>

#include "isa.h"
#include "kernels.h"

/* Minimum work per thread, in flops (a parallel region costs a few microseconds). */
#define GC_GEMM_GRAIN 2.0e6
/* Row-major B up to this size is read in place by the micro-kernel instead of being packed. */
#define GC_BDIRECT_BYTES (64.0 * 1024)

/* 16-byte vectors through the compiler's generic vector extensions (SSE2 on x86, NEON on arm64):
 * portable code for the register transposes of the packing. */
typedef float gc_v4f __attribute__((vector_size(16)));
typedef double gc_v2d __attribute__((vector_size(16)));
typedef int gc_v4i __attribute__((vector_size(16)));
typedef long long gc_v2l __attribute__((vector_size(16)));
#if defined(__clang__)
#define GC_SHUF4(a, b, i0, i1, i2, i3) __builtin_shufflevector(a, b, i0, i1, i2, i3)
#define GC_SHUF2(a, b, i0, i1) __builtin_shufflevector(a, b, i0, i1)
#else
#define GC_SHUF4(a, b, i0, i1, i2, i3) __builtin_shuffle(a, b, (gc_v4i){i0, i1, i2, i3})
#define GC_SHUF2(a, b, i0, i1) __builtin_shuffle(a, b, (gc_v2l){i0, i1})
#endif
/* In-register transpose of x[0..3] (4 rows of 4 floats) / x[0..1] (2 rows of 2 doubles). */
#define GC_TRANSPOSE4(x)                                                                          \
    do {                                                                                          \
        const gc_v4f t0 = GC_SHUF4(x[0], x[1], 0, 4, 1, 5), t1 = GC_SHUF4(x[2], x[3], 0, 4, 1, 5); \
        const gc_v4f t2 = GC_SHUF4(x[0], x[1], 2, 6, 3, 7), t3 = GC_SHUF4(x[2], x[3], 2, 6, 3, 7); \
        x[0] = GC_SHUF4(t0, t1, 0, 1, 4, 5);                                                      \
        x[1] = GC_SHUF4(t0, t1, 2, 3, 6, 7);                                                      \
        x[2] = GC_SHUF4(t2, t3, 0, 1, 4, 5);                                                      \
        x[3] = GC_SHUF4(t2, t3, 2, 3, 6, 7);                                                      \
    } while (0)
#define GC_TRANSPOSE2(x)                                                                          \
    do {                                                                                          \
        const gc_v2d t0 = GC_SHUF2(x[0], x[1], 0, 2);                                             \
        x[1] = GC_SHUF2(x[0], x[1], 1, 3);                                                        \
        x[0] = t0;                                                                                \
    } while (0)

#define GC_T float
#define GC_SFX f32
#define GC_UKR ukr_f32
#define GC_BLK gc_blk_f32
#define GC_VT gc_v4f
#define GC_VN 4
#define GC_VT_REST , alpha, alpha
#define GC_TRANSPOSE GC_TRANSPOSE4
#include "gemm.c"
#undef GC_T
#undef GC_SFX
#undef GC_UKR
#undef GC_BLK
#undef GC_VT
#undef GC_VN
#undef GC_VT_REST
#undef GC_TRANSPOSE

#define GC_T double
#define GC_SFX f64
#define GC_UKR ukr_f64
#define GC_BLK gc_blk_f64
#define GC_VT gc_v2d
#define GC_VN 2
#define GC_VT_REST
#define GC_TRANSPOSE GC_TRANSPOSE2
#include "gemm.c"
#undef GC_T
#undef GC_SFX
#undef GC_UKR
#undef GC_BLK
#undef GC_VT
#undef GC_VN
#undef GC_VT_REST
#undef GC_TRANSPOSE

#else /* type-generic body, T = GC_T */

typedef struct {
    const GC_T *a, *b;
    GC_T *c;
    ptrdiff_t m, n, k;
    int ta, tb;
    GC_T alpha, beta;
    const GC_T *bias;
    int relu, act_row; /* act_row: UNARY_* applied per tile row after the kernel, or -1 */
    int ct;            /* C is stored transposed: element (i, j) at c[j*m + i] (swapped mode) */
    int bdirect;       /* full B panels are read in place (row-major B, small) instead of packed */
    int mr, nr;
    ptrdiff_t mc, kc, nc;
    GC_T *apack[2]; /* double-buffered A block, mc x kc each */
    GC_T *bpack;    /* one kc x nc B block per thread */
    ptrdiff_t bstride;
    gc_barrier bar;
    /* batch mode: items spread over the threads */
    ptrdiff_t batch, sa, sb, sc;
    ptrdiff_t slot; /* per-thread workspace elements in batch mode */
} GC_FN(gemm_job);

/* One packed panel of width w (mr for A, nr for B) over kb steps: d[p*w + i] = alpha * X(p, i)
 * for i < valid, 0 for valid <= i < w, where X(p, i) = src[p*ld + i] (trans == 0: the panel's
 * rows are contiguous in memory) or src[i*ld + p] (trans == 1: it is stored transposed; moved
 * with 4x4 (float) / 2x2 (double) register transposes). */
/* rows rows (< GC_VN) of lanes from x[q] to d[(p + q) * w + i] (constant-size moves). */
static inline void GC_FN(store_lanes)(GC_T *restrict d, const GC_VT *x, int rows)
{
    switch (rows) {
    case 1: memcpy(d, x, sizeof(GC_T)); break;
    case 2: memcpy(d, x, 2 * sizeof(GC_T)); break;
    default: memcpy(d, x, 3 * sizeof(GC_T)); break;
    }
}

static void GC_FN(pack_panel)(GC_T *restrict d, const GC_T *restrict src, ptrdiff_t ld, int w,
                              ptrdiff_t valid, ptrdiff_t kb, GC_T alpha, int trans)
{
    const int scale = alpha != (GC_T)1;
    const GC_VT va = {alpha, alpha GC_VT_REST};
    if (!trans) {
        /* rows of w: whole vectors, then the tail */
        const ptrdiff_t vend = valid / GC_VN * GC_VN;
        for (ptrdiff_t p = 0; p < kb; p++) {
            const GC_T *restrict s = src + p * ld;
            GC_T *restrict dp = d + p * w;
            for (ptrdiff_t i = 0; i < vend; i += GC_VN) {
                GC_VT x;
                memcpy(&x, s + i, sizeof x);
                if (scale)
                    x *= va;
                memcpy(dp + i, &x, sizeof x);
            }
            for (ptrdiff_t i = vend; i < valid; i++)
                dp[i] = alpha * s[i];
            for (ptrdiff_t i = valid; i < w; i++)
                dp[i] = (GC_T)0;
        }
        return;
    }
    /* stored transposed: GC_VN x GC_VN register transposes */
    ptrdiff_t i = 0;
    const ptrdiff_t pend = kb / GC_VN * GC_VN;
    for (; i + GC_VN <= valid; i += GC_VN) {
        const GC_T *restrict r = src + i * ld;
        for (ptrdiff_t p = 0; p < pend; p += GC_VN) {
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
        for (ptrdiff_t p = pend; p < kb; p++)
            for (int q = 0; q < GC_VN; q++)
                d[p * w + i + q] = alpha * r[q * ld + p];
    }
    if (i < valid) { /* fewer than GC_VN rows left: zero vectors for the missing ones */
        const int rows = (int)(valid - i);
        const GC_T *restrict r = src + i * ld;
        for (ptrdiff_t p = 0; p < pend; p += GC_VN) {
            GC_VT x[GC_VN] = {{0}};
            for (int q = 0; q < rows; q++) {
                memcpy(&x[q], r + q * ld + p, sizeof x[q]);
                if (scale)
                    x[q] *= va;
            }
            GC_TRANSPOSE(x);
            for (int q = 0; q < GC_VN; q++)
                GC_FN(store_lanes)(d + (p + q) * w + i, &x[q], rows);
        }
        for (ptrdiff_t p = pend; p < kb; p++)
            for (int q = 0; q < rows; q++)
                d[p * w + i + q] = alpha * r[q * ld + p];
        i = valid;
    }
    for (; i < w; i++)
        for (ptrdiff_t p = 0; p < kb; p++)
            d[p * w + i] = (GC_T)0;
}

/* Packs panels [p0, p1) of the A block rows [ic, ic + mb) x cols [pc, pc + kb) of op(A), times
 * alpha; panel q holds A[ic + q*mr + i, pc + p] at dst[q*mr*kb + p*mr + i], zero past row mb. */
static void GC_FN(pack_a)(GC_T *restrict dst, const GC_T *restrict a, ptrdiff_t m, ptrdiff_t k,
                          int ta, GC_T alpha, ptrdiff_t ic, ptrdiff_t mb, ptrdiff_t pc,
                          ptrdiff_t kb, int mr, ptrdiff_t p0, ptrdiff_t p1)
{
    for (ptrdiff_t q = p0; q < p1; q++) {
        const ptrdiff_t r0 = ic + q * mr;
        const ptrdiff_t mv = (mb - q * mr < mr) ? mb - q * mr : mr;
        if (!ta) /* A row-major m x k: A[i, p] = a[i*k + p] */
            GC_FN(pack_panel)(dst + q * mr * kb, a + r0 * k + pc, k, mr, mv, kb, alpha, 1);
        else /* A stored k x m: A[i, p] = a[p*m + i] */
            GC_FN(pack_panel)(dst + q * mr * kb, a + pc * m + r0, m, mr, mv, kb, alpha, 0);
    }
}

/* Packs the B block rows [pc, pc + kb) x cols [jc, jc + nb) of op(B): panel q holds
 * B[pc + p, jc + q*nr + j] at dst[q*nr*kb + p*nr + j], zero past column nb. */
static void GC_FN(pack_b)(GC_T *restrict dst, const GC_T *restrict b, ptrdiff_t n, ptrdiff_t k,
                          int tb, ptrdiff_t pc, ptrdiff_t kb, ptrdiff_t jc, ptrdiff_t nb, int nr)
{
    const ptrdiff_t np = (nb + nr - 1) / nr;
    for (ptrdiff_t q = 0; q < np; q++) {
        const ptrdiff_t c0 = jc + q * nr;
        const ptrdiff_t nv = (nb - q * nr < nr) ? nb - q * nr : nr;
        if (!tb) /* B row-major k x n: B[p, j] = b[p*n + j] */
            GC_FN(pack_panel)(dst + q * nr * kb, b + pc * n + c0, n, nr, nv, kb, (GC_T)1, 0);
        else /* B stored n x k: B[p, j] = b[j*k + p] */
            GC_FN(pack_panel)(dst + q * nr * kb, b + c0 * k + pc, k, nr, nv, kb, (GC_T)1, 1);
    }
}

/* One MR x NR tile at c (mv <= mr rows, nv <= nr columns inside the matrix).  In swapped mode
 * (J->ct) the tile is C^T: element (i, j) lives at c[j*ldc + i] and the bias is per row. */
static inline void GC_FN(gemm_tile)(const GC_FN(gemm_job) * J, const GC_T *ap, const GC_T *bp,
                                    ptrdiff_t ldb, ptrdiff_t kb, GC_T *c, ptrdiff_t ldc,
                                    ptrdiff_t mv, ptrdiff_t nv, GC_T beta, const GC_T *bias,
                                    int last)
{
    const int mr = J->mr, nr = J->nr;
    const int relu = last && J->relu;
    bias = last ? bias : NULL;
    if (J->ct) {
        _Alignas(64) GC_T t[GC_TILE_MAX];
        if (beta != (GC_T)0) {
            for (ptrdiff_t i = 0; i < mr * nr; i++)
                t[i] = (GC_T)0;
            for (ptrdiff_t j = 0; j < nv; j++)
                for (ptrdiff_t i = 0; i < mv; i++)
                    t[i * nr + j] = c[j * ldc + i];
        }
        gc_isa.GC_UKR(kb, ap, bp, ldb, t, nr, beta, NULL, 0);
        if (last) {
            for (ptrdiff_t i = 0; i < mv; i++) {
                GC_T *row = t + i * nr;
                if (bias)
                    for (ptrdiff_t j = 0; j < nv; j++)
                        row[j] += bias[i];
                if (relu)
                    for (ptrdiff_t j = 0; j < nv; j++)
                        row[j] = row[j] <= (GC_T)0 ? (GC_T)0 : row[j];
                if (J->act_row >= 0)
                    GC_FN(gc_unary)(J->act_row, row, row, nv);
            }
        }
        for (ptrdiff_t j = 0; j < nv; j++)
            for (ptrdiff_t i = 0; i < mv; i++)
                c[j * ldc + i] = t[i * nr + j];
        return;
    }
    if (mv == mr && nv == nr) {
        gc_isa.GC_UKR(kb, ap, bp, ldb, c, ldc, beta, bias, relu);
    } else {
        _Alignas(64) GC_T t[GC_TILE_MAX];
        _Alignas(64) GC_T tbias[GC_NR_MAX];
        if (beta != (GC_T)0) {
            for (ptrdiff_t i = 0; i < mr; i++)
                for (ptrdiff_t j = 0; j < nr; j++)
                    t[i * nr + j] = (i < mv && j < nv) ? c[i * ldc + j] : (GC_T)0;
        }
        if (bias) {
            for (ptrdiff_t j = 0; j < nr; j++)
                tbias[j] = j < nv ? bias[j] : (GC_T)0;
        }
        gc_isa.GC_UKR(kb, ap, bp, ldb, t, nr, beta, bias ? tbias : NULL, relu);
        for (ptrdiff_t i = 0; i < mv; i++)
            for (ptrdiff_t j = 0; j < nv; j++)
                c[i * ldc + j] = t[i * nr + j];
    }
    if (last && J->act_row >= 0) {
        for (ptrdiff_t i = 0; i < mv; i++)
            GC_FN(gc_unary)(J->act_row, c + i * ldc, c + i * ldc, nv);
    }
}

/* The thread grid tm x tn for nt threads: the fewest tiles for the busiest thread, preferring
 * to split N (a split of M makes each of the tm threads pack the same B block). */
static void GC_FN(gemm_grid)(const GC_FN(gemm_job) * J, int nt, int *tm, int *tn)
{
    const ptrdiff_t pm = (((J->m < J->mc) ? J->m : J->mc) + J->mr - 1) / J->mr;
    const ptrdiff_t pn = (J->n + J->nr - 1) / J->nr;
    ptrdiff_t best = -1;
    *tm = 1;
    *tn = nt;
    for (int cn = nt; cn >= 1; cn--) {
        if (nt % cn)
            continue;
        const int cm = nt / cn;
        /* busiest thread: tiles, plus a little for the duplicated B packing when cm > 1 */
        const ptrdiff_t w = ((pm + cm - 1) / cm) * ((pn + cn - 1) / cn) * 8 + (cm > 1 ? pn : 0);
        if (best < 0 || w < best) {
            best = w;
            *tm = cm;
            *tn = cn;
        }
    }
}

/* One GEMM (one batch item) over nt threads of a region; tid is this thread. */
static void GC_FN(gemm_body)(const GC_FN(gemm_job) * J, const GC_T *a, const GC_T *b, GC_T *c,
                             GC_T *apack0, GC_T *apack1, GC_T *bbuf, gc_barrier *bar, int tid,
                             int nt)
{
    const ptrdiff_t m = J->m, n = J->n, k = J->k;
    const int mr = J->mr, nr = J->nr;
    int tm = 1, tn = 1;
    if (nt > 1)
        GC_FN(gemm_grid)(J, nt, &tm, &tn);
    const int ti = tid / tn, tj = tid % tn;
    ptrdiff_t n_lo, n_hi;
    gc_split(n, nr, tj, tn, &n_lo, &n_hi);
    int step = 0;
    for (ptrdiff_t ic = 0; ic < m; ic += J->mc) {
        const ptrdiff_t mb = (m - ic < J->mc) ? m - ic : J->mc;
        const ptrdiff_t npan = (mb + mr - 1) / mr;
        for (ptrdiff_t pc = 0; pc < k; pc += J->kc, step++) {
            const ptrdiff_t kb = (k - pc < J->kc) ? k - pc : J->kc;
            GC_T *ablk = (step & 1) ? apack1 : apack0;
            ptrdiff_t q0, q1;
            gc_split(npan, 1, tid, nt, &q0, &q1);
            GC_FN(pack_a)(ablk, a, m, k, J->ta, J->alpha, ic, mb, pc, kb, mr, q0, q1);
            gc_barrier_wait(bar, nt);
            gc_split(npan, 1, ti, tm, &q0, &q1);
            if (q0 >= q1)
                continue;
            const int last = pc + kb >= k;
            const GC_T beta = pc == 0 ? J->beta : (GC_T)1;
            for (ptrdiff_t jc = n_lo; jc < n_hi; jc += J->nc) {
                const ptrdiff_t nb = (n_hi - jc < J->nc) ? n_hi - jc : J->nc;
                const ptrdiff_t nfull = J->bdirect ? nb / nr * nr : 0; /* read in place */
                if (nb > nfull)
                    GC_FN(pack_b)(bbuf + nfull * kb, b, n, k, J->tb, pc, kb, jc + nfull,
                                  nb - nfull, nr);
                for (ptrdiff_t q = q0; q < q1; q++) {
                    const ptrdiff_t i0 = ic + q * mr;
                    const ptrdiff_t mv = (m - i0 < mr) ? m - i0 : mr;
                    const GC_T *ap = ablk + q * mr * kb;
                    for (ptrdiff_t j = 0; j < nb; j += nr) {
                        const ptrdiff_t nv = (nb - j < nr) ? nb - j : nr;
                        const GC_T *bp = j < nfull ? b + pc * n + jc + j : bbuf + j * kb;
                        const ptrdiff_t ldb = j < nfull ? n : nr;
                        if (J->ct)
                            GC_FN(gemm_tile)(J, ap, bp, ldb, kb, c + (jc + j) * m + i0, m, mv,
                                             nv, beta, J->bias ? J->bias + i0 : NULL, last);
                        else
                            GC_FN(gemm_tile)(J, ap, bp, ldb, kb, c + i0 * n + jc + j, n, mv,
                                             nv, beta, J->bias ? J->bias + jc + j : NULL, last);
                    }
                }
            }
        }
    }
}

static void GC_FN(gemm_task)(void *ctx, int tid, int nt)
{
    GC_FN(gemm_job) *J = (GC_FN(gemm_job) *)ctx;
    GC_FN(gemm_body)(J, J->a, J->b, J->c, J->apack[0], J->apack[1],
                     J->bpack + tid * J->bstride, &J->bar, tid, nt);
}

/* Batch mode: thread tid runs items [lo, hi) alone, with its own slot of the workspace. */
static void GC_FN(gemm_batch_task)(void *ctx, int tid, int nt)
{
    GC_FN(gemm_job) *J = (GC_FN(gemm_job) *)ctx;
    ptrdiff_t lo, hi;
    gc_split(J->batch, 1, tid, nt, &lo, &hi);
    const ptrdiff_t asz = J->mc * J->kc;
    GC_T *ws = J->apack[0] + tid * J->slot;
    for (ptrdiff_t i = lo; i < hi; i++)
        GC_FN(gemm_body)(J, J->a + i * J->sa, J->b + i * J->sb, J->c + i * J->sc, ws, ws + asz,
                         ws + 2 * asz, NULL, 0, 1);
}

/* C = act(beta * C + bias) for one item (k == 0 or alpha == 0: A and B are not read). */
static void GC_FN(gemm_scale)(GC_T *c, ptrdiff_t m, ptrdiff_t n, GC_T beta, const GC_T *bias,
                              int act)
{
    for (ptrdiff_t i = 0; i < m; i++) {
        GC_T *row = c + i * n;
        if (beta == (GC_T)0) {
            for (ptrdiff_t j = 0; j < n; j++)
                row[j] = (GC_T)0;
        } else if (beta != (GC_T)1) {
            for (ptrdiff_t j = 0; j < n; j++)
                row[j] *= beta;
        }
        if (bias)
            for (ptrdiff_t j = 0; j < n; j++)
                row[j] += bias[j];
        if (act >= 0)
            GC_FN(gc_unary)(act, row, row, n);
    }
}

static ptrdiff_t GC_FN(round_up)(ptrdiff_t v, ptrdiff_t r)
{
    return (v + r - 1) / r * r;
}

/* Fraction of a dimension of v elements that tiles of r use. */
static double GC_FN(tile_use)(ptrdiff_t v, ptrdiff_t r)
{
    return (double)v / (double)GC_FN(round_up)(v, r);
}

int GC_FN(gc_gemm_ex)(const GC_T *a, const GC_T *b, GC_T *c, ptrdiff_t batch, ptrdiff_t m,
                      ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b, GC_T alpha, GC_T beta,
                      ptrdiff_t sa, ptrdiff_t sb, ptrdiff_t sc, const GC_T *bias, int act)
{
    if (batch <= 0 || m <= 0 || n <= 0)
        return 0;
    if (k == 0 || alpha == (GC_T)0) {
        for (ptrdiff_t i = 0; i < batch; i++)
            GC_FN(gemm_scale)(c + i * sc, m, n, beta, bias, act);
        return 0;
    }
    GC_FN(gemm_job) J;
    memset(&J, 0, sizeof J);
    /* Swapped mode computes C^T = op(B)^T op(A)^T when that wastes much less of the register
     * tile (n small, m large: the long dimension goes along the vectors). */
    const double use = GC_FN(tile_use)(m, GC_BLK.mr) * GC_FN(tile_use)(n, GC_BLK.nr);
    const double use_t = GC_FN(tile_use)(n, GC_BLK.mr) * GC_FN(tile_use)(m, GC_BLK.nr);
    if (use_t > 1.5 * use) {
        const GC_T *t = a;
        a = b;
        b = t;
        const ptrdiff_t ts = sa;
        sa = sb;
        sb = ts;
        const int tt = trans_a;
        trans_a = !trans_b;
        trans_b = !tt;
        const ptrdiff_t tm = m;
        m = n;
        n = tm;
        J.ct = 1;
    }
    J.m = m;
    J.n = n;
    J.k = k;
    J.ta = trans_a;
    J.tb = trans_b;
    J.alpha = alpha;
    J.beta = beta;
    J.bias = bias;
    J.relu = act == GC_UNARY_RELU;
    J.act_row = (act >= 0 && act != GC_UNARY_RELU) ? act : -1;
    J.mr = GC_BLK.mr;
    J.nr = GC_BLK.nr;
    /* B read in place when it is row-major and small (cache resident; packing would cost about
     * as much as using it) */
    J.bdirect = !trans_b && (double)k * (double)n * sizeof(GC_T) <= GC_BDIRECT_BYTES;
    /* K blocks of near-equal size; M and N blocks no larger than the matrix */
    const ptrdiff_t nkb = (k + GC_BLK.kc - 1) / GC_BLK.kc;
    J.kc = GC_FN(round_up)((k + nkb - 1) / nkb, 8);
    J.mc = GC_FN(round_up)(m, J.mr) < GC_BLK.mc ? GC_FN(round_up)(m, J.mr) : GC_BLK.mc;
    J.nc = GC_FN(round_up)(n, J.nr) < GC_BLK.nc ? GC_FN(round_up)(n, J.nr) : GC_BLK.nc;
    const ptrdiff_t asz = J.mc * J.kc, bsz = J.nc * J.kc;
    const double flops = 2.0 * (double)m * (double)n * (double)k;
    const int nt_item = gc_threads_for(flops, GC_GEMM_GRAIN);
    const int independent = sc >= m * n;

    if (batch > 1 && independent && nt_item < gc_pool_size()) {
        int nt = gc_threads_for(flops * (double)batch, GC_GEMM_GRAIN);
        if (nt > batch)
            nt = (int)batch;
        if (nt > 1) {
            J.slot = GC_FN(round_up)(2 * asz + bsz, 64);
            GC_T *ws = (GC_T *)gc_scratch(sizeof(GC_T) * (size_t)(J.slot * nt));
            if (!ws)
                return -1;
            J.a = a;
            J.b = b;
            J.c = c;
            J.batch = batch;
            J.sa = sa;
            J.sb = sb;
            J.sc = sc;
            J.apack[0] = ws;
            gc_parallel(GC_FN(gemm_batch_task), &J, nt);
            return 0;
        }
    }
    const ptrdiff_t bstride = GC_FN(round_up)(bsz, 64);
    GC_T *ws = (GC_T *)gc_scratch(sizeof(GC_T) * (size_t)(2 * GC_FN(round_up)(asz, 64) +
                                                          bstride * nt_item));
    if (!ws)
        return -1;
    J.apack[0] = ws;
    J.apack[1] = ws + GC_FN(round_up)(asz, 64);
    J.bpack = ws + 2 * GC_FN(round_up)(asz, 64);
    J.bstride = bstride;
    for (ptrdiff_t i = 0; i < batch; i++) {
        J.a = a + i * sa;
        J.b = b + i * sb;
        J.c = c + i * sc;
        gc_barrier_init(&J.bar);
        if (nt_item > 1)
            gc_parallel(GC_FN(gemm_task), &J, nt_item);
        else
            GC_FN(gemm_task)(&J, 0, 1);
    }
    return 0;
}

int GC_FN(gc_gemm)(const GC_T *a, const GC_T *b, GC_T *c, ptrdiff_t batch, ptrdiff_t m,
                   ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b, GC_T alpha, GC_T beta,
                   ptrdiff_t sa, ptrdiff_t sb, ptrdiff_t sc)
{
    return GC_FN(gc_gemm_ex)(a, b, c, batch, m, n, k, trans_a, trans_b, alpha, beta, sa, sb, sc,
                             NULL, -1);
}

#endif

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

#define GC_T float
#define GC_SFX f32
#define GC_UKR ukr_f32
#define GC_BLK gc_blk_f32
#include "gemm.c"
#undef GC_T
#undef GC_SFX
#undef GC_UKR
#undef GC_BLK

#define GC_T double
#define GC_SFX f64
#define GC_UKR ukr_f64
#define GC_BLK gc_blk_f64
#include "gemm.c"
#undef GC_T
#undef GC_SFX
#undef GC_UKR
#undef GC_BLK

#else /* type-generic body, T = GC_T */

typedef struct {
    const GC_T *a, *b;
    GC_T *c;
    ptrdiff_t m, n, k;
    int ta, tb;
    GC_T alpha, beta;
    const GC_T *bias;
    int relu, act_row; /* act_row: UNARY_* applied per tile row after the kernel, or -1 */
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

/* Packs panels [p0, p1) of the A block rows [ic, ic + mb) x cols [pc, pc + kb) of op(A), times
 * alpha; panel q holds A[ic + q*mr + i, pc + p] at dst[q*mr*kb + p*mr + i], zero past row mb. */
static void GC_FN(pack_a)(GC_T *restrict dst, const GC_T *restrict a, ptrdiff_t m, ptrdiff_t k,
                          int ta, GC_T alpha, ptrdiff_t ic, ptrdiff_t mb, ptrdiff_t pc,
                          ptrdiff_t kb, int mr, ptrdiff_t p0, ptrdiff_t p1)
{
    for (ptrdiff_t q = p0; q < p1; q++) {
        GC_T *restrict d = dst + q * mr * kb;
        const ptrdiff_t r0 = ic + q * mr;
        const ptrdiff_t mv = (mb - q * mr < mr) ? mb - q * mr : mr;
        if (!ta) { /* A row-major m x k: row i is contiguous */
            for (ptrdiff_t i = 0; i < mv; i++) {
                const GC_T *restrict src = a + (r0 + i) * k + pc;
                if (alpha == (GC_T)1) {
                    for (ptrdiff_t p = 0; p < kb; p++)
                        d[p * mr + i] = src[p];
                } else {
                    for (ptrdiff_t p = 0; p < kb; p++)
                        d[p * mr + i] = alpha * src[p];
                }
            }
            for (ptrdiff_t i = mv; i < mr; i++)
                for (ptrdiff_t p = 0; p < kb; p++)
                    d[p * mr + i] = (GC_T)0;
        } else { /* A stored k x m: a column of op(A) is contiguous */
            for (ptrdiff_t p = 0; p < kb; p++) {
                const GC_T *restrict src = a + (pc + p) * m + r0;
                GC_T *restrict dp = d + p * mr;
                if (alpha == (GC_T)1) {
                    for (ptrdiff_t i = 0; i < mv; i++)
                        dp[i] = src[i];
                } else {
                    for (ptrdiff_t i = 0; i < mv; i++)
                        dp[i] = alpha * src[i];
                }
                for (ptrdiff_t i = mv; i < mr; i++)
                    dp[i] = (GC_T)0;
            }
        }
    }
}

/* Packs the B block rows [pc, pc + kb) x cols [jc, jc + nb) of op(B): panel q holds
 * B[pc + p, jc + q*nr + j] at dst[q*nr*kb + p*nr + j], zero past column nb. */
static void GC_FN(pack_b)(GC_T *restrict dst, const GC_T *restrict b, ptrdiff_t n, ptrdiff_t k,
                          int tb, ptrdiff_t pc, ptrdiff_t kb, ptrdiff_t jc, ptrdiff_t nb, int nr)
{
    const ptrdiff_t np = (nb + nr - 1) / nr;
    for (ptrdiff_t q = 0; q < np; q++) {
        GC_T *restrict d = dst + q * nr * kb;
        const ptrdiff_t c0 = jc + q * nr;
        const ptrdiff_t nv = (nb - q * nr < nr) ? nb - q * nr : nr;
        if (!tb) { /* B row-major k x n */
            if (nv == nr) {
                for (ptrdiff_t p = 0; p < kb; p++)
                    memcpy(d + p * nr, b + (pc + p) * n + c0, sizeof(GC_T) * (size_t)nr);
            } else {
                for (ptrdiff_t p = 0; p < kb; p++) {
                    const GC_T *restrict src = b + (pc + p) * n + c0;
                    GC_T *restrict dp = d + p * nr;
                    for (ptrdiff_t j = 0; j < nv; j++)
                        dp[j] = src[j];
                    for (ptrdiff_t j = nv; j < nr; j++)
                        dp[j] = (GC_T)0;
                }
            }
        } else { /* B stored n x k: a column of op(B) is contiguous */
            for (ptrdiff_t j = 0; j < nv; j++) {
                const GC_T *restrict src = b + (c0 + j) * k + pc;
                for (ptrdiff_t p = 0; p < kb; p++)
                    d[p * nr + j] = src[p];
            }
            for (ptrdiff_t j = nv; j < nr; j++)
                for (ptrdiff_t p = 0; p < kb; p++)
                    d[p * nr + j] = (GC_T)0;
        }
    }
}

/* One MR x NR tile at c (mv <= mr rows, nv <= nr columns inside the matrix). */
static inline void GC_FN(gemm_tile)(const GC_FN(gemm_job) * J, const GC_T *ap, const GC_T *bp,
                                    ptrdiff_t kb, GC_T *c, ptrdiff_t ldc, ptrdiff_t mv,
                                    ptrdiff_t nv, GC_T beta, const GC_T *bias, int last)
{
    const int mr = J->mr, nr = J->nr;
    const int relu = last && J->relu;
    bias = last ? bias : NULL;
    if (mv == mr && nv == nr) {
        gc_isa.GC_UKR(kb, ap, bp, c, ldc, beta, bias, relu);
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
        gc_isa.GC_UKR(kb, ap, bp, t, nr, beta, bias ? tbias : NULL, relu);
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
                GC_FN(pack_b)(bbuf, b, n, k, J->tb, pc, kb, jc, nb, nr);
                for (ptrdiff_t q = q0; q < q1; q++) {
                    const ptrdiff_t i0 = ic + q * mr;
                    const ptrdiff_t mv = (m - i0 < mr) ? m - i0 : mr;
                    const GC_T *ap = ablk + q * mr * kb;
                    for (ptrdiff_t j = 0; j < nb; j += nr) {
                        const ptrdiff_t nv = (nb - j < nr) ? nb - j : nr;
                        GC_FN(gemm_tile)(J, ap, bbuf + j * kb, kb, c + i0 * n + jc + j, n, mv,
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

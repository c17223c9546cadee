/* Batched GEMM in the BLIS / GotoBLAS structure, with a fused bias + activation epilogue:
 *   C_i = act(alpha * op(A_i) @ op(B_i) + beta * C_i + bias)   for i < batch, in order.
 *
 * Shared by every ISA (only the register micro-kernel, gc_isa.ukr_*, is ISA-specific):
 *
 *   for ic in M by MC:                      A block  MC x KC  (packed once, shared, ~L3)
 *     for pc in K by KC:
 *       for each compute unit (NC-or-less columns x a group of MR-row panels):
 *         pack its B block  KC x cols  (~L2)
 *         for ir over the unit's MR-row panels of the A block:
 *           for jr over the NR-column panels of the B block:
 *             micro-kernel: MR x NR tile of C  (the A micro-panel MR x KC stays in L1)
 *
 * Packing folds the transpose flags in (and alpha, into A) and zero-pads the edge panels.  The
 * A block is double-buffered.  Threads claim work through atomic counters, per (ic, pc) step:
 * first the MR-row panels of the A block to pack, then compute units (a chunk of N columns times
 * a group of MR panels, each packing its own B block); a thread only waits for work that others
 * have claimed and are doing (see gemm_item), so a descheduled worker holds nobody up.  Units lie on the global MR x NR
 * tile grid and every C element is summed over k in the same order, so results are bitwise
 * identical for any number of threads.  beta applies on the first K block, the bias /
 * activation after the last one, while the tile is in registers (bias, relu) or in L1 (the
 * other activations, applied per tile row with the vectorized unary functions).
 *
 * Batch items with a C stride of at least m*n are independent; when one item is too small to
 * split, the items are spread over the threads instead.  Items whose C overlap (sc == 0
 * accumulates) run in order.
 *
 * Few rows of A (m <= GC_GEMV_MAX_M_*: a Linear layer at batch 1) take gemm_small_m instead: B is
 * read where it lies by the ISA's gemv kernels, no packing (see there). */
#ifndef GC_T

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GC_SPIN_PAUSE() _mm_pause()
#else
#define GC_SPIN_PAUSE() ((void)0)
#endif
#include "kernels.h"
#include "vec.h"

/* Work counters of one (ic, pc) step, on their own cache line. */
typedef struct {
    _Alignas(64) atomic_int a_next; /* A panels claimed */
    atomic_int a_done;              /* A panels packed */
    atomic_int u_next;              /* compute units claimed */
    atomic_int u_done;              /* compute units done */
} gc_gemm_step;

/* Spins until *v >= want (the awaited work is being done by a running thread). */
static void gc_wait_at_least(atomic_int *v, int want)
{
    for (int i = 0; atomic_load_explicit(v, memory_order_acquire) < want; i++) {
        if (i < 20000)
            GC_SPIN_PAUSE();
        else
            sched_yield();
    }
}

/* Minimum work per thread, in flops (a parallel region costs a few microseconds). */
#define GC_GEMM_GRAIN 0.25e6
/* An A block up to this size stays in L2: compute units may then split N into narrow chunks. */
#define GC_ABLOCK_SMALL (256.0 * 1024)
/* Row-major A up to this size is read in place by the micro-kernel instead of being packed. */
#define GC_ADIRECT_BYTES (256.0 * 1024)
/* Row-major B up to this size is read in place by the micro-kernel instead of being packed. */
#define GC_BDIRECT_BYTES (64.0 * 1024)
/* Small m (the rows of A): up to this many rows the product reads B where it lies (gemm_small_m:
 * gemv_t when B is stored n x k, gemv_n when k x n) instead of packing it.  Measured on AVX-512
 * (Zen 4, 2 threads; n x k = 2048 x 2048, 512 x 512, 4096 x 256, 256 x 4096, 128 x 128), both
 * paths timed for m = 4 .. 32: the streaming path is faster at every m <= 16 for both layouts
 * (m = 1: 2048 x 2048 ~120 us against ~1060 us; m = 16: 1030 / 1200 us against 1920 / 2170),
 * ties at 128 x 128 from m ~ 16 (trans_b) / ~24, and loses from m ~ 28 at 2048 x 2048 with
 * trans_b (the blocked path packs B once for all rows; here B is read once per 8 rows). */
#define GC_GEMV_MAX_M_T 16
#define GC_GEMV_MAX_M_N 24
/* columns per work chunk (multiples of every ISA's widest step: 8 rows / 8 vectors of 16) */
#define GC_GEMV_CW_T 64
#define GC_GEMV_CW_N 128
/* gemv_n (B stored k x n) sweeps blocks of this many rows of B across a chunk's columns (C
 * accumulates between them), rather than a narrow strip of columns down all k rows (2048 x 2048,
 * m = 1, one thread: ~480 -> ~340 us; 32 .. 256 rows measure alike) */
#define GC_GEMV_KB_N 64
/* cost model for the thread count (gc_parallel_range: one thread below ~50 us): ns per byte of B
 * and per multiply-add.  It overstates the streaming time (one AVX-512 thread reads ~65 GB/s, ~55
 * G multiply-adds/s) so that a 512 x 512 weight at m = 1, ~10 us on one thread, still splits:
 * ~6.4 us on two (the region costs a few us, the second core's share of L2 / L3 bandwidth is
 * worth more) */
#define GC_GEMV_NS_BYTE 0.05
#define GC_GEMV_NS_FMA 0.02

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
#define GC_GEMV_T gemv_t_f32
#define GC_GEMV_N gemv_n_f32
#define GC_UKR ukr_f32
#define GC_UKR_DA ukr_da_f32
#define GC_BLK gc_blk_f32
#define GC_VT gc_v4f
#define GC_VN 4
#define GC_VT_REST , alpha, alpha
#define GC_TRANSPOSE GC_TRANSPOSE4
#include "gemm.c"
#undef GC_T
#undef GC_SFX
#undef GC_GEMV_T
#undef GC_GEMV_N
#undef GC_UKR
#undef GC_UKR_DA
#undef GC_BLK
#undef GC_VT
#undef GC_VN
#undef GC_VT_REST
#undef GC_TRANSPOSE

#define GC_T double
#define GC_SFX f64
#define GC_GEMV_T gemv_t_f64
#define GC_GEMV_N gemv_n_f64
#define GC_UKR ukr_f64
#define GC_UKR_DA ukr_da_f64
#define GC_BLK gc_blk_f64
#define GC_VT gc_v2d
#define GC_VN 2
#define GC_VT_REST
#define GC_TRANSPOSE GC_TRANSPOSE2
#include "gemm.c"
#undef GC_T
#undef GC_SFX
#undef GC_GEMV_T
#undef GC_GEMV_N
#undef GC_UKR
#undef GC_UKR_DA
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
    int adirect;       /* full A panels are read in place (row-major A, small) instead of packed */
    int mr, nr;
    ptrdiff_t mc, kc, nc;
    /* compute units of a step: ncu chunks of wn columns x nmu groups of gm MR-panels */
    ptrdiff_t wn, gm;
    int ncu, nmu;
    ptrdiff_t pn; /* NR panels across n */
    /* workspace: the A double buffer, one B block per participant (slot), the step counters;
     * in batch mode all of it per slot */
    GC_T *ws;
    ptrdiff_t asz, bsz, slot_elems;
    gc_gemm_step *steps;
    ptrdiff_t nsteps;
    /* batch mode */
    ptrdiff_t batch, sa, sb, sc;
    _Alignas(64) atomic_long next_item;
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
static inline void GC_FN(gemm_tile)(const GC_FN(gemm_job) * J, const GC_T *ap, ptrdiff_t lda,
                                    const GC_T *bp, ptrdiff_t ldb, ptrdiff_t kb, GC_T *c,
                                    ptrdiff_t ldc, ptrdiff_t mv, ptrdiff_t nv, GC_T beta,
                                    const GC_T *bias, int last)
{
    const int mr = J->mr, nr = J->nr;
    const int relu = last && J->relu;
    bias = last ? bias : NULL;
/* the micro-kernel on packed A (lda == 0) or on A in place */
#define GC_KERNEL(C, LDC, BETA, BIAS, RELU)                                                       \
    do {                                                                                          \
        if (lda)                                                                                  \
            gc_isa.GC_UKR_DA(kb, ap, lda, bp, ldb, C, LDC, J->alpha, BETA, BIAS, RELU);           \
        else                                                                                      \
            gc_isa.GC_UKR(kb, ap, bp, ldb, C, LDC, BETA, BIAS, RELU);                             \
    } while (0)
    if (J->ct) {
        _Alignas(64) GC_T t[GC_TILE_MAX];
        if (beta != (GC_T)0) {
            for (ptrdiff_t i = 0; i < mr * nr; i++)
                t[i] = (GC_T)0;
            for (ptrdiff_t j = 0; j < nv; j++)
                for (ptrdiff_t i = 0; i < mv; i++)
                    t[i * nr + j] = c[j * ldc + i];
        }
        GC_KERNEL(t, nr, beta, NULL, 0);
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
        GC_KERNEL(c, ldc, beta, bias, relu);
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
        GC_KERNEL(t, nr, beta, bias ? tbias : NULL, relu);
        for (ptrdiff_t i = 0; i < mv; i++)
            for (ptrdiff_t j = 0; j < nv; j++)
                c[i * ldc + j] = t[i * nr + j];
    }
    if (last && J->act_row >= 0) {
        for (ptrdiff_t i = 0; i < mv; i++)
            GC_FN(gc_unary)(J->act_row, c + i * ldc, c + i * ldc, nv);
    }
#undef GC_KERNEL
}

/* Compute unit u of the step at (ic, mb): MR panels [q0, q1) x columns [jc, jc + nb). */
static void GC_FN(gemm_unit)(const GC_FN(gemm_job) * J, const GC_T *a, const GC_T *b, GC_T *c,
                             const GC_T *ablk, GC_T *bbuf, ptrdiff_t ic, ptrdiff_t mb,
                             ptrdiff_t pc, ptrdiff_t kb, ptrdiff_t u)
{
    const ptrdiff_t m = J->m, n = J->n, k = J->k;
    const int mr = J->mr, nr = J->nr;
    const ptrdiff_t npan = (mb + mr - 1) / mr;
    const ptrdiff_t mg = u / J->ncu, cj = u % J->ncu;
    const ptrdiff_t q0 = mg * J->gm, q1 = (q0 + J->gm < npan) ? q0 + J->gm : npan;
    /* chunk cj: NR panels [p0, p1), the panels spread evenly over the chunks */
    const ptrdiff_t p0 = cj * J->pn / J->ncu, p1 = (cj + 1) * J->pn / J->ncu;
    const ptrdiff_t jc = p0 * nr;
    if (q0 >= q1 || jc >= n || p1 <= p0)
        return;
    const ptrdiff_t nb = (p1 * nr < n ? p1 * nr : n) - jc;
    const int last = pc + kb >= k;
    const GC_T beta = pc == 0 ? J->beta : (GC_T)1;
    const ptrdiff_t nfull = J->bdirect ? nb / nr * nr : 0; /* panels read in place */
    if (nb > nfull)
        GC_FN(pack_b)(bbuf + nfull * kb, b, n, k, J->tb, pc, kb, jc + nfull, nb - nfull, nr);
    for (ptrdiff_t q = q0; q < q1; q++) {
        const ptrdiff_t i0 = ic + q * mr;
        const ptrdiff_t mv = (m - i0 < mr) ? m - i0 : mr;
        const int da = J->adirect && mv == mr; /* A read in place */
        const GC_T *ap = da ? a + i0 * k + pc : ablk + q * mr * kb;
        const ptrdiff_t lda = da ? k : 0;
        for (ptrdiff_t j = 0; j < nb; j += nr) {
            const ptrdiff_t nv = (nb - j < nr) ? nb - j : nr;
            const GC_T *bp = j < nfull ? b + pc * n + jc + j : bbuf + j * kb;
            const ptrdiff_t ldb = j < nfull ? n : nr;
            if (J->ct)
                GC_FN(gemm_tile)(J, ap, lda, bp, ldb, kb, c + (jc + j) * m + i0, m, mv, nv,
                                 beta, J->bias ? J->bias + i0 : NULL, last);
            else
                GC_FN(gemm_tile)(J, ap, lda, bp, ldb, kb, c + i0 * n + jc + j, n, mv, nv,
                                 beta, J->bias ? J->bias + jc + j : NULL, last);
        }
    }
}

/* One GEMM (one batch item), run by every participant of a region: A panels and compute units
 * are claimed from the step counters (zeroed by the caller).  A thread waits (1) for the A block
 * of its step to be packed, (2) before packing into an A buffer, for the step that last used it,
 * (3) before computing on a K block after the first, for the previous K block's units (they
 * update the same C tiles).  Each wait points at earlier work that running threads have claimed
 * (a thread moves on only when every unit of a step is claimed): no deadlock, whoever joins
 * late or never. */
static void GC_FN(gemm_item)(const GC_FN(gemm_job) * J, const GC_T *a, const GC_T *b, GC_T *c,
                             GC_T *apack0, GC_T *apack1, GC_T *bbuf, gc_gemm_step *steps)
{
    const ptrdiff_t m = J->m, k = J->k;
    const int mr = J->mr;
    const int units = J->ncu * J->nmu;
    ptrdiff_t s = 0;
    for (ptrdiff_t ic = 0; ic < m; ic += J->mc) {
        const ptrdiff_t mb = (m - ic < J->mc) ? m - ic : J->mc;
        const int npan = (int)((mb + mr - 1) / mr);
        for (ptrdiff_t pc = 0; pc < k; pc += J->kc, s++) {
            const ptrdiff_t kb = (k - pc < J->kc) ? k - pc : J->kc;
            GC_T *ablk = (s & 1) ? apack1 : apack0;
            gc_gemm_step *st = &steps[s];
            for (int q; (q = atomic_fetch_add_explicit(&st->a_next, 1, memory_order_relaxed)) <
                        npan;) {
                if (!J->adirect || (q + 1) * mr > mb) { /* (in place: only the edge panel) */
                    if (s >= 2) /* step s - 2 used this A buffer */
                        gc_wait_at_least(&steps[s - 2].u_done, units);
                    GC_FN(pack_a)(ablk, a, m, k, J->ta, J->alpha, ic, mb, pc, kb, mr, q, q + 1);
                }
                atomic_fetch_add_explicit(&st->a_done, 1, memory_order_release);
            }
            gc_wait_at_least(&st->a_done, npan);
            if (pc > 0) /* the same C tiles: the previous K block must be added in first */
                gc_wait_at_least(&steps[s - 1].u_done, units);
            for (int u; (u = atomic_fetch_add_explicit(&st->u_next, 1, memory_order_relaxed)) <
                        units;) {
                GC_FN(gemm_unit)(J, a, b, c, ablk, bbuf, ic, mb, pc, kb, u);
                atomic_fetch_add_explicit(&st->u_done, 1, memory_order_release);
            }
        }
    }
}

static void GC_FN(gemm_body)(void *ctx, int slot)
{
    GC_FN(gemm_job) *J = (GC_FN(gemm_job) *)ctx;
    GC_FN(gemm_item)(J, J->a, J->b, J->c, J->ws, J->ws + J->asz,
                     J->ws + 2 * J->asz + slot * J->bsz, J->steps);
}

/* Batch mode: each participant claims whole items and runs them alone in its own slot. */
static void GC_FN(gemm_batch_body)(void *ctx, int slot)
{
    GC_FN(gemm_job) *J = (GC_FN(gemm_job) *)ctx;
    GC_T *ws = J->ws + slot * J->slot_elems;
    gc_gemm_step *steps = (gc_gemm_step *)(ws + 2 * J->asz + J->bsz);
    for (long i; (i = atomic_fetch_add_explicit(&J->next_item, 1, memory_order_relaxed)) <
                 J->batch;) {
        memset(steps, 0, sizeof(gc_gemm_step) * (size_t)J->nsteps);
        GC_FN(gemm_item)(J, J->a + i * J->sa, J->b + i * J->sb, J->c + i * J->sc, ws,
                         ws + J->asz, ws + 2 * J->asz, steps);
    }
}

/* ---- small m: the weight-streaming path --------------------------------------------------- */

/* With a few rows of A, C = A op(B) is bound by reading B once: packing B (the blocked path)
 * costs as much as the product.  These calls read B where it lies through the ISA's gemv
 * kernels (isa.h: gemv_t for B stored n x k, a dot product of contiguous rows per output; gemv_n
 * for B stored k x n, axpy over its rows), split over the threads by chunks of GC_GEMV_CW_*
 * columns (of every item of a batch at once when the items are independent).  A stored
 * transposed (k x m, m > 1) is copied row-major first (m*k elements).  Every element is computed
 * the same way in any chunk, so results do not depend on the thread count. */
typedef struct {
    const GC_T *a, *b;
    GC_T *c;
    ptrdiff_t m, n, k, lda, sa, sb, sc;
    ptrdiff_t cw, nch; /* columns per chunk, chunks per item */
    int tb, act;
    GC_T alpha, beta;
    const GC_T *bias;
} GC_FN(gemv_job);

/* chunks [lo, hi) of the flattened (item, column chunk) space */
static void GC_FN(gemv_range)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(gemv_job) *J = (const GC_FN(gemv_job) *)ctx;
    const ptrdiff_t m = J->m, n = J->n, k = J->k;
    for (ptrdiff_t u = lo; u < hi;) {
        const ptrdiff_t it = u / J->nch, ch0 = u % J->nch;
        /* the chunks of this item inside [lo, hi) in one call */
        const ptrdiff_t ch1 = (hi - u < J->nch - ch0) ? ch0 + (hi - u) : J->nch;
        const ptrdiff_t j0 = ch0 * J->cw, j1 = ch1 * J->cw < n ? ch1 * J->cw : n;
        const GC_T *a = J->a + it * J->sa, *b = J->b + it * J->sb;
        GC_T *c = J->c + it * J->sc + j0;
        if (J->tb)
            gc_isa.GC_GEMV_T(m, j1 - j0, k, a, J->lda, b + j0 * k, k, c, n, J->alpha, J->beta);
        else /* by blocks of rows of B, each swept across the chunk's columns */
            for (ptrdiff_t p0 = 0; p0 < k; p0 += GC_GEMV_KB_N)
                gc_isa.GC_GEMV_N(m, j1 - j0, k - p0 < GC_GEMV_KB_N ? k - p0 : GC_GEMV_KB_N,
                                 a + p0, J->lda, b + p0 * n + j0, n, c, n, J->alpha,
                                 p0 == 0 ? J->beta : (GC_T)1);
        if (J->bias || J->act >= 0) {
            for (ptrdiff_t i = 0; i < m; i++) {
                GC_T *row = c + i * n;
                if (J->bias)
                    for (ptrdiff_t j = 0; j < j1 - j0; j++)
                        row[j] += J->bias[j0 + j];
                if (J->act >= 0)
                    GC_FN(gc_unary)(J->act, row, row, j1 - j0);
            }
        }
        u += ch1 - ch0;
    }
}

static int GC_FN(gemm_small_m)(const GC_T *a, const GC_T *b, GC_T *c, ptrdiff_t batch,
                               ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b,
                               GC_T alpha, GC_T beta, ptrdiff_t sa, ptrdiff_t sb, ptrdiff_t sc,
                               const GC_T *bias, int act)
{
    GC_FN(gemv_job) J = {.a = a, .b = b, .c = c, .m = m, .n = n, .k = k, .lda = k, .sa = sa,
                         .sb = sb, .sc = sc, .tb = trans_b, .act = act, .alpha = alpha,
                         .beta = beta, .bias = bias};
    J.cw = trans_b ? GC_GEMV_CW_T : GC_GEMV_CW_N;
    J.nch = (n + J.cw - 1) / J.cw;
    /* single-thread time: B streamed from cache or memory, plus the multiply-adds */
    const double item_ns = (double)n * (double)k * (sizeof(GC_T) * GC_GEMV_NS_BYTE +
                                                    (double)m * GC_GEMV_NS_FMA);
    const int packed = trans_a && m > 1;
    if (!packed && (batch == 1 || sc >= m * n)) { /* one range over every item's chunks */
        gc_parallel_range(batch * J.nch, 1, item_ns * (double)batch, GC_FN(gemv_range), &J);
        return 0;
    }
    GC_T *ap = NULL;
    if (packed) {
        ap = (GC_T *)gc_scratch(sizeof(GC_T) * (size_t)(m * k));
        if (!ap)
            return -1;
    }
    for (ptrdiff_t i = 0; i < batch; i++) { /* in order (C stride 0 accumulates) */
        J.a = a + i * sa;
        if (packed) { /* A stored k x m: A[r, p] = a[p*m + r] */
            for (ptrdiff_t r = 0; r < m; r++)
                for (ptrdiff_t p = 0; p < k; p++)
                    ap[r * k + p] = J.a[p * m + r];
            J.a = ap;
        }
        J.b = b + i * sb;
        J.c = c + i * sc;
        gc_parallel_range(J.nch, 1, item_ns, GC_FN(gemv_range), &J);
    }
    return 0;
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

/* Compute units for `want` threads, about 3 per thread (claimed dynamically).  The N chunks stay
 * NC wide while the A block is large (each A micro-panel, reloaded per unit, then serves NC / NR
 * tiles) and the M panels are split into groups instead (each group packs its own copy of the B
 * block); when the A block is small (L2-resident) the N chunks narrow instead. */
static void GC_FN(gemm_units)(GC_FN(gemm_job) * J, int want)
{
    const ptrdiff_t nr = J->nr, mr = J->mr;
    const ptrdiff_t mb = (J->m < J->mc) ? J->m : J->mc;
    const ptrdiff_t pn = (J->n + nr - 1) / nr, pm = (mb + mr - 1) / mr;
    const ptrdiff_t per = J->nc / nr; /* panels per chunk at most */
    const ptrdiff_t target = want > 1 ? 3 * (ptrdiff_t)want : 1;
    ptrdiff_t ncu = (pn + per - 1) / per, nmu = 1;
    if (ncu < target) {
        if ((double)mb * (double)J->kc * sizeof(GC_T) > GC_ABLOCK_SMALL) {
            nmu = (target + ncu - 1) / ncu;
            if (nmu > (pm / 4 > 1 ? pm / 4 : 1)) /* groups of at least 4 panels */
                nmu = pm / 4 > 1 ? pm / 4 : 1;
        }
        if (ncu * nmu < target) {
            ncu = (target + nmu - 1) / nmu;
            if (ncu > pn)
                ncu = pn;
        }
    }
    ptrdiff_t wp = (pn + ncu - 1) / ncu; /* panels per chunk at most */
    ncu = (pn + wp - 1) / wp;
    /* Uneven chunks, or a count the threads do not divide: spread the panels evenly over a
     * multiple of the threads, so the units claimed dynamically add up to the same work per
     * thread (6 chunks of 6, 6, 6, 6, 6, 2 panels left one of two threads idle for a tenth of a
     * 512^3 product). */
    if (want > 1 && (ncu % want || pn % wp)) {
        if (ncu % want)
            ncu += want - ncu % want;
        if (ncu > pn)
            ncu = pn;
        wp = (pn + ncu - 1) / ncu;
    }
    const ptrdiff_t gm = (pm + nmu - 1) / nmu;
    J->wn = wp * nr;
    J->pn = pn;
    J->ncu = (int)ncu;
    J->gm = gm;
    J->nmu = (int)((pm + gm - 1) / gm);
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
    if (m <= (trans_b ? GC_GEMV_MAX_M_T : GC_GEMV_MAX_M_N))
        return GC_FN(gemm_small_m)(a, b, c, batch, m, n, k, trans_a, trans_b, alpha, beta, sa,
                                   sb, sc, bias, act);
    GC_FN(gemm_job) J;
    memset(&J, 0, sizeof J);
    /* Swapped mode computes C^T = op(B)^T op(A)^T when that wastes much less of the register
     * tile (n small, m large: the long dimension goes along the vectors), or when n is narrower
     * than one tile: every tile would then go through the padded edge path (64x512x10: 38 ->
     * 53 GFLOP/s swapped). */
    const double use = GC_FN(tile_use)(m, GC_BLK.mr) * GC_FN(tile_use)(n, GC_BLK.nr);
    const double use_t = GC_FN(tile_use)(n, GC_BLK.mr) * GC_FN(tile_use)(m, GC_BLK.nr);
    if (use_t > 1.5 * use || (n < GC_BLK.nr && m >= GC_BLK.nr && use_t > 1.2 * use)) {
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
    J.adirect = !trans_a && (double)m * (double)k * sizeof(GC_T) <= GC_ADIRECT_BYTES;
    /* K blocks of near-equal size; M and N blocks no larger than the matrix */
    const ptrdiff_t nkb = (k + GC_BLK.kc - 1) / GC_BLK.kc;
    J.kc = GC_FN(round_up)((k + nkb - 1) / nkb, 8);
    J.mc = GC_FN(round_up)(m, J.mr) < GC_BLK.mc ? GC_FN(round_up)(m, J.mr) : GC_BLK.mc;
    J.nc = GC_FN(round_up)(n, J.nr) < GC_BLK.nc ? GC_FN(round_up)(n, J.nr) : GC_BLK.nc;
    const double flops = 2.0 * (double)m * (double)n * (double)k;
    const int nt_item = gc_threads_for(flops, GC_GEMM_GRAIN);
    const int independent = sc >= m * n;
    int batch_mode = 0, want = nt_item;
    if (batch > 1 && independent && nt_item < gc_pool_size()) {
        const int nb = gc_threads_for(flops * (double)batch, GC_GEMM_GRAIN);
        if (nb > 1) {
            batch_mode = 1;
            want = nb < batch ? nb : (int)batch;
        }
    }
    GC_FN(gemm_units)(&J, batch_mode ? 1 : want);
    J.asz = GC_FN(round_up)(J.mc * J.kc, 64);
    J.bsz = GC_FN(round_up)(J.wn * J.kc, 64);
    J.nsteps = ((m + J.mc - 1) / J.mc) * ((k + J.kc - 1) / J.kc);
    const ptrdiff_t step_elems = GC_FN(round_up)(
        (ptrdiff_t)((sizeof(gc_gemm_step) * (size_t)J.nsteps + sizeof(GC_T) - 1) / sizeof(GC_T)),
        64);
    /* batch mode: per slot [A, A, B, steps]; else [A, A, B x want, steps] */
    J.slot_elems = 2 * J.asz + J.bsz + step_elems;
    const ptrdiff_t total = batch_mode ? J.slot_elems * want
                                       : 2 * J.asz + J.bsz * want + step_elems;
    GC_T *ws = (GC_T *)gc_scratch(sizeof(GC_T) * (size_t)total);
    if (!ws)
        return -1;
    J.ws = ws;
    if (batch_mode) {
        J.a = a;
        J.b = b;
        J.c = c;
        J.batch = batch;
        J.sa = sa;
        J.sb = sb;
        J.sc = sc;
        atomic_init(&J.next_item, 0);
        gc_region(GC_FN(gemm_batch_body), &J, want);
        return 0;
    }
    J.steps = (gc_gemm_step *)(ws + 2 * J.asz + J.bsz * want);
    for (ptrdiff_t i = 0; i < batch; i++) { /* in order (C stride 0 accumulates) */
        J.a = a + i * sa;
        J.b = b + i * sb;
        J.c = c + i * sc;
        memset(J.steps, 0, sizeof(gc_gemm_step) * (size_t)J.nsteps);
        gc_region(GC_FN(gemm_body), &J, want);
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

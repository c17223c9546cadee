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
 * activation after the last one, while the tile is in registers (bias, relu) or in L1 / L2 (the
 * other activations, applied with the vectorized unary functions per row of a finished row
 * panel; a convolution's epilogue, gemm_epi.h, likewise).
 *
 * Batch items with a C stride of at least m*n are independent; when one item is too small to
 * split, the items are spread over the threads instead.  Items whose C overlap (sc == 0
 * accumulates) run in order.
 *
 * A narrow op(B) (each K block across all of N within ~1.6 x L2) takes the row-split mode instead
 * (gemm_rows.h): B packed once for all threads, the rows of A split among them, same bits.
 *
 * Few rows of A (m <= GC_GEMV_MAX_M_*: a Linear layer at batch 1) take gemm_small_m instead: B is
 * read where it lies by the ISA's gemv kernels, no packing (see there).
 *
 * A constant operand may come pre-packed (gc_packed, pack.c: every panel of every K block, as
 * packing would cut them): its panels are then read where they lie instead of being packed on
 * every call (gc_gemm_px).
 *
 * Which of these paths a product takes, and the measured constants of those rules:
 * gemm_dispatch.h. */
#ifndef GC_T

#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "isa.h"
#define GC_PACK_PANELS_ONLY /* pack_panel_*, gemm_unpack_* as static functions */
#include "pack.c"
#undef GC_PACK_PANELS_ONLY

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GC_SPIN_PAUSE() _mm_pause()
#else
#define GC_SPIN_PAUSE() ((void)0)
#endif
#include "kernels.h"

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

/* which path a product takes: the constants of those rules (the rules: in the type-generic body) */
#include "gemm_dispatch.h"

#define GC_T float
#define GC_VT gc_v4f /* (gemm_rows.h's transposes) */
#define GC_VN 4
#define GC_TRANSPOSE GC_TRANSPOSE4
#define GC_SFX f32
#define GC_GEMV_T gemv_t_f32
#define GC_GEMV_TS gemv_t_stream_f32
#define GC_GEMV_N gemv_n_f32
#define GC_UKR ukr_f32
#define GC_UKR_DA ukr_da_f32
#define GC_UKR_ROWS ukr_rows_f32
#define GC_BLK gc_blk_f32
#include "gemm.c"
#undef GC_T
#undef GC_VT
#undef GC_VN
#undef GC_TRANSPOSE
#undef GC_SFX
#undef GC_GEMV_T
#undef GC_GEMV_TS
#undef GC_GEMV_N
#undef GC_UKR
#undef GC_UKR_DA
#undef GC_UKR_ROWS
#undef GC_BLK

#define GC_T double
#define GC_VT gc_v2d /* (gemm_rows.h's transposes) */
#define GC_VN 2
#define GC_TRANSPOSE GC_TRANSPOSE2
#define GC_SFX f64
#define GC_GEMV_T gemv_t_f64
#define GC_GEMV_TS gemv_t_stream_f64
#define GC_GEMV_N gemv_n_f64
#define GC_UKR ukr_f64
#define GC_UKR_DA ukr_da_f64
#define GC_UKR_ROWS ukr_rows_f64
#define GC_BLK gc_blk_f64
#include "gemm.c"
#undef GC_T
#undef GC_VT
#undef GC_VN
#undef GC_TRANSPOSE
#undef GC_SFX
#undef GC_GEMV_T
#undef GC_GEMV_TS
#undef GC_GEMV_N
#undef GC_UKR
#undef GC_UKR_DA
#undef GC_UKR_ROWS
#undef GC_BLK

#else /* type-generic body, T = GC_T */

typedef struct {
    const GC_T *a, *b;
    GC_T *c;
    ptrdiff_t m, n, k;
    int ta, tb;
    GC_T alpha, beta;
    const GC_T *bias;
    int relu, act_row; /* act_row: UNARY_* applied per row of a finished row panel, or -1 */
    int ct;            /* C is stored transposed: element (i, j) at c[j*m + i] (swapped mode) */
    const gc_epi *epi; /* a convolution's epilogue on the caller's C after the last K block */
    int bdirect;       /* full B panels are read in place (row-major B, small) instead of packed */
    int adirect;       /* full A panels are read in place (row-major A, small) instead of packed */
    int mr, nr;
    ptrdiff_t mc, kc, nc;
    /* compute units of a step: ncu chunks of wn columns x nmu groups of gm MR-panels */
    ptrdiff_t wn, gm;
    int ncu, nmu;
    ptrdiff_t pn; /* NR panels across n */
    /* row-split mode (gemm_rows.h): units of rg MR panels; bpack: B is packed into J->pkb (the
     * workspace) first */
    int rows, bpack;
    ptrdiff_t rg, ru; /* ru units of at most rg MR panels (times ncu column chunks) */
    int apack, nrange; /* A packed once (all K blocks, shared) at ws + aoff, read as pka; */
    int afine;         /* ... and the units wait per claim range of A panels (gemm_rows.h) */
    int rblk;          /* row-split units of m / ru rows each, not of whole panels */
    ptrdiff_t aoff;    /* nrange: claim ranges of the units */
    ptrdiff_t bslot;   /* B packed by each participant s at ws + s * bslot (or 0: shared) */
    /* swapped row-split mode: each unit moves its finished block of C^T (the buffer J->c) into
     * the caller's C here, adding ct_bias (per row of C^T) and applying relu if ct_relu */
    GC_T *ct_out;
    const GC_T *ct_bias;
    int ct_relu;
    /* pre-packed operands (gc_packed): the panels of the tile's A (rows) / B (columns) side, or
     * NULL; npa / npb panels across m / n per K block.  pa_scale: packed A panels are copied
     * times alpha into the A buffers (the unpacked call folds alpha into its packing). */
    const GC_T *pka, *pkb;
    ptrdiff_t npa, npb;
    int pa_scale;
    const gc_packed *vka, *vkb; /* virtual packed operands (gc_packed's fill), or NULL */
    /* workspace: the A double buffer, one B block per participant (slot), the step counters;
     * in batch mode all of it per slot */
    GC_T *ws;
    ptrdiff_t asz, bsz, slot_elems;
    gc_gemm_step *steps;
    ptrdiff_t nsteps;
    size_t step_bytes; /* the counters and, after them, nsteps x units done flags (blocked) */
    /* batch mode */
    ptrdiff_t batch, sa, sb, sc;
    _Alignas(64) atomic_long next_item;
} GC_FN(gemm_job);

static ptrdiff_t GC_FN(round_up)(ptrdiff_t v, ptrdiff_t r)
{
    return (v + r - 1) / r * r;
}

/* Fraction of a dimension of v elements that tiles of r use. */
static double GC_FN(tile_use)(ptrdiff_t v, ptrdiff_t r)
{
    return (double)v / (double)GC_FN(round_up)(v, r);
}

/* Packs panels [p0, p1) of the A block rows [ic, ic + mb) x cols [pc, pc + kb) of op(A), times
 * alpha; panel q holds A[ic + q*mr + i, pc + p] at dst[q*mr*kb + p*mr + i], zero past row mb. */
static void GC_FN(pack_a)(GC_T *restrict dst, const GC_T *restrict a, ptrdiff_t m, ptrdiff_t k,
                          int ta, GC_T alpha, ptrdiff_t ic, ptrdiff_t mb, ptrdiff_t pc,
                          ptrdiff_t kb, int mr, ptrdiff_t p0, ptrdiff_t p1)
{
    if (ta) { /* A stored k x m (A[i, p] = a[p*m + i]): row by row across the panels */
        GC_FN(pack_across)(dst + p0 * mr * kb, a + pc * m + ic + p0 * mr, m, mr, mb - p0 * mr,
                           p1 - p0, kb, alpha);
        return;
    }
    for (ptrdiff_t q = p0; q < p1; q++) { /* A row-major m x k: A[i, p] = a[i*k + p] */
        const ptrdiff_t mv = (mb - q * mr < mr) ? mb - q * mr : mr;
        GC_FN(pack_panel)(dst + q * mr * kb, a + (ic + q * mr) * k + pc, k, mr, mv, kb, alpha, 1);
    }
}

/* Packs the B block rows [pc, pc + kb) x cols [jc, jc + nb) of op(B): panel q holds
 * B[pc + p, jc + q*nr + j] at dst[q*nr*kb + p*nr + j], zero past column nb. */
static void GC_FN(pack_b)(GC_T *restrict dst, const GC_T *restrict b, ptrdiff_t n, ptrdiff_t k,
                          int tb, ptrdiff_t pc, ptrdiff_t kb, ptrdiff_t jc, ptrdiff_t nb, int nr)
{
    const ptrdiff_t np = (nb + nr - 1) / nr;
    if (!tb) { /* B row-major k x n (B[p, j] = b[p*n + j]): row by row across the panels */
        GC_FN(pack_across)(dst, b + pc * n + jc, n, nr, nb, np, kb, (GC_T)1);
        return;
    }
    for (ptrdiff_t q = 0; q < np; q++) { /* B stored n x k: B[p, j] = b[j*k + p] */
        const ptrdiff_t c0 = jc + q * nr;
        const ptrdiff_t nv = (nb - q * nr < nr) ? nb - q * nr : nr;
        GC_FN(pack_panel)(dst + q * nr * kb, b + c0 * k + pc, k, nr, nv, kb, (GC_T)1, 1);
    }
}

#include "gemm_epi.h"

/* One MR x NR tile at c (mv <= mr rows, nv <= nr columns inside the matrix; (i0, j0) the tile's
 * first element in it; J->epi: the swapped tiles' (gemm_unit runs the others' per row panel)).  In swapped mode (J->ct) the tile is C^T: element (i, j) lives at
 * c[j*ldc + i] and the bias is per row. */
static inline void GC_FN(gemm_tile)(const GC_FN(gemm_job) * J, const GC_T *ap, ptrdiff_t lda,
                                    const GC_T *bp, ptrdiff_t ldb, ptrdiff_t kb, GC_T *c,
                                    ptrdiff_t ldc, ptrdiff_t mv, ptrdiff_t nv, GC_T beta,
                                    const GC_T *bias, int last, ptrdiff_t i0, ptrdiff_t j0)
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
/* a partial row panel (packed: lda == 0) through the ISA's edge kernel for its rows, if any */
#define GC_KERNEL_ROWS(C, LDC, BETA, BIAS, RELU)                                                  \
    do {                                                                                          \
        if (mv < mr && gc_isa.GC_UKR_ROWS)                                                        \
            gc_isa.GC_UKR_ROWS((int)mv, kb, ap, bp, ldb, C, LDC, BETA, BIAS, RELU);               \
        else                                                                                      \
            GC_KERNEL(C, LDC, BETA, BIAS, RELU);                                                  \
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
        GC_KERNEL_ROWS(t, nr, beta, NULL, 0);
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
        if (last && J->epi) /* the caller's C: rows j0.., columns i0.. */
            GC_FN(epi_apply)(J->epi, c, ldc, j0, i0, nv, mv);
        return;
    }
    if (mv == mr && nv == nr) {
        GC_KERNEL(c, ldc, beta, bias, relu);
    } else if (nv == nr && gc_isa.GC_UKR_ROWS) { /* (lda == 0: in place A has mr rows) */
        gc_isa.GC_UKR_ROWS((int)mv, kb, ap, bp, ldb, c, ldc, beta, bias, relu);
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
        GC_KERNEL_ROWS(t, nr, beta, bias ? tbias : NULL, relu);
        for (ptrdiff_t i = 0; i < mv; i++)
            for (ptrdiff_t j = 0; j < nv; j++)
                c[i * ldc + j] = t[i * nr + j];
    }
#undef GC_KERNEL
#undef GC_KERNEL_ROWS
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
    /* pre-packed: this chunk's panels of the K block (virtual: made here) */
    const GC_T *bblk = J->pkb ? J->pkb + pc * J->npb * nr + p0 * nr * kb : bbuf;
    if (J->vkb)
        J->vkb->fill(J->vkb->fill_ctx, bbuf, pc, kb, jc, nb);
    else if (!J->pkb && nb > nfull)
        GC_FN(pack_b)(bbuf + nfull * kb, b, n, k, J->tb, pc, kb, jc + nfull, nb - nfull, nr);
    for (ptrdiff_t q = q0; q < q1; q++) {
        const ptrdiff_t i0 = ic + q * mr;
        const ptrdiff_t mv = (ic + mb - i0 < mr) ? ic + mb - i0 : mr; /* (a unit's rows end) */
        const int da = J->adirect && mv == mr; /* A read in place */
        const GC_T *ap = da ? a + i0 * k + pc : ablk + q * mr * kb;
        const ptrdiff_t lda = da ? k : 0;
        if (last && J->epi && J->epi->res && !J->ct) /* the epilogue's residual rows, ahead */
            GC_FN(epi_prefetch)((const GC_T *)J->epi->res + i0 * n + jc, n, mv, nb);
        for (ptrdiff_t j = 0; j < nb; j += nr) {
            const ptrdiff_t nv = (nb - j < nr) ? nb - j : nr;
            const GC_T *bp = j < nfull ? b + pc * n + jc + j : bblk + j * kb;
            const ptrdiff_t ldb = j < nfull ? n : nr;
            if (J->ct)
                GC_FN(gemm_tile)(J, ap, lda, bp, ldb, kb, c + (jc + j) * m + i0, m, mv, nv,
                                 beta, J->bias ? J->bias + i0 : NULL, last, i0, jc + j);
            else
                GC_FN(gemm_tile)(J, ap, lda, bp, ldb, kb, c + i0 * n + jc + j, n, mv, nv,
                                 beta, J->bias ? J->bias + jc + j : NULL, last, i0, jc + j);
        }
        /* the row activation and the epilogue on the panel's finished rows (still in L1 / L2):
         * long rows vectorize, where a tile's 16-wide rows spent more on calls and loop control
         * than on the work (the d = 256 transformer's exact-GELU fc1, 512 x 1024 x 256, one
         * thread: 6.9 ms per tile row against 4.0 for the same product without it) */
        if (last && J->act_row >= 0 && !J->ct)
            for (ptrdiff_t i = 0; i < mv; i++)
                GC_FN(gc_unary)(J->act_row, c + (i0 + i) * n + jc, c + (i0 + i) * n + jc, nb);
        if (last && J->epi && !J->ct)
            GC_FN(epi_apply)(J->epi, c + i0 * n + jc, n, i0, jc, mv, nb);
    }
}

#include "gemm_rows.h"

/* One GEMM (one batch item), run by every participant of a region: A panels and compute units
 * are claimed from the step counters (zeroed by the caller).  A thread waits (1) for the A block
 * of its step to be packed, (2) before packing into an A buffer, for the step that last used it,
 * (3) before computing unit u on a K block after the first, for unit u of the previous K block
 * (the same C tiles: the units of the steps of one M block cover the same tiles).  Each wait
 * points at earlier work that running threads have claimed (a thread moves on only when every
 * unit of a step is claimed): no deadlock, whoever joins late or never.  (Waiting for all of the
 * previous K block's units instead left a thread idle at every K block for the rest of the last
 * unit that the other was running, up to a unit's time: 2048^3 on two threads has 8 K blocks of
 * 12 units; and for all of it whenever the machine descheduled the other thread.) */
static void GC_FN(gemm_item)(const GC_FN(gemm_job) * J, const GC_T *a, const GC_T *b, GC_T *c,
                             GC_T *apack0, GC_T *apack1, GC_T *bbuf, gc_gemm_step *steps)
{
    const ptrdiff_t m = J->m, k = J->k;
    const int mr = J->mr;
    const int units = J->ncu * J->nmu;
    atomic_int *udone = (atomic_int *)(steps + J->nsteps); /* [step][unit]: unit done */
    ptrdiff_t s = 0;
    for (ptrdiff_t ic = 0; ic < m; ic += J->mc) {
        const ptrdiff_t mb = (m - ic < J->mc) ? m - ic : J->mc;
        const int npan = (int)((mb + mr - 1) / mr);
        for (ptrdiff_t pc = 0; pc < k; pc += J->kc, s++) {
            const ptrdiff_t kb = (k - pc < J->kc) ? k - pc : J->kc;
            GC_T *ablk = (s & 1) ? apack1 : apack0;
            gc_gemm_step *st = &steps[s];
            /* pre-packed A: the block's panels of this K block, used where they lie (alpha 1)
             * or copied times alpha */
            const GC_T *pblk = J->pka ? J->pka + pc * J->npa * mr + ic * kb : NULL;
            if (!pblk || J->pa_scale) {
                /* claims of one panel, or GC_VA_PANELS of a virtual A (made in one call) or of
                 * a transposed A (packed row by row across them) */
                const int g = J->vka || (J->ta && !pblk) ? GC_VA_PANELS : 1;
                const int ng = (npan + g - 1) / g;
                for (int q; (q = atomic_fetch_add_explicit(&st->a_next, 1, memory_order_relaxed)) <
                            ng;) {
                    const int q0 = q * g, q1 = q0 + g < npan ? q0 + g : npan;
                    if (!J->adirect || (q + 1) * mr > mb) { /* (in place: only the edge panel) */
                        if (s >= 2) /* step s - 2 used this A buffer */
                            gc_wait_at_least(&steps[s - 2].u_done, units);
                        if (pblk)
                            for (ptrdiff_t i = q * mr * kb; i < (q + 1) * mr * kb; i++)
                                ablk[i] = J->alpha * pblk[i];
                        else if (J->vka) {
                            GC_T *d = ablk + q0 * mr * kb;
                            J->vka->fill(J->vka->fill_ctx, d, pc, kb, ic + q0 * mr,
                                         mb - q1 * mr < 0 ? mb - q0 * mr : (q1 - q0) * mr);
                            if (J->alpha != (GC_T)1)
                                for (ptrdiff_t i = 0; i < (q1 - q0) * mr * kb; i++)
                                    d[i] = J->alpha * d[i];
                        } else
                            GC_FN(pack_a)(ablk, a, m, k, J->ta, J->alpha, ic, mb, pc, kb, mr, q0,
                                          q1);
                    }
                    atomic_fetch_add_explicit(&st->a_done, q1 - q0, memory_order_release);
                }
                gc_wait_at_least(&st->a_done, npan);
                pblk = ablk;
            }
            for (int u; (u = atomic_fetch_add_explicit(&st->u_next, 1, memory_order_relaxed)) <
                        units;) {
                if (pc > 0) /* its C tiles: the previous K block must be added in first */
                    gc_wait_at_least(&udone[(s - 1) * units + u], 1);
                GC_FN(gemm_unit)(J, a, b, c, pblk, bbuf, ic, mb, pc, kb, u);
                atomic_store_explicit(&udone[s * units + u], 1, memory_order_release);
                atomic_fetch_add_explicit(&st->u_done, 1, memory_order_release);
            }
        }
    }
}

static void GC_FN(gemm_body)(void *ctx, int slot)
{
    GC_FN(gemm_job) *J = (GC_FN(gemm_job) *)ctx;
    if (J->rows) { /* workspace [B (x slots with bslot), A x slots, steps]: rows_setup */
        GC_FN(gemm_rows_item)(J, J->a, J->b, J->c, J->bpack ? J->ws : NULL,
                              J->ws + J->bsz + slot * J->asz, J->steps, slot);
        return;
    }
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
        memset(steps, 0, J->step_bytes);
        GC_FN(gemm_item)(J, J->a + i * J->sa, J->b + i * J->sb, J->c + i * J->sc, ws,
                         ws + J->asz, ws + 2 * J->asz, steps);
    }
}

#include "gemm_small_m.h"

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

#include "gemm_dispatch.h" /* the rules: gemm_path, gemm_threads, gemm_bdirect / gemm_adirect */

static int GC_FN(gemm_run)(const GC_T *a, const gc_packed *pa, const GC_T *b, const gc_packed *pb,
                           GC_T *c, ptrdiff_t batch, ptrdiff_t m, ptrdiff_t n, ptrdiff_t k,
                           int trans_a, int trans_b, GC_T alpha, GC_T beta, ptrdiff_t sa,
                           ptrdiff_t sb, ptrdiff_t sc, const GC_T *bias, int act,
                           const gc_epi *epi, int conv);

/* The call on unpacked copies of the packed operands flagged in ua / ub (where the packed panels
 * cannot give the unpacked call's bits, see gc_gemm_px). */
static int GC_FN(gemm_unpacking)(const GC_T *a, const gc_packed *pa, int ua, const GC_T *b,
                                 const gc_packed *pb, int ub, GC_T *c, ptrdiff_t batch,
                                 ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b,
                                 GC_T alpha, GC_T beta, ptrdiff_t sa, ptrdiff_t sb, ptrdiff_t sc,
                                 const GC_T *bias, int act, const gc_epi *epi, int conv)
{
    GC_T *ta = NULL, *tb = NULL;
    if (ua && !(ta = (GC_T *)malloc(sizeof(GC_T) * (size_t)(m * k))))
        return -1;
    if (ub && !(tb = (GC_T *)malloc(sizeof(GC_T) * (size_t)(k * n)))) {
        free(ta);
        return -1;
    }
    if ((ua && GC_FN(gemm_unpack)(pa, ta) < 0) || (ub && GC_FN(gemm_unpack)(pb, tb) < 0)) {
        free(ta);
        free(tb);
        return -1;
    }
    const int rc = GC_FN(gemm_run)(ua ? ta : a, ua ? NULL : pa, ub ? tb : b, ub ? NULL : pb, c,
                                   batch, m, n, k, trans_a, trans_b, alpha, beta, ua ? 0 : sa,
                                   ub ? 0 : sb, sc, bias, act, epi, conv);
    free(ta);
    free(tb);
    return rc;
}

/* The product on the path gemm_path picks (gemm_dispatch.h).  epi (a convolution's epilogue,
 * batch 1): fused into the tiles' last K block, or into the swapped mode's transposing pass; the
 * paths without tiles (k == 0, small m) run it after. */
static int GC_FN(gemm_run)(const GC_T *a, const gc_packed *pa, const GC_T *b, const gc_packed *pb,
                           GC_T *c, ptrdiff_t batch, ptrdiff_t m, ptrdiff_t n, ptrdiff_t k,
                           int trans_a, int trans_b, GC_T alpha, GC_T beta, ptrdiff_t sa,
                           ptrdiff_t sb, ptrdiff_t sc, const GC_T *bias, int act,
                           const gc_epi *epi, int conv)
{
    if (batch <= 0 || m <= 0 || n <= 0)
        return 0;
    if (epi && batch != 1)
        return -1;
    if (k == 0 || alpha == (GC_T)0) {
        for (ptrdiff_t i = 0; i < batch; i++)
            GC_FN(gemm_scale)(c + i * sc, m, n, beta, bias, act);
        if (epi)
            GC_FN(epi_apply)(epi, c, n, 0, 0, m, n);
        return 0;
    }
    int swap, ua, ub;
    const int path = GC_FN(gemm_path)(pa, pb, batch, m, n, k, trans_a, trans_b, alpha, sc, conv,
                                      &swap, &ua, &ub);
    if (path == GC_GEMM_UNPACKING)
        return GC_FN(gemm_unpacking)(a, pa, ua, b, pb, ub, c, batch, m, n, k, trans_a, trans_b,
                                     alpha, beta, sa, sb, sc, bias, act, epi, conv);
    if (path == GC_GEMM_SMALL_M) {
        const int rc = GC_FN(gemm_small_m)(a, b, c, batch, m, n, k, trans_a, trans_b, alpha, beta,
                                           sa, sb, sc, bias, act);
        if (rc == 0 && epi)
            GC_FN(epi_apply)(epi, c, n, 0, 0, m, n);
        return rc;
    }
    if (path == GC_GEMM_NARROW_N)
        return GC_FN(gemm_narrow_n)(a, b, c, m, n, k, trans_a, trans_b, alpha, beta, bias, act,
                                    epi);
    if (pa) { /* (a and b are only ever offset by their stride, 0 here) */
        a = pa->data ? (const GC_T *)pa->data : c;
        sa = 0;
    }
    if (pb) {
        b = pb->data ? (const GC_T *)pb->data : c;
        sb = 0;
    }
    GC_FN(gemm_job) J;
    memset(&J, 0, sizeof J);
    if (swap) {
        const GC_T *t = a;
        a = b;
        b = t;
        const gc_packed *tp = pa;
        pa = pb;
        pb = tp;
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
    J.epi = epi;
    J.mr = GC_BLK.mr;
    J.nr = GC_BLK.nr;
    J.pka = pa ? (const GC_T *)pa->data : NULL;
    J.pkb = pb ? (const GC_T *)pb->data : NULL;
    J.vka = pa && !pa->data ? pa : NULL;
    J.vkb = pb && !pb->data ? pb : NULL;
    J.npa = (m + J.mr - 1) / J.mr;
    J.npb = (n + J.nr - 1) / J.nr;
    J.pa_scale = J.pka && alpha != (GC_T)1;
    J.bdirect = GC_FN(gemm_bdirect)(pb, trans_b, n, k, J.npa);
    J.adirect = GC_FN(gemm_adirect)(pa, trans_a, m, k);
    /* K blocks of near-equal size; M and N blocks no larger than the matrix */
    J.kc = gc_gemm_kc(sizeof(GC_T) == 4 ? 'f' : 'd', k);
    J.mc = GC_FN(round_up)(m, J.mr) < GC_BLK.mc ? GC_FN(round_up)(m, J.mr) : GC_BLK.mc;
    if (J.vka) { /* its A blocks are made per step: small enough to stay in L2 */
        const ptrdiff_t mc = (ptrdiff_t)(gc_cache_info.l2 / 2 / (J.kc * (ptrdiff_t)sizeof(GC_T)));
        J.mc = mc / J.mr * J.mr > J.mr ? (mc / J.mr * J.mr < J.mc ? mc / J.mr * J.mr : J.mc)
                                        : J.mr;
    }
    J.nc = GC_FN(round_up)(n, J.nr) < GC_BLK.nc ? GC_FN(round_up)(n, J.nr) : GC_BLK.nc;
    int batch_mode;
    const int want = GC_FN(gemm_threads)(m, n, k, batch, sc, &batch_mode);
    GC_FN(gemm_units)(&J, batch_mode ? 1 : want);
    J.rows = !batch_mode && !J.vka && !J.vkb && GC_FN(rows_fit)(m, n, k, want, J.pkb != NULL);
    if (J.rows) {
        GC_FN(rows_setup)(&J, want, pa != NULL);
    } else {
        /* (no A buffers for packed A panels used in place, no B blocks for packed B) */
        J.asz = J.pka && !J.pa_scale ? 0 : GC_FN(round_up)(J.mc * J.kc, 64);
        J.bsz = J.pkb ? 0 : GC_FN(round_up)(J.wn * J.kc, 64);
        J.nsteps = ((m + J.mc - 1) / J.mc) * ((k + J.kc - 1) / J.kc);
    }
    J.step_bytes = sizeof(gc_gemm_step) * (size_t)J.nsteps +
                   (J.rows ? 0 : sizeof(atomic_int) * (size_t)(J.nsteps * J.ncu * J.nmu));
    const ptrdiff_t step_elems = GC_FN(round_up)(
        (ptrdiff_t)((J.step_bytes + sizeof(GC_T) - 1) / sizeof(GC_T)), 64);
    /* swapped: C^T (m x n here) through a row-major buffer when it fits (not in batch mode) */
    const int ctbuf = J.ct && !batch_mode && (double)m * n * sizeof(GC_T) <= GC_CT_BUF_BYTES;
    /* batch mode: per slot [A, A, B, steps]; else [A, A, B x want, steps, C^T] */
    J.slot_elems = 2 * J.asz + J.bsz + step_elems;
    const ptrdiff_t ab = J.rows ? J.bsz + J.asz * want : 2 * J.asz + J.bsz * want;
    const ptrdiff_t total = batch_mode ? J.slot_elems * want
                                       : ab + step_elems + (ctbuf ? GC_FN(round_up)(m * n, 64) : 0);
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
    J.steps = (gc_gemm_step *)(ws + ab);
    if (J.bpack)
        J.pkb = ws;
    if (J.apack)
        J.pka = ws + J.aoff;
    GC_T *tt = NULL;
    if (ctbuf) {
        tt = ws + ab + step_elems;
        J.ct = 0;
        J.bias = NULL;
        J.relu = 0;
        J.act_row = -1;
        J.epi = NULL; /* (in the transposing pass) */
    }
    /* row-split mode: each unit moves its own finished block of C^T into C (in parallel, from
     * L1 / L2) when the pass has nothing but the bias and relu, instead of one pass after the
     * region (a 32 x 512 x 512 Linear, two threads: the pass on one thread took ~1/10 of the
     * call) */
    const int ct_units = tt && J.rows && (act < 0 || act == GC_UNARY_RELU) && !epi;
    if (ct_units) {
        J.ct_bias = bias;
        J.ct_relu = act == GC_UNARY_RELU;
    }
    for (ptrdiff_t i = 0; i < batch; i++) { /* in order (C stride 0 accumulates) */
        J.a = a + i * sa;
        J.b = b + i * sb;
        J.c = tt ? tt : c + i * sc;
        J.ct_out = ct_units ? c + i * sc : NULL;
        if (tt && beta != (GC_T)0) /* C is n x m: tt[r*n + q] = C[q, r] */
            GC_FN(transpose_act)(c + i * sc, tt, n, m, NULL, 0, -1, NULL);
        memset(J.steps, 0, J.step_bytes);
        gc_region(GC_FN(gemm_body), &J, want);
        if (tt && !ct_units)
            GC_FN(transpose_act)(tt, c + i * sc, m, n, bias, act == GC_UNARY_RELU,
                                 act == GC_UNARY_RELU ? -1 : act, epi);
    }
    return 0;
}

int GC_FN(gc_gemm_px)(const GC_T *a, const gc_packed *pa, const GC_T *b, const gc_packed *pb,
                      GC_T *c, ptrdiff_t batch, ptrdiff_t m, ptrdiff_t n, ptrdiff_t k,
                      int trans_a, int trans_b, GC_T alpha, GC_T beta, ptrdiff_t sa, ptrdiff_t sb,
                      ptrdiff_t sc, const GC_T *bias, int act)
{
    return GC_FN(gemm_run)(a, pa, b, pb, c, batch, m, n, k, trans_a, trans_b, alpha, beta, sa, sb,
                           sc, bias, act, NULL, 0);
}

int GC_FN(gc_gemm_pxe)(const GC_T *a, const gc_packed *pa, const GC_T *b, const gc_packed *pb,
                       GC_T *c, ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b,
                       GC_T beta, const gc_epi *e)
{
    return GC_FN(gemm_run)(a, pa, b, pb, c, 1, m, n, k, trans_a, trans_b, (GC_T)1, beta, 0, 0, 0,
                           NULL, -1, e, 1);
}

int GC_FN(gc_gemm_ex)(const GC_T *a, const GC_T *b, GC_T *c, ptrdiff_t batch, ptrdiff_t m,
                      ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b, GC_T alpha, GC_T beta,
                      ptrdiff_t sa, ptrdiff_t sb, ptrdiff_t sc, const GC_T *bias, int act)
{
    return GC_FN(gc_gemm_px)(a, NULL, b, NULL, c, batch, m, n, k, trans_a, trans_b, alpha, beta,
                             sa, sb, sc, bias, act);
}

int GC_FN(gc_gemm)(const GC_T *a, const GC_T *b, GC_T *c, ptrdiff_t batch, ptrdiff_t m,
                   ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b, GC_T alpha, GC_T beta,
                   ptrdiff_t sa, ptrdiff_t sb, ptrdiff_t sc)
{
    return GC_FN(gc_gemm_ex)(a, b, c, batch, m, n, k, trans_a, trans_b, alpha, beta, sa, sb, sc,
                             NULL, -1);
}

#endif

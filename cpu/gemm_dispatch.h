/* Which path a GEMM takes (gemm.c), the constants its rules were measured by, and the small-m /
 * narrow-N kernels' tuning constants.  Included by gemm.c twice, the way gemm.c reads itself:
 * without GC_T, the constants and the type-free rules; inside its type-generic body (T = GC_T),
 * the rules, after the paths whose fit tests they call (gemm_rows.h's rows_swap; gemm.c itself
 * asks rows_fit whether an item runs in the row-split mode).  In order (gemm_path):
 *
 *   a pre-packed operand whose panels cannot give the unpacked call's bits in the mode it fixes
 *     -> the call on an unpacked copy of it (gemm_unpacking);
 *   few rows of A (m <= GC_GEMV_MAX_M_*) -> gemm_small_m (gemm_small_m.h): B read where it lies;
 *   few columns of C (GC_NARROW_*) -> gemm_narrow_n (gemm_small_m.h): the same on C^T;
 *   else the blocked steps, swapped (C^T = op(B)^T op(A)^T: swap_mode, rows_swap) or not, on
 *     gemm_threads' threads: items spread over them (batch mode), or one item at a time, in the
 *     row-split mode where it fits (gemm_rows.h's rows_fit); small row-major operands read in
 *     place (gemm_bdirect, gemm_adirect).
 *
 * Every path gives results that do not depend on the thread count; the rules only pick the
 * fastest one (bits differ between paths only where gemm.c says so: the small-m and narrow-N
 * sums run in the gemv order). */
#ifndef GC_T

/* the paths gemm_path picks */
enum { GC_GEMM_BLOCKED, GC_GEMM_UNPACKING, GC_GEMM_SMALL_M, GC_GEMM_NARROW_N };

/* Minimum work per thread, in flops (a parallel region costs a few microseconds; about one with
 * the workers awake, as in a training step: the 64 x 10 x 256 dX of the MLP's batch 64 splits) */
#define GC_GEMM_GRAIN (gc_pool_awake() ? 0.15e6 : 0.25e6)
/* An A block up to this size stays in L2: compute units may then split N into narrow chunks. */
#define GC_ABLOCK_SMALL (256.0 * 1024)
/* Row-major A up to this size is read in place by the micro-kernel instead of being packed. */
#define GC_ADIRECT_BYTES (256.0 * 1024)
/* Row-major B up to this size is read in place by the micro-kernel instead of being packed. */
#define GC_BDIRECT_BYTES (64.0 * 1024)
/* ... and any row-major B when at most this many MR panels of A use it */
#define GC_BDIRECT_PANELS 8
/* Small m (the rows of A): up to this many rows the product reads B where it lies (gemm_small_m:
 * gemv_t when B is stored n x k, gemv_n when k x n) instead of packing it.  Measured on AVX-512
 * (Zen 4, 2 threads; n x k = 2048 x 2048, 512 x 512, 4096 x 256, 256 x 4096, 128 x 128), both
 * paths timed for m = 4 .. 32: the streaming path is faster at every m <= 16 for both layouts
 * (m = 1: 2048 x 2048 ~120 us against ~1060 us; m = 16: 1030 / 1200 us against 1920 / 2170),
 * ties at 128 x 128 from m ~ 16 (trans_b) / ~24, and loses from m ~ 28 at 2048 x 2048 with
 * trans_b (the blocked path packs B once for all rows; here B is read once per 8 rows). */
#define GC_GEMV_MAX_M_T 16 /* (GC_GEMV_MAX_M_N, for a B stored k x n: kernels.h) */
/* ... and as few columns of C (gemm_narrow_n, on C^T): up to GC_NARROW_N, or to GC_GEMV_MAX_M_T
 * with op(A) up to GC_NARROW_A_BYTES (AVX-512, one thread, us blocked -> narrow: 64 x 512 x 10
 * ~16 -> ~12, 256 x 256 x 10 ~25 -> ~20, 1024 x 1024 x 1 ~370 -> ~65; 256 x 784 x 10 ~68 -> ~80) */
#define GC_NARROW_N 8
#define GC_NARROW_A_BYTES (256.0 * 1024)
/* k from 32 for one column (100000 x 1 x 32 wins), from 64 for more (its transposing pass cost
 * more: 100000 x 4 x 8 2.9x, 40000 x 3 x 40 1.2x); past 8 columns k from 256 (300 x 15 x 200 and
 * 2000 x 16 x 32 lost 1.2x / 1.3x; 256 x 256 x 10, 128 x 256 x 16 win) */
#define GC_NARROW_MIN_K 32
#define GC_NARROW_MID_K 256
/* columns per work chunk (multiples of every ISA's widest step: 8 rows / 8 vectors of 16) */
#define GC_GEMV_CW_T 64
#define GC_GEMV_CW_N 128
/* gemv_n (B stored k x n) sweeps blocks of this many rows of B across a chunk's columns (C
 * accumulates between them), rather than a narrow strip of columns down all k rows (2048 x 2048,
 * m = 1, one thread: ~480 -> ~340 us; 32 .. 256 rows measure alike) */
#define GC_GEMV_KB_N 64
/* cost model for the thread count (gemv_split through gc_threads_for: one thread below ~50 us): ns
 * per byte of B and per multiply-add. It overstates the streaming time (one AVX-512 thread reads
 * ~65 GB/s, ~55 G multiply-adds/s) so that a 512 x 512 weight at m = 1, ~10 us on one thread,
 * still splits: ~6.4 us on two (the region costs a few us, the second core's share of L2 / L3
 * bandwidth is worth more)
 */
#define GC_GEMV_NS_BYTE 0.05
#define GC_GEMV_NS_FMA 0.02
/* Swapped mode writes C^T row-major into the workspace up to this size (then transposes it into
 * C with the bias and activation, once) rather than moving each tile through a transposed stack
 * tile on every K block: 32 x 2048 x 2048 with the weight packed as A, one AVX-512 thread,
 * ~3.3 -> ~2.7 ms (the tile path's transposes cost ~1/8 of the kernel time). */
#define GC_CT_BUF_BYTES (4.0 * 1024 * 1024)
/* MR panels of a virtual A (gc_packed's fill: conv.c's columns) made per call */
#define GC_VA_PANELS 8

/* Whether `rows` rows of A read in place, one element per row per k step at this row stride,
 * crowd one set of the L1 data cache: more than half of its ways (64-byte lines, 4 KiB per way:
 * 32 KiB 8-way on Zen 4 and current Intel cores) for the rows that land in the same set, which
 * then evict each other (and the B stream's lines) before their lines are used up.  A row
 * stride that is a multiple of 4 KiB puts all 14 rows of an AVX-512 tile in one set (1024 x
 * 1024 x 1024, one Zen 4 thread: 78 GFLOP/s in place against 102 at 1040^3); such A is packed
 * instead.  (Called per product: O(rows), no divisions in the loop.) */
#define GC_L1_SET_SPAN 4096
#define GC_L1_WAYS 8
static int gc_rows_alias(ptrdiff_t stride_bytes, int rows)
{
    unsigned char count[GC_L1_SET_SPAN / 64] = {0}; /* rows per set */
    const ptrdiff_t step = stride_bytes % GC_L1_SET_SPAN;
    int worst = 0;
    for (ptrdiff_t i = 0, off = 0; i < rows; i++) {
        const int c = ++count[off / 64];
        worst = c > worst ? c : worst;
        off += step;
        off -= off >= GC_L1_SET_SPAN ? GC_L1_SET_SPAN : 0;
    }
    return worst > GC_L1_WAYS / 2;
}

#else /* type-generic rules, T = GC_T */

/* Swapped mode: the unpacked call computes C^T = op(B)^T op(A)^T when that wastes much less of
 * the register tile (n small, m large: the long dimension goes along the vectors), or when n is
 * narrower than one tile: every tile would then go through the padded edge path (64x512x10: 38
 * -> 53 GFLOP/s swapped). */
static int GC_FN(swap_mode)(ptrdiff_t m, ptrdiff_t n)
{
    const double use = GC_FN(tile_use)(m, GC_BLK.mr) * GC_FN(tile_use)(n, GC_BLK.nr);
    const double use_t = GC_FN(tile_use)(n, GC_BLK.mr) * GC_FN(tile_use)(m, GC_BLK.nr);
    return use_t > 1.5 * use || (n < GC_BLK.nr && m >= GC_BLK.nr && use_t > 1.2 * use);
}

/* Whether packed operand P can stand in for its matrix in a call that multiplies in mode swap
 * (the ISA and blocking it was packed for are the ones in use). */
static int GC_FN(packed_usable)(const gc_packed *P, int swap)
{
    const int w = (P->side == 0) != (swap != 0) ? GC_BLK.mr : GC_BLK.nr;
    return P->swap == swap && P->isa == gc_isa.isa && P->w == w &&
           P->kc == gc_gemm_kc(sizeof(GC_T) == 4 ? 'f' : 'd', P->k);
}

/* The path of a product, from gemm_run's arguments: GC_GEMM_UNPACKING (*ua / *ub: which packed
 * operand to unpack), GC_GEMM_SMALL_M, GC_GEMM_NARROW_N or GC_GEMM_BLOCKED; *swap: the mode of
 * the blocked steps.
 *
 * A packed operand fixes the mode (its panels feed one side of the register tile).  Every mode
 * sums each element in the same order with the same operations, so with alpha == 1 a packed
 * call gives the unpacked call's bits in any mode; alpha lands where the unpacked call puts it
 * (the A panels' packing, or the in-place A kernel) only when the modes agree and the packed
 * operand is not an A that the unpacked call reads in place.  The small-m path (gemv) reads B
 * in its stored layout.  Elsewhere the packed operand is unpacked into a copy first.  No narrow-N
 * path with one (blocked bits, not the unpacked call's gemv order: not unpacked every call).
 * conv (gc_gemm_pxe): never the narrow-N path, whose sums run in the gemv order: conv_direct.c
 * and conv_pw.c give the blocked path's bits, and a few-pixel image would take it otherwise. */
static int GC_FN(gemm_path)(const gc_packed *pa, const gc_packed *pb, ptrdiff_t batch,
                            ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b,
                            GC_T alpha, ptrdiff_t sc, int conv, int *swap, int *ua, int *ub)
{
    const int small = m <= (trans_b ? GC_GEMV_MAX_M_T : GC_GEMV_MAX_M_N);
    /* narrow: not with a packed operand (recurrent.c's W_hh^T would be unpacked every step) nor
     * an A stored k x m (gemv_n over it lost); C^T and B^T's copy within the C^T buffer bound */
    const int narrow = !small && !pa && !pb && !conv && !trans_a && batch == 1 &&
                       k >= (n == 1 ? GC_NARROW_MIN_K : 2 * GC_NARROW_MIN_K) &&
                       (double)m * (double)n * sizeof(GC_T) <= GC_CT_BUF_BYTES &&
                       (trans_b || (double)n * (double)k * sizeof(GC_T) <= GC_CT_BUF_BYTES) &&
                       (n <= GC_NARROW_N || (n <= GC_GEMV_MAX_M_T && k >= GC_NARROW_MID_K &&
                       (double)m * (double)k * sizeof(GC_T) <= GC_NARROW_A_BYTES));
    const int auto_swap = GC_FN(swap_mode)(m, n) ||
                          (!pa && !pb && !small && GC_FN(rows_swap)(m, n, k, batch, sc, alpha));
    *swap = pa ? pa->swap : pb ? pb->swap : auto_swap;
    *ua = *ub = 0;
    if (!pa && !pb)
        return small ? GC_GEMM_SMALL_M : narrow ? GC_GEMM_NARROW_N : GC_GEMM_BLOCKED;
    *ua = pa && (small || !GC_FN(packed_usable)(pa, *swap));
    *ub = pb && (small || !GC_FN(packed_usable)(pb, *swap));
    if (alpha != (GC_T)1 && *swap != auto_swap) {
        *ua = pa != NULL;
        *ub = pb != NULL;
    }
    else if (alpha != (GC_T)1 && !*swap) /* A read in place by the unpacked call? */
        *ua |= pa && !trans_a && (double)m * (double)k * sizeof(GC_T) <= GC_ADIRECT_BYTES;
    else if (alpha != (GC_T)1) /* (swapped: B^T is the tile's A) */
        *ub |= pb && trans_b && (double)n * (double)k * sizeof(GC_T) <= GC_ADIRECT_BYTES;
    return *ua || *ub ? GC_GEMM_UNPACKING : GC_GEMM_BLOCKED;
}

/* The blocked path's threads for an m x n x k product (one item; batch items, sc apart, C
 * stride sc): one per GC_GEMM_GRAIN flops of the item, or, when an item is worth fewer threads
 * than the pool has and its items are independent (sc >= m * n), that of the whole batch with
 * the items spread over the threads (*batch_mode; at most one thread an item). */
static int GC_FN(gemm_threads)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, ptrdiff_t batch,
                               ptrdiff_t sc, int *batch_mode)
{
    const double flops = 2.0 * (double)m * (double)n * (double)k;
    const int nt_item = gc_threads_for(flops, GC_GEMM_GRAIN);
    *batch_mode = 0;
    if (batch > 1 && sc >= m * n && nt_item < gc_pool_size()) {
        const int nb = gc_threads_for(flops * (double)batch, GC_GEMM_GRAIN);
        if (nb > 1) {
            *batch_mode = 1;
            return nb < batch ? nb : (int)batch;
        }
    }
    return nt_item;
}

/* Whether the blocked steps read op(B)'s full panels where they lie instead of packing them
 * (pb: B pre-packed; npa: MR panels across m): when B is row-major and small (cache resident;
 * packing would cost about as much as using it), or when few MR panels of A use each of its
 * elements (packing it is then a large share of the work: 64 x 784 x 512, 5 panels, spent 13 %
 * of its time in it) and its rows are at most 4 KiB apart (one Zen 4 thread, GFLOP/s before
 * this rule and the edge kernels -> with both: 64 x 784 x 512 88 -> 100, 32 x 784 x 512 63 ->
 * 98, 96 x 512 x 512 94 -> 107, 100 x 1000 x 1000 81 -> 80; B in place with rows 8 KiB apart
 * lost: 112 x 2048 x 2048 93 -> 71) */
static int GC_FN(gemm_bdirect)(const gc_packed *pb, int trans_b, ptrdiff_t n, ptrdiff_t k,
                               ptrdiff_t npa)
{
    return !pb && !trans_b &&
           ((double)k * (double)n * sizeof(GC_T) <= GC_BDIRECT_BYTES ||
            (npa <= GC_BDIRECT_PANELS && n * (ptrdiff_t)sizeof(GC_T) <= 4096));
}

/* Whether the blocked steps read op(A)'s full MR panels where they lie (pa: A pre-packed): A
 * row-major, small, and its row stride not aliasing in L1 (gc_rows_alias). */
static int GC_FN(gemm_adirect)(const gc_packed *pa, int trans_a, ptrdiff_t m, ptrdiff_t k)
{
    return !pa && !trans_a && (double)m * (double)k * sizeof(GC_T) <= GC_ADIRECT_BYTES &&
           !gc_rows_alias(k * (ptrdiff_t)sizeof(GC_T), GC_BLK.mr);
}

#endif

/* The row blocking of attention's small products (included by attention.c and
 * attention_backward.c inside their type-generic parts: GC_T, GC_FN and GC_GEMV_N defined). */

/* Rows per gemv_n call for n columns.  isa/stream.h's gemv_n runs up to 8 rows per step with
 * STREAM_ACC / rows vectors of columns per register tile (STREAM_ACC: 8 accumulators on AVX2,
 * 16 on AVX-512, as in isa/avx2.c / avx512.c); each step of k loads the tile's vectors of B and
 * broadcasts one element of A per row.  Fewer rows per call make wider tiles: on AVX2 4 rows x
 * 2 vectors load 6 times per 8 FMAs where 8 rows x 1 vector load 9 times.  Picks the row count
 * (8, 4 or 2) with the most FMAs per load over n's whole tiles and single vectors (the results
 * are the same bits whatever it picks: each element sums over k in the same order). */
static ptrdiff_t GC_FN(att_rows)(ptrdiff_t n)
{
    int acc, vl;
    if (gc_isa.isa == GC_ISA_AVX2) {
        acc = 8;
        vl = 32 / (int)sizeof(GC_T);
    } else if (gc_isa.isa == GC_ISA_AVX512) {
        acc = 16;
        vl = 64 / (int)sizeof(GC_T);
    } else {
        return 8;
    }
    ptrdiff_t best = 8;
    double best_ratio = 0.0;
    for (int m = 8; m >= 2; m /= 2) {
        const int nv = acc / m > 8 ? 8 : acc / m;
        const ptrdiff_t full = n / (nv * vl), rest = (n % (nv * vl)) / vl;
        const double loads = (double)(full * (nv + m) + rest * (1 + m));
        const double fmas = (double)(m * (full * nv + rest));
        if (loads > 0 && fmas / loads > best_ratio * 1.001) {
            best_ratio = fmas / loads;
            best = m;
        }
    }
    return best;
}

/* gemv_n (isa.h's contract) in calls of att_rows(n) rows. */
static void GC_FN(att_gemv)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, const GC_T *a, ptrdiff_t lda,
                            const GC_T *b, ptrdiff_t ldb, GC_T *c, ptrdiff_t ldc, GC_T alpha,
                            GC_T beta)
{
    const ptrdiff_t step = GC_FN(att_rows)(n);
    for (ptrdiff_t i = 0; i < m; i += step)
        GC_GEMV_N(m - i < step ? m - i : step, n, k, a + i * lda, lda, b, ldb, c + i * ldc, ldc,
                  alpha, beta);
}

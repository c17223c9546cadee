/* Streaming kernels (template), included by every cpu/isa/<isa>.c once per element type, right
 * after its GEMM micro-kernel (isa/ukr.h or neon.c's own), with the same vector macros:
 *
 *   small-M GEMM with B read where it lies (contracts in isa.h: gc_gemv_*): the weight-streaming
 *   path of gemm.c for m <= GC_GEMV_MAX_M rows, and the score / value products of attention.c;
 *   gemv_t: B stored n x k (nn.Linear's weight [out, in]): each output is a dot product of two
 *           contiguous rows, M rows of A times NB rows of B per step, reduced across the lanes
 *           at the end;
 *   gemv_n: B stored k x n: axpy over B's rows, an M x NV-vector tile of C in registers;
 *   layer_norm_row: one row of layer_norm (corrected two-pass mean / variance, then the affine
 *           normalization), for cpu/norm.c.
 *
 * The including file defines, besides ukr.h's UKR_T, UKR_VT, UKR_VL, V_ZERO, V_LOADU, V_STOREU,
 * V_SET1, V_FMA, V_ADD, V_MUL:
 *   V_SUB(a, b)   a - b;     V_HSUM(v)  the sum of v's lanes (any order);
 *   S_FMA(a, b, c) the scalar a * b + c computed exactly as one lane of V_FMA (fused or not), so
 *                  the scalar tails give the same bits as the vector lanes;
 *   STREAM_ACC     the accumulator registers the tiles may use (16 with 32 vector registers);
 *   STREAM_SFX     a suffix for the names (f32 / f64): gemv_n_<SFX>, gemv_t_<SFX>, ln_row_<SFX>.
 */
#ifndef GC_STREAM_H_ONCE
#define GC_STREAM_H_ONCE
#include <math.h>
#define GC_STREAM_INLINE static inline __attribute__((always_inline))
#define GC_SN(name) GC_CAT(name, STREAM_SFX)
#define GC_ST_PRAGMA(x) _Pragma(#x)
#define GC_ST_UNROLL(n) GC_ST_PRAGMA(GCC unroll n)
/* B rows per step of gemv_t / vectors per step of gemv_n for M rows of A: the accumulators fill
 * STREAM_ACC registers, at most 8 */
#define GC_ST_WIDTH(M) ((STREAM_ACC / (M)) > 8 ? 8 : (STREAM_ACC / (M)) < 1 ? 1 : (STREAM_ACC / (M)))
#endif
/* gemv_t: NB (<= 4) rows of B by U (<= 2) vectors per step for M rows of A; the k tail past
 * the last whole step goes through S_FMA, so U changes the bits: it depends on M only (NB does
 * not: each row of B has its own accumulators) */
#define GC_GVT_NB(M) ((STREAM_ACC / (M)) >= 4 ? 4 : (STREAM_ACC / (M)) >= 2 ? 2 : 1)
#define GC_GVT_U(M) ((STREAM_ACC / ((M) * GC_GVT_NB(M))) >= 2 ? 2 : 1)
/* gemv_t_stream's one-row case where 16 accumulators and 32-byte vectors allow (avx512): 8 rows
 * of B per step, the next 8 prefetched.  Twice the rows in flight per thread, against 4: a batch-1
 * 3 x 2048 x 2048 MLP's wall time -9 to -12 % at one and two Zen 4 threads (C harness, one
 * process alternating the two, 1.48 -> 1.34 ms median at two threads, loaded machine) */
#define GC_GVT_PF8 (STREAM_ACC >= 16 && UKR_VL * sizeof(UKR_T) >= 32)

/* ---- gemv_t: C[i, j] = alpha * dot(A row i, B row j) (+ beta * C[i, j]) ----------------------- */

/* M rows of A times NB rows of B, U vectors of each row per step (constants after inlining):
 * C[i, r] at c[i*ldc + r]. */
GC_STREAM_INLINE void GC_SN(gvt_tile)(const int PF, const int M, const int NB, const int U,
                                      ptrdiff_t k,
                                      const UKR_T *restrict a, ptrdiff_t lda,
                                      const UKR_T *restrict b, ptrdiff_t ldb, UKR_T *restrict c,
                                      ptrdiff_t ldc, UKR_T alpha, UKR_T beta)
{
    UKR_VT acc[8][8][2];
    GC_ST_UNROLL(8)
    for (int i = 0; i < M; i++)
        GC_ST_UNROLL(8)
        for (int r = 0; r < NB; r++)
            GC_ST_UNROLL(2)
            for (int u = 0; u < U; u++)
                acc[i][r][u] = V_ZERO();
    const ptrdiff_t ku = k / (U * UKR_VL) * (U * UKR_VL), kv = k / UKR_VL * UKR_VL;
    /* PF (gemv_t_stream: B from memory) and one row of A (a batch-1 Linear, bound by reading B):
     * the next NB rows of B, at this offset, prefetched into L2 (a prefetch never faults past B's
     * end); the hardware prefetchers restart at every page of the NB interleaved rows */
    const int pf = PF && M == 1 && NB >= 4 && UKR_VL * sizeof(UKR_T) >= 32;
    for (ptrdiff_t p = 0; p < ku; p += U * UKR_VL) {
        UKR_VT bv[8][2];
        GC_ST_UNROLL(2)
        for (int u = 0; u < U; u++) {
            if (pf) {
                GC_ST_UNROLL(8)
                for (int r = 0; r < NB; r++)
                    __builtin_prefetch(b + (NB + r) * ldb + p + u * UKR_VL, 0, 2);
            }
            GC_ST_UNROLL(8)
            for (int r = 0; r < NB; r++)
                bv[r][u] = V_LOADU(b + r * ldb + p + u * UKR_VL);
        }
        GC_ST_UNROLL(8)
        for (int i = 0; i < M; i++) {
            GC_ST_UNROLL(2)
            for (int u = 0; u < U; u++) {
                const UKR_VT av = V_LOADU(a + i * lda + p + u * UKR_VL);
                GC_ST_UNROLL(8)
                for (int r = 0; r < NB; r++)
                    acc[i][r][u] = V_FMA(av, bv[r][u], acc[i][r][u]);
            }
        }
    }
    if (U > 1 && ku < kv) { /* one whole vector left (U == 2) */
        UKR_VT bv[8];
        GC_ST_UNROLL(8)
        for (int r = 0; r < NB; r++)
            bv[r] = V_LOADU(b + r * ldb + ku);
        GC_ST_UNROLL(8)
        for (int i = 0; i < M; i++) {
            const UKR_VT av = V_LOADU(a + i * lda + ku);
            GC_ST_UNROLL(8)
            for (int r = 0; r < NB; r++)
                acc[i][r][0] = V_FMA(av, bv[r], acc[i][r][0]);
        }
    }
    GC_ST_UNROLL(8)
    for (int i = 0; i < M; i++) {
        GC_ST_UNROLL(8)
        for (int r = 0; r < NB; r++) {
            UKR_VT t = acc[i][r][0];
            GC_ST_UNROLL(2)
            for (int u = 1; u < U; u++)
                t = V_ADD(t, acc[i][r][u]);
            UKR_T s = V_HSUM(t);
            for (ptrdiff_t p = kv; p < k; p++)
                s = S_FMA(a[i * lda + p], b[r * ldb + p], s);
            s *= alpha;
            UKR_T *cp = c + i * ldc + r;
            *cp = beta == (UKR_T)0 ? s : S_FMA(beta, *cp, s);
        }
    }
}

/* Every column of C for M rows: NB-row steps, then single rows. */
#define GC_GVT_CASE(M)                                                                            \
    case M: {                                                                                     \
        ptrdiff_t j = 0;                                                                          \
        if (PF && M == 1 && GC_GVT_PF8)                                                           \
            for (; j + 8 <= n; j += 8)                                                            \
                GC_SN(gvt_tile)(PF, 1, 8, GC_GVT_U(1), k, a, lda, b + j * ldb, ldb, c + j, ldc,   \
                                alpha, beta);                                                     \
        for (; j + GC_GVT_NB(M) <= n; j += GC_GVT_NB(M))                                          \
            GC_SN(gvt_tile)(PF, M, GC_GVT_NB(M), GC_GVT_U(M), k, a, lda, b + j * ldb, ldb, c + j, \
                            ldc, alpha, beta);                                                    \
        for (; j < n; j++)                                                                        \
            GC_SN(gvt_tile)(PF, M, 1, GC_GVT_U(M), k, a, lda, b + j * ldb, ldb, c + j, ldc,       \
                            alpha, beta);                                                         \
    } break;

GC_STREAM_INLINE void GC_SN(gemv_t_body)(const int PF, ptrdiff_t m, ptrdiff_t n, ptrdiff_t k,
                                         const UKR_T *a, ptrdiff_t lda, const UKR_T *b,
                                         ptrdiff_t ldb, UKR_T *c, ptrdiff_t ldc, UKR_T alpha,
                                         UKR_T beta)
{
    while (m > 0) {
        const ptrdiff_t mm = m > 8 ? 8 : m;
        switch (mm) {
            GC_GVT_CASE(1)
            GC_GVT_CASE(2)
            GC_GVT_CASE(3)
            GC_GVT_CASE(4)
            GC_GVT_CASE(5)
            GC_GVT_CASE(6)
            GC_GVT_CASE(7)
            GC_GVT_CASE(8)
        default: break;
        }
        m -= mm;
        a += mm * lda;
        c += mm * ldc;
    }
}

static void GC_SN(gemv_t)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, const UKR_T *a, ptrdiff_t lda,
                          const UKR_T *b, ptrdiff_t ldb, UKR_T *c, ptrdiff_t ldc, UKR_T alpha,
                          UKR_T beta)
{
    GC_SN(gemv_t_body)(0, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
}

/* gemv_t for a B streamed from memory (gemm_small_m: B of half the L3 or more): the same sums,
 * with the one-row case prefetching the next rows of B (a 3 x 2048 x 2048 MLP at batch 1, 48
 * MiB of weights: ~2.1 -> ~1.5 ms on one Zen 4 thread; weights in L3, 1024 x 1024, lost ~5 %) */
static void GC_SN(gemv_t_stream)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, const UKR_T *a,
                                 ptrdiff_t lda, const UKR_T *b, ptrdiff_t ldb, UKR_T *c,
                                 ptrdiff_t ldc, UKR_T alpha, UKR_T beta)
{
    GC_SN(gemv_t_body)(1, m, n, k, a, lda, b, ldb, c, ldc, alpha, beta);
}
#undef GC_GVT_CASE

/* ---- gemv_n: C[i, j] = alpha * sum_p A[i, p] B[p, j] (+ beta * C[i, j]) ----------------------- */

/* M rows x NV vectors of columns (constants after inlining). */
GC_STREAM_INLINE void GC_SN(gvn_tile)(const int M, const int NV, ptrdiff_t k,
                                      const UKR_T *restrict a, ptrdiff_t lda,
                                      const UKR_T *restrict b, ptrdiff_t ldb, UKR_T *restrict c,
                                      ptrdiff_t ldc, UKR_T alpha, UKR_T beta)
{
    UKR_VT acc[8][8];
    GC_ST_UNROLL(8)
    for (int i = 0; i < M; i++)
        GC_ST_UNROLL(8)
        for (int v = 0; v < NV; v++)
            acc[i][v] = V_ZERO();
    GC_ST_UNROLL(2)
    for (ptrdiff_t p = 0; p < k; p++) {
        UKR_VT bv[8];
        GC_ST_UNROLL(8)
        for (int v = 0; v < NV; v++)
            bv[v] = V_LOADU(b + p * ldb + v * UKR_VL);
        GC_ST_UNROLL(8)
        for (int i = 0; i < M; i++) {
            const UKR_VT av = V_SET1(a[i * lda + p]);
            GC_ST_UNROLL(8)
            for (int v = 0; v < NV; v++)
                acc[i][v] = V_FMA(av, bv[v], acc[i][v]);
        }
    }
    const UKR_VT al = V_SET1(alpha), bt = V_SET1(beta);
    GC_ST_UNROLL(8)
    for (int i = 0; i < M; i++) {
        GC_ST_UNROLL(8)
        for (int v = 0; v < NV; v++) {
            UKR_T *cp = c + i * ldc + v * UKR_VL;
            UKR_VT s = V_MUL(acc[i][v], al);
            if (beta != (UKR_T)0)
                s = V_FMA(bt, V_LOADU(cp), s);
            V_STOREU(cp, s);
        }
    }
}

/* Single columns past the last whole vector: the lanes' arithmetic, one element at a time. */
static void GC_SN(gvn_cols)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, const UKR_T *restrict a,
                            ptrdiff_t lda, const UKR_T *restrict b, ptrdiff_t ldb,
                            UKR_T *restrict c, ptrdiff_t ldc, UKR_T alpha, UKR_T beta)
{
    for (ptrdiff_t i = 0; i < m; i++)
        for (ptrdiff_t j = 0; j < n; j++) {
            UKR_T s = (UKR_T)0;
            for (ptrdiff_t p = 0; p < k; p++)
                s = S_FMA(a[i * lda + p], b[p * ldb + j], s);
            s *= alpha;
            UKR_T *cp = c + i * ldc + j;
            *cp = beta == (UKR_T)0 ? s : S_FMA(beta, *cp, s);
        }
}

#define GC_GVN_CASE(M)                                                                            \
    case M: {                                                                                     \
        const ptrdiff_t w = GC_ST_WIDTH(M) * UKR_VL;                                              \
        ptrdiff_t j = 0;                                                                          \
        for (; j + w <= n; j += w)                                                                \
            GC_SN(gvn_tile)(M, GC_ST_WIDTH(M), k, a, lda, b + j, ldb, c + j, ldc, alpha, beta);   \
        for (; j + UKR_VL <= n; j += UKR_VL)                                                      \
            GC_SN(gvn_tile)(M, 1, k, a, lda, b + j, ldb, c + j, ldc, alpha, beta);                \
        if (j < n)                                                                                \
            GC_SN(gvn_cols)(M, n - j, k, a, lda, b + j, ldb, c + j, ldc, alpha, beta);            \
    } break;

static void GC_SN(gemv_n)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, const UKR_T *a, ptrdiff_t lda,
                          const UKR_T *b, ptrdiff_t ldb, UKR_T *c, ptrdiff_t ldc, UKR_T alpha,
                          UKR_T beta)
{
    while (m > 0) {
        const ptrdiff_t mm = m > 8 ? 8 : m;
        switch (mm) {
            GC_GVN_CASE(1)
            GC_GVN_CASE(2)
            GC_GVN_CASE(3)
            GC_GVN_CASE(4)
            GC_GVN_CASE(5)
            GC_GVN_CASE(6)
            GC_GVN_CASE(7)
            GC_GVN_CASE(8)
        default: break;
        }
        m -= mm;
        a += mm * lda;
        c += mm * ldc;
    }
}
#undef GC_GVN_CASE

/* ---- layer_norm_row ------------------------------------------------------------------------- */

/* Sums of chunks of GC_LN_CHUNK elements in 4 vector accumulators, the chunk sums added in
 * double: (sum d, sum d^2) with d = (x - hi) - lo.  hi + lo is the mean estimate split into two
 * T values, so d keeps its relative precision when the mean is large next to the spread. */
#define GC_LN_CHUNK 256
static void GC_SN(ln_sums)(const UKR_T *restrict x, ptrdiff_t n, UKR_T hi, UKR_T lo, int squares,
                           double *s1, double *s2)
{
    const UKR_VT vh = V_SET1(hi), vl = V_SET1(lo);
    double t1 = 0.0, t2 = 0.0;
    for (ptrdiff_t j0 = 0; j0 < n; j0 += GC_LN_CHUNK) {
        const ptrdiff_t w = n - j0 < GC_LN_CHUNK ? n - j0 : GC_LN_CHUNK;
        const UKR_T *p = x + j0;
        UKR_VT a1[4] = {V_ZERO(), V_ZERO(), V_ZERO(), V_ZERO()};
        UKR_VT a2[4] = {V_ZERO(), V_ZERO(), V_ZERO(), V_ZERO()};
        ptrdiff_t j = 0;
        for (; j + 4 * UKR_VL <= w; j += 4 * UKR_VL) {
            GC_ST_UNROLL(4)
            for (int u = 0; u < 4; u++) {
                const UKR_VT d = V_SUB(V_SUB(V_LOADU(p + j + u * UKR_VL), vh), vl);
                a1[u] = V_ADD(a1[u], d);
                if (squares)
                    a2[u] = V_FMA(d, d, a2[u]);
            }
        }
        for (; j + UKR_VL <= w; j += UKR_VL) {
            const UKR_VT d = V_SUB(V_SUB(V_LOADU(p + j), vh), vl);
            a1[0] = V_ADD(a1[0], d);
            if (squares)
                a2[0] = V_FMA(d, d, a2[0]);
        }
        double c1 = (double)V_HSUM(V_ADD(V_ADD(a1[0], a1[1]), V_ADD(a1[2], a1[3])));
        double c2 = squares ? (double)V_HSUM(V_ADD(V_ADD(a2[0], a2[1]), V_ADD(a2[2], a2[3]))) : 0;
        for (; j < w; j++) {
            const UKR_T d = (p[j] - hi) - lo;
            c1 += (double)d;
            c2 += (double)d * (double)d;
        }
        t1 += c1;
        t2 += c2;
    }
    *s1 = t1;
    *s2 = t2;
}

/* y = (x - mean) / sqrt(var + eps) * w + b over one row of n >= 1 elements (w, b may be NULL;
 * y may equal x), with the biased variance.  The mean is estimated by a first pass, corrected by
 * the mean of the deviations in the second (which also sums their squares: var = E[d^2] -
 * E[d]^2, d small), and the deviations of the third pass are taken from the corrected mean
 * split into hi + lo. */
static void GC_SN(ln_row)(const UKR_T *x, const UKR_T *w, const UKR_T *b, UKR_T *y, ptrdiff_t n,
                          double eps)
{
    double s1, s2;
    GC_SN(ln_sums)(x, n, (UKR_T)0, (UKR_T)0, 0, &s1, &s2);
    const double m0 = s1 / (double)n;
    UKR_T hi = (UKR_T)m0, lo = (UKR_T)(m0 - (double)hi);
    GC_SN(ln_sums)(x, n, hi, lo, 1, &s1, &s2);
    const double dm = s1 / (double)n;
    const double mean = (double)hi + (double)lo + dm;
    double var = s2 / (double)n - dm * dm;
    if (var < 0.0)
        var = 0.0;
    const UKR_T rs = (UKR_T)(1.0 / sqrt(var + eps));
    hi = (UKR_T)mean;
    lo = (UKR_T)(mean - (double)hi);
    const UKR_VT vh = V_SET1(hi), vl = V_SET1(lo), vr = V_SET1(rs);
    ptrdiff_t j = 0;
#define GC_LN_LOOP(EXPR_V, EXPR_S)                                                                \
    do {                                                                                          \
        for (; j + UKR_VL <= n; j += UKR_VL) {                                                    \
            const UKR_VT d = V_MUL(V_SUB(V_SUB(V_LOADU(x + j), vh), vl), vr);                     \
            V_STOREU(y + j, EXPR_V);                                                              \
        }                                                                                         \
        for (; j < n; j++) {                                                                      \
            const UKR_T d = ((x[j] - hi) - lo) * rs;                                              \
            y[j] = EXPR_S;                                                                        \
        }                                                                                         \
    } while (0)
    if (w && b)
        GC_LN_LOOP(V_FMA(d, V_LOADU(w + j), V_LOADU(b + j)), S_FMA(d, w[j], b[j]));
    else if (w)
        GC_LN_LOOP(V_MUL(d, V_LOADU(w + j)), d * w[j]);
    else if (b)
        GC_LN_LOOP(V_ADD(d, V_LOADU(b + j)), d + b[j]);
    else
        GC_LN_LOOP(d, d);
#undef GC_LN_LOOP
}
#undef GC_LN_CHUNK

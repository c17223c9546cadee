/* GEMM micro-kernel template (contract in isa.h), included by cpu/isa/<isa>.c once per kernel.
 *
 * The including file defines the element type UKR_T, the vector type UKR_VT of UKR_VL lanes, the
 * tile UKR_MR rows x UKR_NV vectors, the name UKR_NAME, and the vector operations:
 *   V_ZERO()  V_LOADU(p)  V_STOREU(p, v)  V_SET1(x)
 *   V_FMA(a, b, c) = a * b + c     V_ADD(a, b)  V_RELU(x) = (x <= 0) ? 0 : x  V_PREFETCH(p)
 * The accumulators are an array the compiler keeps in registers (loops of constant trip count
 * are fully unrolled at -O2 and above). */

#ifndef GC_UKR_UNROLL
#define GC_UKR_PRAGMA(x) _Pragma(#x)
#define GC_UKR_UNROLL_(n) GC_UKR_PRAGMA(GCC unroll n)
#define GC_UKR_UNROLL(n) GC_UKR_UNROLL_(n)
#endif

#ifndef UKR_EPILOGUE
/* Shared tail of both kernels: acc (+ beta * C) (+ bias) (relu) stored to C; a macro so the
 * accumulators stay in registers. */
#define UKR_EPILOGUE()                                                                \
  do {                                                                                \
    if (beta == (UKR_T)1) {                                                           \
    GC_UKR_UNROLL(32)                                                                 \
        for (int i = 0; i < UKR_MR; i++)                                              \
    GC_UKR_UNROLL(8)                                                                  \
            for (int v = 0; v < UKR_NV; v++)                                          \
                acc[i][v] = V_ADD(acc[i][v], V_LOADU(c + i * ldc + v * UKR_VL));      \
    } else if (beta != (UKR_T)0) {                                                    \
        const UKR_VT bt = V_SET1(beta);                                               \
    GC_UKR_UNROLL(32)                                                                 \
        for (int i = 0; i < UKR_MR; i++)                                              \
    GC_UKR_UNROLL(8)                                                                  \
            for (int v = 0; v < UKR_NV; v++)                                          \
                acc[i][v] = V_FMA(bt, V_LOADU(c + i * ldc + v * UKR_VL), acc[i][v]);  \
    }                                                                                 \
    if (bias) {                                                                       \
    GC_UKR_UNROLL(8)                                                                  \
        for (int v = 0; v < UKR_NV; v++) {                                            \
            const UKR_VT bb = V_LOADU(bias + v * UKR_VL);                             \
    GC_UKR_UNROLL(32)                                                                 \
            for (int i = 0; i < UKR_MR; i++)                                          \
                acc[i][v] = V_ADD(acc[i][v], bb);                                     \
        }                                                                             \
    }                                                                                 \
    if (relu) {                                                                       \
    GC_UKR_UNROLL(32)                                                                 \
        for (int i = 0; i < UKR_MR; i++)                                              \
    GC_UKR_UNROLL(8)                                                                  \
            for (int v = 0; v < UKR_NV; v++)                                          \
                acc[i][v] = V_RELU(acc[i][v]);                                        \
    }                                                                                 \
    GC_UKR_UNROLL(32)                                                                 \
    for (int i = 0; i < UKR_MR; i++)                                                  \
    GC_UKR_UNROLL(8)                                                                  \
        for (int v = 0; v < UKR_NV; v++)                                              \
            V_STOREU(c + i * ldc + v * UKR_VL, acc[i][v]);                      \
  } while (0)
#endif

static void UKR_NAME(ptrdiff_t k, const UKR_T *restrict a, const UKR_T *restrict b, ptrdiff_t ldb,
                     UKR_T *restrict c, ptrdiff_t ldc, UKR_T beta, const UKR_T *restrict bias,
                     int relu)
{
    UKR_VT acc[UKR_MR][UKR_NV];
#pragma GCC unroll 32
    for (int i = 0; i < UKR_MR; i++) {
        V_PREFETCH(c + i * ldc);
#pragma GCC unroll 8
        for (int v = 0; v < UKR_NV; v++)
            acc[i][v] = V_ZERO();
    }
GC_UKR_UNROLL(UKR_UNROLL)
    for (ptrdiff_t p = 0; p < k; p++) {
        UKR_VT bv[UKR_NV];
#pragma GCC unroll 8
        for (int v = 0; v < UKR_NV; v++)
            bv[v] = V_LOADU(b + v * UKR_VL);
#pragma GCC unroll 32
        for (int i = 0; i < UKR_MR; i++) {
            const UKR_VT av = V_SET1(a[i]);
#pragma GCC unroll 8
            for (int v = 0; v < UKR_NV; v++)
                acc[i][v] = V_FMA(av, bv[v], acc[i][v]);
        }
        a += UKR_MR;
        b += ldb;
    }
    UKR_EPILOGUE();
}

/* The same tile with A read in place: A[i, p] at a[i * lda + p] (row-major A, all MR rows inside
 * the matrix); C = alpha * AB (+ beta * C ...).  Used for small problems, where packing A would
 * cost about as much as the multiply.  Define UKR_NAME_DA to get it. */
#ifdef UKR_NAME_DA
static void UKR_NAME_DA(ptrdiff_t k, const UKR_T *restrict a, ptrdiff_t lda,
                        const UKR_T *restrict b, ptrdiff_t ldb, UKR_T *restrict c, ptrdiff_t ldc,
                        UKR_T alpha, UKR_T beta, const UKR_T *restrict bias, int relu)
{
    UKR_VT acc[UKR_MR][UKR_NV];
#pragma GCC unroll 32
    for (int i = 0; i < UKR_MR; i++) {
        V_PREFETCH(c + i * ldc);
#pragma GCC unroll 8
        for (int v = 0; v < UKR_NV; v++)
            acc[i][v] = V_ZERO();
    }
    GC_UKR_UNROLL(2)
    for (ptrdiff_t p = 0; p < k; p++) {
        UKR_VT bv[UKR_NV];
#pragma GCC unroll 8
        for (int v = 0; v < UKR_NV; v++)
            bv[v] = V_LOADU(b + v * UKR_VL);
#pragma GCC unroll 32
        for (int i = 0; i < UKR_MR; i++) {
            const UKR_VT av = V_SET1(a[i * lda + p]);
#pragma GCC unroll 8
            for (int v = 0; v < UKR_NV; v++)
                acc[i][v] = V_FMA(av, bv[v], acc[i][v]);
        }
        b += ldb;
    }
    if (alpha != (UKR_T)1) {
        const UKR_VT al = V_SET1(alpha);
#pragma GCC unroll 32
        for (int i = 0; i < UKR_MR; i++)
#pragma GCC unroll 8
            for (int v = 0; v < UKR_NV; v++)
                acc[i][v] = V_MUL(acc[i][v], al);
    }
    UKR_EPILOGUE();
}
#endif

/* GEMM micro-kernel template (contract in isa.h), included by cpu/isa/<isa>.c once per kernel.
 *
 * The including file defines the element type UKR_T, the vector type UKR_VT of UKR_VL lanes, the
 * tile UKR_MR rows x UKR_NV vectors, the name UKR_NAME, and the vector operations:
 *   V_ZERO()  V_LOADU(p)  V_STOREU(p, v)  V_SET1(x)
 *   V_FMA(a, b, c) = a * b + c     V_ADD(a, b)  V_RELU(x) = (x <= 0) ? 0 : x  V_PREFETCH(p)
 * The accumulators are an array the compiler keeps in registers (loops of constant trip count
 * are fully unrolled at -O2 and above); isa/ukr_tile.h holds the tile's loops (the K step's
 * FMAs, the adds, relu, the store), shared with the convolution kernels isa/ukr_pw.h and
 * isa/ukr_conv.h. */

#include "isa/ukr_tile.h"

#ifndef UKR_EPILOGUE
/* Shared tail of the kernels: acc (+ beta * C) (+ bias) (relu) stored to C; a macro so the
 * accumulators stay in registers.  UKR_MR here is the rows of the kernel that expands it
 * (ukr_rows.h's edge kernels redefine it around their body). */
#define UKR_EPILOGUE()                                                                           \
    do {                                                                                         \
        if (beta == (UKR_T)1) {                                                                  \
            UKR_TILE_ADD(UKR_MR, c, ldc);                                                        \
        } else if (beta != (UKR_T)0) {                                                           \
            const UKR_VT bt = V_SET1(beta);                                                      \
            UKR_TILE_EACH(UKR_MR,                                                                \
                          acc[i][v] = V_FMA(bt, V_LOADU(c + i * ldc + v * UKR_VL), acc[i][v])); \
        }                                                                                        \
        if (bias) {                                                                              \
            GC_UKR_UNROLL(8)                                                                     \
            for (int v = 0; v < UKR_NV; v++) {                                                   \
                const UKR_VT bb = V_LOADU(bias + v * UKR_VL);                                    \
                GC_UKR_UNROLL(32)                                                                \
                for (int i = 0; i < UKR_MR; i++)                                                 \
                    acc[i][v] = V_ADD(acc[i][v], bb);                                            \
            }                                                                                    \
        }                                                                                        \
        if (relu)                                                                                \
            UKR_TILE_RELU(UKR_MR, V_RELU);                                                       \
        UKR_TILE_STORE(UKR_MR, c, ldc);                                                          \
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
        UKR_TILE_FMA(UKR_MR, a[i], b);
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
        UKR_TILE_FMA(UKR_MR, a[i * lda + p], b);
        b += ldb;
    }
    if (alpha != (UKR_T)1) {
        const UKR_VT al = V_SET1(alpha);
        UKR_TILE_EACH(UKR_MR, acc[i][v] = V_MUL(acc[i][v], al));
    }
    UKR_EPILOGUE();
}
#endif

/* Edge kernels (define UKR_NAME_ROWS to get them): the first `rows` (1 .. UKR_MR - 1) rows of
 * the tile, from a packed A panel of UKR_MR rows, storing only those rows of C.  The driver runs
 * a last, partial row panel through them instead of computing a full tile on zero-padded rows
 * (m = 128 on 14-row tiles: 10 panels' time for 9 1/7).  Each element gets the full kernel's
 * operations in its order: the same bits. */
#ifdef UKR_NAME_ROWS
#define UKR_ROWS_CAT_(a, b) a##_##b
#define UKR_ROWS_CAT(a, b) UKR_ROWS_CAT_(a, b)
#define UKR_ER 1
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 2
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 3
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 4
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 5
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 6
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 7
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 8
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 9
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 10
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 11
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 12
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 13
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 14
#include "isa/ukr_rows.h"
#undef UKR_ER
#define UKR_ER 15
#include "isa/ukr_rows.h"
#undef UKR_ER

#define UKR_ROWS_CASE(r)                                                                          \
    case r: UKR_ROWS_CAT(UKR_NAME_ROWS, r)(k, a, b, ldb, c, ldc, beta, bias, relu); return
static void UKR_NAME_ROWS(int rows, ptrdiff_t k, const UKR_T *restrict a, const UKR_T *restrict b,
                          ptrdiff_t ldb, UKR_T *restrict c, ptrdiff_t ldc, UKR_T beta,
                          const UKR_T *restrict bias, int relu)
{
    switch (rows) {
#if UKR_MR > 1
        UKR_ROWS_CASE(1);
#endif
#if UKR_MR > 2
        UKR_ROWS_CASE(2);
#endif
#if UKR_MR > 3
        UKR_ROWS_CASE(3);
#endif
#if UKR_MR > 4
        UKR_ROWS_CASE(4);
#endif
#if UKR_MR > 5
        UKR_ROWS_CASE(5);
#endif
#if UKR_MR > 6
        UKR_ROWS_CASE(6);
#endif
#if UKR_MR > 7
        UKR_ROWS_CASE(7);
#endif
#if UKR_MR > 8
        UKR_ROWS_CASE(8);
#endif
#if UKR_MR > 9
        UKR_ROWS_CASE(9);
#endif
#if UKR_MR > 10
        UKR_ROWS_CASE(10);
#endif
#if UKR_MR > 11
        UKR_ROWS_CASE(11);
#endif
#if UKR_MR > 12
        UKR_ROWS_CASE(12);
#endif
#if UKR_MR > 13
        UKR_ROWS_CASE(13);
#endif
#if UKR_MR > 14
        UKR_ROWS_CASE(14);
#endif
#if UKR_MR > 15
        UKR_ROWS_CASE(15);
#endif
    default: break;
    }
}
#undef UKR_ROWS_CASE
#undef UKR_ROWS_CAT
#undef UKR_ROWS_CAT_
#endif

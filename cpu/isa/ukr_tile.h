/* The register tile of the micro-kernel templates, written once: isa/ukr.h (the GEMM's, and its
 * edge kernels isa/ukr_rows.h), isa/ukr_pw.h (pointwise convolution) and isa/ukr_conv.h (direct
 * convolution) all keep acc[rows][UKR_NV], vectors of UKR_VL elements, over the including
 * file's UKR_T, UKR_VT, UKR_VL, UKR_NV and V_* operations (the only ISA-specific part).  Macros,
 * so that the accumulators stay in registers and each instance's row count stays a constant:
 * loops of constant trip count are fully unrolled. */
#ifndef GC_UKR_TILE_H
#define GC_UKR_TILE_H

#define GC_UKR_PRAGMA(x) _Pragma(#x)
#define GC_UKR_UNROLL_(n) GC_UKR_PRAGMA(GCC unroll n)
#define GC_UKR_UNROLL(n) GC_UKR_UNROLL_(n)

/* The statement (its rest of the arguments) for each accumulator acc[i][v], i < rows, v < UKR_NV:
 * row by row, a row's vectors in order. */
#define UKR_TILE_EACH(rows, ...)                                                                 \
    GC_UKR_UNROLL(32)                                                                            \
    for (int i = 0; i < (rows); i++)                                                             \
        GC_UKR_UNROLL(8)                                                                         \
        for (int v = 0; v < UKR_NV; v++)                                                         \
            __VA_ARGS__

/* One K step: the UKR_NV vectors at bp, times A_I (row i's element of this step, an expression
 * of i) broadcast, added into each row: acc = a * b + acc, in K order.  This FMA chain is what
 * gives every kernel here the GEMM's bits. */
#define UKR_TILE_FMA(rows, A_I, bp)                                                              \
    do {                                                                                         \
        UKR_VT bv[UKR_NV];                                                                       \
        GC_UKR_UNROLL(8)                                                                         \
        for (int v = 0; v < UKR_NV; v++)                                                         \
            bv[v] = V_LOADU((bp) + v * UKR_VL);                                                  \
        GC_UKR_UNROLL(32)                                                                        \
        for (int i = 0; i < (rows); i++) {                                                       \
            const UKR_VT av = V_SET1(A_I);                                                       \
            GC_UKR_UNROLL(8)                                                                     \
            for (int v = 0; v < UKR_NV; v++)                                                     \
                acc[i][v] = V_FMA(av, bv[v], acc[i][v]);                                         \
        }                                                                                        \
    } while (0)

/* acc + the tile at m (row stride ld), each element added on its own */
#define UKR_TILE_ADD(rows, m, ld)                                                                \
    UKR_TILE_EACH(rows, acc[i][v] = V_ADD(acc[i][v], V_LOADU((m) + i * (ld) + v * UKR_VL)))

/* relu(acc), RELU the kernel's vector relu */
#define UKR_TILE_RELU(rows, RELU) UKR_TILE_EACH(rows, acc[i][v] = RELU(acc[i][v]))

/* the tile stored to c (row stride ldc) */
#define UKR_TILE_STORE(rows, c, ldc)                                                             \
    UKR_TILE_EACH(rows, V_STOREU((c) + i * (ldc) + v * UKR_VL, acc[i][v]))

#endif

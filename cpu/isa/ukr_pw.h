/* Pointwise (1x1) convolution micro-kernel template (contract in isa.h: gc_pwukr_f32; driver
 * cpu/conv_pw.c), included by cpu/isa/<isa>.c with the macros of isa/ukr_conv.h (UKR_T, UKR_VT,
 * UKR_VL, UKR_MR, UKR_NV, V_ZERO, V_LOADU, V_STOREU, V_SET1, V_FMA, V_ADD), UKR_PW_RELU(x)
 * ((x <= 0) ? 0 : x, NaN kept: the float32 GEMM's V_RELU, one definition in each ISA's file)
 * and the name UKR_PW_NAME.
 *
 * The GEMM's register tile and FMA chain (isa/ukr.h: rows from a packed A panel, columns from a
 * packed B panel, acc = a * b + acc in p order, then acc + c for a later K block), with a
 * convolution's epilogue applied in registers before the one store: + rb[i] (a bias per row,
 * i.e. per output channel), + res (the residual, in c's layout), relu, each rounded on its own.
 * Those are the operations gemm.c runs on the stored tile afterwards (gemm_epi.h's epi_rows), so
 * an element gets the GEMM path's bits while the tile makes one trip to memory instead of
 * three, and the residual rows are prefetched while the FMAs run.  UKR_PW_LDB (default: the
 * tile's width) is the B panels' row stride: a narrower instance (UKR_NV halved: the half
 * tile; 8-wide vectors: AVX-512's quarter tile) reads a run of columns of full-width panels
 * (the driver offsets B to them), for a last column panel of at most a half / a quarter.  Edge
 * tiles (mv < MR rows or nv < NR columns inside the matrix: A and B panels zero-padded) store
 * only those. */

#include "isa/ukr_tile.h"

#ifndef UKR_PW_LDB /* the packed B panels' row stride: the tile's width, or a wider panel's */
#define UKR_PW_LDB (UKR_NV * UKR_VL)
#endif
#ifndef UKR_PW_CAT
#define UKR_PW_CAT_(a, b) a##_##b
#define UKR_PW_CAT(a, b) UKR_PW_CAT_(a, b)
#endif

/* An edge tile's epilogue (mv < MR rows or nv < NR columns stored): the full tile's operations
 * on the elements inside, a partial vector through a stack copy. */
static inline __attribute__((always_inline)) UKR_VT UKR_PW_CAT(UKR_PW_NAME, part)(
    UKR_VT x, UKR_T *restrict c, const UKR_T *restrict r, int n, int acc_in, const UKR_T *rb,
    int relu)
{
    UKR_T t[UKR_VL], u[UKR_VL];
    for (int e = 0; e < UKR_VL; e++) {
        t[e] = acc_in && e < n ? c[e] : (UKR_T)0;
        u[e] = r && e < n ? r[e] : (UKR_T)0;
    }
    if (acc_in)
        x = V_ADD(x, V_LOADU(t));
    if (rb)
        x = V_ADD(x, V_SET1(*rb));
    if (r)
        x = V_ADD(x, V_LOADU(u));
    if (relu)
        x = UKR_PW_RELU(x);
    V_STOREU(t, x);
    for (int e = 0; e < n; e++)
        c[e] = t[e];
    return x;
}

static void UKR_PW_NAME(ptrdiff_t k, const UKR_T *restrict a, const UKR_T *restrict b,
                        UKR_T *restrict c, ptrdiff_t ldc, int mv, int nv, int acc_in,
                        const UKR_T *restrict rb, const UKR_T *restrict res, int relu,
                        const UKR_T *cn, const UKR_T *rn)
{
    UKR_VT acc[UKR_MR][UKR_NV];
    const int full = mv == UKR_MR && nv == UKR_NV * UKR_VL;
#pragma GCC unroll 32
    for (int i = 0; i < UKR_MR; i++) {
        /* this tile's lines (the previous call requested them unless it ended a row panel) */
        for (int v = 0; full && v < UKR_NV * UKR_VL; v += 64 / (int)sizeof(UKR_T)) {
            __builtin_prefetch(c + i * ldc + v, 1, 3);
            if (res)
                __builtin_prefetch(res + i * ldc + v, 0, 3);
        }
#pragma GCC unroll 8
        for (int v = 0; v < UKR_NV; v++)
            acc[i][v] = V_ZERO();
    }
    /* the next tile along the rows (the driver's next call, a full one: its c and res at cn, rn;
     * NULL where there is none): its lines requested one per K step, so that few misses are in
     * flight at once and each has a tile's time (a burst at the start of the tile left a fourth
     * of a K = 64 layer's time waiting on its stores and residual loads) */
    const int lpr = (int)((UKR_NV * UKR_VL * sizeof(UKR_T) + 63) / 64), fl = 64 / sizeof(UKR_T);
    const ptrdiff_t npf = full && cn ? UKR_MR * lpr : 0;
#pragma GCC unroll 4
    for (ptrdiff_t p = 0; p < k; p++) {
        if (p < npf) {
            const ptrdiff_t o = p / lpr * ldc + p % lpr * fl;
            __builtin_prefetch(cn + o, 1, 3);
            if (rn)
                __builtin_prefetch(rn + o, 0, 3);
        }
        UKR_TILE_FMA(UKR_MR, a[i], b);
        a += UKR_MR;
        b += UKR_PW_LDB;
    }
    if (!full) {
#pragma GCC unroll 32
        for (int i = 0; i < UKR_MR; i++) {
            if (i >= mv)
                break;
#pragma GCC unroll 8
            for (int v = 0; v < UKR_NV; v++) {
                const int n = nv - v * UKR_VL;
                if (n <= 0)
                    break;
                (void)UKR_PW_CAT(UKR_PW_NAME, part)(acc[i][v], c + i * ldc + v * UKR_VL,
                                                    res ? res + i * ldc + v * UKR_VL : NULL,
                                                    n < UKR_VL ? n : UKR_VL, acc_in,
                                                    rb ? rb + i : NULL, relu);
            }
        }
        return;
    }
    if (acc_in)
        UKR_TILE_ADD(UKR_MR, c, ldc);
    if (rb) {
#pragma GCC unroll 32
        for (int i = 0; i < UKR_MR; i++) {
            const UKR_VT bb = V_SET1(rb[i]);
#pragma GCC unroll 8
            for (int v = 0; v < UKR_NV; v++)
                acc[i][v] = V_ADD(acc[i][v], bb);
        }
    }
    if (res)
        UKR_TILE_ADD(UKR_MR, res, ldc);
    if (relu)
        UKR_TILE_RELU(UKR_MR, UKR_PW_RELU);
    UKR_TILE_STORE(UKR_MR, c, ldc);
}

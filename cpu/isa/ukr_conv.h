/* Direct-convolution micro-kernel template (contract in isa.h: gc_cukr_f32), included by
 * cpu/isa/<isa>.c with the same macros as isa/ukr.h (UKR_T, UKR_VT, UKR_VL, UKR_MR, UKR_NV,
 * V_ZERO, V_LOADU, V_STOREU, V_SET1, V_FMA, V_ADD) and the name UKR_CONV_NAME.
 *
 * The register tile is the GEMM's (MR rows broadcast, NR = NV vectors of columns) with its A
 * operand read where it lies instead of from a packed panel: row i of step p is the image
 * element img[rows[i] + koff[p]] (an output pixel's window, or a weight-gradient row's pixel).
 * Each accumulator runs the GEMM micro-kernel's FMA chain (acc = a * b + acc in p order), and
 * the tile is then stored (acc_in == 0) or added to the tile already in c (acc + c), as the
 * GEMM's beta = 0 / beta = 1 steps do: the same bits as the im2col GEMM over the same K blocks. */

#include "isa/ukr_tile.h"

static void UKR_CONV_NAME(ptrdiff_t k, const UKR_T *restrict img, const ptrdiff_t *restrict rows,
                          const int32_t *restrict koff, const UKR_T *restrict b,
                          UKR_T *restrict c, int acc_in)
{
    const UKR_T *r[UKR_MR];
    UKR_VT acc[UKR_MR][UKR_NV];
#pragma GCC unroll 32
    for (int i = 0; i < UKR_MR; i++) {
        r[i] = img + rows[i];
#pragma GCC unroll 8
        for (int v = 0; v < UKR_NV; v++)
            acc[i][v] = V_ZERO();
    }
#pragma GCC unroll 2
    for (ptrdiff_t p = 0; p < k; p++) {
        const ptrdiff_t o = koff[p];
        UKR_TILE_FMA(UKR_MR, r[i][o], b);
        b += UKR_NV * UKR_VL;
    }
    UKR_TILE_EACH(UKR_MR, {
        UKR_T *d = c + (i * UKR_NV + v) * UKR_VL;
        V_STOREU(d, acc_in ? V_ADD(acc[i][v], V_LOADU(d)) : acc[i][v]);
    });
}

/* AVX-512 few-input-channels direct convolution (compiled with -mavx512f -mavx2 -mfma;
 * isa/ukr_c1.h, conv_c1.c): 16 output pixels a vector, 16 output channels' accumulators (with
 * the pixel vector 17 of the 32 ZMM registers; the weights broadcast from memory into the FMAs). */
#include <immintrin.h>

#include "isa.h"

#include "isa/vec_f32x16.h"
/* (x <= 0) ? +0 : x, NaN kept: the float32 GEMM's V_RELU (avx512.c's RELU_PS) */
#define UKR_C1_RELU(x)                                                                          \
    _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LE_OQ), x,             \
                         _mm512_setzero_ps())
#define UKR_T float
#define UKR_C1_OB 16
#define UKR_C1_NAME c1_avx512_f32
#define UKR_C1_BODY c1_avx512_body
#include "isa/ukr_c1.h"

void gc_conv_c1_fill_avx512(gc_isa_kernels *k)
{
    k->c1ukr_f32 = c1_avx512_f32;
    k->c1_ob = UKR_C1_OB;
    k->c1_vl = UKR_VL;
}

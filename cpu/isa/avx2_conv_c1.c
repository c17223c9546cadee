/* AVX2 few-input-channels direct convolution (compiled with -mavx2 -mfma; isa/ukr_c1.h,
 * conv_c1.c): 8 output pixels a vector, 8 output channels' accumulators (with the pixel vector
 * and a broadcast weight 10 of the 16 YMM registers). */
#include <immintrin.h>

#include "isa.h"

#include "isa/vec_f32x8.h"
/* (x <= 0) ? +0 : x, NaN kept: the float32 GEMM's V_RELU (avx2.c's RELU_PS) */
#define UKR_C1_RELU(x) _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LE_OQ), x)
#define UKR_T float
#define UKR_C1_OB 8
#define UKR_C1_NAME c1_avx2_f32
#define UKR_C1_BODY c1_avx2_body
#include "isa/ukr_c1.h"

void gc_conv_c1_fill_avx2(gc_isa_kernels *k)
{
    k->c1ukr_f32 = c1_avx2_f32;
    k->c1_ob = UKR_C1_OB;
    k->c1_vl = UKR_VL;
}

/* SSE2 few-input-channels direct convolution (compiled with -msse2; isa/ukr_c1.h, conv_c1.c):
 * 4 output pixels a vector, 8 output channels' accumulators; no FMA: a multiply, then an add,
 * as the SSE2 GEMM (isa/vec_f32x4.h). */
#include <emmintrin.h>

#include "isa.h"

#include "isa/vec_f32x4.h"
/* (x <= 0) ? +0 : x, NaN kept: the float32 GEMM's V_RELU (sse2.c's RELU_PS) */
#define UKR_C1_RELU(x) _mm_andnot_ps(_mm_cmple_ps(x, _mm_setzero_ps()), x)
#define UKR_T float
#define UKR_C1_OB 8
#define UKR_C1_NAME c1_sse2_f32
#define UKR_C1_BODY c1_sse2_body
#include "isa/ukr_c1.h"

void gc_conv_c1_fill_sse2(gc_isa_kernels *k)
{
    k->c1ukr_f32 = c1_sse2_f32;
    k->c1_ob = UKR_C1_OB;
    k->c1_vl = UKR_VL;
}

/* AVX2 + FMA kernels (compiled with -mavx2 -mfma): GEMM micro-kernels 6x16 float and 6x8 double
 * (12 accumulators of the 16 YMM registers), and the float32 vector math of isa/vmath.h. */
#include <immintrin.h>

#include "isa.h"

#define UKR_UNROLL 4
#define UKR_MR 6
#define UKR_NV 2
#define V_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)

#define UKR_T float
#define UKR_VT __m256
#define UKR_VL 8
#define V_ZERO() _mm256_setzero_ps()
#define V_LOAD(p) _mm256_load_ps(p)
#define V_LOADU(p) _mm256_loadu_ps(p)
#define V_STOREU(p, x) _mm256_storeu_ps(p, x)
#define V_SET1(x) _mm256_set1_ps(x)
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_RELU(x) _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LE_OQ), x)
#define UKR_NAME gemm_avx2_f32_6x16
#include "isa/ukr.h"
#undef UKR_T
#undef UKR_VT
#undef UKR_VL
#undef V_ZERO
#undef V_LOAD
#undef V_LOADU
#undef V_STOREU
#undef V_SET1
#undef V_FMA
#undef V_ADD
#undef V_RELU
#undef UKR_NAME

#define UKR_T double
#define UKR_VT __m256d
#define UKR_VL 4
#define V_ZERO() _mm256_setzero_pd()
#define V_LOAD(p) _mm256_load_pd(p)
#define V_LOADU(p) _mm256_loadu_pd(p)
#define V_STOREU(p, x) _mm256_storeu_pd(p, x)
#define V_SET1(x) _mm256_set1_pd(x)
#define V_FMA(a, b, c) _mm256_fmadd_pd(a, b, c)
#define V_ADD(a, b) _mm256_add_pd(a, b)
#define V_RELU(x) _mm256_andnot_pd(_mm256_cmp_pd(x, _mm256_setzero_pd(), _CMP_LE_OQ), x)
#define UKR_NAME gemm_avx2_f64_6x8
#include "isa/ukr.h"

void gc_isa_fill_avx2(gc_isa_kernels *k)
{
    k->mr_f32 = 6;
    k->nr_f32 = 16;
    k->ukr_f32 = gemm_avx2_f32_6x16;
    k->ukr_f32_name = "gemm_avx2_f32_6x16";
    k->mr_f64 = 6;
    k->nr_f64 = 8;
    k->ukr_f64 = gemm_avx2_f64_6x8;
    k->ukr_f64_name = "gemm_avx2_f64_6x8";
}

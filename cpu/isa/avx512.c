/* AVX-512F kernels (compiled with -mavx512f -mavx2 -mfma): GEMM micro-kernels 14x32 float and
 * 14x16 double (28 accumulators of the 32 ZMM registers), and the float32 vector math of
 * isa/vmath.h. */
#include <immintrin.h>

#include "isa.h"

#ifndef GC_AVX512_MR
#define GC_AVX512_MR 14
#endif

#define UKR_UNROLL 4
#define UKR_MR GC_AVX512_MR
#define UKR_NV 2
#define V_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)

#define UKR_T float
#define UKR_VT __m512
#define UKR_VL 16
#define V_ZERO() _mm512_setzero_ps()
#define V_LOAD(p) _mm512_load_ps(p)
#define V_LOADU(p) _mm512_loadu_ps(p)
#define V_STOREU(p, x) _mm512_storeu_ps(p, x)
#define V_SET1(x) _mm512_set1_ps(x)
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_RELU(x)                                                                                 \
    _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LE_OQ), x,               \
                         _mm512_setzero_ps())
#define UKR_NAME gemm_avx512_f32
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
#define UKR_VT __m512d
#define UKR_VL 8
#define V_ZERO() _mm512_setzero_pd()
#define V_LOAD(p) _mm512_load_pd(p)
#define V_LOADU(p) _mm512_loadu_pd(p)
#define V_STOREU(p, x) _mm512_storeu_pd(p, x)
#define V_SET1(x) _mm512_set1_pd(x)
#define V_FMA(a, b, c) _mm512_fmadd_pd(a, b, c)
#define V_ADD(a, b) _mm512_add_pd(a, b)
#define V_RELU(x)                                                                                 \
    _mm512_mask_blend_pd(_mm512_cmp_pd_mask(x, _mm512_setzero_pd(), _CMP_LE_OQ), x,               \
                         _mm512_setzero_pd())
#define UKR_NAME gemm_avx512_f64
#include "isa/ukr.h"

#define GC_STR_(x) #x
#define GC_STR(x) GC_STR_(x)

void gc_isa_fill_avx512(gc_isa_kernels *k)
{
    k->mr_f32 = GC_AVX512_MR;
    k->nr_f32 = 32;
    k->ukr_f32 = gemm_avx512_f32;
    k->ukr_f32_name = "gemm_avx512_f32_" GC_STR(GC_AVX512_MR) "x32";
    k->mr_f64 = GC_AVX512_MR;
    k->nr_f64 = 16;
    k->ukr_f64 = gemm_avx512_f64;
    k->ukr_f64_name = "gemm_avx512_f64_" GC_STR(GC_AVX512_MR) "x16";
}

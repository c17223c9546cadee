/* AVX2 + FMA kernels (compiled with -mavx2 -mfma): GEMM micro-kernels 6x16 float and 6x8 double
 * (12 accumulators of the 16 YMM registers), and the float32 vector math of isa/vmath.h. */
#include <immintrin.h>

#include "isa.h"

/* lane sums for isa/stream.h */
static inline float gc_avx2_hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}
static inline double gc_avx2_hsum_pd(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

#define UKR_UNROLL 4
#define UKR_MR 6
#define UKR_NV 2
#define V_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)

#define UKR_T float
#define UKR_VT __m256
#define UKR_VL 8
#define V_ZERO() _mm256_setzero_ps()
#define V_LOADU(p) _mm256_loadu_ps(p)
#define V_STOREU(p, x) _mm256_storeu_ps(p, x)
#define V_SET1(x) _mm256_set1_ps(x)
#define V_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define V_ADD(a, b) _mm256_add_ps(a, b)
#define V_MUL(a, b) _mm256_mul_ps(a, b)
#define V_RELU(x) _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LE_OQ), x)
#define UKR_NAME gemm_avx2_f32_6x16
#define UKR_NAME_DA gemm_da_avx2_f32_6x16
#include "isa/ukr.h"
#define V_SUB(a, b) _mm256_sub_ps(a, b)
#define V_HSUM(v) gc_avx2_hsum_ps(v)
#define S_FMA(a, b, c) __builtin_fmaf(a, b, c)
#define STREAM_ACC 8
#define STREAM_SFX f32
#include "isa/stream.h"
#undef V_SUB
#undef V_HSUM
#undef S_FMA
#undef STREAM_ACC
#undef STREAM_SFX
#undef UKR_T
#undef UKR_VT
#undef UKR_VL
#undef V_ZERO
#undef V_LOADU
#undef V_STOREU
#undef V_SET1
#undef V_FMA
#undef V_ADD
#undef V_RELU
#undef UKR_NAME
#undef UKR_NAME_DA
#undef V_MUL

#define UKR_T double
#define UKR_VT __m256d
#define UKR_VL 4
#define V_ZERO() _mm256_setzero_pd()
#define V_LOADU(p) _mm256_loadu_pd(p)
#define V_STOREU(p, x) _mm256_storeu_pd(p, x)
#define V_SET1(x) _mm256_set1_pd(x)
#define V_FMA(a, b, c) _mm256_fmadd_pd(a, b, c)
#define V_ADD(a, b) _mm256_add_pd(a, b)
#define V_MUL(a, b) _mm256_mul_pd(a, b)
#define V_RELU(x) _mm256_andnot_pd(_mm256_cmp_pd(x, _mm256_setzero_pd(), _CMP_LE_OQ), x)
#define UKR_NAME gemm_avx2_f64_6x8
#define UKR_NAME_DA gemm_da_avx2_f64_6x8
#include "isa/ukr.h"
#define V_SUB(a, b) _mm256_sub_pd(a, b)
#define V_HSUM(v) gc_avx2_hsum_pd(v)
#define S_FMA(a, b, c) __builtin_fma(a, b, c)
#define STREAM_ACC 8
#define STREAM_SFX f64
#include "isa/stream.h"
#undef V_SUB
#undef V_HSUM
#undef S_FMA
#undef STREAM_ACC
#undef STREAM_SFX

static void gc_isa_fill_avx2_vmath(gc_isa_kernels *k);

#include "isa/optim.h"

void gc_isa_fill_avx2(gc_isa_kernels *k)
{
    gc_optim_fill(k);
    gc_isa_fill_avx2_vmath(k);
    k->mr_f32 = 6;
    k->nr_f32 = 16;
    k->ukr_f32 = gemm_avx2_f32_6x16;
    k->ukr_da_f32 = gemm_da_avx2_f32_6x16;
    k->ukr_f32_name = "gemm_avx2_f32_6x16";
    k->mr_f64 = 6;
    k->nr_f64 = 8;
    k->ukr_f64 = gemm_avx2_f64_6x8;
    k->ukr_da_f64 = gemm_da_avx2_f64_6x8;
    k->ukr_f64_name = "gemm_avx2_f64_6x8";
    k->gemv_n_f32 = gemv_n_f32;
    k->gemv_t_f32 = gemv_t_f32;
    k->gemv_n_f64 = gemv_n_f64;
    k->gemv_t_f64 = gemv_t_f64;
    k->ln_row_f32 = ln_row_f32;
    k->ln_row_f64 = ln_row_f64;
}

/* ---- float32 vector math (isa/vmath.h) ------------------------------------------------------ */

#include <math.h>

static inline __m256i gc_avx2_lanes_below(ptrdiff_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

#define VF __m256
#define VI __m256i
#define VM __m256
#define VD __m256d
#define VLANES 8
#define vf_set1(v) _mm256_set1_ps(v)
#define vf_loadu(p) _mm256_loadu_ps(p)
#define vf_storeu(p, v) _mm256_storeu_ps(p, v)
#define vf_loadn(p, n) _mm256_maskload_ps(p, gc_avx2_lanes_below(n))
#define vf_storen(p, v, n) _mm256_maskstore_ps(p, gc_avx2_lanes_below(n), v)
#define vf_add _mm256_add_ps
#define vf_sub _mm256_sub_ps
#define vf_mul _mm256_mul_ps
#define vf_div _mm256_div_ps
#define vf_fma _mm256_fmadd_ps
#define vf_fnma _mm256_fnmadd_ps
#define vf_min _mm256_min_ps
#define vf_max _mm256_max_ps
#define vf_and _mm256_and_ps
#define vf_or _mm256_or_ps
#define vf_xor _mm256_xor_ps
#define vf_andnot _mm256_andnot_ps
#define vf_round(x) _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vf_cvti _mm256_cvtps_epi32
#define vi_cvtf _mm256_cvtepi32_ps
#define vi_set1 _mm256_set1_epi32
#define vi_add _mm256_add_epi32
#define vi_sub _mm256_sub_epi32
#define vi_srai _mm256_srai_epi32
#define vi_slli _mm256_slli_epi32
#define vi_and _mm256_and_si256
#define vi_or _mm256_or_si256
#define vf_asi _mm256_castps_si256
#define vi_asf _mm256_castsi256_ps
#define vf_lt(a, b) _mm256_cmp_ps(a, b, _CMP_LT_OQ)
#define vf_le(a, b) _mm256_cmp_ps(a, b, _CMP_LE_OQ)
#define vf_gt(a, b) _mm256_cmp_ps(a, b, _CMP_GT_OQ)
#define vf_ge(a, b) _mm256_cmp_ps(a, b, _CMP_GE_OQ)
#define vf_eq(a, b) _mm256_cmp_ps(a, b, _CMP_EQ_OQ)
#define vf_isnan(a) _mm256_cmp_ps(a, a, _CMP_UNORD_Q)
#define vf_blend(m, a, b) _mm256_blendv_ps(a, b, m)
#define vd_lo(x) _mm256_cvtps_pd(_mm256_castps256_ps128(x))
#define vd_hi(x) _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))
#define vd_tof2(lo, hi)                                                                           \
    _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1)
#define vd_set1 _mm256_set1_pd
#define vd_add _mm256_add_pd
#define vd_sub _mm256_sub_pd
#define vd_mul _mm256_mul_pd
#define vd_fma _mm256_fmadd_pd
#define vd_storeu _mm256_storeu_pd

#include "isa/vmath.h"

VM_ARRAY(vexp_avx2, vm_exp)
VM_ARRAY(vlog_avx2, vm_log)
VM_ARRAY(vtanh_avx2, vm_tanh)
VM_ARRAY(vsigmoid_avx2, vm_sigmoid)
VM_ARRAY(vgelu_avx2, vm_gelu)
VM_ARRAY(vgelu_tanh_avx2, vm_gelu_tanh)
VM_EXP_SHIFT_SUM(vexp_shift_sum_avx2)
VM_MAX(vmax_avx2)
VM_SUB2_MUL(vsub2_mul_avx2)

static void gc_isa_fill_avx2_vmath(gc_isa_kernels *k)
{
    k->vunary_f32[GC_UNARY_EXP] = vexp_avx2;
    k->vunary_f32[GC_UNARY_LOG] = vlog_avx2;
    k->vunary_f32[GC_UNARY_TANH] = vtanh_avx2;
    k->vunary_f32[GC_UNARY_SIGMOID] = vsigmoid_avx2;
    k->vunary_f32[GC_UNARY_GELU] = vgelu_avx2;
    k->vunary_f32[GC_UNARY_GELU_TANH] = vgelu_tanh_avx2;
    k->vexp_shift_sum_f32 = vexp_shift_sum_avx2;
    k->vmax_f32 = vmax_avx2;
    k->vsub2_mul_f32 = vsub2_mul_avx2;
}

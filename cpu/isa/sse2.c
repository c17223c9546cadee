/* SSE2 kernels (x86 baseline; compiled with -msse2): GEMM micro-kernels 4x8 float, 4x4 double.
 * No FMA: a * b + c is a multiply and an add.  Vector math stays on the libm loops. */
#include <emmintrin.h>

#include "isa.h"

/* lane sums for isa/stream.h */
static inline float gc_sse2_hsum_ps(__m128 s)
{
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}
static inline double gc_sse2_hsum_pd(__m128d s)
{
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

#define UKR_UNROLL 2
#define UKR_MR 4
#define UKR_NV 2
#define V_PREFETCH(p) _mm_prefetch((const char *)(p), _MM_HINT_T0)

#define UKR_T float
#include "isa/vec_f32x4.h"
#define V_MUL(a, b) _mm_mul_ps(a, b)
/* (x <= 0) ? +0 : x, NaN kept: the float32 GEMM's V_RELU and the pointwise kernel's */
#define RELU_PS(x) _mm_andnot_ps(_mm_cmple_ps(x, _mm_setzero_ps()), x)
#define V_RELU(x) RELU_PS(x)
#define UKR_NAME gemm_sse2_f32_4x8
#define UKR_NAME_DA gemm_da_sse2_f32_4x8
#include "isa/ukr.h"
#define V_SUB(a, b) _mm_sub_ps(a, b)
#define V_HSUM(v) gc_sse2_hsum_ps(v)
#define S_FMA(a, b, c) ((a) * (b) + (c))
#define STREAM_ACC 8
#define STREAM_SFX f32
#include "isa/stream.h"
#include "isa/ukr_undef.h"

#define UKR_T double
#define UKR_VT __m128d
#define UKR_VL 2
#define V_ZERO() _mm_setzero_pd()
#define V_LOADU(p) _mm_loadu_pd(p)
#define V_STOREU(p, x) _mm_storeu_pd(p, x)
#define V_SET1(x) _mm_set1_pd(x)
#define V_FMA(a, b, c) _mm_add_pd(_mm_mul_pd(a, b), c)
#define V_ADD(a, b) _mm_add_pd(a, b)
#define V_MUL(a, b) _mm_mul_pd(a, b)
#define V_RELU(x) _mm_andnot_pd(_mm_cmple_pd(x, _mm_setzero_pd()), x)
#define UKR_NAME gemm_sse2_f64_4x4
#define UKR_NAME_DA gemm_da_sse2_f64_4x4
#include "isa/ukr.h"
#define V_SUB(a, b) _mm_sub_pd(a, b)
#define V_HSUM(v) gc_sse2_hsum_pd(v)
#define S_FMA(a, b, c) ((a) * (b) + (c))
#define STREAM_ACC 8
#define STREAM_SFX f64
#include "isa/stream.h"
#undef V_SUB
#undef V_HSUM
#undef S_FMA
#undef STREAM_ACC
#undef STREAM_SFX

#include "isa/optim.h"
#include "isa/relu_bias.h"
#include "isa/winograd.h"

void gc_isa_fill_sse2(gc_isa_kernels *k)
{
    gc_optim_fill(k);
    gc_relu_bias_fill(k);
    gc_winograd_fill(k);
    k->mr_f32 = 4;
    k->nr_f32 = 8;
    k->ukr_f32 = gemm_sse2_f32_4x8;
    k->ukr_da_f32 = gemm_da_sse2_f32_4x8;
    k->ukr_f32_name = "gemm_sse2_f32_4x8";
    k->mr_f64 = 4;
    k->nr_f64 = 4;
    k->ukr_f64 = gemm_sse2_f64_4x4;
    k->ukr_da_f64 = gemm_da_sse2_f64_4x4;
    k->ukr_f64_name = "gemm_sse2_f64_4x4";
    k->gemv_n_f32 = gemv_n_f32;
    k->gemv_t_f32 = gemv_t_f32;
    k->gemv_t_stream_f32 = gemv_t_stream_f32;
    k->gemv_n_f64 = gemv_n_f64;
    k->gemv_t_f64 = gemv_t_f64;
    k->gemv_t_stream_f64 = gemv_t_stream_f64;
    k->ln_row_f32 = ln_row_f32;
    k->ln_row_f64 = ln_row_f64;
}

/* ---- direct convolution (isa/ukr_conv.h): the GEMM's 4x8 tile ------------------------------ */

#undef UKR_T
#undef UKR_MR
#undef UKR_NV
#define UKR_T float
#include "isa/vec_f32x4.h"
#define UKR_MR 4
#define UKR_NV 2
#define UKR_CONV_NAME conv_sse2_f32_4x8
#include "isa/ukr_conv.h"
#define UKR_PW_RELU(x) RELU_PS(x)
#define UKR_PW_NAME pw_sse2_f32_4x8
#include "isa/ukr_pw.h"

void gc_conv_fill_sse2(gc_isa_kernels *k)
{
    k->pwukr_f32 = pw_sse2_f32_4x8;
    k->cukr_f32 = conv_sse2_f32_4x8;
    k->cukr_f32_name = "conv_sse2_f32_4x8";
    k->cukr_mr = 4;
    k->cukr_nr = 8;
}

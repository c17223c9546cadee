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
#include "isa/vec_f32x8.h"
#define V_MUL(a, b) _mm256_mul_ps(a, b)
/* (x <= 0) ? +0 : x, NaN kept: the float32 GEMM's V_RELU and the pointwise kernel's */
#define RELU_PS(x) _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LE_OQ), x)
#define V_RELU(x) RELU_PS(x)
#define UKR_NAME gemm_avx2_f32_6x16
#define UKR_NAME_DA gemm_da_avx2_f32_6x16
#include "isa/ukr.h"
#define V_SUB(a, b) _mm256_sub_ps(a, b)
#define V_HSUM(v) gc_avx2_hsum_ps(v)
#define S_FMA(a, b, c) __builtin_fmaf(a, b, c)
#define STREAM_ACC 8
#define STREAM_SFX f32
#include "isa/stream.h"
#include "isa/ukr_undef.h"

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
#include "isa/relu_bias.h"
#include "isa/winograd.h"

void gc_isa_fill_avx2(gc_isa_kernels *k)
{
    gc_optim_fill(k);
    gc_relu_bias_fill(k);
    gc_winograd_fill(k);
    gc_isa_fill_avx2_vmath(k);
    gc_qgemm_fill_avx2(k);
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
    k->gemv_t_stream_f32 = gemv_t_stream_f32;
    k->gemv_n_f64 = gemv_n_f64;
    k->gemv_t_f64 = gemv_t_f64;
    k->gemv_t_stream_f64 = gemv_t_stream_f64;
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
#define vm_bits(m) ((unsigned)_mm256_movemask_ps(m))
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
VM_GELU_ARRAY(vgelu_avx2)
VM_ARRAY(vgelu_tanh_avx2, vm_gelu_tanh)
VM_GELU_BACKWARD_ARRAY(vgelu_backward_avx2)
VM_EXP_SHIFT_SUM(vexp_shift_sum_avx2)
VM_MAX(vmax_avx2)
VM_SUB2_MUL(vsub2_mul_avx2)
VM_SOFTMAX4(vsoftmax4_avx2)

#include "isa/quant.h"
QQ_RANGE(qrange_avx2)

/* ---- max_pool2d's values-only rows at column stride 2 (isa.h's gc_mp_s2_f32) ---------------- */

/* the even elements of p[0..16), lanes in the order of outputs 0 1 4 5 2 3 6 7 (one in-lane
 * shuffle; every input of a window comes in that order, so the order is fixed once, at the
 * store) */
static inline __m256 mps2_even(const float *p)
{
    return _mm256_shuffle_ps(_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8), _MM_SHUFFLE(2, 0, 2, 0));
}

static inline void mps2_store(float *out, __m256 m)
{
    const __m256d d = _mm256_permute4x64_pd(_mm256_castps_pd(m), _MM_SHUFFLE(3, 1, 2, 0));
    _mm256_storeu_ps(out, _mm256_castpd_ps(d));
}

/* nu (1 or 2) vectors of outputs (independent chains) from column c, into out; the side sums'
 * NaN lanes or'ed into *bad */
static inline __attribute__((always_inline)) void mps2_vecs(const float *const *rows, int nr,
                                                            ptrdiff_t kw, ptrdiff_t c, float *out,
                                                            __m256 *bad, const int nu)
{
    __m256 m[2], s[2];
    for (int u = 0; u < nu; u++) {
        m[u] = _mm256_set1_ps(-__builtin_inff());
        s[u] = _mm256_setzero_ps();
    }
    for (int r = 0; r < nr; r++)
        for (ptrdiff_t kj = 0; kj < kw; kj++)
            for (int u = 0; u < nu; u++) {
                const __m256 v = mps2_even(rows[r] + c + kj + 16 * u);
                s[u] = _mm256_add_ps(s[u], v);
                m[u] = _mm256_max_ps(v, m[u]); /* v > m ? v : m */
            }
    for (int u = 0; u < nu; u++) {
        *bad = _mm256_or_ps(*bad, _mm256_cmp_ps(s[u], s[u], _CMP_UNORD_Q));
        mps2_store(out + 8 * u, m[u]);
    }
}

static int mp_s2_avx2(const float *const *rows, int nr, ptrdiff_t kw, ptrdiff_t c0, float *out,
                      ptrdiff_t nv)
{
    __m256 bad = _mm256_setzero_ps();
    ptrdiff_t v = 0;
    for (; v + 2 <= nv; v += 2)
        mps2_vecs(rows, nr, kw, c0 + 16 * v, out + 8 * v, &bad, 2);
    if (v < nv)
        mps2_vecs(rows, nr, kw, c0 + 16 * v, out + 8 * v, &bad, 1);
    return _mm256_movemask_ps(bad) != 0;
}

/* ---- max_pool2d's backward over 2-wide windows (isa.h's gc_mp_bwd_w2_f32) -------------------- */

/* 4 outputs a step: d = idx - (base + 2 i) in 64-bit lanes, d == 0 and d == 1 as 64-bit masks
 * whose 32-bit halves, blended even / odd, are the mask of the 8 inputs that take g (each lane
 * doubled).  A last partial step is redone overlapping the one before (the same stores; its
 * hits counted for the new lanes only): no scalar tail, whose compares mispredict. */
static inline ptrdiff_t mp_bwd_w2_row_avx2(const float *g, const int64_t *idx, float *out,
                                           ptrdiff_t ow, int64_t base)
{
    const __m256i step = _mm256_set_epi64x(6, 4, 2, 0), one = _mm256_set1_epi64x(1);
    const __m256i dup = _mm256_set_epi32(3, 3, 2, 2, 1, 1, 0, 0);
    ptrdiff_t hits = 0, i = 0;
    for (; i < ow; i += 4) {
        int skip = 0; /* lanes already done */
        if (i + 4 > ow) {
            if (ow < 4)
                break;
            skip = (int)(i - (ow - 4));
            i = ow - 4;
        }
        const __m256i e = _mm256_add_epi64(_mm256_set1_epi64x(base + 2 * (int64_t)i), step);
        const __m256i d = _mm256_sub_epi64(_mm256_loadu_si256((const __m256i *)(idx + i)), e);
        const __m256i m0 = _mm256_cmpeq_epi64(d, _mm256_setzero_si256());
        const __m256i m1 = _mm256_cmpeq_epi64(d, one);
        const __m256i take = _mm256_blend_epi32(m0, m1, 0xaa);
        const __m256i any = _mm256_or_si256(m0, m1);
        const unsigned hit = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(any));
        hits += __builtin_popcount(hit >> skip);
        const __m256 gv = _mm256_add_ps(_mm256_castps128_ps256(_mm_loadu_ps(g + i)),
                                        _mm256_setzero_ps());
        const __m256 v =
            _mm256_and_ps(_mm256_permutevar8x32_ps(gv, dup), _mm256_castsi256_ps(take));
        _mm256_storeu_ps(out + 2 * i, v);
    }
    for (; i < ow; i++) { /* ow < 4 */
        const int64_t d = idx[i] - base - 2 * (int64_t)i;
        const float v = g[i] + 0.0f;
        out[2 * i] = d == 0 ? v : 0.0f;
        out[2 * i + 1] = d == 1 ? v : 0.0f;
        hits += d == 0 || d == 1;
    }
    return hits;
}

/* the plane: rows in order, one call */
static ptrdiff_t mp_bwd_w2_avx2(const float *g, const int64_t *idx, float *out, ptrdiff_t ow,
                                ptrdiff_t oh, ptrdiff_t kh, ptrdiff_t w)
{
    ptrdiff_t hits = 0;
    for (ptrdiff_t oy = 0; oy < oh; oy++)
        for (ptrdiff_t r = 0; r < kh; r++) {
            const ptrdiff_t row = oy * kh + r;
            hits += mp_bwd_w2_row_avx2(g + oy * ow, idx + oy * ow, out + row * w, ow,
                                       (int64_t)(row * w));
        }
    return hits;
}

static void gc_isa_fill_avx2_vmath(gc_isa_kernels *k)
{
    k->mp_bwd_w2_f32 = mp_bwd_w2_avx2;
    k->vunary_f32[GC_UNARY_EXP] = vexp_avx2;
    k->vunary_f32[GC_UNARY_LOG] = vlog_avx2;
    k->vunary_f32[GC_UNARY_TANH] = vtanh_avx2;
    k->vunary_f32[GC_UNARY_SIGMOID] = vsigmoid_avx2;
    k->vunary_f32[GC_UNARY_GELU] = vgelu_avx2;
    k->vgelu_backward_f32 = vgelu_backward_avx2;
    k->vunary_f32[GC_UNARY_GELU_TANH] = vgelu_tanh_avx2;
    k->vexp_shift_sum_f32 = vexp_shift_sum_avx2;
    k->vmax_f32 = vmax_avx2;
    k->vsub2_mul_f32 = vsub2_mul_avx2;
    k->vsoftmax4_f32 = vsoftmax4_avx2;
    k->q_linear_u8 = qq_linear_u8;
    k->q_torch_u8 = qq_torch_u8;
    k->q_range_f32 = qrange_avx2;
    k->mp_s2_f32 = mp_s2_avx2;
}

/* ---- int8 GEMM (qgemm.c; contract in isa.h) ------------------------------------------------ */

/* vpmaddubsw multiplies unsigned by signed bytes and adds pairs into int16 with saturation: with
 * activations up to 255 and weights down to -128 a pair reaches 65280.  So the activations are
 * taken signed, x = a - 128 (q_shift 128), as |x| (<= 128, unsigned) times sign(b, x): a pair is
 * then at most 2 * 128 * 127 = 32512 and never saturates.  vpsignb cannot negate -128, so weights
 * holding -128 (PyTorch's per-channel qint8 weights do) take the FULL form (q_ukr_full): x as
 * its two's-complement parts, x = (x & 0x7f) - (x & 0x80), each an unsigned operand whose pairs
 * stay within int16 (2 * 127 * 128 = 32512 and 2 * 128 * 128 = 32768 at -32768 exactly), two
 * vpmaddubsw per product instead of one: ~1.5x the fast form's work, against ~10x for plain
 * loops.  Tile 4 x 16: 8 accumulators, 2 B vectors and the temporaries in 16 YMM. */
#include "isa/qgemm.h"

#define Q_AVX2_MR 4
#define Q_AVX2_NV 2
#define Q_AVX2_NR (8 * Q_AVX2_NV)

static inline __attribute__((always_inline)) void
q_avx2_tile(const int R, const int SX, const int FULL, ptrdiff_t kb, const uint8_t *restrict a, ptrdiff_t lda,
            const int8_t *restrict b, int32_t *restrict c, ptrdiff_t ldc, int accumulate)
{
    __m256i acc[Q_AVX2_MR][Q_AVX2_NV];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < Q_AVX2_NV; v++)
            acc[i][v] = accumulate ? _mm256_loadu_si256((const __m256i *)(c + i * ldc + 8 * v))
                                   : _mm256_setzero_si256();
    const __m256i ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8((char)0x80);
    for (ptrdiff_t p = 0; p < kb; p += 4) {
        __m256i bv[Q_AVX2_NV];
#pragma GCC unroll 4
        for (int v = 0; v < Q_AVX2_NV; v++)
            bv[v] = _mm256_load_si256((const __m256i *)(b + 32 * v));
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            int32_t q;
            __builtin_memcpy(&q, a + i * lda + p, 4);
            __m256i x = _mm256_set1_epi32(q);
            if (!SX)
                x = _mm256_xor_si256(x, flip);
            if (FULL) {
                const __m256i lo = _mm256_andnot_si256(flip, x), hi = _mm256_and_si256(flip, x);
#pragma GCC unroll 4
                for (int v = 0; v < Q_AVX2_NV; v++) {
                    const __m256i tl = _mm256_maddubs_epi16(lo, bv[v]);
                    const __m256i th = _mm256_maddubs_epi16(hi, bv[v]);
                    acc[i][v] = _mm256_add_epi32(acc[i][v], _mm256_sub_epi32(
                                                                _mm256_madd_epi16(tl, ones),
                                                                _mm256_madd_epi16(th, ones)));
                }
                continue;
            }
            const __m256i ax = _mm256_abs_epi8(x);
#pragma GCC unroll 4
            for (int v = 0; v < Q_AVX2_NV; v++) {
                const __m256i t = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(bv[v], x));
                acc[i][v] = _mm256_add_epi32(acc[i][v], _mm256_madd_epi16(t, ones));
            }
        }
        b += 4 * Q_AVX2_NR;
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < Q_AVX2_NV; v++)
            _mm256_storeu_si256((__m256i *)(c + i * ldc + 8 * v), acc[i][v]);
}

#define Q_AVX2_CASE(R, FULL)                                                                      \
    case R:                                                                                       \
        if (a_signed)                                                                             \
            q_avx2_tile(R, 1, FULL, kb, a, lda, b, c, ldc, accumulate);                           \
        else                                                                                      \
            q_avx2_tile(R, 0, FULL, kb, a, lda, b, c, ldc, accumulate);                           \
        break;

static void qgemm_avx2_u8s8_4x16(int rows, ptrdiff_t kb, const uint8_t *a, ptrdiff_t lda,
                                 const int8_t *b, int32_t *c, ptrdiff_t ldc, int accumulate,
                                 int a_signed)
{
    switch (rows) {
        Q_AVX2_CASE(1, 0)
        Q_AVX2_CASE(2, 0)
        Q_AVX2_CASE(3, 0)
    default: Q_AVX2_CASE(4, 0)
    }
}

/* the same tile for weights holding -128 */
static void qgemm_avx2_full_4x16(int rows, ptrdiff_t kb, const uint8_t *a, ptrdiff_t lda,
                                 const int8_t *b, int32_t *c, ptrdiff_t ldc, int accumulate,
                                 int a_signed)
{
    switch (rows) {
        Q_AVX2_CASE(1, 1)
        Q_AVX2_CASE(2, 1)
        Q_AVX2_CASE(3, 1)
    default: Q_AVX2_CASE(4, 1)
    }
}

void gc_qgemm_fill_avx2(gc_isa_kernels *k)
{
    k->q_mr = Q_AVX2_MR;
    k->q_nr = Q_AVX2_NR;
    k->q_ku = 4;
    k->q_shift[0] = k->q_shift[1] = 128;
    k->q_ukr = qgemm_avx2_u8s8_4x16;
    k->q_ukr_full = qgemm_avx2_full_4x16;
    k->q_epi = qepi_row;
    k->q_name = "qgemm_avx2_u8s8_4x16";
}

/* ---- direct convolution (isa/ukr_conv.h): the GEMM's 6x16 tile ----------------------------- */

#undef UKR_T
#undef UKR_MR
#undef UKR_NV
#undef UKR_CONV_NAME
#define UKR_T float
#include "isa/vec_f32x8.h"
#define UKR_MR 6
#define UKR_NV 2
#define UKR_CONV_NAME conv_avx2_f32_6x16
#include "isa/ukr_conv.h"
#define UKR_PW_RELU(x) RELU_PS(x)
#define UKR_PW_NAME pw_avx2_f32_6x16
#include "isa/ukr_pw.h"

void gc_conv_fill_avx2(gc_isa_kernels *k)
{
    k->pwukr_f32 = pw_avx2_f32_6x16;
    k->cukr_f32 = conv_avx2_f32_6x16;
    k->cukr_f32_name = "conv_avx2_f32_6x16";
    k->cukr_mr = 6;
    k->cukr_nr = 16;
}

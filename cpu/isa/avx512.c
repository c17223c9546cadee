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
#define V_LOADU(p) _mm512_loadu_ps(p)
#define V_STOREU(p, x) _mm512_storeu_ps(p, x)
#define V_SET1(x) _mm512_set1_ps(x)
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define V_MUL(a, b) _mm512_mul_ps(a, b)
#define V_RELU(x)                                                                                 \
    _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LE_OQ), x,               \
                         _mm512_setzero_ps())
#define UKR_NAME gemm_avx512_f32
#define UKR_NAME_DA gemm_da_avx512_f32
#define UKR_NAME_ROWS gemm_rows_avx512_f32
#include "isa/ukr.h"
#undef UKR_NAME_ROWS
#define V_SUB(a, b) _mm512_sub_ps(a, b)
#define V_HSUM(v) _mm512_reduce_add_ps(v)
#define S_FMA(a, b, c) __builtin_fmaf(a, b, c)
#define STREAM_ACC 16
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
#define UKR_VT __m512d
#define UKR_VL 8
#define V_ZERO() _mm512_setzero_pd()
#define V_LOADU(p) _mm512_loadu_pd(p)
#define V_STOREU(p, x) _mm512_storeu_pd(p, x)
#define V_SET1(x) _mm512_set1_pd(x)
#define V_FMA(a, b, c) _mm512_fmadd_pd(a, b, c)
#define V_ADD(a, b) _mm512_add_pd(a, b)
#define V_MUL(a, b) _mm512_mul_pd(a, b)
#define V_RELU(x)                                                                                 \
    _mm512_mask_blend_pd(_mm512_cmp_pd_mask(x, _mm512_setzero_pd(), _CMP_LE_OQ), x,               \
                         _mm512_setzero_pd())
#define UKR_NAME gemm_avx512_f64
#define UKR_NAME_DA gemm_da_avx512_f64
#include "isa/ukr.h"
#define V_SUB(a, b) _mm512_sub_pd(a, b)
#define V_HSUM(v) _mm512_reduce_add_pd(v)
#define S_FMA(a, b, c) __builtin_fma(a, b, c)
#define STREAM_ACC 16
#define STREAM_SFX f64
#include "isa/stream.h"
#undef V_SUB
#undef V_HSUM
#undef S_FMA
#undef STREAM_ACC
#undef STREAM_SFX

/* ---- int8 GEMM (qgemm.c; contract in isa.h) ------------------------------------------------ */

/* AVX512-VNNI's vpdpbusd: each int32 lane adds 4 products of unsigned activation bytes and signed
 * weight bytes, exactly (no int16 stage), so every int8 weight and uint8 activation is taken as
 * it is (q_shift 0; int8 activations are flipped to uint8 with one XOR per broadcast).  Compiled
 * for VNNI by function attribute and picked only where CPUID reports it; elsewhere avx512 runs
 * AVX2's kernel.  Tile 6 x 64: 24 ZMM accumulators, 4 B vectors, the broadcasts. */
#include "isa/qgemm.h"

#define Q_VNNI __attribute__((target("avx512f,avx512vnni")))
/* the tile: -DQ_VNNI_MR=... -DQ_VNNI_NV=... for tuning (4x64, 5x64, 8x48 measured within noise of
 * 6x64 on Zen 4; 12x32 at half speed) */
#ifndef Q_VNNI_MR
#define Q_VNNI_MR 6
#define Q_VNNI_NV 4
#endif
_Static_assert(Q_VNNI_MR <= 8 && Q_VNNI_MR * Q_VNNI_NV <= 28, "the tile must fit the 32 ZMM");

static inline __attribute__((always_inline)) Q_VNNI void
q_vnni_tile(const int R, const int SX, ptrdiff_t kb, const uint8_t *restrict a, ptrdiff_t lda,
            const int8_t *restrict b, int32_t *restrict c, ptrdiff_t ldc, int accumulate)
{
    __m512i acc[Q_VNNI_MR][Q_VNNI_NV];
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < Q_VNNI_NV; v++)
            acc[i][v] = accumulate ? _mm512_loadu_si512(c + i * ldc + 16 * v)
                                   : _mm512_setzero_si512();
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (ptrdiff_t p = 0; p < kb; p += 4) {
        __m512i bv[Q_VNNI_NV];
#pragma GCC unroll 4
        for (int v = 0; v < Q_VNNI_NV; v++)
            bv[v] = _mm512_load_si512(b + 64 * v);
#pragma GCC unroll 8
        for (int i = 0; i < R; i++) {
            int32_t q;
            __builtin_memcpy(&q, a + i * lda + p, 4);
            __m512i x = _mm512_set1_epi32(q);
            if (SX)
                x = _mm512_xor_si512(x, flip);
#pragma GCC unroll 4
            for (int v = 0; v < Q_VNNI_NV; v++)
                acc[i][v] = _mm512_dpbusd_epi32(acc[i][v], x, bv[v]);
        }
        b += 4 * 16 * Q_VNNI_NV;
    }
#pragma GCC unroll 8
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < Q_VNNI_NV; v++)
            _mm512_storeu_si512(c + i * ldc + 16 * v, acc[i][v]);
}

#define Q_VNNI_CASE(R)                                                                            \
    case R:                                                                                       \
        if (a_signed)                                                                             \
            q_vnni_tile(R, 1, kb, a, lda, b, c, ldc, accumulate);                                 \
        else                                                                                      \
            q_vnni_tile(R, 0, kb, a, lda, b, c, ldc, accumulate);                                 \
        break;

static Q_VNNI void qgemm_avx512vnni_u8s8_6x64(int rows, ptrdiff_t kb, const uint8_t *a,
                                             ptrdiff_t lda, const int8_t *b, int32_t *c,
                                             ptrdiff_t ldc, int accumulate, int a_signed)
{
    switch (rows) {
#if Q_VNNI_MR > 1
        Q_VNNI_CASE(1)
#endif
#if Q_VNNI_MR > 2
        Q_VNNI_CASE(2)
#endif
#if Q_VNNI_MR > 3
        Q_VNNI_CASE(3)
#endif
#if Q_VNNI_MR > 4
        Q_VNNI_CASE(4)
#endif
#if Q_VNNI_MR > 5
        Q_VNNI_CASE(5)
#endif
#if Q_VNNI_MR > 6
        Q_VNNI_CASE(6)
#endif
#if Q_VNNI_MR > 7
        Q_VNNI_CASE(7)
#endif
    default: Q_VNNI_CASE(Q_VNNI_MR)
    }
}

static void gc_qgemm_fill_avx512(gc_isa_kernels *k)
{
    gc_qgemm_fill_avx2(k);
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512vnni"))
        return;
    k->q_mr = Q_VNNI_MR;
    k->q_nr = 16 * Q_VNNI_NV;
    k->q_ku = 4;
    k->q_shift[0] = k->q_shift[1] = 0;
    k->q_ukr = qgemm_avx512vnni_u8s8_6x64;
    k->q_ukr_full = NULL;
    k->q_epi = qepi_row;
    k->q_name = "qgemm_avx512vnni_u8s8_6x64";
}

#define GC_STR_(x) #x
#define GC_STR(x) GC_STR_(x)

static void gc_isa_fill_avx512_vmath(gc_isa_kernels *k);

#include "isa/optim.h"
#include "isa/winograd.h"

/* ---- direct convolution (conv_direct.c; contract in isa.h: gc_cukr_f32) --------------------- */

/* The GEMM's float32 tile (GC_AVX512_MR x 32): the direct path runs only while the two agree
 * (conv_direct.c's dconv_use), and then gives the im2col GEMM's bits. */
#undef UKR_T
#undef UKR_VT
#undef UKR_VL
#undef UKR_MR
#undef UKR_NV
#undef V_ZERO
#undef V_LOADU
#undef V_STOREU
#undef V_SET1
#undef V_FMA
#undef V_ADD
#undef UKR_CONV_NAME
#define UKR_T float
#define UKR_VT __m512
#define UKR_VL 16
#define UKR_MR GC_AVX512_MR
#define UKR_NV 2
#define V_ZERO() _mm512_setzero_ps()
#define V_LOADU(p) _mm512_loadu_ps(p)
#define V_STOREU(p, x) _mm512_storeu_ps(p, x)
#define V_SET1(x) _mm512_set1_ps(x)
#define V_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define V_ADD(a, b) _mm512_add_ps(a, b)
#define UKR_CONV_NAME conv_avx512_f32
#include "isa/ukr_conv.h"
#undef UKR_T
#undef UKR_VT
#undef UKR_VL
#undef UKR_MR
#undef UKR_NV
#undef V_ZERO
#undef V_LOADU
#undef V_STOREU
#undef V_SET1
#undef V_FMA
#undef V_ADD
#undef UKR_CONV_NAME

/* The 14 x 32 tile t to NCHW (gc_ctile_f32): each 16-channel half (of the nv stored) as a 16 x 16 transpose in
 * registers (pixel rows past MR read as zeros, never stored), one masked 14-lane store per
 * channel, in place of 448 scalar loads and stores (~10% of a K = 144 tile's time). */
#if GC_AVX512_MR <= 16
static void conv_tile_nchw_avx512(const float *t, float *c, ptrdiff_t ldc, ptrdiff_t nv,
                                  int acc_in, const float *bias)
{
    const __mmask16 m = (__mmask16)((1u << GC_AVX512_MR) - 1u);
    for (int v = 0; v < 2 && v * 16 < nv; v++) {
        __m512 r[16], a[16], b[16];
        for (int i = 0; i < 16; i++)
            r[i] = i < GC_AVX512_MR ? _mm512_loadu_ps(t + i * 32 + v * 16) : _mm512_setzero_ps();
        for (int i = 0; i < 8; i++) {
            a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
            a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
        }
        /* b[4g + q], 128-bit lane L: rows 4g..4g+3 of column 4L + q */
        for (int g = 0; g < 4; g++)
            for (int h = 0; h < 2; h++) {
                const __m512d lo = _mm512_castps_pd(a[4 * g + h]);
                const __m512d hi = _mm512_castps_pd(a[4 * g + h + 2]);
                b[4 * g + 2 * h] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo, hi));
                b[4 * g + 2 * h + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo, hi));
            }
        for (int q = 0; q < 4; q++) {
            const __m512 c1 = _mm512_shuffle_f32x4(b[q], b[4 + q], 0x88);
            const __m512 c2 = _mm512_shuffle_f32x4(b[q], b[4 + q], 0xdd);
            const __m512 d1 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], 0x88);
            const __m512 d2 = _mm512_shuffle_f32x4(b[8 + q], b[12 + q], 0xdd);
            __m512 col[4];
            col[0] = _mm512_shuffle_f32x4(c1, d1, 0x88); /* column q */
            col[2] = _mm512_shuffle_f32x4(c1, d1, 0xdd); /* column 8 + q */
            col[1] = _mm512_shuffle_f32x4(c2, d2, 0x88); /* column 4 + q */
            col[3] = _mm512_shuffle_f32x4(c2, d2, 0xdd); /* column 12 + q */
            for (int L = 0; L < 4; L++) {
                const ptrdiff_t j = v * 16 + 4 * L + q;
                if (j >= nv)
                    continue;
                float *d = c + j * ldc;
                __m512 y = col[L];
                if (acc_in)
                    y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(m, d));
                if (bias)
                    y = _mm512_add_ps(y, _mm512_set1_ps(bias[j]));
                _mm512_mask_storeu_ps(d, m, y);
            }
        }
    }
}
#endif

void gc_conv_fill_avx512(gc_isa_kernels *k)
{
#if GC_AVX512_MR <= 16
    k->ctile_f32 = conv_tile_nchw_avx512;
#endif
    k->cukr_f32 = conv_avx512_f32;
    k->cukr_f32_name = "conv_avx512_f32_" GC_STR(GC_AVX512_MR) "x32";
    k->cukr_mr = GC_AVX512_MR;
    k->cukr_nr = 32;
}

void gc_isa_fill_avx512(gc_isa_kernels *k)
{
    gc_optim_fill(k);
    gc_winograd_fill(k);
    gc_conv_fill_avx512(k);
    gc_isa_fill_avx512_vmath(k);
    gc_qgemm_fill_avx512(k);
    k->mr_f32 = GC_AVX512_MR;
    k->nr_f32 = 32;
    k->ukr_f32 = gemm_avx512_f32;
    k->ukr_da_f32 = gemm_da_avx512_f32;
    k->ukr_rows_f32 = gemm_rows_avx512_f32;
    k->ukr_f32_name = "gemm_avx512_f32_" GC_STR(GC_AVX512_MR) "x32";
    k->mr_f64 = GC_AVX512_MR;
    k->nr_f64 = 16;
    k->ukr_f64 = gemm_avx512_f64;
    k->ukr_da_f64 = gemm_da_avx512_f64;
    k->ukr_f64_name = "gemm_avx512_f64_" GC_STR(GC_AVX512_MR) "x16";
    k->gemv_n_f32 = gemv_n_f32;
    k->gemv_t_f32 = gemv_t_f32;
    k->gemv_n_f64 = gemv_n_f64;
    k->gemv_t_f64 = gemv_t_f64;
    k->ln_row_f32 = ln_row_f32;
    k->ln_row_f64 = ln_row_f64;
}

/* ---- float32 vector math (isa/vmath.h) ------------------------------------------------------ */

#include <math.h>

#define VF __m512
#define VI __m512i
#define VM __mmask16
#define VD __m512d
#define VLANES 16
#define vf_set1(v) _mm512_set1_ps(v)
#define vf_loadu(p) _mm512_loadu_ps(p)
#define vf_storeu(p, v) _mm512_storeu_ps(p, v)
#define vf_loadn(p, n) _mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1u), p)
#define vf_storen(p, v, n) _mm512_mask_storeu_ps(p, (__mmask16)((1u << (n)) - 1u), v)
#define vf_add _mm512_add_ps
#define vf_sub _mm512_sub_ps
#define vf_mul _mm512_mul_ps
#define vf_div _mm512_div_ps
#define vf_fma _mm512_fmadd_ps
#define vf_fnma _mm512_fnmadd_ps
#define vf_min _mm512_min_ps
#define vf_max _mm512_max_ps
#define GC_BITOP(op, a, b)                                                                        \
    _mm512_castsi512_ps(op(_mm512_castps_si512(a), _mm512_castps_si512(b)))
#define vf_and(a, b) GC_BITOP(_mm512_and_si512, a, b)
#define vf_or(a, b) GC_BITOP(_mm512_or_si512, a, b)
#define vf_xor(a, b) GC_BITOP(_mm512_xor_si512, a, b)
#define vf_andnot(a, b) GC_BITOP(_mm512_andnot_si512, a, b)
#define vf_round(x) _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define vf_cvti _mm512_cvtps_epi32
#define vi_cvtf _mm512_cvtepi32_ps
#define vi_set1 _mm512_set1_epi32
#define vi_add _mm512_add_epi32
#define vi_sub _mm512_sub_epi32
#define vi_srai _mm512_srai_epi32
#define vi_slli _mm512_slli_epi32
#define vi_and _mm512_and_si512
#define vi_or _mm512_or_si512
#define vf_asi _mm512_castps_si512
#define vi_asf _mm512_castsi512_ps
#define vf_lt(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ)
#define vf_le(a, b) _mm512_cmp_ps_mask(a, b, _CMP_LE_OQ)
#define vf_gt(a, b) _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ)
#define vf_ge(a, b) _mm512_cmp_ps_mask(a, b, _CMP_GE_OQ)
#define vf_eq(a, b) _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ)
#define vf_isnan(a) _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q)
#define vf_blend(m, a, b) _mm512_mask_blend_ps(m, a, b)
#define vm_bits(m) ((unsigned)(m))
#define vd_lo(x) _mm512_cvtps_pd(_mm512_castps512_ps256(x))
#define vd_hi(x) _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)))
#define vd_tof2(lo, hi)                                                                           \
    _mm512_castpd_ps(_mm512_insertf64x4(                                                          \
        _mm512_castps_pd(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo))),                            \
        _mm256_castps_pd(_mm512_cvtpd_ps(hi)), 1))
#define vd_set1 _mm512_set1_pd
#define vd_add _mm512_add_pd
#define vd_sub _mm512_sub_pd
#define vd_mul _mm512_mul_pd
#define vd_fma _mm512_fmadd_pd
#define vd_storeu _mm512_storeu_pd

#include "isa/vmath.h"

VM_ARRAY(vexp_avx512, vm_exp)
VM_ARRAY(vlog_avx512, vm_log)
VM_ARRAY(vtanh_avx512, vm_tanh)
VM_ARRAY(vsigmoid_avx512, vm_sigmoid)
VM_GELU_ARRAY(vgelu_avx512)
VM_ARRAY(vgelu_tanh_avx512, vm_gelu_tanh)
VM_GELU_BACKWARD_ARRAY(vgelu_backward_avx512)
VM_EXP_SHIFT_SUM(vexp_shift_sum_avx512)
VM_MAX(vmax_avx512)
VM_SUB2_MUL(vsub2_mul_avx512)

#include "isa/quant.h"
QQ_RANGE(qrange_avx512)

static void gc_isa_fill_avx512_vmath(gc_isa_kernels *k)
{
    k->vunary_f32[GC_UNARY_EXP] = vexp_avx512;
    k->vunary_f32[GC_UNARY_LOG] = vlog_avx512;
    k->vunary_f32[GC_UNARY_TANH] = vtanh_avx512;
    k->vunary_f32[GC_UNARY_SIGMOID] = vsigmoid_avx512;
    k->vunary_f32[GC_UNARY_GELU] = vgelu_avx512;
    k->vgelu_backward_f32 = vgelu_backward_avx512;
    k->vunary_f32[GC_UNARY_GELU_TANH] = vgelu_tanh_avx512;
    k->vexp_shift_sum_f32 = vexp_shift_sum_avx512;
    k->vmax_f32 = vmax_avx512;
    k->vsub2_mul_f32 = vsub2_mul_avx512;
    k->q_linear_u8 = qq_linear_u8;
    k->q_torch_u8 = qq_torch_u8;
    k->q_range_f32 = qrange_avx512;
}

/* ---- the bfloat16 GEMM's micro-kernel (AVX-512 BF16, target attribute) -------------------- */

#include "isa/bf16.h"

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
#include "isa/vec_f32x16.h"
#define V_MUL(a, b) _mm512_mul_ps(a, b)
/* (x <= 0) ? +0 : x, NaN kept: the float32 GEMM's V_RELU and the pointwise kernel's */
#define RELU_PS(x)                                                                                \
    _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LE_OQ), x,               \
                         _mm512_setzero_ps())
#define V_RELU(x) RELU_PS(x)
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
#include "isa/ukr_undef.h"

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
#include "isa/relu_bias.h"
#include "isa/winograd.h"

/* ---- direct convolution (conv_direct.c; contract in isa.h: gc_cukr_f32) --------------------- */

/* The GEMM's float32 tile (GC_AVX512_MR x 32): the direct path runs only while the two agree
 * (conv_direct.c's dconv_use), and then gives the im2col GEMM's bits. */
#undef UKR_T
#undef UKR_MR
#undef UKR_NV
#undef UKR_CONV_NAME
#define UKR_T float
#include "isa/vec_f32x16.h"
#define UKR_MR GC_AVX512_MR
#define UKR_NV 2
#define UKR_CONV_NAME conv_avx512_f32
#include "isa/ukr_conv.h"
#define UKR_PW_RELU(x) RELU_PS(x)
#define UKR_PW_NAME pw_avx512_f32
#include "isa/ukr_pw.h"
#undef UKR_PW_NAME
#undef UKR_PW_LDB
/* the half-width tile (14 x 16) over the same 32-wide panels: a last panel of <= 16 pixels */
#undef UKR_NV
#define UKR_NV 1
#define UKR_PW_LDB 32
#define UKR_PW_NAME pw_half_avx512_f32
#include "isa/ukr_pw.h"
#undef UKR_PW_NAME
#undef UKR_PW_LDB
/* the quarter-width tile (14 x 8, 8-wide vectors) over the same panels: a last panel's last
 * <= 8 pixels (49 pixels: 32 + 16 + 8 columns, 7/8 of them used; Zen 4 runs two 8-wide FMAs a
 * cycle against one 16-wide one, so it costs half the half-width tile) */
#undef UKR_PW_RELU
#include "isa/vec_f32x8.h"
/* (x <= 0) ? +0 : x, NaN kept: RELU_PS on 8 lanes (avx2.c's; no AVX-512VL masks here) */
#define UKR_PW_RELU(x) _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LE_OQ), x)
#define UKR_PW_LDB 32
#define UKR_PW_NAME pw_quarter_avx512_f32
#include "isa/ukr_pw.h"
#undef UKR_PW_NAME
#undef UKR_PW_LDB
#undef UKR_PW_RELU
#undef UKR_T
#undef UKR_MR
#undef UKR_NV
#undef UKR_CONV_NAME

/* The 16-column kernel (gc_isa_kernels.cukr16_f32): AVX2's 6 x 16 tile of 8-wide vectors,
 * for the backward's 16-channel panels (conv_direct.c); the FMA chain per element is the wide
 * kernel's, so the bits are too. */
#define UKR_T float
#include "isa/vec_f32x8.h"
#define UKR_MR 6
#define UKR_NV 2
#define UKR_CONV_NAME conv_avx512_f32_6x16
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

/* col[j] := column j of the 16 x 16 block r (lane q of col[j] = lane j of r[q]): 64 shuffles. */
static inline __attribute__((always_inline)) void tr16_avx512(const __m512 r[16], __m512 col[16])
{
    __m512 a[16], b[16];
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
        col[q] = _mm512_shuffle_f32x4(c1, d1, 0x88);
        col[8 + q] = _mm512_shuffle_f32x4(c1, d1, 0xdd);
        col[4 + q] = _mm512_shuffle_f32x4(c2, d2, 0x88);
        col[12 + q] = _mm512_shuffle_f32x4(c2, d2, 0xdd);
    }
}

/* The 14 x 32 tile t to NCHW (gc_ctile_f32): each 16-channel half (of the nv stored) as a 16 x
 * 16 transpose in registers (pixel rows past MR read as zeros, never stored), one masked
 * 14-lane store per channel, in place of 448 scalar loads and stores (~10% of a K = 144 tile's
 * time). */
#if GC_AVX512_MR <= 16
static void conv_tile_nchw_avx512(const float *t, float *c, ptrdiff_t ldc, ptrdiff_t nv,
                                  int acc_in, const float *bias)
{
    const __mmask16 m = (__mmask16)((1u << GC_AVX512_MR) - 1u);
    for (int v = 0; v < 2 && v * 16 < nv; v++) {
        __m512 r[16], col[16];
        for (int i = 0; i < 16; i++)
            r[i] = i < GC_AVX512_MR ? _mm512_loadu_ps(t + i * 32 + v * 16) : _mm512_setzero_ps();
        tr16_avx512(r, col);
        for (int j0 = 0; j0 < 16; j0++) {
            const ptrdiff_t j = v * 16 + j0;
            if (j >= nv)
                break;
            float *d = c + j * ldc;
            __m512 y = col[j0];
            if (acc_in)
                y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(m, d));
            if (bias)
                y = _mm512_add_ps(y, _mm512_set1_ps(bias[j]));
            _mm512_mask_storeu_ps(d, m, y);
        }
    }
}
#endif

/* The pixels x channels tiles' buffer t [l][64] to NCHW rows with the epilogue
 * (gc_pwtstore_f32): 16 x 16 blocks transposed in registers, then + bias, + residual, relu and
 * one masked store of up to 16 pixels per channel. */
static void pwt_store_avx512(const float *t, ptrdiff_t l, float *c, ptrdiff_t ldc, ptrdiff_t nch,
                             const float *rb, const float *res, int relu)
{
    for (ptrdiff_t j0 = 0; j0 < l; j0 += 16) {
        const int nj = (int)(l - j0 < 16 ? l - j0 : 16);
        const __mmask16 m = (__mmask16)((1u << nj) - 1u);
        for (ptrdiff_t g = 0; g * 16 < nch; g++) {
            __m512 r[16], col[16];
            for (int i = 0; i < 16; i++)
                r[i] = i < nj ? _mm512_loadu_ps(t + (j0 + i) * 64 + g * 16) : _mm512_setzero_ps();
            tr16_avx512(r, col);
            for (int q = 0; q < 16 && g * 16 + q < nch; q++) {
                const ptrdiff_t i = g * 16 + q;
                __m512 y = col[q];
                if (rb)
                    y = _mm512_add_ps(y, _mm512_set1_ps(rb[i]));
                if (res)
                    y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(m, res + i * ldc + j0));
                if (relu)
                    y = RELU_PS(y);
                _mm512_mask_storeu_ps(c + i * ldc + j0, m, y);
            }
        }
    }
}

/* The pointwise convolution's 7 x 64 pixels x channels tile (gc_pwtukr_f32): 28 accumulators,
 * per K step 4 weight loads and 7 input broadcasts (the 14 x 32 tile: 2 and 14).  For 7 x 7
 * images, whose 49 pixels fill 7/8 of the pixels x channels tile's columns or the transposed
 * GEMM's 14-pixel rows, and all of 7 rows.  fma(x, w, acc): the GEMM's chain (the product
 * commutes exactly). */
/* a + b with a as vaddps's first source, whose NaN the sum keeps when both are NaN (the GEMM's
 * acc + C: an intrinsic leaves the order to the compiler, which swapped it here) */
static inline __m512 pwt_add(__m512 a, __m512 b)
{
    __m512 r;
    __asm__("vaddps %2, %1, %0" : "=v"(r) : "v"(a), "vm"(b));
    return r;
}

static inline __attribute__((always_inline)) void
pwt_avx512_body(ptrdiff_t k, const float *x, ptrdiff_t ldx, const int32_t *koff, const int sx,
                const int mv, const float *b0, const float *b1, float *t, int acc_in,
                const float *pf, ptrdiff_t npf)
{
    __m512 acc[7][4];
    ptrdiff_t o[7];
    for (int i = 0; i < 7; i++) {
        o[i] = (i < mv ? i : mv - 1) * sx;
        for (int v = 0; v < 4; v++)
            acc[i][v] = _mm512_setzero_ps();
    }
#pragma GCC unroll 2
    for (ptrdiff_t p = 0; p < k; p++, b0 += 32, b1 += 32) {
        if (p < npf)
            __builtin_prefetch(pf + p * 16, 0, 2);
        const float *xp = koff ? x + koff[p] : x + p * ldx;
        const __m512 w0 = _mm512_loadu_ps(b0), w1 = _mm512_loadu_ps(b0 + 16);
        const __m512 w2 = _mm512_loadu_ps(b1), w3 = _mm512_loadu_ps(b1 + 16);
#pragma GCC unroll 7
        for (int i = 0; i < 7; i++) {
            const __m512 a = _mm512_set1_ps(xp[o[i]]);
            acc[i][0] = _mm512_fmadd_ps(a, w0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(a, w1, acc[i][1]);
            acc[i][2] = _mm512_fmadd_ps(a, w2, acc[i][2]);
            acc[i][3] = _mm512_fmadd_ps(a, w3, acc[i][3]);
        }
    }
    for (int i = 0; i < 7; i++)
        for (int v = 0; v < 4; v++) {
            float *d = t + i * 64 + v * 16;
            _mm512_storeu_ps(d, acc_in ? pwt_add(acc[i][v], _mm512_loadu_ps(d)) : acc[i][v]);
        }
}

/* (the offsets constant for full tiles of the common strides) */
static void pwt_avx512_f32(ptrdiff_t k, const float *x, ptrdiff_t ldx, const int32_t *koff,
                           int sx, int mv, const float *b0, const float *b1, float *t, int acc_in,
                           const float *pf, ptrdiff_t npf)
{
    if (!koff && mv == 7)
        pwt_avx512_body(k, x, ldx, NULL, 1, 7, b0, b1, t, acc_in, pf, npf);
    else if (!koff)
        pwt_avx512_body(k, x, ldx, NULL, 1, mv, b0, b1, t, acc_in, pf, npf);
    else if (sx == 1 && mv == 7)
        pwt_avx512_body(k, x, ldx, koff, 1, 7, b0, b1, t, acc_in, pf, npf);
    else if (sx == 2 && mv == 7)
        pwt_avx512_body(k, x, ldx, koff, 2, 7, b0, b1, t, acc_in, pf, npf);
    else
        pwt_avx512_body(k, x, ldx, koff, sx, mv, b0, b1, t, acc_in, pf, npf);
}

void gc_conv_fill_avx512(gc_isa_kernels *k)
{
    k->pwtukr_f32 = pwt_avx512_f32;
    k->pwtstore_f32 = pwt_store_avx512;
#if GC_AVX512_MR <= 16
    k->ctile_f32 = conv_tile_nchw_avx512;
#endif
    k->pwukr_f32 = pw_avx512_f32;
    k->pwukr_half_f32 = pw_half_avx512_f32;
    k->pwukr_quarter_f32 = pw_quarter_avx512_f32;
    k->cukr_f32 = conv_avx512_f32;
    k->cukr_f32_name = "conv_avx512_f32_" GC_STR(GC_AVX512_MR) "x32";
    k->cukr_mr = GC_AVX512_MR;
    k->cukr_nr = 32;
    k->cukr16_f32 = conv_avx512_f32_6x16;
    k->cukr16_f32_name = "conv_avx512_f32_6x16";
    k->cukr16_mr = 6;
}

void gc_isa_fill_avx512(gc_isa_kernels *k)
{
    gc_optim_fill(k);
    gc_relu_bias_fill(k);
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
    k->gemv_t_stream_f32 = gemv_t_stream_f32;
    k->gemv_n_f64 = gemv_n_f64;
    k->gemv_t_f64 = gemv_t_f64;
    k->gemv_t_stream_f64 = gemv_t_stream_f64;
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
VM_SOFTMAX4(vsoftmax4_avx512)

#include "isa/quant.h"
QQ_RANGE(qrange_avx512)

/* ---- max_pool2d's backward over 2-wide windows (isa.h's gc_mp_bwd_w2_f32) -------------------- */

/* 8 outputs a step: d = idx - (base + 2 i) in 64-bit lanes, clamped (unsigned) to 2 so that its
 * narrowing to 32 bits is exact, each lane doubled and compared with 0, 1, 0, 1, ...: the mask
 * of the 16 inputs that take g (doubled the same way); the row's last ow % 8 outputs masked. */
static inline ptrdiff_t mp_bwd_w2_row_avx512(const float *g, const int64_t *idx, float *out,
                                             ptrdiff_t ow, int64_t base)
{
    const __m512i step = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), two = _mm512_set1_epi64(2);
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i pat = _mm512_set_epi32(1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0);
    ptrdiff_t hits = 0;
    for (ptrdiff_t i = 0; i < ow; i += 8) {
        const __mmask8 m = ow - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (ow - i)) - 1u);
        const __m512i e = _mm512_add_epi64(_mm512_set1_epi64(base + 2 * (int64_t)i), step);
        const __m512i x = _mm512_maskz_loadu_epi64(m, idx + i);
        const __m512i d = _mm512_min_epu64(_mm512_sub_epi64(x, e), two);
        hits += __builtin_popcount((unsigned)_mm512_mask_cmplt_epu64_mask(m, d, two));
        const __m512i d2 =
            _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(_mm512_cvtepi64_epi32(d)));
        const __mmask16 take = _mm512_cmpeq_epi32_mask(d2, pat);
        const __m512 gv = _mm512_add_ps(_mm512_maskz_loadu_ps((__mmask16)m, g + i),
                                        _mm512_setzero_ps());
        const __m512 v = _mm512_maskz_mov_ps(take, _mm512_permutexvar_ps(dup, gv));
        if (m == 0xff)
            _mm512_storeu_ps(out + 2 * i, v);
        else
            _mm512_mask_storeu_ps(out + 2 * i, (__mmask16)((1u << (2 * (ow - i))) - 1u), v);
    }
    return hits;
}

/* 2x2 windows: both input rows of an output row from one load of its indices and gradients,
 * the same lanes as mp_bwd_w2_row_avx512 per row (the bottom row's offsets are the top's less
 * w), so half the index / gradient loads and mask work a row: the train.py CNN's pools'
 * backward (64 x 16 x 28 x 28, 64 x 32 x 14 x 14), one thread on Zen 4, 0.19 / 0.13 -> 0.15 /
 * 0.10 ms.  The same values, and the same hit count, as a row at a time. */
static ptrdiff_t mp_bwd_w2x2_avx512(const float *g, const int64_t *idx, float *out, ptrdiff_t ow,
                                    ptrdiff_t oh, ptrdiff_t w)
{
    const __m512i step = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), two = _mm512_set1_epi64(2);
    const __m512i dup = _mm512_set_epi32(7, 7, 6, 6, 5, 5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0);
    const __m512i pat = _mm512_set_epi32(1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0);
    const __m512i wv = _mm512_set1_epi64((int64_t)w);
    ptrdiff_t hits = 0;
    for (ptrdiff_t oy = 0; oy < oh; oy++) {
        const float *gr = g + oy * ow;
        const int64_t *ir = idx + oy * ow;
        float *top = out + 2 * oy * w, *bot = top + w;
        const int64_t base = (int64_t)(2 * oy * w);
        for (ptrdiff_t i = 0; i < ow; i += 8) {
            const __mmask8 m = ow - i >= 8 ? (__mmask8)0xff : (__mmask8)((1u << (ow - i)) - 1u);
            const __m512i e = _mm512_add_epi64(_mm512_set1_epi64(base + 2 * (int64_t)i), step);
            const __m512i x = _mm512_maskz_loadu_epi64(m, ir + i);
            const __m512i dt = _mm512_min_epu64(_mm512_sub_epi64(x, e), two);
            const __m512i db = _mm512_min_epu64(_mm512_sub_epi64(_mm512_sub_epi64(x, e), wv), two);
            hits += __builtin_popcount((unsigned)_mm512_mask_cmplt_epu64_mask(m, dt, two));
            hits += __builtin_popcount((unsigned)_mm512_mask_cmplt_epu64_mask(m, db, two));
            const __m512 gv = _mm512_permutexvar_ps(
                dup, _mm512_add_ps(_mm512_maskz_loadu_ps((__mmask16)m, gr + i), _mm512_setzero_ps()));
            const __mmask16 tt = _mm512_cmpeq_epi32_mask(
                _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(_mm512_cvtepi64_epi32(dt))),
                pat);
            const __mmask16 tb = _mm512_cmpeq_epi32_mask(
                _mm512_permutexvar_epi32(dup, _mm512_castsi256_si512(_mm512_cvtepi64_epi32(db))),
                pat);
            const __m512 vt = _mm512_maskz_mov_ps(tt, gv), vb = _mm512_maskz_mov_ps(tb, gv);
            if (m == 0xff) {
                _mm512_storeu_ps(top + 2 * i, vt);
                _mm512_storeu_ps(bot + 2 * i, vb);
            } else {
                const __mmask16 sm = (__mmask16)((1u << (2 * (ow - i))) - 1u);
                _mm512_mask_storeu_ps(top + 2 * i, sm, vt);
                _mm512_mask_storeu_ps(bot + 2 * i, sm, vb);
            }
        }
    }
    return hits;
}

/* the plane: rows in order, one call (rows of 7 or 14 outputs: a call per row cost as much as
 * its work) */
static ptrdiff_t mp_bwd_w2_avx512(const float *g, const int64_t *idx, float *out, ptrdiff_t ow,
                                  ptrdiff_t oh, ptrdiff_t kh, ptrdiff_t w)
{
    if (kh == 2)
        return mp_bwd_w2x2_avx512(g, idx, out, ow, oh, w);
    ptrdiff_t hits = 0;
    for (ptrdiff_t oy = 0; oy < oh; oy++)
        for (ptrdiff_t r = 0; r < kh; r++) {
            const ptrdiff_t row = oy * kh + r;
            hits += mp_bwd_w2_row_avx512(g + oy * ow, idx + oy * ow, out + row * w, ow,
                                         (int64_t)(row * w));
        }
    return hits;
}

/* ---- max_pool2d's forward over 2-wide windows (isa.h's gc_mp_fwd_w2_f32) --------------------- */

/* 16 outputs a step (the row's last ones masked: the train.py CNN's rows are 14 and 7 wide): per
 * window row two loads, the even and odd inputs by two-source permutes, the running maxima and
 * their window offsets (int32) by compare masks; the offsets widened to the int64 indices. */
static inline void mp_fwd_w2_row_avx512(const float *const *rows, const int32_t *toff, int nr,
                                        ptrdiff_t ow, int64_t o0, float *vr, int64_t *ir)
{
    const __m512i even =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i lane2 = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0);
    for (ptrdiff_t ox = 0; ox < ow; ox += 16) {
        const ptrdiff_t n = ow - ox < 16 ? ow - ox : 16;
        const __mmask16 m = (__mmask16)((1u << n) - 1u);
        const __mmask16 mlo = n >= 8 ? (__mmask16)0xffff : (__mmask16)((1u << (2 * n)) - 1u);
        const __mmask16 mhi = n > 8 ? (__mmask16)((1u << (2 * (n - 8))) - 1u) : 0;
        __m512 cur = _mm512_setzero_ps();
        __m512i ct = _mm512_setzero_si512();
        for (int r = 0; r < nr; r++) {
            const float *s = rows[r] + 2 * ox;
            const __m512 a = _mm512_maskz_loadu_ps(mlo, s);
            const __m512 b = _mm512_maskz_loadu_ps(mhi, s + 16);
            const __m512 ev = _mm512_permutex2var_ps(a, even, b);
            const __m512 od = _mm512_permutex2var_ps(a, odd, b);
            const __m512i te = _mm512_set1_epi32(toff[r]);
            if (r == 0) {
                cur = ev;
                ct = te;
            } else {
                const __mmask16 k = _mm512_cmp_ps_mask(ev, cur, _CMP_GT_OQ) |
                                    _mm512_cmp_ps_mask(ev, ev, _CMP_UNORD_Q);
                cur = _mm512_mask_mov_ps(cur, k, ev);
                ct = _mm512_mask_mov_epi32(ct, k, te);
            }
            const __mmask16 k =
                _mm512_cmp_ps_mask(od, cur, _CMP_GT_OQ) | _mm512_cmp_ps_mask(od, od, _CMP_UNORD_Q);
            cur = _mm512_mask_mov_ps(cur, k, od);
            ct = _mm512_mask_mov_epi32(ct, k, _mm512_add_epi32(te, _mm512_set1_epi32(1)));
        }
        _mm512_mask_storeu_ps(vr + ox, m, cur);
        const __m512i base = _mm512_add_epi64(_mm512_set1_epi64(o0 + 2 * (int64_t)ox), lane2);
        const __m512i clo = _mm512_cvtepi32_epi64(_mm512_castsi512_si256(ct));
        const __m512i chi = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(ct, 1));
        const __m512i lo = _mm512_add_epi64(base, clo);
        const __m512i hi = _mm512_add_epi64(_mm512_add_epi64(base, _mm512_set1_epi64(16)), chi);
        _mm512_mask_storeu_epi64(ir + ox, (__mmask8)m, lo);
        _mm512_mask_storeu_epi64(ir + ox + 8, (__mmask8)(m >> 8), hi);
    }
}

static void mp_fwd_w2_avx512(const float *const *rows, const int32_t *toff, int nr, ptrdiff_t ow,
                             int64_t o0, float *vr, int64_t *ir, ptrdiff_t oh, ptrdiff_t rs)
{
    const float *rr[8];
    for (ptrdiff_t y = 0; y < oh; y++) {
        for (int r = 0; r < nr; r++)
            rr[r] = rows[r] + y * rs;
        mp_fwd_w2_row_avx512(rr, toff, nr, ow, o0 + y * rs, vr + y * ow, ir + y * ow);
    }
}

/* ---- max_pool2d's values-only rows at column stride 2 (isa.h's gc_mp_s2_f32) ---------------- */

/* 16 outputs a vector (the even elements of 32 inputs by a two-source permute, in order), the
 * last 8 of an odd nv from one load; v > m ? v : m (maxps) in window order, the inputs summed on
 * the side: a NaN makes the sum NaN and the caller redoes its outputs by the exact rule. */
static int mp_s2_avx512(const float *const *rows, int nr, ptrdiff_t kw, ptrdiff_t c0, float *out,
                        ptrdiff_t nv)
{
    const __m512i even =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    __mmask16 bad = 0;
    for (ptrdiff_t v = 0; v < nv; v += 2) {
        const int half = v + 1 == nv; /* 8 outputs: inputs c .. c + 15 (+ kw - 1) only */
        const ptrdiff_t c = c0 + 16 * v;
        __m512 m = _mm512_set1_ps(-__builtin_inff()), sum = _mm512_setzero_ps();
        for (int r = 0; r < nr; r++)
            for (ptrdiff_t kj = 0; kj < kw; kj++) {
                const float *p = rows[r] + c + kj;
                const __m512 a = _mm512_loadu_ps(p);
                const __m512 b = half ? a : _mm512_loadu_ps(p + 16);
                const __m512 x = _mm512_permutex2var_ps(a, even, b);
                sum = _mm512_add_ps(sum, x);
                m = _mm512_max_ps(x, m); /* x > m ? x : m */
            }
        const __mmask16 k = half ? (__mmask16)0xff : (__mmask16)0xffff;
        bad |= _mm512_mask_cmp_ps_mask(k, sum, sum, _CMP_UNORD_Q);
        _mm512_mask_storeu_ps(out + 8 * v, k, m);
    }
    return bad != 0;
}

/* ---- max_pool2d's values-only plane at column stride 2 (isa.h's gc_mp_h2_f32, gc_mp_v_f32) -- */

/* 16 outputs a vector per input row: for each kj two loads and the even elements by a
 * two-source permute, m = v > m ? v : m in kj order.  Vectors reaching past a row's ends load
 * masked (lanes outside the row read -inf and touch no memory; the masks depend on the column
 * only: made once per call, for the at most 64 vectors of a row).  NaN: the loads of kj = 0 and
 * kw - 1 cover every column the vector reads (kw <= 8), compared unordered into a mask. */
static inline __attribute__((always_inline)) __mmask16
mp_h2_vec_avx512(const float *p, ptrdiff_t kw, const __mmask16 (*mk)[2], int full, float *out)
{
    const __m512i even =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    __m512 m = ninf;
    __mmask16 bad = 0;
    for (ptrdiff_t kj = 0; kj < kw; kj++) {
        const __m512 a =
            full ? _mm512_loadu_ps(p + kj) : _mm512_mask_loadu_ps(ninf, mk[kj][0], p + kj);
        const __m512 b = full ? _mm512_loadu_ps(p + kj + 16)
                              : _mm512_mask_loadu_ps(ninf, mk[kj][1], p + kj + 16);
        if (kj == 0 || kj == kw - 1)
            bad = _kor_mask16(bad, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q));
        m = _mm512_max_ps(_mm512_permutex2var_ps(a, even, b), m); /* v > m ? v : m */
    }
    _mm512_storeu_ps(out, m);
    return bad;
}

/* mp_h2 for kw = 3, pw = 1 (ResNet's stem): columns 2 i - 1, 2 i, 2 i + 1 are the odd inputs
 * shifted up a lane (the previous vector's last in lane 0), the even ones and the odd ones: two
 * loads (masked past the row's end) and three permutes per 16 outputs instead of six loads that
 * straddle cache lines; each input loaded once, so each is compared for NaN once. */
static __mmask16 mp_h2_k3p1_avx512(const float *x, ptrdiff_t w, ptrdiff_t nrows, float *hb,
                                   ptrdiff_t owp)
{
    const __m512i even =
        _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    const ptrdiff_t nv = owp / 16;
    __mmask16 bad = 0;
    for (ptrdiff_t y = 0; y < nrows; y++) {
        const float *xr = x + y * w;
        float *hr = hb + y * owp;
        __m512i prev = _mm512_castps_si512(ninf); /* column -1: padding */
        for (ptrdiff_t j = 0; j < nv; j++) {
            const ptrdiff_t ra = w - 32 * j, rb = ra - 16; /* columns left from each load */
            const __mmask16 ka = ra >= 16 ? (__mmask16)0xffff
                                 : ra <= 0 ? (__mmask16)0
                                           : (__mmask16)((1u << ra) - 1);
            const __mmask16 kb = rb >= 16 ? (__mmask16)0xffff
                                 : rb <= 0 ? (__mmask16)0
                                           : (__mmask16)((1u << rb) - 1);
            const __m512 a = _mm512_mask_loadu_ps(ninf, ka, xr + 32 * j);
            const __m512 b = _mm512_mask_loadu_ps(ninf, kb, xr + 32 * j + 16);
            bad = _kor_mask16(bad, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q));
            const __m512 e = _mm512_permutex2var_ps(a, even, b);
            const __m512 o = _mm512_permutex2var_ps(a, odd, b);
            const __m512i oi = _mm512_castps_si512(o);
            __m512 m = _mm512_castsi512_ps(_mm512_alignr_epi32(oi, prev, 15)); /* kj = 0 */
            m = _mm512_max_ps(e, m);                                           /* kj = 1 */
            m = _mm512_max_ps(o, m);                                           /* kj = 2 */
            _mm512_storeu_ps(hr + 16 * j, m);
            prev = oi;
        }
    }
    return bad;
}

static int mp_h2_avx512(const float *x, ptrdiff_t w, ptrdiff_t nrows, ptrdiff_t kw, ptrdiff_t pw,
                        float *hb, ptrdiff_t owp)
{
    if (kw == 3 && pw == 1)
        return mp_h2_k3p1_avx512(x, w, nrows, hb, owp) != 0;
    const ptrdiff_t nv = owp / 16;
    if (nv > 64 || kw > 8)
        return 1; /* the caller's exact path */
    __mmask16 mk[64][8][2];
    unsigned char full[64];
    for (ptrdiff_t j = 0; j < nv; j++) {
        full[j] = 32 * j - pw >= 0 && 32 * j - pw + kw - 1 + 32 <= w;
        for (ptrdiff_t kj = 0; kj < kw; kj++)
            for (int half = 0; half < 2; half++) {
                const ptrdiff_t c = 32 * j - pw + kj + 16 * half; /* lane l: column c + l */
                unsigned k = 0;
                for (int l = 0; l < 16; l++)
                    k |= (unsigned)(c + l >= 0 && c + l < w) << l;
                mk[j][kj][half] = (__mmask16)k;
            }
    }
    __mmask16 bad = 0;
    for (ptrdiff_t y = 0; y < nrows; y++) {
        const float *xr = x + y * w - pw;
        float *hr = hb + y * owp;
        for (ptrdiff_t j = 0; j < nv; j++) {
            const float *p = xr + 32 * j;
            __mmask16 b;
            if (full[j])
                b = kw == 3 ? mp_h2_vec_avx512(p, 3, mk[j], 1, hr + 16 * j)
                            : mp_h2_vec_avx512(p, kw, mk[j], 1, hr + 16 * j);
            else
                b = mp_h2_vec_avx512(p, kw, mk[j], 0, hr + 16 * j);
            bad = _kor_mask16(bad, b);
        }
    }
    return bad != 0;
}

/* 16 outputs a vector, the row's last partial vector masked */
static void mp_v_avx512(const float *const *rows, const int *nr, ptrdiff_t kh, ptrdiff_t nout,
                        float *out, ptrdiff_t ow)
{
    const __m512 ninf = _mm512_set1_ps(-__builtin_inff());
    for (ptrdiff_t oy = 0; oy < nout; oy++) {
        const float *const *rr = rows + oy * kh;
        const int n = nr[oy];
        float *o = out + oy * ow;
        for (ptrdiff_t i = 0; i < ow; i += 16) {
            const __mmask16 k =
                ow - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (ow - i)) - 1);
            __m512 m = ninf;
            for (int r = 0; r < n; r++)
                m = _mm512_max_ps(_mm512_maskz_loadu_ps(k, rr[r] + i), m);
            _mm512_mask_storeu_ps(o + i, k, m);
        }
    }
}

static void gc_isa_fill_avx512_vmath(gc_isa_kernels *k)
{
    k->mp_h2_f32 = mp_h2_avx512;
    k->mp_v_f32 = mp_v_avx512;
    k->mp_fwd_w2_f32 = mp_fwd_w2_avx512;
    k->mp_s2_f32 = mp_s2_avx512;
    k->mp_bwd_w2_f32 = mp_bwd_w2_avx512;
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
    k->vsoftmax4_f32 = vsoftmax4_avx512;
    k->q_linear_u8 = qq_linear_u8;
    k->q_torch_u8 = qq_torch_u8;
    k->q_range_f32 = qrange_avx512;
}

/* ---- the bfloat16 GEMM's micro-kernel (AVX-512 BF16, target attribute) -------------------- */

#include "isa/bf16.h"

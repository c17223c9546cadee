/* NEON (AdvSIMD) kernels for arm64, compiled without extra flags: AdvSIMD is part of the arm64
 * baseline.  GEMM micro-kernels 8x12 float and 8x6 double (24 accumulators of the 32 128-bit
 * registers), the float32 vector math of isa/vmath.h and the optimizer loops of isa/optim.h.
 *
 * The micro-kernels are written here rather than through isa/ukr.h: ukr.h broadcasts A[i, p]
 * into a register per row, and with 8 rows that is 24 accumulators + 3 B vectors + 8 broadcasts,
 * more than the 32 registers (the compiler spills accumulators).  Here the A column is loaded as
 * vectors (2 for float, 4 for double) and each row multiplies by one lane of them (FMLA by
 * element), 24 + 3 + 2 (or 4) registers.  The epilogue follows ukr.h's UKR_EPILOGUE exactly. */
#ifndef NEON_T

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "isa.h"

#define NEON_MR 8
#define NEON_NV 3
#define V_PREFETCH(p) __builtin_prefetch(p)

#define NEON_T float
#define NEON_VT float32x4_t
#define NEON_VL 4
#define V_ZERO() vdupq_n_f32(0.0f)
#define V_LOADU(p) vld1q_f32(p)
#define V_STOREU(p, x) vst1q_f32(p, x)
#define V_SET1(x) vdupq_n_f32(x)
#define V_FMA(a, b, c) vfmaq_f32(c, a, b)
/* c + b * av[lane]: with a constant lane this is one FMLA by element (a vector subscript rather
 * than vfmaq_laneq_f32, whose lane must be a literal, so the rows can be a loop) */
#define V_FMA_LANE(c, b, av, lane) vfmaq_n_f32(c, b, (av)[lane])
#define V_ADD(a, b) vaddq_f32(a, b)
#define V_MUL(a, b) vmulq_f32(a, b)
/* (x <= 0) ? 0 : x; NaN compares false and stays NaN */
#define V_RELU(x)                                                                                 \
    vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(x), vclezq_f32(x)))
#define NEON_NAME gemm_neon_f32_8x12
#define NEON_NAME_DA gemm_da_neon_f32_8x12
#include "isa/neon.c"
#define UKR_T NEON_T
#define UKR_VT NEON_VT
#define UKR_VL NEON_VL
#define V_SUB(a, b) vsubq_f32(a, b)
#define V_HSUM(v) vaddvq_f32(v)
#define S_FMA(a, b, c) __builtin_fmaf(a, b, c)
#define STREAM_ACC 16
#define STREAM_SFX f32
#include "isa/stream.h"
#undef UKR_T
#undef UKR_VT
#undef UKR_VL
#undef V_SUB
#undef V_HSUM
#undef S_FMA
#undef STREAM_ACC
#undef STREAM_SFX
#undef NEON_T
#undef NEON_VT
#undef NEON_VL
#undef V_ZERO
#undef V_LOADU
#undef V_STOREU
#undef V_SET1
#undef V_FMA
#undef V_FMA_LANE
#undef V_ADD
#undef V_MUL
#undef V_RELU
#undef NEON_NAME
#undef NEON_NAME_DA

#define NEON_T double
#define NEON_VT float64x2_t
#define NEON_VL 2
#define V_ZERO() vdupq_n_f64(0.0)
#define V_LOADU(p) vld1q_f64(p)
#define V_STOREU(p, x) vst1q_f64(p, x)
#define V_SET1(x) vdupq_n_f64(x)
#define V_FMA(a, b, c) vfmaq_f64(c, a, b)
#define V_FMA_LANE(c, b, av, lane) vfmaq_n_f64(c, b, (av)[lane])
#define V_ADD(a, b) vaddq_f64(a, b)
#define V_MUL(a, b) vmulq_f64(a, b)
#define V_RELU(x)                                                                                 \
    vreinterpretq_f64_u64(vbicq_u64(vreinterpretq_u64_f64(x), vclezq_f64(x)))
#define NEON_NAME gemm_neon_f64_8x6
#define NEON_NAME_DA gemm_da_neon_f64_8x6
#include "isa/neon.c"
#define UKR_T NEON_T
#define UKR_VT NEON_VT
#define UKR_VL NEON_VL
#define V_SUB(a, b) vsubq_f64(a, b)
#define V_HSUM(v) vaddvq_f64(v)
#define S_FMA(a, b, c) __builtin_fma(a, b, c)
#define STREAM_ACC 16
#define STREAM_SFX f64
#include "isa/stream.h"
#undef UKR_T
#undef UKR_VT
#undef UKR_VL
#undef V_SUB
#undef V_HSUM
#undef S_FMA
#undef STREAM_ACC
#undef STREAM_SFX

static void gc_isa_fill_neon_vmath(gc_isa_kernels *k);

#include "isa/optim.h"
#include "isa/relu_bias.h"
#include "isa/winograd.h"

/* ---- int8 GEMM (qgemm.c; contract in isa.h) ------------------------------------------------ */

/* Widening multiplies (no dot-product extension needed): 8 activation bytes of a row widened to
 * int16 once, each weight row of 16 columns widened to int16, then SMLAL by element into int32:
 * exact for every uint8 / int8 input (uint8 activations widen unsigned, q_shift 0; int8 ones
 * signed, q_shift 128).  Plain rows of B (q_ku 1).  Tile 4 x 16: 16 accumulators, 4 A vectors. */
#include "isa/qgemm.h"

#define Q_NEON_MR 4
#define Q_NEON_NR 16

#define Q_NEON_STEP(kk)                                                                           \
    do {                                                                                          \
        const int8x16_t bb = vld1q_s8(b + (kk) * Q_NEON_NR);                                      \
        const int16x8_t b0 = vmovl_s8(vget_low_s8(bb)), b1 = vmovl_high_s8(bb);                   \
        _Pragma("GCC unroll 4")                                                                   \
        for (int i = 0; i < R; i++) {                                                             \
            acc[i][0] = vmlal_laneq_s16(acc[i][0], vget_low_s16(b0), av[i], kk);                  \
            acc[i][1] = vmlal_high_laneq_s16(acc[i][1], b0, av[i], kk);                           \
            acc[i][2] = vmlal_laneq_s16(acc[i][2], vget_low_s16(b1), av[i], kk);                  \
            acc[i][3] = vmlal_high_laneq_s16(acc[i][3], b1, av[i], kk);                           \
        }                                                                                         \
    } while (0)

static inline __attribute__((always_inline)) void
q_neon_tile(const int R, const int SX, ptrdiff_t kb, const uint8_t *restrict a, ptrdiff_t lda,
            const int8_t *restrict b, int32_t *restrict c, ptrdiff_t ldc, int accumulate)
{
    int32x4_t acc[Q_NEON_MR][4];
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            acc[i][v] = accumulate ? vld1q_s32(c + i * ldc + 4 * v) : vdupq_n_s32(0);
    for (ptrdiff_t p = 0; p < kb; p += 8) {
        int16x8_t av[Q_NEON_MR];
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) {
            const uint8x8_t raw = vld1_u8(a + i * lda + p);
            av[i] = SX ? vmovl_s8(vreinterpret_s8_u8(raw)) : vreinterpretq_s16_u16(vmovl_u8(raw));
        }
        Q_NEON_STEP(0);
        Q_NEON_STEP(1);
        Q_NEON_STEP(2);
        Q_NEON_STEP(3);
        Q_NEON_STEP(4);
        Q_NEON_STEP(5);
        Q_NEON_STEP(6);
        Q_NEON_STEP(7);
        b += 8 * Q_NEON_NR;
    }
#pragma GCC unroll 4
    for (int i = 0; i < R; i++)
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++)
            vst1q_s32(c + i * ldc + 4 * v, acc[i][v]);
}

#define Q_NEON_CASE(R)                                                                            \
    case R:                                                                                       \
        if (a_signed)                                                                             \
            q_neon_tile(R, 1, kb, a, lda, b, c, ldc, accumulate);                                 \
        else                                                                                      \
            q_neon_tile(R, 0, kb, a, lda, b, c, ldc, accumulate);                                 \
        break;

static void qgemm_neon_u8s8_4x16(int rows, ptrdiff_t kb, const uint8_t *a, ptrdiff_t lda,
                                 const int8_t *b, int32_t *c, ptrdiff_t ldc, int accumulate,
                                 int a_signed)
{
    switch (rows) {
        Q_NEON_CASE(1)
        Q_NEON_CASE(2)
        Q_NEON_CASE(3)
    default: Q_NEON_CASE(4)
    }
}

void gc_isa_fill_neon(gc_isa_kernels *k)
{
    k->q_mr = Q_NEON_MR;
    k->q_nr = Q_NEON_NR;
    k->q_ku = 1;
    k->q_shift[0] = 0;
    k->q_shift[1] = 128;
    k->q_ukr = qgemm_neon_u8s8_4x16;
    k->q_ukr_full = NULL;
    k->q_epi = qepi_row;
    k->q_name = "qgemm_neon_u8s8_4x16";
    gc_optim_fill(k);
    gc_relu_bias_fill(k);
    gc_winograd_fill(k);
    gc_isa_fill_neon_vmath(k);
    k->mr_f32 = 8;
    k->nr_f32 = 12;
    k->ukr_f32 = gemm_neon_f32_8x12;
    k->ukr_da_f32 = gemm_da_neon_f32_8x12;
    k->ukr_f32_name = "gemm_neon_f32_8x12";
    k->mr_f64 = 8;
    k->nr_f64 = 6;
    k->ukr_f64 = gemm_neon_f64_8x6;
    k->ukr_da_f64 = gemm_da_neon_f64_8x6;
    k->ukr_f64_name = "gemm_neon_f64_8x6";
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

/* The first n (< 4) lanes; the others read as 0 / are not written (like AVX2's maskload). */
static inline float32x4_t gc_neon_loadn(const float *p, ptrdiff_t n)
{
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    memcpy(t, p, (size_t)n * sizeof *p);
    return vld1q_f32(t);
}

static inline void gc_neon_storen(float *p, float32x4_t v, ptrdiff_t n)
{
    float t[4];
    vst1q_f32(t, v);
    memcpy(p, t, (size_t)n * sizeof *p);
}

#define GC_BITOP(op, a, b)                                                                        \
    vreinterpretq_f32_u32(op(vreinterpretq_u32_f32(a), vreinterpretq_u32_f32(b)))

#define VF float32x4_t
#define VI int32x4_t
#define VM uint32x4_t
#define VD float64x2_t
#define VLANES 4
#define vf_set1(v) vdupq_n_f32(v)
#define vf_loadu(p) vld1q_f32(p)
#define vf_storeu(p, v) vst1q_f32(p, v)
#define vf_loadn(p, n) gc_neon_loadn(p, n)
#define vf_storen(p, v, n) gc_neon_storen(p, v, n)
#define vf_add vaddq_f32
#define vf_sub vsubq_f32
#define vf_mul vmulq_f32
#define vf_div vdivq_f32
#define vf_fma(a, b, c) vfmaq_f32(c, a, b)
#define vf_fnma(a, b, c) vfmsq_f32(c, a, b)
/* minps / maxps semantics (the second operand when either is NaN), which vmath.h relies on;
 * FMIN / FMAX would return NaN, FMINNM / FMAXNM the number */
#define vf_min(a, b) vbslq_f32(vcltq_f32(a, b), a, b)
#define vf_max(a, b) vbslq_f32(vcgtq_f32(a, b), a, b)
#define vf_and(a, b) GC_BITOP(vandq_u32, a, b)
#define vf_or(a, b) GC_BITOP(vorrq_u32, a, b)
#define vf_xor(a, b) GC_BITOP(veorq_u32, a, b)
#define vf_andnot(a, b) GC_BITOP(vbicq_u32, b, a) /* BIC: b & ~a */
#define vf_round vrndnq_f32                       /* to nearest, ties to even */
#define vf_cvti vcvtnq_s32_f32                    /* likewise (cvtps2dq's default mode) */
#define vi_cvtf vcvtq_f32_s32
#define vi_set1 vdupq_n_s32
#define vi_add vaddq_s32
#define vi_sub vsubq_s32
#define vi_srai vshrq_n_s32
#define vi_slli vshlq_n_s32
#define vi_and vandq_s32
#define vi_or vorrq_s32
#define vf_asi vreinterpretq_s32_f32
#define vi_asf vreinterpretq_f32_s32
#define vf_lt vcltq_f32
#define vf_le vcleq_f32
#define vf_gt vcgtq_f32
#define vf_ge vcgeq_f32
#define vf_eq vceqq_f32
#define vf_isnan(a) vmvnq_u32(vceqq_f32(a, a))
#define vf_blend(m, a, b) vbslq_f32(m, b, a)
#define vm_bits(m) vaddvq_u32(vandq_u32(m, (uint32x4_t){1, 2, 4, 8}))
#define vd_lo(x) vcvt_f64_f32(vget_low_f32(x))
#define vd_hi(x) vcvt_high_f64_f32(x)
#define vd_tof2(lo, hi) vcvt_high_f32_f64(vcvt_f32_f64(lo), hi)
#define vd_set1 vdupq_n_f64
#define vd_add vaddq_f64
#define vd_sub vsubq_f64
#define vd_mul vmulq_f64
#define vd_fma(a, b, c) vfmaq_f64(c, a, b)
#define vd_storeu vst1q_f64

#include "isa/vmath.h"

VM_ARRAY(vexp_neon, vm_exp)
VM_ARRAY(vlog_neon, vm_log)
VM_ARRAY(vtanh_neon, vm_tanh)
VM_ARRAY(vsigmoid_neon, vm_sigmoid)
VM_GELU_ARRAY(vgelu_neon)
VM_ARRAY(vgelu_tanh_neon, vm_gelu_tanh)
VM_GELU_BACKWARD_ARRAY(vgelu_backward_neon)
VM_EXP_SHIFT_SUM(vexp_shift_sum_neon)
VM_MAX(vmax_neon)
VM_SUB2_MUL(vsub2_mul_neon)
VM_SOFTMAX4(vsoftmax4_neon)

#include "isa/quant.h"
QQ_RANGE(qrange_neon)

static void gc_isa_fill_neon_vmath(gc_isa_kernels *k)
{
    k->vunary_f32[GC_UNARY_EXP] = vexp_neon;
    k->vunary_f32[GC_UNARY_LOG] = vlog_neon;
    k->vunary_f32[GC_UNARY_TANH] = vtanh_neon;
    k->vunary_f32[GC_UNARY_SIGMOID] = vsigmoid_neon;
    k->vunary_f32[GC_UNARY_GELU] = vgelu_neon;
    k->vunary_f32[GC_UNARY_GELU_TANH] = vgelu_tanh_neon;
    k->vgelu_backward_f32 = vgelu_backward_neon;
    k->vexp_shift_sum_f32 = vexp_shift_sum_neon;
    k->vmax_f32 = vmax_neon;
    k->vsub2_mul_f32 = vsub2_mul_neon;
    k->vsoftmax4_f32 = vsoftmax4_neon;
    k->q_linear_u8 = qq_linear_u8;
    k->q_torch_u8 = qq_torch_u8;
    k->q_range_f32 = qrange_neon;
}

#else /* the micro-kernels of one element type (contract in isa.h) */

#define NEON_UNROLL_(n) _Pragma(#n)
#define NEON_UNROLL(n) NEON_UNROLL_(GCC unroll n)

/* acc (ROWS x NEON_NV vectors) (+ beta * C) (+ bias) (relu) stored to C at c: isa/ukr.h's
 * UKR_EPILOGUE (same operations, same order); a macro so the accumulators stay in registers. */
#define NEON_EPILOGUE(ROWS)                                                                       \
    do {                                                                                          \
        if (beta == (NEON_T)1) {                                                                  \
            NEON_UNROLL(8)                                                                        \
            for (int i = 0; i < (ROWS); i++)                                                      \
                NEON_UNROLL(3)                                                                    \
                for (int v = 0; v < NEON_NV; v++)                                                 \
                    acc[i][v] = V_ADD(acc[i][v], V_LOADU(c + i * ldc + v * NEON_VL));             \
        } else if (beta != (NEON_T)0) {                                                           \
            const NEON_VT bt = V_SET1(beta);                                                      \
            NEON_UNROLL(8)                                                                        \
            for (int i = 0; i < (ROWS); i++)                                                      \
                NEON_UNROLL(3)                                                                    \
                for (int v = 0; v < NEON_NV; v++)                                                 \
                    acc[i][v] = V_FMA(bt, V_LOADU(c + i * ldc + v * NEON_VL), acc[i][v]);         \
        }                                                                                         \
        if (bias) {                                                                               \
            NEON_UNROLL(3)                                                                        \
            for (int v = 0; v < NEON_NV; v++) {                                                   \
                const NEON_VT bb = V_LOADU(bias + v * NEON_VL);                                   \
                NEON_UNROLL(8)                                                                    \
                for (int i = 0; i < (ROWS); i++)                                                  \
                    acc[i][v] = V_ADD(acc[i][v], bb);                                             \
            }                                                                                     \
        }                                                                                         \
        if (relu) {                                                                               \
            NEON_UNROLL(8)                                                                        \
            for (int i = 0; i < (ROWS); i++)                                                      \
                NEON_UNROLL(3)                                                                    \
                for (int v = 0; v < NEON_NV; v++)                                                 \
                    acc[i][v] = V_RELU(acc[i][v]);                                                \
        }                                                                                         \
        NEON_UNROLL(8)                                                                            \
        for (int i = 0; i < (ROWS); i++)                                                          \
            NEON_UNROLL(3)                                                                        \
            for (int v = 0; v < NEON_NV; v++)                                                     \
                V_STOREU(c + i * ldc + v * NEON_VL, acc[i][v]);                                   \
    } while (0)

/* Packed A: per step p the 8 values A[0..7, p] are one (float) or two (double) loads of the
 * micro-panel, and row i takes lane i % VL of vector i / VL. */
static void NEON_NAME(ptrdiff_t k, const NEON_T *restrict a, const NEON_T *restrict b,
                      ptrdiff_t ldb, NEON_T *restrict c, ptrdiff_t ldc, NEON_T beta,
                      const NEON_T *restrict bias, int relu)
{
    NEON_VT acc[NEON_MR][NEON_NV];
    NEON_UNROLL(8)
    for (int i = 0; i < NEON_MR; i++) {
        V_PREFETCH(c + i * ldc);
        NEON_UNROLL(3)
        for (int v = 0; v < NEON_NV; v++)
            acc[i][v] = V_ZERO();
    }
    for (ptrdiff_t p = 0; p < k; p++) {
        NEON_VT av[NEON_MR / NEON_VL], bv[NEON_NV];
        NEON_UNROLL(4)
        for (int j = 0; j < NEON_MR / NEON_VL; j++)
            av[j] = V_LOADU(a + j * NEON_VL);
        NEON_UNROLL(3)
        for (int v = 0; v < NEON_NV; v++)
            bv[v] = V_LOADU(b + v * NEON_VL);
        NEON_UNROLL(8)
        for (int i = 0; i < NEON_MR; i++)
            NEON_UNROLL(3)
            for (int v = 0; v < NEON_NV; v++)
                acc[i][v] = V_FMA_LANE(acc[i][v], bv[v], av[i / NEON_VL], i % NEON_VL);
        a += NEON_MR;
        b += ldb;
    }
    NEON_EPILOGUE(NEON_MR);
}

/* A read in place (A[i, p] at a[i * lda + p]): a row gives VL consecutive steps per load, so the
 * tile runs as two halves of 4 rows (12 accumulators + 4 A rows + 3 B vectors; all 8 rows at once
 * would need 8 A registers next to the 24 accumulators).  B is read once per half; it is small
 * (this path only runs for small problems) and in cache.  Then alpha, as ukr.h does. */
static void NEON_NAME_DA(ptrdiff_t k, const NEON_T *restrict a, ptrdiff_t lda,
                         const NEON_T *restrict b, ptrdiff_t ldb, NEON_T *restrict c,
                         ptrdiff_t ldc, NEON_T alpha, NEON_T beta, const NEON_T *restrict bias,
                         int relu)
{
    for (int half = 0; half < 2; half++, a += 4 * lda, c += 4 * ldc) {
        NEON_VT acc[4][NEON_NV];
        NEON_UNROLL(4)
        for (int i = 0; i < 4; i++) {
            V_PREFETCH(c + i * ldc);
            NEON_UNROLL(3)
            for (int v = 0; v < NEON_NV; v++)
                acc[i][v] = V_ZERO();
        }
        const NEON_T *restrict bp = b;
        ptrdiff_t p = 0;
        for (; p + NEON_VL <= k; p += NEON_VL) {
            NEON_VT ar[4];
            NEON_UNROLL(4)
            for (int i = 0; i < 4; i++)
                ar[i] = V_LOADU(a + i * lda + p);
            NEON_UNROLL(4)
            for (int q = 0; q < NEON_VL; q++, bp += ldb) {
                NEON_VT bv[NEON_NV];
                NEON_UNROLL(3)
                for (int v = 0; v < NEON_NV; v++)
                    bv[v] = V_LOADU(bp + v * NEON_VL);
                NEON_UNROLL(4)
                for (int i = 0; i < 4; i++)
                    NEON_UNROLL(3)
                    for (int v = 0; v < NEON_NV; v++)
                        acc[i][v] = V_FMA_LANE(acc[i][v], bv[v], ar[i], q);
            }
        }
        for (; p < k; p++, bp += ldb) {
            NEON_VT bv[NEON_NV];
            NEON_UNROLL(3)
            for (int v = 0; v < NEON_NV; v++)
                bv[v] = V_LOADU(bp + v * NEON_VL);
            NEON_UNROLL(4)
            for (int i = 0; i < 4; i++) {
                const NEON_VT ai = V_SET1(a[i * lda + p]);
                NEON_UNROLL(3)
                for (int v = 0; v < NEON_NV; v++)
                    acc[i][v] = V_FMA(ai, bv[v], acc[i][v]);
            }
        }
        if (alpha != (NEON_T)1) {
            const NEON_VT al = V_SET1(alpha);
            NEON_UNROLL(4)
            for (int i = 0; i < 4; i++)
                NEON_UNROLL(3)
                for (int v = 0; v < NEON_NV; v++)
                    acc[i][v] = V_MUL(acc[i][v], al);
        }
        NEON_EPILOGUE(4);
    }
}

#undef NEON_EPILOGUE
#undef NEON_UNROLL
#undef NEON_UNROLL_

#endif /* NEON_T */

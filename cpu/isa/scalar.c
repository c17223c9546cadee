/* Portable reference kernels (plain C, compiled with the baseline flags everywhere): the GEMM
 * micro-kernels every other ISA is tested against.  The vector-math entries stay NULL: unary.c's
 * libm loops are the reference for those.  vexp_shift_sum_f32 is never NULL, so softmax calls it
 * without a check: here it is libm's expf and a double sum (also what sse2 runs). */
#include <math.h>

#include "isa.h"

#define UKR_UNROLL 1
#define V_ZERO() 0
#define V_LOADU(p) (*(p))
#define V_STOREU(p, x) (*(p) = (x))
#define V_SET1(x) (x)
#define V_FMA(a, b, c) ((a) * (b) + (c))
#define V_ADD(a, b) ((a) + (b))
#define V_MUL(a, b) ((a) * (b))
#define V_RELU(x) ((x) <= 0 ? 0 : (x))
#define V_PREFETCH(p) ((void)0)
#define UKR_VL 1
#define UKR_MR 4
#define UKR_NV 4

#define UKR_T float
#define UKR_VT float
#define UKR_NAME gemm_scalar_f32_4x4
#define UKR_NAME_DA gemm_da_scalar_f32_4x4
#include "isa/ukr.h"
#define V_SUB(a, b) ((a) - (b))
#define V_HSUM(v) (v)
#define S_FMA(a, b, c) ((a) * (b) + (c))
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
#undef UKR_NAME
#undef UKR_NAME_DA

#define UKR_T double
#define UKR_VT double
#define UKR_NAME gemm_scalar_f64_4x4
#define UKR_NAME_DA gemm_da_scalar_f64_4x4
#include "isa/ukr.h"
#define V_SUB(a, b) ((a) - (b))
#define V_HSUM(v) (v)
#define S_FMA(a, b, c) ((a) * (b) + (c))
#define STREAM_ACC 8
#define STREAM_SFX f64
#include "isa/stream.h"
#undef V_SUB
#undef V_HSUM
#undef S_FMA
#undef STREAM_ACC
#undef STREAM_SFX
#undef UKR_T
#undef UKR_VT
#undef UKR_NAME

#include "isa/optim.h"
#include "isa/relu_bias.h"
#include "isa/winograd.h"

/* isa.h's contract; every term is added in double, so the chunking it allows is moot here. */
static double vexp_shift_sum_scalar(const float *x, float *y, ptrdiff_t n, float m)
{
    double s = 0.0;
    for (ptrdiff_t j = 0; j < n; j++) {
        const float e = expf(x[j] - m);
        if (y)
            y[j] = e;
        s += (double)e;
    }
    return s;
}

#include "isa/qgemm.h"
GC_QUKR_REF(qgemm_scalar_u8s8_4x16, 16, 4, 0)

void gc_isa_fill_scalar(gc_isa_kernels *k)
{
    k->q_mr = 4;
    k->q_nr = 16;
    k->q_ku = 4;
    k->q_shift[0] = k->q_shift[1] = 0;
    k->q_ukr = qgemm_scalar_u8s8_4x16;
    k->q_ukr_full = NULL;
    k->q_epi = qepi_row;
    k->q_name = "qgemm_scalar_u8s8_4x16";
    gc_optim_fill(k);
    gc_relu_bias_fill(k);
    gc_winograd_fill(k);
    k->mr_f32 = 4;
    k->nr_f32 = 4;
    k->ukr_f32 = gemm_scalar_f32_4x4;
    k->ukr_da_f32 = gemm_da_scalar_f32_4x4;
    k->ukr_f32_name = "gemm_scalar_f32_4x4";
    k->mr_f64 = 4;
    k->nr_f64 = 4;
    k->ukr_f64 = gemm_scalar_f64_4x4;
    k->ukr_da_f64 = gemm_da_scalar_f64_4x4;
    k->ukr_f64_name = "gemm_scalar_f64_4x4";
    k->gemv_n_f32 = gemv_n_f32;
    k->gemv_t_f32 = gemv_t_f32;
    k->gemv_t_stream_f32 = gemv_t_stream_f32;
    k->gemv_n_f64 = gemv_n_f64;
    k->gemv_t_f64 = gemv_t_f64;
    k->gemv_t_stream_f64 = gemv_t_stream_f64;
    k->ln_row_f32 = ln_row_f32;
    k->ln_row_f64 = ln_row_f64;
    for (int op = 0; op < GC_UNARY_COUNT; op++)
        k->vunary_f32[op] = NULL;
    k->vexp_shift_sum_f32 = vexp_shift_sum_scalar;
    k->vmax_f32 = NULL;
    k->vsub2_mul_f32 = NULL;
    k->vsoftmax4_f32 = NULL;
    k->q_linear_u8 = NULL;
    k->q_torch_u8 = NULL;
    k->q_range_f32 = NULL;
}

/* ---- direct convolution (isa/ukr_conv.h): the portable reference, the GEMM's 4x4 tile ------ */

/* the GEMM's vector operations and 4 x 4 tile, still defined; the float32 types again */
#if UKR_MR != 4 || UKR_NV != 4 || UKR_VL != 1
#error "scalar.c's conv reference tile is the GEMM's 4 x 4 scalar tile: define its own here"
#endif
#define UKR_T float
#define UKR_VT float
#define UKR_CONV_NAME conv_scalar_f32_4x4
#include "isa/ukr_conv.h"
#define UKR_PW_RELU(x) V_RELU(x) /* (the GEMM's, both types) */
#define UKR_PW_NAME pw_scalar_f32_4x4
#include "isa/ukr_pw.h"
/* the few-input-channels direct convolution's row kernel (conv_c1.c): one pixel, 4 channels */
#define UKR_C1_RELU(x) V_RELU(x)
#define UKR_C1_OB 4
#define UKR_C1_NAME c1_scalar_f32
#define UKR_C1_BODY c1_scalar_body
#include "isa/ukr_c1.h"

void gc_conv_fill_scalar(gc_isa_kernels *k)
{
    k->pwukr_f32 = pw_scalar_f32_4x4;
    k->cukr_f32 = conv_scalar_f32_4x4;
    k->cukr_f32_name = "conv_scalar_f32_4x4";
    k->cukr_mr = 4;
    k->cukr_nr = 4;
    k->c1ukr_f32 = c1_scalar_f32;
    k->c1_ob = UKR_C1_OB;
    k->c1_vl = 1;
}

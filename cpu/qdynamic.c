/* ONNX DynamicQuantizeLinear (uint8), fused: one pass for the range of x, one quantizing it.
 *
 * The arithmetic is onnx.reference's (onnx/reference/ops/op_dynamic_quantize_linear.py), every
 * operation in float32 (the file is compiled without contraction or -ffast-math):
 *
 *   hi = max(0, max x), lo = min(0, min x)            (NaN anywhere: both NaN)
 *   scale = (hi == lo ? 1 : hi - lo) / 255
 *   zp = rint(clamp(0 - lo / scale, 0, 255))          (NaN -> 255: Python's min(255, nan))
 *   y = clamp(rint(x / scale) + zp, 0, 255)           (NaN -> 0)
 *
 * with rint rounding half to even.  y is gc_quantize_linear_u8 with (scale, zp): ONNX
 * QuantizeLinear's formula, the same float32 division.  So a NaN input gives scale NaN, zero
 * point 255 and y all 0; +inf or -inf give scale inf (as both onnx.reference and ONNX Runtime);
 * empty x gives the range [0, 0]: scale 1/255, zero point 0 (onnx.reference raises there;
 * ONNX Runtime gives scale 1).  ONNX Runtime differs on NaN (its min / max skip it) and on an
 * all-zero x (scale 1 instead of 1/255; y and the zero point agree).
 *
 * gc_dynamic_quantize_torch_u8, at the end: the same range with PyTorch's quantize_dynamic
 * parameters and rounding instead (the traced dynamic quantized Linear's, fused). */
#include <float.h>
#include <math.h>

#include "isa.h"
#include "kernels.h"

/* *lo, *hi of x[0..n) (isa.h's q_range_f32 contract): the ISA's vector loop, or this one. */
static void q_range(const float *x, ptrdiff_t n, float *lo, float *hi)
{
    if (gc_isa.q_range_f32) {
        gc_isa.q_range_f32(x, n, lo, hi);
        return;
    }
    float l = 0.0f, h = 0.0f;
    int nan = 0;
    for (ptrdiff_t i = 0; i < n; i++) {
        const float v = x[i];
        l = v < l ? v : l;
        h = v > h ? v : h;
        nan |= v != v;
    }
    *lo = nan ? NAN : l;
    *hi = nan ? NAN : h;
}

/* The range pass split over threads: each part's extremes, merged (min and max are exact, so
 * the split changes nothing). */
#define Q_RANGE_PARTS 64

typedef struct {
    const float *x;
    ptrdiff_t n;
    float lo[Q_RANGE_PARTS], hi[Q_RANGE_PARTS];
} q_range_job;

static void q_range_task(void *ctx, int tid, int nt)
{
    q_range_job *J = ctx;
    ptrdiff_t a, b;
    gc_split(J->n, 64, tid, nt, &a, &b);
    q_range(J->x + a, b - a, &J->lo[tid], &J->hi[tid]);
}

/* ~0.15 ns per element for the range (a vector min / max per load), ~0.5 for the division */
#define Q_RANGE_NS 0.15
#define Q_DIVIDE_NS 0.5

/* *lo, *hi: the range of x[0..n) with 0 in it (NaN anywhere: both NaN), split over threads
 * for large n. */
static void q_range_all(const float *x, ptrdiff_t n, float *lo_out, float *hi_out)
{
    float lo = 0.0f, hi = 0.0f;
    int nt = gc_threads_for((double)n * Q_RANGE_NS, GC_GRAIN_NS);
    if (nt > Q_RANGE_PARTS)
        nt = Q_RANGE_PARTS;
    if (nt <= 1) {
        q_range(x, n, &lo, &hi);
    } else {
        q_range_job J = {.x = x, .n = n};
        gc_parallel(q_range_task, &J, nt);
        for (int t = 0; t < nt; t++) {
            lo = J.lo[t] < lo || J.lo[t] != J.lo[t] ? J.lo[t] : lo;
            hi = J.hi[t] > hi || J.hi[t] != J.hi[t] ? J.hi[t] : hi;
        }
    }
    *lo_out = lo;
    *hi_out = hi;
}

void gc_dynamic_qparams_u8(const float *x, ptrdiff_t n, float *scale, uint8_t *zp)
{
    float lo, hi;
    q_range_all(x, n, &lo, &hi);
    const float s = (hi == lo ? 1.0f : hi - lo) / 255.0f;
    float z = 0.0f - lo / s;
    z = z < 255.0f ? z : 255.0f; /* NaN -> 255 */
    z = z > 0.0f ? z : 0.0f;
    *scale = s;
    *zp = (uint8_t)rintf(z);
}

typedef struct {
    const float *x;
    uint8_t *y;
    float scale;
    int32_t zp;
} q_quant_job;

static void q_quant_range(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const q_quant_job *J = ctx;
    gc_quantize_linear_u8(J->x + lo, J->y + lo, hi - lo, J->scale, J->zp);
}

void gc_dynamic_quantize_u8(const float *x, ptrdiff_t n, uint8_t *y, float *scale, uint8_t *zp)
{
    float s;
    uint8_t z;
    gc_dynamic_qparams_u8(x, n, &s, &z);
    if (y) {
        q_quant_job J = {.x = x, .y = y, .scale = s, .zp = z};
        gc_parallel_range(n, 64, (double)n * Q_DIVIDE_NS, q_quant_range, &J);
    }
    if (scale)
        *scale = s;
    if (zp)
        *zp = z;
}

/* PyTorch's per-call activation parameters (quantize_dynamic's eager arithmetic,
 * gpucore/quantization/kernels.py's activation_qparams), every operation in float32:
 *
 *   scale = max((hi - lo) / 255, FLT_EPSILON)
 *   zp = clamp(-rint(lo / scale), 0, 255)
 *   y = gc_quantize_u8(x, scale, zp): clamp(rint(x * (1 / scale) + zp), 0, 255)
 *
 * over the same range [lo, hi] as above.  A range that is not finite (inf or NaN in x, or finite
 * extremes whose distance hi - lo overflows float32, which the eager layer refuses) gives scale
 * NaN and zero point 0: every product with it is NaN. */
static void q_quant_torch_range(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const q_quant_job *J = ctx;
    gc_quantize_u8(J->x + lo, J->y + lo, hi - lo, J->scale, J->zp);
}

void gc_dynamic_quantize_torch_u8(const float *x, ptrdiff_t n, uint8_t *y, float *scale,
                                  uint8_t *zp)
{
    float lo, hi, s = NAN;
    int32_t z = 0;
    q_range_all(x, n, &lo, &hi);
    if (isfinite(hi - lo)) { /* lo and hi finite, and their distance too */
        s = (hi - lo) / 255.0f;
        s = s < FLT_EPSILON ? FLT_EPSILON : s;
        float r = -rintf(lo / s);
        r = r < 0.0f ? 0.0f : r;
        r = r > 255.0f ? 255.0f : r;
        z = (int32_t)r;
    }
    if (y) {
        q_quant_job J = {.x = x, .y = y, .scale = s, .zp = z};
        gc_parallel_range(n, 64, (double)n * Q_DIVIDE_NS, q_quant_torch_range, &J);
    }
    if (scale)
        *scale = s;
    if (zp)
        *zp = (uint8_t)z;
}

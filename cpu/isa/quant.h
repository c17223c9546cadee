/* ONNX's float32 -> uint8 quantization loops, written once (the int8 GEMM's epilogue is
 * isa/qgemm.h):
 *
 *   qq_linear_u8: QuantizeLinear's  out = clamp(round_half_even(x / scale), -zp, 255 - zp) + zp,
 *       a float32 division (ONNX Runtime's MlasQuantizeLinear), NaN -> 0.  qconv.c compiles it
 *       with the baseline flags (gc_quantize_linear_u8) and each cpu/isa/<isa>.c with its own
 *       (isa.h's q_linear_u8): the same C, so the same bits, vectorized to each width;
 *   QQ_RANGE(NAME): isa.h's q_range_f32, DynamicQuantizeLinear's range, for the ISA files that
 *       define isa/vmath.h's vector operations (avx2.c, avx512.c, neon.c).
 *
 * Included after <stddef.h> / <stdint.h> (isa.h brings them). */

/* rint for |v| <= 2^22 without a libm call (the baseline ISA has no rounding instruction):
 * adding and subtracting 1.5 * 2^23 rounds to an integer in the current mode (to nearest, ties to
 * even), as rintf does; the files are compiled without -ffast-math, so both operations stay. */
#define QQ_RINT_MAGIC 12582912.0f

/* The quotient is clamped first (NaN to the low end: y > lo is false), so the rounding stays
 * exact and the sum lies in [0, 255]: round(clamp(q)) = clamp(round(q)) for integer bounds. */
static inline void qq_linear_u8(const float *restrict x, uint8_t *restrict out, ptrdiff_t n,
                                float scale, int32_t zp)
{
    const float lo = (float)-zp, hi = (float)(255 - zp);
    for (ptrdiff_t i = 0; i < n; i++) {
        const float y = x[i] / scale;
        float c = y > lo ? y : lo;
        c = c < hi ? c : hi;
        const float r = (c + QQ_RINT_MAGIC) - QQ_RINT_MAGIC;
        out[i] = (uint8_t)((int)r + zp);
    }
}

/* PyTorch's quantize_per_tensor rounding (gc_quantize_u8, gpucore's eager quantize_array):
 * out = clamp(rint(fl32(fl32(x * fl32(1 / scale)) + zp)), 0, 255), NaN -> 255.  Clamped to
 * [-1, 256] first (NaN to 256: y < 256 is false), so the rounding stays exact and saturates as
 * the rounded value would.  Each operation rounded on its own (no contraction): the same bits at
 * every width (isa.h's q_torch_u8; qconv.c compiles it with the baseline flags). */
static inline void qq_torch_u8(const float *restrict x, uint8_t *restrict out, ptrdiff_t n,
                               float scale, int32_t zp)
{
    const float inv = 1.0f / scale, z = (float)zp;
    /* -1 and 256 exactly, computed: with literal bounds GCC 12 leaves this loop scalar ("control
     * flow in loop"), ~6 ns per value */
    const float lo = (float)(zp - 1) - z, hi = (float)(zp + 256) - z;
    for (ptrdiff_t i = 0; i < n; i++) {
        /* two statements: C lets a compiler contract `a * b + c` within one expression into
         * an FMA (clang does by default, GCC only without -std=c11), one rounding fewer on
         * FMA builds; a product stored to a float is rounded on every compiler */
        const float p = x[i] * inv;
        const float y = p + z;
        float c = y < hi ? y : hi;
        c = c > lo ? c : lo;
        float r = (c + QQ_RINT_MAGIC) - QQ_RINT_MAGIC;
        r = r > 0.0f ? r : 0.0f;
        r = r < 255.0f ? r : 255.0f;
        out[i] = (uint8_t)(int)r;
    }
}

/* isa.h's q_range_f32: *lo = min(0, min x), *hi = max(0, max x) over x[0..n), or both NaN when
 * some x is NaN (as numpy's min / max, which onnx.reference's DynamicQuantizeLinear reads).
 * vf_min(v, acc) / vf_max(v, acc) keep acc when v is NaN, so the extremes skip NaN; a separate
 * accumulator takes every NaN lane (vf_blend) and says whether there was one.  Min and max are
 * exact, so the lane split changes nothing. */
#define QQ_RANGE(NAME)                                                                            \
    static void NAME(const float *x, ptrdiff_t n, float *lo, float *hi)                           \
    {                                                                                             \
        const VF zero = vf_set1(0.0f);                                                            \
        VF l0 = zero, l1 = zero, h0 = zero, h1 = zero, nan = zero;                                \
        ptrdiff_t j = 0;                                                                          \
        for (; j + 2 * VLANES <= n; j += 2 * VLANES) {                                            \
            const VF u = vf_loadu(x + j), v = vf_loadu(x + j + VLANES);                          \
            l0 = vf_min(u, l0);                                                                   \
            h0 = vf_max(u, h0);                                                                   \
            l1 = vf_min(v, l1);                                                                   \
            h1 = vf_max(v, h1);                                                                   \
            nan = vf_blend(vf_isnan(u), nan, u);                                                  \
            nan = vf_blend(vf_isnan(v), nan, v);                                                  \
        }                                                                                         \
        float tl[VLANES], th[VLANES], tn[VLANES];                                                 \
        vf_storeu(tl, vf_min(l0, l1));                                                            \
        vf_storeu(th, vf_max(h0, h1));                                                            \
        vf_storeu(tn, nan);                                                                       \
        float l = 0.0f, h = 0.0f;                                                                 \
        int any = 0;                                                                              \
        for (int k = 0; k < VLANES; k++) {                                                        \
            l = tl[k] < l ? tl[k] : l;                                                            \
            h = th[k] > h ? th[k] : h;                                                            \
            any |= tn[k] != tn[k];                                                                \
        }                                                                                         \
        for (; j < n; j++) {                                                                      \
            const float v = x[j];                                                                 \
            l = v < l ? v : l;                                                                    \
            h = v > h ? v : h;                                                                    \
            any |= v != v;                                                                        \
        }                                                                                         \
        *lo = any ? NAN : l;                                                                      \
        *hi = any ? NAN : h;                                                                      \
    }

// Special functions of the unary ops (floor .. digamma in cpu/opcodes.def) that GLSL lacks or has
// only to ~2^-21 near 1 (log2, exp2): erf, erfinv, expm1, exp2, log2, log10, lgamma, digamma,
// accurate to float32 (a few ulp; lgamma and digamma to ~1e-6 absolute near their roots).
// Include-only; needs float_math.glsl (log_ff, exp_ff, two_prod) and activation.glsl (act_erfc).
#ifndef SPECIAL_GLSL
#define SPECIAL_GLSL

#include "erfinv_giles.h"  // (cpu/) its polynomials, shared with cpu/unary.c

const float PI_F = 3.14159265358979323846;

// erf: its Taylor series below 0.5 (where 1 - erfc loses the relative precision), else 1 - erfc.
float erf_(float x) {
    if (abs(x) < 0.5) {
        float z = x * x;
        return 1.1283791670955126 * x * (1.0 + z * (-1.0 / 3.0 + z * (0.1 + z * (-1.0 / 42.0
               + z * (1.0 / 216.0 + z * (-1.0 / 1320.0))))));
    }
    return 1.0 - act_erfc(x);
}

// erfinv: Giles' single-precision approximation (GPU Computing Gems, 2011; cpu/erfinv_giles.h).
float erfinv_(float y) {
    float a = abs(y);
    if (isnan(y) || a > 1.0) return QNAN;
    if (a == 1.0) return y > 0.0 ? INF : -INF;
    float w = -log((1.0 - a) * (1.0 + a));
    float p;
    GC_ERFINV_GILES(w, p)
    return p * y;
}

// expm1: Taylor series for |x| < 0.35 (no cancellation), else exp - 1 (exp >= 1.42 or <= 0.71).
float expm1_(float x) {
    if (isnan(x)) return x;
    if (x > 89.0) return INF;
    if (x < -104.0) return -1.0;
    if (abs(x) < 0.35) {
        return x * (1.0 + x / 2.0 * (1.0 + x / 3.0 * (1.0 + x / 4.0 * (1.0 + x / 5.0 * (1.0
               + x / 6.0 * (1.0 + x / 7.0 * (1.0 + x / 8.0 * (1.0 + x / 9.0))))))));
    }
    return exp_ff(x, 0.0) - 1.0;
}

// 2^x: exact at the integers (k = round(x), r = x - k exact, 2^r from exp_ff in float-float).
float exp2_(float x) {
    if (isnan(x)) return x;
    if (x >= 128.0) return INF;
    if (x < -150.0) return 0.0;
    float k = round(x);
    float r = x - k;
    vec2 t = two_prod(r, 0.693147182464599609375);
    precise float lo = t.y + r * -1.904654323148236e-9;
    float q = exp_ff(t.x, lo);
    int ki = int(k);
    int k1 = ki / 2;
    return ldexp(ldexp(q, k1), ki - k1);
}

// log(x) * c for c = hi + lo as float-float (log2, log10): exact at the powers of two for log2.
float log_scaled(float x, float hi, float lo) {
    if (isnan(x)) return x;
    if (x < 0.0) return QNAN;
    if (x == 0.0) return -INF;
    if (isinf(x)) return x;
    vec2 l = log_ff(x);
    vec2 t = two_prod(l.x, hi);
    precise float e = t.y + (l.y * hi + l.x * lo);
    return t.x + e;
}

float log2_(float x) { return log_scaled(x, 1.44269502162933349609375, 1.925963033500011e-8); }

float log10_(float x) { return log_scaled(x, 0.4342944920063018798828125, -1.010305e-8); }

// lgamma(2 + z) for |z| <= 0.5: (1 - gamma) z + sum_k (-1)^k (zeta(k) - 1) / k z^k, k = 2..13
// (no cancellation at the roots 1 and 2, where the shift-and-Stirling form below loses ~1e-6).
float lgamma2_series(float z) {
    return z * (0.42278433509846713 + z * (0.32246703341161753 + z * (-0.06735230105320945
           + z * (0.02058080842777586 + z * (-0.007385551028673584 + z * (0.0028905103307414783
           + z * (-0.0011927539117032558 + z * (0.0005096695247430413
           + z * (-0.00022315475845357898 + z * (9.945751278180853e-05
           + z * (-4.492623673813314e-05 + z * (2.0507212775670674e-05
           + z * -9.439488275268395e-06))))))))))));
}

// lgamma for x >= 0.5: the series around 2 (below 1.5 through lgamma(x) = lgamma(x + 1) -
// log1p(x - 1); up to 10 through lgamma(x) = lgamma(x - k) + log((x - 1) ... (x - k))), else
// Stirling's series.
float lgamma_pos(float x) {
    if (x < 1.5) return lgamma2_series(x - 1.0) - log1p_(x - 1.0);
    if (x < 10.0) {
        float p = 1.0;
        while (x >= 2.5) {
            x -= 1.0;  // exact below 2^23
            p *= x;
        }
        return lgamma2_series(x - 2.0) + log_ff(p).x;
    }
    float z = 1.0 / (x * x);
    float s = (1.0 / 12.0 + z * (-1.0 / 360.0 + z * (1.0 / 1260.0 + z * (-1.0 / 1680.0)))) / x;
    vec2 lx = log_ff(x);
    return ((x - 0.5) * lx.x - x) + (0.91893853320467274 + s + (x - 0.5) * lx.y);
}

// lgamma = log|gamma|: +inf at the poles (0, -1, ...) and at +-inf; -log|x| for subnormal x
// (decoded from the bits: drivers may flush them); the reflection
// lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x) below 0.5.
float lgamma_(float x) {
    if (isnan(x)) return x;
    if (isinf(x)) return INF;
    uint b = floatBitsToUint(x) & 0x7fffffffu;
    if (b == 0u) return INF;
    if (b < 0x00800000u) return 149.0 * 0.69314718055994531 - log(float(b));
    if (x < 0.5) {
        if (x == floor(x)) return INF;
        float s = abs(sin_(PI_F * (x - round(x))));  // |sin(pi x)| has period 1; x - round(x) exact
        return log(PI_F / s) - lgamma_pos(1.0 - x);
    }
    return lgamma_pos(x);
}

// digamma as the C kernel (PyTorch's calc_digamma): -inf at +0, +inf at -0, NaN at the
// negative integers, reflection below 0, recurrence to x >= 6, then the asymptotic series.
float digamma_(float x) {
    if (isnan(x)) return x;
    if (x == 0.0) return sign_bit(x) ? INF : -INF;
    float r = 0.0;
    if (x < 0.0) {
        if (x == floor(x)) return QNAN;
        float xr = x - round(x);  // pi / tan(pi x) has period 1; the reduction is exact
        r = -PI_F * cos_(PI_F * xr) / sin_(PI_F * xr);
        x = 1.0 - x;
    }
    if (isinf(x)) return INF;
    while (x < 6.0) {
        r -= 1.0 / x;
        x += 1.0;
    }
    float f = 1.0 / (x * x);
    float t = f * (-1.0 / 12.0 + f * (1.0 / 120.0 + f * (-1.0 / 252.0 + f * (1.0 / 240.0
              + f * (-1.0 / 132.0)))));
    return r + log_ff(x).x - 0.5 / x + t;
}

#endif

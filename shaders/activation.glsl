// Activation functions shared by the GEMM epilogue and unary_ops.glsl (the unary and fused
// elementwise shaders), so all of them round alike. Include-only.
// Codes: ACT_NONE, ACT_RELU, ... from the activation codes of cpu/opcodes.def (gemm.py's
// ACTIVATIONS derives from the same table).
#ifndef ACTIVATION_GLSL
#define ACTIVATION_GLSL

#define GC_ACT(NAME, name, code) const uint ACT_##NAME = uint(code);
#include "opcodes.def"
#undef GC_ACT

// erfc with max relative error 1.2e-7 (Numerical Recipes, Chebyshev fit): no cancellation in
// the tail, where gelu and its gradient need it (0.5 * x * erfc(-x / sqrt 2)).
float act_erfc(float v) {
    float z = abs(v);
    float t = 1.0 / (1.0 + 0.5 * z);
    float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
              t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
              t * (-0.82215223 + t * 0.17087277)))))))));
    return v >= 0.0 ? r : 2.0 - r;
}

float act_erf(float v) { return 1.0 - act_erfc(v); }

float act_tanh(float v) {
    if (isnan(v)) return v;  // clamp of a NaN is undefined: NaN passes through, as in C
    float a = abs(v);
    if (a < 0.55) {
        // tanh |v| = -expm1(-2|v|) / (2 + expm1(-2|v|)), expm1 by its Taylor series (|y| <= 1.1,
        // alternating, truncation < 2^-27): GLSL's tanh is only good to an absolute 2^-25 here,
        // and tiny (or subnormal) v must give v itself.
        if (a < 1e-4) return v;  // tanh v = v (1 - v^2/3 + ...): v^2/3 is below half an ulp
        float y = -2.0 * a;
        float em1 = y * (1.0 + y * (1.0 / 2.0 + y * (1.0 / 6.0 + y * (1.0 / 24.0 + y * (1.0 / 120.0
                    + y * (1.0 / 720.0 + y * (1.0 / 5040.0 + y * (1.0 / 40320.0 + y * (1.0 / 362880.0
                    + y * (1.0 / 3628800.0 + y * (1.0 / 39916800.0 + y / 479001600.0)))))))))));
        float t = -em1 / (2.0 + em1);
        return v < 0.0 ? -t : t;
    }
    // GLSL's tanh may overflow through exp for large |v|; clamp where tanh is +-1 in float32.
    return tanh(clamp(v, -10.0, 10.0));
}

float act_sigmoid(float v) {
    return v >= 0.0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v));
}

float activate(uint act, float v) {
    if (act == ACT_RELU) return v > 0.0 ? v : (isnan(v) ? v : 0.0);
    // gelu(-inf) is -0 as in C (the formula gives -inf * 0 = NaN); gelu(+inf) = +inf
    if ((act == ACT_GELU || act == ACT_GELU_TANH) && isinf(v)) return v > 0.0 ? v : -0.0;
    if (act == ACT_GELU) return 0.5 * v * act_erfc(-v * 0.7071067811865476);
    // 0.5 (1 + tanh u) = sigmoid(2u): no cancellation for very negative v
    if (act == ACT_GELU_TANH)
        return v * act_sigmoid(2.0 * 0.7978845608028654 * (v + 0.044715 * v * v * v));
    if (act == ACT_SIGMOID) return act_sigmoid(v);
    if (act == ACT_TANH) return act_tanh(v);
    return v;
}

#endif

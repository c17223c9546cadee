// Activation functions shared by the GEMM epilogue and unary_ops.glsl (the unary and fused
// elementwise shaders), so all of them round alike. Include-only.
// Codes: ACT_NONE, ACT_RELU, ... from the activation codes of cpu/opcodes.def (gemm.py's
// ACTIVATIONS derives from the same table).
#ifndef ACTIVATION_GLSL
#define ACTIVATION_GLSL

#define GC_ACT(NAME, name, code) const uint ACT_##NAME = uint(code);
#include "opcodes.def"
#undef GC_ACT

// erf with max abs error 1.2e-7 (Numerical Recipes erfc, Chebyshev fit).
float act_erf(float v) {
    float z = abs(v);
    float t = 1.0 / (1.0 + 0.5 * z);
    float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
              t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
              t * (-0.82215223 + t * 0.17087277)))))))));
    return v >= 0.0 ? 1.0 - r : r - 1.0;
}

float act_tanh(float v) {
    // GLSL's tanh may overflow through exp for large |v|; clamp where tanh is +-1 in float32.
    return tanh(clamp(v, -10.0, 10.0));
}

float act_sigmoid(float v) {
    return v >= 0.0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v));
}

float activate(uint act, float v) {
    if (act == ACT_RELU) return v > 0.0 ? v : (isnan(v) ? v : 0.0);
    if (act == ACT_GELU) return 0.5 * v * (1.0 + act_erf(v * 0.7071067811865476));
    if (act == ACT_GELU_TANH)
        return 0.5 * v * (1.0 + act_tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
    if (act == ACT_SIGMOID) return act_sigmoid(v);
    if (act == ACT_TANH) return act_tanh(v);
    return v;
}

#endif

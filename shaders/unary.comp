#version 450
#extension GL_GOOGLE_include_directive : require
// Elementwise unary ops and activation backward ops on contiguous float32 data.
// OP (constant 1) selects the function; BACKWARD (constant 2) = 1 computes grad * f'(saved).
#include "common.glsl"

layout(constant_id = 1) const int OP = 0;
layout(constant_id = 2) const int BACKWARD = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer G { float g[]; };   // grad (BACKWARD only)
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };

layout(push_constant) uniform Push {
    uint n;
    uint x_off;
    uint g_off;
    uint y_off;
} p;

// Op codes: the same numbering as gpucore._cpu's UNARY_* constants.
const int NEG = 0, ABS = 1, EXP = 2, LOG = 3, SQRT = 4, RELU = 5, SIGMOID = 6, TANH = 7,
          GELU = 8, GELU_TANH = 9, SIGN = 10, SIN = 11, COS = 12, RECIPROCAL = 13;
const float SQRT_2_PI = 0.7978845608028654;
const float INV_SQRT2 = 0.7071067811865476;
const float INV_SQRT_2PI = 0.3989422804014327;

// erf with max abs error 1.2e-7 (Numerical Recipes erfc, Chebyshev fit).
float erf_approx(float v) {
    float z = abs(v);
    float t = 1.0 / (1.0 + 0.5 * z);
    float r = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
              t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
              t * (-0.82215223 + t * 0.17087277)))))))));
    return v >= 0.0 ? 1.0 - r : r - 1.0;
}

float stable_tanh(float v) {
    // GLSL's tanh may overflow through exp for large |v|; clamp where tanh is +-1 in float32.
    float c = clamp(v, -10.0, 10.0);
    return tanh(c);
}

float sigmoid(float v) {
    return v >= 0.0 ? 1.0 / (1.0 + exp(-v)) : exp(v) / (1.0 + exp(v));
}

float forward_op(float v) {
    if (OP == NEG) return -v;
    if (OP == ABS) return abs(v);
    if (OP == EXP) return exp(v);
    if (OP == LOG) return log(v);
    if (OP == SQRT) return sqrt(v);
    if (OP == RELU) return v > 0.0 ? v : (isnan(v) ? v : 0.0);
    if (OP == SIGMOID) return sigmoid(v);
    if (OP == TANH) return stable_tanh(v);
    if (OP == GELU) return 0.5 * v * (1.0 + erf_approx(v * INV_SQRT2));
    if (OP == GELU_TANH) return 0.5 * v * (1.0 + stable_tanh(SQRT_2_PI * (v + 0.044715 * v * v * v)));
    if (OP == SIGN) return isnan(v) ? v : sign(v);
    if (OP == SIN) return sin(v);
    if (OP == COS) return cos(v);
    if (OP == RECIPROCAL) return 1.0 / v;
    return v;
}

// grad * f'(s): s is x for RELU/GELU*, y = f(x) for SIGMOID/TANH.
float backward_op(float gr, float s) {
    if (OP == RELU) return s > 0.0 ? gr : 0.0;
    if (OP == SIGMOID) return gr * s * (1.0 - s);
    if (OP == TANH) return gr * (1.0 - s * s);
    if (OP == GELU) {
        float cdf = 0.5 * (1.0 + erf_approx(s * INV_SQRT2));
        float pdf = exp(-0.5 * s * s) * INV_SQRT_2PI;
        return gr * (cdf + s * pdf);
    }
    if (OP == GELU_TANH) {
        float u = SQRT_2_PI * (s + 0.044715 * s * s * s);
        float t = stable_tanh(u);
        float du = SQRT_2_PI * (1.0 + 3.0 * 0.044715 * s * s);
        return gr * (0.5 * (1.0 + t) + 0.5 * s * (1.0 - t * t) * du);
    }
    return gr;
}

void main() {
    uint i = global_index();
    if (i >= p.n) return;
    if (BACKWARD == 1) {
        y[p.y_off + i] = backward_op(g[p.g_off + i], x[p.x_off + i]);
    } else {
        y[p.y_off + i] = forward_op(x[p.x_off + i]);
    }
}

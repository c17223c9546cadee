#version 450
#extension GL_GOOGLE_include_directive : require
// Elementwise unary ops and activation backward ops on contiguous float32 data, one op per
// pipeline: OP (constant 1) selects the function (unary_ops.glsl); BACKWARD (constant 2) = 1
// computes grad * f'(saved). fused.comp runs the same functions from a program of several ops.
// HALF (constant 3) = HALF_F16 / HALF_BF16 (half.glsl): x, g and y hold 16-bit values, two to a
// word, widened to float32 for the function and rounded back (as the CPU computes them); each
// invocation writes one word (two elements). Offsets are in elements (y_off: in words for HALF).
#include "common.glsl"
#include "half.glsl"
#include "unary_ops.glsl"

layout(constant_id = 1) const int OP = 0;
layout(constant_id = 2) const int BACKWARD = 0;
layout(constant_id = 3) const int HALF = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) readonly buffer G { float g[]; };   // grad (BACKWARD only)
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };
layout(std430, set = 0, binding = 0) readonly buffer XW { uint xw[]; };
layout(std430, set = 0, binding = 1) readonly buffer GW { uint gw[]; };
layout(std430, set = 0, binding = 2) writeonly buffer YW { uint yw[]; };

layout(push_constant) uniform Push {
    uint n;
    uint x_off;
    uint g_off;
    uint y_off;
} p;

uint half_result(uint i) {
    float v = half_to_f32(HALF, HALF_AT(xw, p.x_off + i));
    if (BACKWARD == 1) {
        return f32_to_half(HALF, unary_backward(OP, half_to_f32(HALF, HALF_AT(gw, p.g_off + i)), v));
    }
    return f32_to_half(HALF, unary_forward(OP, v));
}

void main() {
    uint i = global_index();
    if (HALF != 0) {
        uint first = 2u * i;
        if (first >= p.n) return;
        uint bits = half_result(first);
        if (first + 1u < p.n) bits |= half_result(first + 1u) << 16;
        yw[p.y_off + i] = bits;
        return;
    }
    if (i >= p.n) return;
    if (BACKWARD == 1) {
        y[p.y_off + i] = unary_backward(OP, g[p.g_off + i], x[p.x_off + i]);
    } else {
        y[p.y_off + i] = unary_forward(OP, x[p.x_off + i]);
    }
}

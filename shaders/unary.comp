#version 450
#extension GL_GOOGLE_include_directive : require
// Elementwise unary ops and activation backward ops on contiguous float32 data, one op per
// pipeline: OP (constant 1) selects the function (unary_ops.glsl); BACKWARD (constant 2) = 1
// computes grad * f'(saved). fused.comp runs the same functions from a program of several ops.
#include "common.glsl"
#include "unary_ops.glsl"

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

void main() {
    uint i = global_index();
    if (i >= p.n) return;
    if (BACKWARD == 1) {
        y[p.y_off + i] = unary_backward(OP, g[p.g_off + i], x[p.x_off + i]);
    } else {
        y[p.y_off + i] = unary_forward(OP, x[p.x_off + i]);
    }
}

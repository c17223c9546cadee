#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
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

// One call site of the op's function (the invocation's one or two elements in a loop): two
// would make glslang inline the whole op table twice, and lavapipe's pipeline creation time
// grows with the module.
void main() {
    const uint E = HALF != 0 ? 2u : 1u;  // elements per invocation
    uint w = global_index();
    uint first = E * w;
    if (first >= p.n) return;
    uint count = min(E, p.n - first);
    uint bits = 0u;
    [[dont_unroll]] for (uint j = 0u; j < count; ++j) {
        uint i = first + j;
        float v = HALF != 0 ? half_to_f32(HALF, HALF_AT(xw, p.x_off + i)) : x[p.x_off + i];
        float r;
        if (BACKWARD == 1) {
            float gv = HALF != 0 ? half_to_f32(HALF, HALF_AT(gw, p.g_off + i)) : g[p.g_off + i];
            r = unary_backward(OP, gv, v);
        } else {
            r = unary_forward(OP, v);
        }
        if (HALF != 0) {
            bits |= f32_to_half(HALF, r) << (16u * j);
        } else {
            y[p.y_off + i] = r;
        }
    }
    if (HALF != 0) yw[p.y_off + w] = bits;
}

#version 450
#extension GL_GOOGLE_include_directive : require
// float64 reductions over the middle axis of a C-contiguous [outer, n, inner] array, in double
// precision (devices with shaderFloat64; kernels/reduce64.py): one invocation per (outer,
// inner) column loops over n. OP (constant 1): reduce.comp's SUM (Kahan-compensated; MEAN
// divides by n), MAX, MIN (NaN propagates) from cpu/opcodes.def; MEAN (constant 2) = 1 divides.
#include "common.glsl"

layout(constant_id = 1) const int OP = 0;
layout(constant_id = 2) const int MEAN = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { uint y[]; };

// Mirrored by kernels/reduce64.py; offsets in doubles.
layout(push_constant) uniform Push {
    uint outer;
    uint n;
    uint inner;
    uint x_off;
    uint y_off;
} p;

#define GC_REDUCE_OP(NAME, value) const int NAME = value;
#define GC_REDUCE_FLAG(NAME, value)
#include "opcodes.def"
#undef GC_REDUCE_OP
#undef GC_REDUCE_FLAG

void main() {
    uint gid = global_index();
    if (gid >= p.outer * p.inner) return;
    uint o = gid / p.inner;
    uint i = gid - o * p.inner;
    uint base = p.x_off + o * p.n * p.inner + i;
    precise double s = OP == SUM ? 0.0LF : (OP == MAX ? -1.0LF / 0.0LF : 1.0LF / 0.0LF);
    precise double c = 0.0LF;
    for (uint j = 0u; j < p.n; ++j) {
        uint e = base + j * p.inner;
        double v = packDouble2x32(uvec2(x[2u * e], x[2u * e + 1u]));
        if (OP == SUM) {
            precise double t = v - c;  // Kahan: c holds what the last addition lost
            precise double u = s + t;
            c = (u - s) - t;
            s = u;
        } else if (isnan(v) || (OP == MAX ? v > s : v < s)) {
            s = v;  // once s is NaN nothing compares greater, so it stays
        }
    }
    if (MEAN == 1) s /= double(p.n);
    uvec2 bits = unpackDouble2x32(s);
    y[2u * (p.y_off + gid)] = bits.x;
    y[2u * (p.y_off + gid) + 1u] = bits.y;
}

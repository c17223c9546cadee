#version 450
#extension GL_GOOGLE_include_directive : require
// Strided copy of 32-bit words: dst[layout_d(i)] = src[layout_s(i)] for i in [0, n), where
// layout maps the row-major index i over `shape` to offset + sum(coord * stride). Strides may be
// zero or negative. Used for contiguous(), clone, in-place writes and 64-bit data (2 words).
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer S { uint src[]; };
layout(std430, set = 0, binding = 1) writeonly buffer D { uint dst[]; };

layout(push_constant) uniform Push {
    uint n;
    uint ndim;
    int src_off;
    int dst_off;
    uint shape[8];
    int src_stride[8];
    int dst_stride[8];
} p;

void main() {
    uint i = global_index();
    if (i >= p.n) return;
    uint rem = i;
    int s = p.src_off;
    int d = p.dst_off;
    for (int k = int(p.ndim) - 1; k >= 0; --k) {
        uint c = rem % p.shape[k];
        rem /= p.shape[k];
        s += int(c) * p.src_stride[k];
        d += int(c) * p.dst_stride[k];
    }
    dst[d] = src[s];
}

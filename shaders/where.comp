#version 450
#extension GL_GOOGLE_include_directive : require
// where: y[i] = cond(i) ? a(i) : b(i) over the row-major index i of `shape`, each operand read at
// offset + sum(coord_k * stride_k) (strides 0 for broadcasting, or negative). cond is a bool
// tensor (1 byte per element, read out of 32-bit words; offsets/strides in bytes); a, b and y
// hold items of WORDS (constant 1) 32-bit words of any type (1: float32, int32; 2: int64),
// copied as bits; their offsets/strides are in items. y is contiguous.
#include "common.glsl"

layout(constant_id = 1) const int WORDS = 1;

layout(std430, set = 0, binding = 0) readonly buffer C { uint c[]; };
layout(std430, set = 0, binding = 1) readonly buffer A { uint a[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { uint b[]; };
layout(std430, set = 0, binding = 3) writeonly buffer Y { uint y[]; };

// 30 words = 120 bytes (mirrored in gpucore/backends/vulkan/kernels/elementwise.py).
layout(push_constant) uniform Push {
    uint n;
    uint ndim;     // 1..6 after dropping size-1 dims and merging the rest
    int c_off;
    int a_off;
    int b_off;
    uint y_off;
    uint shape[6];
    int c_stride[6];
    int a_stride[6];
    int b_stride[6];
} p;

void main() {
    uint i = global_index();
    if (i >= p.n) return;
    uint rem = i;
    int ic = p.c_off;
    int ia = p.a_off;
    int ib = p.b_off;
    for (int k = int(p.ndim) - 1; k >= 0; --k) {
        uint q = rem % p.shape[k];
        rem /= p.shape[k];
        ic += int(q) * p.c_stride[k];
        ia += int(q) * p.a_stride[k];
        ib += int(q) * p.b_stride[k];
    }
    bool cond = ((c[ic >> 2] >> (8 * (ic & 3))) & 0xffu) != 0u;
    if (WORDS == 2) {
        y[2u * (p.y_off + i)] = cond ? a[2 * ia] : b[2 * ib];
        y[2u * (p.y_off + i) + 1u] = cond ? a[2 * ia + 1] : b[2 * ib + 1];
    } else {
        y[p.y_off + i] = cond ? a[ia] : b[ib];
    }
}

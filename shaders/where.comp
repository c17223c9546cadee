#version 450
#extension GL_GOOGLE_include_directive : require
// where: y[i] = cond(i) ? a(i) : b(i) over the row-major index i of `shape`, each operand read at
// offset + sum(coord_k * stride_k) (strides 0 for broadcasting, or negative). cond is a bool
// tensor (1 byte per element, read out of 32-bit words; offsets/strides in bytes); a, b and y
// hold items of WORDS (constant 1) 32-bit words of any type (1: float32, int32, uint32; 2: int64,
// uint64, float64), or bytes (WORDS = 0: bool, int8, uint8; four to each word of y, one
// invocation per word), or 16-bit items (WORDS = 3: float16, bfloat16, int16, uint16; two to each
// word of y), copied as bits; their offsets/strides are in items. y is contiguous.
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

// Element i's chosen item: its item index in a (when cond holds) or b, and which.
ivec2 pick(uint i) {
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
    return cond ? ivec2(ia, 1) : ivec2(ib, 0);
}

void main() {
    uint i = global_index();
    if (WORDS == 0 || WORDS == 3) {
        // bytes (16-bit items): word i of y holds elements PER*i .. (p.y_off is in words); past
        // n the rest of the word is scratch of the allocation
        const uint PER = WORDS == 0 ? 4u : 2u;
        const int LOG = WORDS == 0 ? 2 : 1;
        const uint BITS = 32u / PER;
        const uint MASK = WORDS == 0 ? 0xffu : 0xffffu;
        uint first = PER * i;
        if (first >= p.n) return;
        uint bits = 0u;
        uint m = min(PER, p.n - first);
        for (uint j = 0u; j < m; ++j) {
            ivec2 s = pick(first + j);
            uint w = s.y == 1 ? a[s.x >> LOG] : b[s.x >> LOG];
            bits |= ((w >> (BITS * uint(s.x & int(PER - 1u)))) & MASK) << (BITS * j);
        }
        y[p.y_off + i] = bits;
        return;
    }
    if (i >= p.n) return;
    ivec2 s = pick(i);
    if (WORDS == 2) {
        y[2u * (p.y_off + i)] = s.y == 1 ? a[2 * s.x] : b[2 * s.x];
        y[2u * (p.y_off + i) + 1u] = s.y == 1 ? a[2 * s.x + 1] : b[2 * s.x + 1];
    } else {
        y[p.y_off + i] = s.y == 1 ? a[s.x] : b[s.x];
    }
}

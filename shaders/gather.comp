#version 450
#extension GL_GOOGLE_include_directive : require
// gather (torch.gather): y[i] = x[x_off + sum_k coord_k * x_stride[k] + idx(i) * x_dstride],
// idx(i) = index[i_off + sum_k coord_k * i_stride[k]], over the row-major index i of `shape`
// (index's shape; y is contiguous). x_stride is 0 on the gathered dim, whose stride is
// x_dstride; the host drops size-1 dims and merges dims contiguous in x, index and y.
//
// index is int64, read as two 32-bit words (low, high). An index outside [0, dim_size)
// (negative ones have a high word != 0) never addresses memory: its element is FILL (NaN for
// float data, 0 otherwise); eager calls with host indices are checked by the host first
// (kernels/indexing.py), so this only shows for indices that live on the device.
//
// ELEM (constant 1): item size in bytes. 4: 32-bit items; 8: two words; 1: bytes (bool, int8,
// uint8), four results packed into each output word, so one invocation writes whole words; 2:
// 16-bit items (float16, bfloat16, int16, uint16), two to a word.
// FILL_LO / FILL_HI (constants 2, 3): the fill's word(s) (its low bits for ELEM 1 and 2).
#include "common.glsl"

layout(constant_id = 1) const int ELEM = 4;
layout(constant_id = 2) const uint FILL_LO = 0u;
layout(constant_id = 3) const uint FILL_HI = 0u;

layout(std430, set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(std430, set = 0, binding = 1) readonly buffer I { uint ind[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { uint y[]; };

// 31 words (mirrored by _PUSH in gpucore/backends/vulkan/kernels/indexing.py). Offsets and
// strides in items (x, y: of ELEM bytes; index: int64 elements); y_off in words.
layout(push_constant) uniform Push {
    uint n;          // output elements
    uint ndim;       // 1..8
    int x_off;
    int i_off;
    uint y_off;
    int x_dstride;   // x's stride along the gathered dim
    uint dim_size;   // x's size along the gathered dim
    uint shape[8];
    int x_stride[8];
    int i_stride[8];
} p;

// x's item offset for output element e, or -1 when its index is out of range.
int source(uint e) {
    uint rem = e;
    int ix = p.x_off;
    int ii = p.i_off;
    for (int k = int(p.ndim) - 1; k >= 0; --k) {
        uint c = rem % p.shape[k];
        rem /= p.shape[k];
        ix += int(c) * p.x_stride[k];
        ii += int(c) * p.i_stride[k];
    }
    uint lo = ind[2 * ii];
    uint hi = ind[2 * ii + 1];
    if (hi != 0u || lo >= p.dim_size) return -1;
    return ix + int(lo) * p.x_dstride;
}

// A byte (ELEM 1) or 16-bit item (ELEM 2) of x, or the fill.
uint small_at(int s) {
    const uint MASK = ELEM == 1 ? 0xffu : 0xffffu;
    if (s < 0) return FILL_LO & MASK;
    if (ELEM == 1) return (x[s >> 2] >> (8 * (s & 3))) & MASK;
    return (x[s >> 1] >> (16 * (s & 1))) & MASK;
}

void main() {
    uint w = global_index();
    if (ELEM < 4) {
        // word w holds elements PER*w ..; past n the rest of the word is scratch
        const uint PER = 4u / uint(ELEM);
        uint first = PER * w;
        if (first >= p.n) return;
        uint bits = 0u;
        uint m = min(PER, p.n - first);
        for (uint j = 0u; j < m; ++j) bits |= small_at(source(first + j)) << (8u * uint(ELEM) * j);
        y[p.y_off + w] = bits;
        return;
    }
    if (w >= p.n) return;
    int s = source(w);
    if (ELEM == 8) {
        y[p.y_off + 2u * w] = s < 0 ? FILL_LO : x[2 * s];
        y[p.y_off + 2u * w + 1u] = s < 0 ? FILL_HI : x[2 * s + 1];
    } else {
        y[p.y_off + w] = s < 0 ? FILL_LO : x[s];
    }
}

#version 450
#extension GL_GOOGLE_include_directive : require
// Strided copy: dst[layout_d(i)] = src[layout_s(i)] for i in [0, n), where layout maps the
// row-major index i over `shape` to offset + sum(coord * stride). Strides may be zero or
// negative. Used for contiguous(), clone, in-place writes, cat (one dispatch per input into its
// slice of the output) and 64-bit data (2 words).
//
// BYTES (constant 1) = 0: items are 32-bit words (offsets and strides in words).
// BYTES = 1: items are bytes (bool), read out of and written into 32-bit words; offsets and
//   strides in bytes. Neighbouring bytes of one word may belong to other invocations (or to
//   other dispatches writing the rest of a cat's output), so each invocation clears and sets
//   only its own byte lane with atomics: no 8-bit storage feature, no lost writes.
// BYTES = 2: items are 16-bit (float16, bfloat16), offsets and strides in 16-bit units; written
//   into their half of a word with atomics, as bytes.
#include "common.glsl"

layout(constant_id = 1) const int BYTES = 0;

layout(std430, set = 0, binding = 0) readonly buffer S { uint src[]; };
layout(std430, set = 0, binding = 1) buffer D { uint dst[]; };

// 28 words (mirrored by copy_array in gpucore/backends/vulkan/kernels/common.py).
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
    if (BYTES == 2) {
        uint v = (src[s >> 1] >> (16 * (s & 1))) & 0xffffu;
        uint sh = 16u * uint(d & 1);
        atomicAnd(dst[d >> 1], ~(0xffffu << sh));
        atomicOr(dst[d >> 1], v << sh);
    } else if (BYTES == 1) {
        uint v = (src[s >> 2] >> (8 * (s & 3))) & 0xffu;
        uint sh = 8u * uint(d & 3);
        atomicAnd(dst[d >> 2], ~(0xffu << sh));
        atomicOr(dst[d >> 2], v << sh);
    } else {
        dst[d] = src[s];
    }
}

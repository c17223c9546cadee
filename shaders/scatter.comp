#version 450
#extension GL_GOOGLE_include_directive : require
// scatter, scatter_add and scatter_reduce (torch's, along `dim`), one invocation per element of
// the output, which already holds the input (the host copied it there): the invocation at output
// coordinates c looks at every index position q with q == c off `dim` (q[dim] = 0 .. J-1, in
// order) and, where index[q] == c[dim], folds src[q] into its value. Visiting the positions in
// order is what the CPU kernel (numpy's ufunc.at, row-major over the index) does for any one
// destination, so sums and products round the same way and, for a plain scatter, the last write
// wins; no two invocations write the same element, so nothing needs atomics.
//
// index and src are C-contiguous arrays of the index's shape (the host slices src to it and
// copies strided ones); `out` is C-contiguous. An index outside [0, size) matches nothing (host
// indices are checked by the host first, as the CPU raises).
//
// MODE (constant 1): 0 scatter (copy WORDS 32-bit words per item: 1 or 2), 1 sum, 2 prod,
// 3 amax, 4 amin, 5 mean (float32). INCLUDE_SELF (constant 3): with false, a destination that
// index reaches starts from the reduction's identity instead of its own value (numpy's
// maximum / minimum rule for the rest: NaN propagates, of two equal values the second).
#include "common.glsl"
#include "float_math.glsl"

layout(constant_id = 1) const int MODE = 0;
layout(constant_id = 2) const int WORDS = 1;
layout(constant_id = 3) const bool INCLUDE_SELF = true;

layout(std430, set = 0, binding = 0) readonly buffer I { uint ind[]; };
layout(std430, set = 0, binding = 1) readonly buffer S { uint src[]; };
layout(std430, set = 0, binding = 2) buffer Y { uint y[]; };

// 22 words (mirrored in gpucore/backends/vulkan/kernels/scatter.py); offsets in items.
layout(push_constant) uniform Push {
    uint n;          // output elements
    uint ndim;       // 1..8
    uint dim;
    uint y_off;
    uint i_off;      // int64 items
    uint s_off;
    uint shape[8];   // the output's
    uint ishape[8];  // index's (and src's)
} p;

const int COPY = 0, SUM = 1, PROD = 2, AMAX = 3, AMIN = 4, MEAN = 5;

float identity() {
    if (MODE == PROD) return 1.0;
    if (MODE == AMAX) return uintBitsToFloat(0xff800000u);  // -inf
    if (MODE == AMIN) return uintBitsToFloat(0x7f800000u);  // +inf
    return 0.0;
}

float fold(float acc, float s) {
    if (MODE == PROD) return acc * s;
    if (MODE == AMAX) return fmaximum(acc, s);
    if (MODE == AMIN) return fminimum(acc, s);
    return acc + s;
}

void main() {
    uint e = global_index();
    if (e >= p.n) return;
    // the index position of e's coordinates off `dim`, and the stride along it
    uint rem = e, q0 = 0u, step = 1u, qstride = 1u, mine = 0u;
    for (int k = int(p.ndim) - 1; k >= 0; --k) {
        uint c = rem % p.shape[k];
        rem /= p.shape[k];
        if (uint(k) == p.dim) {
            mine = c;
            qstride = step;
        } else {
            if (c >= p.ishape[k]) return;  // no index position reaches e: it keeps the input
            q0 += c * step;
        }
        step *= p.ishape[k];
    }
    uint J = p.ishape[p.dim];
    if (MODE == COPY) {
        int last = -1;
        for (uint j = 0u; j < J; ++j) {
            uint q = q0 + j * qstride;
            if (ind[2u * (p.i_off + q)] == mine && ind[2u * (p.i_off + q) + 1u] == 0u) last = int(j);
        }
        if (last < 0) return;
        uint q = q0 + uint(last) * qstride;
        for (int w = 0; w < WORDS; ++w)
            y[WORDS * (p.y_off + e) + w] = src[WORDS * (p.s_off + q) + w];
        return;
    }
    float acc = uintBitsToFloat(y[p.y_off + e]);
    uint hits = 0u;
    for (uint j = 0u; j < J; ++j) {
        uint q = q0 + j * qstride;
        if (ind[2u * (p.i_off + q)] != mine || ind[2u * (p.i_off + q) + 1u] != 0u) continue;
        if (hits == 0u && !INCLUDE_SELF) acc = identity();
        acc = fold(acc, uintBitsToFloat(src[p.s_off + q]));
        ++hits;
    }
    if (MODE == MEAN) acc = acc / float(max(hits + (INCLUDE_SELF ? 1u : 0u), 1u));
    if (hits > 0u) y[p.y_off + e] = floatBitsToUint(acc);
}

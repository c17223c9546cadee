#version 450
#extension GL_GOOGLE_include_directive : require
// topk (torch.topk, results sorted): the input is a C-contiguous [outer, n, inner] array (the
// host makes a device copy when it is not); each invocation takes one element, counts the
// elements of its row that sort before it and, when that rank is below k, writes the element to
// values[outer, rank, inner] and its position to indices[outer, rank, inner] (int64: two words).
//
// The order is the CPU kernel's (gpucore/ops/sorting.py, _np_argsort): NaN is the largest value,
// equal values (NaN with NaN, -0.0 with 0.0) keep their positions' order, for both `largest`.
// That makes the order total, so the ranks of a row are exactly 0..n-1 and every output slot
// below k is written once. The count stops at k, so the work per row is about n * k compares.
//
// TYPE (constant 1): 0 float32, 1 int32, 2 int64 (two words, low first), 3 uint32, 4 uint64
// (two words). LARGEST (constant 2).
#include "common.glsl"

layout(constant_id = 1) const int TYPE = 0;
layout(constant_id = 2) const bool LARGEST = true;

layout(std430, set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer V { uint v[]; };
layout(std430, set = 0, binding = 2) writeonly buffer I { uint ind[]; };

// 7 words (mirrored in gpucore/backends/vulkan/kernels/sorting.py). Offsets in items.
layout(push_constant) uniform Push {
    uint total;   // outer * n * inner
    uint n;       // the row length (the sorted dim's size)
    uint inner;
    uint k;
    uint x_off;
    uint v_off;
    uint i_off;
} p;

const int F32 = 0;
const int I64 = 2;
const int U32 = 3;
const int U64 = 4;
const bool WIDE = TYPE == I64 || TYPE == U64;

uvec2 load(uint item) {
    if (WIDE) return uvec2(x[2u * item], x[2u * item + 1u]);
    return uvec2(x[item], 0u);
}

// a > b in the sort key (NaN greatest); equal keys give false both ways.
bool greater(uvec2 a, uvec2 b) {
    if (TYPE == F32) {
        float fa = uintBitsToFloat(a.x), fb = uintBitsToFloat(b.x);
        if (isnan(fa)) return !isnan(fb);
        if (isnan(fb)) return false;
        return fa > fb;
    }
    if (TYPE == I64) {
        int ha = int(a.y), hb = int(b.y);
        return ha > hb || (ha == hb && a.x > b.x);
    }
    if (TYPE == U64) return a.y > b.y || (a.y == b.y && a.x > b.x);
    if (TYPE == U32) return a.x > b.x;
    return int(a.x) > int(b.x);
}

void main() {
    uint gid = global_index();
    if (gid >= p.total) return;
    uint row_len = p.n * p.inner;
    uint o = gid / row_len;
    uint rem = gid - o * row_len;
    uint i = rem / p.inner;
    uint in_ = rem - i * p.inner;
    uint base = p.x_off + o * row_len + in_;
    uvec2 me = load(base + i * p.inner);
    uint rank = 0u;
    for (uint j = 0u; j < p.n && rank < p.k; ++j) {
        if (j == i) continue;
        uvec2 other = load(base + j * p.inner);
        bool before = LARGEST ? greater(other, me) : greater(me, other);
        if (!before && j < i) before = !greater(other, me) && !greater(me, other);
        if (before) ++rank;
    }
    if (rank >= p.k) return;
    uint slot = o * p.k * p.inner + rank * p.inner + in_;
    if (WIDE) {
        v[2u * (p.v_off + slot)] = me.x;
        v[2u * (p.v_off + slot) + 1u] = me.y;
    } else {
        v[p.v_off + slot] = me.x;
    }
    ind[2u * (p.i_off + slot)] = i;
    ind[2u * (p.i_off + slot) + 1u] = 0u;
}

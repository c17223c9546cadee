#version 450
#extension GL_GOOGLE_include_directive : require
// cumsum / cumprod along one dim of a C-contiguous [outer, n, inner] input (the host copies a
// strided one): one invocation per (outer, inner) lane walks its n elements in order, so every
// partial result rounds as the CPU kernel's sequential scan (numpy's add/multiply.accumulate)
// and the bits agree. Neighbouring invocations read neighbouring inner elements.
//
// MODE (constant 1): 0 sum, 1 product. TYPE (constant 2): 0 float32, 1 int32, 2 int64 (two
// words, low first; sums carry, products keep the low 64 bits, wrapping as the CPU), 3 float64
// (two words; only in scan64.spv, built with F64=1 for devices with shaderFloat64: a module
// with the Float64 capability cannot load elsewhere).
#ifndef F64
#error "F64 must be defined: compile through tools/build_shaders.py (VARIANTS)"
#endif
#include "common.glsl"

layout(constant_id = 1) const int MODE = 0;
layout(constant_id = 2) const int TYPE = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Y { uint y[]; };

// 5 words (mirrored in gpucore/backends/vulkan/kernels/scan.py); offsets in items.
layout(push_constant) uniform Push {
    uint lanes;  // outer * inner
    uint n;
    uint inner;
    uint x_off;
    uint y_off;
} p;

const int F32 = 0, I32 = 1, I64 = 2, F64_TYPE = 3;
const bool WIDE = TYPE == I64 || TYPE == F64_TYPE;

uvec2 load(uint item) {
    if (WIDE) return uvec2(x[2u * item], x[2u * item + 1u]);
    return uvec2(x[item], 0u);
}

void store(uint item, uvec2 v) {
    if (WIDE) {
        y[2u * item] = v.x;
        y[2u * item + 1u] = v.y;
    } else {
        y[item] = v.x;
    }
}

uvec2 combine(uvec2 a, uvec2 b) {
    if (TYPE == F32) {
        float fa = uintBitsToFloat(a.x), fb = uintBitsToFloat(b.x);
        return uvec2(floatBitsToUint(MODE == 0 ? fa + fb : fa * fb), 0u);
    }
    if (TYPE == I32) return uvec2(MODE == 0 ? a.x + b.x : a.x * b.x, 0u);
#if F64
    if (TYPE == F64_TYPE) {
        double da = packDouble2x32(a), db = packDouble2x32(b);
        return unpackDouble2x32(MODE == 0 ? da + db : da * db);
    }
#endif
    if (MODE == 0) {
        uint carry;
        uint lo = uaddCarry(a.x, b.x, carry);
        return uvec2(lo, a.y + b.y + carry);
    }
    uint hi, lo;
    umulExtended(a.x, b.x, hi, lo);
    return uvec2(lo, hi + a.x * b.y + a.y * b.x);
}

void main() {
    uint lane = global_index();
    if (lane >= p.lanes) return;
    uint o = lane / p.inner;
    uint in_ = lane - o * p.inner;
    uint base = o * p.n * p.inner + in_;
    if (p.n == 0u) return;
    uvec2 acc = load(p.x_off + base);
    store(p.y_off + base, acc);
    for (uint j = 1u; j < p.n; ++j) {
        uint at = base + j * p.inner;
        acc = combine(acc, load(p.x_off + at));
        store(p.y_off + at, acc);
    }
}

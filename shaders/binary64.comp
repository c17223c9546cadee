#version 450
#extension GL_GOOGLE_include_directive : require
// binary.comp's strided elementwise ops where an operand or the result is int64: arithmetic
// (add, sub, mul: wrapping modulo 2^64, as the CPU), maximum/minimum, comparisons, logical_not,
// and dtype casts between int64 and float32 / int32 / bool. int64 values are pairs of 32-bit
// words (low, high) handled with 32-bit integer instructions, so no shaderInt64 is needed.
//
// Same push constants, indexing and specialization constants as binary.comp (OP, IN_TYPE,
// OUT_TYPE), with one more type code, I64 (below; mirrored as _I64 in
// gpucore/backends/vulkan/kernels/elementwise.py). Offsets/strides are in elements of IN_TYPE
// (int64 elements for I64: two words each); y_off is in words.
//
// Casts follow the CPU (numpy / x86): float32 -> int64 truncates, NaN and values outside
// [-2^63, 2^63) give INT64_MIN (cvttss2si); int64 -> float32 rounds to nearest even;
// int64 -> int32 keeps the low word (wraps); int64 -> bool is "not zero".
//
// DIV and POW on int64 are binary.comp's integer ones (MODE, constant 4: trunc / floor quotient,
// Python's % or C's fmod; x / 0 and x % 0 give 0, INT64_MIN / -1 wraps; a negative exponent
// gives trunc(1 / x^-e)), by shift-and-subtract division and square-and-multiply on word pairs.
#include "common.glsl"

layout(constant_id = 1) const int OP = 0;
layout(constant_id = 2) const int IN_TYPE = 0;
layout(constant_id = 3) const int OUT_TYPE = 0;
layout(constant_id = 4) const int MODE = 0;

layout(std430, set = 0, binding = 0) readonly buffer A { uint a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uint b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { uint y[]; };

// 31 words = 124 bytes: binary.comp's block (kernels/elementwise.py's _BIN_PUSH).
layout(push_constant) uniform Push {
    uint n;
    uint ndim;
    int a_off;
    int b_off;
    uint y_off;
    float lo;        // unused (binary.comp's clamp bounds)
    float hi;
    uint shape[8];
    int a_stride[8];
    int b_stride[8];
} p;

#define GC_TYPE(NAME, name, code) const int NAME = code;
#define GC_BINARY(NAME, name, code, kind) const int NAME = code;
#define GC_STRIDED(NAME, name, code) const int NAME = code;
#include "opcodes.def"
#undef GC_TYPE
#undef GC_BINARY
#undef GC_STRIDED
const int I64 = 3;  // after opcodes.def's F32, I32, BOOL (binary.comp has no int64)

uvec2 load_a(int i) {
    if (IN_TYPE == I64) return uvec2(a[2 * i], a[2 * i + 1]);
    if (IN_TYPE == BOOL) return uvec2((a[i >> 2] >> (8 * (i & 3))) & 0xffu, 0u);
    return uvec2(a[i], 0u);
}

uvec2 load_b(int i) {
    if (IN_TYPE == I64) return uvec2(b[2 * i], b[2 * i + 1]);
    if (IN_TYPE == BOOL) return uvec2((b[i >> 2] >> (8 * (i & 3))) & 0xffu, 0u);
    return uvec2(b[i], 0u);
}

uvec2 neg64(uvec2 v) {
    uint lo = ~v.x + 1u;
    return uvec2(lo, ~v.y + (lo == 0u ? 1u : 0u));
}

bool lt64(uvec2 x, uvec2 w) {  // signed x < w
    return int(x.y) < int(w.y) || (x.y == w.y && x.x < w.x);
}

uvec2 f2l(float x) {
    if (isnan(x) || x >= 9223372036854775808.0 || x < -9223372036854775808.0)
        return uvec2(0u, 0x80000000u);
    float m = abs(trunc(x));
    uvec2 r;
    if (m < 4294967296.0) {
        r = uvec2(uint(m), 0u);
    } else {  // m >= 2^32 is a multiple of 2^9: both halves below are exact
        float h = floor(m * (1.0 / 4294967296.0));
        r = uvec2(uint(m - h * 4294967296.0), uint(h));
    }
    return x < 0.0 ? neg64(r) : r;
}

float l2f(uvec2 v) {
    bool neg = int(v.y) < 0;
    if (neg) v = neg64(v);  // INT64_MIN stays 2^63 read as unsigned
    float f;
    if (v.y == 0u) {
        f = float(v.x);
    } else {
        // the top 32 significant bits, with the bits shifted out ORed into bit 0 (below the
        // rounding position), converted once: round to nearest even of the whole value
        int s = findMSB(v.y) + 1;
        uint top = s == 32 ? v.y : (v.y << (32 - s)) | (v.x >> s);
        uint rest = s == 32 ? v.x : (v.x & ((1u << s) - 1u));
        f = ldexp(float(top | (rest != 0u ? 1u : 0u)), s);
    }
    return neg ? -f : f;
}

uvec2 mul64(uvec2 x, uvec2 w) {  // wrapping
    uint mh, ml;
    umulExtended(x.x, w.x, mh, ml);
    return uvec2(ml, mh + x.x * w.y + x.y * w.x);
}

uvec2 sub64(uvec2 x, uvec2 w) {
    uint c;
    uint lo = usubBorrow(x.x, w.x, c);
    return uvec2(lo, x.y - w.y - c);
}

bool ult64(uvec2 x, uvec2 w) {  // unsigned x < w
    return x.y < w.y || (x.y == w.y && x.x < w.x);
}

// Unsigned 64-bit quotient of n by d != 0: restoring division, one bit per step from the top.
uvec2 udiv64(uvec2 n, uvec2 d) {
    uvec2 q = uvec2(0u), r = uvec2(0u);
    for (int i = 63; i >= 0; --i) {
        uint bit = (i >= 32 ? n.y >> (i - 32) : n.x >> i) & 1u;
        r = uvec2((r.x << 1) | bit, (r.y << 1) | (r.x >> 31));  // r < d <= 2^63: no overflow
        if (!ult64(r, d)) {
            r = sub64(r, d);
            if (i >= 32) q.y |= 1u << (i - 32); else q.x |= 1u << i;
        }
    }
    return q;
}

uvec2 idiv64(uvec2 x, uvec2 w) {
    if ((w.x | w.y) == 0u) return uvec2(0u);
    bool xn = int(x.y) < 0, wn = int(w.y) < 0;
    uvec2 q = udiv64(xn ? neg64(x) : x, wn ? neg64(w) : w);  // INT64_MIN: 2^63 unsigned
    if (xn != wn) q = neg64(q);  // truncated (INT64_MIN / -1 wraps to INT64_MIN)
    uvec2 r = sub64(x, mul64(q, w));
    bool other_side = (r.x | r.y) != 0u && ((int(r.y) < 0) != wn);
    if (MODE == 0) return q;
    if (MODE == 1) return other_side ? sub64(q, uvec2(1u, 0u)) : q;
    if (MODE == 2) return other_side ? sub64(r, neg64(w)) : r;
    return r;
}

uvec2 ipow64(uvec2 x, uvec2 e) {
    if (int(e.y) < 0) {
        if (x == uvec2(1u, 0u)) return x;
        if (x == uvec2(0xffffffffu)) return (e.x & 1u) != 0u ? x : uvec2(1u, 0u);
        return uvec2(0u);
    }
    uvec2 r = uvec2(1u, 0u);
    for (int i = 0; i < 63; ++i) {
        if (((i < 32 ? e.x >> i : e.y >> (i - 32)) & 1u) != 0u) r = mul64(r, x);
        x = mul64(x, x);
    }
    return r;
}

// The input as int64 (casts to int64).
uvec2 to64(uvec2 r) {
    if (IN_TYPE == F32) return f2l(uintBitsToFloat(r.x));
    if (IN_TYPE == I32) return uvec2(r.x, int(r.x) < 0 ? 0xffffffffu : 0u);
    if (IN_TYPE == BOOL) return uvec2(r.x != 0u ? 1u : 0u, 0u);
    return r;
}

// Result: int64 as (low, high); float32 / int32 bits or bool 0/1 in .x.
uvec2 compute(uvec2 x, uvec2 w) {
    if (OP == TO_DTYPE) {
        if (OUT_TYPE == I64) return to64(x);
        if (OUT_TYPE == F32) return uvec2(floatBitsToUint(l2f(x)), 0u);
        if (OUT_TYPE == I32) return uvec2(x.x, 0u);
        return uvec2((x.x | x.y) != 0u ? 1u : 0u, 0u);
    }
    if (OP == LOGICAL_NOT) return uvec2((x.x | x.y) == 0u ? 1u : 0u, 0u);
    if (OP == ADD) {
        uint c;
        uint lo = uaddCarry(x.x, w.x, c);
        return uvec2(lo, x.y + w.y + c);
    }
    if (OP == SUB) {
        uint c;
        uint lo = usubBorrow(x.x, w.x, c);
        return uvec2(lo, x.y - w.y - c);
    }
    if (OP == MUL) return mul64(x, w);
    if (OP == DIV) return idiv64(x, w);
    if (OP == POW) return ipow64(x, w);
    if (OP == MAXIMUM) return lt64(x, w) ? w : x;
    if (OP == MINIMUM) return lt64(w, x) ? w : x;
    bool r = false;
    if (OP == EQ) r = x == w;
    if (OP == NE) r = x != w;
    if (OP == LT) r = lt64(x, w);
    if (OP == LE) r = !lt64(w, x);
    if (OP == GT) r = lt64(w, x);
    if (OP == GE) r = !lt64(x, w);
    return uvec2(r ? 1u : 0u, 0u);
}

uvec2 element(uint i) {
    uint rem = i;
    int ia = p.a_off;
    int ib = p.b_off;
    for (int k = int(p.ndim) - 1; k >= 0; --k) {
        uint c = rem % p.shape[k];
        rem /= p.shape[k];
        ia += int(c) * p.a_stride[k];
        ib += int(c) * p.b_stride[k];
    }
    return compute(load_a(ia), load_b(ib));
}

void main() {
    uint w = global_index();
    if (OUT_TYPE == BOOL) {
        // word w holds elements 4w .. 4w+3; past n the bytes are scratch of the allocation
        uint first = 4u * w;
        if (first >= p.n) return;
        uint bits = 0u;
        uint m = min(4u, p.n - first);
        for (uint j = 0u; j < m; ++j) bits |= element(first + j).x << (8u * j);
        y[p.y_off + w] = bits;
    } else if (w < p.n) {
        uvec2 r = element(w);
        if (OUT_TYPE == I64) {
            y[p.y_off + 2u * w] = r.x;
            y[p.y_off + 2u * w + 1u] = r.y;
        } else {
            y[p.y_off + w] = r.x;
        }
    }
}

#version 450
#extension GL_GOOGLE_include_directive : require
// binary.comp's strided elementwise ops where an operand or the result is int64 or uint64:
// arithmetic (add, sub, mul: wrapping modulo 2^64, as the CPU), maximum/minimum, comparisons,
// logical_not, the bitwise ops, and dtype casts between int64 / uint64 and float32, bool and every
// integer type. 64-bit values are pairs of 32-bit words (low, high) handled with 32-bit integer
// instructions, so no shaderInt64 is needed.
//
// Same push constants, indexing and specialization constants as binary.comp (OP, IN_TYPE,
// OUT_TYPE, MODE) and its type codes, with I64 and U64 (below; mirrored as _I64 / _U64 in
// gpucore/backends/vulkan/kernels/elementwise.py). Offsets/strides are in elements of IN_TYPE
// (two words each for the 64-bit types, bytes for bool / int8 / uint8, 16-bit units for int16 /
// uint16); y_off is in words. Byte and 16-bit results are packed four / two to a word.
//
// Casts follow the CPU (numpy / x86): float32 -> int64 truncates, NaN and values outside
// [-2^63, 2^63) give INT64_MIN (cvttss2si); float32 -> uint64 as x86 code converts it (x >= 2^63:
// the int64 conversion of x - 2^63 with the top bit flipped); int64 / uint64 -> float32 rounds
// to nearest even; to a narrower integer keeps the low bits (wraps); to bool is "not zero".
// uint64 compares, divides and takes maximum / minimum unsigned; shifts give PyTorch's results
// for amounts outside [0, 64): 0 to the left, the sign fill (0 or -1) to the right.
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
const int I8 = 4;   // binary.comp's
const int U8 = 5;
const int I16 = 9;
const int U16 = 10;
const int U32 = 11;
const int U64 = 12;
const bool WIDE_IN = IN_TYPE == I64 || IN_TYPE == U64;
const bool WIDE_OUT = OUT_TYPE == I64 || OUT_TYPE == U64;
const bool BYTE_IN = IN_TYPE == BOOL || IN_TYPE == I8 || IN_TYPE == U8;
const bool BYTE_OUT = OUT_TYPE == BOOL || OUT_TYPE == I8 || OUT_TYPE == U8;
const bool SHORT_IN = IN_TYPE == I16 || IN_TYPE == U16;
const bool SHORT_OUT = OUT_TYPE == I16 || OUT_TYPE == U16;
const bool SIGNED_IN = IN_TYPE == I8 || IN_TYPE == I16 || IN_TYPE == I32;  // narrow, extended
const int BITS = BYTE_IN ? 8 : (SHORT_IN ? 16 : 32);  // of a narrow IN_TYPE

// A 64-bit element as (low, high); a narrower one as its bits in .x (the high word 0).
uvec2 load_a(int i) {
    if (WIDE_IN) return uvec2(a[2 * i], a[2 * i + 1]);
    if (BYTE_IN) return uvec2((a[i >> 2] >> (8 * (i & 3))) & 0xffu, 0u);
    if (SHORT_IN) return uvec2((a[i >> 1] >> (16 * (i & 1))) & 0xffffu, 0u);
    return uvec2(a[i], 0u);
}

uvec2 load_b(int i) {
    if (WIDE_IN) return uvec2(b[2 * i], b[2 * i + 1]);
    if (BYTE_IN) return uvec2((b[i >> 2] >> (8 * (i & 3))) & 0xffu, 0u);
    if (SHORT_IN) return uvec2((b[i >> 1] >> (16 * (i & 1))) & 0xffffu, 0u);
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

uvec2 f2ul(float x) {  // float -> uint64 as x86 code converts it (see the top)
    if (!(x >= 9223372036854775808.0)) return f2l(x);  // NaN too (an unordered compare)
    uvec2 r = f2l(x - 9223372036854775808.0);
    return uvec2(r.x, r.y ^ 0x80000000u);
}

float l2f(uvec2 v, bool is_signed) {
    bool neg = is_signed && int(v.y) < 0;
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

// Unsigned 64-bit quotient of n by d != 0 (the remainder in r): restoring division, one bit per
// step from the top. A remainder whose top bit shifts out is above any d: d is taken.
uvec2 udiv64(uvec2 n, uvec2 d, out uvec2 r) {
    uvec2 q = uvec2(0u);
    r = uvec2(0u);
    for (int i = 63; i >= 0; --i) {
        uint bit = (i >= 32 ? n.y >> (i - 32) : n.x >> i) & 1u;
        bool carry = (r.y >> 31) != 0u;
        r = uvec2((r.x << 1) | bit, (r.y << 1) | (r.x >> 31));
        if (carry || !ult64(r, d)) {
            r = sub64(r, d);
            if (i >= 32) q.y |= 1u << (i - 32); else q.x |= 1u << i;
        }
    }
    return q;
}

uvec2 udivmod(uvec2 x, uvec2 w) {  // uint64: MODE 0 / 1 the quotient, 2 / 3 the remainder
    if ((w.x | w.y) == 0u) return uvec2(0u);
    uvec2 r;
    uvec2 q = udiv64(x, w, r);
    return MODE <= 1 ? q : r;
}

uvec2 idiv64(uvec2 x, uvec2 w) {
    if ((w.x | w.y) == 0u) return uvec2(0u);
    bool xn = int(x.y) < 0, wn = int(w.y) < 0;
    uvec2 unused;
    uvec2 q = udiv64(xn ? neg64(x) : x, wn ? neg64(w) : w, unused);  // INT64_MIN: 2^63
    if (xn != wn) q = neg64(q);  // truncated (INT64_MIN / -1 wraps to INT64_MIN)
    uvec2 r = sub64(x, mul64(q, w));
    bool other_side = (r.x | r.y) != 0u && ((int(r.y) < 0) != wn);
    if (MODE == 0) return q;
    if (MODE == 1) return other_side ? sub64(q, uvec2(1u, 0u)) : q;
    if (MODE == 2) return other_side ? sub64(r, neg64(w)) : r;
    return r;
}

uvec2 ipow64(uvec2 x, uvec2 e) {
    if (IN_TYPE != U64 && int(e.y) < 0) {
        if (x == uvec2(1u, 0u)) return x;
        if (x == uvec2(0xffffffffu)) return (e.x & 1u) != 0u ? x : uvec2(1u, 0u);
        return uvec2(0u);
    }
    uvec2 r = uvec2(1u, 0u);
    for (int i = 0; i < 64; ++i) {
        if (((i < 32 ? e.x >> i : e.y >> (i - 32)) & 1u) != 0u) r = mul64(r, x);
        x = mul64(x, x);
    }
    return r;
}

// The input as int64 / uint64 (casts to them): narrow integers sign- or zero-extended.
uvec2 to64(uvec2 r) {
    if (IN_TYPE == F32) {
        float x = uintBitsToFloat(r.x);
        return OUT_TYPE == U64 ? f2ul(x) : f2l(x);
    }
    if (WIDE_IN) return r;
    if (IN_TYPE == BOOL) return uvec2(r.x != 0u ? 1u : 0u, 0u);
    if (SIGNED_IN) {
        int v = int(r.x << (32 - BITS)) >> (32 - BITS);
        return uvec2(uint(v), v < 0 ? 0xffffffffu : 0u);
    }
    return r;
}

// x << s (left) or x >> s (right: arithmetic for int64), PyTorch's results outside [0, 64).
uvec2 shift64(uvec2 x, uvec2 s, bool left) {
    bool neg = IN_TYPE == I64 && int(x.y) < 0;
    uint fill = neg ? 0xffffffffu : 0u;
    if (s.y != 0u || s.x >= 64u) return left ? uvec2(0u) : uvec2(fill);  // negative too
    uint k = s.x;
    if (k == 0u) return x;
    if (left) {
        if (k >= 32u) return uvec2(0u, x.x << (k - 32u));
        return uvec2(x.x << k, (x.y << k) | (x.x >> (32u - k)));
    }
    uint hi = neg ? uint(int(x.y) >> min(k, 31u)) : (k >= 32u ? 0u : x.y >> k);
    if (k >= 32u) return uvec2(neg ? uint(int(x.y) >> (k - 32u)) : x.y >> (k - 32u), fill);
    return uvec2((x.x >> k) | (x.y << (32u - k)), hi);
}

// Result: a 64-bit value as (low, high); float32 bits, narrower integers or bool 0/1 in .x.
uvec2 compute(uvec2 x, uvec2 w) {
    const bool U = IN_TYPE == U64;
    if (OP == TO_DTYPE) {
        if (WIDE_OUT) return to64(x);
        if (OUT_TYPE == F32) return uvec2(floatBitsToUint(l2f(x, !U)), 0u);
        if (OUT_TYPE == BOOL) return uvec2((x.x | x.y) != 0u ? 1u : 0u, 0u);
        return uvec2(x.x, 0u);  // the low bits of the narrower integers (wraps)
    }
    if (OP == LOGICAL_NOT) return uvec2((x.x | x.y) == 0u ? 1u : 0u, 0u);
    if (OP == BITWISE_AND) return x & w;
    if (OP == BITWISE_OR) return x | w;
    if (OP == BITWISE_XOR) return x ^ w;
    if (OP == BITWISE_NOT) return ~x;
    if (OP == BITWISE_LEFT_SHIFT) return shift64(x, w, true);
    if (OP == BITWISE_RIGHT_SHIFT) return shift64(x, w, false);
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
    if (OP == DIV) return U ? udivmod(x, w) : idiv64(x, w);
    if (OP == POW) return ipow64(x, w);
    bool x_lt_w = U ? ult64(x, w) : lt64(x, w);
    bool w_lt_x = U ? ult64(w, x) : lt64(w, x);
    if (OP == MAXIMUM) return x_lt_w ? w : x;
    if (OP == MINIMUM) return w_lt_x ? w : x;
    bool r = false;
    if (OP == EQ) r = x == w;
    if (OP == NE) r = x != w;
    if (OP == LT) r = x_lt_w;
    if (OP == LE) r = !w_lt_x;
    if (OP == GT) r = w_lt_x;
    if (OP == GE) r = !x_lt_w;
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
    if (BYTE_OUT || SHORT_OUT) {
        // word w holds elements PER*w ..; past n the rest of the word is scratch of the
        // allocation
        const uint PER = BYTE_OUT ? 4u : 2u;
        const uint MASK = BYTE_OUT ? 0xffu : 0xffffu;
        uint first = PER * w;
        if (first >= p.n) return;
        uint bits = 0u;
        uint m = min(PER, p.n - first);
        for (uint j = 0u; j < m; ++j) bits |= (element(first + j).x & MASK) << ((32u / PER) * j);
        y[p.y_off + w] = bits;
    } else if (w < p.n) {
        uvec2 r = element(w);
        if (WIDE_OUT) {
            y[p.y_off + 2u * w] = r.x;
            y[p.y_off + 2u * w + 1u] = r.y;
        } else {
            y[p.y_off + w] = r.x;
        }
    }
}

#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_ARB_gpu_shader_int64 : require
// binary.comp's strided elementwise ops where an operand or the result is float64, in native
// double (shaderFloat64) and int64 (shaderInt64) arithmetic: only dispatched on devices that have
// both (context.py's Context.float64). Arithmetic (add, sub, mul, div: IEEE, correctly rounded),
// maximum / minimum (NaN propagates), clamp, comparisons (!= true for NaN), logical_not, casts
// between float64 and float32 / bool / every integer type, and with UNARY = 1 a few
// unary ops of cpu/opcodes.def's GC_UNARY (neg, abs, sqrt, sign, reciprocal, floor, ceil, trunc,
// round: exact on doubles, from floor where lavapipe's builtins are not; exp and log: fdlibm's
// reductions, within 1 ulp).
//
// Specialization constants: 1 OP (a GC_BINARY / GC_STRIDED code, or GC_UNARY with UNARY = 1),
// 2 IN_TYPE, 3 OUT_TYPE (binary.comp's codes: F32, I32, BOOL, I64 = 3, I8 = 4, U8 = 5, I16 = 9,
// U16 = 10, U32 = 11, U64 = 12, and F64 = 8 here; mirrored as _F64 in kernels/elementwise.py),
// 4 UNARY. Offsets / strides are in elements of IN_TYPE (bytes for bool / int8 / uint8, 16-bit
// units for int16 / uint16, word pairs for int64 / uint64 / float64); y_off in words. Byte
// outputs pack four to a word, 16-bit ones two, as binary.comp.
//
// Casts follow numpy on x86 (the CPU path): float64 -> int64 / int32 truncate, NaN and
// out-of-range values give INT64_MIN / INT_MIN; -> int8 / uint8 / int16 / uint16 the low bits of
// the int32 one; -> uint32 / uint64 x86's unsigned conversion (from 2^31 / 2^63 up: the signed
// conversion of x - 2^31 / x - 2^63 with the top bit flipped);
// -> float32 rounds to nearest even; -> bool is "not zero" (NaN is true).
#include "common.glsl"

layout(constant_id = 1) const int OP = 0;
layout(constant_id = 2) const int IN_TYPE = 0;
layout(constant_id = 3) const int OUT_TYPE = 0;
layout(constant_id = 4) const int UNARY = 0;

layout(std430, set = 0, binding = 0) readonly buffer A { uint a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uint b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { uint y[]; };

// 30 words (kernels/elementwise.py's _F64_PUSH): clamp's bounds as doubles (low, high words),
// and 7 dims (binary.comp's 8 less one, to make room for them).
layout(push_constant) uniform Push {
    uint n;
    uint ndim;
    int a_off;
    int b_off;
    uint y_off;
    uint lo_lo;
    uint lo_hi;
    uint hi_lo;
    uint hi_hi;
    uint shape[7];
    int a_stride[7];
    int b_stride[7];
} p;

#define GC_TYPE(NAME, name, code) const int NAME = code;
#define GC_BINARY(NAME, name, code, kind) const int NAME = code;
#define GC_STRIDED(NAME, name, code) const int NAME = code;
#define GC_UNARY(NAME, name, code) const int U_##NAME = code;
#include "opcodes.def"
#undef GC_TYPE
#undef GC_BINARY
#undef GC_STRIDED
#undef GC_UNARY
const int I64 = 3;
const int I8 = 4;
const int U8 = 5;
const int F64 = 8;
const int I16 = 9;
const int U16 = 10;
const int U32 = 11;
const int U64 = 12;
const bool WIDE_IN = IN_TYPE == I64 || IN_TYPE == F64 || IN_TYPE == U64;
const bool WIDE_OUT = OUT_TYPE == I64 || OUT_TYPE == F64 || OUT_TYPE == U64;
const bool BYTE_IN = IN_TYPE == BOOL || IN_TYPE == I8 || IN_TYPE == U8;
const bool BYTE_OUT = OUT_TYPE == BOOL || OUT_TYPE == I8 || OUT_TYPE == U8;
const bool SHORT_IN = IN_TYPE == I16 || IN_TYPE == U16;
const bool SHORT_OUT = OUT_TYPE == I16 || OUT_TYPE == U16;

uvec2 raw(uint word, int i) {
    if (BYTE_IN) {
        uint v = (word >> (8 * (i & 3))) & 0xffu;
        return uvec2(IN_TYPE == I8 ? uint(int(v << 24) >> 24) : v, 0u);
    }
    if (SHORT_IN) {
        uint v = (word >> (16 * (i & 1))) & 0xffffu;
        return uvec2(IN_TYPE == I16 ? uint(int(v << 16) >> 16) : v, 0u);
    }
    return uvec2(word, 0u);
}

uvec2 load_a(int i) {
    if (WIDE_IN) return uvec2(a[2 * i], a[2 * i + 1]);
    return raw(a[BYTE_IN ? i >> 2 : (SHORT_IN ? i >> 1 : i)], i);
}

uvec2 load_b(int i) {
    if (WIDE_IN) return uvec2(b[2 * i], b[2 * i + 1]);
    return raw(b[BYTE_IN ? i >> 2 : (SHORT_IN ? i >> 1 : i)], i);
}

// The input as a double (exact but for int64 beyond 2^53: rounded to nearest even).
double to_d(uvec2 r) {
    if (IN_TYPE == F64) return packDouble2x32(r);
    if (IN_TYPE == F32) return double(uintBitsToFloat(r.x));
    if (IN_TYPE == I64) return double(int64_t(packUint2x32(r)));
    if (IN_TYPE == U64) return double(packUint2x32(r));
    if (IN_TYPE == I32 || IN_TYPE == I8 || IN_TYPE == I16) return double(int(r.x));
    return double(r.x);  // uint8, uint16, uint32, bool
}

uvec2 d2l(double x) {
    if (isnan(x) || x >= 9223372036854775808.0LF || x < -9223372036854775808.0LF)
        return uvec2(0u, 0x80000000u);
    return unpackUint2x32(uint64_t(int64_t(x)));
}

uint d2i(double x) {
    if (isnan(x) || x >= 2147483648.0LF || x < -2147483648.0LF) return 0x80000000u;
    return uint(int(x));
}

uvec2 dbits(double x) { return unpackDouble2x32(x); }

uvec2 b01(bool v) { return uvec2(v ? 1u : 0u, 0u); }

double fmax_(double x, double w) { return (x > w || isnan(x)) ? x : w; }
double fmin_(double x, double w) { return (x < w || isnan(x)) ? x : w; }

// Halves to even, as numpy / PyTorch, the zero signed as x; from floor (lavapipe's trunc and
// roundEven of doubles lose the sign of zero and round 1.5 down).
double round_even(double x) {
    double r = floor(x);
    double d = x - r;  // exact
    bool odd = r - 2.0LF * floor(r * 0.5LF) != 0.0LF;
    if (d > 0.5LF || (d == 0.5LF && odd)) r += 1.0LF;
    return r == 0.0LF && x < 0.0LF ? -0.0LF : r;
}

// exp and log in double (GLSL has neither for doubles): fdlibm's reductions, within 1 ulp.
const double LN2_HI = 6.93147180369123816490e-01LF;  // low bits zero: k * LN2_HI is exact
const double LN2_LO = 1.90821492927058770002e-10LF;
const double INF = 1.0LF / 0.0LF;

double pow2(int k) {  // 2^k for -1022 <= k <= 1023
    return packDouble2x32(uvec2(0u, uint(k + 1023) << 20));
}

double exp_(double x) {
    if (isnan(x)) return x;
    if (x > 709.782712893384LF) return INF;
    if (x < -745.2LF) return 0.0LF;
    double k = floor(x * 1.44269504088896338700LF + 0.5LF);
    precise double hi = x - k * LN2_HI;  // precise: no reassociation / contraction (lavapipe's
    precise double r = hi - k * LN2_LO;  // LLVM would otherwise fold k * (LN2_HI + LN2_LO))
    // Taylor to r^14 on |r| <= 0.35 (truncation below 2^-60 relative)
    double q = 1.0LF / 87178291200.0LF;
    q = q * r + 1.0LF / 6227020800.0LF;
    q = q * r + 1.0LF / 479001600.0LF;
    q = q * r + 1.0LF / 39916800.0LF;
    q = q * r + 1.0LF / 3628800.0LF;
    q = q * r + 1.0LF / 362880.0LF;
    q = q * r + 1.0LF / 40320.0LF;
    q = q * r + 1.0LF / 5040.0LF;
    q = q * r + 1.0LF / 720.0LF;
    q = q * r + 1.0LF / 120.0LF;
    q = q * r + 1.0LF / 24.0LF;
    q = q * r + 1.0LF / 6.0LF;
    q = q * r + 0.5LF;
    precise double e = r + r * (r * q);  // exp(r) - 1, then 1 + it: one rounding at the end
    int ki = int(k);
    int k1 = ki / 2;  // two exact-ish halves: a subnormal result rounds once, in the last one
    precise double y = (1.0LF + e) * pow2(k1);
    return y * pow2(ki - k1);
}

double log_(double x) {
    if (isnan(x) || x < 0.0LF) return 0.0LF / 0.0LF;
    if (x == 0.0LF) return -INF;
    if (isinf(x)) return x;
    int e = 0;
    if (x < 2.2250738585072014e-308LF) {  // subnormal: scale into the normal range
        x *= 18014398509481984.0LF;  // 2^54
        e = -54;
    }
    uvec2 bits = unpackDouble2x32(x);
    e += int(bits.y >> 20) - 1023;
    double m = packDouble2x32(uvec2(bits.x, (bits.y & 0x000fffffu) | 0x3ff00000u));  // [1, 2)
    if (m > 1.41421356237309504880LF) {
        m *= 0.5LF;
        e += 1;
    }
    double f = m - 1.0LF;
    double s = f / (2.0LF + f);
    double z = s * s;
    double R = z * (6.666666666666735130e-01LF + z * (3.999999999940941908e-01LF +
               z * (2.857142874366239149e-01LF + z * (2.222219843214978396e-01LF +
               z * (1.818357216161805012e-01LF + z * (1.531383769920937332e-01LF +
               z * 1.479819860511658591e-01LF))))));
    double hfsq = 0.5LF * f * f;
    double de = double(e);
    precise double y = de * LN2_HI - ((hfsq - (s * (hfsq + R) + de * LN2_LO)) - f);
    return y;
}

uvec2 unary(double x) {
    if (OP == U_EXP) return dbits(exp_(x));
    if (OP == U_LOG) return dbits(log_(x));
    if (OP == U_NEG) return dbits(-x);
    if (OP == U_ABS) return dbits(abs(x));
    if (OP == U_SQRT) return dbits(sqrt(x));
    if (OP == U_SIGN) return dbits(x > 0.0LF ? 1.0LF : (x < 0.0LF ? -1.0LF : x));  // keeps 0, NaN
    if (OP == U_RECIPROCAL) return dbits(1.0LF / x);
    if (OP == U_FLOOR) return dbits(floor(x));
    if (OP == U_CEIL) return dbits(ceil(x));
    if (OP == U_TRUNC) return dbits(x < 0.0LF ? -floor(-x) : floor(x));
    return dbits(round_even(x));  // U_ROUND
}

// Result bits: a double or int64 as (low, high); float32 / int32 bits or bool 0/1 in .x.
uvec2 compute(uvec2 ra, uvec2 rb) {
    if (UNARY == 1) return unary(to_d(ra));
    if (OP == TO_DTYPE) {
        if (OUT_TYPE == F64) return dbits(to_d(ra));
        double x = packDouble2x32(ra);  // from float64
        if (OUT_TYPE == F32) return uvec2(floatBitsToUint(float(x)), 0u);
        if (OUT_TYPE == I64) return d2l(x);
        if (OUT_TYPE == BOOL) return b01(x != 0.0LF);  // NaN is true
        if (OUT_TYPE == U64) {
            if (!(x >= 9223372036854775808.0LF)) return d2l(x);  // NaN too
            uvec2 r = d2l(x - 9223372036854775808.0LF);
            return uvec2(r.x, r.y ^ 0x80000000u);
        }
        if (OUT_TYPE == U32 && x >= 2147483648.0LF)
            return uvec2(d2i(x - 2147483648.0LF) ^ 0x80000000u, 0u);
        return uvec2(d2i(x), 0u);  // int32, uint32; the 8- and 16-bit types keep its low bits
    }
    double x = to_d(ra);
    if (OP == LOGICAL_NOT) return b01(x == 0.0LF);
    double w = to_d(rb);
    if (OP == ADD) return dbits(x + w);
    if (OP == SUB) return dbits(x - w);
    if (OP == MUL) return dbits(x * w);
    if (OP == DIV) return dbits(x / w);
    if (OP == MAXIMUM) return dbits(fmax_(x, w));
    if (OP == MINIMUM) return dbits(fmin_(x, w));
    if (OP == CLAMP) {
        double lo = packDouble2x32(uvec2(p.lo_lo, p.lo_hi));
        double hi = packDouble2x32(uvec2(p.hi_lo, p.hi_hi));
        return dbits(fmin_(fmax_(x, lo), hi));
    }
    if (OP == EQ) return b01(x == w);
    if (OP == NE) return b01(!(x == w));  // true when either is NaN, as C's !=
    if (OP == LT) return b01(x < w);
    if (OP == LE) return b01(x <= w);
    if (OP == GT) return b01(x > w);
    return b01(x >= w);  // GE
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
        // word w holds elements PER*w ..; past n the rest of the word is scratch
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

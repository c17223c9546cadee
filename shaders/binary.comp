#version 450
#extension GL_GOOGLE_include_directive : require
// Strided elementwise ops: y[i] = OP(a[ia(i)], b[ib(i)]) for the row-major index i over `shape`,
// where ia(i) = a_off + sum(coord_k * a_stride[k]) (strides may be 0 for broadcasting, or
// negative). The output is a fresh contiguous array.
//
// One shader for the family: binary arithmetic and comparisons, logical and bitwise ops, clamp,
// log1p and dtype casts (the unary ones bind a twice and ignore b). Specialization constants:
//   1 OP        op code: a binary code or a strided-only one (cpu/opcodes.def)
//   2 IN_TYPE   F32, I32 or BOOL (bytes, read out of 32-bit words); codes from cpu/opcodes.def;
//               I8 and U8 (bytes too), I16 and U16 (16-bit halves of words), U32 below
//   3 OUT_TYPE  F32, I32, U32, or a byte type (BOOL, I8, U8): four results packed into each
//               32-bit word, so one invocation writes whole words and no 8-bit storage feature is
//               needed; or a 16-bit type (F16, BF16, I16, U16): two results per word.
//   4 MODE      integer DIV only (kernels/elementwise.py's _IDIV): 0 the quotient rounded toward
//               zero, 1 toward -inf, 2 the remainder with the divisor's sign (Python's %), 3 with
//               the dividend's (C's fmod).
// Element offsets/strides are in elements of IN_TYPE (bytes for bool, 16-bit units for the 16-bit
// types). Buffers are raw words. float16 / bfloat16 values are widened to float32 on load and the
// float32 result is rounded on store (half.glsl), as the CPU path computes them.
//
// Float semantics follow the C kernels (gpucore._cpu): maximum/minimum propagate NaN, pow is C's
// powf (its special cases), != is true for NaN, float->int32 casts truncate and give INT_MIN for
// NaN and out-of-range values (x86's cvttss2si, what numpy gives on the CPU path); the 8- and
// 16-bit types keep the low bits of that int32, uint32 is x86's unsigned conversion (x >= 2^31:
// the int32 conversion of x - 2^31 with the top bit flipped).
// Integer semantics are numpy's (the CPU kernels): wrapping arithmetic; x / 0 and x % 0 give 0,
// INT_MIN / -1 wraps to INT_MIN; pow by square-and-multiply, wrapping, and a negative exponent
// (which the CPU refuses when it can see it) gives trunc(1 / x^-e): 1 for 1, +-1 for -1, else 0.
// Narrow integers compute in 32 bits (sign- or zero-extended on load) and keep their low bits;
// uint32 compares, divides and takes maximum / minimum unsigned. Shifts give PyTorch's results for
// amounts outside [0, bits): 0 to the left, the sign fill (0 or -1) to the right.
#include "common.glsl"
#include "float_math.glsl"
#include "half.glsl"

layout(constant_id = 1) const int OP = 0;
layout(constant_id = 2) const int IN_TYPE = 0;
layout(constant_id = 3) const int OUT_TYPE = 0;
layout(constant_id = 4) const int MODE = 0;

layout(std430, set = 0, binding = 0) readonly buffer A { uint a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uint b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { uint y[]; };

// 31 words = 124 bytes (mirrored by _Layout in gpucore/backends/vulkan/kernels/elementwise.py).
layout(push_constant) uniform Push {
    uint n;          // output elements
    uint ndim;       // dims in use (1..8), after the host dropped size-1 dims and merged the rest
    int a_off;
    int b_off;
    uint y_off;      // in words
    float lo;        // clamp bounds (-inf / +inf when absent)
    float hi;
    uint shape[8];
    int a_stride[8];
    int b_stride[8];
} p;

// F32, I32, BOOL; ADD .. GE; LOGICAL_AND .. LOG1P
#define GC_TYPE(NAME, name, code) const int NAME = code;
#define GC_BINARY(NAME, name, code, kind) const int NAME = code;
#define GC_STRIDED(NAME, name, code) const int NAME = code;
#include "opcodes.def"
#undef GC_TYPE
#undef GC_BINARY
#undef GC_STRIDED

// int8 / uint8 (after binary64.comp's I64 = 3; mirrored as _I8 / _U8 in kernels/elementwise.py):
// bytes like BOOL, int8 sign-extended on load; arithmetic in 32 bits, the result's low byte kept
// (wrapping, as the CPU).
const int I8 = 4;
const int U8 = 5;
// float16 / bfloat16 (mirrored as _F16 / _BF16): 16-bit halves of 32-bit words.
const int F16 = 6;
const int BF16 = 7;
// int16 / uint16 (after binaryf64.comp's F64 = 8; mirrored as _I16 / _U16): 16-bit halves of
// words, int16 sign-extended on load; uint32 (_U32): words, unsigned. binary64.comp's U64 is 12.
const int I16 = 9;
const int U16 = 10;
const int U32 = 11;
const bool BYTE_IN = IN_TYPE == BOOL || IN_TYPE == I8 || IN_TYPE == U8;
const bool BYTE_OUT = OUT_TYPE == BOOL || OUT_TYPE == I8 || OUT_TYPE == U8;
const bool HALF_IN = IN_TYPE == F16 || IN_TYPE == BF16;
const bool HALF_OUT = OUT_TYPE == F16 || OUT_TYPE == BF16;
const bool SHORT_IN = IN_TYPE == I16 || IN_TYPE == U16;
const bool SHORT_OUT = OUT_TYPE == I16 || OUT_TYPE == U16;
const bool FLOAT_OUT = OUT_TYPE == F32 || HALF_OUT;  // compute() gives float32 bits
const bool SIGNED_IN = IN_TYPE == I8 || IN_TYPE == I16 || IN_TYPE == I32;
const int BITS = BYTE_IN ? 8 : (SHORT_IN ? 16 : 32);  // of an integer IN_TYPE

uint byte_value(uint word, int i) {
    uint v = (word >> (8 * (i & 3))) & 0xffu;
    return IN_TYPE == I8 ? uint(int(v << 24) >> 24) : v;
}

uint short_value(uint h) {
    return IN_TYPE == I16 ? uint(int(h << 16) >> 16) : h;
}

// Loads give 32-bit patterns: half types arrive as float32 bits (exact), so compute() sees F32.
uint load_a(int i) {
    if (BYTE_IN) return byte_value(a[i >> 2], i);
    if (HALF_IN) return floatBitsToUint(half_to_f32(IN_TYPE - 5, HALF_AT(a, i)));
    if (SHORT_IN) return short_value(HALF_AT(a, i));
    return a[i];
}

uint load_b(int i) {
    if (BYTE_IN) return byte_value(b[i >> 2], i);
    if (HALF_IN) return floatBitsToUint(half_to_f32(IN_TYPE - 5, HALF_AT(b, i)));
    if (SHORT_IN) return short_value(HALF_AT(b, i));
    return b[i];
}

const int CIN = HALF_IN ? F32 : IN_TYPE;  // the type compute() sees

uint f2i(float x) {
    if (isnan(x) || x >= 2147483648.0 || x < -2147483648.0) return 0x80000000u;
    return uint(int(x));
}

uint f2u(float x) {  // float -> uint32 as x86 code converts it (see the top)
    return x >= 2147483648.0 ? f2i(x - 2147483648.0) ^ 0x80000000u : f2i(x);
}

// Integer division and remainder (MODE), without SPIR-V's undefined cases (zero, INT_MIN / -1).
int idiv(int x, int w) {
    if (w == 0) return 0;
    int q = w == -1 ? int(0u - uint(x)) : x / w;  // truncated
    int r = w == -1 ? 0 : x - q * w;
    bool other_side = r != 0 && ((r < 0) != (w < 0));
    if (MODE == 0) return q;
    if (MODE == 1) return other_side ? q - 1 : q;
    if (MODE == 2) return other_side ? r + w : r;
    return r;
}

uint upow(uint x, uint e) {
    uint r = 1u;
    while (e != 0u) {
        if ((e & 1u) != 0u) r *= x;
        x *= x;
        e >>= 1;
    }
    return r;
}

// x << s or x >> s of an integer IN_TYPE (x, s as loaded), PyTorch's results outside [0, BITS).
uint shift(uint x, uint s, bool left) {
    bool outside = SIGNED_IN ? (int(s) < 0 || int(s) >= BITS) : s >= uint(BITS);
    if (left) return outside ? 0u : x << s;
    if (SIGNED_IN) return uint(int(x) >> (outside ? 31 : int(s)));  // 31: the sign fill
    return outside ? 0u : x >> s;
}

int ipow(int x, int e) {
    if (e < 0) return x == 1 ? 1 : (x == -1 ? ((e & 1) != 0 ? -1 : 1) : 0);
    int r = 1;
    while (e != 0) {
        if ((e & 1) != 0) r *= x;
        x *= x;
        e >>= 1;
    }
    return r;
}

// Result as raw bits (float32 / int32) or 0/1 (bool).
uint compute(uint ra, uint rb) {
    if (OP == TO_DTYPE) {
        if (CIN == F32) {
            float x = uintBitsToFloat(ra);
            if (OUT_TYPE == BOOL) return (x == 0.0) ? 0u : 1u;  // NaN is true
            if (FLOAT_OUT) return ra;
            if (OUT_TYPE == U32) return f2u(x);
            return f2i(x);  // int32; its low bits for the 8- and 16-bit types
        }
        if (IN_TYPE != BOOL) {  // integers: loaded as int32 (uint32 as its bits)
            if (FLOAT_OUT) return floatBitsToUint(IN_TYPE == U32 ? float(ra) : float(int(ra)));
            if (OUT_TYPE == BOOL) return ra != 0u ? 1u : 0u;
            return ra;  // int32 / uint32 bits, or the low bits for the narrow types (wraps)
        }
        // bool
        if (FLOAT_OUT) return ra != 0u ? floatBitsToUint(1.0) : 0u;
        return ra != 0u ? 1u : 0u;
    }
    if (OP == LOGICAL_NOT) {
        if (CIN == F32) return (uintBitsToFloat(ra) == 0.0) ? 1u : 0u;
        return ra == 0u ? 1u : 0u;
    }
    if (OP == LOGICAL_AND) return (ra != 0u && rb != 0u) ? 1u : 0u;
    if (OP == LOGICAL_OR) return (ra != 0u || rb != 0u) ? 1u : 0u;
    if (OP == LOGICAL_XOR) return ((ra != 0u) != (rb != 0u)) ? 1u : 0u;
    if (OP == BITWISE_AND) return ra & rb;
    if (OP == BITWISE_OR) return ra | rb;
    if (OP == BITWISE_XOR) return ra ^ rb;
    if (OP == BITWISE_NOT) return ~ra;
    if (OP == BITWISE_LEFT_SHIFT) return shift(ra, rb, true);
    if (OP == BITWISE_RIGHT_SHIFT) return shift(ra, rb, false);
    if (IN_TYPE == U32) {  // unsigned: the ops where the sign matters
        if (OP == DIV) return rb == 0u ? 0u : (MODE <= 1 ? ra / rb : ra % rb);
        if (OP == POW) return upow(ra, rb);
        if (OP == MAXIMUM) return max(ra, rb);
        if (OP == MINIMUM) return min(ra, rb);
        if (OP == LT) return ra < rb ? 1u : 0u;
        if (OP == LE) return ra <= rb ? 1u : 0u;
        if (OP == GT) return ra > rb ? 1u : 0u;
        if (OP == GE) return ra >= rb ? 1u : 0u;
    }
    if (CIN != F32) {  // the integers (as int32); bool: comparisons of the bytes 0 / 1
        int x = int(ra), w = int(rb);
        if (OP == ADD) return uint(x + w);
        if (OP == SUB) return uint(x - w);
        if (OP == MUL) return uint(x * w);
        if (OP == DIV) return uint(idiv(x, w));
        if (OP == POW) return uint(ipow(x, w));
        if (OP == MAXIMUM) return uint(max(x, w));
        if (OP == MINIMUM) return uint(min(x, w));
        if (OP == EQ) return x == w ? 1u : 0u;
        if (OP == NE) return x != w ? 1u : 0u;
        if (OP == LT) return x < w ? 1u : 0u;
        if (OP == LE) return x <= w ? 1u : 0u;
        if (OP == GT) return x > w ? 1u : 0u;
        if (OP == GE) return x >= w ? 1u : 0u;
        return 0u;
    }
    float x = uintBitsToFloat(ra), w = uintBitsToFloat(rb);
    if (OP == ADD) return floatBitsToUint(x + w);
    if (OP == SUB) return floatBitsToUint(x - w);
    if (OP == MUL) return floatBitsToUint(x * w);
    if (OP == DIV) return floatBitsToUint(x / w);
    if (OP == POW) return floatBitsToUint(c_pow(x, w));
    if (OP == MAXIMUM) return floatBitsToUint(fmaximum(x, w));
    if (OP == MINIMUM) return floatBitsToUint(fminimum(x, w));
    if (OP == CLAMP) return floatBitsToUint(fminimum(fmaximum(x, p.lo), p.hi));
    if (OP == LOG1P) return floatBitsToUint(log1p_(x));
    if (OP == EQ) return (x == w) ? 1u : 0u;
    if (OP == NE) return (x == w) ? 0u : 1u;   // true when either is NaN, as C's !=
    if (OP == LT) return (x < w) ? 1u : 0u;
    if (OP == LE) return (x <= w) ? 1u : 0u;
    if (OP == GT) return (x > w) ? 1u : 0u;
    if (OP == GE) return (x >= w) ? 1u : 0u;
    return 0u;
}

uint element(uint i) {
    uint rem = i;
    int ia = p.a_off;
    int ib = p.b_off;
    for (int k = int(p.ndim) - 1; k >= 0; --k) {
        uint c = rem % p.shape[k];
        rem /= p.shape[k];
        ia += int(c) * p.a_stride[k];
        ib += int(c) * p.b_stride[k];
    }
    uint r = compute(load_a(ia), load_b(ib));
    return HALF_OUT ? f32_to_half(OUT_TYPE - 5, uintBitsToFloat(r)) : r;
}

void main() {
    uint w = global_index();
    if (BYTE_OUT || HALF_OUT || SHORT_OUT) {
        // word w holds elements PER*w ..; past n the rest of the word is scratch of the
        // allocation. One call site of element() (a loop): each would inline every op.
        const uint PER = BYTE_OUT ? 4u : 2u;
        const uint BITS = 32u / PER;
        const uint MASK = BYTE_OUT ? 0xffu : 0xffffu;
        uint first = PER * w;
        if (first >= p.n) return;
        uint bits = 0u;
        uint m = min(PER, p.n - first);
        for (uint j = 0u; j < m; ++j) bits |= (element(first + j) & MASK) << (BITS * j);
        y[p.y_off + w] = bits;
    } else {
        if (w >= p.n) return;
        y[p.y_off + w] = element(w);
    }
}

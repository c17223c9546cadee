#version 450
#extension GL_GOOGLE_include_directive : require
// Strided elementwise ops: y[i] = OP(a[ia(i)], b[ib(i)]) for the row-major index i over `shape`,
// where ia(i) = a_off + sum(coord_k * a_stride[k]) (strides may be 0 for broadcasting, or
// negative). The output is a fresh contiguous array.
//
// One shader for the family: binary arithmetic and comparisons, logical ops, clamp, log1p and dtype
// casts (the unary ones bind a twice and ignore b). Specialization constants:
//   1 OP        op code: a binary code or a strided-only one (cpu/opcodes.def)
//   2 IN_TYPE   F32, I32 or BOOL (bytes, read out of 32-bit words); codes from cpu/opcodes.def;
//               I8 and U8 (bytes too) below
//   3 OUT_TYPE  F32, I32, or a byte type (BOOL, I8, U8): four results packed into each 32-bit
//               word, so one invocation writes whole words and no 8-bit storage feature is needed;
//               or a 16-bit float (F16, BF16): two results per word.
//   4 MODE      integer DIV only (kernels/elementwise.py's _IDIV): 0 the quotient rounded toward
//               zero, 1 toward -inf, 2 the remainder with the divisor's sign (Python's %), 3 with
//               the dividend's (C's fmod).
// Element offsets/strides are in elements of IN_TYPE (bytes for bool, 16-bit units for F16 and
// BF16). Buffers are raw words. float16 / bfloat16 values are widened to float32 on load and the
// float32 result is rounded on store (half.glsl), as the CPU path computes them.
//
// Float semantics follow the C kernels (gpucore._cpu): maximum/minimum propagate NaN, pow is C's
// powf (its special cases), != is true for NaN, float->int32 casts truncate and give INT_MIN for
// NaN and out-of-range values (x86's cvttss2si, what numpy gives on the CPU path).
// Integer semantics are numpy's (the CPU kernels): wrapping arithmetic; x / 0 and x % 0 give 0,
// INT_MIN / -1 wraps to INT_MIN; pow by square-and-multiply, wrapping, and a negative exponent
// (which the CPU refuses when it can see it) gives trunc(1 / x^-e): 1 for 1, +-1 for -1, else 0.
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
const bool BYTE_IN = IN_TYPE == BOOL || IN_TYPE == I8 || IN_TYPE == U8;
const bool BYTE_OUT = OUT_TYPE == BOOL || OUT_TYPE == I8 || OUT_TYPE == U8;
const bool HALF_IN = IN_TYPE == F16 || IN_TYPE == BF16;
const bool HALF_OUT = OUT_TYPE == F16 || OUT_TYPE == BF16;
const bool FLOAT_OUT = OUT_TYPE == F32 || HALF_OUT;  // compute() gives float32 bits

uint byte_value(uint word, int i) {
    uint v = (word >> (8 * (i & 3))) & 0xffu;
    return IN_TYPE == I8 ? uint(int(v << 24) >> 24) : v;
}

// Loads give 32-bit patterns: half types arrive as float32 bits (exact), so compute() sees F32.
uint load_a(int i) {
    if (BYTE_IN) return byte_value(a[i >> 2], i);
    if (HALF_IN) return floatBitsToUint(half_to_f32(IN_TYPE - 5, HALF_AT(a, i)));
    return a[i];
}

uint load_b(int i) {
    if (BYTE_IN) return byte_value(b[i >> 2], i);
    if (HALF_IN) return floatBitsToUint(half_to_f32(IN_TYPE - 5, HALF_AT(b, i)));
    return b[i];
}

const int CIN = HALF_IN ? F32 : IN_TYPE;  // the type compute() sees

uint f2i(float x) {
    if (isnan(x) || x >= 2147483648.0 || x < -2147483648.0) return 0x80000000u;
    return uint(int(x));
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
            if (!FLOAT_OUT && OUT_TYPE != BOOL) return f2i(x);  // int8 / uint8: its low byte
            if (OUT_TYPE == BOOL) return (x == 0.0) ? 0u : 1u;   // NaN is true
            return ra;
        }
        if (IN_TYPE == I32 || IN_TYPE == I8 || IN_TYPE == U8) {  // bytes: loaded as int32
            if (FLOAT_OUT) return floatBitsToUint(float(int(ra)));
            if (OUT_TYPE == BOOL) return ra != 0u ? 1u : 0u;
            return ra;  // int32, or the low byte for int8 / uint8 (wraps)
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
    if (CIN != F32) {  // int32, int8, uint8; bool: comparisons of the bytes 0 / 1
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
    if (BYTE_OUT || HALF_OUT) {
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

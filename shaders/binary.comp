#version 450
#extension GL_GOOGLE_include_directive : require
// Strided elementwise ops: y[i] = OP(a[ia(i)], b[ib(i)]) for the row-major index i over `shape`,
// where ia(i) = a_off + sum(coord_k * a_stride[k]) (strides may be 0 for broadcasting, or
// negative). The output is a fresh contiguous array.
//
// One shader for the family: binary arithmetic and comparisons, logical ops, clamp, log1p and dtype
// casts (the unary ones bind a twice and ignore b). Specialization constants:
//   1 OP        op code below
//   2 IN_TYPE   0 float32, 1 int32, 2 bool (bytes, read out of 32-bit words)
//   3 OUT_TYPE  0 float32, 1 int32, 2 bool: four results packed into each 32-bit word, so one
//               invocation writes whole words and no 8-bit storage feature is needed.
// Element offsets/strides are in elements of IN_TYPE (bytes for bool). Buffers are raw words.
//
// Float semantics follow the C kernels (gpucore._cpu): maximum/minimum propagate NaN, pow is C's
// powf (its special cases), != is true for NaN, float->int32 casts truncate and give INT_MIN for
// NaN and out-of-range values (x86's cvttss2si, what numpy gives on the CPU path).
#include "common.glsl"

layout(constant_id = 1) const int OP = 0;
layout(constant_id = 2) const int IN_TYPE = 0;
layout(constant_id = 3) const int OUT_TYPE = 0;

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

const int F32 = 0, I32 = 1, BOOL = 2;
const int ADD = 0, SUB = 1, MUL = 2, DIV = 3, POW = 4, MAXIMUM = 5, MINIMUM = 6,
          EQ = 7, NE = 8, LT = 9, LE = 10, GT = 11, GE = 12,
          LAND = 13, LOR = 14, LXOR = 15, LNOT = 16, CLAMP = 17, CAST = 18, LOG1P = 19;

#define INF uintBitsToFloat(0x7f800000u)
#define QNAN uintBitsToFloat(0x7fc00000u)

uint load_a(int i) {
    if (IN_TYPE == BOOL) return (a[i >> 2] >> (8 * (i & 3))) & 0xffu;
    return a[i];
}

uint load_b(int i) {
    if (IN_TYPE == BOOL) return (b[i >> 2] >> (8 * (i & 3))) & 0xffu;
    return b[i];
}

bool sign_bit(float x) { return (floatBitsToUint(x) >> 31) != 0u; }

// NaN-propagating max/min: a NaN x wins via isnan, a NaN y because the comparison fails.
float fmaximum(float x, float y) { return (x > y || isnan(x)) ? x : y; }
float fminimum(float x, float y) { return (x < y || isnan(x)) ? x : y; }

// ---- accurate log / pow (the builtins log, log2, exp2 are only good to ~2^-21 absolute near 1)
// Float-float arithmetic (a value is hi + lo); `precise` keeps the compiler from reassociating or
// contracting the error terms away. Products use Dekker's split, so no fused fma is needed.
const float LN2_HI = 0.693145751953125;        // 16 significant bits: k * LN2_HI is exact
const float LN2_LO = 1.42860682030941723212e-6;
const float INV_LN2 = 1.44269504088896340736;

vec2 two_sum(float a, float b) {
    precise float s = a + b;
    precise float bb = s - a;
    precise float e = (a - (s - bb)) + (b - bb);
    return vec2(s, e);
}

vec2 fast_two_sum(float a, float b) {  // |a| >= |b|
    precise float s = a + b;
    precise float e = b - (s - a);
    return vec2(s, e);
}

vec2 split(float a) {
    precise float c = 4097.0 * a;
    precise float h = c - (c - a);
    precise float l = a - h;
    return vec2(h, l);
}

vec2 two_prod(float a, float b) {
    precise float p = a * b;
    vec2 sa = split(a), sb = split(b);
    precise float e = ((sa.x * sb.x - p) + sa.x * sb.y + sa.y * sb.x) + sa.y * sb.y;
    return vec2(p, e);
}

// log(1 + f) as float-float for f (exact) in [sqrt(1/2) - 1, sqrt(2) - 1]: fdlibm's logf kernel,
// f - f^2/2 + s (f^2/2 + R(s^2)) with s = f / (2 + f), the leading terms kept exact.
vec2 log1p_kernel(float f) {
    const float Lg1 = 0.66666662693, Lg2 = 0.40000972152, Lg3 = 0.28498786688,
                Lg4 = 0.24279078841;
    vec2 sq = two_prod(f, f);
    float hh = 0.5 * sq.x, hl = 0.5 * sq.y;
    float s = f / (2.0 + f);
    float z = s * s;
    float w = z * z;
    float r = z * (Lg1 + w * Lg3) + w * (Lg2 + w * Lg4);
    float c = s * (hh + r);
    vec2 d = two_sum(f, -hh);
    precise float lo = (d.y - hl) + c;
    return fast_two_sum(d.x, lo);
}

// ax = 2^e * (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)); ax > 0, finite.
int reduce_log(float ax, out float f) {
    int e;
    float m = frexp(ax, e);   // m in [0.5, 1)
    if (m < 0.70710678118654752) {
        m *= 2.0;
        e -= 1;
    }
    f = m - 1.0;              // exact (Sterbenz)
    return e;
}

// log(x) as float-float, x > 0 finite.
vec2 log_ff(float x) {
    float f;
    int e = reduce_log(x, f);
    vec2 l = log1p_kernel(f);
    float k = float(e);
    vec2 t = two_sum(k * LN2_HI, l.x);
    precise float lo = t.y + (l.y + k * LN2_LO);
    return fast_two_sum(t.x, lo);
}

// exp(th + tl), |tl| <= ulp(th) / 2.
float exp_ff(float th, float tl) {
    if (th > 89.0) return INF;
    if (th < -104.0) return 0.0;
    float k = round(th * INV_LN2);
    precise float r = ((th - k * LN2_HI) - k * LN2_LO) + tl;
    // exp(r), |r| <= 0.35: Taylor to r^8 (truncation < 2^-30)
    float q = 1.0 + r * (1.0 + r * (0.5 + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0
              + r * (1.0 / 720.0 + r * (1.0 / 5040.0 + r * (1.0 / 40320.0))))))));
    int ki = int(k);
    int k1 = ki / 2;
    return ldexp(ldexp(q, k1), ki - k1);   // two steps: 2^k alone may not be a float
}

// C99 powf, special cases included (Annex F.9.4.4); about 1 ulp for finite results.
float c_pow(float x, float y) {
    if (y == 0.0) return 1.0;
    if (x == 1.0) return 1.0;
    if (isnan(x) || isnan(y)) return QNAN;
    float ax = abs(x);
    if (isinf(y)) {
        if (ax == 1.0) return 1.0;
        return ((ax > 1.0) == (y > 0.0)) ? INF : 0.0;
    }
    bool yint = trunc(y) == y;
    // floats of magnitude >= 2^24 are even integers
    bool yodd = yint && abs(y) < 16777216.0 && (uint(abs(y)) & 1u) == 1u;
    if (x == 0.0) {
        if (y < 0.0) return yodd ? (sign_bit(x) ? -INF : INF) : INF;
        return yodd ? x : 0.0;
    }
    if (isinf(x)) {
        if (x > 0.0) return y < 0.0 ? 0.0 : INF;
        if (y < 0.0) return yodd ? -0.0 : 0.0;
        return yodd ? -INF : INF;
    }
    if (x < 0.0 && !yint) return QNAN;
    float r;
    if (y == 1.0) {
        r = ax;
    } else if (y == 2.0) {
        r = ax * ax;
    } else {
        vec2 l = log_ff(ax);
        if (abs(y) > 1e20) {
            r = exp_ff(y * l.x, 0.0);   // |y log x| is far outside [-104, 89] (x != 1)
        } else {
            vec2 t = two_prod(y, l.x);
            precise float lo = t.y + y * l.y;
            vec2 tt = fast_two_sum(t.x, lo);
            r = exp_ff(tt.x, tt.y);
        }
    }
    return (x < 0.0 && yodd) ? -r : r;
}

// log(1 + x), as fdlibm's log1pf: exact reduction for 1 + x near 1, else a correction term for
// the rounding of u = 1 + x.
float log1p_(float x) {
    if (isnan(x)) return x;
    if (x < -1.0) return QNAN;
    if (x == -1.0) return -INF;
    if (isinf(x)) return x;
    if (x > -0.29289321881 && x < 0.41421356237) {
        vec2 l = log1p_kernel(x);
        return l.x + l.y;
    }
    precise float u = 1.0 + x;
    precise float c = (u < 16777216.0) ? (x - (u - 1.0)) / u : 0.0;  // log(1+x) = log(u) + c
    vec2 l = log_ff(u);
    precise float lo = l.y + c;
    return l.x + lo;
}

uint f2i(float x) {
    if (isnan(x) || x >= 2147483648.0 || x < -2147483648.0) return 0x80000000u;
    return uint(int(x));
}

// Result as raw bits (float32 / int32) or 0/1 (bool).
uint compute(uint ra, uint rb) {
    if (OP == CAST) {
        if (IN_TYPE == F32) {
            float x = uintBitsToFloat(ra);
            if (OUT_TYPE == I32) return f2i(x);
            if (OUT_TYPE == BOOL) return (x == 0.0) ? 0u : 1u;   // NaN is true
            return ra;
        }
        if (IN_TYPE == I32) {
            if (OUT_TYPE == F32) return floatBitsToUint(float(int(ra)));
            if (OUT_TYPE == BOOL) return ra != 0u ? 1u : 0u;
            return ra;
        }
        // bool
        if (OUT_TYPE == F32) return ra != 0u ? floatBitsToUint(1.0) : 0u;
        return ra != 0u ? 1u : 0u;
    }
    if (OP == LNOT) {
        if (IN_TYPE == F32) return (uintBitsToFloat(ra) == 0.0) ? 1u : 0u;
        return ra == 0u ? 1u : 0u;
    }
    if (OP == LAND) return (ra != 0u && rb != 0u) ? 1u : 0u;
    if (OP == LOR) return (ra != 0u || rb != 0u) ? 1u : 0u;
    if (OP == LXOR) return ((ra != 0u) != (rb != 0u)) ? 1u : 0u;
    if (IN_TYPE == I32) {
        int x = int(ra), w = int(rb);
        if (OP == ADD) return uint(x + w);
        if (OP == SUB) return uint(x - w);
        if (OP == MUL) return uint(x * w);
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
        for (uint j = 0u; j < m; ++j) bits |= element(first + j) << (8u * j);
        y[p.y_off + w] = bits;
    } else {
        if (w >= p.n) return;
        y[p.y_off + w] = element(w);
    }
}

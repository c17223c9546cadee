// Float helpers shared by the elementwise shaders (binary.comp, fused.comp): NaN-propagating
// max/min as the C kernels, C99 powf, accurate log/log1p. Include-only.
#ifndef FLOAT_MATH_GLSL
#define FLOAT_MATH_GLSL

#define INF uintBitsToFloat(0x7f800000u)
#define QNAN uintBitsToFloat(0x7fc00000u)

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
    float m;
    uint b = floatBitsToUint(ax);
    if (b < 0x00800000u) {     // subnormal: ax = b * 2^-149 (decoded: drivers may flush it)
        m = frexp(float(b), e);
        e -= 149;
    } else {
        m = frexp(ax, e);      // m in [0.5, 1)
    }
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

#endif

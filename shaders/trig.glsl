// sin and cos for every float32, as the C library computes them: Payne-Hanek argument reduction
// against 2/pi in integer arithmetic (exact for any |x|, so sin(3e38) is the CPU's value, where
// GLSL's sin/cos are only specified on [-pi, pi]), then fdlibm's float kernels on [-pi/4, pi/4].
// Include-only; needs float_math.glsl (two_prod, fast_two_sum, QNAN).
#ifndef TRIG_GLSL
#define TRIG_GLSL
#include "float_math.glsl"

// Bits 1.. of 2/pi after the binary point, 32 per word, after one zero word for the bits at and
// before the point (tests/tools/test_build_shaders.py recomputes them with Python integers).
const uint TWO_OVER_PI[10] = uint[10](0u, 0xA2F9836Eu, 0x4E441529u, 0xFC2757D1u, 0xF534DDC0u,
                                      0xDB629599u, 0x3C439041u, 0xFE5163ABu, 0xDEBBC561u,
                                      0xB7246E3Au);
const float PIO2_HI = 1.57079637050628662109375;   // float(pi / 2)
const float PIO2_LO = -4.37113900018624283e-8;      // pi / 2 - PIO2_HI

// 32 bits of 2/pi starting at bit i (i >= -31; bits at i <= 0 are zero).
uint two_over_pi_word(int i) {
    int j = i + 31;
    int w = j >> 5;
    int s = j & 31;
    if (s == 0) return TWO_OVER_PI[w];
    return (TWO_OVER_PI[w] << uint(s)) | (TWO_OVER_PI[w + 1] >> uint(32 - s));
}

// |x| = q * pi/2 + r for finite |x| >= pi/4: returns q mod 4, r as float-float in
// [-pi/4, pi/4] (sign of r relative to |x|).
int reduce_pio2(float ax, out vec2 r) {
    uint bits = floatBitsToUint(ax);
    uint m = (bits & 0x007FFFFFu) | 0x00800000u;   // ax = m * 2^e
    int e = int(bits >> 23) - 150;
    // ax * 2/pi = m * W * 2^-94 (mod 4) with W the 96 bits of 2/pi from bit e - 1: the bits
    // before contribute multiples of 4, those after less than 2^-70.
    int i0 = e - 1;
    uint w2 = two_over_pi_word(i0), w1 = two_over_pi_word(i0 + 32), w0 = two_over_pi_word(i0 + 64);
    uint h0, l0, h1, l1, h2, l2, c1, c2;
    umulExtended(m, w0, h0, l0);
    umulExtended(m, w1, h1, l1);
    umulExtended(m, w2, h2, l2);
    uint p0 = l0;
    uint p1 = uaddCarry(h0, l1, c1);
    uint p2 = uaddCarry(h1, l2, c2);
    p2 += c1;  // cannot carry out: bits above 95 only matter mod 4 and are dropped
    int q = int(p2 >> 30);
    // the fraction (bits 93..30 of the product) as a signed 64-bit fixed-point number in [-1/2, 1/2)
    uint fh = (p2 << 2) | (p1 >> 30);
    uint fl = (p1 << 2) | (p0 >> 30);
    bool neg = (fh >> 31) != 0u;
    if (neg) {  // round to the nearest quadrant: q + 1, fraction - 1 (its magnitude by negation)
        q += 1;
        uint c;
        fl = uaddCarry(~fl, 1u, c);
        fh = ~fh + c;
    }
    if (fh == 0u && fl == 0u) {
        r = vec2(0.0);
        return q & 3;
    }
    int top = fh != 0u ? findMSB(fh) + 32 : findMSB(fl);
    int shift = 63 - top;  // normalise: the leading one to bit 63
    uint nh, nl;
    if (shift >= 32) {
        nh = fl << uint(shift - 32);
        nl = 0u;
    } else if (shift > 0) {
        nh = (fh << uint(shift)) | (fl >> uint(32 - shift));
        nl = fl << uint(shift);
    } else {
        nh = fh;
        nl = fl;
    }
    float fhi = ldexp(float(nh >> 8), -24 - shift);                              // 24 bits
    float flo = ldexp(float(((nh & 0xFFu) << 16) | (nl >> 16)), -48 - shift);    // next 24
    vec2 p = two_prod(fhi, PIO2_HI);
    precise float lo = p.y + (fhi * PIO2_LO + flo * PIO2_HI);
    r = fast_two_sum(p.x, lo);
    if (neg) r = -r;
    return q & 3;
}

// fdlibm's __kernel_sindf / __kernel_cosdf coefficients (|error| < 2^-37 on [-pi/4, pi/4]).
float sin_kernel(float x, float xl) {
    float z = x * x;
    float s = z * x;
    float poly = -0.166666666416265235595 + z * (0.0083333293858894631756 +
                 z * (-0.000198393348360966317347 + z * 0.0000027183114939898219064));
    return x + (s * poly + xl * (1.0 - 0.5 * z));
}

float cos_kernel(float x, float xl) {
    float z = x * x;
    float poly = -0.499999997251031003120 + z * (0.0416666233237390631894 +
                 z * (-0.00138867637746099294692 + z * 0.0000243904487962774090654));
    return 1.0 + z * poly - x * xl;
}

float sin_(float x) {
    if (isnan(x) || isinf(x)) return QNAN;
    float ax = abs(x);
    if (ax < 0.78539816339744831) return sin_kernel(x, 0.0);
    vec2 r;
    int q = reduce_pio2(ax, r);
    float v = (q & 1) == 0 ? sin_kernel(r.x, r.y) : cos_kernel(r.x, r.y);
    if (q >= 2) v = -v;
    return x < 0.0 ? -v : v;
}

float cos_(float x) {
    if (isnan(x) || isinf(x)) return QNAN;
    float ax = abs(x);
    if (ax < 0.78539816339744831) return cos_kernel(ax, 0.0);
    vec2 r;
    int q = reduce_pio2(ax, r);
    float v = (q & 1) == 0 ? cos_kernel(r.x, r.y) : sin_kernel(r.x, r.y);
    return (q == 1 || q == 2) ? -v : v;
}

#endif

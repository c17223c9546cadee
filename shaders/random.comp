#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
// Philox4x32-10 random fills: the stream of cpu/philox.c (see cpu/README.md), so a seed and
// offset give the CPU generator's numbers. Word i of the stream is word i % 4 of the block at the
// 64-bit counter offset + i / 4 (c0 = low, c1 = high 32 bits, c2 = c3 = 0), key (seed low, high).
// One invocation computes one block and writes elements 4*blk .. 4*blk + 3 (those below n).
//
// MODE (constant 1):
//   0 WORDS    out uint32 = the raw words.
//   1 UNIFORM  out float32 = a + (b - a) * u, u = (w >> 8) * 2**-24: exact float32 operations in
//              the CPU's order, so bit for bit the CPU's values.
//   2 NORMAL   out float32 = a + b * z, Box-Muller over word pairs (2p, 2p+1):
//              u1 = ((w0 >> 8) + 1) * 2**-24, u2 = (w1 >> 8) * 2**-24, r = sqrtf(-2 logf(u1)),
//              z0 = r cosf(2pi u2), z1 = r sinf(2pi u2), every step rounded to float32 as the CPU
//              does. logf, sinf, cosf and sqrtf are computed here in float-float arithmetic (about
//              44 bits) and then rounded, i.e. correctly rounded except in rare hard cases: the
//              CPU's libm (glibc: 0.82 ulp logf, 0.56 ulp sincosf) agrees on almost every value,
//              and a disagreement moves z by 1 ulp of an intermediate (a few ulp of z at most).
//              GLSL's own log/sin/cos/sqrt are not used: Vulkan lets them be off by several ulp.
//   3 DROPOUT  out float32 = u >= a ? b : 0 with u as UNIFORM on [0, 1) (a = p, b = 1/(1-p)):
//              the CPU's ``(rand(shape) >= p).to(float32) * scale``.
// STATE (constant 2) = 1: the stream position is read from binding 1 (4 words at state_off: seed
// low, high, base block low, high) and ctr (push) is added to the base, 64-bit: a captured graph
// (gpucore.vulkan.graph) records the fill once and each replay writes the generator's current
// seed and offset there (kernels/random.py), so replays draw fresh numbers, those eager calls
// would draw. STATE = 0: seed and ctr are the push constants (binding 1 is bound but unread).
// Every float temporary is `precise` (SPIR-V NoContraction): the driver may neither fuse a*b+c
// into an fma (the CPU rounds the product) nor reassociate the float-float error terms.
#include "common.glsl"

layout(constant_id = 1) const int MODE = 1;
layout(constant_id = 2) const int STATE = 0;

layout(std430, set = 0, binding = 0) writeonly buffer Y { float y[]; };
layout(std430, set = 0, binding = 0) writeonly buffer W { uint words[]; };
layout(std430, set = 0, binding = 1) readonly buffer S { uint state[]; };

// Mirrored by kernels/random.py's _fill_push (9 words).
layout(push_constant) uniform Push {
    uint n;                  // elements to write
    uint out_off;            // element offset of out in the binding
    uint seed_lo, seed_hi;
    uint ctr_lo, ctr_hi;     // block counter of element 0
    float a, b;              // low/high, mean/std, p/scale
    uint state_off;          // STATE = 1: word offset of (seed, base block) in binding 1
} p;

#define GC_RANDOM_MODE(NAME, value) const int NAME = value;  // WORDS ... DROPOUT (cpu/opcodes.def)
#include "opcodes.def"
#undef GC_RANDOM_MODE

// ------------------------------------------------------------------------------- Philox4x32-10
uvec4 philox(uvec4 c, uvec2 k) {
    [[unroll]] for (int r = 0; r < 10; ++r) {
        if (r > 0) k += uvec2(0x9E3779B9u, 0xBB67AE85u);
        uint hi0, lo0, hi1, lo1;
        umulExtended(0xD2511F53u, c.x, hi0, lo0);
        umulExtended(0xCD9E8D57u, c.z, hi1, lo1);
        c = uvec4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    }
    return c;
}

float unit(uint w) {   // (w >> 8) * 2**-24, exact
    return float(w >> 8u) * (1.0 / 16777216.0);
}

// ------------------------------------------------------------------------------- float-float
// A value is hi + lo (vec2 x, y) with |lo| <= ulp(hi) / 2. Needs only correctly rounded + - *
// (which Vulkan guarantees); no fma.
precise vec2 two_sum(precise float a, precise float b) {
    precise float s = a + b;
    precise float bb = s - a;
    precise float e = (a - (s - bb)) + (b - bb);
    return vec2(s, e);
}

precise vec2 fast_two_sum(precise float a, precise float b) {  // |a| >= |b| or a == 0
    precise float s = a + b;
    precise float e = b - (s - a);
    return vec2(s, e);
}

precise vec2 split(precise float a) {  // Veltkamp: two halves of 12 bits
    precise float c = 4097.0 * a;
    precise float hi = c - (c - a);
    precise float lo = a - hi;
    return vec2(hi, lo);
}

precise vec2 two_prod(precise float a, precise float b) {  // Dekker: a * b exactly
    precise float q = a * b;
    precise vec2 as = split(a);
    precise vec2 bs = split(b);
    precise float e = ((as.x * bs.x - q) + as.x * bs.y + as.y * bs.x) + as.y * bs.y;
    return vec2(q, e);
}

precise vec2 dd_add(precise vec2 a, precise vec2 b) {
    precise vec2 s = two_sum(a.x, b.x);
    precise vec2 t = two_sum(a.y, b.y);
    s = fast_two_sum(s.x, s.y + t.x);
    return fast_two_sum(s.x, s.y + t.y);
}

precise vec2 dd_mul(precise vec2 a, precise vec2 b) {
    precise vec2 q = two_prod(a.x, b.x);
    return fast_two_sum(q.x, q.y + (a.x * b.y + a.y * b.x));
}

precise vec2 dd_mul_f(precise vec2 a, precise float b) {
    precise vec2 q = two_prod(a.x, b);
    return fast_two_sum(q.x, q.y + a.y * b);
}

precise vec2 dd_div(precise vec2 a, precise vec2 b) {
    // Three quotient digits, each from an exactly computed remainder: the float division may be
    // off by 2.5 ulp on Vulkan, the remainders put that right.
    precise float q1 = a.x / b.x;
    precise vec2 r = dd_add(a, -dd_mul_f(b, q1));
    precise float q2 = r.x / b.x;
    r = dd_add(r, -dd_mul_f(b, q2));
    precise float q3 = r.x / b.x;
    return dd_add(fast_two_sum(q1, q2), vec2(q3, 0.0));
}

vec2 dd_const(uint hi, uint lo) {
    return vec2(uintBitsToFloat(hi), uintBitsToFloat(lo));
}

// ------------------------------------------------------------------------------- libm
// 1 / (2k + 1), k = 0..8, as float-float (hi, lo bit patterns).
const uint LOG_ODD[18] = uint[](
    0x3f800000u, 0x00000000u, 0x3eaaaaabu, 0xb22aaaabu, 0x3e4ccccdu, 0xb14ccccdu,
    0x3e124925u, 0xb1db6db7u, 0x3de38e39u, 0xb0638e39u, 0x3dba2e8cu, 0xb13a2e8cu,
    0x3d9d89d9u, 0xb144ec4fu, 0x3d888889u, 0xb16eeeefu, 0x3d70f0f1u, 0xaf70f0f1u);
// (-1)^k / (2k + 1)!, k = 0..7
const uint SIN_C[16] = uint[](
    0x3f800000u, 0x00000000u, 0xbe2aaaabu, 0x31aaaaabu, 0x3c088889u, 0xafeeeeefu,
    0xb9500d01u, 0x2c3fcbfdu, 0x3638ef1du, 0x292ad8e6u, 0xb2d7322bu, 0xa5fea89cu,
    0x2f309231u, 0xa2c5792fu, 0xab573f9fu, 0x9e667704u);
// (-1)^k / (2k)!, k = 0..8
const uint COS_C[18] = uint[](
    0x3f800000u, 0x00000000u, 0xbf000000u, 0x00000000u, 0x3d2aaaabu, 0xb0aaaaabu,
    0xbab60b61u, 0x2e13e93fu, 0x37d00d01u, 0xaabfcbfdu, 0xb493f27eu, 0x2808760au,
    0x310f76c7u, 0x24ff8d89u, 0xad49cba5u, 0xa08c07cau, 0x29573f9fu, 0x1c667704u);

// log(x) for a normal float x > 0, correctly rounded but for hard cases.
float log_f32(float x) {
    uint bits = floatBitsToUint(x);
    int e = int(bits >> 23) - 127;
    precise float m = uintBitsToFloat((bits & 0x007fffffu) | 0x3f800000u);  // [1, 2)
    if (m > 1.4142135) {
        m *= 0.5;
        e += 1;
    }
    precise float f = m - 1.0;  // exact (Sterbenz)
    // log(m) = log1p(f) = 2 atanh(s), s = f / (2 + f), |s| < 0.172:
    // 2 s (1 + z/3 + z^2/5 + ... + z^8/17), z = s^2 (next term < 2^-44 relative).
    precise vec2 s = dd_div(vec2(f, 0.0), two_sum(2.0, f));
    // The terms from z^3/7 on (< 4e-6) are summed in float (error < 2^-42), the rest in
    // float-float.
    precise vec2 z = dd_mul(s, s);
    precise float t = uintBitsToFloat(LOG_ODD[16]);
    [[unroll]] for (int k = 7; k >= 3; --k) t = t * z.x + uintBitsToFloat(LOG_ODD[2 * k]);
    precise vec2 acc = vec2(t, 0.0);
    [[unroll]] for (int k = 2; k >= 0; --k) {
        acc = dd_add(dd_mul(acc, z), dd_const(LOG_ODD[2 * k], LOG_ODD[2 * k + 1]));
    }
    precise vec2 lm = dd_mul(2.0 * s, acc);  // 2 * s is exact
    precise vec2 el = dd_mul_f(dd_const(0x3f317218u, 0xb102e308u), float(e));  // e * ln 2
    precise vec2 r = dd_add(el, lm);
    return r.x;  // dd_add normalizes: r.x = round(r.x + r.y)
}

// sin and cos of th in [0, 2pi], correctly rounded but for hard cases.
void sincos_f32(float th, out float sn, out float cs) {
    // th = k pi/2 + r, |r| <= pi/4 (+ rounding of k): pi/2 = C1 + C2 + C3 with C1, C2 of 21 bits
    // (k * C1, k * C2 exact for k <= 4) and C3 multiplied exactly; 2^-66 absolute error.
    precise float kf = floor(th * 0.63661975 + 0.5);
    precise vec2 r = two_sum(th, -(kf * uintBitsToFloat(0x3fc90fd8u)));
    r = dd_add(r, vec2(-(kf * uintBitsToFloat(0x34a88858u)), 0.0));
    r = dd_add(r, -two_prod(kf, uintBitsToFloat(0x298c234cu)));
    // sin r = r (1 - z/3! + ... - z^7/15!), cos r = 1 - z/2! + ... + z^8/16!, z = r^2 <= 0.62:
    // the terms below 5e-5 (sin from z^3/7!, cos from z^4/8!) in float, the rest in float-float.
    precise vec2 z = dd_mul(r, r);
    precise float ts = uintBitsToFloat(SIN_C[14]);
    [[unroll]] for (int k = 6; k >= 3; --k) ts = ts * z.x + uintBitsToFloat(SIN_C[2 * k]);
    precise vec2 s = vec2(ts, 0.0);
    [[unroll]] for (int k = 2; k >= 0; --k) {
        s = dd_add(dd_mul(s, z), dd_const(SIN_C[2 * k], SIN_C[2 * k + 1]));
    }
    s = dd_mul(s, r);
    precise float tc = uintBitsToFloat(COS_C[16]);
    [[unroll]] for (int k = 7; k >= 4; --k) tc = tc * z.x + uintBitsToFloat(COS_C[2 * k]);
    precise vec2 c = vec2(tc, 0.0);
    [[unroll]] for (int k = 3; k >= 0; --k) {
        c = dd_add(dd_mul(c, z), dd_const(COS_C[2 * k], COS_C[2 * k + 1]));
    }
    int q = int(kf) & 3;
    float sr = s.x, cr = c.x;
    sn = q == 0 ? sr : (q == 1 ? cr : (q == 2 ? -sr : -cr));
    cs = q == 0 ? cr : (q == 1 ? -sr : (q == 2 ? -cr : sr));
}

// sqrt(a) for a >= 0, correctly rounded: one correction from the exact residual a - y*y.
float sqrt_f32(float a) {
    if (a == 0.0) return a;  // keeps the sign of zero, as sqrtf
    precise float y = sqrt(a);
    precise vec2 res = dd_add(vec2(a, 0.0), -two_prod(y, y));
    precise float corr = res.x / (2.0 * y);
    precise float out_y = y + corr;
    return out_y;
}

// ------------------------------------------------------------------------------- main
void main() {
    uint blk = global_index();
    uint first = blk * 4u;
    if (first >= p.n) return;
    uvec2 key = uvec2(p.seed_lo, p.seed_hi);
    uvec2 ctr = uvec2(p.ctr_lo, p.ctr_hi);
    uint lo, carry;
    if (STATE == 1) {
        uint s0 = p.state_off;
        key = uvec2(state[s0], state[s0 + 1u]);
        lo = uaddCarry(state[s0 + 2u], ctr.x, carry);
        ctr = uvec2(lo, state[s0 + 3u] + ctr.y + carry);
    }
    lo = uaddCarry(ctr.x, blk, carry);
    uvec4 w = philox(uvec4(lo, ctr.y + carry, 0u, 0u), key);
    uint cnt = min(4u, p.n - first);
    uint o = p.out_off + first;
    if (MODE == WORDS) {
        for (uint j = 0u; j < cnt; ++j) words[o + j] = w[j];
    } else if (MODE == UNIFORM) {
        precise float span = p.b - p.a;
        for (uint j = 0u; j < cnt; ++j) {
            precise float v = p.a + span * unit(w[j]);
            y[o + j] = v;
        }
    } else if (MODE == DROPOUT) {
        for (uint j = 0u; j < cnt; ++j) y[o + j] = unit(w[j]) >= p.a ? p.b : 0.0;
    } else {  // NORMAL
        precise float z[4];
        for (int q = 0; q < 2; ++q) {
            precise float u1 = float((w[2 * q] >> 8u) + 1u) * (1.0 / 16777216.0);
            precise float u2 = unit(w[2 * q + 1]);
            precise float r = sqrt_f32(-2.0 * log_f32(u1));
            precise float th = uintBitsToFloat(0x40c90fdbu) * u2;  // float32(2 pi) * u2, as the CPU
            float sn, cs;
            sincos_f32(th, sn, cs);
            z[2 * q] = r * cs;
            z[2 * q + 1] = r * sn;
        }
        for (uint j = 0u; j < cnt; ++j) {
            precise float v = p.a + p.b * z[j];
            y[o + j] = v;
        }
    }
}

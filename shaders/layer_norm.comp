#version 450
#extension GL_GOOGLE_include_directive : require
// Layer norm over the rows of a C-contiguous float32 (or HALF) [rows, n] array (the runtime's fused
// layer_norm, gpucore/runtime/ir/fused.py, and eager native_layer_norm on the device): o = (x - mean) / sqrt(var + eps) [* w] [+ b], with
// PyTorch's biased variance. o may be x itself (in place).
//
// LANES (constant 1, a power of two dividing WG) invocations share a row, WG / LANES rows per
// workgroup. Two passes over the row (mean, then the mean of squared deviations: no
// cancellation as in a one-pass sum of squares), then the write pass. Lanes combine their
// partial sums through shared memory with one barrier per pass, each lane adding its row's LANES
// partials itself: two barriers per workgroup instead of a log2(WG) tree, since barriers are
// what a CPU driver (lavapipe) pays for. LANES = 1 (short rows) has no barrier and no
// shared-memory traffic.
// HAS_WEIGHT / HAS_BIAS (constants 2, 3): whether w / b are bound (else x is bound in their place).
// VEC4 (constant 4): every operand is read and written as vec4 (n and the offsets multiples of
// 4): a quarter of the load instructions, which lavapipe runs as a loop over the lanes each.
// HALF (constant 5) = HALF_F16 / HALF_BF16 (half.glsl): x, w, b, o (and mean, rstd) hold 16-bit
// values, two to a word (offsets in elements; VEC4 off): widened on load, float32 arithmetic,
// each result rounded once and written into its half of the word with atomics (as copy.comp).
// STATS (constant 6): also write each row's mean and 1 / sqrt(var + eps) (native_layer_norm's
// mean and rstd outputs, bindings 4 and 5; bound to o and unwritten otherwise).
#include "common.glsl"
#include "half.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint LANES = 1;
layout(constant_id = 2) const bool HAS_WEIGHT = false;
layout(constant_id = 3) const bool HAS_BIAS = false;
layout(constant_id = 4) const bool VEC4 = false;
layout(constant_id = 5) const int HALF = 0;
layout(constant_id = 6) const bool STATS = false;
const uint ROWS = WG / LANES;
const uint W = VEC4 ? 4u : 1u;  // floats per access

// No restrict: o aliases x when the kernel runs in place.
layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(std430, set = 0, binding = 1) readonly buffer Wt { float w[]; };
layout(std430, set = 0, binding = 1) readonly buffer W4 { vec4 w4[]; };
layout(std430, set = 0, binding = 2) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 2) readonly buffer B4 { vec4 b4[]; };
layout(std430, set = 0, binding = 3) writeonly buffer O { float o[]; };
layout(std430, set = 0, binding = 3) writeonly buffer O4 { vec4 o4[]; };
layout(std430, set = 0, binding = 0) readonly buffer XH { uint xh[]; };
layout(std430, set = 0, binding = 1) readonly buffer WH { uint wh[]; };
layout(std430, set = 0, binding = 2) readonly buffer BH { uint bh[]; };
layout(std430, set = 0, binding = 3) buffer OH { uint oh[]; };
layout(std430, set = 0, binding = 4) buffer MEAN { float mean_f[]; };
layout(std430, set = 0, binding = 4) buffer MEANH { uint mean_h[]; };
layout(std430, set = 0, binding = 5) buffer RSTD { float rstd_f[]; };
layout(std430, set = 0, binding = 5) buffer RSTDH { uint rstd_h[]; };

// Mirrored by kernels/fused.py (layer_norm). Offsets in floats (multiples of 4 with VEC4).
layout(push_constant) uniform Push {
    uint rows;
    uint n;
    uint x_off;
    uint w_off;
    uint b_off;
    uint o_off;
    float eps;
    uint mean_off;  // STATS: element offsets of mean and rstd
    uint rstd_off;
} p;

// Two arrays: the second pass writes its partials while slower lanes may still read the first's.
shared float part_mean[LANES > 1u ? WG : 1u];
shared float part_var[LANES > 1u ? WG : 1u];

// Access k of a row (the floats k * W .. k * W + W - 1) at float offset base; a scalar comes as
// (x, 0, 0, 0). Branches, not ?: (which may load both sides).
vec4 load_x(uint base, uint k) {
    if (VEC4) return x4[base / 4u + k];
    if (HALF != 0) return vec4(half_to_f32(HALF, HALF_AT(xh, base + k)), 0.0, 0.0, 0.0);
    return vec4(x[base + k], 0.0, 0.0, 0.0);
}
vec4 load_w(uint k) {
    if (VEC4) return w4[p.w_off / 4u + k];
    if (HALF != 0) return vec4(half_to_f32(HALF, HALF_AT(wh, p.w_off + k)), 0.0, 0.0, 0.0);
    return vec4(w[p.w_off + k], 0.0, 0.0, 0.0);
}
vec4 load_b(uint k) {
    if (VEC4) return b4[p.b_off / 4u + k];
    if (HALF != 0) return vec4(half_to_f32(HALF, HALF_AT(bh, p.b_off + k)), 0.0, 0.0, 0.0);
    return vec4(b[p.b_off + k], 0.0, 0.0, 0.0);
}

// Element i of a 16-bit buffer = v rounded once: only its own half of the word, with atomics
// (the other half may belong to another invocation's row).
#define STORE_HALF(buf, i, v) { \
    uint sh_ = 16u * ((i) & 1u); \
    atomicAnd(buf[(i) >> 1], ~(0xffffu << sh_)); \
    atomicOr(buf[(i) >> 1], f32_to_half(HALF, v) << sh_); }

// The sum over a row's lanes of each lane's v (uniform control flow: barriers).
float row_sum(float v, uint t, uint first, bool second) {
    if (LANES == 1u) return v;
    if (second) {
        part_var[t] = v;
    } else {
        part_mean[t] = v;
    }
    barrier();
    float s = 0.0;
    for (uint k = 0u; k < LANES; ++k) s += second ? part_var[first + k] : part_mean[first + k];
    return s;
}

void main() {
    uint t = gl_LocalInvocationID.x;
    uint g = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    uint lane = t % LANES;
    uint first = t - lane;  // this row's lane 0
    uint r = g * ROWS + t / LANES;
    // No early return: every invocation must reach the barriers.
    bool live = r < p.rows;
    uint xb = p.x_off + r * p.n;
    uint nk = live ? p.n / W : 0u;  // accesses in the row
    vec4 used = VEC4 ? vec4(1.0) : vec4(1.0, 0.0, 0.0, 0.0);  // the components an access holds

    // Sums of x - c with c = the row's first element: exact differences for rows far from zero
    // (x ~ 300 +- 1), where the float32 mean itself would be off by an ulp of 300, i.e. 1e-4 of
    // the spread. mu is the mean of x - c, small where the row is.
    float c = live ? load_x(xb, 0u).x : 0.0;
    vec4 s4 = vec4(0.0);
    for (uint k = lane; k < nk; k += LANES) s4 += (load_x(xb, k) - c) * used;
    float mu = row_sum(s4.x + s4.y + s4.z + s4.w, t, first, false) / float(p.n);

    vec4 v4 = vec4(0.0);
    for (uint k = lane; k < nk; k += LANES) {
        vec4 d = ((load_x(xb, k) - c) - mu) * used;
        v4 += d * d;
    }
    float v = row_sum(v4.x + v4.y + v4.z + v4.w, t, first, true);
    float rstd = 1.0 / sqrt(v / float(p.n) + p.eps);
    if (STATS && live && lane == 0u) {
        if (HALF != 0) {
            STORE_HALF(mean_h, p.mean_off + r, c + mu);
            STORE_HALF(rstd_h, p.rstd_off + r, rstd);
        } else {
            mean_f[p.mean_off + r] = c + mu;
            rstd_f[p.rstd_off + r] = rstd;
        }
    }

    // In place, each element is read and then written by the same invocation, and every read of
    // the row by other lanes happened before the barrier above.
    uint ob = p.o_off + r * p.n;
    for (uint k = lane; k < nk; k += LANES) {
        vec4 y = ((load_x(xb, k) - c) - mu) * rstd;
        if (HAS_WEIGHT) y *= load_w(k);
        if (HAS_BIAS) y += load_b(k);
        if (VEC4) {
            o4[ob / 4u + k] = y;
        } else if (HALF != 0) {
            STORE_HALF(oh, ob + k, y.x);
        } else {
            o[ob + k] = y.x;
        }
    }
}

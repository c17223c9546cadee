#version 450
#extension GL_GOOGLE_include_directive : require
// Fused softmax + cross-entropy over [n, c] float32 (or HALF) logits and int64 class targets.
//
// BACKWARD (constant 1) = 0: lse[i] = logsumexp(logits[i]); loss[i] = lse[i] - logits[i, t[i]],
//   0 where t[i] == ignore_index. One workgroup per row, or one invocation per row when
//   SERIAL (constant 2) = 1 (short rows).
// BACKWARD = 1: out[i, j] = g[i] (exp(logits[i, j] - lse[i]) - (j == t[i])), 0 on ignored rows;
//   one invocation per element.
// HALF (constant 3) = HALF_F16 / HALF_BF16 (half.glsl): logits, lse, loss, g and out hold 16-bit
//   values, two to a word (offsets in elements): widened on load, float32 arithmetic, each result
//   rounded once and written into its half of the word with atomics (as copy.comp).
// Targets are int64 read as two uint32 words (low, high). A target outside [0, c) that is not
// ignore_index never indexes memory: its loss (forward) and its gradient row (backward) are NaN.
//
// Two variants (tools/build_shaders.py's VARIANTS): cross_entropy.spv with SUBGROUP=0 (shared-memory
// workgroup reductions, every device) and cross_entropy_sg.spv with SUBGROUP=1 (subgroup reductions, for
// devices with subgroup basic + vote + arithmetic in compute shaders).
#ifndef SUBGROUP
#error "SUBGROUP must be defined: compile through tools/build_shaders.py (VARIANTS)"
#endif
#if SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif
#include "common.glsl"
#include "wg_reduce.glsl"
#include "half.glsl"

layout(constant_id = 1) const int BACKWARD = 0;
layout(constant_id = 2) const int SERIAL = 0;
layout(constant_id = 3) const int HALF = 0;

layout(std430, set = 0, binding = 0) readonly buffer L { float logits_f[]; };
layout(std430, set = 0, binding = 0) readonly buffer LW { uint logits_w[]; };
layout(std430, set = 0, binding = 1) readonly buffer T { uint tgt[]; };
layout(std430, set = 0, binding = 2) buffer LSE { float lse_f[]; };      // forward: out
layout(std430, set = 0, binding = 2) buffer LSEW { uint lse_w[]; };
layout(std430, set = 0, binding = 3) buffer G { float lg_f[]; };         // forward: loss out; backward: grad in
layout(std430, set = 0, binding = 3) buffer GW { uint lg_w[]; };
layout(std430, set = 0, binding = 4) writeonly buffer O { float o_f[]; };  // backward: out
layout(std430, set = 0, binding = 4) buffer OW { uint o_w[]; };

// Mirrored by kernels/nn.py (_xent_push).
layout(push_constant) uniform Push {
    uint n;
    uint c;
    uint l_off;
    uint t_off;   // in 32-bit words
    uint lse_off;
    uint g_off;
    uint o_off;
    uint ign_lo;
    uint ign_hi;
} p;

#define LOAD(f, w, i) (HALF != 0 ? half_to_f32(HALF, HALF_AT(w, i)) : f[i])
float logit(uint i) { return LOAD(logits_f, logits_w, i); }

// out[i] = v, rounded once to the half type (its own half of the word, with atomics)
#define STORE(f, w, i, v) { \
    if (HALF == 0) { f[i] = v; } else { \
        uint sh_ = 16u * ((i) & 1u); \
        atomicAnd(w[(i) >> 1], ~(0xffffu << sh_)); \
        atomicOr(w[(i) >> 1], f32_to_half(HALF, v) << sh_); } }

// 0: a valid class, 1: ignored, 2: out of range
int target_kind(uint i, out uint t) {
    uint lo = tgt[p.t_off + 2u * i];
    uint hi = tgt[p.t_off + 2u * i + 1u];
    t = lo;
    if (lo == p.ign_lo && hi == p.ign_hi) return 1;
    return (hi == 0u && lo < p.c) ? 0 : 2;
}

void finish_row(uint i, float m, float s) {
    uint t;
    int kind = target_kind(i, t);
    float ls = log(s);
    STORE(lse_f, lse_w, p.lse_off + i, m + ls);
    float loss = 0.0;
    if (kind == 0) loss = (m - logit(p.l_off + i * p.c + t)) + ls;
    if (kind == 2) loss = f_nan();
    STORE(lg_f, lg_w, p.g_off + i, loss);
}

void main() {
    if (BACKWARD == 1) {
        uint e = global_index();
        if (e >= p.n * p.c) return;
        uint i = e / p.c;
        uint j = e - i * p.c;
        uint t;
        int kind = target_kind(i, t);
        float r = 0.0;
        if (kind == 0) {
            float gi = LOAD(lg_f, lg_w, p.g_off + i);
            r = gi * exp(logit(p.l_off + e) - LOAD(lse_f, lse_w, p.lse_off + i));
            if (j == t) r -= gi;
        } else if (kind == 2) {
            r = f_nan();
        }
        STORE(o_f, o_w, p.o_off + e, r);
    } else if (SERIAL == 1) {
        uint i = global_index();
        if (i >= p.n) return;
        uint base = p.l_off + i * p.c;
        float m = -f_inf(), s = 0.0, c = 0.0;
        for (uint j = 0u; j < p.c; ++j) {
            float v = logit(base + j);
            m = (v > m || is_nan(v)) ? v : m;
        }
        for (uint j = 0u; j < p.c; ++j) kahan_add(s, c, exp(logit(base + j) - m));
        finish_row(i, m, s - c);
    } else {
        uint i = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
        if (i >= p.n) return;  // whole workgroup
        uint base = p.l_off + i * p.c;
        uint t = gl_LocalInvocationID.x;
        float m = -f_inf(), s = 0.0, c = 0.0;
        for (uint j = t; j < p.c; j += WG) {
            float v = logit(base + j);
            m = (v > m || is_nan(v)) ? v : m;
        }
        m = wg_ext(m, true);
        for (uint j = t; j < p.c; j += WG) kahan_add(s, c, exp(logit(base + j) - m));
        s = wg_sum(s - c);
        if (t == 0u) finish_row(i, m, s);
    }
}

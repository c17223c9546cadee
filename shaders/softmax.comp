#version 450
#extension GL_GOOGLE_include_directive : require
// Softmax / log-softmax forward and backward over the middle axis of C-contiguous
// [outer, n, inner] float32 arrays.
//
// OP (constant 1; codes from cpu/opcodes.def): SOFTMAX, LOG_SOFTMAX (x -> out);
//                  SOFTMAX_BACKWARD  out = y (g - sum(g y)),
//                  LOG_SOFTMAX_BACKWARD  out = g - exp(y) sum(g)  (x binding = g).
// MODE (constant 2): FUSED: stats and output in one dispatch (nchunks == 1);
//                    STATS: per chunk, write partial stats to ST[outer, nchunks, inner, 2];
//                    APPLY: combine a row's partial stats, write the chunk's output.
//   Forward stats are (m, s) = (NaN-propagating max, sum exp(x - m)); they combine as
//   M = max m_c, S = sum s_c exp(m_c - M) (chunks with m_c = -inf add 0). Backward stats are sums.
// COLUMNS (constant 3): 0 = rows (inner == 1), one workgroup per (row, chunk); 1 = one invocation
//   per (outer, chunk, inner) column with serial loops.
// HALF (constant 4) = HALF_F16 / HALF_BF16 (half.glsl): x, y and out hold 16-bit values, two to a
//   word (offsets in elements); each value is widened on load, the arithmetic and the stats are
//   float32 and each result is rounded once on store, written into its own half of the word
//   with atomics (neighbouring elements belong to other invocations), as copy.comp does.
// The max is subtracted before exp (stable for rows like [1000, 1000, 1000]); sums are Kahan.
//
// Two variants (tools/build_shaders.py's VARIANTS): softmax.spv with SUBGROUP=0 (shared-memory
// workgroup reductions, every device) and softmax_sg.spv with SUBGROUP=1 (subgroup reductions, for
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

layout(constant_id = 1) const int OP = 0;
layout(constant_id = 2) const int MODE = 0;
layout(constant_id = 3) const int COLUMNS = 0;
layout(constant_id = 4) const int HALF = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { float x_f[]; };
layout(std430, set = 0, binding = 0) readonly buffer XW { uint x_w[]; };
layout(std430, set = 0, binding = 1) readonly buffer Y { float y_f[]; };
layout(std430, set = 0, binding = 1) readonly buffer YW { uint y_w[]; };
layout(std430, set = 0, binding = 2) writeonly buffer O { float o_f[]; };
layout(std430, set = 0, binding = 2) buffer OW { uint o_w[]; };
layout(std430, set = 0, binding = 3) buffer ST { float st[]; };

// Mirrored by kernels/nn.py (_softmax_pass).
layout(push_constant) uniform Push {
    uint outer;
    uint n;
    uint inner;
    uint chunk;
    uint nchunks;
    uint x_off;
    uint y_off;
    uint o_off;
    uint st_off;
} p;

#define GC_SOFTMAX_OP(NAME, value) const int NAME = value;
#define GC_SOFTMAX_MODE(NAME, value) const int NAME = value;
#include "opcodes.def"
#undef GC_SOFTMAX_OP
#undef GC_SOFTMAX_MODE
const bool FORWARD = OP < SOFTMAX_BACKWARD;  // the forward codes come first

float load_x(uint i) { return HALF != 0 ? half_to_f32(HALF, HALF_AT(x_w, i)) : x_f[i]; }
float load_y(uint i) { return HALF != 0 ? half_to_f32(HALF, HALF_AT(y_w, i)) : y_f[i]; }
#define x_at(e) load_x(p.x_off + (e))

void store(uint i, float v) {
    if (HALF == 0) {
        o_f[i] = v;
        return;
    }
    uint sh = 16u * (i & 1u);
    atomicAnd(o_w[i >> 1], ~(0xffffu << sh));
    atomicOr(o_w[i >> 1], f32_to_half(HALF, v) << sh);
}

float term(uint e) {  // the summand of the backward stats
    return OP == SOFTMAX_BACKWARD ? x_at(e) * load_y(p.y_off + e) : x_at(e);
}

float result(uint e, float m, float s) {
    if (OP == SOFTMAX) return exp(x_at(e) - m) * (1.0 / s);
    if (OP == LOG_SOFTMAX) return (x_at(e) - m) - log(s);
    float yv = load_y(p.y_off + e);
    if (OP == SOFTMAX_BACKWARD) return yv * (x_at(e) - s);
    return x_at(e) - exp(yv) * s;
}

float max_step(float m, float v) { return (v > m || is_nan(v)) ? v : m; }

void rows_main() {
    uint g = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (g >= p.outer * p.nchunks) return;  // whole workgroup: barriers stay uniform
    uint t = gl_LocalInvocationID.x;
    uint r = g / p.nchunks;
    uint start = (g - r * p.nchunks) * p.chunk;
    uint end = min(p.n, start + p.chunk);
    uint base = r * p.n;
    float m = 0.0, s = 0.0, c = 0.0;
    if (MODE != APPLY) {
        if (FORWARD) {
            m = -f_inf();
            for (uint j = start + t; j < end; j += WG) m = max_step(m, x_at(base + j));
            m = wg_ext(m, true);
            for (uint j = start + t; j < end; j += WG) kahan_add(s, c, exp(x_at(base + j) - m));
        } else {
            for (uint j = start + t; j < end; j += WG) kahan_add(s, c, term(base + j));
        }
        s = wg_sum(s - c);
        if (MODE == STATS) {
            if (t == 0u) {
                st[p.st_off + 2u * g] = m;
                st[p.st_off + 2u * g + 1u] = s;
            }
            return;
        }
    } else {
        uint sb = p.st_off + 2u * r * p.nchunks;
        if (FORWARD) {
            m = -f_inf();
            for (uint k = t; k < p.nchunks; k += WG) m = comb_ext(m, st[sb + 2u * k], true);
            m = wg_ext(m, true);
            for (uint k = t; k < p.nchunks; k += WG) {
                float mk = st[sb + 2u * k];
                if (mk != -f_inf()) s += st[sb + 2u * k + 1u] * exp(mk - m);
            }
        } else {
            for (uint k = t; k < p.nchunks; k += WG) s += st[sb + 2u * k + 1u];
        }
        s = wg_sum(s);
    }
    for (uint j = start + t; j < end; j += WG) store(p.o_off + base + j, result(base + j, m, s));
}

void columns_main() {
    uint gid = global_index();
    if (gid >= p.outer * p.nchunks * p.inner) return;
    uint oc = gid / p.inner;
    uint i = gid - oc * p.inner;
    uint r = oc / p.nchunks;
    uint start = (oc - r * p.nchunks) * p.chunk;
    uint end = min(p.n, start + p.chunk);
    uint base = r * p.n * p.inner + i;
    float m = 0.0, s = 0.0, c = 0.0;
    if (MODE != APPLY) {
        if (FORWARD) {
            m = -f_inf();
            for (uint j = start; j < end; ++j) m = max_step(m, x_at(base + j * p.inner));
            for (uint j = start; j < end; ++j) kahan_add(s, c, exp(x_at(base + j * p.inner) - m));
        } else {
            for (uint j = start; j < end; ++j) kahan_add(s, c, term(base + j * p.inner));
        }
        s -= c;
        if (MODE == STATS) {
            st[p.st_off + 2u * gid] = m;
            st[p.st_off + 2u * gid + 1u] = s;
            return;
        }
    } else {
        uint sb = r * p.nchunks * p.inner + i;  // stats of chunk k: sb + k * inner
        if (FORWARD) {
            m = -f_inf();
            for (uint k = 0u; k < p.nchunks; ++k) m = comb_ext(m, st[p.st_off + 2u * (sb + k * p.inner)], true);
        }
        for (uint k = 0u; k < p.nchunks; ++k) {
            uint q = p.st_off + 2u * (sb + k * p.inner);
            if (!FORWARD) {
                kahan_add(s, c, st[q + 1u]);
            } else if (st[q] != -f_inf()) {
                kahan_add(s, c, st[q + 1u] * exp(st[q] - m));
            }
        }
        s -= c;
    }
    for (uint j = start; j < end; ++j) {
        uint e = base + j * p.inner;
        store(p.o_off + e, result(e, m, s));
    }
}

void main() {
    if (COLUMNS == 0) {
        rows_main();
    } else {
        columns_main();
    }
}

#version 450
#extension GL_GOOGLE_include_directive : require
// Reductions over the middle axis of a C-contiguous [outer, n, inner] float32 array.
//
// OP (constant 1): SUM (mean: flag F_MEAN divides by p.denom), MAX, MIN (cpu/opcodes.def).
// ARG (constant 2): 1 also tracks the index of the extreme (first NaN, else first extreme).
// HALF (constant 4): HALF_F16 / HALF_BF16 (half.glsl): x holds 16-bit values, two to a word,
//   widened to float32 on load (accumulation stays float32; partials and values are float32).
// COLUMNS (constant 3): 0 = rows (inner == 1): one workgroup per (row, chunk), strided loads and
//   a workgroup reduction; 1 = one invocation per (outer, chunk, inner) column, serial loop.
//
// A pass reduces chunks of `chunk` elements along n into partials laid out [outer, nchunks,
// inner]; the host repeats passes on the partials until nchunks == 1. Later passes read the
// partials' indices (F_IDX_IN) instead of the element position. Indices are written as uint32
// (partials) or as int64 = (low word, 0) (F_IDX64, the final output).
//
// Two variants (tools/build_shaders.py's VARIANTS): reduce.spv with SUBGROUP=0 (shared-memory
// workgroup reductions, every device) and reduce_sg.spv with SUBGROUP=1 (subgroup reductions, for
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
layout(constant_id = 2) const int ARG = 0;
layout(constant_id = 3) const int COLUMNS = 0;
layout(constant_id = 4) const int HALF = 0;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 0) readonly buffer XW { uint xw[]; };
layout(std430, set = 0, binding = 1) writeonly buffer V { float vout[]; };
layout(std430, set = 0, binding = 2) readonly buffer II { uint iin[]; };
layout(std430, set = 0, binding = 3) writeonly buffer IO { uint iout[]; };

// Mirrored by kernels/reduce.py (_reduce_pass).
layout(push_constant) uniform Push {
    uint outer;
    uint n;
    uint inner;
    uint chunk;
    uint nchunks;
    uint x_off;
    uint v_off;
    uint ii_off;
    uint io_off;
    uint flags;
    float denom;
} p;

// OP's codes SUM, MAX, MIN and the flags F_* (cpu/opcodes.def; kernels/reduce.py reads the same).
#define GC_REDUCE_OP(NAME, value) const int NAME = value;
#define GC_REDUCE_FLAG(NAME, value) const uint NAME = uint(value);
#include "opcodes.def"
#undef GC_REDUCE_OP
#undef GC_REDUCE_FLAG

void acc_add(inout float s, inout float c, inout uint bi, float v, uint id) {
    if (OP == SUM) {
        kahan_add(s, c, v);
    } else if (ARG == 1) {
        if (bi == NO_INDEX || (!is_nan(s) && (is_nan(v) || (OP == MAX ? v > s : v < s)))) {
            s = v;
            bi = id;
        }
    } else if (is_nan(v) || (OP == MAX ? v > s : v < s)) {
        s = v;  // once s is NaN nothing compares greater, so it stays
    }
}

void write_out(uint q, float s, uint bi) {
    if ((p.flags & F_VALS) != 0u) vout[p.v_off + q] = (p.flags & F_MEAN) != 0u ? s / p.denom : s;
    if ((p.flags & F_IDX) != 0u) {
        if ((p.flags & F_IDX64) != 0u) {
            iout[p.io_off + 2u * q] = bi;
            iout[p.io_off + 2u * q + 1u] = 0u;
        } else {
            iout[p.io_off + q] = bi;
        }
    }
}

float load_x(uint i) {
    return HALF != 0 ? half_to_f32(HALF, HALF_AT(xw, i)) : x[i];
}

void main() {
    float s = OP == SUM ? 0.0 : (OP == MAX ? -f_inf() : f_inf());
    float c = 0.0;
    uint bi = NO_INDEX;
    bool idx_in = (p.flags & F_IDX_IN) != 0u;
    if (COLUMNS == 0) {
        uint g = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
        if (g >= p.outer * p.nchunks) return;  // whole workgroup: barriers stay uniform
        uint o = g / p.nchunks;
        uint start = (g - o * p.nchunks) * p.chunk;
        uint end = min(p.n, start + p.chunk);
        uint base = o * p.n;
        for (uint j = start + gl_LocalInvocationID.x; j < end; j += WG) {
            acc_add(s, c, bi, load_x(p.x_off + base + j), idx_in ? iin[p.ii_off + base + j] : j);
        }
        if (OP == SUM) {
            s = wg_sum(s - c);
        } else if (ARG == 1) {
            wg_arg(s, bi, OP == MAX);
        } else {
            s = wg_ext(s, OP == MAX);
        }
        if (gl_LocalInvocationID.x == 0u) write_out(g, s, bi);
    } else {
        uint gid = global_index();
        if (gid >= p.outer * p.nchunks * p.inner) return;
        uint oc = gid / p.inner;
        uint i = gid - oc * p.inner;
        uint o = oc / p.nchunks;
        uint start = (oc - o * p.nchunks) * p.chunk;
        uint end = min(p.n, start + p.chunk);
        uint base = o * p.n * p.inner + i;
        for (uint j = start; j < end; ++j) {
            uint e = base + j * p.inner;
            acc_add(s, c, bi, load_x(p.x_off + e), idx_in ? iin[p.ii_off + e] : j);
        }
        write_out(gid, OP == SUM ? s - c : s, bi);
    }
}

#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
// Batched GEMM with a fused epilogue, for float32:
//     C[z] = act(alpha * A[z] @ B[z] + beta * X[z] + bias[z])        z = gl_WorkGroupID.z
// A is M x K, B is K x N, C is M x N with unit column stride; every other stride (rows, columns,
// batch; 0 for broadcast batches, transposed views) comes in push constants. X (the previous C,
// copied by the host when beta != 0) and bias are any arrays broadcast to C through their strides
// (a Linear bias has sbias_m = 0, sbias_n = 1).
//
// One family, two variants chosen by specialization constant VARIANT (kernels/gemm.py picks them
// per device and shape):
//   0 REGBLOCK  for CPU-type devices (lavapipe). No shared memory and no barriers (both are slow
//               when a CPU emulates them). A subgroup of SG lanes computes TM rows x 4*SG*TN
//               columns; each lane owns 4*TN columns (TN vec4 accumulators per row). Per chunk of
//               SG k-steps every lane loads ONE A element per row (its own k) and the values are
//               handed round with subgroupShuffle, which lavapipe lowers to a register permute,
//               while a storage-buffer load costs ~8 cycles per lane there. B is read as vec4
//               along n (BMODE 2) or along k (BMODE 3) where aligned, else as scalars. C rows
//               must be 16-byte aligned and padded to a multiple of 4 floats (raw vec4 stores).
//   1 TILED     for GPUs. A BM x BN block per workgroup of (BM/TM)*(BN/TN) invocations; BK-deep
//               tiles of A and B staged in shared memory (vec4 global loads where aligned, AMODE/
//               BMODE 2-3), TM x TN register micro-tile per invocation, strided over the block so
//               shared reads are conflict-free and global stores coalesce.
// Edges: out-of-range rows/columns are clamped on load (computed, never stored); k >= K is zero.
// The epilogue (alpha, beta, bias, activation) runs after the raw tile is stored, see epilogue().
//
// Built twice (tools/build_shaders.py's VARIANTS): gemm.spv with HALF=0 (float32 A and B) and
// gemm_half.spv with HALF=1: A and B hold 16-bit values (HALF_KIND, constant 10: half.glsl's
// HALF_F16 or HALF_BF16), two to a word, widened to float32 on load; accumulation, C, X and bias
// stay float32 (the host rounds C to the half type afterwards, as the CPU computes it). Offsets
// and strides are in elements either way; a vec4 load of halves is one uvec2.
#ifndef HALF
#error "HALF must be defined: compile through tools/build_shaders.py (VARIANTS)"
#endif
#include "common.glsl"
#include "activation.glsl"
#include "half.glsl"

layout(constant_id = 1) const uint VARIANT = 0u;
layout(constant_id = 2) const uint BM = 4u;     // TILED: block rows
layout(constant_id = 3) const uint BN = 4u;     // TILED: block columns
layout(constant_id = 4) const uint BK = 4u;     // TILED: k-depth of a shared tile
layout(constant_id = 5) const uint TM = 4u;     // rows per invocation (REGBLOCK: per subgroup)
layout(constant_id = 6) const uint TN = 1u;     // TILED: columns per invocation; REGBLOCK: vec4s
layout(constant_id = 7) const uint AMODE = 0u;  // 0 scalar k-fast, 1 scalar m-fast, 2 vec4 k, 3 vec4 m
layout(constant_id = 8) const uint BMODE = 0u;  // 0 scalar n-fast, 1 scalar k-fast, 2 vec4 n, 3 vec4 k
layout(constant_id = 9) const uint SG = 8u;     // REGBLOCK: subgroup size (a multiple of 4)

#if HALF
layout(constant_id = 10) const int HALF_KIND = HALF_F16;
layout(std430, set = 0, binding = 0) readonly buffer A { uint a[]; };
layout(std430, set = 0, binding = 0) readonly buffer A4 { uvec2 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uint b[]; };
layout(std430, set = 0, binding = 1) readonly buffer B4 { uvec2 b4[]; };
float h2f(uint h) { return half_to_f32(HALF_KIND, h); }
vec4 h4(uvec2 w) { return vec4(h2f(w.x & 0xffffu), h2f(w.x >> 16), h2f(w.y & 0xffffu), h2f(w.y >> 16)); }
float load_a(uint i) { return h2f(HALF_AT(a, i)); }
vec4 load_a4(uint q) { return h4(a4[q]); }
float load_b(uint i) { return h2f(HALF_AT(b, i)); }
vec4 load_b4(uint q) { return h4(b4[q]); }
#else
layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };
layout(std430, set = 0, binding = 0) readonly buffer A4 { vec4 a4[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };
layout(std430, set = 0, binding = 1) readonly buffer B4 { vec4 b4[]; };
float load_a(uint i) { return a[i]; }
vec4 load_a4(uint q) { return a4[q]; }
float load_b(uint i) { return b[i]; }
vec4 load_b4(uint q) { return b4[q]; }
#endif
layout(std430, set = 0, binding = 2) buffer C { float c[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C4 { vec4 c4[]; };
layout(std430, set = 0, binding = 3) readonly buffer Bias { float bias[]; };
layout(std430, set = 0, binding = 4) readonly buffer X { float x[]; };

// Mirrored by gemm.py's _push_gemm (25 words).
layout(push_constant) uniform Push {
    uint M, N, K;
    uint a_off, b_off, c_off, bias_off, x_off;
    uint sa_m, sa_k, sa_b;
    uint sb_k, sb_n, sb_b;
    uint sc_m, sc_b;
    uint sbias_m, sbias_n, sbias_b;
    uint sx_m, sx_n, sx_b;
    uint flags;          // FLAG_* (cpu/opcodes.def); from bit ACT_SHIFT: activation (ACT_*)
    float alpha;
    float beta;
} p;

#define GC_GEMM_FLAGS(NAME, value) const uint NAME = uint(value);  // FLAG_*, ACT_SHIFT
#include "opcodes.def"
#undef GC_GEMM_FLAGS
#define GC_GEMM_VARIANT(NAME, value) const uint NAME = uint(value);  // REGBLOCK, TILED
#define GC_GEMM_A_MODE(NAME, value) const uint NAME = uint(value);    // A_SCALAR_K ... A_VEC4_M
#define GC_GEMM_B_MODE(NAME, value) const uint NAME = uint(value);    // B_SCALAR_N ... B_VEC4_K
#include "opcodes.def"
#undef GC_GEMM_VARIANT
#undef GC_GEMM_A_MODE
#undef GC_GEMM_B_MODE

// The epilogue runs after the raw tile is stored, as one rolled loop over the elements this
// invocation wrote: unrolled per element it would multiply the code (and lavapipe's pipeline
// creation time, which grows with every memory access in the shader) by the tile size.
// Rows m0 + i * mstep (i < rows), columns n0 + j * nstep + q (j < cols, q < quad).
void epilogue(uint z, uint m0, uint mstep, uint rows, uint n0, uint nstep, uint cols, uint quad) {
    if ((p.flags & FLAG_EPILOGUE) == 0u) return;
    uint act = p.flags >> int(ACT_SHIFT);  // int: the same SPIR-V as the literal 4 it replaced
    [[dont_unroll]] for (uint i = 0u; i < rows; ++i) {
        uint m = m0 + i * mstep;
        [[dont_unroll]] for (uint j = 0u; j < cols * quad; ++j) {
            uint n = n0 + (j / quad) * nstep + j % quad;
            if (m < p.M && n < p.N) {
                uint ci = p.c_off + z * p.sc_b + m * p.sc_m + n;
                float v = p.alpha * c[ci];
                if ((p.flags & FLAG_BETA) != 0u)
                    v += p.beta * x[p.x_off + z * p.sx_b + m * p.sx_m + n * p.sx_n];
                if ((p.flags & FLAG_BIAS) != 0u)
                    v += bias[p.bias_off + z * p.sbias_b + m * p.sbias_m + n * p.sbias_n];
                c[ci] = activate(act, v);
            }
        }
    }
}

// ----------------------------------------------------------------------------- REGBLOCK
void main_regblock() {
    const uint COLS = 4u * SG * TN;     // columns per subgroup
    const uint UN = BMODE == B_VEC4_K ? 4u : 1u;  // k-steps unrolled per iteration of the rolled loop
    uint lane = gl_SubgroupInvocationID;
    uint z = gl_WorkGroupID.z;
    uint row0 = (gl_WorkGroupID.y * gl_NumSubgroups + gl_SubgroupID) * TM;
    uint col0 = gl_WorkGroupID.x * COLS + 4u * lane;
    uint aoff = p.a_off + z * p.sa_b;
    uint boff = p.b_off + z * p.sb_b;
    uint K1 = p.K - 1u;

    uint ra[TM];                        // A row starts (clamped rows)
    [[unroll]] for (uint i = 0u; i < TM; ++i) ra[i] = aoff + min(row0 + i, p.M - 1u) * p.sa_m;
    uint cb[4u * TN];                   // B column starts at k = 0 (clamped columns)
    [[unroll]] for (uint j = 0u; j < TN; ++j) {
        [[unroll]] for (uint q = 0u; q < 4u; ++q) {
            uint n = col0 + 4u * SG * j + q;
            // vec4-along-n loads start at a clamped quad (N % 4 == 0 there)
            cb[4u * j + q] = BMODE == B_VEC4_N ? boff + min(n, p.N - 4u)
                                         : boff + min(n, p.N - 1u) * p.sb_n;
        }
    }
    vec4 acc[TM * TN];
    [[unroll]] for (uint i = 0u; i < TM * TN; ++i) acc[i] = vec4(0.0);

    for (uint k0 = 0u; k0 < p.K; k0 += SG) {
        // this lane's A element of every row: A[row][k0 + lane], zero past K
        uint kl = min(k0 + lane, K1) * p.sa_k;
        bool kin = k0 + lane < p.K;
        float av[TM];
        [[unroll]] for (uint i = 0u; i < TM; ++i) av[i] = mix(0.0, load_a(ra[i] + kl), kin);
        // The k-steps of the chunk stay a rolled loop: unrolling them multiplies lavapipe's
        // pipeline creation time (seconds) and measured no faster; the shuffle index may vary.
        [[dont_unroll]] for (uint k1 = 0u; k1 < SG; k1 += UN) {
            vec4 bq[4u * TN];           // BMODE 3: 4 k-values of each column, as one vec4
            if (BMODE == B_VEC4_K) {
                uint kq = min(k0 + k1, p.K - 4u);
                [[unroll]] for (uint cc = 0u; cc < 4u * TN; ++cc) bq[cc] = load_b4((cb[cc] + kq) >> 2);
            }
            [[unroll]] for (uint u = 0u; u < UN; ++u) {
                uint kk = k1 + u;
                uint kc = min(k0 + kk, K1);
                bool kv = k0 + kk < p.K;
                vec4 bv[TN];
                [[unroll]] for (uint j = 0u; j < TN; ++j) {
                    vec4 v;
                    if (BMODE == B_VEC4_N) {
                        v = load_b4((cb[4u * j] + kc * p.sb_k) >> 2);
                    } else if (BMODE == B_VEC4_K) {
                        v = vec4(bq[4u * j][u], bq[4u * j + 1u][u], bq[4u * j + 2u][u],
                                 bq[4u * j + 3u][u]);
                    } else {
                        uint ko = kc * p.sb_k;
                        v = vec4(load_b(cb[4u * j] + ko), load_b(cb[4u * j + 1u] + ko),
                                 load_b(cb[4u * j + 2u] + ko), load_b(cb[4u * j + 3u] + ko));
                    }
                    bv[j] = mix(vec4(0.0), v, bvec4(kv));
                }
                [[unroll]] for (uint i = 0u; i < TM; ++i) {
                    vec4 s = vec4(subgroupShuffle(av[i], kk));
                    [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i * TN + j] = fma(s, bv[j], acc[i * TN + j]);
                }
            }
        }
    }

    // Raw tile out as vec4 rows (C rows are padded to a multiple of 4: the host guarantees it).
    [[unroll]] for (uint i = 0u; i < TM; ++i) {
        uint m = row0 + i;
        [[unroll]] for (uint j = 0u; j < TN; ++j) {
            uint n = col0 + 4u * SG * j;
            if (m < p.M && n < p.N) c4[(p.c_off + z * p.sc_b + m * p.sc_m + n) >> 2] = acc[i * TN + j];
        }
    }
    epilogue(z, row0, 1u, TM, col0, 4u * SG, TN, 4u);
}

// ----------------------------------------------------------------------------- TILED
shared float As[BK * BM];   // As[k * BM + m]
shared float Bs[BK * BN];   // Bs[k * BN + n]

void load_tiles(uint aoff, uint boff, uint bm, uint bn, uint k0) {
    const uint WG = (BM / TM) * (BN / TN);
    uint tid = gl_LocalInvocationIndex;
    if (AMODE == A_VEC4_K) {              // vec4 along k (A row-major, K % 4 == 0)
        for (uint e = tid; e < BM * (BK / 4u); e += WG) {
            uint mm = e / (BK / 4u), kq = 4u * (e % (BK / 4u));
            uint m = bm + mm, k = k0 + kq;
            vec4 v = vec4(0.0);
            if (m < p.M && k < p.K) v = load_a4((aoff + m * p.sa_m + k) >> 2);
            As[kq * BM + mm] = v.x; As[(kq + 1u) * BM + mm] = v.y;
            As[(kq + 2u) * BM + mm] = v.z; As[(kq + 3u) * BM + mm] = v.w;
        }
    } else if (AMODE == A_VEC4_M) {       // vec4 along m (A transposed, M % 4 == 0)
        for (uint e = tid; e < (BM / 4u) * BK; e += WG) {
            uint kk = e / (BM / 4u), mq = 4u * (e % (BM / 4u));
            uint m = bm + mq, k = k0 + kk;
            vec4 v = vec4(0.0);
            if (m < p.M && k < p.K) v = load_a4((aoff + k * p.sa_k + m) >> 2);
            As[kk * BM + mq] = v.x; As[kk * BM + mq + 1u] = v.y;
            As[kk * BM + mq + 2u] = v.z; As[kk * BM + mq + 3u] = v.w;
        }
    } else {
        for (uint e = tid; e < BM * BK; e += WG) {
            uint mm = AMODE == A_SCALAR_M ? e % BM : e / BK;
            uint kk = AMODE == A_SCALAR_M ? e / BM : e % BK;
            uint m = bm + mm, k = k0 + kk;
            As[kk * BM + mm] = (m < p.M && k < p.K) ? load_a(aoff + m * p.sa_m + k * p.sa_k) : 0.0;
        }
    }
    if (BMODE == B_VEC4_N) {              // vec4 along n (B row-major, N % 4 == 0)
        for (uint e = tid; e < BK * (BN / 4u); e += WG) {
            uint kk = e / (BN / 4u), nq = 4u * (e % (BN / 4u));
            uint n = bn + nq, k = k0 + kk;
            vec4 v = vec4(0.0);
            if (n < p.N && k < p.K) v = load_b4((boff + k * p.sb_k + n) >> 2);
            Bs[kk * BN + nq] = v.x; Bs[kk * BN + nq + 1u] = v.y;
            Bs[kk * BN + nq + 2u] = v.z; Bs[kk * BN + nq + 3u] = v.w;
        }
    } else if (BMODE == B_VEC4_K) {       // vec4 along k (B transposed, K % 4 == 0)
        for (uint e = tid; e < BN * (BK / 4u); e += WG) {
            uint nn = e / (BK / 4u), kq = 4u * (e % (BK / 4u));
            uint n = bn + nn, k = k0 + kq;
            vec4 v = vec4(0.0);
            if (n < p.N && k < p.K) v = load_b4((boff + n * p.sb_n + k) >> 2);
            Bs[kq * BN + nn] = v.x; Bs[(kq + 1u) * BN + nn] = v.y;
            Bs[(kq + 2u) * BN + nn] = v.z; Bs[(kq + 3u) * BN + nn] = v.w;
        }
    } else {
        for (uint e = tid; e < BK * BN; e += WG) {
            uint nn = BMODE == B_SCALAR_K ? e / BK : e % BN;
            uint kk = BMODE == B_SCALAR_K ? e % BK : e / BN;
            uint n = bn + nn, k = k0 + kk;
            Bs[kk * BN + nn] = (n < p.N && k < p.K) ? load_b(boff + k * p.sb_k + n * p.sb_n) : 0.0;
        }
    }
}

void main_tiled() {
    const uint NTX = BN / TN, NTY = BM / TM;
    uint tid = gl_LocalInvocationIndex;
    uint tx = tid % NTX, ty = tid / NTX;
    uint z = gl_WorkGroupID.z;
    uint bm = gl_WorkGroupID.y * BM, bn = gl_WorkGroupID.x * BN;
    uint aoff = p.a_off + z * p.sa_b;
    uint boff = p.b_off + z * p.sb_b;
    float acc[TM * TN];
    [[unroll]] for (uint i = 0u; i < TM * TN; ++i) acc[i] = 0.0;
    for (uint k0 = 0u; k0 < p.K; k0 += BK) {
        load_tiles(aoff, boff, bm, bn, k0);
        barrier();
        [[unroll]] for (uint kk = 0u; kk < BK; ++kk) {
            float ar[TM], br[TN];
            [[unroll]] for (uint i = 0u; i < TM; ++i) ar[i] = As[kk * BM + ty + i * NTY];
            [[unroll]] for (uint j = 0u; j < TN; ++j) br[j] = Bs[kk * BN + tx + j * NTX];
            [[unroll]] for (uint i = 0u; i < TM; ++i) {
                [[unroll]] for (uint j = 0u; j < TN; ++j) acc[i * TN + j] = fma(ar[i], br[j], acc[i * TN + j]);
            }
        }
        barrier();
    }
    [[unroll]] for (uint i = 0u; i < TM; ++i) {
        uint m = bm + ty + i * NTY;
        [[unroll]] for (uint j = 0u; j < TN; ++j) {
            uint n = bn + tx + j * NTX;
            if (m < p.M && n < p.N) c[p.c_off + z * p.sc_b + m * p.sc_m + n] = acc[i * TN + j];
        }
    }
    epilogue(z, bm + ty, NTY, TM, bn + tx, NTX, TN, 1u);
}

void main() {
    if (VARIANT == REGBLOCK) {
        main_regblock();
    } else {
        main_tiled();
    }
}

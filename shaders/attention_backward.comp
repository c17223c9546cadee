#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
// Backward of scaled dot-product attention (gpucore/ops/attention.py's
// scaled_dot_product_attention_backward; the C kernel is cpu/attention_backward.c), the
// FlashAttention-2 recurrence: the probabilities are recomputed from q, k and the forward's
// per-row logsumexp lse, so no Sq x Skv matrix reaches memory:
//   P_ij = exp(scale * q_i . k_j + mask_ij - lse_i),  D_i = dO_i . O_i,
//   dS_ij = P_ij (dO_i . v_j - D_i),
//   dq_i = scale * sum_j dS_ij k_j,  dk_j = scale * sum_i dS_ij q_i,  dv_j = sum_i P_ij dO_i.
// Float32 q [B, H, Sq, D], k [B, H / HG, Skv, D], v [B, H / HG, Skv, Dv], O and dO
// [B, H, Sq, Dv], lse [B, H, Sq], all contiguous from their element offsets; the mask (bool
// bytes read from 32-bit words, or additive floats) with any element strides (zero where
// broadcast) over [B, H, Sq, Skv].
//
// Three dispatches of this shader (PASS, constant 6), an invocation per row and no atomics:
//   0: per query row, the pair (lse_i, D_i) into the scratch array t [B, H, Sq, 2] (one
//      binding for both: the device takes 8 bindings per dispatch at most);
//   1: a workgroup per (b, h, tile of WG query rows), an invocation per row: dq_i, walking
//      the row's keys;
//   2: a workgroup per (b, hk, tile of WG key rows) of a key/value head, an invocation per key
//      row: dk_j and dv_j, walking the queries of the HG query heads that share it
//      (grouped-query attention: summed in registers).
// Bindings 6 and 7 serve each pass its own arrays: O and lse (0), dq (1), dk and dv (2).
// A row whose every score is masked (lse = +inf) has P = 0: zero gradients, as PyTorch's safe
// softmax. CAUSAL keeps key j <= query i (top-left aligned). No shared memory, no barriers (what
// a CPU driver such as lavapipe pays most for); register rows are DMAX floats (constant 1, a
// multiple of 4), indexed statically once the loops to DMAX are unrolled.
//
// Two ways to read the walked rows (SHUFFLE, constant 7; kernels/attention.py picks per device,
// as attention.comp): false, every invocation loads every walked row itself; true, lane t of a
// subgroup of SG (constant 8) loads the rows of key (query) j0 + t once and subgroupShuffle
// hands them round (lavapipe runs each load as a per-lane loop and a shuffle as a register
// permute), and VEC4 (constant 9) loads rows as vec4 (D, Dv and every offset multiples of 4).
// Shuffling needs uniform control flow: past-the-end rows are clamped, store nothing, and every
// lane of a workgroup walks the workgroup's whole range (P = 0 outside a row's own).
#include "common.glsl"

layout(constant_id = 1) const uint DMAX = 64;
layout(constant_id = 2) const bool CAUSAL = false;
layout(constant_id = 3) const bool HAS_MASK = false;
layout(constant_id = 4) const bool MASK_BOOL = false;
layout(constant_id = 5) const uint HG = 1;
layout(constant_id = 6) const uint PASS = 0;
layout(constant_id = 7) const bool SHUFFLE = false;
layout(constant_id = 8) const uint SG = 8;
layout(constant_id = 9) const bool VEC4 = false;
const uint D4 = DMAX / 4u;

layout(std430, set = 0, binding = 0) readonly buffer Q { float qm[]; };
layout(std430, set = 0, binding = 0) readonly buffer Q4 { vec4 qm4[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { float km[]; };
layout(std430, set = 0, binding = 1) readonly buffer K4 { vec4 km4[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { float vm[]; };
layout(std430, set = 0, binding = 2) readonly buffer V4 { vec4 vm4[]; };
layout(std430, set = 0, binding = 3) readonly buffer G { float gm[]; };
layout(std430, set = 0, binding = 3) readonly buffer G4 { vec4 gm4[]; };
layout(std430, set = 0, binding = 4) buffer T { float tm[]; };
layout(std430, set = 0, binding = 5) readonly buffer M { float mm[]; };
layout(std430, set = 0, binding = 5) readonly buffer MU { uint mu[]; };
layout(std430, set = 0, binding = 6) buffer A { float am[]; };
layout(std430, set = 0, binding = 7) buffer B { float bm[]; };

// Mirrored by kernels/attention.py (_sdpa_backward): 7 + 7 + 5 words.
layout(push_constant) uniform Push {
    uint nbh;  // B * H (query heads)
    uint h;
    uint sq;
    uint skv;
    uint d;
    uint dv;
    float scale;
    // element offsets of q, k, v, dO, t and of bindings 6, 7 within their bindings
    uint oq, ok, ov, og, ot, oa, ob;
    // the mask: offset and strides along b, h, row, column (elements)
    int moff, msb, msh, msr, msc;
} p;

#define POS_INF uintBitsToFloat(0x7f800000u)
#define NEG_INF uintBitsToFloat(0xff800000u)

// The masked, scaled score of query row i of (b, h) against key j from their raw dot product;
// -inf where the mask or causality drops it or the pair lies past the ends.
float score(float dot_, uint b, uint h, uint i, uint j) {
    if (i >= p.sq || j >= p.skv || (CAUSAL && j > i)) return NEG_INF;
    float s = dot_ * p.scale;
    if (HAS_MASK) {
        uint mi = uint(p.moff + int(b) * p.msb + int(h) * p.msh + int(i) * p.msr + int(j) * p.msc);
        if (MASK_BOOL) {
            if (((mu[mi >> 2] >> (8u * (mi & 3u))) & 0xffu) == 0u) return NEG_INF;
        } else {
            s += mm[mi];
        }
    }
    return s;
}

// P from a score and its row's lse: 0 for a dropped score or a fully masked row.
float prob(float s, float l) { return s == NEG_INF || l == POS_INF ? 0.0 : exp(s - l); }

// Floats 4 * d4 .. 4 * d4 + 3 of the row of q (0), k (1), v (2) or dO (3) at element start,
// len long: 0 past it. Branches, not ?: (which may load both sides).
vec4 load4(uint which, uint start, uint d4, uint len) {
    if (VEC4) {
        if (4u * d4 >= len) return vec4(0.0);
        uint at = (start >> 2) + d4;
        if (which == 0u) return qm4[at];
        if (which == 1u) return km4[at];
        if (which == 2u) return vm4[at];
        return gm4[at];
    }
    vec4 r = vec4(0.0);
    [[unroll]] for (uint e = 0u; e < 4u; ++e) {
        uint d = 4u * d4 + e;
        if (d < len) {
            if (which == 0u) r[e] = qm[start + d];
            else if (which == 1u) r[e] = km[start + d];
            else if (which == 2u) r[e] = vm[start + d];
            else r[e] = gm[start + d];
        }
    }
    return r;
}

// This invocation's walked row (SHUFFLE: the one it loads for its subgroup) or the shared one.
vec4 walked(vec4 mine, vec4 loaded_here, uint jj) {
    return SHUFFLE ? subgroupShuffle(mine, jj) : loaded_here;
}

// Pass 0: (lse_i, D_i) of one query row into t.
void row_stats(uint r) {
    float di = 0.0;
    for (uint d = 0u; d < p.dv; ++d) di += gm[p.og + r * p.dv + d] * am[p.oa + r * p.dv + d];
    tm[p.ot + 2u * r] = bm[p.ob + r];
    tm[p.ot + 2u * r + 1u] = di;
}

// Pass 1: dq of query row i (clamped) of (b, h), tile's rows [i0, i0 + WG).
void query_rows(uint b, uint h, uint i0, uint i) {
    uint ir = min(i, p.sq - 1u);
    uint r = (b * p.h + h) * p.sq + ir;
    uint kvh = b * (p.h / HG) + h / HG;  // the key/value head's index in [B, H / HG]
    uint kb = p.ok + kvh * p.skv * p.d, vb = p.ov + kvh * p.skv * p.dv;
    vec4 qr[D4], gr[D4], acc[D4], kr[D4], vr[D4];
    [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
        qr[d4] = load4(0u, p.oq + r * p.d, d4, p.d);
        gr[d4] = load4(3u, p.og + r * p.dv, d4, p.dv);
        acc[d4] = vec4(0.0);
    }
    float l = tm[p.ot + 2u * r], di = tm[p.ot + 2u * r + 1u];
    // the keys of the tile's last row (SHUFFLE: uniform), or of this row
    uint last = SHUFFLE ? min(i0 + gl_WorkGroupSize.x, p.sq) - 1u : ir;
    uint end = CAUSAL ? min(p.skv, last + 1u) : p.skv;
    uint step = SHUFFLE ? SG : 1u;
    for (uint j0 = 0u; j0 < end; j0 += step) {
        uint jl = min(j0 + (SHUFFLE ? gl_SubgroupInvocationID : 0u), p.skv - 1u);
        [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
            kr[d4] = load4(1u, kb + jl * p.d, d4, p.d);
            vr[d4] = load4(2u, vb + jl * p.dv, d4, p.dv);
        }
        [[unroll]] for (uint jj = 0u; jj < (SHUFFLE ? SG : 1u); ++jj) {
            vec4 kk[D4];
            float dot_ = 0.0, dp = 0.0;
            [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
                if (4u * d4 >= p.d && 4u * d4 >= p.dv) break;
                kk[d4] = walked(kr[d4], kr[d4], jj);
                dot_ += dot(qr[d4], kk[d4]);
                dp += dot(gr[d4], walked(vr[d4], vr[d4], jj));
            }
            float ds = prob(score(dot_, b, h, ir, j0 + jj), l) * (dp - di);
            [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
                if (4u * d4 >= p.d) break;
                acc[d4] += ds * kk[d4];
            }
        }
    }
    if (i >= p.sq) return;
    [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
        [[unroll]] for (uint e = 0u; e < 4u; ++e) {
            uint d = 4u * d4 + e;
            if (d < p.d) am[p.oa + r * p.d + d] = acc[d4][e] * p.scale;
        }
    }
}

// Pass 2: dk, dv of key row j (clamped) of key/value head (b, hk), tile's rows [j0, j0 + WG).
void key_rows(uint b, uint hk, uint j0, uint j) {
    uint jr = min(j, p.skv - 1u);
    uint r = (b * (p.h / HG) + hk) * p.skv + jr;
    vec4 kr[D4], vr[D4], dk[D4], dv[D4], qr[D4], gr[D4];
    [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
        kr[d4] = load4(1u, p.ok + r * p.d, d4, p.d);
        vr[d4] = load4(2u, p.ov + r * p.dv, d4, p.dv);
        dk[d4] = vec4(0.0);
        dv[d4] = vec4(0.0);
    }
    // the queries that see the tile's first key (SHUFFLE: uniform), or this key
    uint start = CAUSAL ? (SHUFFLE ? j0 : jr) : 0u;
    uint step = SHUFFLE ? SG : 1u;
    for (uint t = 0u; t < HG; ++t) {
        uint h = hk * HG + t;
        uint rows = (b * p.h + h) * p.sq;
        for (uint i0 = start; i0 < p.sq; i0 += step) {
            uint il = min(i0 + (SHUFFLE ? gl_SubgroupInvocationID : 0u), p.sq - 1u);
            [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
                qr[d4] = load4(0u, p.oq + (rows + il) * p.d, d4, p.d);
                gr[d4] = load4(3u, p.og + (rows + il) * p.dv, d4, p.dv);
            }
            float lm = tm[p.ot + 2u * (rows + il)], dm = tm[p.ot + 2u * (rows + il) + 1u];
            [[unroll]] for (uint ii = 0u; ii < (SHUFFLE ? SG : 1u); ++ii) {
                vec4 qq[D4], gg[D4];
                float dot_ = 0.0, dp = 0.0;
                [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
                    if (4u * d4 >= p.d && 4u * d4 >= p.dv) break;
                    qq[d4] = walked(qr[d4], qr[d4], ii);
                    gg[d4] = walked(gr[d4], gr[d4], ii);
                    dot_ += dot(qq[d4], kr[d4]);
                    dp += dot(gg[d4], vr[d4]);
                }
                float l = SHUFFLE ? subgroupShuffle(lm, ii) : lm;
                float di = SHUFFLE ? subgroupShuffle(dm, ii) : dm;
                float pij = prob(score(dot_, b, h, i0 + ii, jr), l);
                float ds = pij * (dp - di);
                [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
                    if (4u * d4 >= p.d && 4u * d4 >= p.dv) break;
                    dv[d4] += pij * gg[d4];
                    dk[d4] += ds * qq[d4];
                }
            }
        }
    }
    if (j >= p.skv) return;
    [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
        [[unroll]] for (uint e = 0u; e < 4u; ++e) {
            uint d = 4u * d4 + e;
            if (d < p.d) am[p.oa + r * p.d + d] = dk[d4][e] * p.scale;
            if (d < p.dv) bm[p.ob + r * p.dv + d] = dv[d4][e];
        }
    }
}

void main() {
    if (PASS == 0u) {
        uint r = global_index();
        if (r < p.nbh * p.sq) row_stats(r);
        return;
    }
    // a workgroup per (head, tile of WG rows): query heads (1), key/value heads (2)
    uint g = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    uint wg = gl_WorkGroupSize.x;
    uint n = PASS == 1u ? p.sq : p.skv;
    uint heads = PASS == 1u ? p.nbh : p.nbh / HG;
    uint tiles = (n + wg - 1u) / wg;
    if (g >= heads * tiles) return;  // the 2-D grid's spare groups: whole workgroups
    uint hh = g / tiles, row0 = (g % tiles) * wg;
    uint nh = PASS == 1u ? p.h : p.h / HG;
    uint row = row0 + gl_LocalInvocationID.x;
    if (PASS == 1u) {
        query_rows(hh / nh, hh % nh, row0, row);
    } else {
        key_rows(hh / nh, hh % nh, row0, row);
    }
}

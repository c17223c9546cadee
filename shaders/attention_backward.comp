#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
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
//   1: per query row (b, h, i): dq_i, walking the row's keys;
//   2: per key row (b, hk, j) of a key/value head: dk_j and dv_j, walking the queries of the
//      HG query heads that share it (grouped-query attention: summed in registers).
// Bindings 6 and 7 serve each pass its own arrays: O and lse (0), dq (1), dk and dv (2).
// A row whose every score is masked (lse = +inf) has P = 0: zero gradients, as PyTorch's safe
// softmax. CAUSAL keeps key j <= query i (top-left aligned). No shared memory, no barriers (what
// a CPU driver such as lavapipe pays most for); the register rows are DMAX floats (constant 1),
// indexed statically once the loops to DMAX are unrolled.
#include "common.glsl"

layout(constant_id = 1) const uint DMAX = 64;
layout(constant_id = 2) const bool CAUSAL = false;
layout(constant_id = 3) const bool HAS_MASK = false;
layout(constant_id = 4) const bool MASK_BOOL = false;
layout(constant_id = 5) const uint HG = 1;
layout(constant_id = 6) const uint PASS = 0;

layout(std430, set = 0, binding = 0) readonly buffer Q { float qm[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { float km[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { float vm[]; };
layout(std430, set = 0, binding = 3) readonly buffer G { float gm[]; };
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
// -inf where the mask or causality drops it.
float score(float dot_, uint b, uint h, uint i, uint j) {
    float s = dot_ * p.scale;
    if (CAUSAL && j > i) return NEG_INF;
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

// Pass 0: (lse_i, D_i) of one query row into t.
void row_stats(uint r) {
    float di = 0.0;
    for (uint d = 0u; d < p.dv; ++d) di += gm[p.og + r * p.dv + d] * am[p.oa + r * p.dv + d];
    tm[p.ot + 2u * r] = bm[p.ob + r];
    tm[p.ot + 2u * r + 1u] = di;
}

// Pass 1: dq_i of one query row.
void query_row(uint r) {
    uint bh = r / p.sq, i = r % p.sq;
    uint b = bh / p.h, h = bh % p.h;
    uint hk = h / HG;
    uint kvh = b * (p.h / HG) + hk;  // the key/value head's index in [B, H / HG]
    uint qb = p.oq + r * p.d, gb = p.og + r * p.dv;
    uint kb = p.ok + kvh * p.skv * p.d, vb = p.ov + kvh * p.skv * p.dv;
    float qr[DMAX], gr[DMAX], acc[DMAX];
    [[unroll]] for (uint d = 0u; d < DMAX; ++d) {
        qr[d] = 0.0;
        gr[d] = 0.0;
        acc[d] = 0.0;
        if (d < p.d) qr[d] = qm[qb + d];
        if (d < p.dv) gr[d] = gm[gb + d];
    }
    float l = tm[p.ot + 2u * r], di = tm[p.ot + 2u * r + 1u];
    uint end = CAUSAL ? min(p.skv, i + 1u) : p.skv;
    if (l == POS_INF) end = 0u;  // fully masked row: P = 0, dq = 0
    for (uint j = 0u; j < end; ++j) {
        uint kr = kb + j * p.d, vr = vb + j * p.dv;
        float dot_ = 0.0;
        [[unroll]] for (uint d = 0u; d < DMAX; ++d) {
            if (d >= p.d) break;
            dot_ += qr[d] * km[kr + d];
        }
        float s = score(dot_, b, h, i, j);
        if (s == NEG_INF) continue;
        float pij = exp(s - l);
        float dp = 0.0;
        [[unroll]] for (uint d = 0u; d < DMAX; ++d) {
            if (d >= p.dv) break;
            dp += gr[d] * vm[vr + d];
        }
        float ds = pij * (dp - di);
        [[unroll]] for (uint d = 0u; d < DMAX; ++d) {
            if (d >= p.d) break;
            acc[d] += ds * km[kr + d];
        }
    }
    [[unroll]] for (uint d = 0u; d < DMAX; ++d) {
        if (d >= p.d) break;
        am[p.oa + r * p.d + d] = acc[d] * p.scale;
    }
}

// Pass 2: one key row of a key/value head: dk_j and dv_j over the HG query heads that read it.
void key_row(uint r) {
    uint hkn = p.h / HG;
    uint kvh = r / p.skv, j = r % p.skv;
    uint b = kvh / hkn, hk = kvh % hkn;
    float kr[DMAX], vr[DMAX], dk[DMAX], dv[DMAX];
    [[unroll]] for (uint d = 0u; d < DMAX; ++d) {
        kr[d] = 0.0;
        vr[d] = 0.0;
        dk[d] = 0.0;
        dv[d] = 0.0;
        if (d < p.d) kr[d] = km[p.ok + r * p.d + d];
        if (d < p.dv) vr[d] = vm[p.ov + r * p.dv + d];
    }
    for (uint t = 0u; t < HG; ++t) {
        uint h = hk * HG + t;
        uint bh = b * p.h + h;
        for (uint i = CAUSAL ? j : 0u; i < p.sq; ++i) {
            uint qrow = bh * p.sq + i;
            float l = tm[p.ot + 2u * qrow];
            if (l == POS_INF) continue;
            uint qb = p.oq + qrow * p.d, gb = p.og + qrow * p.dv;
            float dot_ = 0.0;
            [[unroll]] for (uint d = 0u; d < DMAX; ++d) {
                if (d >= p.d) break;
                dot_ += qm[qb + d] * kr[d];
            }
            float s = score(dot_, b, h, i, j);
            if (s == NEG_INF) continue;
            float pij = exp(s - l);
            float dp = 0.0;
            [[unroll]] for (uint d = 0u; d < DMAX; ++d) {
                if (d >= p.dv) break;
                float g = gm[gb + d];
                dp += g * vr[d];
                dv[d] += pij * g;
            }
            float ds = pij * (dp - tm[p.ot + 2u * qrow + 1u]);
            [[unroll]] for (uint d = 0u; d < DMAX; ++d) {
                if (d >= p.d) break;
                dk[d] += ds * qm[qb + d];
            }
        }
    }
    [[unroll]] for (uint d = 0u; d < DMAX; ++d) {
        if (d < p.d) am[p.oa + r * p.d + d] = dk[d] * p.scale;
        if (d < p.dv) bm[p.ob + r * p.dv + d] = dv[d];
    }
}

void main() {
    uint r = global_index();
    if (PASS == 2u) {
        if (r < p.nbh / HG * p.skv) key_row(r);
    } else if (r < p.nbh * p.sq) {
        if (PASS == 0u) row_stats(r);
        else query_row(r);
    }
}

#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
// Scaled dot-product attention (the runtime's fused attention, gpucore/runtime/ir/fused.py):
//   o[b, h, i] = softmax_j(scale * q[b, h, i] . k[b, h, j] + mask[b, h, i, j]) v[b, h, j]
// over float32 q [B, H, Sq, D], k [B, H, Skv, D], v [B, H, Skv, Dv], o [B, H, Sq, Dv] and an
// optional additive mask [B, H, Sq, Skv], each with any element strides (zero for a broadcast
// mask, negative allowed): permuted views of one qkv buffer are read where they lie.
//
// A workgroup per (b, h, tile of WG query rows, chunk of DMAX output columns), an invocation per
// query row. Online softmax over blocks of keys: the block's scores stay in registers, the
// running max m, sum l and the output row acc are rescaled once per block; the Sq x Skv scores
// never reach memory. No shared memory and no barriers (what a CPU driver such as lavapipe pays
// most for). Rows past Sq compute row Sq - 1 and store nothing, so that every invocation runs
// the loads (and shuffles) of the workgroup in uniform control flow.
//
// Two ways to read k and v (SHUFFLE, constant 4; kernels/fused.py picks per device):
//   false: every invocation reads every key of the (b, h) itself, blocks of KB keys. The loads
//          of an invocation tile hit the same addresses: one cache line on a GPU.
//   true:  a subgroup of SG (constant 5) invocations reads a block of SG keys once, lane t the
//          rows of key j0 + t, and hands them round with subgroupShuffle, which lavapipe lowers
//          to a register permute while each storage-buffer load there is a per-lane loop
//          (kernels/gemm.py's REGBLOCK, same trade): SG times fewer loads, and VEC4 (constant 6)
//          reads k / v rows as vec4 where they are aligned with unit stride along D.
//          Needs the shaders to run with the device's reported subgroup size (CPU devices).
//
// DMAX (constant 1): the register row length. q is kept in registers when D <= DMAX (else read
// from memory per key; SHUFFLE needs D <= DMAX); Dv > DMAX takes several workgroups per query
// tile, each recomputing the scores. CAUSAL (constant 2): query i sees keys j <= i (top-left
// aligned, PyTorch's is_causal). HAS_MASK (constant 3): whether the mask is bound (else q is).
// LSE (constant 7): also write each row's logsumexp of its scaled, masked scores to lse
// [B, H, Sq] (contiguous from element lse_off; +inf for a fully masked row), which the backward
// (attention_backward.comp) recomputes the probabilities from. HG (constant 8): query heads per
// key/value head (grouped-query attention: head h reads k / v head h / HG). MASK_BOOL
// (constant 9): the mask is bool (bytes, read from 32-bit words; False drops the score).
// NaN semantics follow the C kernel (cpu/attention.c) and PyTorch 2.13's SDPA: a NaN or +inf
// score makes its row NaN, and a row whose every score is -inf (fully masked, or no keys) is 0.
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint DMAX = 64;  // a multiple of 4
layout(constant_id = 2) const bool CAUSAL = false;
layout(constant_id = 3) const bool HAS_MASK = false;
layout(constant_id = 4) const bool SHUFFLE = false;
layout(constant_id = 5) const uint SG = 8;  // SHUFFLE: the subgroup size, dividing WG
layout(constant_id = 6) const bool VEC4 = false;
layout(constant_id = 7) const bool LSE = false;
layout(constant_id = 8) const uint HG = 1;
layout(constant_id = 9) const bool MASK_BOOL = false;
const uint KB = 16;
const uint D4 = DMAX / 4u;

layout(std430, set = 0, binding = 0) readonly buffer Q { float qm[]; };
layout(std430, set = 0, binding = 1) readonly buffer K { float km[]; };
layout(std430, set = 0, binding = 1) readonly buffer K4 { vec4 km4[]; };
layout(std430, set = 0, binding = 2) readonly buffer V { float vm[]; };
layout(std430, set = 0, binding = 2) readonly buffer V4 { vec4 vm4[]; };
layout(std430, set = 0, binding = 3) readonly buffer M { float mm[]; };
layout(std430, set = 0, binding = 3) readonly buffer MU { uint mu[]; };
layout(std430, set = 0, binding = 4) writeonly buffer O { float om[]; };
layout(std430, set = 0, binding = 5) writeonly buffer L { float lm[]; };

// Element offset (within the binding) and strides along b, h, row, column.
struct Layout {
    int off;
    int sb;
    int sh;
    int sr;
    int sc;
};

// Mirrored by kernels/fused.py (attention): 7 + 5 * 5 words (D and Dv share one, so lse_off
// fits), the whole 128 bytes Vulkan guarantees: every layout fits, no operand needs a copy.
layout(push_constant) uniform Push {
    uint nbh;  // B * H
    uint h;
    uint sq;
    uint skv;
    uint ddv;  // D | Dv << 16
    uint lse_off;
    float scale;
    Layout q;
    Layout k;
    Layout v;
    Layout o;
    Layout m;
} p;

#define NEG_INF uintBitsToFloat(0xff800000u)

bool is_nan(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }

// max that keeps a NaN (GLSL's max may return either operand when one is NaN).
float max_nan(float a, float b) { return (b > a || is_nan(b)) ? b : a; }

int base(Layout l, uint b, uint h, uint r) {
    return l.off + int(b) * l.sb + int(h) * l.sh + int(r) * l.sr;
}

// What the two ways share: the tile, the running softmax state and the row's registers.
uint ir;       // this invocation's query row (clamped to Sq - 1)
uint row_end;  // keys [0, row_end) are this row's
int qb, kb, vb, mb;
uint dn;       // output columns of this chunk
uint nd, ndv;  // D, Dv
float m_run, l_run;

// The block's scores: SG (SHUFFLE) or KB keys from j0, in registers.
const uint SMAX = SHUFFLE ? SG : KB;
float s[SMAX];

// s holds the raw dot products of keys j0 .. j0 + SMAX - 1: scale and mask them (keys past
// row_end, including those past the block's end, get -inf), update m_run and l_run, and leave
// p = exp(s - m) in s (0 while every key so far is masked); returns the factor that rescales acc.
float softmax_block(uint j0) {
    float bm = NEG_INF;
    [[unroll]] for (uint jj = 0u; jj < SMAX; ++jj) {
        uint j = j0 + jj;
        float sc = s[jj] * p.scale;
        if (HAS_MASK) {
            uint mi = uint(mb + int(min(j, p.skv - 1u)) * p.m.sc);
            if (MASK_BOOL) {
                sc = ((mu[mi >> 2] >> (8u * (mi & 3u))) & 0xffu) != 0u ? sc : NEG_INF;
            } else {
                sc += mm[mi];
            }
        }
        s[jj] = j < row_end ? sc : NEG_INF;
        bm = max_nan(bm, s[jj]);
    }
    // Selects, not branches: every invocation stays on the loads' (uniform) path.
    float mn = max_nan(m_run, bm);
    bool none = mn == NEG_INF;  // every key so far masked out: nothing to add yet
    float corr = none ? 1.0 : exp(m_run - mn);  // 0 on the first contributing block
    m_run = none ? m_run : mn;
    l_run *= corr;
    [[unroll]] for (uint jj = 0u; jj < SMAX; ++jj) {
        // NaN for a NaN score (or +inf), which then fills the row
        s[jj] = none ? 0.0 : exp(s[jj] - m_run);
        l_run += s[jj];
    }
    return corr;
}

// Floats 4 * d4 .. 4 * d4 + 3 of the k (is_k) or v row starting at element row; len: the row's
// length. Branches, not ?: (which may load both sides).
vec4 load4(bool is_k, int row, uint d4, uint len) {
    if (VEC4) {
        if (is_k) return km4[(row >> 2) + int(d4)];
        return vm4[(row >> 2) + int(d4)];
    }
    vec4 r;
    [[unroll]] for (uint e = 0u; e < 4u; ++e) {
        // past the row: a real element (times a zero q for k; for v a column never stored)
        uint d = min(4u * d4 + e, len - 1u);
        if (is_k) {
            r[e] = km[row + int(d) * p.k.sc];
        } else {
            r[e] = vm[row + int(d) * p.v.sc];
        }
    }
    return r;
}

void main() {
    nd = p.ddv & 0xffffu;
    ndv = p.ddv >> 16;
    uint g = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    uint tiles = (p.sq + WG - 1u) / WG;
    uint nch = (ndv + DMAX - 1u) / DMAX;
    if (g >= p.nbh * nch * tiles) return;  // the 2-D grid's spare groups: whole workgroups
    uint tile = g % tiles;
    uint rest = g / tiles;
    uint c = rest % nch;
    uint bh = rest / nch;
    uint b = bh / p.h, h = bh % p.h;
    uint d0 = c * DMAX;
    dn = min(DMAX, ndv - d0);
    uint i = tile * WG + gl_LocalInvocationID.x;
    ir = min(i, p.sq - 1u);
    m_run = NEG_INF;
    l_run = 0.0;
    row_end = CAUSAL ? min(p.skv, ir + 1u) : p.skv;
    // The workgroup's keys: causal stops after its last row's.
    uint end = CAUSAL ? min(p.skv, min(tile * WG + WG, p.sq)) : p.skv;

    qb = base(p.q, b, h, ir);
    kb = base(p.k, b, h / HG, 0u);
    vb = base(p.v, b, h / HG, 0u) + int(d0) * p.v.sc;
    mb = base(p.m, b, h, ir);
    // Loops run to the constant DMAX / KB / SG and break at the size: unrolled once
    // specialised, so the register rows are indexed statically (no private-memory arrays).
    bool qreg = nd <= DMAX;
    vec4 qr[D4], acc[D4];
    [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
        acc[d4] = vec4(0.0);
        qr[d4] = vec4(0.0);  // zero past D: the padded lanes of a dot product add nothing
        if (qreg) {
            [[unroll]] for (uint e = 0u; e < 4u; ++e) {
                uint d = 4u * d4 + e;
                if (d < nd) qr[d4][e] = qm[qb + int(d) * p.q.sc];
            }
        }
    }

    if (SHUFFLE) {
        uint lane = gl_SubgroupInvocationID;
        for (uint j0 = 0u; j0 < end; j0 += SG) {
            uint jl = min(j0 + lane, p.skv - 1u);  // the key this lane reads
            int kr = kb + int(jl) * p.k.sr;
            [[unroll]] for (uint jj = 0u; jj < SG; ++jj) s[jj] = 0.0;
            [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
                if (4u * d4 >= nd) break;
                vec4 kv = load4(true, kr, d4, nd);
                [[unroll]] for (uint jj = 0u; jj < SG; ++jj)
                    s[jj] += dot(qr[d4], subgroupShuffle(kv, jj));
            }
            float corr = softmax_block(j0);
            int vr = vb + int(jl) * p.v.sr;
            [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
                if (4u * d4 >= dn) break;
                vec4 vv = load4(false, vr, d4, dn);
                vec4 a = acc[d4] * corr;
                [[unroll]] for (uint jj = 0u; jj < SG; ++jj)
                    a += s[jj] * subgroupShuffle(vv, jj);  // keys past the end: p = 0
                acc[d4] = a;
            }
        }
    } else {
        for (uint j0 = 0u; j0 < end; j0 += KB) {
            uint jn = min(KB, end - j0);
            [[unroll]] for (uint jj = 0u; jj < KB; ++jj) {
                if (jj == jn) break;  // s[jn ..] is left as is: softmax_block masks it
                int kr = kb + int(j0 + jj) * p.k.sr;
                float dot_ = 0.0;
                if (qreg) {
                    [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
                        if (4u * d4 >= nd) break;
                        dot_ += dot(qr[d4], load4(true, kr, d4, nd));
                    }
                } else {
                    for (uint d = 0u; d < nd; ++d)
                        dot_ += qm[qb + int(d) * p.q.sc] * km[kr + int(d) * p.k.sc];
                }
                s[jj] = dot_;
            }
            float corr = softmax_block(j0);
            [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) acc[d4] *= corr;
            for (uint jj = 0u; jj < jn; ++jj) {
                int vr = vb + int(j0 + jj) * p.v.sr;
                [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
                    if (4u * d4 >= dn) break;
                    acc[d4] += s[jj] * load4(false, vr, d4, dn);
                }
            }
        }
    }
    if (i >= p.sq) return;
    if (LSE && c == 0u) {
        float inf = uintBitsToFloat(0x7f800000u);
        lm[p.lse_off + bh * p.sq + i] = m_run == NEG_INF ? inf : m_run + log(l_run);
    }
    int ob = base(p.o, b, h, i) + int(d0) * p.o.sc;
    [[unroll]] for (uint d4 = 0u; d4 < D4; ++d4) {
        [[unroll]] for (uint e = 0u; e < 4u; ++e) {
            uint d = 4u * d4 + e;
            // m_run still -inf: no key contributed (fully masked row): 0, not 0 / 0
            if (d < dn) om[ob + int(d) * p.o.sc] = m_run == NEG_INF ? 0.0 : acc[d4][e] / l_run;
        }
    }
}

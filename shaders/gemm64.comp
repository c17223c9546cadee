#version 450
#extension GL_GOOGLE_include_directive : require
// float64 matrix products for devices with shaderFloat64 (kernels/gemm64.py):
// C[b, m, n] = alpha * sum_k A[b, m, k] * B[b, k, n], one invocation per element of C, the
// products summed in order of k in double precision. C is contiguous [batch..., M, N]; A and B
// are read in place through element strides (0 for broadcast batch dims, any sign).
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer A { uint a[]; };
layout(std430, set = 0, binding = 1) readonly buffer B { uint b[]; };
layout(std430, set = 0, binding = 2) writeonly buffer C { uint c[]; };

// 25 words, mirrored by kernels/gemm64.py (offsets and strides in doubles).
layout(push_constant) uniform Push {
    uint m;
    uint n;
    uint k;
    uint nbd;        // batch dims in use (0..4)
    int a_off;
    int b_off;
    uint c_off;
    int a_rs;        // A's row (m) and column (k) strides
    int a_cs;
    int b_rs;        // B's row (k) and column (n) strides
    int b_cs;
    uint alpha_lo;
    uint alpha_hi;
    uint bshape[4];
    int a_bs[4];
    int b_bs[4];
} p;

double at(uint w0, uint w1) { return packDouble2x32(uvec2(w0, w1)); }

void main() {
    uint gid = global_index();
    uint per = p.m * p.n;
    uint nb = 1u;
    for (uint d = 0u; d < p.nbd; ++d) nb *= p.bshape[d];
    if (gid >= per * nb) return;
    uint bi = gid / per;
    uint r = gid - bi * per;
    uint row = r / p.n;
    uint col = r - row * p.n;
    int ia = p.a_off + int(row) * p.a_rs;
    int ib = p.b_off + int(col) * p.b_cs;
    uint rem = bi;
    for (int d = int(p.nbd) - 1; d >= 0; --d) {
        uint cd = rem % p.bshape[d];
        rem /= p.bshape[d];
        ia += int(cd) * p.a_bs[d];
        ib += int(cd) * p.b_bs[d];
    }
    double s = 0.0LF;
    for (uint j = 0u; j < p.k; ++j) {
        int x = ia + int(j) * p.a_cs;
        int w = ib + int(j) * p.b_rs;
        s += at(a[2 * x], a[2 * x + 1]) * at(b[2 * w], b[2 * w + 1]);
    }
    s *= at(p.alpha_lo, p.alpha_hi);
    uvec2 bits = unpackDouble2x32(s);
    c[p.c_off + 2u * gid] = bits.x;
    c[p.c_off + 2u * gid + 1u] = bits.y;
}

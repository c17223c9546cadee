#version 450
#extension GL_GOOGLE_include_directive : require
// im2col and col2im for NCHW float32 (the lowering of conv2d), the layout of cpu/im2col.c:
//   col [n, c*kh*kw, oh*ow]; row (ci*kh + ki)*kw + kj, column oy*ow + ox reads
//   x[b, ci, oy*sh - ph + ki*dh, ox*sw - pw + kj*dw] (0 outside the image).
// MODE (constant 1) IM2COL: one invocation per col element (a copy or a 0).
//                   COL2IM: one invocation per x element, gathering the col entries that
//                       im2col would read from it. No atomics; each x element is written once.
// col2im sums in the CPU kernel's order (ki, then kj, ascending, starting from 0.0), and each
// (ki, kj) reaches an x element from at most one output pixel, so the sums are bit-identical.
// Both arrays are contiguous; x_off / col_off are element offsets into the bindings. Only the
// (b, ci) plane index b*c + ci matters (col rows of a plane are contiguous), so the host splits
// work too large for one storage binding into dispatches over ranges of planes.
#include "common.glsl"

layout(constant_id = 1) const int MODE = 0;
// WORDS (constant 2): 1 = float32 items; 2 = 8-byte items (float64) as word pairs, IM2COL only
// (a copy or a 0: no arithmetic, so no shaderFloat64); offsets stay in items.
layout(constant_id = 2) const int WORDS = 1;
#define GC_IM2COL_MODE(NAME, value) const int NAME = value;  // IM2COL, COL2IM (cpu/opcodes.def)
#include "opcodes.def"
#undef GC_IM2COL_MODE

layout(std430, set = 0, binding = 0) buffer X { float x[]; };
layout(std430, set = 0, binding = 1) buffer Col { float col[]; };
layout(std430, set = 0, binding = 0) buffer XW { uint xw[]; };
layout(std430, set = 0, binding = 1) buffer ColW { uint colw[]; };

// Mirrored by kernels/pool.py's _conv_push (15 words).
layout(push_constant) uniform Push {
    uint total;              // elements written: col size (IM2COL) or x size (COL2IM)
    uint x_off, col_off;
    uint h, w;
    uint kh, kw;
    uint sh, sw;
    int ph, pw;
    uint dh, dw;
    uint oh, ow;
} p;

void im2col(uint i) {
    uint ohw = p.oh * p.ow;
    uint pix = i % ohw;
    uint r = i / ohw;                 // b * rows + row
    uint kj = r % p.kw;
    uint t = r / p.kw;
    uint ki = t % p.kh;
    uint bc = t / p.kh;               // b * c + ci
    uint oy = pix / p.ow, ox = pix % p.ow;
    int iy = int(oy * p.sh + ki * p.dh) - p.ph;
    int ix = int(ox * p.sw + kj * p.dw) - p.pw;
    bool inside = iy >= 0 && iy < int(p.h) && ix >= 0 && ix < int(p.w);
    uint src = inside ? p.x_off + (bc * p.h + uint(iy)) * p.w + uint(ix) : 0u;
    if (WORDS == 2) {
        uvec2 v = inside ? uvec2(xw[2u * src], xw[2u * src + 1u]) : uvec2(0u);
        colw[2u * (p.col_off + i)] = v.x;
        colw[2u * (p.col_off + i) + 1u] = v.y;
        return;
    }
    col[p.col_off + i] = inside ? x[src] : 0.0;
}

void col2im(uint i) {
    uint ix = i % p.w;
    uint t = i / p.w;
    uint iy = t % p.h;
    uint bc = t / p.h;                // b * c + ci
    uint ohw = p.oh * p.ow;
    uint row0 = bc * p.kh * p.kw;     // b * rows + ci * kh * kw
    precise float acc = 0.0;   // no reassociation: the CPU order, bit for bit
    for (uint ki = 0u; ki < p.kh; ++ki) {
        // oy * sh = iy + ph - ki * dh
        int ty = int(iy) + p.ph - int(ki * p.dh);
        if (ty < 0 || ty % int(p.sh) != 0) continue;
        uint oy = uint(ty) / p.sh;
        if (oy >= p.oh) continue;
        for (uint kj = 0u; kj < p.kw; ++kj) {
            int tx = int(ix) + p.pw - int(kj * p.dw);
            if (tx < 0 || tx % int(p.sw) != 0) continue;
            uint ox = uint(tx) / p.sw;
            if (ox >= p.ow) continue;
            acc += col[p.col_off + (row0 + ki * p.kw + kj) * ohw + oy * p.ow + ox];
        }
    }
    x[p.x_off + i] = acc;
}

void main() {
    uint i = global_index();
    if (i >= p.total) return;
    if (MODE == IM2COL) {
        im2col(i);
    } else {
        col2im(i);
    }
}

#version 450
#extension GL_GOOGLE_include_directive : require
// max_pool2d and max_pool2d_backward for NCHW float32 (gpucore/ops/pool.py; kernels/pool.py).
// Output pixel (oy, ox) of plane bc = b*c + ci reads x[bc, oy*sh - ph + ki*dh, ox*sw - pw + kj*dw]
// for (ki, kj) in row-major order; positions outside the image (padding, ceil_mode's extension)
// are skipped, which is -inf padding without reading it.
// MODE (constant 1) FORWARD: one invocation per output element; writes the maximum and its
//                       flat index iy*w + ix in the input plane as an int64 (low word, 0). The
//                       first maximum in window order wins; a NaN wins, the last NaN of the
//                       window (PyTorch's `val > max || isnan(val)` scan).
//                   BACKWARD: one invocation per input element: sums the gradient of every
//                       output whose window can hold this pixel and whose stored index names it
//                       (ki, then kj, ascending). A gather: no atomics, each element written once.
// All arrays are contiguous; *_off are offsets in 32-bit words into the bindings. Only the plane
// index matters, so the host splits work too large for one binding into ranges of planes.
#include "common.glsl"

layout(constant_id = 1) const int MODE = 0;
#define GC_POOL_MODE(NAME, value) const int NAME = value;  // FORWARD, BACKWARD (cpu/opcodes.def)
#include "opcodes.def"
#undef GC_POOL_MODE

layout(std430, set = 0, binding = 0) buffer X { float x[]; };   // input / its gradient
layout(std430, set = 0, binding = 1) buffer V { float v[]; };   // values / their gradient
layout(std430, set = 0, binding = 2) buffer I { uint ind[]; };  // int64 indices, 2 words each

// Mirrored by kernels/pool.py's _pool_push (16 words).
layout(push_constant) uniform Push {
    uint total;              // elements written: output size (FORWARD) or input size (BACKWARD)
    uint x_off, v_off, i_off;
    uint h, w;
    uint kh, kw;
    uint sh, sw;
    int ph, pw;
    uint dh, dw;
    uint oh, ow;
} p;

// NaN test on the bit pattern: no fast-math assumption can fold it away.
bool nan_bits(float f) { return (floatBitsToUint(f) & 0x7fffffffu) > 0x7f800000u; }

void forward(uint i) {
    uint ohw = p.oh * p.ow;
    uint bc = i / ohw;
    uint pix = i - bc * ohw;
    uint oy = pix / p.ow, ox = pix - (pix / p.ow) * p.ow;
    int y0 = int(oy * p.sh) - p.ph;
    int x0 = int(ox * p.sw) - p.pw;
    uint plane = p.x_off + bc * p.h * p.w;
    float m = 0.0;
    uint best = 0xffffffffu;  // no element yet
    for (uint ki = 0u; ki < p.kh; ++ki) {
        int iy = y0 + int(ki * p.dh);
        if (iy < 0 || iy >= int(p.h)) continue;
        for (uint kj = 0u; kj < p.kw; ++kj) {
            int ix = x0 + int(kj * p.dw);
            if (ix < 0 || ix >= int(p.w)) continue;
            uint q = uint(iy) * p.w + uint(ix);
            float val = x[plane + q];
            if (best == 0xffffffffu || nan_bits(val) || (!nan_bits(m) && val > m)) {
                m = val;
                best = q;
            }
        }
    }
    v[p.v_off + i] = m;
    ind[p.i_off + 2u * i] = best;
    ind[p.i_off + 2u * i + 1u] = 0u;
}

void backward(uint i) {
    uint bc = i / (p.h * p.w);
    uint q = i - bc * p.h * p.w;
    uint iy = q / p.w, ix = q - (q / p.w) * p.w;
    uint obase = bc * p.oh * p.ow;
    precise float acc = 0.0;
    for (uint ki = 0u; ki < p.kh; ++ki) {
        int ty = int(iy) + p.ph - int(ki * p.dh);  // oy * sh
        if (ty < 0 || ty % int(p.sh) != 0) continue;
        uint oy = uint(ty) / p.sh;
        if (oy >= p.oh) continue;
        for (uint kj = 0u; kj < p.kw; ++kj) {
            int tx = int(ix) + p.pw - int(kj * p.dw);
            if (tx < 0 || tx % int(p.sw) != 0) continue;
            uint ox = uint(tx) / p.sw;
            if (ox >= p.ow) continue;
            uint o = obase + oy * p.ow + ox;
            if (ind[p.i_off + 2u * o] == q && ind[p.i_off + 2u * o + 1u] == 0u) {
                acc += v[p.v_off + o];
            }
        }
    }
    x[p.x_off + i] = acc;
}

void main() {
    uint i = global_index();
    if (i >= p.total) return;
    if (MODE == FORWARD) {
        forward(i);
    } else {
        backward(i);
    }
}

#version 450
#extension GL_GOOGLE_include_directive : require
// The byte-tensor kernels of the runtime's quantized ops on the device (kernels/qtensor.py),
// bit for bit with their C kernels (cpu/qconv.c, cpu/qgemm.c; numpy references in
// gpucore/runtime/ir/quantized.py). uint8 tensors are bytes packed four to a 32-bit word (the
// device's int8 storage, as binary.comp's byte types): a byte input is read out of its words at
// any byte offset; a byte output starts on a word and each invocation writes whole words (the
// bytes past the end land in the allocation's padding: arena slots are 64-byte aligned).
//   MODE DEQUANT: float32 out[i] = (float(q[i]) - zp) * scale, one invocation per element
//       (q - zp is exact in float32; one rounding, the product), dequantize_u8's.
//   MODE IM2COL: the int8 GEMM's activation rows of a convolution: col [N * oh * ow, KW words],
//       row (b, oy, ox), byte k = (ci * kh + ki) * kw + kj holding x[b, ci, oy * sh - ph + ki *
//       dh, ox * sw - pw + kj * dw], the activation zero point outside the image (it adds
//       nothing to the sums), bytes past K zero; one invocation per CHUNK words of a row.
//   MODE MAXPOOL: uint8 max pooling of NCHW x (padding never wins; max commutes with the
//       monotone quantization), one invocation per output word of four results.
//   MODE NCHW: the int8 GEMM's uint8 result [N * oh * ow, O] (rows padded to whole words) into
//       the convolution's NCHW layout, one invocation per output word.
#include "common.glsl"

layout(constant_id = 1) const uint MODE = 0u;

// mirrored by kernels/qtensor.py
const uint DEQUANT = 0u;
const uint IM2COL = 1u;
const uint MAXPOOL = 2u;
const uint NCHW = 3u;

layout(std430, set = 0, binding = 0) readonly buffer X { uint x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer O { uint o[]; };

// Mirrored by kernels/qtensor.py's _push (20 words). x_off: bytes; o_off: words.
layout(push_constant) uniform Push {
    uint total;          // invocations (DEQUANT: elements; IM2COL: rows * ceil(KW / CHUNK);
                         // MAXPOOL, NCHW: output words)
    uint x_off, o_off;
    uint c, h, w;        // the input's channels and image
    uint kh, kw, sh, sw;
    int ph, pw;
    uint dh, dw, oh, ow;
    uint K, KW;          // IM2COL: bytes per row (c * kh * kw) and words per row; MAXPOOL: K =
                         // the number of outputs
    float scale, zp;     // DEQUANT: scale and zero point; IM2COL: zp, the padding byte
} p;

uint byte_at(uint i) {
    uint b = p.x_off + i;
    return (x[b >> 2] >> (8u * (b & 3u))) & 0xffu;
}

void dequant(uint i) {
    precise float v = (float(byte_at(i)) - p.zp) * p.scale;
    o[p.o_off + i] = floatBitsToUint(v);
}

// Integer division is a per-lane loop on CPU-type devices (lavapipe): an invocation splits its
// first index once and steps the others. IM2COL: one invocation per CHUNK words of a row.
const uint CHUNK = 8u;

void im2col(uint i) {
    uint chunks = (p.KW + CHUNK - 1u) / CHUNK;
    uint row = i / chunks, w0 = (i % chunks) * CHUNK;
    uint ohw = p.oh * p.ow;
    uint b = row / ohw, pix = row % ohw;
    int y0 = int(pix / p.ow) * int(p.sh) - p.ph;
    int x0 = int(pix % p.ow) * int(p.sw) - p.pw;
    uint k = w0 * 4u;
    uint kj = k % p.kw, t = k / p.kw;
    uint ki = t % p.kh, ci = t / p.kh;
    uint pad = uint(p.zp);
    uint cw = 0xffffffffu, cv = 0u;  // the last word loaded: neighbouring bytes often share it
    uint wend = min(w0 + CHUNK, p.KW);
    for (uint wi = w0; wi < wend; ++wi) {
        uint word = 0u;
        for (uint q = 0u; q < 4u && k < p.K; ++q, ++k) {
            int iy = y0 + int(ki * p.dh), ix = x0 + int(kj * p.dw);
            uint v = pad;
            if (iy >= 0 && iy < int(p.h) && ix >= 0 && ix < int(p.w)) {
                uint bi = p.x_off + ((b * p.c + ci) * p.h + uint(iy)) * p.w + uint(ix);
                if ((bi >> 2) != cw) {
                    cw = bi >> 2;
                    cv = x[cw];
                }
                v = (cv >> (8u * (bi & 3u))) & 0xffu;
            }
            word |= v << (8u * q);
            if (++kj == p.kw) {
                kj = 0u;
                if (++ki == p.kh) {
                    ki = 0u;
                    ++ci;
                }
            }
        }
        o[p.o_off + row * p.KW + wi] = word;
    }
}

void maxpool(uint i) {
    uint e = 4u * i;
    uint ohw = p.oh * p.ow;
    uint bc = e / ohw, pix = e % ohw;
    uint oy = pix / p.ow, ox = pix % p.ow;
    uint word = 0u;
    for (uint q = 0u; q < 4u && e + q < p.K; ++q) {
        int y0 = int(oy * p.sh) - p.ph, x0 = int(ox * p.sw) - p.pw;
        uint best = 0u;
        for (uint ki = 0u; ki < p.kh; ++ki) {
            int iy = y0 + int(ki * p.dh);
            if (iy < 0 || iy >= int(p.h)) continue;
            for (uint kj = 0u; kj < p.kw; ++kj) {
                int ix = x0 + int(kj * p.dw);
                if (ix < 0 || ix >= int(p.w)) continue;
                best = max(best, byte_at((bc * p.h + uint(iy)) * p.w + uint(ix)));
            }
        }
        word |= best << (8u * q);
        if (++ox == p.ow) {
            ox = 0u;
            if (++oy == p.oh) {
                oy = 0u;
                ++bc;
            }
        }
    }
    o[p.o_off + i] = word;
}

// The int8 GEMM's [N, oh * ow, O] bytes (row stride KW words) into NCHW [N, O, oh * ow] (K:
// the number of outputs, c: O, h: oh * ow), one invocation per output word.
void nchw(uint i) {
    uint e = 4u * i;
    uint plane = p.c * p.h;
    uint b = e / plane, r = e % plane;
    uint oc = r / p.h, pix = r % p.h;
    uint word = 0u;
    for (uint q = 0u; q < 4u && e + q < p.K; ++q) {
        word |= byte_at((b * p.h + pix) * 4u * p.KW + oc) << (8u * q);
        if (++pix == p.h) {
            pix = 0u;
            if (++oc == p.c) {
                oc = 0u;
                ++b;
            }
        }
    }
    o[p.o_off + i] = word;
}

void main() {
    uint i = global_index();
    if (i >= p.total) return;
    if (MODE == DEQUANT) {
        dequant(i);
    } else if (MODE == IM2COL) {
        im2col(i);
    } else if (MODE == MAXPOOL) {
        maxpool(i);
    } else {
        nchw(i);
    }
}

#version 450
#extension GL_GOOGLE_include_directive : require
// ONNX's QuantizeLinear to uint8 as ONNX Runtime computes it (cpu/isa/quant.h's qq_linear_u8,
// ``_cpu.quantize_linear_u8``; kernels/qtensor.py's quantize_onnx_u8):
//     out = clamp(x / scale, -zp, 255 - zp) rounded half to even, + zp      (NaN -> -zp)
// with x / scale the correctly rounded float32 quotient, which a shader's division need not be
// (nor an fma fused: Vulkan lets both be approximate). So: an estimate q = x * (1/scale), one
// correction step, then of q and its two bit neighbours the one whose residual x - c * scale is
// smallest, the residuals computed exactly in double precision (a product of two floats is exact
// in a double and the difference of two values this close is too; add, subtract and multiply are
// correctly rounded). A binary quotient never lies exactly half-way between two floats, so the
// smallest residual is the rounded quotient. Devices with shaderFloat64 only (the host checks).
// One invocation per output word of four values; the bytes past n are 0.
#include "common.glsl"

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };
layout(std430, set = 0, binding = 1) writeonly buffer O { uint o[]; };

// Mirrored by kernels/qtensor.py's quantize_onnx_u8 (7 words).
layout(push_constant) uniform Push {
    uint total, n;   // output words, elements
    uint x_off;      // floats
    uint o_off;      // words
    float scale, inv, zp;
} p;

float div_rounded(float v) {
    precise float q = v * p.inv;
    if (isnan(q) || isinf(q)) return q;  // NaN, +-inf (clamped the same as any large quotient)
    double xd = double(v), sd = double(p.scale);
    precise double r = xd - double(q) * sd;
    float best = float(double(q) + r * double(p.inv));
    precise double rb = abs(xd - double(best) * sd);
    for (int d = -1; d <= 1; d += 2) {
        float c = uintBitsToFloat(uint(int(floatBitsToUint(best)) + d));
        if (isnan(c) || isinf(c)) continue;
        precise double rc = abs(xd - double(c) * sd);
        if (rc < rb) {
            rb = rc;
            best = c;
        }
    }
    return best;
}

void main() {
    uint i = global_index();
    if (i >= p.total) return;
    uint word = 0u;
    for (uint q = 0u; q < 4u && 4u * i + q < p.n; ++q) {
        float y = div_rounded(x[p.x_off + 4u * i + q]);
        float c = y > -p.zp ? y : -p.zp;  // NaN: the low end
        c = c < 255.0 - p.zp ? c : 255.0 - p.zp;
        word |= uint(roundEven(c) + p.zp) << (8u * q);
    }
    o[p.o_off + i] = word;
}

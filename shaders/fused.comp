#version 450
#extension GL_GOOGLE_include_directive : require
// A fused elementwise program: up to 22 float32 ops over up to 8 operand slots, one element per
// invocation. The stream (gpucore/backends/vulkan/fusion.py) appends contiguous elementwise ops of
// one size to a pending program instead of dispatching each, so a chain of k such ops is one
// dispatch with no barriers between them. Every op still stores its result to its output slot
// (the tensors exist in Python); an op that reads the previous op's result takes it from a
// register instead of memory.
//
// Slots are contiguous arrays of n floats (element i is i), or one float broadcast to every i.
// A slot written by the program is never read by another invocation: the host only fuses when
// every range is disjoint from the others or identical to one, so the program is per-element.
//
// Instruction word (mirrored by fusion.py's encode()):
//   bits 0-6   op: 0-13 unary forward (unary_ops.glsl codes; 31 copies), 32 + c unary backward of code c
//              (a = saved, b = grad), 64 + c binary (ADD SUB MUL DIV POW MAXIMUM MINIMUM)
//   bits 7-10  operand a: slot 0-7, or SRC_ACC (the previous op's result)
//   bits 11-14 operand b: slot 0-7, SRC_ACC, or SRC_NONE
//   bits 15-17 output slot
#include "common.glsl"
#include "float_math.glsl"
#include "unary_ops.glsl"

layout(std430, set = 0, binding = 0) buffer S0 { float s0[]; };
layout(std430, set = 0, binding = 1) buffer S1 { float s1[]; };
layout(std430, set = 0, binding = 2) buffer S2 { float s2[]; };
layout(std430, set = 0, binding = 3) buffer S3 { float s3[]; };
layout(std430, set = 0, binding = 4) buffer S4 { float s4[]; };
layout(std430, set = 0, binding = 5) buffer S5 { float s5[]; };
layout(std430, set = 0, binding = 6) buffer S6 { float s6[]; };
layout(std430, set = 0, binding = 7) buffer S7 { float s7[]; };

// 32 words = 128 bytes, mirrored by fusion.py's Program.push().
layout(push_constant) uniform Push {
    uint n;
    uint off[8];         // element offset of each slot in its binding
    uint meta;           // bits 0-7: slot k is one broadcast float; bits 8-12: op count
    uint code[22];
} p;

const uint SRC_ACC = 15u, SRC_NONE = 14u;
const int BINARY = 64, BACKWARD = 32;

float load_slot(uint s, uint i) {
    uint j = p.off[s] + (((p.meta >> s) & 1u) != 0u ? 0u : i);
    if (s == 0u) return s0[j];
    if (s == 1u) return s1[j];
    if (s == 2u) return s2[j];
    if (s == 3u) return s3[j];
    if (s == 4u) return s4[j];
    if (s == 5u) return s5[j];
    if (s == 6u) return s6[j];
    return s7[j];
}

void store_slot(uint s, uint i, float v) {
    uint j = p.off[s] + i;
    if (s == 0u) s0[j] = v;
    else if (s == 1u) s1[j] = v;
    else if (s == 2u) s2[j] = v;
    else if (s == 3u) s3[j] = v;
    else if (s == 4u) s4[j] = v;
    else if (s == 5u) s5[j] = v;
    else if (s == 6u) s6[j] = v;
    else s7[j] = v;
}

float binary_op(int op, float x, float w) {
    if (op == 0) return x + w;
    if (op == 1) return x - w;
    if (op == 2) return x * w;
    if (op == 3) return x / w;
    if (op == 4) return c_pow(x, w);
    if (op == 5) return fmaximum(x, w);
    return fminimum(x, w);
}

void main() {
    uint i = global_index();
    if (i >= p.n) return;
    uint count = (p.meta >> 8) & 31u;
    float acc = 0.0;
    for (uint k = 0u; k < count; ++k) {
        uint w = p.code[k];
        int op = int(w & 127u);
        uint sa = (w >> 7) & 15u, sb = (w >> 11) & 15u;
        float a = sa == SRC_ACC ? acc : load_slot(sa, i);
        float b = sb == SRC_ACC ? acc : (sb == SRC_NONE ? 0.0 : load_slot(sb, i));
        if (op >= BINARY) {
            acc = binary_op(op - BINARY, a, b);
        } else if (op >= BACKWARD) {
            acc = unary_backward(op - BACKWARD, b, a);
        } else {
            acc = unary_forward(op, a);
        }
        store_slot((w >> 15) & 7u, i, acc);
    }
}

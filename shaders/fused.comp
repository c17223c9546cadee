#version 450
#extension GL_GOOGLE_include_directive : require
// A fused elementwise program: up to MAX_OPS float32 ops over up to MAX_SLOTS operand slots, one
// element per invocation. The stream (gpucore/backends/vulkan/fusion.py) appends contiguous
// elementwise ops of one size to a pending program instead of dispatching each, so a chain of k
// such ops is one dispatch with no barriers between them. Every op still stores its result to its
// output slot (the tensors exist in Python); an op that reads the previous op's result takes it
// from a register instead of memory.
//
// Slots are contiguous arrays of n floats (element i is i), or one float broadcast to every i.
// A slot written by the program is never read by another invocation: the host only fuses when
// every range is disjoint from the others or identical to one, so the program is per-element.
//
// Instruction word (encoded by fusion.py's encode(); fields and codes from cpu/opcodes.def):
//   bits 0 .. SRC_A_SHIFT-1   op: a unary code (unary_ops.glsl; COPY copies), BACKWARD + c the
//                             backward of activation c (a = saved, b = grad), BINARY + c an ARITH
//                             binary op (ADD SUB MUL DIV POW MAXIMUM MINIMUM)
//   from SRC_A_SHIFT          operand a: a slot, or SRC_ACC (the previous op's result)
//   from SRC_B_SHIFT          operand b: a slot, SRC_ACC, or SRC_NONE
//   from OUT_SHIFT            output slot
#include "common.glsl"
#include "float_math.glsl"
#include "unary_ops.glsl"

// MAX_SLOTS, MAX_OPS, SRC_NONE, SRC_ACC, COPY, BACKWARD, BINARY and the field shifts; ADD ..
#define GC_FUSED(NAME, value) const uint NAME = uint(value);
#define GC_BINARY(NAME, name, code, kind) const int NAME = code;
#include "opcodes.def"
#undef GC_FUSED
#undef GC_BINARY

layout(std430, set = 0, binding = 0) buffer S0 { float s0[]; };
layout(std430, set = 0, binding = 1) buffer S1 { float s1[]; };
layout(std430, set = 0, binding = 2) buffer S2 { float s2[]; };
layout(std430, set = 0, binding = 3) buffer S3 { float s3[]; };
layout(std430, set = 0, binding = 4) buffer S4 { float s4[]; };
layout(std430, set = 0, binding = 5) buffer S5 { float s5[]; };
layout(std430, set = 0, binding = 6) buffer S6 { float s6[]; };
layout(std430, set = 0, binding = 7) buffer S7 { float s7[]; };

// 2 + MAX_SLOTS + MAX_OPS = 32 words = 128 bytes, mirrored by fusion.py's Program.push().
layout(push_constant) uniform Push {
    uint n;
    uint off[MAX_SLOTS]; // element offset of each slot in its binding
    uint meta;           // bit k: slot k is one broadcast float; from COUNT_SHIFT: op count
    uint code[MAX_OPS];
} p;

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
    if (op == ADD) return x + w;
    if (op == SUB) return x - w;
    if (op == MUL) return x * w;
    if (op == DIV) return x / w;
    if (op == POW) return c_pow(x, w);
    if (op == MAXIMUM) return fmaximum(x, w);
    return fminimum(x, w);
}

void main() {
    uint i = global_index();
    if (i >= p.n) return;
    uint count = p.meta >> COUNT_SHIFT;
    float acc = 0.0;
    for (uint k = 0u; k < count; ++k) {
        uint w = p.code[k];
        int op = int(w & ((1u << SRC_A_SHIFT) - 1u));
        uint sa = (w >> SRC_A_SHIFT) & ((1u << (SRC_B_SHIFT - SRC_A_SHIFT)) - 1u);
        uint sb = (w >> SRC_B_SHIFT) & ((1u << (OUT_SHIFT - SRC_B_SHIFT)) - 1u);
        float a = sa == SRC_ACC ? acc : load_slot(sa, i);
        float b = sb == SRC_ACC ? acc : (sb == SRC_NONE ? 0.0 : load_slot(sb, i));
        if (op >= int(BINARY)) {
            acc = binary_op(op - int(BINARY), a, b);
        } else if (op >= int(BACKWARD)) {
            acc = unary_backward(op - int(BACKWARD), b, a);
        } else {
            acc = unary_forward(op, a);
        }
        store_slot((w >> OUT_SHIFT) & (MAX_SLOTS - 1u), i, acc);
    }
}

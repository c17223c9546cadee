#version 450
#extension GL_GOOGLE_include_directive : require
// Fused optimizer updates: one dispatch updates a parameter and its state buffers in place, with
// PyTorch's arithmetic (see cpu/optim.c, the same operations in the same order).
// VARIANT (constant 1): SGD, ADAM (Adam / AdamW) or RMSPROP.  Hyper-parameters and flags are
// push constants, mirrored by _push_optim in gpucore/backends/vulkan/kernels/optim.py.
// Bindings 2..4 are the state buffers of the variant; unused ones are bound to a dummy range.
#include "common.glsl"

layout(constant_id = 1) const int VARIANT = 0;

layout(std430, set = 0, binding = 0) buffer P { float p[]; };
layout(std430, set = 0, binding = 1) readonly buffer G { float g[]; };
// SGD: momentum_buffer; Adam: exp_avg; RMSprop: square_avg
layout(std430, set = 0, binding = 2) buffer S0 { float s0[]; };
// Adam: exp_avg_sq; RMSprop: grad_avg (centered)
layout(std430, set = 0, binding = 3) buffer S1 { float s1[]; };
// Adam: max_exp_avg_sq (amsgrad); RMSprop: momentum_buffer
layout(std430, set = 0, binding = 4) buffer S2 { float s2[]; };

layout(push_constant) uniform Push {
    uint n;
    uint p_off, g_off, s0_off, s1_off, s2_off;
    uint flags;  // MAXIMIZE | WEIGHT_DECAY | MOMENTUM | NESTEROV | FIRST | DECOUPLED | AMSGRAD | CENTERED
    float lr;    // SGD, RMSprop: lr; Adam: -lr / (1 - beta1^step)
    float wd;    // weight_decay
    float decay; // Adam, decoupled: 1 - lr * weight_decay
    float h0;    // SGD: momentum;        Adam: 1 - beta1;  RMSprop: alpha
    float h1;    // SGD: 1 - dampening;   Adam: beta2;      RMSprop: 1 - alpha
    float h2;    //                       Adam: 1 - beta2;  RMSprop: eps
    float h3;    //                       Adam: sqrt(1 - beta2^step); RMSprop: momentum
    float h4;    //                       Adam: eps
} pc;

// VARIANT's codes and the flags (cpu/opcodes.def; kernels/optim.py reads the same).
#define GC_OPTIM_VARIANT(NAME, value) const int NAME = value;
#define GC_OPTIM_FLAG(NAME, value) const uint NAME = uint(value);
#include "opcodes.def"
#undef GC_OPTIM_VARIANT
#undef GC_OPTIM_FLAG

bool has(uint f) { return (pc.flags & f) != 0u; }

// torch.lerp
float lerp_t(float a, float b, float w) {
    float d = b - a;
    return w < 0.5 ? a + w * d : b - d * (1.0 - w);
}

void sgd(uint i) {
    float pv = p[pc.p_off + i];
    float gr = g[pc.g_off + i];
    if (has(MAXIMIZE)) gr = -gr;
    if (has(WEIGHT_DECAY)) gr = gr + pc.wd * pv;
    if (has(MOMENTUM)) {
        float b = has(FIRST) ? gr : s0[pc.s0_off + i] * pc.h0 + pc.h1 * gr;
        s0[pc.s0_off + i] = b;
        gr = has(NESTEROV) ? gr + pc.h0 * b : b;
    }
    p[pc.p_off + i] = pv + (-pc.lr) * gr;
}

void adam(uint i) {
    float pv = p[pc.p_off + i];
    float gr = g[pc.g_off + i];
    if (has(MAXIMIZE)) gr = -gr;
    if (has(WEIGHT_DECAY)) {
        if (has(DECOUPLED)) pv = pv * pc.decay;
        else gr = gr + pc.wd * pv;
    }
    float m = lerp_t(s0[pc.s0_off + i], gr, pc.h0);
    float v = s1[pc.s1_off + i] * pc.h1 + pc.h2 * gr * gr;
    s0[pc.s0_off + i] = m;
    s1[pc.s1_off + i] = v;
    if (has(AMSGRAD)) {
        float a = s2[pc.s2_off + i];
        v = (isnan(a) || a > v) ? a : v;
        s2[pc.s2_off + i] = v;
    }
    float denom = sqrt(v) / pc.h3 + pc.h4;
    p[pc.p_off + i] = pv + pc.lr * m / denom;
}

void rmsprop(uint i) {
    float pv = p[pc.p_off + i];
    float gr = g[pc.g_off + i];
    if (has(MAXIMIZE)) gr = -gr;
    if (has(WEIGHT_DECAY)) gr = gr + pc.wd * pv;
    float s = s0[pc.s0_off + i] * pc.h0 + pc.h1 * gr * gr;
    s0[pc.s0_off + i] = s;
    float avg;
    if (has(CENTERED)) {
        float ga = lerp_t(s1[pc.s1_off + i], gr, pc.h1);
        s1[pc.s1_off + i] = ga;
        avg = sqrt(s - ga * ga);
    } else {
        avg = sqrt(s);
    }
    avg = avg + pc.h2;
    if (has(MOMENTUM)) {
        float b = s2[pc.s2_off + i] * pc.h3 + gr / avg;
        s2[pc.s2_off + i] = b;
        p[pc.p_off + i] = pv + (-pc.lr) * b;
    } else {
        p[pc.p_off + i] = pv + (-pc.lr) * gr / avg;
    }
}

void main() {
    uint i = global_index();
    if (i >= pc.n) return;
    if (VARIANT == SGD) sgd(i);
    else if (VARIANT == ADAM) adam(i);
    else rmsprop(i);
}

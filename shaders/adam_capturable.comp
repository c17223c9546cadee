#version 450
#extension GL_GOOGLE_include_directive : require
// Adam / AdamW for captured steps (gpucore/optim/_capturable.py): optim.comp's ADAM update with
// the step count read from a device buffer instead of push constants, so one recorded dispatch
// serves every replay. The bias corrections 1 - beta^t are computed per invocation as
// -expm1(t * log(beta)) (log(beta) comes from the host: it does not change between steps), which
// keeps float32 precision for the small 1 - beta2^t of the first steps.
// Push constants mirrored by _push in gpucore/backends/vulkan/kernels/optim_capturable.py.
#include "common.glsl"
layout(std430, set = 0, binding = 0) buffer P { float p[]; };
layout(std430, set = 0, binding = 1) readonly buffer G { float g[]; };
layout(std430, set = 0, binding = 2) buffer M { float m[]; };   // exp_avg
layout(std430, set = 0, binding = 3) buffer V { float v[]; };   // exp_avg_sq
layout(std430, set = 0, binding = 4) buffer X { float vx[]; };  // max_exp_avg_sq (amsgrad)
layout(std430, set = 0, binding = 5) readonly buffer T { float t[]; };  // the step count
layout(push_constant) uniform Push {
    uint n;
    uint p_off, g_off, m_off, v_off, x_off, t_off;
    uint flags;    // MAXIMIZE | WEIGHT_DECAY | DECOUPLED | AMSGRAD (opcodes.def)
    float lr;
    float wd;      // weight_decay
    float decay;   // decoupled: 1 - lr * weight_decay
    float w1;      // 1 - beta1
    float beta2;
    float w2;      // 1 - beta2
    float log_b1;  // log(beta1)
    float log_b2;  // log(beta2)
    float eps;
} pc;
#define GC_OPTIM_FLAG(NAME, value) const uint NAME = uint(value);
#include "opcodes.def"
#undef GC_OPTIM_FLAG

bool has(uint f) { return (pc.flags & f) != 0u; }

// torch.lerp, as optim.comp
float lerp_t(float a, float b, float w) {
    float d = b - a;
    return w < 0.5 ? a + w * d : b - d * (1.0 - w);
}

// exp(x) - 1 without cancellation near 0 (Taylor terms to x^7 below |x| = 0.25)
float expm1_f(float x) {
    if (abs(x) >= 0.25) return exp(x) - 1.0;
    return x * (1.0 + x * (0.5 + x * (1.0 / 6.0 + x * (1.0 / 24.0 + x * (1.0 / 120.0
        + x * (1.0 / 720.0 + x * (1.0 / 5040.0)))))));
}

void main() {
    uint i = global_index();
    if (i >= pc.n) return;
    float step = t[pc.t_off];
    float bc1 = -expm1_f(step * pc.log_b1);
    float bc2_sqrt = sqrt(-expm1_f(step * pc.log_b2));
    float pv = p[pc.p_off + i];
    float gr = g[pc.g_off + i];
    if (has(MAXIMIZE)) gr = -gr;
    if (has(WEIGHT_DECAY)) {
        if (has(DECOUPLED)) pv = pv * pc.decay;
        else gr = gr + pc.wd * pv;
    }
    float mv = lerp_t(m[pc.m_off + i], gr, pc.w1);
    float vv = v[pc.v_off + i] * pc.beta2 + pc.w2 * gr * gr;
    m[pc.m_off + i] = mv;
    v[pc.v_off + i] = vv;
    if (has(AMSGRAD)) {
        float a = vx[pc.x_off + i];
        vv = (isnan(a) || a > vv) ? a : vv;
        vx[pc.x_off + i] = vv;
    }
    float denom = sqrt(vv) / bc2_sqrt + pc.eps;
    p[pc.p_off + i] = pv + (-(pc.lr / bc1)) * mv / denom;
}

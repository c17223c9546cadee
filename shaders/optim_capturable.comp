#version 450
#extension GL_GOOGLE_include_directive : require
// Adamax, NAdam and RAdam for captured steps (gpucore/optim/_capturable.py): every scalar
// that depends on the step count is computed here from the count in a device buffer, so one
// recorded dispatch serves every replay (adam_capturable.comp does the same for Adam / AdamW).
// The host passes only what does not change between steps (logarithms of the betas, constants
// of RAdam's rectification).
//
// VARIANT (constant 1, cpu/opcodes.def's GC_OPTIM_VARIANT):
//   ADAMAX    m = lerp(m, g, 1 - b1); u = max(b2 u, |g| + eps); p -= lr / (1 - b1^t) * m / u
//   NADAM     PyTorch's NAdam with mu_t, mu_{t+1} from t and mu_product (read from MU, already
//             multiplied by mu_t: NADAM_MU ran first)
//   RADAM     PyTorch's RAdam; rho_t is computed without cancellation (see rho_t below)
//   NADAM_MU  one invocation: MU *= mu_t (the product of mu_1 .. mu_t), before NADAM
// Push constants mirrored by _push in gpucore/backends/vulkan/kernels/optim_capturable.py.
#include "common.glsl"
layout(constant_id = 1) const int VARIANT = 3;
layout(std430, set = 0, binding = 0) buffer P { float p[]; };
layout(std430, set = 0, binding = 1) readonly buffer G { float g[]; };
layout(std430, set = 0, binding = 2) buffer M { float m[]; };   // exp_avg
layout(std430, set = 0, binding = 3) buffer V { float v[]; };   // exp_inf / exp_avg_sq
layout(std430, set = 0, binding = 4) readonly buffer T { float t[]; };  // the step count
layout(std430, set = 0, binding = 5) buffer U { float mu[]; };  // NAdam's mu_product
layout(push_constant) uniform Push {
    uint n;
    uint p_off, g_off, m_off, v_off, t_off, mu_off;
    uint flags;    // MAXIMIZE | WEIGHT_DECAY | DECOUPLED (opcodes.def)
    float lr;
    float wd;      // weight_decay
    float decay;   // decoupled: 1 - lr * weight_decay
    float w1;      // 1 - beta1
    float beta1;
    float beta2;
    float w2;      // 1 - beta2
    float log_b1;  // log(beta1)
    float log_b2;  // log(beta2)
    float eps;
    float c0;      // NAdam: momentum_decay * log(0.96); RAdam: rho_inf - 2 / L (L = -log b2)
    float c1;      // RAdam: rho_inf / ((rho_inf - 4) (rho_inf - 2))
} pc;
#define GC_OPTIM_FLAG(NAME, value) const uint NAME = uint(value);
#define GC_OPTIM_VARIANT(NAME, value) const int NAME = value;
#include "opcodes.def"
#undef GC_OPTIM_FLAG
#undef GC_OPTIM_VARIANT

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

// 1 / expm1(y) - 1 / y for y > 0: smooth (-1/2 at 0), so rho_t = rho_inf - 2t b2^t / (1 - b2^t)
// = (rho_inf - 2/L) - 2t f(tL) with L = -log(b2) loses nothing to the cancellation of the
// direct form (rho_inf and the subtracted term are both about 2 / (1 - b2), rho_t about t).
float inv_expm1_minus_inv(float y) {
    if (y >= 0.5) return 1.0 / expm1_f(y) - 1.0 / y;
    float y2 = y * y;
    return -0.5 + y * (1.0 / 12.0 + y2 * (-1.0 / 720.0 + y2 * (1.0 / 30240.0
        - y2 * (1.0 / 1209600.0))));
}

float mu_of(float step) {  // beta1 * (1 - 0.5 * 0.96^(step * momentum_decay))
    return pc.beta1 * (1.0 - 0.5 * exp(step * pc.c0));
}

void main() {
    uint i = global_index();
    float step = t[pc.t_off];
    if (VARIANT == NADAM_MU) {
        if (i == 0u) mu[pc.mu_off] = mu[pc.mu_off] * mu_of(step);
        return;
    }
    if (i >= pc.n) return;
    float pv = p[pc.p_off + i];
    float gr = g[pc.g_off + i];
    if (has(MAXIMIZE)) gr = -gr;
    if (has(WEIGHT_DECAY)) {
        if (has(DECOUPLED)) pv = pv * pc.decay;
        else gr = gr + pc.wd * pv;
    }
    float mv = lerp_t(m[pc.m_off + i], gr, pc.w1);
    m[pc.m_off + i] = mv;
    float bc1 = -expm1_f(step * pc.log_b1);
    if (VARIANT == ADAMAX) {
        float u = max(v[pc.v_off + i] * pc.beta2, abs(gr) + pc.eps);
        v[pc.v_off + i] = u;
        p[pc.p_off + i] = pv + (-(pc.lr / bc1)) * (mv / u);
        return;
    }
    float vv = v[pc.v_off + i] * pc.beta2 + pc.w2 * gr * gr;
    v[pc.v_off + i] = vv;
    float bc2 = -expm1_f(step * pc.log_b2);
    if (VARIANT == NADAM) {
        float mu_t = mu_of(step);
        float mu_next = mu_of(step + 1.0);
        float prod = mu[pc.mu_off];
        float denom = sqrt(vv / bc2) + pc.eps;
        pv = pv + (-pc.lr * (1.0 - mu_t) / (1.0 - prod)) * (gr / denom);
        p[pc.p_off + i] = pv + (-pc.lr * mu_next / (1.0 - prod * mu_next)) * (mv / denom);
        return;
    }
    // RADAM
    float rho_t = pc.c0 - 2.0 * step * inv_expm1_minus_inv(-step * pc.log_b2);
    float m_hat = mv / bc1;
    if (rho_t > 5.0) {
        float rect = sqrt((rho_t - 4.0) * (rho_t - 2.0) * pc.c1 / rho_t);
        float adaptive = sqrt(bc2) / (sqrt(vv) + pc.eps);
        p[pc.p_off + i] = pv - m_hat * pc.lr * adaptive * rect;
    } else {
        p[pc.p_off + i] = pv - m_hat * pc.lr;
    }
}

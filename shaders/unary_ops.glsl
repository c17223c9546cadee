// Unary math, activations and activation backwards, selected by an op code argument (a
// specialization constant in unary.comp, a push-constant program word in fused.comp). The
// activation formulas are activation.glsl's, so the GEMM epilogue, the unary kernel and fused
// programs round alike. Include-only.
// Op codes: the unary codes of cpu/opcodes.def (gpucore._cpu's UNARY_* constants), as NEG, ABS, ...
#ifndef UNARY_OPS_GLSL
#define UNARY_OPS_GLSL
#include "activation.glsl"
#include "float_math.glsl"
#include "trig.glsl"
#include "special.glsl"

#define GC_UNARY(NAME, name, code) const int NAME = code;
#include "opcodes.def"
#undef GC_UNARY
const float SQRT_2_PI = 0.7978845608028654;
const float INV_SQRT2 = 0.7071067811865476;
const float INV_SQRT_2PI = 0.3989422804014327;

// log as the C library's: subnormal inputs (which drivers may flush to zero in arithmetic) are
// decoded from their bits, m * 2^-149.
float log_(float v) {
    uint b = floatBitsToUint(v);
    if (b > 0u && b < 0x00800000u) return log(float(b)) - 149.0 * 0.69314718055994531;
    if (b > 0x80000000u && b < 0x80800000u) return QNAN;  // negative subnormal
    return log(v);
}

float unary_forward(int op, float v) {
    if (op == NEG) return -v;
    if (op == ABS) return abs(v);
    if (op == EXP) return exp(v);
    if (op == LOG) return log_(v);
    if (op == SQRT) return sqrt(v);
    if (op == RELU) return activate(ACT_RELU, v);
    if (op == SIGMOID) return act_sigmoid(v);
    if (op == TANH) return act_tanh(v);
    if (op == GELU) return activate(ACT_GELU, v);
    if (op == GELU_TANH) return activate(ACT_GELU_TANH, v);
    if (op == SIGN) return isnan(v) ? v : sign(v);
    if (op == SIN) return sin_(v);
    if (op == COS) return cos_(v);
    if (op == RECIPROCAL) return 1.0 / v;
    if (op == FLOOR) return floor(v);
    if (op == CEIL) return ceil(v);
    if (op == TRUNC) return trunc(v);
    if (op == ROUND) return roundEven(v);
    if (op == ERF) return erf_(v);
    if (op == ERFC) return act_erfc(v);
    if (op == ERFINV) return erfinv_(v);
    if (op == EXPM1) return expm1_(v);
    if (op == EXP2) return exp2_(v);
    if (op == LOG2) return log2_(v);
    if (op == LOG10) return log10_(v);
    if (op == LGAMMA) return lgamma_(v);
    if (op == DIGAMMA) return digamma_(v);
    return v;
}

// grad * f'(s): s is x for RELU/GELU*, y = f(x) for SIGMOID/TANH.
float unary_backward(int op, float gr, float s) {
    if (op == RELU) return s > 0.0 ? gr : 0.0;
    if (op == SIGMOID) return gr * s * (1.0 - s);
    if (op == TANH) return gr * (1.0 - s * s);
    if (op == GELU) {
        float cdf = 0.5 * act_erfc(-s * INV_SQRT2);
        float pdf = exp(-0.5 * s * s) * INV_SQRT_2PI;
        return gr * (cdf + s * pdf);
    }
    if (op == GELU_TANH) {
        // 0.5 (1 + tanh u) = sigmoid(2u) and 1 - tanh^2 u = 4 sigmoid(2u) sigmoid(-2u): no
        // cancellation in either tail
        float u = SQRT_2_PI * (s + 0.044715 * s * s * s);
        float sp = act_sigmoid(2.0 * u), sn = act_sigmoid(-2.0 * u);
        float du = SQRT_2_PI * (1.0 + 3.0 * 0.044715 * s * s);
        return gr * (sp + 2.0 * s * sp * sn * du);
    }
    return gr;
}

#endif

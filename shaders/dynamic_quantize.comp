#version 450
#extension GL_GOOGLE_include_directive : require
// ONNX DynamicQuantizeLinear (uint8) of float32 x, bit for bit cpu/qdynamic.c (the CPU's
// onnx.reference float32 arithmetic; kernels/qdynamic.py records it):
//     hi = max(0, max x), lo = min(0, min x)              (a NaN anywhere: scale NaN, zp 255)
//     scale = (hi == lo ? 1 : hi - lo) / 255
//     zp = rint(clamp(0 - lo / scale, 0, 255))             (NaN -> 255)
//     y = clamp(x / scale, -zp, 255 - zp) rounded half to even, + zp   (NaN -> 0)
// with every float32 operation correctly rounded as on the CPU. A shader's division need not be
// (Vulkan allows 2.5 ulp, and float64 division no better than float32's), nor may a driver keep
// subnormals, which a range of tiny values gives the scale, so:
// - the range is taken on the bits (an order-preserving integer key: exact, NaN flagged apart,
//   subnormals compared as they are);
// - hi - lo is computed exactly in float64 and rounded once; each quotient is div_rn below: an
//   estimate, one correction step and the choice among it and its two float neighbours by their
//   residuals v - c * s, exact in float64 (a product of two floats is; so is the difference of
//   two values this close); float <-> double conversions of subnormals are done on the bits.
// Devices with shaderFloat64 only (the host checks).
//
// TORCH (constant 2) = 1: PyTorch's quantize_dynamic parameters instead, bit for bit
// cpu/qdynamic.c's gc_dynamic_quantize_torch_u8 (kernels/qdynamic.py's torch_* functions), every
// operation float32, over the same range:
//     scale = max((hi - lo) / 255, FLT_EPSILON), zp = clamp(-rint(lo / scale), 0, 255)
//     inv = 1 / scale                          (ws[2]: _cpu.quantize_u8's reciprocal)
//     y = clamp(rint(fl32(fl32(x * inv) + zp)), 0, 255)   (NaN -> 255)
// a range whose width hi - lo is not finite in float32 (inf or NaN in x, or finite extremes
// whose distance overflows) giving scale NaN, zero point 0 and inv NaN. The divisions are
// div_rn's; x * inv and + zp are single float32 operations, correctly rounded on Vulkan (a
// flushed subnormal product or input changes nothing: rint(tiny + zp) = zp either way), and
// y's rows are padded to whole words for qgemm.comp (QUANTIZE: p.parts holds the row length K,
// one invocation per output word of rows of ceil(K / 4) words, pad bytes 0).
//
// Modes (MODE, constant 1), over one workspace ws (binding 1, words from ws_off): ws[0] the
// scale's bits, ws[1] the zero point, ws[4 + 3 g ..] workgroup g's partial range (min key, max
// key, NaN seen):
//   RANGE: workgroup g reduces x[g * WG + lane + k * parts * WG] to its partial range; with
//       parts = 1, the one workgroup writes the scale and zero point at once;
//   FINISH: one workgroup reduces the parts partial ranges and writes the scale and zero point;
//   QUANTIZE: y (binding 2) from x and ws[0..1], one invocation per output word of four bytes
//       (the bytes past n are 0).
#include "common.glsl"

layout(constant_id = 0) const uint WG = 64u;
layout(constant_id = 1) const uint MODE = 0u;
layout(constant_id = 2) const uint TORCH = 0u;  // PyTorch's parameters and rounding
const uint RANGE = 0u;  // mirrored by kernels/qdynamic.py
const uint FINISH = 1u;
const uint QUANTIZE = 2u;

layout(std430, set = 0, binding = 0) readonly buffer X { uint x[]; };  // float32 bits
layout(std430, set = 0, binding = 1) buffer W { uint ws[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Y { uint y[]; };

// Mirrored by kernels/qdynamic.py's _push calls (5 words).
layout(push_constant) uniform Push {
    uint n;       // elements of x
    uint x_off;   // words
    uint ws_off;  // words
    uint y_off;   // words
    uint parts;   // RANGE: workgroups in the grid; FINISH: partial ranges to reduce
} p;

const uint QNAN = 0x7fc00000u;  // the C NAN the CPU's range gives, divided: its scale's bits

bool nan_bits(uint b) { return (b & 0x7fffffffu) > 0x7f800000u; }

// ------------------------------------------------------------------ exact float <-> double
// 2^-149 and 2^149 built from their bits (literals would round through the compiler)
double two_m149() { return packDouble2x32(uvec2(0u, (1023u - 149u) << 20)); }
double two_p149() { return packDouble2x32(uvec2(0u, (1023u + 149u) << 20)); }

double f2d(float f) {
    uint b = floatBitsToUint(f);
    if ((b & 0x7f800000u) != 0u) return double(f);  // normal, inf, NaN
    double m = double(b & 0x7fffffu) * two_m149();    // zero or subnormal, decoded
    return (b >> 31) != 0u ? -m : m;
}

// d rounded to float32, half to even; below 2^-126 rounded here on the scaled value (exact:
// a power of two), so no driver flushes the subnormal result.
float d2f(double d) {
    double a = abs(d);
    if (!(a < 1.1754943508222875e-38LF)) return float(d);  // normal range, inf, NaN
    uint b = uint(roundEven(a * two_p149()));  // <= 2^23: 2^23 is the smallest normal's bits
    return uintBitsToFloat(b | (d < 0.0LF ? 0x80000000u : 0u));
}

// The correctly rounded float32 quotient v / s (IEEE 754's, the CPU's), given sd = f2d(s) and
// inv ~ 1 / sd. Special operands decided on the bits.
float div_rn(float v, float s, double sd, double inv) {
    uint bv = floatBitsToUint(v), bs = floatBitsToUint(s);
    uint sign = (bv ^ bs) & 0x80000000u;
    uint av = bv & 0x7fffffffu, as = bs & 0x7fffffffu;
    if (av > 0x7f800000u || as > 0x7f800000u) return uintBitsToFloat(QNAN);
    if (av == 0x7f800000u) return uintBitsToFloat(as == 0x7f800000u ? QNAN : sign | 0x7f800000u);
    if (as == 0x7f800000u) return uintBitsToFloat(sign);         // finite / inf: a signed 0
    if (as == 0u) return uintBitsToFloat(av == 0u ? QNAN : sign | 0x7f800000u);
    if (av == 0u) return uintBitsToFloat(sign);
    double xd = f2d(v);
    float c = d2f(xd * inv);
    if (isinf(c)) return c;  // beyond float32 (never in DynamicQuantizeLinear: |x / s| < 511)
    precise double r = xd - f2d(c) * sd;
    precise double q = f2d(c) + r * inv;  // one correction step: within a float ulp of v / s
    float best = d2f(q);
    if (isinf(best)) return best;
    precise double rb = abs(xd - f2d(best) * sd);
    for (int k = -1; k <= 1; k += 2) {
        uint bc = uint(int(floatBitsToUint(best)) + k);
        if ((bc & 0x7f800000u) == 0x7f800000u) continue;  // past the finite range (or -0 - 1)
        float cand = uintBitsToFloat(bc);
        precise double rc = abs(xd - f2d(cand) * sd);
        if (rc < rb || (rc == rb && (bc & 1u) == 0u)) {  // a tie (subnormal results): even
            rb = rc;
            best = cand;
        }
    }
    return best;
}

// ------------------------------------------------------------------ range and parameters
// Order-preserving keys of non-NaN floats: -0 and +0 both 0 (the CPU's range starts at +0 and
// replaces it only by a value strictly beyond it, so either zero leaves it +0).
int key(uint b) { return (b & 0x80000000u) != 0u ? -int(b & 0x7fffffffu) : int(b); }
float unkey(int k) { return k < 0 ? uintBitsToFloat(uint(-k) | 0x80000000u) : intBitsToFloat(k); }

// 2^128 - 2^103 from its bits, float32's overflow threshold
double span_inf() { return packDouble2x32(uvec2(0xf0000000u, 0x47efffffu)); }
const float FLT_EPS = 1.1920928955078125e-07;  // 2^-23, C's FLT_EPSILON

// PyTorch's: ws[0] = scale, ws[1] = zero point, ws[2] = 1 / scale (TORCH's comment above)
void write_params_torch(int klo, int khi, uint nan) {
    uint sbits = QNAN, zp = 0u, ibits = QNAN;
    // hi - lo = hi + |lo| exact in float64 (or rounding to the larger term either way, as in
    // write_params); float32's rounds to inf at 2^128 - 2^103 and above (a tie goes to 2^128)
    double span = f2d(unkey(khi)) - f2d(unkey(klo));
    if (nan == 0u && span < span_inf()) {
        float s = div_rn(d2f(span), 255.0, 255.0LF, 1.0LF / 255.0LF);
        s = s < FLT_EPS ? FLT_EPS : s;  // normal from here: [2^-23, FLT_MAX / 255]
        double sd = double(s);
        double inv = 1.0LF / sd;
        float r = -roundEven(div_rn(unkey(klo), s, sd, inv));  // lo <= 0: r >= 0 (or -0)
        r = r < 0.0 ? 0.0 : r;
        r = r > 255.0 ? 255.0 : r;
        zp = uint(r);
        sbits = floatBitsToUint(s);
        ibits = floatBitsToUint(div_rn(1.0, s, sd, inv));
    }
    ws[p.ws_off] = sbits;
    ws[p.ws_off + 1u] = zp;
    ws[p.ws_off + 2u] = ibits;
}

// ws[0] = scale, ws[1] = zero point from the whole range
void write_params(int klo, int khi, uint nan) {
    if (TORCH != 0u) {
        write_params_torch(klo, khi, nan);
        return;
    }
    uint sbits, zp;
    if (nan != 0u) {
        sbits = QNAN;
        zp = 255u;
    } else {
        float lo = unkey(klo), hi = unkey(khi);
        // hi - lo = hi + |lo|: exact in float64, or (exponents more than 29 apart) the larger
        // term rounds to itself either way; then rounded once
        float d = klo == khi ? 1.0 : d2f(f2d(hi) - f2d(lo));
        float s = div_rn(d, 255.0, 255.0LF, 1.0LF / 255.0LF);
        sbits = floatBitsToUint(s);
        double sd = f2d(s);
        float q = div_rn(lo, s, sd, 1.0LF / sd);  // (s = 0 or inf: div_rn's special cases)
        uint qb = floatBitsToUint(q);
        // z = 0 - q (0 for q = +-0), then < 255 ? z : 255 (NaN -> 255), > 0 ? z : 0, rint
        float z = nan_bits(qb) ? 255.0 : ((qb & 0x7fffffffu) == 0u ? 0.0 : -q);
        z = z < 255.0 ? z : 255.0;
        z = z > 0.0 ? z : 0.0;
        zp = uint(roundEven(z));
    }
    ws[p.ws_off] = sbits;
    ws[p.ws_off + 1u] = zp;
}

shared int s_lo[WG];
shared int s_hi[WG];
shared uint s_nan[WG];

// The workgroup's (min key, max key, NaN) into lane 0's slots.
void reduce_wg(uint lane, int lo, int hi, uint nan) {
    s_lo[lane] = lo;
    s_hi[lane] = hi;
    s_nan[lane] = nan;
    barrier();
    for (uint half_ = WG / 2u; half_ > 0u; half_ >>= 1) {
        if (lane < half_) {
            s_lo[lane] = min(s_lo[lane], s_lo[lane + half_]);
            s_hi[lane] = max(s_hi[lane], s_hi[lane + half_]);
            s_nan[lane] |= s_nan[lane + half_];
        }
        barrier();
    }
}

void range_mode() {
    uint lane = gl_LocalInvocationID.x, g = gl_WorkGroupID.x;
    int lo = 0, hi = 0;
    uint nan = 0u;
    uint step = p.parts * WG;
    for (uint i = g * WG + lane; i < p.n; i += step) {
        uint b = x[p.x_off + i];
        if (nan_bits(b)) {
            nan = 1u;
        } else {
            int k = key(b);
            lo = min(lo, k);
            hi = max(hi, k);
        }
    }
    reduce_wg(lane, lo, hi, nan);
    if (lane != 0u) return;
    if (p.parts == 1u) {
        write_params(s_lo[0], s_hi[0], s_nan[0]);
    } else {
        uint o = p.ws_off + 4u + 3u * g;
        ws[o] = uint(s_lo[0]);
        ws[o + 1u] = uint(s_hi[0]);
        ws[o + 2u] = s_nan[0];
    }
}

void finish_mode() {
    uint lane = gl_LocalInvocationID.x;
    int lo = 0, hi = 0;
    uint nan = 0u;
    for (uint g = lane; g < p.parts; g += WG) {
        uint o = p.ws_off + 4u + 3u * g;
        lo = min(lo, int(ws[o]));
        hi = max(hi, int(ws[o + 1u]));
        nan |= ws[o + 2u];
    }
    reduce_wg(lane, lo, hi, nan);
    if (lane == 0u) write_params(s_lo[0], s_hi[0], s_nan[0]);
}

// ------------------------------------------------------------------ quantize
bool normal_bits(uint b) { return (b & 0x7f800000u) != 0u && (b & 0x7f800000u) != 0x7f800000u; }

// cpu/isa/quant.h's qq_linear_u8 with the scale and zero point of ws. Only the byte is kept, so
// a quotient estimate q = x * (1 / scale) (relative error below 2^-21, Vulkan's float64
// division included) whose distance from the nearest half-integer exceeds 2^-19 |q| rounds as
// the exact quotient does: x / scale and its float lie strictly on q's side. Other quotients
// (near a tie; a subnormal or special x or scale) take div_rn.
void quantize_mode() {
    uint i = global_index();
    if (4u * i >= p.n) return;
    float s = uintBitsToFloat(ws[p.ws_off]);
    float zp = float(ws[p.ws_off + 1u]);
    double sd = f2d(s);
    double inv = 1.0LF / sd;
    float inv_f = float(inv);
    bool fast = normal_bits(floatBitsToUint(s)) && normal_bits(floatBitsToUint(inv_f));
    float lo = -zp, hi = 255.0 - zp;
    uint word = 0u;
    for (uint q = 0u; q < 4u && 4u * i + q < p.n; ++q) {
        uint b = x[p.x_off + 4u * i + q];
        float r;
        precise float e = uintBitsToFloat(b) * inv_f;
        precise float f = e - floor(e);  // exact
        if (fast && normal_bits(b) && abs(f - 0.5) > abs(e) * (1.0 / 524288.0)) {
            r = roundEven(e);  // (not a tie)
        } else {
            float v = div_rn(uintBitsToFloat(b), s, sd, inv);
            r = roundEven(nan_bits(floatBitsToUint(v)) ? lo : v);
        }
        r = r > lo ? r : lo;  // round(clamp(v)) = clamp(round(v)) for integer bounds
        r = r < hi ? r : hi;
        word |= uint(r + zp) << (8u * q);
    }
    y[p.y_off + i] = word;
}

// cpu/isa/quant.h's qq_torch_u8 with ws's inv and zero point (TORCH), into rows of whole
// words: invocation i writes word i % kw of row i / kw (K = p.parts floats per row).
void quantize_torch_mode() {
    uint i = global_index();
    uint k = p.parts, kw = (k + 3u) / 4u;
    if (k == 0u || i >= (p.n / k) * kw) return;
    uint m = i / kw, c = i % kw;
    float inv = uintBitsToFloat(ws[p.ws_off + 2u]);
    float zp = float(ws[p.ws_off + 1u]);
    uint word = 0u;
    for (uint q = 0u; q < 4u && 4u * c + q < k; ++q) {
        precise float v = uintBitsToFloat(x[p.x_off + m * k + 4u * c + q]) * inv;
        v = v + zp;  // (two roundings, as the C code's two statements)
        float r = roundEven(v);
        r = isnan(r) ? 255.0 : clamp(r, 0.0, 255.0);
        word |= uint(r) << (8u * q);
    }
    y[p.y_off + i] = word;
}

void main() {
    if (MODE == RANGE) {
        range_mode();
    } else if (MODE == FINISH) {
        finish_mode();
    } else if (TORCH != 0u) {
        quantize_torch_mode();
    } else {
        quantize_mode();
    }
}

// float16 / bfloat16 <-> float32 conversions with integer instructions only, so that every device
// rounds the same way whatever its float16 denormal and rounding-mode support: the bits match
// the CPU path (numpy's npy_floatbits_to_halfbits / halfbits_to_floatbits, and gpucore.dtypes'
// f32_to_bf16 / bf16_to_f32). Storage stays 32-bit words holding two 16-bit values (the low half
// first), so no 16-bit storage feature is needed either.
//
// f32 -> f16: round to nearest even; overflow to inf; subnormal results rounded; NaN keeps its
// sign and top 10 payload bits (made non-zero). f32 -> bf16: round to nearest even; NaN keeps its
// top bits and is made quiet. f16 / bf16 -> f32: exact (NaN payload shifted, as numpy).

float f16_to_f32(uint h) {
    uint s = (h & 0x8000u) << 16;
    uint e = (h >> 10) & 0x1fu;
    uint m = h & 0x3ffu;
    if (e == 0x1fu) return uintBitsToFloat(s | 0x7f800000u | (m << 13));
    if (e == 0u) {
        // zero or subnormal: m * 2^-24, a normal float32 computed exactly
        return uintBitsToFloat(s | floatBitsToUint(float(m) * 5.9604644775390625e-8));
    }
    return uintBitsToFloat(s | ((e + 112u) << 23) | (m << 13));
}

uint f32_to_f16(float f) {
    uint x = floatBitsToUint(f);
    uint s = (x >> 16) & 0x8000u;
    uint a = x & 0x7fffffffu;
    if (a >= 0x7f800000u) {
        if (a == 0x7f800000u) return s | 0x7c00u;
        uint r = 0x7c00u + ((a & 0x7fffffu) >> 13);
        return s | (r == 0x7c00u ? 0x7c01u : r);
    }
    if (a >= 0x477ff000u) return s | 0x7c00u;  // at or past 65520: rounds to inf
    if (a < 0x38800000u) {                     // below 2^-14: a subnormal half or zero
        uint e = a >> 23;
        if (e < 102u) return s;                // below 2^-25 (float32 subnormals included)
        uint m = (a & 0x7fffffu) | 0x800000u;
        uint shift = 126u - e;                 // 14 .. 24
        uint q = m >> shift;
        uint r = m & ((1u << shift) - 1u);
        uint hw = 1u << (shift - 1u);
        if (r > hw || (r == hw && (q & 1u) != 0u)) q += 1u;
        return s | q;
    }
    uint q = (a >> 13) - (112u << 10);
    uint r = a & 0x1fffu;
    if (r > 0x1000u || (r == 0x1000u && (q & 1u) != 0u)) q += 1u;  // a carry bumps the exponent
    return s | q;
}

float bf16_to_f32(uint h) {
    return uintBitsToFloat(h << 16);
}

uint f32_to_bf16(float f) {
    uint x = floatBitsToUint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;
    return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

// HALF_F16 / HALF_BF16: which 16-bit format a shader's constant selects.
const int HALF_F16 = 1;
const int HALF_BF16 = 2;

float half_to_f32(int kind, uint h) {
    return kind == HALF_BF16 ? bf16_to_f32(h) : f16_to_f32(h);
}

uint f32_to_half(int kind, float f) {
    return kind == HALF_BF16 ? f32_to_bf16(f) : f32_to_f16(f);
}

// Element i (in 16-bit units) of a buffer of 32-bit words.
#define HALF_AT(buf, i) ((buf[(i) >> 1] >> (16u * (uint(i) & 1u))) & 0xffffu)

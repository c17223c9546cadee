#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#if DOT
#extension GL_EXT_spirv_intrinsics : require
#endif
#if SHUFFLE
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
// Int8 GEMM with cpu/qgemm.c's requantization epilogue, bit for bit (kernels/qgemm.py):
//     c[i, j] = sum_k (a[i, k] - a_zp) * w[j, k]                       exact int32
//     out[i, j] = the epilogue of c (OUT, below; cpu/kernels.h's GC_QOUT_* forms)
// a: uint8 or int8 activations [M, K], bytes packed four to a 32-bit word (the device's int8
// storage, as binary.comp's byte types), each row starting on a word. w: int8 weights B [N, K]
// (nn.Linear's layout) packed once by the host as word columns: word kw of column j at
// w_off + kw * ldw + j, K padded with zero bytes to KW words and N with zero columns to a
// multiple of 4, so an invocation loads its four columns' words as one uvec4 and whatever a's
// bytes past K hold adds 0.
//
// SPIR-V modules from this source (tools/build_shaders.py's VARIANTS; each also as *_sg with
// SHUFFLE=1, the activation words passed round the subgroup, for CPU-type devices):
//   qgemm_dot (DOT=1): OpSUDot, VK_KHR_shader_integer_dot_product's packed 4x8 mixed-signedness
//       dot product (GL_EXT_integer_dot_product's dotPacked4x8EXT(int, uint); written here
//       through GL_EXT_spirv_intrinsics because glslang before 14 lacks that extension, the same
//       instruction either way). Only on devices whose shaderIntegerDotProduct feature the
//       context enabled: the module declares the DotProduct capabilities.
//   qgemm (DOT=0): the same sums with plain int32 multiply-adds, for every device; it also holds
//       the activation quantizer (MODE QUANTIZE).
// Sums: a_u8 = a ^ 0x80 for int8 activations (flip), so acc = sum a_u8 * w is a sum of
// uint8 x int8 products whose every partial sum lies within int32 for K <= 65536; c = acc -
// zp_u8 * colsum[j] wraps in uint32 to the true value, which fits int32 (cpu/isa/qgemm.h's
// QEPI_CORR). Integer sums are exact in any order: only the epilogue's float operations must
// follow the C code's order, each rounded on its own (`precise`: no contraction into fma).
//
// One invocation computes TM rows x TN columns; the workgroup's invocations take neighbouring
// column blocks of the same rows (so A's loads are the same across it). Rows and columns past
// the edges are clamped on load (computed, never stored). No shared memory, no barriers.
#include "common.glsl"

layout(constant_id = 1) const uint MODE = 0u;  // GEMM or QUANTIZE
layout(constant_id = 2) const uint TM = 4u;    // rows per invocation
layout(constant_id = 3) const uint TN = 4u;    // columns per invocation (a multiple of 4)
layout(constant_id = 4) const uint OUT = 1u;   // O_I32, O_F32, O_U8, O_S8
layout(constant_id = 5) const uint SG = 8u;    // SHUFFLE: the subgroup size

// mirrored by kernels/qgemm.py (_GEMM, _QUANTIZE; OUT_MODES = GC_QOUT_* of cpu/kernels.h)
const uint GEMM = 0u;
const uint QUANTIZE = 1u;
const uint O_I32 = 0u;
const uint O_F32 = 1u;
const uint O_U8 = 2u;
const uint O_S8 = 3u;
const uint F_BIAS = 1u;  // flags
const uint F_RELU = 2u;
const uint F_IBIAS = 4u;  // an int32 bias (its bits in the bias factors), added to the sums
const uint F_DZP = 8u;     // the zero point read when it runs: the byte at dz_off of binding 6
const uint F_DSCALE = 16u; // the scale factors times the float32 at ds_off of binding 5

layout(std430, set = 0, binding = 0) readonly buffer A { uint a[]; };     // QUANTIZE: x floats
layout(std430, set = 0, binding = 1) readonly buffer W { uvec4 w4[]; };   // QUANTIZE: unused
layout(std430, set = 0, binding = 2) buffer C { uint c[]; };              // QUANTIZE: a's words
layout(std430, set = 0, binding = 3) readonly buffer Colsum { int colsum[]; };
layout(std430, set = 0, binding = 4) readonly buffer Factors { float fac[]; };  // scale, bias
// ONNX dynamic quantization (_cpu.qgemm_dynamic): the activations' scale and zero point, what a
// DynamicQuantizeLinear wrote on the device (the host binds something else when unused)
layout(std430, set = 0, binding = 5) readonly buffer DScale { float dscale[]; };
layout(std430, set = 0, binding = 6) readonly buffer DZp { uint dzp[]; };

// Mirrored by kernels/qgemm.py's two _push calls (21 words). QUANTIZE uses M, K (floats per
// row), KW, a_off / lda (x, in floats), c_off / ldc (in words), inv (in lo) and the zero point
// (in out_zp).
layout(push_constant) uniform Push {
    uint M, N, K, KW;
    uint a_off, lda;      // words
    uint w_off, ldw;      // words (ldw: N padded to 4)
    uint c_off, ldc;      // elements (words for O_I32 / O_F32, bytes for O_U8 / O_S8)
    uint cs_off;          // colsum
    uint s_off, b_off;    // factors: scale[j] at s_off + j, bias[j] at b_off + j
    uint flip;            // 0x80808080 for int8 activations, else 0
    int zp;               // a_zp as uint8 (a_zp + 128 for int8 activations)
    uint flags;           // F_BIAS | F_RELU | F_IBIAS | F_DZP | F_DSCALE
    float out_zp, lo, hi; // requantization: the output zero point and the clamp bounds
    uint ds_off;          // F_DSCALE: the scale's index in dscale
    uint dz_off;          // F_DZP: the zero point's byte offset in dzp
} p;

#if DOT
// OpSUDot (4452): signed x unsigned packed 4x8 (PackedVectorFormat4x8Bit = 0), capabilities
// DotProduct (6019) and DotProductInput4x8BitPacked (6018)
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018],
                  id = 4452)
int sudot(int x, uint y, spirv_literal int fmt);
#endif

// ------------------------------------------------------------------------------- epilogue
// cpu/isa/qgemm.h's qepi_row, one element: the same operations in the same order. zp: the
// activations' zero point (as uint8); dsc: their scale with F_DSCALE (gc_qgemm's per-column
// a_scale * w_scales[j], one float32 product, made here as the scale is known only on the
// device), else unused.
uint epilogue_word(int acc, uint j, uint zp, float dsc) {
    int v = int(uint(acc) - zp * uint(colsum[p.cs_off + j]));
    if (OUT == O_I32) return uint(v);
    // ONNX's int32 bias: into the sums, wrapping (as the C kernel), before the float epilogue
    if ((p.flags & F_IBIAS) != 0u) v = int(uint(v) + floatBitsToUint(fac[p.b_off + j]));
    precise float sj = fac[p.s_off + j];
    if ((p.flags & F_DSCALE) != 0u) sj = dsc * sj;
    precise float t = float(v) * sj;
    if ((p.flags & F_BIAS) != 0u) t = t + fac[p.b_off + j];
    if (OUT == O_F32) {
        if ((p.flags & F_RELU) != 0u) t = t <= 0.0 ? 0.0 : t;  // -0 -> +0, as the CPU's
        return floatBitsToUint(t);
    }
    precise float q = roundEven(t) + p.out_zp;
    q = q < p.lo ? p.lo : q;
    q = q > p.hi ? p.hi : q;
    return uint(int(q)) & 0xffu;
}

// ------------------------------------------------------------------------------- GEMM
// One k-word step: acc[i][j] += dot4(av[i], wv[j]) for the TM activation words av (flipped to
// unsigned) and the TN weight words of word kw.
#if DOT
#define ACC_STEP()                                                                         \
    [[unroll]] for (uint i = 0u; i < TM; ++i) {                                            \
        [[unroll]] for (uint j = 0u; j < TN; ++j)                                          \
            acc[i * TN + j] += sudot(int(wv[j]), av[i], 0);                                \
    }
#else
#define ACC_STEP()                                                                         \
    ivec4 ab[TM]; /* the activation bytes, unsigned */                                     \
    [[unroll]] for (uint i = 0u; i < TM; ++i)                                              \
        ab[i] = ivec4(uvec4(av[i], av[i] >> 8, av[i] >> 16, av[i] >> 24) & 0xffu);         \
    [[unroll]] for (uint j = 0u; j < TN; ++j) {                                            \
        int x = int(wv[j]); /* the weight bytes, sign-extended */                          \
        ivec4 wb = ivec4(bitfieldExtract(x, 0, 8), bitfieldExtract(x, 8, 8),               \
                         bitfieldExtract(x, 16, 8), bitfieldExtract(x, 24, 8));            \
        [[unroll]] for (uint i = 0u; i < TM; ++i) {                                        \
            ivec4 pr = ab[i] * wb;                                                         \
            acc[i * TN + j] += (pr.x + pr.y) + (pr.z + pr.w);                              \
        }                                                                                  \
    }
#endif
#define LOAD_W(kw)                                                                         \
    uint wv[TN];                                                                           \
    [[unroll]] for (uint j = 0u; j < TN; j += 4u) {                                        \
        uvec4 v = w4[rw + (kw) * ldw4 + j / 4u];                                           \
        wv[j] = v.x; wv[j + 1u] = v.y; wv[j + 2u] = v.z; wv[j + 3u] = v.w;                 \
    }

void gemm() {
    uint col0 = (gl_WorkGroupID.x * gl_WorkGroupSize.x + gl_LocalInvocationID.x) * TN;
    uint row0 = gl_WorkGroupID.y * TM;
    uint ra[TM];
    [[unroll]] for (uint i = 0u; i < TM; ++i) ra[i] = p.a_off + min(row0 + i, p.M - 1u) * p.lda;
    // this invocation's uvec4s of w's word row 0 (columns past N4 clamped: computed, not stored;
    // no invocation leaves early, the shuffles need every lane)
    uint rw = (p.w_off + min(col0, p.ldw - TN)) >> 2;
    uint ldw4 = p.ldw >> 2;
    int acc[TM * TN];
    [[unroll]] for (uint i = 0u; i < TM * TN; ++i) acc[i] = 0;
    uint zp = uint(p.zp);
    if ((p.flags & F_DZP) != 0u) zp = (dzp[p.dz_off >> 2] >> (8u * (p.dz_off & 3u))) & 0xffu;
    float dsc = (p.flags & F_DSCALE) != 0u ? dscale[p.ds_off] : 1.0;

#if SHUFFLE
    // CPU-type devices: a load costs ~8 cycles per lane there, a shuffle is a register permute.
    // Each lane loads one word of every row per chunk of SG words and the subgroup passes them
    // round, instead of every lane loading every word.
    uint lane = gl_SubgroupInvocationID;
    [[dont_unroll]] for (uint k0 = 0u; k0 < p.KW; k0 += SG) {
        uint kl = min(k0 + lane, p.KW - 1u);
        uint am[TM];
        [[unroll]] for (uint i = 0u; i < TM; ++i) am[i] = a[ra[i] + kl] ^ p.flip;
        uint kn = min(SG, p.KW - k0);
        [[dont_unroll]] for (uint kk = 0u; kk < kn; ++kk) {
            uint av[TM];
            [[unroll]] for (uint i = 0u; i < TM; ++i) av[i] = subgroupShuffle(am[i], kk);
            LOAD_W(k0 + kk)
            ACC_STEP()
        }
    }
#else
    [[dont_unroll]] for (uint kw = 0u; kw < p.KW; ++kw) {
        uint av[TM];
        [[unroll]] for (uint i = 0u; i < TM; ++i) av[i] = a[ra[i] + kw] ^ p.flip;
        LOAD_W(kw)
        ACC_STEP()
    }
#endif

    [[unroll]] for (uint i = 0u; i < TM; ++i) {
        uint m = row0 + i;
        if (m >= p.M) break;
        uint base = p.c_off + m * p.ldc;
        if (OUT == O_I32 || OUT == O_F32) {
            [[unroll]] for (uint j = 0u; j < TN; ++j) {
                if (col0 + j < p.N)
                    c[base + col0 + j] = epilogue_word(acc[i * TN + j], col0 + j, zp, dsc);
            }
        } else {
            // whole words of four bytes (the host makes ldc, c_off and the padded row a
            // multiple of 4 bytes): columns past N hold clamped values nobody reads
            [[unroll]] for (uint j = 0u; j < TN; j += 4u) {
                if (col0 + j >= p.N) break;
                uint word = 0u;
                [[unroll]] for (uint q = 0u; q < 4u; ++q) {
                    uint jq = min(col0 + j + q, p.N - 1u);
                    word |= epilogue_word(acc[i * TN + j + q], jq, zp, dsc) << (8u * q);
                }
                c[(base + col0 + j) >> 2] = word;
            }
        }
    }
}

// ------------------------------------------------------------------------------- QUANTIZE
// One word of the activation, four uint8 values: clamp(rint(fl32(x * inv) + zp), 0, 255), the
// rounding of qtensor.quantize_array (per tensor, unfused), NaN -> 255; bytes past K are 0.
void quantize() {
    uint idx = global_index();
    if (idx >= p.M * p.KW) return;
    uint m = idx / p.KW, kw = idx % p.KW;
    uint word = 0u;
    [[unroll]] for (uint q = 0u; q < 4u; ++q) {
        uint k = 4u * kw + q;
        if (k < p.K) {
            precise float y = uintBitsToFloat(a[p.a_off + m * p.lda + k]) * p.lo;
            y = y + p.out_zp;
            float r = roundEven(y);
            r = isnan(r) ? 255.0 : clamp(r, 0.0, 255.0);
            word |= uint(r) << (8u * q);
        }
    }
    c[p.c_off + m * p.ldc + kw] = word;
}

void main() {
    if (MODE == QUANTIZE) {
        quantize();
    } else {
        gemm();
    }
}

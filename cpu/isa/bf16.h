/* The bfloat16 GEMM's AVX-512 BF16 micro-kernel (gemm_bf16.c; contract in gemm_bf16.h),
 * included by isa/avx512.c only.  Compiled with a target attribute on top of that file's
 * -mavx512f, and chosen only when CPUID reports avx512_bf16 (the AVX-512 ISA being selected means
 * the OS saves the ZMM state): on any other CPU this code is never entered.
 *
 * One vdpbf16ps per 16 columns and pair of k: each 32-bit lane of A's broadcast word and of B's
 * vector holds the bf16 pair (k = 2q, 2q + 1), and the instruction adds both products to the
 * lane's float32 sum (odd element first, each addition rounded to nearest even; denormal inputs,
 * products and results flushed to zero).  14 rows x 32 columns: 28 ZMM accumulators, 2 B vectors
 * and the broadcast, the float32 kernel's tile. */
#include <immintrin.h>
#include <stdint.h>

#include "gemm_bf16.h"

#define BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16")))

#if GC_BF16_MR != 14 || GC_BF16_NR != 32
#error "the AVX-512 BF16 micro-kernel is written for a 14 x 32 tile"
#endif

static BF16_TARGET void gemm_avx512bf16_14x32(ptrdiff_t kp, const uint32_t *restrict a,
                                              const uint32_t *restrict b, float *restrict c,
                                              ptrdiff_t ldc, int acc_in)
{
    __m512 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51, c60, c61, c70, c71, c80,
        c81, c90, c91, ca0, ca1, cb0, cb1, cc0, cc1, cd0, cd1;
#define BF16_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(a) X(b) X(c) X(d)
#define BF16_IDX_0 0
#define BF16_IDX_1 1
#define BF16_IDX_2 2
#define BF16_IDX_3 3
#define BF16_IDX_4 4
#define BF16_IDX_5 5
#define BF16_IDX_6 6
#define BF16_IDX_7 7
#define BF16_IDX_8 8
#define BF16_IDX_9 9
#define BF16_IDX_a 10
#define BF16_IDX_b 11
#define BF16_IDX_c 12
#define BF16_IDX_d 13
#define BF16_LOAD(r)                                                                              \
    c##r##0 = _mm512_loadu_ps(c + BF16_IDX_##r * ldc);                                            \
    c##r##1 = _mm512_loadu_ps(c + BF16_IDX_##r * ldc + 16);
#define BF16_ZERO(r)                                                                              \
    c##r##0 = _mm512_setzero_ps();                                                                \
    c##r##1 = _mm512_setzero_ps();
    if (acc_in) {
        BF16_ROWS(BF16_LOAD)
    } else {
        BF16_ROWS(BF16_ZERO)
    }
    for (ptrdiff_t q = 0; q < kp; q++) {
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b);
        const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + 16);
        _mm_prefetch((const char *)(b + 8 * GC_BF16_NR), _MM_HINT_T0);
#define BF16_STEP(r)                                                                              \
    {                                                                                             \
        const __m512bh x = (__m512bh)_mm512_set1_epi32((int)a[BF16_IDX_##r]);                     \
        c##r##0 = _mm512_dpbf16_ps(c##r##0, x, b0);                                               \
        c##r##1 = _mm512_dpbf16_ps(c##r##1, x, b1);                                               \
    }
        BF16_ROWS(BF16_STEP)
        a += GC_BF16_MR;
        b += GC_BF16_NR;
    }
#define BF16_STORE(r)                                                                             \
    _mm512_storeu_ps(c + BF16_IDX_##r * ldc, c##r##0);                                            \
    _mm512_storeu_ps(c + BF16_IDX_##r * ldc + 16, c##r##1);
    BF16_ROWS(BF16_STORE)
#undef BF16_STEP
#undef BF16_LOAD
#undef BF16_ZERO
#undef BF16_STORE
}

/* Packs 16 * nq16 pairs of a full panel of B stored n x k (a Linear weight): the panel's 32 rows
 * start at b, row stride k elements; pair word (q, j) to d[q * NR + j].  Each 16 pairs x 16 rows
 * move as one 16 x 16 transpose of 32-bit words in registers (unpack 32 / 64, then two 128-bit
 * lane shuffles), where the portable loop moved one word at a time. */
static BF16_TARGET void bf16_pack_bt_avx512(const uint16_t *b, ptrdiff_t k, ptrdiff_t nq16,
                                            uint32_t *d)
{
    for (ptrdiff_t qb = 0; qb < nq16; qb++)
        for (int h = 0; h < 2; h++) {
            __m512i r[16], t[16];
            for (int i = 0; i < 16; i++)
                r[i] = _mm512_loadu_si512(b + (16 * h + i) * k + 32 * qb);
            for (int i = 0; i < 8; i++) {
                t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
                t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
            }
            /* r[4i + c]'s 128-bit lane L: column 4L + c, rows 4i .. 4i + 3 */
            for (int i = 0; i < 4; i++) {
                r[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
                r[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
                r[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
                r[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
            }
            uint32_t *o = d + 16 * qb * GC_BF16_NR + 16 * h;
            for (int c = 0; c < 4; c++) {
                const __m512i v0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x44);
                const __m512i v1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xee);
                const __m512i v2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x44);
                const __m512i v3 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xee);
                _mm512_storeu_si512(o + c * GC_BF16_NR, _mm512_shuffle_i32x4(v0, v2, 0x88));
                _mm512_storeu_si512(o + (4 + c) * GC_BF16_NR, _mm512_shuffle_i32x4(v0, v2, 0xdd));
                _mm512_storeu_si512(o + (8 + c) * GC_BF16_NR, _mm512_shuffle_i32x4(v1, v3, 0x88));
                _mm512_storeu_si512(o + (12 + c) * GC_BF16_NR, _mm512_shuffle_i32x4(v1, v3, 0xdd));
            }
        }
}

/* The small-m form (contract in gemm_bf16.h): R rows of A x 4 rows of W per step, 32 bf16 of k
 * per vdpbf16ps (masked loads past k: zeros, never read past a row), then each element's 16
 * lanes summed 8 + 8, 4 + 4, 2 + 2, 1 + 1. */
static inline __attribute__((always_inline)) BF16_TARGET void
bf16_dot_tile(const int R, ptrdiff_t k, const uint16_t *a, ptrdiff_t lda,
              const uint16_t *const *w, float *c, ptrdiff_t ldc, int nj)
{
    __m512 acc[4][4];
    for (int r = 0; r < R; r++)
        for (int j = 0; j < 4; j++)
            acc[r][j] = _mm512_setzero_ps();
    for (ptrdiff_t p = 0; p < k; p += 32) {
        const __mmask32 mk = k - p >= 32 ? (__mmask32)~0u : (__mmask32)((1u << (k - p)) - 1);
        __m512bh wv[4];
        for (int j = 0; j < 4; j++)
            wv[j] = (__m512bh)_mm512_maskz_loadu_epi16(mk, w[j] + p);
        for (int r = 0; r < R; r++) {
            const __m512bh av = (__m512bh)_mm512_maskz_loadu_epi16(mk, a + r * lda + p);
            for (int j = 0; j < 4; j++)
                acc[r][j] = _mm512_dpbf16_ps(acc[r][j], av, wv[j]);
        }
    }
    for (int r = 0; r < R; r++)
        for (int j = 0; j < nj; j++) {
            const __m512 v = acc[r][j];
            const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
            __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
            q = _mm_add_ps(q, _mm_movehl_ps(q, q));
            q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
            c[r * ldc + j] = _mm_cvtss_f32(q);
        }
}

static BF16_TARGET void bf16_dot_avx512(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, const uint16_t *a,
                                        ptrdiff_t lda, const uint16_t *w, ptrdiff_t ldw, float *c,
                                        ptrdiff_t ldc)
{
    for (ptrdiff_t j = 0; j < n; j += 4) {
        const int nj = n - j < 4 ? (int)(n - j) : 4;
        const uint16_t *wr[4];
        for (int t = 0; t < 4; t++) /* past n: the last row again, its sums not stored */
            wr[t] = w + (j + (t < nj ? t : nj - 1)) * ldw;
        for (ptrdiff_t i = 0; i < m; i += 4) {
            const uint16_t *ai = a + i * lda;
            float *ci = c + i * ldc + j;
            switch (m - i < 4 ? m - i : 4) {
            case 1: bf16_dot_tile(1, k, ai, lda, wr, ci, ldc, nj); break;
            case 2: bf16_dot_tile(2, k, ai, lda, wr, ci, ldc, nj); break;
            case 3: bf16_dot_tile(3, k, ai, lda, wr, ci, ldc, nj); break;
            default: bf16_dot_tile(4, k, ai, lda, wr, ci, ldc, nj); break;
            }
        }
    }
}

void gc_bf16_fill_avx512(gc_bf16_kernels *k)
{
    /* the target list: bw for the 16-bit loads, dq for _mm512_extractf32x8_ps (the dot form) */
    if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512dq"))
        return;
    k->ukr = gemm_avx512bf16_14x32;
    k->pack_bt = bf16_pack_bt_avx512;
    k->dot = bf16_dot_avx512;
    k->name = "gemm_avx512bf16_14x32";
}

/* The int8 GEMM's portable parts, included by every cpu/isa/<isa>.c: the epilogue (one output
 * row from its int32 sums, gc_qepi_row in isa.h) and the reference micro-kernel, written once in
 * plain C so that each ISA file's flags vectorize the epilogue to its width while every element
 * goes through the same float operations (each rounded on its own: these files are compiled
 * without contraction) and gets the same bits. */
#include <math.h>
#include <stdint.h>

#include "isa.h"

/* c = acc - zp * colsum wraps in uint32: the true value sum (a - a_zp) b fits int32 (k <=
 * GC_QGEMM_MAX_K) even where the two terms do not. */
#define QEPI_CORR(j) ((int32_t)((uint32_t)acc[j] - zp * (uint32_t)cs[j]))

static void qepi_row(const int32_t *restrict acc, ptrdiff_t n, const gc_qepi *e, ptrdiff_t j0,
                     void *out)
{
    const int32_t *restrict cs = e->colsum + j0;
    const uint32_t zp = (uint32_t)e->zp;
    if (e->mode == GC_QOUT_I32) {
        int32_t *restrict o = (int32_t *)out;
        for (ptrdiff_t j = 0; j < n; j++)
            o[j] = QEPI_CORR(j);
        return;
    }
    const float *restrict s = e->scale + j0;
    const float *restrict bb = e->bias ? e->bias + j0 : NULL;
    if (e->mode == GC_QOUT_F32) {
        float *restrict o = (float *)out;
        if (bb)
            for (ptrdiff_t j = 0; j < n; j++) {
                const float p = (float)QEPI_CORR(j) * s[j]; /* own statement: never an FMA */
                o[j] = p + bb[j];
            }
        else
            for (ptrdiff_t j = 0; j < n; j++)
                o[j] = (float)QEPI_CORR(j) * s[j];
        if (e->relu)
            for (ptrdiff_t j = 0; j < n; j++)
                o[j] = o[j] <= 0.0f ? 0.0f : o[j]; /* -0 -> +0 (gpucore's relu), NaN kept */
        return;
    }
    /* requantized: in blocks through a float buffer so each loop stays simple enough to vectorize */
    const float zo = e->out_zp, lo = e->lo, hi = e->hi;
    float t[64];
    for (ptrdiff_t j1 = 0; j1 < n; j1 += 64) {
        const ptrdiff_t nb = n - j1 < 64 ? n - j1 : 64;
        const int32_t *restrict a1 = acc + j1;
        const int32_t *restrict c1 = cs + j1;
        const float *restrict s1 = s + j1;
        for (ptrdiff_t j = 0; j < nb; j++)
            t[j] = (float)(int32_t)((uint32_t)a1[j] - zp * (uint32_t)c1[j]) * s1[j];
        if (bb)
            for (ptrdiff_t j = 0; j < nb; j++)
                t[j] = t[j] + bb[j1 + j];
        for (ptrdiff_t j = 0; j < nb; j++) {
            float v = rintf(t[j]) + zo;
            v = v < lo ? lo : v;
            t[j] = v > hi ? hi : v;
        }
        if (e->mode == GC_QOUT_U8) {
            uint8_t *restrict o = (uint8_t *)out + j1;
            for (ptrdiff_t j = 0; j < nb; j++)
                o[j] = (uint8_t)(int32_t)t[j];
        } else {
            int8_t *restrict o = (int8_t *)out + j1;
            for (ptrdiff_t j = 0; j < nb; j++)
                o[j] = (int8_t)(int32_t)t[j];
        }
    }
}
#undef QEPI_CORR

/* The reference micro-kernel (isa.h's gc_qukr contract) for a tile of NR columns, the packed
 * layout's interleave KU and the activation shift SHIFT: plain loops, the scalar ISA's kernel. */
#define GC_QUKR_REF(NAME, NR, KU, SHIFT)                                                          \
    static void NAME(int rows, ptrdiff_t kb, const uint8_t *a, ptrdiff_t lda, const int8_t *b,    \
                     int32_t *c, ptrdiff_t ldc, int accumulate, int a_signed)                     \
    {                                                                                             \
        const uint8_t flip = a_signed ? 0x80 : 0;                                                 \
        for (int i = 0; i < rows; i++) {                                                          \
            int32_t s[NR];                                                                        \
            for (int j = 0; j < NR; j++)                                                          \
                s[j] = accumulate ? c[i * ldc + j] : 0;                                           \
            for (ptrdiff_t p = 0; p < kb; p++) {                                                  \
                const int32_t v = (int32_t)(a[i * lda + p] ^ flip) - (SHIFT);                     \
                const int8_t *bp = b + (p / (KU)) * (NR) * (KU) + p % (KU);                       \
                for (int j = 0; j < NR; j++)                                                      \
                    s[j] += v * bp[j * (KU)];                                                     \
            }                                                                                     \
            for (int j = 0; j < NR; j++)                                                          \
                c[i * ldc + j] = s[j];                                                            \
        }                                                                                         \
    }

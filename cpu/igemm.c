/* igemm.c: integer matrix products (torch.matmul / mm / bmm on int8, uint8, int16, int32 and
 * int64), wrapping as PyTorch's CPU kernels do.  Products and sums are taken modulo 2^32 (2^64
 * for int64) in unsigned arithmetic and the result truncated to the element type: arithmetic
 * modulo 2^w commutes with truncation, so the bits equal those of summing exactly and wrapping
 * once, whatever the order or the thread split. */
#include "isa.h"
#include "kernels.h"

/* A register tile: GC_IGEMM_MR rows x GC_IGEMM_NR columns of C. */
#define GC_IGEMM_MR 4
#define GC_IGEMM_NR 32

/* Element type T, accumulator U (unsigned, at least T's width: sums modulo 2^16 are right
 * modulo 2^8 too, and 16-bit lanes multiply in one SSE2 / AVX2 instruction where 8-bit lanes have
 * none), the type products are formed in (W, at least int's width, unsigned: no signed overflow
 * once the integer promotions apply). */
#define GC_IGEMM_TYPES(X)                                                                         \
    X(U8, uint8_t, uint16_t, uint32_t) X(I8, int8_t, uint16_t, uint32_t)                          \
    X(I16, int16_t, uint16_t, uint32_t) X(I32, int32_t, uint32_t, uint32_t)                       \
    X(I64, int64_t, uint64_t, uint64_t)

/* Rows i0 .. i0+R-1 (R <= GC_IGEMM_MR) of one batch item, a at row i0, c likewise: a panel of
 * GC_IGEMM_NR columns of C in R accumulator vectors at a time (each value of B loaded once per
 * R rows), the columns past the last whole panel in a final narrower pass.  Signed values
 * convert to W modulo 2^w (so their products are right modulo 2^w). */
#define GC_IGEMM_DEFINE(E, T, U, W)                                                               \
    static void rows_##E(const T *a, const T *b, T *c, ptrdiff_t rows, ptrdiff_t n, ptrdiff_t k)  \
    {                                                                                             \
        for (ptrdiff_t j0 = 0; j0 < n; j0 += GC_IGEMM_NR) {                                       \
            const ptrdiff_t nb = n - j0 < GC_IGEMM_NR ? n - j0 : GC_IGEMM_NR;                     \
            U acc[GC_IGEMM_MR][GC_IGEMM_NR] = {{0}};                                              \
            if (nb == GC_IGEMM_NR && rows == GC_IGEMM_MR) {                                       \
                for (ptrdiff_t p = 0; p < k; p++) {                                               \
                    const T *bp = b + p * n + j0;                                                 \
                    for (int r = 0; r < GC_IGEMM_MR; r++) {                                       \
                        const W av = (W)(U)a[r * k + p];                                          \
                        for (int j = 0; j < GC_IGEMM_NR; j++)                                     \
                            acc[r][j] = (U)((W)acc[r][j] + av * (W)(U)bp[j]);                     \
                    }                                                                             \
                }                                                                                 \
            } else {                                                                              \
                for (ptrdiff_t p = 0; p < k; p++) {                                               \
                    const T *bp = b + p * n + j0;                                                 \
                    for (ptrdiff_t r = 0; r < rows; r++) {                                        \
                        const W av = (W)(U)a[r * k + p];                                          \
                        for (ptrdiff_t j = 0; j < nb; j++)                                        \
                            acc[r][j] = (U)((W)acc[r][j] + av * (W)(U)bp[j]);                     \
                    }                                                                             \
                }                                                                                 \
            }                                                                                     \
            for (ptrdiff_t r = 0; r < rows; r++)                                                  \
                for (ptrdiff_t j = 0; j < nb; j++)                                                \
                    c[r * n + j0 + j] = (T)acc[r][j];                                             \
        }                                                                                         \
    }
GC_IGEMM_TYPES(GC_IGEMM_DEFINE)
#undef GC_IGEMM_DEFINE

typedef struct {
    gc_elem t;
    const void *a, *b;
    void *c;
    ptrdiff_t m, n, k, sa, sb, sc;
} igemm_ctx;

/* Row blocks [lo, hi) of all batch items together (block r is item r / mb, rows
 * GC_IGEMM_MR * (r % mb) on). */
static void igemm_range(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const igemm_ctx *g = ctx;
    const ptrdiff_t mb = (g->m + GC_IGEMM_MR - 1) / GC_IGEMM_MR;
    for (ptrdiff_t r = lo; r < hi; r++) {
        const ptrdiff_t bi = r / mb, i = (r % mb) * GC_IGEMM_MR;
        const ptrdiff_t rows = g->m - i < GC_IGEMM_MR ? g->m - i : GC_IGEMM_MR;
        const ptrdiff_t oa = bi * g->sa + i * g->k, ob = bi * g->sb, oc = bi * g->sc + i * g->n;
        switch (g->t) {
#define GC_IGEMM_CASE(E, T, U, W)                                                                 \
    case GC_ELEM_##E:                                                                             \
        rows_##E((const T *)g->a + oa, (const T *)g->b + ob, (T *)g->c + oc, rows, g->n, g->k);   \
        break;
            GC_IGEMM_TYPES(GC_IGEMM_CASE)
#undef GC_IGEMM_CASE
        default: break;
        }
    }
}

int gc_igemm(gc_elem t, const void *a, const void *b, void *c, ptrdiff_t batch, ptrdiff_t m,
             ptrdiff_t n, ptrdiff_t k, ptrdiff_t sa, ptrdiff_t sb, ptrdiff_t sc)
{
    switch (t) {
    case GC_ELEM_U8: case GC_ELEM_I8: case GC_ELEM_I16: case GC_ELEM_I32: case GC_ELEM_I64: break;
    default: return -1;
    }
    igemm_ctx g = {.t = t, .a = a, .b = b, .c = c, .m = m, .n = n, .k = k,
                   .sa = sa, .sb = sb, .sc = sc};
    if (batch == 0 || m == 0 || n == 0)
        return 0;
    /* ~0.3 ns per multiply-add */
    const ptrdiff_t mb = (m + GC_IGEMM_MR - 1) / GC_IGEMM_MR;
    gc_parallel_range(batch * mb, 1, (double)batch * (double)m * (double)n * (double)k * 0.3,
                      igemm_range, &g);
    return 0;
}

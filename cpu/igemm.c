/* igemm.c: integer matrix products (torch.matmul / mm / bmm on int8, uint8, int16, int32 and
 * int64), wrapping as PyTorch's CPU kernels do.  Products and sums are taken modulo 2^32 (2^64
 * for int64) in unsigned arithmetic and the result truncated to the element type: arithmetic
 * modulo 2^w commutes with truncation, so the bits equal those of summing exactly and wrapping
 * once, whatever the order or the thread split. */
#include "isa.h"
#include "kernels.h"

/* Columns of C accumulated at once (in registers / L1). */
#define GC_IGEMM_NB 256

/* Element type T, accumulator U (unsigned, at least T's width: sums modulo 2^16 are right
 * modulo 2^8 too, and 16-bit lanes multiply in one SSE2 / AVX2 instruction where 8-bit lanes have
 * none), the type products are formed in (W, at least int's width, unsigned: no signed overflow
 * once the integer promotions apply). */
#define GC_IGEMM_TYPES(X)                                                                         \
    X(U8, uint8_t, uint16_t, uint32_t) X(I8, int8_t, uint16_t, uint32_t)                          \
    X(I16, int16_t, uint16_t, uint32_t) X(I32, int32_t, uint32_t, uint32_t)                       \
    X(I64, int64_t, uint64_t, uint64_t)

/* One row i of batch item b: C[i, :] = A[i, :] @ B. Signed values convert to W modulo 2^w (so
 * their products are right modulo 2^w). */
#define GC_IGEMM_DEFINE(E, T, U, W)                                                               \
    static void row_##E(const T *a, const T *b, T *c, ptrdiff_t n, ptrdiff_t k)                   \
    {                                                                                             \
        U acc[GC_IGEMM_NB];                                                                       \
        for (ptrdiff_t j0 = 0; j0 < n; j0 += GC_IGEMM_NB) {                                       \
            const ptrdiff_t nb = n - j0 < GC_IGEMM_NB ? n - j0 : GC_IGEMM_NB;                     \
            for (ptrdiff_t j = 0; j < nb; j++)                                                    \
                acc[j] = 0;                                                                       \
            for (ptrdiff_t p = 0; p < k; p++) {                                                   \
                const U av = (U)a[p];                                                             \
                const T *bp = b + p * n + j0;                                                     \
                for (ptrdiff_t j = 0; j < nb; j++)                                                \
                    acc[j] = (U)((W)acc[j] + (W)av * (W)(U)bp[j]);                                \
            }                                                                                     \
            for (ptrdiff_t j = 0; j < nb; j++)                                                    \
                c[j0 + j] = (T)acc[j];                                                            \
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

/* Rows [lo, hi) of all batch items together (row r is item r / m, row r % m). */
static void igemm_range(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const igemm_ctx *g = ctx;
    for (ptrdiff_t r = lo; r < hi; r++) {
        const ptrdiff_t bi = r / g->m, i = r % g->m;
        const ptrdiff_t oa = bi * g->sa + i * g->k, ob = bi * g->sb, oc = bi * g->sc + i * g->n;
        switch (g->t) {
#define GC_IGEMM_CASE(E, T, U, W)                                                                    \
    case GC_ELEM_##E:                                                                             \
        row_##E((const T *)g->a + oa, (const T *)g->b + ob, (T *)g->c + oc, g->n, g->k);          \
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
    gc_parallel_range(batch * m, 1, (double)batch * (double)m * (double)n * (double)k * 0.3,
                      igemm_range, &g);
    return 0;
}

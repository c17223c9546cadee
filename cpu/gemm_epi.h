/* The epilogues of the blocked GEMM (gemm.c), type-generic (T = GC_T), included by gemm.c before
 * its tiles: a convolution's epilogue on C's finished rows (gc_epi, kernels.h: row bias,
 * residual, relu), the swapped mode's transposing pass with the bias and activation, and the
 * epilogue alone of an item with nothing to multiply. */

/* The epilogue e (kernels.h, gc_epi) on rows x cols of the caller's C at c (row stride ld, the
 * res rows' too), c holding C[r0][c0].  After the product's own bias and activation. */
/* Prefetches rows x cols of r (row stride ld) into the cache: the residual of a row panel, read
 * by its epilogue after the panel's tiles, requested before them (read where it lies, its 6 short
 * row streams missed the cache: ResNet-50's downsample epilogues cost 2.5 ns per element). */
static void GC_FN(epi_prefetch)(const GC_T *r, ptrdiff_t ld, ptrdiff_t rows, ptrdiff_t cols)
{
    const ptrdiff_t step = 64 / (ptrdiff_t)sizeof(GC_T);
    for (ptrdiff_t i = 0; i < rows; i++)
        for (ptrdiff_t j = 0; j < cols + step; j += step)
            __builtin_prefetch(r + i * ld + (j < cols ? j : cols - 1), 0, 3);
}

#include "gemm_epi_rows.h"

static void GC_FN(epi_apply)(const gc_epi *e, GC_T *c, ptrdiff_t ld, ptrdiff_t r0, ptrdiff_t c0,
                             ptrdiff_t rows, ptrdiff_t cols)
{
    const GC_T *rb = (const GC_T *)e->rb, *res = (const GC_T *)e->res;
    switch ((rb ? 1 : 0) | (res ? 2 : 0) | (e->relu ? 4 : 0)) {
    case 1: GC_FN(epi_rows)(rb, NULL, 0, c, ld, r0, c0, rows, cols); break;
    case 2: GC_FN(epi_rows)(NULL, res, 0, c, ld, r0, c0, rows, cols); break;
    case 3: GC_FN(epi_rows)(rb, res, 0, c, ld, r0, c0, rows, cols); break;
    case 4: GC_FN(epi_rows)(NULL, NULL, 1, c, ld, r0, c0, rows, cols); break;
    case 5: GC_FN(epi_rows)(rb, NULL, 1, c, ld, r0, c0, rows, cols); break;
    case 6: GC_FN(epi_rows)(NULL, res, 1, c, ld, r0, c0, rows, cols); break;
    case 7: GC_FN(epi_rows)(rb, res, 1, c, ld, r0, c0, rows, cols); break;
    default: break;
    }
}

/* d [c, r] = act(s^T + bias) for s [r, c] (bias: r values, one per row of s): the tile
 * epilogue's operations in its order (bias, relu in place of the micro-kernel's; other
 * activations per row of d afterwards).  Rows of d split over the pool, by blocks of 8 x 8. */
typedef struct {
    const GC_T *s;
    GC_T *d;
    ptrdiff_t r, c;
    const GC_T *bias;
    int relu, act;
    const gc_epi *epi; /* after act, on d */
} GC_FN(tr_job);

static void GC_FN(transpose_range)(void *ctx, ptrdiff_t j0, ptrdiff_t j1)
{
    const GC_FN(tr_job) *J = (const GC_FN(tr_job) *)ctx;
    const ptrdiff_t r = J->r, c = J->c;
    for (ptrdiff_t jb = j0; jb < j1; jb += 8) {
        const ptrdiff_t je = jb + 8 < j1 ? jb + 8 : j1;
        for (ptrdiff_t i0 = 0; i0 < r; i0 += 8) {
            const ptrdiff_t i1 = i0 + 8 < r ? i0 + 8 : r;
            for (ptrdiff_t j = jb; j < je; j++) {
                GC_T *dr = J->d + j * r;
                for (ptrdiff_t i = i0; i < i1; i++) {
                    GC_T v = J->s[i * c + j];
                    if (J->bias)
                        v += J->bias[i];
                    dr[i] = J->relu && v <= (GC_T)0 ? (GC_T)0 : v;
                }
            }
        }
        if (J->act >= 0)
            for (ptrdiff_t j = jb; j < je; j++)
                GC_FN(gc_unary)(J->act, J->d + j * r, J->d + j * r, r);
        if (J->epi)
            GC_FN(epi_apply)(J->epi, J->d + jb * r, r, jb, 0, je - jb, r);
    }
}

static void GC_FN(transpose_act)(const GC_T *s, GC_T *d, ptrdiff_t r, ptrdiff_t c,
                                 const GC_T *bias, int relu, int act, const gc_epi *epi)
{
    GC_FN(tr_job) J = {.s = s, .d = d, .r = r, .c = c, .bias = bias, .relu = relu, .act = act,
                       .epi = epi};
    gc_parallel_range(c, 8, (double)r * (double)c * (act >= 0 ? 5.0 : 0.5), GC_FN(transpose_range),
                      &J);
}

/* C = act(beta * C + bias) for one item (k == 0 or alpha == 0: A and B are not read). */
static void GC_FN(gemm_scale)(GC_T *c, ptrdiff_t m, ptrdiff_t n, GC_T beta, const GC_T *bias,
                              int act)
{
    for (ptrdiff_t i = 0; i < m; i++) {
        GC_T *row = c + i * n;
        if (beta == (GC_T)0) {
            for (ptrdiff_t j = 0; j < n; j++)
                row[j] = (GC_T)0;
        } else if (beta != (GC_T)1) {
            for (ptrdiff_t j = 0; j < n; j++)
                row[j] *= beta;
        }
        if (bias)
            for (ptrdiff_t j = 0; j < n; j++)
                row[j] += bias[j];
        if (act >= 0)
            GC_FN(gc_unary)(act, row, row, n);
    }
}

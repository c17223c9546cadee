/* Batched GEMM: C_i = alpha * op(A_i) @ op(B_i) + beta * C_i (row-major).
 *
 * Loop nest per batch item: block over n (GC_GEMM_NC columns) and k (GC_GEMM_KC), then i-p-j
 * with the innermost loop over contiguous columns of C and of the (possibly packed) B panel.
 * A transposed B is packed tile by tile into a malloc'ed scratch panel; a transposed A is read
 * with a stride (one scalar per inner loop).  Batch items run in order, so a C stride of 0 with
 * beta == 1 accumulates over the batch. */
#ifndef GC_T

#include <stdlib.h>

#include "kernels.h"

#define GC_GEMM_KC 256
#define GC_GEMM_NC 256

#define GC_T float
#define GC_SFX f32
#include "gemm.c"
#undef GC_T
#undef GC_SFX

#define GC_T double
#define GC_SFX f64
#include "gemm.c"
#undef GC_T
#undef GC_SFX

#else /* type-generic body, T = GC_T */

static void GC_FN(gemm_one)(const GC_T *restrict a, const GC_T *restrict b, GC_T *restrict c,
                            ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b,
                            GC_T alpha, GC_T beta, GC_T *restrict pack)
{
    const ptrdiff_t mn = m * n;
    if (beta == (GC_T)0) {
        for (ptrdiff_t i = 0; i < mn; i++)
            c[i] = (GC_T)0;
    } else if (beta != (GC_T)1) {
        for (ptrdiff_t i = 0; i < mn; i++)
            c[i] *= beta;
    }
    if (k == 0 || alpha == (GC_T)0)
        return;

    for (ptrdiff_t j0 = 0; j0 < n; j0 += GC_GEMM_NC) {
        const ptrdiff_t nc = (n - j0 < GC_GEMM_NC) ? n - j0 : GC_GEMM_NC;
        for (ptrdiff_t p0 = 0; p0 < k; p0 += GC_GEMM_KC) {
            const ptrdiff_t kc = (k - p0 < GC_GEMM_KC) ? k - p0 : GC_GEMM_KC;
            const GC_T *panel;
            ptrdiff_t ldp;
            if (!trans_b) { /* B stored k x n: rows of the panel are contiguous already */
                panel = b + p0 * n + j0;
                ldp = n;
            } else { /* B stored n x k: pack the kc x nc tile of op(B) = B^T */
                for (ptrdiff_t j = 0; j < nc; j++) {
                    const GC_T *src = b + (j0 + j) * k + p0;
                    for (ptrdiff_t p = 0; p < kc; p++)
                        pack[p * nc + j] = src[p];
                }
                panel = pack;
                ldp = nc;
            }
            /* op(A)[i, p] for rows i and panel column p */
#define GC_OPA(i, p) (alpha * (trans_a ? a[(p0 + (p)) * m + (i)] : a[(i) * k + p0 + (p)]))
            ptrdiff_t i = 0;
            for (; i + 4 <= m; i += 4) { /* 4 rows of C share each load of the B panel */
                GC_T *restrict c0 = c + i * n + j0;
                GC_T *restrict c1 = c0 + n;
                GC_T *restrict c2 = c1 + n;
                GC_T *restrict c3 = c2 + n;
                for (ptrdiff_t p = 0; p < kc; p++) {
                    const GC_T a0 = GC_OPA(i, p), a1 = GC_OPA(i + 1, p);
                    const GC_T a2 = GC_OPA(i + 2, p), a3 = GC_OPA(i + 3, p);
                    const GC_T *restrict brow = panel + p * ldp;
                    for (ptrdiff_t j = 0; j < nc; j++) {
                        const GC_T bv = brow[j];
                        c0[j] += a0 * bv;
                        c1[j] += a1 * bv;
                        c2[j] += a2 * bv;
                        c3[j] += a3 * bv;
                    }
                }
            }
            for (; i < m; i++) {
                GC_T *restrict crow = c + i * n + j0;
                for (ptrdiff_t p = 0; p < kc; p++) {
                    const GC_T av = GC_OPA(i, p);
                    const GC_T *restrict brow = panel + p * ldp;
                    for (ptrdiff_t j = 0; j < nc; j++)
                        crow[j] += av * brow[j];
                }
            }
#undef GC_OPA
        }
    }
}

int GC_FN(gc_gemm)(const GC_T *a, const GC_T *b, GC_T *c, ptrdiff_t batch, ptrdiff_t m,
                   ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b, GC_T alpha, GC_T beta,
                   ptrdiff_t sa, ptrdiff_t sb, ptrdiff_t sc)
{
    if (batch <= 0 || m <= 0 || n <= 0)
        return 0;
    GC_T *pack = NULL;
    if (trans_b && k > 0 && alpha != (GC_T)0) {
        pack = (GC_T *)malloc(sizeof(GC_T) * GC_GEMM_KC * GC_GEMM_NC);
        if (!pack)
            return -1;
    }
    for (ptrdiff_t bi = 0; bi < batch; bi++)
        GC_FN(gemm_one)(a + bi * sa, b + bi * sb, c + bi * sc, m, n, k, trans_a, trans_b, alpha,
                        beta, pack);
    free(pack);
    return 0;
}

#endif

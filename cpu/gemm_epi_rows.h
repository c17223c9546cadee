/* A convolution's epilogue (kernels.h, gc_epi) on finished rows of C, type-generic (T = GC_T,
 * names GC_FN(...)): rows x cols at c (row stride ld, the residual's too), c holding C[r0][c0]:
 * + rb[r0 + i] (rb != NULL), + res (res != NULL), relu ((v <= 0) ? +0 : v, NaN kept), each
 * rounded on its own.  Included by gemm_epi.h (the GEMM's pass after its tiles) and conv_pw.c
 * (a tile of the GEMM's short-row kernels): one definition, so both give the pointwise kernel's
 * bits (isa/ukr_pw.h runs the same operations in registers). */
/* (one pass per row, the flags constant in each instance so that the loop vectorizes) */
static inline __attribute__((always_inline)) void
GC_FN(epi_rows)(const GC_T *rb, const GC_T *res, const int relu, GC_T *c, ptrdiff_t ld,
                ptrdiff_t r0, ptrdiff_t c0, ptrdiff_t rows, ptrdiff_t cols)
{
    for (ptrdiff_t i = 0; i < rows; i++) {
        GC_T *restrict row = c + i * ld;
        const GC_T *restrict rr = res ? res + (r0 + i) * ld + c0 : NULL;
        const GC_T b = rb ? rb[r0 + i] : (GC_T)0;
        for (ptrdiff_t j = 0; j < cols; j++) {
            GC_T v = row[j];
            if (rb)
                v += b;
            if (res)
                v += rr[j];
            row[j] = relu && v <= (GC_T)0 ? (GC_T)0 : v;
        }
    }
}

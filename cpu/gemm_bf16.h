/* The bfloat16 GEMM (gemm_bf16.c): bf16 x bf16 products summed in float32 by the AVX-512 BF16
 * dot product (vdpbf16ps), on CPUs that have it; elsewhere gc_bf16_kernel() is NULL and callers
 * keep the float32 path (bf16 widened, SGEMM).  See cpu/README.md, *bfloat16 GEMM*. */
#ifndef GPUCORE_GEMM_BF16_H
#define GPUCORE_GEMM_BF16_H

#include <stddef.h>
#include <stdint.h>

/* The largest m that takes the small-m form (gc_bf16_kernels.dot) */
#define GC_BF16_DOT_M 8

/* The register tile: MR rows of A x NR columns of B, float32 sums. */
#define GC_BF16_MR 14
#define GC_BF16_NR 32

/* Micro-kernel contract (one per ISA that has one, named gemm_<isa>_<MR>x<NR>):
 *
 *   for q < kp (pairs of k), in order, for every i < MR, j < NR:
 *     c[i, j] = round(round(c[i, j] + A[i, 2q+1] * B[2q+1, j]) + A[i, 2q] * B[2q, j])
 *   (vdpbf16ps's order: the odd element first; products exact, each sum rounded to nearest
 *   even; denormal inputs, products and sums flushed to zero), starting from c's values
 *   (acc_in) or from +0;
 *   a: packed A micro-panel, the pair word of (i, q) at a[q * MR + i]: bits 0-15 A[i, 2q],
 *      16-31 A[i, 2q+1] (rows past the matrix and k past its end hold zero);
 *   b: packed B micro-panel, the word of (q, j) at b[q * NR + j]: bits 0-15 B[2q, j], 16-31
 *      B[2q+1, j] (zero past the edges); 64-byte aligned;
 *   c: the full MR x NR float32 tile at c[i * ldc + j], read (acc_in) and written.
 * The chain over q is one per element and is continued across K blocks (acc_in), so the sums
 * depend on k alone: not on blocking, units or threads. */
typedef void (*gc_bf16_ukr)(ptrdiff_t kp, const uint32_t *a, const uint32_t *b, float *c,
                            ptrdiff_t ldc, int acc_in);

typedef struct {
    gc_bf16_ukr ukr; /* NULL: no bfloat16 kernel on this CPU / ISA */
    const char *name;
    /* NULL or the ISA's packing of 16 * nq16 pairs of a full B panel stored n x k (rows at b,
     * stride k): pair word (q, j) to d[q * NR + j] */
    void (*pack_bt)(const uint16_t *b, ptrdiff_t k, ptrdiff_t nq16, uint32_t *d);
    /* NULL or the small-m form (gc_gemm_bf16 for m <= GC_BF16_DOT_M with A row-major and B
     * stored n x k, a Linear weight, read in place: no packing): for i < m, j < n,
     *   c[i * ldc + j] = the sum over p < k of A[i, p] * W[j, p] (A at a[i * lda + p], W at
     *   w[j * ldw + p]) taken as 16 lanes, lane l holding the vdpbf16ps chain over the pairs
     *   q = l, l + 16, l + 32, ... (zero past k), then the lanes added (l, l + 8), (l, l + 4),
     *   (l, l + 2), (0, 1), each rounded to nearest even (not flushed). */
    void (*dot)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, const uint16_t *a, ptrdiff_t lda,
                const uint16_t *w, ptrdiff_t ldw, float *c, ptrdiff_t ldc);
} gc_bf16_kernels;

/* The micro-kernel in use (NULL when the CPU lacks AVX-512 BF16, or the ISA in use, e.g. a
 * forced GPUCORE_CPU_ISA=avx2, is not AVX-512) and its name. */
gc_bf16_ukr gc_bf16_kernel(const char **name);

#if defined(GC_X86_ISA) && (defined(__x86_64__) || defined(_M_X64))
/* isa/avx512.c (isa/bf16.h): sets k's entries when the CPU has AVX-512 BF16, else leaves them */
void gc_bf16_fill_avx512(gc_bf16_kernels *k);
#endif

/* For i < batch: C_i = op(A_i) @ op(B_i) (+ bias), A_i at element i*sa of a, B_i at i*sb of b,
 * C_i (m x n row-major) at i*sc of c; op(A) is m x k, stored m x k (trans_a 0) or k x m;
 * op(B) k x n, stored k x n (trans_b 0) or n x k.  a, b: bf16 bit patterns.  c: float32
 * (out_bf16 0) or bf16 (out_bf16 1: the float32 sum plus bias rounded once to nearest even, NaN
 * kept quiet).  bias: NULL, or float32 values added before the rounding: n, bias[j] to column
 * j of every row (bias_rows 0: a Linear's), or m, bias[i] to row i (bias_rows 1: a convolution's
 * channels when the image's pixels are the columns).
 * Strides of 0 broadcast A or B; sc >= m*n when batch > 1.  Needs gc_bf16_kernel() != NULL.
 * Returns 0, or -1 when scratch memory could not be had (c then unspecified). */
int gc_gemm_bf16(const uint16_t *a, const uint16_t *b, void *c, int out_bf16, ptrdiff_t batch,
                 ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, int trans_a, int trans_b, ptrdiff_t sa,
                 ptrdiff_t sb, ptrdiff_t sc, const float *bias, int bias_rows);

/* bf16 conv2d forward, NCHW: y[n, o, oh, ow] = sum over (c, ky, kx) of w[o, c, ky, kx] * the
 * zero-padded x window, + bias[o] (float32 or NULL), the float32 sum rounded once to bf16.
 * x copied to NHWC and w permuted to [o, kh, kw, c] once; then rows of pixels (images one after
 * the other) in equal chunks of <= 4 MiB of column matrix [pixels, kh*kw*c] (taps in (ky, kx, c)
 * order, a tap's c values one copy; row-major: A's fast word-pair packing), one gc_gemm_bf16 per
 * chunk with the permuted weight as B stored n x k (packed once per chunk), the chunk's [pixels,
 * o] result moved to NCHW.  The same bits as gc_gemm_bf16 of that whole column matrix times the
 * permuted weight (a sum depends on k and its order alone) where n*oh*ow > 8.  Needs
 * gc_bf16_kernel() != NULL; returns 0, or -1 out of memory. */
int gc_conv2d_bf16(const uint16_t *x, const uint16_t *w, const float *bias, uint16_t *y,
                   ptrdiff_t n, ptrdiff_t c, ptrdiff_t h, ptrdiff_t wd, ptrdiff_t kh, ptrdiff_t kw,
                   ptrdiff_t sh, ptrdiff_t sw, ptrdiff_t ph, ptrdiff_t pw, ptrdiff_t dh,
                   ptrdiff_t dw, ptrdiff_t o);

#endif /* GPUCORE_GEMM_BF16_H */

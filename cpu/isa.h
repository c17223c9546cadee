/* Runtime ISA dispatch, the GEMM micro-kernel contract, the thread pool and scratch memory.
 *
 * One build carries every x86 variant: cpu/isa/<isa>.c is compiled with its own -m flags (see
 * setup.py) and only ever called after CPUID + XGETBV said the CPU and the OS support it.  arm64
 * builds carry cpu/isa/neon.c instead (AdvSIMD is baseline there, so it is always usable).  At
 * import, gc_cpu_init() fills the table gc_isa with the portable reference kernels
 * (cpu/isa/scalar.c) and then overrides entries with the selected ISA's (the BLIS context idea):
 * every entry always has a working kernel.  Packing, blocking and threading are shared C; only
 * the micro-kernels and the vector math are per ISA.
 */
#ifndef GPUCORE_ISA_H
#define GPUCORE_ISA_H

#include <stddef.h>

#include "kernels.h"

#if defined(GC_X86_ISA) && (defined(__x86_64__) || defined(_M_X64) || defined(__i386__))
#define GC_X86 1
#else
#define GC_X86 0
#endif

/* setup.py defines GC_NEON_ISA when it compiles cpu/isa/neon.c (arm64 targets) */
#if defined(GC_NEON_ISA) && defined(__aarch64__)
#define GC_NEON 1
#else
#define GC_NEON 0
#endif

/* Portable loops that need nothing but the compiler's vectorizer (the double accumulators over
 * fixed lanes of norm.c and norm_batch.c) are built twice on x86-64 Linux, for AVX2 and for the
 * baseline, and the loader picks one (an ifunc), whatever GPUCORE_ISA says.  The AVX2 target has
 * no FMA and -std=c11 keeps contraction off, so both clones give the same bits: only the vector
 * width differs (1.5-2x on the norm kernels, measured). */
#if GC_X86 && defined(__x86_64__) && defined(__linux__) &&                                      \
    ((defined(__clang__) && __clang_major__ >= 14) || (!defined(__clang__) && __GNUC__ >= 8))
#define GC_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define GC_VECTOR_CLONES
#endif

/* Ordered by preference within an architecture: the best supported one is the highest. */
enum { GC_ISA_SCALAR = 0, GC_ISA_SSE2, GC_ISA_AVX2, GC_ISA_AVX512, GC_ISA_NEON, GC_ISA_COUNT };

/* The largest MR * NR of any micro-kernel (edge tiles go through a stack tile of this size). */
#define GC_TILE_MAX 512
#define GC_NR_MAX 64

/* GEMM micro-kernel contract (one per ISA and float type, named gemm_<isa>_<dtype><MR>x<NR>):
 *
 *   computes the full MR x NR tile  AB = sum_p A[i, p] * B[p, j]  over p < k (k >= 1), then
 *     beta == 0:  C = AB                       (C is not read: NaN/garbage in C is ignored)
 *     otherwise:  C = beta * C + AB
 *     bias:       C += bias[j]                 (bias != NULL; NR readable values)
 *     relu:       C = (C <= 0) ? 0 : C         (NaN stays NaN, like UNARY_RELU)
 *   a: packed A micro-panel, A[i, p] at a[p * MR + i] (alpha already applied by the packing; rows
 *      past the matrix edge are zero);
 *   b: B micro-panel, B[p, j] at b[p * ldb + j]: packed (ldb == NR, columns past the edge zero)
 *      or, for small row-major B, the matrix itself (ldb == n, all NR columns inside it);
 *   c: all MR x NR elements at c[i * ldc + j] are read/written.  The driver runs edge tiles
 *      (fewer than MR rows or NR columns left) through a padded stack tile, so the kernel only
 *      ever sees full tiles and the arithmetic of an element never depends on where its tile is.
 *   Packed panels are 64-byte aligned; b (when not packed) and c need not be.
 */
typedef void (*gc_ukr_f32)(ptrdiff_t k, const float *a, const float *b, ptrdiff_t ldb, float *c,
                           ptrdiff_t ldc, float beta, const float *bias, int relu);
typedef void (*gc_ukr_f64)(ptrdiff_t k, const double *a, const double *b, ptrdiff_t ldb,
                           double *c, ptrdiff_t ldc, double beta, const double *bias, int relu);

/* The same tile with A read in place: A[i, p] at a[i * lda + p] (row-major A, all MR rows inside
 * the matrix), and alpha applied to the product here (it is not folded into a packing). */
typedef void (*gc_ukr_da_f32)(ptrdiff_t k, const float *a, ptrdiff_t lda, const float *b,
                              ptrdiff_t ldb, float *c, ptrdiff_t ldc, float alpha, float beta,
                              const float *bias, int relu);
typedef void (*gc_ukr_da_f64)(ptrdiff_t k, const double *a, ptrdiff_t lda, const double *b,
                              ptrdiff_t ldb, double *c, ptrdiff_t ldc, double alpha, double beta,
                              const double *bias, int relu);

/* The first `rows` (1 .. mr - 1) rows of the tile (isa/ukr.h's edge kernels): A a packed panel
 * of mr rows, only those rows of c read / written; otherwise the contract above.  The bits of the
 * full kernel's rows.  NULL where an ISA has none (the driver pads the tile instead). */
typedef void (*gc_ukr_rows_f32)(int rows, ptrdiff_t k, const float *a, const float *b,
                                ptrdiff_t ldb, float *c, ptrdiff_t ldc, float beta,
                                const float *bias, int relu);
typedef void (*gc_ukr_rows_f64)(int rows, ptrdiff_t k, const double *a, const double *b,
                                ptrdiff_t ldb, double *c, ptrdiff_t ldc, double beta,
                                const double *bias, int relu);

/* Direct-convolution micro-kernel (isa/ukr_conv.h, conv_direct.c; one per ISA that has one,
 * named conv_<isa>_f32_<MR>x<NR>, the GEMM's float32 tile):
 *   T[i, j] = sum_{p < k} img[rows[i] + koff[p]] * b[p * NR + j]   for i < MR, j < NR (k >= 1)
 *   c (MR x NR, row-major, ldc = NR) = T (acc_in == 0) or T + c (acc_in == 1);
 *   b: one K block of a packed panel (NR columns per step, 64-byte aligned); every
 *   img[rows[i] + koff[p]] must be readable.  Each element runs the GEMM micro-kernel's FMA chain
 *   over p, so a K block gives the bits the GEMM gives on the same operands. */
typedef void (*gc_cukr_f32)(ptrdiff_t k, const float *img, const ptrdiff_t *rows,
                            const int32_t *koff, const float *b, float *c, int acc_in);
/* The direct forward's store of a tile t of MR pixels (MR x NR, row-major: pixel i, channel j,
 * what gc_cukr_f32 wrote with acc_in == 0) into NCHW, channels j < nv (<= NR):
 * c[j * ldc + i] = t[i][j] (+ c[j * ldc + i] when acc_in: t first, as the kernel's acc + c)
 * (+ bias[j] when bias != NULL), each rounded on its own: the bits of conv_direct.c's portable
 * transposing loop. */
typedef void (*gc_ctile_f32)(const float *t, float *c, ptrdiff_t ldc, ptrdiff_t nv, int acc_in,
                             const float *bias);
/* The few-taps weight gradient's pixel loop (isa/conv_wtaps.h, driver conv_wtaps.c): for o < no,
 * t < nt, acc[(o*nt + t)*VL + j] += g[o*l + p] * xs[tb[t] + p] over the pixels p < l with
 * p = j (mod VL) (VL = gc_isa_kernels.wtaps_vl: 8 or 16), in p order; gacc (NULL: none)
 * [no, 8]: the bias gradient's eight lanes (conv.c's gc_conv_rowsum order), gacc[o*8 + k] +=
 * g[o*l + p] over p = k (mod 8). */
typedef void (*gc_wtaps_f32)(ptrdiff_t l, const float *g, ptrdiff_t no, const float *xs,
                             const ptrdiff_t *tb, ptrdiff_t nt, float *acc, float *gacc);
/* Pointwise (1x1) convolution micro-kernel (isa/ukr_pw.h, conv_pw.c; the GEMM's float32 tile,
 * named pw_<isa>_f32_<MR>x<NR>): the GEMM micro-kernel's tile T = A B over k steps (a, b packed
 * panels: A[i, p] at a[p * MR + i], B[p, j] at b[p * NR + j]) and then, each rounded on its own:
 * + c (acc_in), + rb[i] (rb != NULL), + res[i * ldc + j] (res != NULL), relu; stored to c
 * (the elements i < mv <= MR, j < nv <= NR at c[i * ldc + j]; only those are read).  The bits
 * of the GEMM's tile followed by gemm.c's convolution epilogue (gc_epi).  cn, rn: the c and res
 * of the caller's next tile when that one is a full MR x NR tile (their lines are prefetched
 * while this one runs), else NULL (rn NULL without a residual too). */
typedef void (*gc_pwukr_f32)(ptrdiff_t k, const float *a, const float *b, float *c, ptrdiff_t ldc,
                             int mv, int nv, int acc_in, const float *rb, const float *res,
                             int relu, const float *cn, const float *rn);
/* The pointwise convolution's pixels x channels tile (conv_pw.c's small-image mode, and the
 * direct convolution's, conv_direct_lanes.c; AVX-512: 7 pixels x 64 output channels, the
 * channels along the vector lanes): over k steps, pixel i's input at step p, x[p * ldx + i]
 * (koff NULL: an image's planes) or x[koff[p] + i * sx] (a padded image's taps; i < mv <= 7, read
 * straight from the image, never past pixel mv - 1), times the weight of channel j, from two
 * packed 32-wide B panels (channel j < 32 at b0[p * 32 + j], j >= 32 at b1[p * 32 + j - 32]: the
 * GEMM's swapped weight panels), each element the GEMM micro-kernel's FMA chain from zero; then
 * + t (acc_in) and stored to t[i * 64 + j] (all 7 x 64: rows past mv hold copies of row mv - 1).
 * pf: npf <= k cache lines from pf on requested, one per K step (the caller's next weights, on
 * their way from memory while this tile re-reads cached ones). */
typedef void (*gc_pwtukr_f32)(ptrdiff_t k, const float *x, ptrdiff_t ldx, const int32_t *koff,
                              int sx, int mv, const float *b0, const float *b1, float *t,
                              int acc_in, const float *pf, ptrdiff_t npf);
/* c[i * ldc + j] := t[j * 64 + i] (+ rb[i]) (+ res[i * ldc + j]), relu ((v <= 0) ? +0 : v,
 * NaN kept) for channels i < nch <= 64 and pixels j < l (t [l][64], the pixels x channels
 * tiles' buffer), each rounded on its own: the bits of the copy then epi_rows. */
typedef void (*gc_pwtstore_f32)(const float *t, ptrdiff_t l, float *c, ptrdiff_t ldc,
                                ptrdiff_t nch, const float *rb, const float *res, int relu);

/* The few-input-channels direct convolution's kernel (isa/ukr_c1.h, conv_c1.c): npix
 * consecutive output pixels (an output row, or a run across rows), every output channel j < o:
 * out[j * ldo + i] = relu(sum over taps t < nt of w[t] * x[koff[t] + i] (+ bias[j])
 * (+ res[j * ldo + i])), the sum an FMA chain from zero in t order, each epilogue operation
 * rounded on its own (bias, res NULL: none).  w: blocks of c1_ob channels, [o / c1_ob rounded
 * up][nt][c1_ob] (channels past o zero); x readable up to pixel max(npix, c1_vl) - 1 at every
 * tap. */
typedef void (*gc_c1ukr_f32)(ptrdiff_t nt, const float *x, const int32_t *koff, const float *w,
                             ptrdiff_t o, const float *bias, const float *res, int relu,
                             float *out, ptrdiff_t ldo, ptrdiff_t npix);

/* Winograd F(4x4, 3x3) tile transforms (isa/winograd.h, conv_winograd.c) along a block of
 * n <= GC_WG_TB tiles: in: d [6][6][GC_WG_TB] (each tile's 6x6 input window) -> the 36 values
 * B^T d B at v + xi*xs + t; out: the 36 products at m + xi*xs + t -> y [4][4][GC_WG_TB], the
 * 4x4 outputs A^T m A + bias.  Every ISA's give the same bits. */
#define GC_WG_TB 64
typedef void (*gc_wg_in_f32)(const float *d, ptrdiff_t n, float *v, ptrdiff_t xs);
typedef void (*gc_wg_out_f32)(const float *m, ptrdiff_t xs, ptrdiff_t n, float bias, float *y);

/* y[i] = f(x[i]) for i < n; y may equal x. */
typedef void (*gc_vfun_f32)(const float *x, float *y, ptrdiff_t n);
typedef void (*gc_vbackward_f32)(const float *g, const float *s, float *y, ptrdiff_t n);

/* Softmax's fused middle pass: e[j] = exp(x[j] - m) for j < n, stored to y[j] unless y is NULL
 * (y may equal x), and returns the sum of the e[j] in double.  The sum runs per GC_SM_CHUNK
 * elements (however the ISA likes within a chunk) and the chunk sums are added in order in
 * double, so the result depends on n and the ISA only: never on how rows are spread over
 * threads, and it is the same on every call. */
typedef double (*gc_vexp_sum_f32)(const float *x, float *y, ptrdiff_t n, float m);
#define GC_SM_CHUNK 128
/* Softmax's other two passes: the max of x[0..n) ignoring NaN (-inf when n == 0 or all are NaN;
 * which of +0 / -0 is unspecified), and y[j] = ((x[j] - a) - b) * c (y may equal x): softmax
 * scales with (0, 0, 1/sum), log-softmax shifts with (max, log(sum), 1), both exact uses. */
typedef float (*gc_vmax_f32)(const float *x, ptrdiff_t n);
typedef void (*gc_vsub2_mul_f32)(const float *x, float *y, ptrdiff_t n, float a, float b,
                                 float c);
/* Softmax (log-softmax when log_softmax) of 4 consecutive rows of n (row r at x + r n, into
 * y + r n; y may equal x): each row the bits of softmax.c's row-by-row path over this ISA's
 * vmax_f32, vexp_shift_sum_f32 and vsub2_mul_f32 (short rows: 4 dependency chains side by side). */
typedef void (*gc_vsoftmax4_f32)(const float *x, float *y, ptrdiff_t n, int log_softmax);
/* ONNX's uint8 quantization (isa/quant.h): QuantizeLinear's loop (gc_quantize_linear_u8's
 * formula and bits), and DynamicQuantizeLinear's range: *lo = min(0, min x), *hi = max(0,
 * max x), both NaN when some x is NaN. */
typedef void (*gc_qlinear_u8)(const float *x, uint8_t *out, ptrdiff_t n, float scale, int32_t zp);
typedef void (*gc_vrange_f32)(const float *x, ptrdiff_t n, float *lo, float *hi);
/* max_pool2d's values-only pass at column stride 2 (maxpool.c's mp_row_max_s2): nv vectors of 8
 * outputs, out[i] (i < 8 nv) = the maximum of rows[r][c0 + 2 i + kj] over r < nr, kj < kw in
 * that order by v > m ? v : m (reading columns up to c0 + kw - 1 + 16 nv - 1); nonzero when
 * some input was NaN, whose outputs the caller redoes by the exact rule. */
typedef int (*gc_mp_s2_f32)(const float *const *rows, int nr, ptrdiff_t kw, ptrdiff_t c0,
                            float *out, ptrdiff_t nv);
/* max_pool2d's backward over non-overlapping 2-wide windows (maxpool.c's mp_bwd_tiled), one
 * plane's first oh * kh rows of width w: for oy < oh, r < kh, i < ow, j < 2, with row = oy kh + r,
 * out[row w + 2 i + j] = idx[oy ow + i] == row w + 2 i + j ? g[oy ow + i] + 0 : 0 (+ 0: the
 * scatter's sum into zeros, -0 becomes +0), columns from 2 ow untouched; returns the number of
 * (oy, r, i) whose difference is 0 or 1 (compared in 64 bits: at most one r per output). */
typedef ptrdiff_t (*gc_mp_bwd_w2_f32)(const float *g, const int64_t *idx, float *out,
                                      ptrdiff_t ow, ptrdiff_t oh, ptrdiff_t kh, ptrdiff_t w);
/* max_pool2d's forward with indices over 2-wide windows (maxpool.c's mp_row_w2), oh output rows
 * whose windows read the same rows shifted by rs elements each: for y < oh, i < ow the window of
 * rows[r][y rs + 2 i + j] (r < nr, j < 2, nr >= 1) scanned in that order, the first taken, then
 * v > max || isnan(v); vr[y ow + i] its value, ir[y ow + i] = o0 + y rs + 2 i + toff[r] + j. */
typedef void (*gc_mp_fwd_w2_f32)(const float *const *rows, const int32_t *toff, int nr,
                                 ptrdiff_t ow, int64_t o0, float *vr, int64_t *ir, ptrdiff_t oh,
                                 ptrdiff_t rs);
/* max_pool2d's values-only plane at column stride 2 (maxpool.c's mp_plane_s2), its two passes.
 * mp_h2: for the nrows rows of width w at x (row stride w), hb[y owp + i] (i < owp, a multiple
 * of 16) = the maximum of x[y][2 i - pw + kj] over kj < kw in that order by v > m ? v : m from
 * -inf, columns outside [0, w) read as -inf; nonzero when some input read was NaN (the caller
 * redoes the plane by the exact rule).  mp_v: for each output row oy < nout, out[oy ow + i]
 * (i < ow) = the maximum of rows[oy * kh + r][i] over r < nr[oy] in that order, -inf when
 * nr[oy] = 0. */
typedef int (*gc_mp_h2_f32)(const float *x, ptrdiff_t w, ptrdiff_t nrows, ptrdiff_t kw,
                            ptrdiff_t pw, float *hb, ptrdiff_t owp);
typedef void (*gc_mp_v_f32)(const float *const *rows, const int *nr, ptrdiff_t kh,
                            ptrdiff_t nout, float *out, ptrdiff_t ow);

/* One fused optimizer update (cpu/optim.c; loops in cpu/isa/optim.h): parameter p, gradient g
 * and up to three state buffers (SGD: momentum; Adam: exp_avg, exp_avg_sq, max_exp_avg_sq;
 * RMSprop: square_avg, grad_avg, momentum), NULL when unused.  A range function updates
 * elements [lo, hi). */
typedef struct {
    float *p;
    const float *g;
    float *s1, *s2, *s3;
    const gc_optim_hp *h;
} gc_optim_args_f32;
typedef struct {
    double *p;
    const double *g;
    double *s1, *s2, *s3;
    const gc_optim_hp *h;
} gc_optim_args_f64;
typedef void (*gc_optim_range_f32)(const gc_optim_args_f32 *a, ptrdiff_t lo, ptrdiff_t hi);
typedef void (*gc_optim_range_f64)(const gc_optim_args_f64 *a, ptrdiff_t lo, ptrdiff_t hi);

/* linear_relu's backward (unary.c gc_relu_backward_bias; loops in cpu/isa/relu_bias.h): out =
 * s > 0 ? g : +0 for g, s [m, n], bsum [n] its column sums; a range function does the chunks
 * [lo, hi) of GC_RBB_CHUNK columns. */
#define GC_RBB_CHUNK 128
typedef struct {
    const float *g, *s;
    float *out, *bsum;
    ptrdiff_t m, n;
} gc_rbb_args_f32;
typedef struct {
    const double *g, *s;
    double *out, *bsum;
    ptrdiff_t m, n;
} gc_rbb_args_f64;
typedef void (*gc_rbb_range_f32)(const gc_rbb_args_f32 *a, ptrdiff_t lo, ptrdiff_t hi);
typedef void (*gc_rbb_range_f64)(const gc_rbb_args_f64 *a, ptrdiff_t lo, ptrdiff_t hi);

/* Small-M GEMM with B read where it lies (isa/stream.h; gemm.c's path for m <= GC_GEMV_MAX_M_*
 * and attention.c's products):
 *   C[i, j] = alpha * sum_{p < k} A[i, p] * B(p, j)             (beta == 0: C is not read)
 *   C[i, j] = alpha * sum_{p < k} A[i, p] * B(p, j) + beta * C[i, j]   (otherwise)
 * for i < m, j < n (any m >= 0, run as steps of up to 8 rows, k >= 0); A[i, p] at a[i*lda + p],
 * C[i, j] at c[i*ldc + j];
 *   gemv_t: B(p, j) at b[j*ldb + p] (B stored n x k: one dot product of contiguous rows per
 *           element, the lanes reduced at the end, then the k % lanes tail);
 *   gemv_n: B(p, j) at b[p*ldb + j] (B stored k x n: axpy over B's rows).
 * Each element's arithmetic depends only on k, m and the ISA, never on n or where its column
 * lies: the same bits whatever split of the columns the caller makes. */
typedef void (*gc_gemv_f32)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, const float *a, ptrdiff_t lda,
                            const float *b, ptrdiff_t ldb, float *c, ptrdiff_t ldc, float alpha,
                            float beta);
typedef void (*gc_gemv_f64)(ptrdiff_t m, ptrdiff_t n, ptrdiff_t k, const double *a,
                            ptrdiff_t lda, const double *b, ptrdiff_t ldb, double *c,
                            ptrdiff_t ldc, double alpha, double beta);
/* One row of layer_norm (n >= 1; w, b may be NULL; y may equal x): y = (x - mean) / sqrt(var +
 * eps) * w + b, biased variance (isa/stream.h: corrected two-pass). */
typedef void (*gc_ln_row_f32)(const float *x, const float *w, const float *b, float *y,
                              ptrdiff_t n, double eps);
typedef void (*gc_ln_row_f64)(const double *x, const double *w, const double *b, double *y,
                              ptrdiff_t n, double eps);

/* int8 GEMM micro-kernel (qgemm.c; one per ISA, named qgemm_<isa>_u8s8_<MR>x<NR>):
 *
 *   C[i, j] (+)= sum_{p < kb} v(A[i, p]) * B[p, j]   for i < rows (1..q_mr), j < q_nr
 *   a: A read in place, A[i, p] at a[i * lda + p] (bytes; the driver guarantees that all kb bytes
 *      of every row are readable, copying rows near the buffer's end when K % 8 != 0);
 *   v(x) = (a_signed ? x ^ 0x80 : x) - q_shift[a_signed], x read as uint8 and q_shift the ISA's
 *      (0 or 128: how its instruction sees the activations), so the kernel's sum is exact in
 *      int32 and the driver subtracts (a_zp_u8 - q_shift) * colsum[j] to get sum (a - a_zp) * b;
 *   b: one packed K block of one panel: kb (a multiple of 8) steps of q_nr columns, B[p, j] at
 *      b[(p / q_ku) * q_nr * q_ku + j * q_ku + p % q_ku] (q_ku = 4: VNNI quads; 1: plain rows);
 *   c: int32, C[i, j] at c[i * ldc + j]; accumulate = 0 writes the sums, 1 adds them. */
typedef void (*gc_qukr)(int rows, ptrdiff_t kb, const uint8_t *a, ptrdiff_t lda, const int8_t *b,
                        int32_t *c, ptrdiff_t ldc, int accumulate, int a_signed);
/* One output row of the int8 GEMM from its int32 sums (kernels.h's gc_qepi; isa/qgemm.h, written
 * once and compiled in each ISA file): columns [j0, j0 + n) of acc[0..n) to out (the row's
 * element j0). */
typedef void (*gc_qepi_row)(const int32_t *acc, ptrdiff_t n, const gc_qepi *e, ptrdiff_t j0,
                            void *out);

typedef struct {
    int isa;
    const char *name;
    int mr_f32, nr_f32, mr_f64, nr_f64;
    gc_ukr_f32 ukr_f32;
    gc_ukr_f64 ukr_f64;
    gc_ukr_da_f32 ukr_da_f32;
    gc_ukr_da_f64 ukr_da_f64;
    gc_ukr_rows_f32 ukr_rows_f32; /* (NULL: none) */
    gc_ukr_rows_f64 ukr_rows_f64;
    const char *ukr_f32_name, *ukr_f64_name;
    /* the direct convolution's micro-kernel (mr_f32 x nr_f32); NULL: conv2d runs im2col + GEMM */
    gc_cukr_f32 cukr_f32;
    const char *cukr_f32_name;
    int cukr_mr, cukr_nr; /* its tile: used only while it is the float32 GEMM's (mr_f32, nr_f32) */
    gc_ctile_f32 ctile_f32; /* its full tile's transposed store, or NULL (conv_direct.c's loop) */
    /* a 16-column direct kernel (cukr16_mr x 16, the same contract and per-element FMA chain:
     * the same bits), or NULL: conv_direct.c's backward runs it where the columns (input
     * channels of the input gradient, output channels of the weight gradient) fill 16-wide
     * panels better than cukr_nr-wide ones (AVX-512: 16 channels half-fill a 32-wide tile, and
     * Zen 4 runs two 8-wide FMAs a cycle against one 16-wide one, so nothing is lost) */
    gc_cukr_f32 cukr16_f32;
    const char *cukr16_f32_name;
    int cukr16_mr;
    /* the few-taps weight gradient's kernel (conv_wtaps.c) and its lanes; NULL: none (the
     * weight gradient of few taps runs conv.c's GEMM path) */
    gc_wtaps_f32 wtaps_f32;
    int wtaps_vl;
    /* the pointwise convolution's micro-kernel (mr_f32 x nr_f32); NULL: 1x1 convolutions run
     * conv.c's GEMM path */
    gc_pwukr_f32 pwukr_f32;
    /* ... and its half-width tile (mr_f32 x nr_f32 / 2) over full-width B panels, for a last
     * column panel of at most nr_f32 / 2 pixels; NULL: none (the full tile runs it) */
    gc_pwukr_f32 pwukr_half_f32;
    /* ... and its quarter-width tile (mr_f32 x nr_f32 / 4, over full-width B panels), for the
     * last at most nr_f32 / 4 pixels of a last column panel; NULL: none */
    gc_pwukr_f32 pwukr_quarter_f32;
    /* ... and its pixels x channels tile (gc_pwtukr_f32) for images of few pixels; NULL: none */
    gc_pwtukr_f32 pwtukr_f32;
    /* ... and its buffer's transposed store (gc_pwtstore_f32; NULL: conv_pw.c's loop) */
    gc_pwtstore_f32 pwtstore_f32;
    /* the few-input-channels direct convolution's row kernel (gc_c1ukr_f32), its output
     * channel block and its vector lanes; NULL: none (conv_c1.c's path off) */
    gc_c1ukr_f32 c1ukr_f32;
    int c1_ob, c1_vl;
    /* the Winograd convolution's tile transforms (isa/winograd.h; every ISA has them) */
    gc_wg_in_f32 wg_in_f32;
    gc_wg_out_f32 wg_out_f32;
    /* vectorized float32 UNARY_* functions; NULL = the portable libm loop in unary.c */
    gc_vfun_f32 vunary_f32[GC_UNARY_COUNT];
    /* gelu's backward g * gelu'(x) (erf form); NULL = the libm loop in unary.c */
    gc_vbackward_f32 vgelu_backward_f32;
    /* float32 exp(x - m) with its sum (softmax, log-softmax, cross-entropy); never NULL: the
     * scalar entry is expf + a double sum (isa/scalar.c), the vector ones isa/vmath.h's */
    gc_vexp_sum_f32 vexp_shift_sum_f32;
    /* NULL = softmax.c's portable loops (16-byte vectors of vec.h) */
    gc_vmax_f32 vmax_f32;
    gc_vsub2_mul_f32 vsub2_mul_f32;
    gc_vsoftmax4_f32 vsoftmax4_f32; /* NULL where vmax_f32 is (then row by row) */
    /* NULL = qconv.c's / qdynamic.c's portable loops (isa/quant.h) */
    gc_qlinear_u8 q_linear_u8;
    gc_qlinear_u8 q_torch_u8; /* gc_quantize_u8's loop (PyTorch's rounding) */
    gc_vrange_f32 q_range_f32;
    /* NULL = maxpool.c's 16-byte vectors */
    gc_mp_s2_f32 mp_s2_f32;
    gc_mp_bwd_w2_f32 mp_bwd_w2_f32; /* NULL = maxpool.c's scalar masks */
    gc_mp_fwd_w2_f32 mp_fwd_w2_f32; /* NULL = maxpool.c's 16-byte vectors */
    gc_mp_h2_f32 mp_h2_f32; /* NULL = mp_s2_f32 / mp_s2_vecs row by row */
    gc_mp_v_f32 mp_v_f32;   /* NULL = maxpool.c's 16-byte vectors */
    /* fused optimizer updates (cpu/isa/optim.h compiled with the ISA's flags) */
    gc_optim_range_f32 sgd_f32, adam_f32, rmsprop_f32;
    gc_optim_range_f64 sgd_f64, adam_f64, rmsprop_f64;
    /* linear_relu's backward pass (cpu/isa/relu_bias.h compiled with the ISA's flags) */
    gc_rbb_range_f32 relu_bias_f32;
    gc_rbb_range_f64 relu_bias_f64;
    /* isa/stream.h: small-M GEMM in both B layouts, layer_norm rows */
    gc_gemv_f32 gemv_n_f32, gemv_t_f32, gemv_t_stream_f32; /* stream: B from memory */
    gc_gemv_f64 gemv_n_f64, gemv_t_f64, gemv_t_stream_f64;
    gc_ln_row_f32 ln_row_f32;
    gc_ln_row_f64 ln_row_f64;
    /* int8 GEMM (qgemm.c): the tile q_mr x q_nr, the packed B's K interleave q_ku, the
     * activation shift per a_signed (0 / 1), the micro-kernel and the epilogue.  q_ukr_full is
     * NULL when q_ukr takes every int8 weight, else the kernel for weights holding -128 (AVX2's
     * vpsignb cannot negate it). */
    int q_mr, q_nr, q_ku, q_shift[2];
    gc_qukr q_ukr, q_ukr_full;
    gc_qepi_row q_epi;
    const char *q_name;
} gc_isa_kernels;

/* GEMM cache blocking for one float type: A blocks of mc x kc (shared by the threads, L3),
 * B blocks of kc x nc (one per thread, L2), A micro-panels of mr x kc (L1). */
typedef struct {
    int mr, nr;
    ptrdiff_t mc, kc, nc;
} gc_blocking;

typedef struct {
    long l1d, l2, l3; /* bytes; per core for L1d / L2, the whole cache for L3 */
    const char *source; /* "cpuid", "sysconf" or "default" */
} gc_caches;

extern gc_isa_kernels gc_isa;
extern gc_blocking gc_blk_f32, gc_blk_f64;
extern gc_caches gc_cache_info;

/* A small-M GEMM's B of at least this many bytes takes gemv_t's streaming form (gemm_small_m.h:
 * it prefetches the next rows): half the L3, as other data (a model's other weights) evicts such
 * a B between calls; with no L3 reported (dispatch.c: none, or one smaller than L2) 8 MiB, past
 * any L2, so in-cache weights keep the plain form (the prefetches cost them ~5 %). */
#define GC_GEMV_STREAM_BYTES                                                                   \
    (gc_cache_info.l3 > 0 ? 0.5 * (double)gc_cache_info.l3 : 8.0 * 1024 * 1024)

/* The K block of the blocked GEMM for k (kind 'f' or 'd'; 0 when k == 0): K cut into blocks of
 * near-equal size, multiples of 8, at most the blocking's kc (gemm.c, and the panels of a
 * pre-packed operand, pack.c). */
static inline ptrdiff_t gc_gemm_kc(char kind, ptrdiff_t k)
{
    const ptrdiff_t blk = kind == 'f' ? gc_blk_f32.kc : gc_blk_f64.kc;
    if (k <= 0)
        return 0;
    const ptrdiff_t nkb = (k + blk - 1) / blk;
    return ((k + nkb - 1) / nkb + 7) / 8 * 8;
}

/* The panel width of a packed operand (gc_packed.w): the register tile's rows (MR) for side A
 * with swap 0, side B with swap 1 and the Winograd weight (swap 2), else its columns (NR). */
static inline int gc_packed_width(char kind, int side, int swap)
{
    const gc_blocking *b = kind == 'f' ? &gc_blk_f32 : &gc_blk_f64;
    return swap == 2 || (side == 0) != (swap != 0) ? b->mr : b->nr;
}

void gc_isa_fill_scalar(gc_isa_kernels *k);
/* the direct-convolution entries (cukr_f32) of an ISA, set after its gc_isa_fill_* */
void gc_conv_fill_scalar(gc_isa_kernels *k);
#if GC_X86
void gc_conv_fill_sse2(gc_isa_kernels *k);
void gc_conv_fill_avx2(gc_isa_kernels *k);
/* the convolution-backward entries (isa/<isa>_conv_backward.c) */
void gc_conv_bwd_fill_avx2(gc_isa_kernels *k);
void gc_conv_bwd_fill_avx512(gc_isa_kernels *k);
/* the few-input-channels direct convolution's row kernel (isa/<isa>_conv_c1.c) */
void gc_conv_c1_fill_sse2(gc_isa_kernels *k);
void gc_conv_c1_fill_avx2(gc_isa_kernels *k);
void gc_conv_c1_fill_avx512(gc_isa_kernels *k);
void gc_isa_fill_sse2(gc_isa_kernels *k);
void gc_isa_fill_avx2(gc_isa_kernels *k);
void gc_isa_fill_avx512(gc_isa_kernels *k);
/* the int8 GEMM entries alone (avx512 takes AVX2's where the CPU lacks AVX512-VNNI) */
void gc_qgemm_fill_avx2(gc_isa_kernels *k);
#endif
#if GC_NEON
void gc_isa_fill_neon(gc_isa_kernels *k);
#endif

extern const char *const gc_isa_names[GC_ISA_COUNT];
/* Bit i set: GC_ISA i is compiled in and supported by this CPU and OS. */
int gc_isa_supported_mask(void);
/* Selects the ISA (forced: NULL or "" = the best one; else one of gc_isa_names), fills gc_isa,
 * detects caches and sets the blocking.  Returns 0, or -1 with a message in err. */
int gc_cpu_init(const char *forced, char *err, size_t errlen);

/* ---- thread pool (pool.c) ---------------------------------------------------------------- */

/* A parallel region: body(ctx, slot) runs on the caller (slot 0) and on each pool worker that
 * gets to run while the region is open (slots 1, 2, ... < want).  The caller closes the region
 * when its own body returns and then waits only for the workers that joined, so a worker that is
 * descheduled never holds anyone up.  Bodies must therefore claim their work dynamically (atomic
 * counters in ctx); the slot only names per-participant scratch.  When the pool is busy (another
 * Python thread's region, or a nested call) the caller runs body alone.  Returns the number of
 * participants. */
typedef void (*gc_body)(void *ctx, int slot);
int gc_region(gc_body body, void *ctx, int want);

/* Threads a parallel region may use (GPUCORE_NUM_THREADS, default: the CPUs this process may
 * run on); >= 1. */
int gc_pool_size(void);
/* Whether the pool has more than one thread and its first worker is not asleep (workers spin
 * for 200 us after each region, pool.c): a two-thread region then costs about a microsecond,
 * where waking a sleeping worker costs the caller ~7 us and the worker joins tens of us later.
 * A hint (it may change at once), for thread counts of short work; never a result's bits. */
int gc_pool_awake(void);
/* Changes the pool size (n >= 1); waits for a running region to finish first. */
void gc_pool_set_size(int n);

/* A statically split task: task(ctx, tid, nt) runs exactly once for each tid < nt, on whichever
 * threads of a region (possibly several tids on one thread).  Tasks must partition their work so
 * that results do not depend on nt, and must not wait for each other. */
typedef void (*gc_task)(void *ctx, int tid, int nthreads);
int gc_parallel(gc_task task, void *ctx, int want);

/* Splits [0, n) into nt contiguous ranges whose boundaries are multiples of align; range t is
 * [*lo, *hi) (possibly empty). */
static inline void gc_split(ptrdiff_t n, ptrdiff_t align, int t, int nt, ptrdiff_t *lo,
                            ptrdiff_t *hi)
{
    const ptrdiff_t units = (n + align - 1) / align;
    const ptrdiff_t q = units / nt, r = units % nt;
    const ptrdiff_t u0 = t * q + (t < r ? t : r), u1 = u0 + q + (t < r ? 1 : 0);
    *lo = u0 * align < n ? u0 * align : n;
    *hi = u1 * align < n ? u1 * align : n;
}

/* Thread count for work of `cost` units where one thread should get at least `grain` units. */
static inline int gc_threads_for(double cost, double grain)
{
    const int p = gc_pool_size();
    if (p <= 1 || cost < 2.0 * grain)
        return 1;
    const double t = cost / grain;
    return t >= (double)p ? p : (int)t;
}

/* Runs fn(ctx, lo, hi) over [0, n) split into contiguous ranges (boundaries multiples of align)
 * on as many threads as `cost_ns` (the estimated single-thread time) warrants: one thread below
 * ~50 us of work, then one per ~25 us.  The split never changes a result: fn must compute each
 * element of [0, n) the same way whatever range it is in. */
typedef void (*gc_range_fn)(void *ctx, ptrdiff_t lo, ptrdiff_t hi);
void gc_parallel_range(ptrdiff_t n, ptrdiff_t align, double cost_ns, gc_range_fn fn, void *ctx);
#define GC_GRAIN_NS 25000.0

/* Per-thread scratch memory: a 64-byte aligned block of at least `bytes`, kept (and reused) by
 * the calling thread until it exits; NULL if malloc fails.  Not reentrant within one thread. */
void *gc_scratch(size_t bytes);

#endif /* GPUCORE_ISA_H */

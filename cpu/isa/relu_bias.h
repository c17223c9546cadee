/* linear_relu's backward pass (template), included by every cpu/isa/<isa>.c so that each is
 * compiled with that ISA's flags (unary.c gc_relu_backward_bias drives it over the thread pool):
 * out = s > 0 ? g : +0 for g, s [m, n] and bsum [n] = out's rows summed, each column in double
 * row by row in order from 0 (reduce.c reduce_cols' order over dim 0, so the bits of
 * relu_backward then sum(0), on every ISA: a select, a widening and additions in a fixed order,
 * nothing the ISA rounds differently).
 *
 * A range function does the column chunks [lo, hi) of GC_RBB_CHUNK columns.  The baseline
 * build (16-byte vectors, its 2-lane double conversion) took as long as Adam's update over three
 * times the elements in the MLP training step; compiled per ISA the loops take the ISA's width. */
#ifndef GC_RBB_T

#define GC_RBB_T float
#define GC_RBB_SFX f32
#include "isa/relu_bias.h"
#undef GC_RBB_T
#undef GC_RBB_SFX

#define GC_RBB_T double
#define GC_RBB_SFX f64
#include "isa/relu_bias.h"
#undef GC_RBB_T
#undef GC_RBB_SFX

static void gc_relu_bias_fill(gc_isa_kernels *k)
{
    k->relu_bias_f32 = relu_bias_chunks_f32;
    k->relu_bias_f64 = relu_bias_chunks_f64;
}

#else /* type-generic body */

#define GC_RB_CAT_(a, b) a##_##b
#define GC_RB_CAT(a, b) GC_RB_CAT_(a, b)
#define GC_RB_FN(name) GC_RB_CAT(name, GC_RBB_SFX)

static void GC_RB_FN(relu_bias_chunks)(const GC_RB_FN(gc_rbb_args) *J, ptrdiff_t lo, ptrdiff_t hi)
{
    typedef GC_RBB_T T;
    const ptrdiff_t m = J->m, n = J->n;
    double acc[GC_RBB_CHUNK];
    for (ptrdiff_t c = lo; c < hi; c++) {
        const ptrdiff_t t0 = c * GC_RBB_CHUNK;
        const ptrdiff_t w = n - t0 < GC_RBB_CHUNK ? n - t0 : GC_RBB_CHUNK;
        for (ptrdiff_t t = 0; t < w; t++)
            acc[t] = 0.0;
        /* the mask and the sums in separate simple loops the compiler vectorizes, both
         * operands loaded unconditionally (a conditional load of g, or a select and a sum in
         * one loop, compile to branches that mispredict on random signs); up to four masked
         * rows, still in L1, added per pass over acc, each column in row order */
        for (ptrdiff_t j = 0; j < m; j += 4) {
            const ptrdiff_t rows = m - j < 4 ? m - j : 4;
            for (ptrdiff_t r = 0; r < rows; r++) {
                const T *restrict gr = J->g + (j + r) * n + t0;
                const T *restrict sr = J->s + (j + r) * n + t0;
                T *restrict orow = J->out + (j + r) * n + t0;
                for (ptrdiff_t t = 0; t < w; t++) {
                    const T gv = gr[t], sv = sr[t];
                    orow[t] = sv > (T)0 ? gv : (T)0;
                }
            }
            const T *restrict r0 = J->out + j * n + t0;
            if (rows == 4) {
                const T *restrict r1 = r0 + n, *restrict r2 = r1 + n, *restrict r3 = r2 + n;
                for (ptrdiff_t t = 0; t < w; t++)
                    acc[t] = (((acc[t] + (double)r0[t]) + (double)r1[t]) + (double)r2[t]) +
                             (double)r3[t];
            } else {
                for (ptrdiff_t r = 0; r < rows; r++)
                    for (ptrdiff_t t = 0; t < w; t++)
                        acc[t] += (double)r0[r * n + t];
            }
        }
        for (ptrdiff_t t = 0; t < w; t++)
            J->bsum[t0 + t] = (T)acc[t];
    }
}

#undef GC_RB_FN
#undef GC_RB_CAT
#undef GC_RB_CAT_

#endif

/* layer_norm over the rows of a C-contiguous [rows, n] array, one kernel call:
 *   out = (x - mean) / sqrt(var + eps) * weight + bias   per row (biased variance, as PyTorch),
 * with weight and bias optional (NULL) and out allowed to be x itself.  Each row runs through
 * the ISA's gc_isa.ln_row_* (isa/stream.h): a first pass estimates the mean, a second sums the
 * deviations and their squares (correcting the mean by the deviations' mean: accurate for rows
 * whose mean is large next to their spread), a third writes the result.  The row stays in cache
 * between the passes; nothing is allocated.  Rows are split over the thread pool when the call
 * has enough work (gc_parallel_range: ~50 us); each row is computed the same way in any split. */
#include "isa.h"
#include "kernels.h"

/* single-thread cost per element (three passes over cached data, AVX-512: ~0.15 ns; the
 * estimate covers the narrower ISAs too), for the thread count */
#define GC_LN_NS 0.25

typedef struct {
    const void *x, *w, *b;
    void *y;
    ptrdiff_t n;
    double eps;
} gc_ln_job;

static void ln_range_f32(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const gc_ln_job *J = (const gc_ln_job *)ctx;
    const float *x = (const float *)J->x;
    float *y = (float *)J->y;
    for (ptrdiff_t r = lo; r < hi; r++)
        gc_isa.ln_row_f32(x + r * J->n, (const float *)J->w, (const float *)J->b, y + r * J->n,
                          J->n, J->eps);
}

static void ln_range_f64(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const gc_ln_job *J = (const gc_ln_job *)ctx;
    const double *x = (const double *)J->x;
    double *y = (double *)J->y;
    for (ptrdiff_t r = lo; r < hi; r++)
        gc_isa.ln_row_f64(x + r * J->n, (const double *)J->w, (const double *)J->b,
                          y + r * J->n, J->n, J->eps);
}

void gc_layer_norm_f32(const float *x, const float *weight, const float *bias, float *out,
                       ptrdiff_t rows, ptrdiff_t n, double eps)
{
    if (rows <= 0 || n <= 0)
        return;
    gc_ln_job J = {.x = x, .w = weight, .b = bias, .y = out, .n = n, .eps = eps};
    gc_parallel_range(rows, 1, (double)rows * (double)n * GC_LN_NS, ln_range_f32, &J);
}

void gc_layer_norm_f64(const double *x, const double *weight, const double *bias, double *out,
                       ptrdiff_t rows, ptrdiff_t n, double eps)
{
    if (rows <= 0 || n <= 0)
        return;
    gc_ln_job J = {.x = x, .w = weight, .b = bias, .y = out, .n = n, .eps = eps};
    gc_parallel_range(rows, 1, (double)rows * (double)n * 2.0 * GC_LN_NS, ln_range_f64, &J);
}

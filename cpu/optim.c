/* Fused optimizer updates: one pass over a parameter updates it and its state buffers in place
 * (SGD with momentum / Nesterov, Adam / AdamW with AMSGrad, RMSprop centered / with momentum).
 *
 * The arithmetic follows PyTorch's single-tensor implementations operation by operation, in the
 * parameter's precision (hyper-parameters are rounded to T first, as PyTorch does with Python
 * scalars), so float32 results agree with torch.optim to rounding.  Elements are independent:
 * large parameters are split over the thread pool and the result does not depend on the thread
 * count.  This file is the driver (thread split, entry points); the loops are per ISA
 * (cpu/isa/optim.h, reached through the gc_isa table).
 */
#include "isa.h"
#include "kernels.h"

/* Elements per thread below which a parameter is updated on the calling thread alone: an update
 * streams 12-28 bytes per element, so 64K elements is about 50 microseconds of work. */
#define GC_OPTIM_GRAIN 65536.0

typedef struct {
    const void *args;
    void (*range)(const void *args, ptrdiff_t lo, ptrdiff_t hi);
    ptrdiff_t n;
} gc_optim_job;

static void optim_task(void *ctx, int tid, int nt)
{
    const gc_optim_job *J = ctx;
    ptrdiff_t lo, hi;
    gc_split(J->n, 16, tid, nt, &lo, &hi);
    J->range(J->args, lo, hi);
}

/* Runs range(args, lo, hi) over [0, n), split over the pool when n is large. */
static void optim_run(const void *args, void (*range)(const void *, ptrdiff_t, ptrdiff_t),
                      ptrdiff_t n)
{
    gc_optim_job J = {args, range, n};
    const int nt = gc_threads_for((double)n, GC_OPTIM_GRAIN);
    if (nt > 1)
        gc_parallel(optim_task, &J, nt);
    else
        range(args, 0, n);
}

#define GC_OPTIM_ENTRIES(T, S)                                                                     \
    void gc_sgd_step_##S(T *param, const T *grad, T *buf, ptrdiff_t n, const gc_optim_hp *h)       \
    {                                                                                              \
        const gc_optim_args_##S a = {param, grad, buf, NULL, NULL, h};                             \
        optim_run(&a, (void (*)(const void *, ptrdiff_t, ptrdiff_t))gc_isa.sgd_##S, n);            \
    }                                                                                              \
    void gc_adam_step_##S(T *param, const T *grad, T *exp_avg, T *exp_avg_sq, T *max_exp_avg_sq,   \
                          ptrdiff_t n, const gc_optim_hp *h)                                       \
    {                                                                                              \
        const gc_optim_args_##S a = {param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, h};         \
        optim_run(&a, (void (*)(const void *, ptrdiff_t, ptrdiff_t))gc_isa.adam_##S, n);           \
    }                                                                                              \
    void gc_rmsprop_step_##S(T *param, const T *grad, T *square_avg, T *grad_avg,                  \
                             T *momentum_buffer, ptrdiff_t n, const gc_optim_hp *h)                \
    {                                                                                              \
        const gc_optim_args_##S a = {param, grad, square_avg, grad_avg, momentum_buffer, h};       \
        optim_run(&a, (void (*)(const void *, ptrdiff_t, ptrdiff_t))gc_isa.rmsprop_##S, n);        \
    }

GC_OPTIM_ENTRIES(float, f32)
GC_OPTIM_ENTRIES(double, f64)

/* ------------------------------------------------------------------------------------------ */
/* Multi-tensor updates: every parameter of an optimizer step in one call.  The items' elements
 * are laid end to end ([off, off + n) for each) and that concatenated range is split over the
 * pool like one large parameter, so a step over many small parameters costs one region (or
 * none), not one per parameter.  Each piece of an item runs the single-tensor loop on a
 * sub-range; elements are independent and the loops compute each one the same way in any range
 * (no FMA contraction; vector sqrt and division are correctly rounded), so the bits equal one
 * single-tensor call per item for any thread count. */

typedef struct {
    gc_optim_item *items;
    ptrdiff_t k, total;
    gc_optim_range_f32 f32; /* exactly one of the two is set */
    gc_optim_range_f64 f64;
} gc_optim_multi_job;

/* Runs the elements [lo, hi) of the concatenated range. */
static void optim_multi_range(const gc_optim_multi_job *J, ptrdiff_t lo, ptrdiff_t hi)
{
    /* the last item starting at or before lo: every item before it ends by lo */
    ptrdiff_t a = 0, b = J->k;
    while (b - a > 1) {
        const ptrdiff_t mid = a + (b - a) / 2;
        if (J->items[mid].off <= lo)
            a = mid;
        else
            b = mid;
    }
    for (ptrdiff_t i = a; i < J->k && J->items[i].off < hi; i++) {
        const gc_optim_item *it = &J->items[i];
        const ptrdiff_t l = lo > it->off ? lo - it->off : 0;
        const ptrdiff_t h = hi - it->off < it->n ? hi - it->off : it->n;
        if (l >= h)
            continue; /* an empty item */
        if (J->f32) {
            const gc_optim_args_f32 x = {it->p, it->g, it->s1, it->s2, it->s3, &it->h};
            J->f32(&x, l, h);
        } else {
            const gc_optim_args_f64 x = {it->p, it->g, it->s1, it->s2, it->s3, &it->h};
            J->f64(&x, l, h);
        }
    }
}

static void optim_multi_task(void *ctx, int tid, int nt)
{
    const gc_optim_multi_job *J = ctx;
    ptrdiff_t lo, hi;
    gc_split(J->total, 16, tid, nt, &lo, &hi);
    optim_multi_range(J, lo, hi);
}

void gc_optim_step_multi(int opt, int f64, gc_optim_item *items, ptrdiff_t k)
{
    gc_optim_multi_job J = {items, k, 0, NULL, NULL};
    for (ptrdiff_t i = 0; i < k; i++) {
        items[i].off = J.total;
        J.total += items[i].n;
    }
    if (f64)
        J.f64 = opt == GC_OPTIM_SGD    ? gc_isa.sgd_f64
                : opt == GC_OPTIM_ADAM ? gc_isa.adam_f64
                                       : gc_isa.rmsprop_f64;
    else
        J.f32 = opt == GC_OPTIM_SGD    ? gc_isa.sgd_f32
                : opt == GC_OPTIM_ADAM ? gc_isa.adam_f32
                                       : gc_isa.rmsprop_f32;
    /* the same grain as one parameter: the cost is per element whatever the item it belongs to */
    const int nt = gc_threads_for((double)J.total, GC_OPTIM_GRAIN);
    if (nt > 1)
        gc_parallel(optim_multi_task, &J, nt);
    else if (J.total > 0)
        optim_multi_range(&J, 0, J.total);
}

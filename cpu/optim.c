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

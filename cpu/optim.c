/* Fused optimizer updates: one pass over a parameter updates it and its state buffers in place
 * (SGD with momentum / Nesterov, Adam / AdamW with AMSGrad, RMSprop centered / with momentum).
 *
 * The arithmetic follows PyTorch's single-tensor implementations operation by operation, in the
 * parameter's precision (hyper-parameters are rounded to T first, as PyTorch does with Python
 * scalars), so float32 results agree with torch.optim to rounding.  Elements are independent:
 * large parameters are split over the thread pool and the result does not depend on the thread
 * count.
 */
#ifndef GC_T

#include <math.h>

#include "isa.h"
#include "kernels.h"

/* Elements per thread below which a parameter is updated on the calling thread alone: an update
 * streams 12-28 bytes per element, so 64K elements is about 50 microseconds of work. */
#define GC_OPTIM_GRAIN 65536.0

/* The loops are written once with their options as arguments and instantiated per combination
 * of constant options (below), so each instance is a straight-line loop the compiler vectorizes;
 * a loop that tests its options per element does not vectorize. */
#if defined(__GNUC__) || defined(__clang__)
#define GC_OPTIM_INLINE static inline __attribute__((always_inline))
#else
#define GC_OPTIM_INLINE static inline
#endif

#define GC_T float
#define GC_SFX f32
#define GC_M(fn) fn##f
#include "optim.c"
#undef GC_T
#undef GC_SFX
#undef GC_M

#define GC_T double
#define GC_SFX f64
#define GC_M(fn) fn
#include "optim.c"
#undef GC_T
#undef GC_SFX
#undef GC_M

#else /* type-generic body, T = GC_T */

/* ---- SGD ------------------------------------------------------------------------------- */

typedef struct {
    GC_T *param;
    const GC_T *grad;
    GC_T *buf;
    ptrdiff_t n;
    const gc_optim_hp *h;
} GC_FN(optim_job);

GC_OPTIM_INLINE void GC_FN(sgd_loop)(const GC_FN(optim_job) *J, ptrdiff_t lo, ptrdiff_t hi,
                                      const int use_wd, const int use_mom, const int nesterov,
                                      const int first)
{
    const gc_optim_hp *h = J->h;
    GC_T *restrict p = J->param;
    const GC_T *restrict gr = J->grad;
    GC_T *restrict buf = J->buf;
    const GC_T lr = (GC_T)h->lr, wd = (GC_T)h->weight_decay, mom = (GC_T)h->momentum;
    const GC_T damp1 = (GC_T)(1.0 - h->dampening);
    const GC_T sign = h->maximize ? (GC_T)-1 : (GC_T)1; /* exact negation */
    for (ptrdiff_t i = lo; i < hi; i++) {
        const GC_T pv = p[i];
        GC_T g = sign * gr[i];
        if (use_wd)
            g = g + wd * pv;
        if (use_mom) {
            const GC_T b = first ? g : buf[i] * mom + damp1 * g;
            buf[i] = b;
            g = nesterov ? g + mom * b : b;
        }
        p[i] = pv + (-lr) * g;
    }
}

static void GC_FN(sgd_range)(const GC_FN(optim_job) *J, ptrdiff_t lo, ptrdiff_t hi)
{
    const gc_optim_hp *h = J->h;
    const int wd = h->weight_decay != 0.0, mo = J->buf != NULL;
    const int ne = mo && h->nesterov, fi = mo && h->first;
#define GC_SGD_CASE(WD, MO, NE, FI)                                                                \
    if (wd == WD && mo == MO && ne == NE && fi == FI) {                                            \
        GC_FN(sgd_loop)(J, lo, hi, WD, MO, NE, FI);                                                \
        return;                                                                                    \
    }
#define GC_SGD_CASES(WD)                                                                           \
    GC_SGD_CASE(WD, 0, 0, 0) GC_SGD_CASE(WD, 1, 0, 0) GC_SGD_CASE(WD, 1, 0, 1)                     \
    GC_SGD_CASE(WD, 1, 1, 0) GC_SGD_CASE(WD, 1, 1, 1)
    GC_SGD_CASES(0)
    GC_SGD_CASES(1)
#undef GC_SGD_CASES
#undef GC_SGD_CASE
}

static void GC_FN(sgd_task)(void *ctx, int tid, int nt)
{
    const GC_FN(optim_job) *J = ctx;
    ptrdiff_t lo, hi;
    gc_split(J->n, 16, tid, nt, &lo, &hi);
    GC_FN(sgd_range)(J, lo, hi);
}

void GC_FN(gc_sgd_step)(GC_T *param, const GC_T *grad, GC_T *buf, ptrdiff_t n,
                        const gc_optim_hp *h)
{
    GC_FN(optim_job) J = {param, grad, buf, n, h};
    const int nt = gc_threads_for((double)n, GC_OPTIM_GRAIN);
    if (nt > 1)
        gc_parallel(GC_FN(sgd_task), &J, nt);
    else
        GC_FN(sgd_range)(&J, 0, n);
}

/* ---- Adam / AdamW ---------------------------------------------------------------------- */

typedef struct {
    GC_T *param;
    const GC_T *grad;
    GC_T *m, *v, *vmax;
    ptrdiff_t n;
    const gc_optim_hp *h;
} GC_FN(adam_job);

/* wd: 0 none, 1 coupled (L2 on the gradient), 2 decoupled (AdamW); lerp_lo: 1 - beta1 < 0.5 */
GC_OPTIM_INLINE void GC_FN(adam_loop)(const GC_FN(adam_job) *J, ptrdiff_t lo, ptrdiff_t hi,
                                       const int wd_mode, const int amsgrad, const int lerp_lo)
{
    const gc_optim_hp *h = J->h;
    GC_T *restrict p = J->param;
    const GC_T *restrict gr = J->grad;
    GC_T *restrict m = J->m;
    GC_T *restrict v = J->v;
    GC_T *restrict vmax = J->vmax;
    const double bc1 = 1.0 - pow(h->beta1, (double)h->step);
    const double bc2 = 1.0 - pow(h->beta2, (double)h->step);
    const GC_T neg_step = (GC_T)(-(h->lr / bc1));
    const GC_T bc2_sqrt = (GC_T)sqrt(bc2);
    const GC_T w1 = (GC_T)(1.0 - h->beta1), b2 = (GC_T)h->beta2, w2 = (GC_T)(1.0 - h->beta2);
    const GC_T w1c = (GC_T)1 - w1; /* torch.lerp's weight for the other branch */
    const GC_T eps = (GC_T)h->eps, wd = (GC_T)h->weight_decay;
    const GC_T decay = (GC_T)(1.0 - h->lr * h->weight_decay);
    const GC_T sign = h->maximize ? (GC_T)-1 : (GC_T)1; /* exact negation */
    for (ptrdiff_t i = lo; i < hi; i++) {
        GC_T pv = p[i];
        GC_T g = sign * gr[i];
        if (wd_mode == 2)
            pv = pv * decay;
        else if (wd_mode == 1)
            g = g + wd * pv;
        const GC_T d = g - m[i];
        const GC_T mv = lerp_lo ? m[i] + w1 * d : g - d * w1c; /* torch.lerp(m, g, w1) */
        GC_T vv = v[i] * b2 + w2 * g * g;
        m[i] = mv;
        v[i] = vv;
        if (amsgrad) {
            const GC_T a = vmax[i];
            vv = (a != a || a > vv) ? a : vv; /* torch.maximum: NaN propagates */
            vmax[i] = vv;
        }
        const GC_T denom = GC_M(sqrt)(vv) / bc2_sqrt + eps;
        p[i] = pv + neg_step * mv / denom; /* addcdiv: self + (value t1) / t2 */
    }
}

static void GC_FN(adam_range)(const GC_FN(adam_job) *J, ptrdiff_t lo, ptrdiff_t hi)
{
    const gc_optim_hp *h = J->h;
    const int wd = h->weight_decay == 0.0 ? 0 : (h->decoupled ? 2 : 1);
    const int ams = J->vmax != NULL;
    const int ll = (GC_T)(1.0 - h->beta1) < (GC_T)0.5;
#define GC_ADAM_CASE(WD, AMS, LL)                                                                  \
    if (wd == WD && ams == AMS && ll == LL) {                                                      \
        GC_FN(adam_loop)(J, lo, hi, WD, AMS, LL);                                                  \
        return;                                                                                    \
    }
#define GC_ADAM_CASES(WD)                                                                          \
    GC_ADAM_CASE(WD, 0, 0) GC_ADAM_CASE(WD, 0, 1) GC_ADAM_CASE(WD, 1, 0) GC_ADAM_CASE(WD, 1, 1)
    GC_ADAM_CASES(0)
    GC_ADAM_CASES(1)
    GC_ADAM_CASES(2)
#undef GC_ADAM_CASES
#undef GC_ADAM_CASE
}

static void GC_FN(adam_task)(void *ctx, int tid, int nt)
{
    const GC_FN(adam_job) *J = ctx;
    ptrdiff_t lo, hi;
    gc_split(J->n, 16, tid, nt, &lo, &hi);
    GC_FN(adam_range)(J, lo, hi);
}

void GC_FN(gc_adam_step)(GC_T *param, const GC_T *grad, GC_T *exp_avg, GC_T *exp_avg_sq,
                         GC_T *max_exp_avg_sq, ptrdiff_t n, const gc_optim_hp *h)
{
    GC_FN(adam_job) J = {param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, h};
    const int nt = gc_threads_for((double)n, GC_OPTIM_GRAIN);
    if (nt > 1)
        gc_parallel(GC_FN(adam_task), &J, nt);
    else
        GC_FN(adam_range)(&J, 0, n);
}

/* ---- RMSprop --------------------------------------------------------------------------- */

typedef struct {
    GC_T *param;
    const GC_T *grad;
    GC_T *sq, *gavg, *buf;
    ptrdiff_t n;
    const gc_optim_hp *h;
} GC_FN(rmsprop_job);

/* lerp_lo: 1 - alpha < 0.5 (the branch torch.lerp takes for grad_avg) */
GC_OPTIM_INLINE void GC_FN(rmsprop_loop)(const GC_FN(rmsprop_job) *J, ptrdiff_t lo,
                                          ptrdiff_t hi, const int use_wd, const int centered,
                                          const int use_mom, const int lerp_lo)
{
    const gc_optim_hp *h = J->h;
    GC_T *restrict p = J->param;
    const GC_T *restrict gr = J->grad;
    GC_T *restrict sq = J->sq;
    GC_T *restrict gavg = J->gavg;
    GC_T *restrict buf = J->buf;
    const GC_T lr = (GC_T)h->lr, wd = (GC_T)h->weight_decay, mom = (GC_T)h->momentum;
    const GC_T alpha = (GC_T)h->alpha, w = (GC_T)(1.0 - h->alpha), eps = (GC_T)h->eps;
    const GC_T wc = (GC_T)1 - w;
    const GC_T sign = h->maximize ? (GC_T)-1 : (GC_T)1; /* exact negation */
    for (ptrdiff_t i = lo; i < hi; i++) {
        const GC_T pv = p[i];
        GC_T g = sign * gr[i];
        if (use_wd)
            g = g + wd * pv;
        const GC_T s = sq[i] * alpha + w * g * g;
        sq[i] = s;
        GC_T avg;
        if (centered) {
            const GC_T d = g - gavg[i];
            const GC_T ga = lerp_lo ? gavg[i] + w * d : g - d * wc; /* torch.lerp(ga, g, w) */
            gavg[i] = ga;
            avg = GC_M(sqrt)(s + (GC_T)(-1) * ga * ga);
        } else {
            avg = GC_M(sqrt)(s);
        }
        avg = avg + eps;
        if (use_mom) {
            const GC_T b = buf[i] * mom + g / avg; /* addcdiv, value 1 */
            buf[i] = b;
            p[i] = pv + (-lr) * b;
        } else {
            p[i] = pv + (-lr) * g / avg;
        }
    }
}

static void GC_FN(rmsprop_range)(const GC_FN(rmsprop_job) *J, ptrdiff_t lo, ptrdiff_t hi)
{
    const gc_optim_hp *h = J->h;
    const int wd = h->weight_decay != 0.0, c = J->gavg != NULL, mo = J->buf != NULL;
    const int ll = c && (GC_T)(1.0 - h->alpha) < (GC_T)0.5; /* only centered uses lerp */
#define GC_RMS_CASE(WD, C, MO, LL)                                                                 \
    if (wd == WD && c == C && mo == MO && ll == LL) {                                              \
        GC_FN(rmsprop_loop)(J, lo, hi, WD, C, MO, LL);                                             \
        return;                                                                                    \
    }
#define GC_RMS_CASES(WD, MO)                                                                       \
    GC_RMS_CASE(WD, 0, MO, 0) GC_RMS_CASE(WD, 1, MO, 0) GC_RMS_CASE(WD, 1, MO, 1)
    GC_RMS_CASES(0, 0)
    GC_RMS_CASES(0, 1)
    GC_RMS_CASES(1, 0)
    GC_RMS_CASES(1, 1)
#undef GC_RMS_CASES
#undef GC_RMS_CASE
}

static void GC_FN(rmsprop_task)(void *ctx, int tid, int nt)
{
    const GC_FN(rmsprop_job) *J = ctx;
    ptrdiff_t lo, hi;
    gc_split(J->n, 16, tid, nt, &lo, &hi);
    GC_FN(rmsprop_range)(J, lo, hi);
}

void GC_FN(gc_rmsprop_step)(GC_T *param, const GC_T *grad, GC_T *square_avg, GC_T *grad_avg,
                            GC_T *momentum_buffer, ptrdiff_t n, const gc_optim_hp *h)
{
    GC_FN(rmsprop_job) J = {param, grad, square_avg, grad_avg, momentum_buffer, n, h};
    const int nt = gc_threads_for((double)n, GC_OPTIM_GRAIN);
    if (nt > 1)
        gc_parallel(GC_FN(rmsprop_task), &J, nt);
    else
        GC_FN(rmsprop_range)(&J, 0, n);
}

#endif /* GC_T */

/* Fused optimizer update loops (template), included by every cpu/isa/<isa>.c so that each is
 * compiled with that ISA's flags: the loops are straight-line and the compiler vectorizes them
 * to the ISA's width (sqrt and division dominate; AVX2 halves the time of the baseline build).
 * The thread split and the entry points live in cpu/optim.c.
 *
 * The arithmetic follows PyTorch's single-tensor implementations operation by operation, in the
 * parameter's precision (hyper-parameters are rounded to T first, as PyTorch does with Python
 * scalars).  The extension is built with -std=c11, so the compiler does not contract a * b + c
 * into an FMA: every ISA gives the same bits.
 *
 * Each loop is written once with its options as arguments and instantiated per combination of
 * constant options, so each instance is a straight loop the compiler vectorizes; a loop that
 * tests its options per element does not vectorize. */
#ifndef GC_OPT_T

#include <math.h>

#if defined(__GNUC__) || defined(__clang__)
#define GC_OPTIM_INLINE static inline __attribute__((always_inline))
#else
#define GC_OPTIM_INLINE static inline
#endif

#define GC_OPT_T float
#define GC_OPT_SFX f32
#define GC_OPT_M(fn) fn##f
#include "isa/optim.h"
#undef GC_OPT_T
#undef GC_OPT_SFX
#undef GC_OPT_M

#define GC_OPT_T double
#define GC_OPT_SFX f64
#define GC_OPT_M(fn) fn
#include "isa/optim.h"
#undef GC_OPT_T
#undef GC_OPT_SFX
#undef GC_OPT_M

static void gc_optim_fill(gc_isa_kernels *k)
{
    k->sgd_f32 = sgd_range_f32;
    k->adam_f32 = adam_range_f32;
    k->rmsprop_f32 = rmsprop_range_f32;
    k->sgd_f64 = sgd_range_f64;
    k->adam_f64 = adam_range_f64;
    k->rmsprop_f64 = rmsprop_range_f64;
}

#else /* type-generic body */

#define GC_T GC_OPT_T
#define GC_M GC_OPT_M
#define GC_SFX GC_OPT_SFX
#define GC_OPTIM_ARGS GC_FN(gc_optim_args)

GC_OPTIM_INLINE void GC_FN(sgd_loop)(const GC_OPTIM_ARGS *J, ptrdiff_t lo, ptrdiff_t hi,
                                      const int use_wd, const int use_mom, const int nesterov,
                                      const int first)
{
    const gc_optim_hp *h = J->h;
    GC_T *restrict p = J->p;
    const GC_T *restrict gr = J->g;
    GC_T *restrict buf = J->s1;
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

static void GC_FN(sgd_range)(const GC_OPTIM_ARGS *J, ptrdiff_t lo, ptrdiff_t hi)
{
    const gc_optim_hp *h = J->h;
    const int wd = h->weight_decay != 0.0, mo = J->s1 != NULL;
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

/* wd: 0 none, 1 coupled (L2 on the gradient), 2 decoupled (AdamW); lerp_lo: 1 - beta1 < 0.5 */
GC_OPTIM_INLINE void GC_FN(adam_loop)(const GC_OPTIM_ARGS *J, ptrdiff_t lo, ptrdiff_t hi,
                                       const int wd_mode, const int amsgrad, const int lerp_lo)
{
    const gc_optim_hp *h = J->h;
    GC_T *restrict p = J->p;
    const GC_T *restrict gr = J->g;
    GC_T *restrict m = J->s1;
    GC_T *restrict v = J->s2;
    GC_T *restrict vmax = J->s3;
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

static void GC_FN(adam_range)(const GC_OPTIM_ARGS *J, ptrdiff_t lo, ptrdiff_t hi)
{
    const gc_optim_hp *h = J->h;
    const int wd = h->weight_decay == 0.0 ? 0 : (h->decoupled ? 2 : 1);
    const int ams = J->s3 != NULL;
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

/* lerp_lo: 1 - alpha < 0.5 (the branch torch.lerp takes for grad_avg) */
GC_OPTIM_INLINE void GC_FN(rmsprop_loop)(const GC_OPTIM_ARGS *J, ptrdiff_t lo,
                                          ptrdiff_t hi, const int use_wd, const int centered,
                                          const int use_mom, const int lerp_lo)
{
    const gc_optim_hp *h = J->h;
    GC_T *restrict p = J->p;
    const GC_T *restrict gr = J->g;
    GC_T *restrict sq = J->s1;
    GC_T *restrict gavg = J->s2;
    GC_T *restrict buf = J->s3;
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

static void GC_FN(rmsprop_range)(const GC_OPTIM_ARGS *J, ptrdiff_t lo, ptrdiff_t hi)
{
    const gc_optim_hp *h = J->h;
    const int wd = h->weight_decay != 0.0, c = J->s2 != NULL, mo = J->s3 != NULL;
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

#undef GC_T
#undef GC_M
#undef GC_SFX
#undef GC_OPTIM_ARGS

#endif /* GC_OPT_T */

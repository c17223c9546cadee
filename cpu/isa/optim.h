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
 * tests its options per element does not vectorize.
 *
 * Adam float32 is bound by the divide/sqrt unit: one sqrt and two divisions per element, and on
 * Zen 4 vsqrtps and vdivps share the unit at ~5.9 and ~9.8 Gelem/s (ymm and zmm alike), ~0.37 ns
 * an element, against ~0.2 ns for the memory traffic alone (4 loads and 3 stores, L3-resident).
 * The division by the constant sqrt(bc2) is therefore a float64 multiplication by the reciprocal,
 * which gives the same bits (adam_cdiv_ok): ~0.27 ns of divider time an element.  The other
 * floating-point work then matters as well, so the gradient is multiplied by -1 only under
 * maximize (one zmm multiplication fewer per 16 elements took ~5% off).  Without the
 * multiplication by 1 a signaling NaN gradient reaches its first operation unquieted, which
 * returns it quieted as the multiplication did: the same bits (x86 returns the first NaN
 * operand, Arm a signaling one first, and g is the first operand or the only NaN), except
 * which payload survives where a NaN gradient meets a NaN parameter under coupled weight decay
 * (g + wd * p: the compiler now puts g second on AVX2 / AVX-512; NaN payloads are not among
 * the results the ISAs promise to share, and the tail loop already differed).  Where FMA
 * is hardware the division by sqrt(bc2) is three FMA-pipe operations instead, float64 included,
 * for the constants that allow it (adam_fma_ok). */
#ifndef GC_OPT_T

#include <math.h>

/* Adam's FMA-corrected reciprocal multiplication (adam_fma_ok) where FMA is hardware */
#if defined(__FMA__) || defined(__ARM_FEATURE_FMA)
#define GC_ADAM_FMA 1
#else
#define GC_ADAM_FMA 0
#endif

#if defined(__GNUC__) || defined(__clang__)
#define GC_OPTIM_INLINE static inline __attribute__((always_inline))
#else
#define GC_OPTIM_INLINE static inline
#endif

#define GC_OPT_T float
#define GC_OPT_SFX f32
#define GC_OPT_M(fn) fn##f
#define GC_OPT_F32 1
#include "isa/optim.h"
#undef GC_OPT_F32
#undef GC_OPT_T
#undef GC_OPT_SFX
#undef GC_OPT_M

#define GC_OPT_T double
#define GC_OPT_SFX f64
#define GC_OPT_M(fn) fn
#define GC_OPT_F32 0
#include "isa/optim.h"
#undef GC_OPT_F32
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

#if GC_OPT_F32
/* Whether sqrt(v) / c, c = (float)sqrt(bc2), may be computed as (float)((double)sqrt(v) * r),
 * r = 1.0 / c in float64, with the same bits as the float32 division.  The quotient q = s / c of
 * two floats (24-bit significands S, C) is never a midpoint between two floats (a 25-bit odd M
 * times C has more significant bits than S), and when it is not one it lies at least 2^-49
 * (relative) away from every midpoint: q - M 2^e = (S 2^f - M C 2^(e+g)) / (C 2^g), whose
 * numerator is a nonzero multiple of 2^(e+g).  The float64 product s * r is within 2^-52 of q
 * (one rounding in r, one in the product), so it rounds to the float nearest q, as the division
 * does.  That needs q in the normal float range, which holds for any s = sqrt(v) (0, at least
 * 2^-75, inf or NaN) when 2^-60 <= c <= 1, the case 0 <= beta2 < 1 always gives; otherwise the
 * loop divides.  NaN s keeps its payload (the multiplication and both conversions keep it), and
 * c is a number here, so no second NaN competes.  (float64 has the same range argument:
 * s = 0, at least 2^-537, inf or NaN.) */
static int adam_cdiv_ok(double c)
{
    return c >= 0x1p-60 && c <= 1.0;
}
#endif

#if GC_ADAM_FMA
/* Whether s / c may be computed, for every s, with y = RN(1/c), as q0 = RN(s y), r = s - c q0
 * (one FMA) and q1 = RN(q0 + r y) (another): three operations the FMA pipes take, against a
 * division (float64) or a float64 multiplication with four conversions and two shuffles (float).
 * In precision p (24, 53) scale s and c to significands a, b in [1, 2) (multiples of 2^(1-p));
 * x = a / b; e = |b y - 1| (exact in float64; with an FMA for float64), u = e 2^(p+1) (u <= b).
 * Then a y = x (1 + e') with |e'| = e, so |q0 - x| <= x e + ulp(q0) / 2: below
 * (u + 1) 2^-(p+1) where x < 1 (ulp(x) = 2^-p: up to 1.5 ulp), twice that where x >= 1.
 * r = a - b q0 is a multiple of 2^(1-2p) below b (u + 1) 2^-(p+1) (where q0 >= 1 <= x: of
 * 2^(2-2p) below twice that; a q0 < 1 <= x has x within 2e of 1), so it has at most p bits, and
 * the FMA gives it exactly, when b (u + 1) < 4.  Then q0 + r y = x + (x - q0) e' exactly, within
 * (u + 1) u 2^-(2p+2) of x (twice that where x >= 1), and x lies at least 2^-2p / b (2^(1-2p) / b)
 * from every midpoint (the argument at adam_cdiv_ok, with a and b): q1 rounds to x's nearest
 * when (u + 1) u b < 4, which also gives b (u + 1) < 4 (u < 1 or not).  Every c with b < 1.3
 * passes, and about half of the others (c = 1, which long runs reach, has u = 0).  The loop takes
 * q0 (= s / c exactly) where s is 0, inf or NaN; adam_cdiv_ok's range covers q0, r and q1. */
static int GC_FN(adam_fma_ok)(GC_T c)
{
    int ex;
    if (!(c >= 0x1p-60 && c <= 1.0))
        return 0;
    const GC_T y = (GC_T)(1.0 / (double)c); /* RN(1/c): float64's rounding is innocuous for float */
    const double b = 2.0 * frexp((double)c, &ex);
    const double u = GC_OPT_F32 ? fabs((double)c * (double)y - 1.0) * 0x1p25
                                : fabs(fma((double)c, (double)y, -1.0)) * 0x1p54;
    return (u + 1.0) * u * b < 3.99; /* a margin for this test's own roundings */
}
#endif

/* wd: 0 none, 1 coupled (L2 on the gradient), 2 decoupled (AdamW); lerp_lo: 1 - beta1 < 0.5;
 * cdiv, how sqrt(v) is divided by sqrt(bc2): 0 a division, 1 (float32) a float64
 * multiplication by the reciprocal (adam_cdiv_ok), 2 an FMA-corrected one (adam_fma_ok) */
GC_OPTIM_INLINE void GC_FN(adam_loop)(const GC_OPTIM_ARGS *J, ptrdiff_t lo, ptrdiff_t hi,
                                       const int wd_mode, const int amsgrad, const int lerp_lo,
                                       const int cdiv)
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
    const double bc2_rcp = 1.0 / (double)bc2_sqrt; /* cdiv 1 */
    const GC_T bc2_rcpf = (GC_T)bc2_rcp;           /* cdiv 2: RN(1 / bc2_sqrt) */
    const GC_T w1 = (GC_T)(1.0 - h->beta1), b2 = (GC_T)h->beta2, w2 = (GC_T)(1.0 - h->beta2);
    const GC_T w1c = (GC_T)1 - w1; /* torch.lerp's weight for the other branch */
    const GC_T eps = (GC_T)h->eps, wd = (GC_T)h->weight_decay;
    const GC_T decay = (GC_T)(1.0 - h->lr * h->weight_decay);
    const int maximize = h->maximize; /* constant in the loop: the compiler unswitches it */
    /* read from a volatile, so that sign * g stays a multiplication (a NaN keeps its sign)
     * where the compiler would turn a multiplication by a known -1 into a negation */
    volatile GC_T minus_one = (GC_T)-1;
    const GC_T sign = minus_one;
    for (ptrdiff_t i = lo; i < hi; i++) {
        GC_T pv = p[i];
        GC_T g = gr[i];
        if (maximize)
            g = sign * g;
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
        const GC_T sq = GC_M(sqrt)(vv);
        GC_T q;
        if (cdiv == 2) {
            const GC_T q0 = sq * bc2_rcpf;
            const GC_T q1 = GC_M(fma)(GC_M(fma)(-q0, bc2_sqrt, sq), bc2_rcpf, q0);
            q = (sq != 0 && sq - sq == 0) ? q1 : q0; /* 0, +-inf and NaN: q0 is exact */
        } else if (cdiv == 1) {
            q = (GC_T)((double)sq * bc2_rcp);
        } else {
            q = sq / bc2_sqrt;
        }
        const GC_T denom = q + eps;
        p[i] = pv + neg_step * mv / denom; /* addcdiv: self + (value t1) / t2 */
    }
}

static void GC_FN(adam_range)(const GC_OPTIM_ARGS *J, ptrdiff_t lo, ptrdiff_t hi)
{
    const gc_optim_hp *h = J->h;
    const int wd = h->weight_decay == 0.0 ? 0 : (h->decoupled ? 2 : 1);
    const int ams = J->s3 != NULL;
    const int ll = (GC_T)(1.0 - h->beta1) < (GC_T)0.5;
    const GC_T c = (GC_T)sqrt(1.0 - pow(h->beta2, (double)h->step));
    int cd = 0; /* float64 without FMA: no wider format to multiply in */
    (void)c;
#if GC_ADAM_FMA
    if (GC_FN(adam_fma_ok)(c))
        cd = 2;
#endif
#if GC_OPT_F32
    if (cd == 0 && adam_cdiv_ok(c))
        cd = 1;
#endif
    /* the constant conditions keep the instances a build cannot use out of it */
#define GC_ADAM_CASE(WD, AMS, LL)                                                                  \
    if (wd == WD && ams == AMS && ll == LL) {                                                      \
        if (GC_ADAM_FMA && cd == 2)                                                                \
            GC_FN(adam_loop)(J, lo, hi, WD, AMS, LL, 2);                                           \
        else if (GC_OPT_F32 && cd == 1)                                                            \
            GC_FN(adam_loop)(J, lo, hi, WD, AMS, LL, 1);                                           \
        else                                                                                       \
            GC_FN(adam_loop)(J, lo, hi, WD, AMS, LL, 0);                                           \
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
    const int maximize = h->maximize; /* constant in the loop: the compiler unswitches it */
    /* read from a volatile, so that sign * g stays a multiplication (a NaN keeps its sign)
     * where the compiler would turn a multiplication by a known -1 into a negation */
    volatile GC_T minus_one = (GC_T)-1;
    const GC_T sign = minus_one;
    for (ptrdiff_t i = lo; i < hi; i++) {
        const GC_T pv = p[i];
        GC_T g = gr[i];
        if (maximize)
            g = sign * g;
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

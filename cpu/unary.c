/* Elementwise unary kernels and their backward (out = grad * f'). */
#ifndef GC_T

#include <math.h>

#include "erfinv_giles.h"
#include "isa.h"
#include "kernels.h"

/* Estimated ns per element, for the threading decision (memory-bound ops ~0.3 ns). */
static double gc_unary_cost(int op, int vectorized)
{
    switch (op) {
    case GC_UNARY_NEG:
    case GC_UNARY_ABS:
    case GC_UNARY_RELU:
    case GC_UNARY_SIGN:
    case GC_UNARY_SQRT:
    case GC_UNARY_RECIPROCAL:
    case GC_UNARY_FLOOR:
    case GC_UNARY_CEIL:
    case GC_UNARY_TRUNC:
    case GC_UNARY_ROUND: return 0.3;
    default: return vectorized ? 0.6 : 8.0;
    }
}

#define GC_T float
#define GC_SFX f32
#define GC_M(fn) fn##f
#define GC_VUNARY(op) gc_isa.vunary_f32[op]
#define GC_VGELU_BWD gc_isa.vgelu_backward_f32
#define GC_RBB_RANGE gc_isa.relu_bias_f32
#include "unary.c"
#undef GC_T
#undef GC_SFX
#undef GC_M
#undef GC_VUNARY
#undef GC_VGELU_BWD
#undef GC_RBB_RANGE

#define GC_T double
#define GC_SFX f64
#define GC_M(fn) fn
#define GC_VUNARY(op) ((void (*)(const double *, double *, ptrdiff_t))NULL)
#define GC_VGELU_BWD ((void (*)(const double *, const double *, double *, ptrdiff_t))NULL)
#define GC_RBB_RANGE gc_isa.relu_bias_f64
#include "unary.c"
#undef GC_T
#undef GC_SFX
#undef GC_M
#undef GC_VUNARY
#undef GC_VGELU_BWD
#undef GC_RBB_RANGE

#else /* type-generic body, T = GC_T */

#define GC_C(v) ((GC_T)(v))
#define GC_SQRT1_2 GC_C(0.70710678118654752440)     /* 1 / sqrt(2) */
#define GC_INV_SQRT_2PI GC_C(0.39894228040143267794) /* 1 / sqrt(2 pi) */
#define GC_SQRT_2_PI GC_C(0.79788456080286535588)    /* sqrt(2 / pi) */
#define GC_GELU_A GC_C(0.044715)

/* sigmoid(x) without overflow: e = exp(-|x|) <= 1, q = 1 / (1 + e); sigmoid = q or e q. */
static inline GC_T GC_FN(sigmoid)(GC_T x)
{
    const GC_T e = GC_M(exp)(-GC_M(fabs)(x));
    const GC_T q = GC_C(1) / (GC_C(1) + e);
    return x >= GC_C(0) ? q : e * q;
}

/* gelu, erf form: 0.5 x (1 + erf(x / sqrt 2)) = 0.5 x erfc(-x / sqrt 2) (no cancellation),
 * evaluated in double for both types (erfc's relative error is 2 w^2 times its argument's, so a
 * float argument would cost ~1e-5 in the tail); the limits at +-inf (inf, -0). */
static inline GC_T GC_FN(gelu)(GC_T x)
{
    if (isinf(x))
        return x > GC_C(0) ? x : GC_C(-0.0);
    const double xd = (double)x;
    return (GC_T)(0.5 * xd * erfc(-xd * 0.70710678118654752440));
}

static inline GC_T GC_FN(gelu_grad)(GC_T x)
{
    return GC_C(0.5) * GC_M(erfc)(-x * GC_SQRT1_2) +
           x * GC_INV_SQRT_2PI * GC_M(exp)(GC_C(-0.5) * x * x);
}

/* gelu, tanh form: 0.5 x (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3); since
 * (1 + tanh u) / 2 = sigmoid(2u) this is x sigmoid(2u), stable for any x.  Evaluated in double
 * (sigmoid(2u)'s relative error is |2u| times u's); the limits at +-inf (inf, -0). */
static inline GC_T GC_FN(gelu_tanh)(GC_T x)
{
    if (isinf(x))
        return x > GC_C(0) ? x : GC_C(-0.0);
    const double xd = (double)x;
    const double v = 2.0 * 0.79788456080286535588 * (xd + 0.044715 * xd * xd * xd);
    const double e = exp(-fabs(v)), q = 1.0 / (1.0 + e);
    return (GC_T)(xd * (v >= 0.0 ? q : e * q));
}

/* d/dx: 0.5 (1 + t) + 0.5 x (1 - t^2) u', t = tanh u, u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
 * With s = sigmoid(2u): 0.5 (1 + t) = s and 0.5 (1 - t^2) = 2 s (1 - s) = 2 e q^2 where
 * e = exp(-|2u|), q = 1 / (1 + e).  Beyond |x| = 10 the value is 1 or 0 to working precision
 * (and u' x may overflow to inf while e is 0), so it is returned directly. */
static inline GC_T GC_FN(gelu_tanh_grad)(GC_T x)
{
    const GC_T u2 = GC_C(2) * GC_SQRT_2_PI * (x + GC_GELU_A * x * x * x);
    const GC_T e = GC_M(exp)(-GC_M(fabs)(u2));
    const GC_T q = GC_C(1) / (GC_C(1) + e);
    const GC_T s = u2 >= GC_C(0) ? q : e * q;
    const GC_T du = GC_SQRT_2_PI * (GC_C(1) + GC_C(3) * GC_GELU_A * x * x);
    const GC_T g = s + GC_C(2) * x * du * (e * q * q);
    if (GC_M(fabs)(x) > GC_C(10))
        return x > GC_C(0) ? GC_C(1) : GC_C(0);
    return g;
}

/* erfinv, evaluated in double for both types: Giles' single-precision approximation ("Approximating
 * the erfinv function", GPU Computing Gems, 2011), then two Newton steps on erf (|y| < 0.5) or on
 * erfc (|y| >= 0.5, where 1 - |y| is exact), which carry it to double precision.  The polynomials:
 * erfinv_giles.h, shared with shaders/special.glsl. */
static inline GC_T GC_FN(erfinv)(GC_T y)
{
    const double yd = (double)y, a = fabs(yd);
    if (isnan(yd) || a > 1.0)
        return (GC_T)NAN;
    if (a == 1.0)
        return (GC_T)(yd > 0.0 ? INFINITY : -INFINITY);
    double w = -log((1.0 - yd) * (1.0 + yd)), p;
    GC_ERFINV_GILES(w, p)
    double x = p * a; /* solve erf(x) = a for a >= 0, then restore the sign */
    for (int it = 0; it < 2; it++) {
        const double d = 1.1283791670955126 * exp(-x * x); /* erf'(x) = 2 / sqrt(pi) e^(-x^2) */
        if (d == 0.0)
            break;
        x -= a < 0.5 ? (erf(x) - a) / d : ((1.0 - a) - erfc(x)) / d;
    }
    return (GC_T)copysign(x, yd);
}

/* digamma, in long double for both types (PyTorch's calc_digamma; the recurrence cancels near
 * the root 1.4616..., where double would keep only ~1e-14 absolute): +-inf at +-0 (-inf at +0),
 * NaN at the negative integers and -inf, reflection psi(x) = psi(1 - x) - pi / tan(pi x) for
 * x < 0, the recurrence psi(x) = psi(x + 1) - 1 / x up to x >= 10, then the asymptotic series. */
static inline GC_T GC_FN(digamma)(GC_T v)
{
    long double x = (long double)v, r = 0.0L;
    if (x == 0.0L)
        return (GC_T)(signbit(v) ? INFINITY : -INFINITY);
    if (x < 0.0L) {
        if (x == floorl(x))
            return (GC_T)NAN;
        const long double pi = 3.14159265358979323846264338327950288L;
        r = -pi / tanl(pi * (x - roundl(x))); /* period 1: the reduction is exact */
        x = 1.0L - x;
    }
    while (x < 10.0L) {
        r -= 1.0L / x;
        x += 1.0L;
    }
    if (isinf(x))
        return (GC_T)(r + x);
    const long double f = 1.0L / (x * x);
    const long double t =
        f * (-1.0L / 12 +
             f * (1.0L / 120 +
                  f * (-1.0L / 252 +
                       f * (1.0L / 240 + f * (-1.0L / 132 + f * (691.0L / 32760 + f * (-1.0L / 12)))))));
    return (GC_T)(r + logl(x) - 0.5L / x + t);
}

#define GC_UNARY_LOOP(EXPR)                                                                       \
    for (ptrdiff_t i = 0; i < n; i++) {                                                           \
        const GC_T v = x[i];                                                                      \
        out[i] = (EXPR);                                                                          \
    }                                                                                             \
    break

/* x and out may be the same buffer, so no restrict here. */
static void GC_FN(unary_range)(int op, const GC_T *x, GC_T *out, ptrdiff_t n)
{
    if (GC_VUNARY(op)) {
        GC_VUNARY(op)(x, out, n);
        return;
    }
    switch (op) {
    case GC_UNARY_NEG: GC_UNARY_LOOP(-v);
    case GC_UNARY_ABS: GC_UNARY_LOOP(GC_M(fabs)(v));
    case GC_UNARY_EXP: GC_UNARY_LOOP(GC_M(exp)(v));
    case GC_UNARY_LOG: GC_UNARY_LOOP(GC_M(log)(v));
    case GC_UNARY_SQRT: GC_UNARY_LOOP(GC_M(sqrt)(v));
    case GC_UNARY_RELU: GC_UNARY_LOOP(v <= GC_C(0) ? GC_C(0) : v); /* NaN stays NaN */
    case GC_UNARY_SIGMOID: GC_UNARY_LOOP(GC_FN(sigmoid)(v));
    case GC_UNARY_TANH: GC_UNARY_LOOP(GC_M(tanh)(v));
    case GC_UNARY_GELU: GC_UNARY_LOOP(GC_FN(gelu)(v));
    case GC_UNARY_GELU_TANH: GC_UNARY_LOOP(GC_FN(gelu_tanh)(v));
    case GC_UNARY_SIGN: /* -1, 0 (sign of the zero kept) or 1; NaN stays NaN */
        GC_UNARY_LOOP(v > GC_C(0) ? GC_C(1) : (v < GC_C(0) ? GC_C(-1) : v));
    case GC_UNARY_SIN: GC_UNARY_LOOP(GC_M(sin)(v));
    case GC_UNARY_COS: GC_UNARY_LOOP(GC_M(cos)(v));
    case GC_UNARY_RECIPROCAL: GC_UNARY_LOOP(GC_C(1) / v);
    case GC_UNARY_FLOOR: GC_UNARY_LOOP(GC_M(floor)(v));
    case GC_UNARY_CEIL: GC_UNARY_LOOP(GC_M(ceil)(v));
    case GC_UNARY_TRUNC: GC_UNARY_LOOP(GC_M(trunc)(v));
    case GC_UNARY_ROUND: GC_UNARY_LOOP(GC_M(nearbyint)(v)); /* half to even, as PyTorch */
    case GC_UNARY_ERF: GC_UNARY_LOOP(GC_M(erf)(v));
    case GC_UNARY_ERFC: GC_UNARY_LOOP(GC_M(erfc)(v));
    case GC_UNARY_ERFINV: GC_UNARY_LOOP(GC_FN(erfinv)(v));
    case GC_UNARY_EXPM1: GC_UNARY_LOOP(GC_M(expm1)(v));
    case GC_UNARY_EXP2: GC_UNARY_LOOP(GC_M(exp2)(v));
    case GC_UNARY_LOG2: GC_UNARY_LOOP(GC_M(log2)(v));
    case GC_UNARY_LOG10: GC_UNARY_LOOP(GC_M(log10)(v));
    case GC_UNARY_LGAMMA: GC_UNARY_LOOP(GC_M(lgamma)(v));
    case GC_UNARY_DIGAMMA: GC_UNARY_LOOP(GC_FN(digamma)(v));
    case GC_UNARY_LOG1P: GC_UNARY_LOOP(GC_M(log1p)(v));
    default: break;
    }
}
#undef GC_UNARY_LOOP

typedef struct {
    int op;
    const GC_T *x, *grad, *saved;
    GC_T *out;
} GC_FN(unary_job);

static void GC_FN(unary_task)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(unary_job) *J = (const GC_FN(unary_job) *)ctx;
    GC_FN(unary_range)(J->op, J->x + lo, J->out + lo, hi - lo);
}

void GC_FN(gc_unary)(int op, const GC_T *x, GC_T *out, ptrdiff_t n)
{
    GC_FN(unary_job) J = {.op = op, .x = x, .out = out};
    gc_parallel_range(n, 64, (double)n * gc_unary_cost(op, GC_VUNARY(op) != NULL),
                      GC_FN(unary_task), &J);
}

#define GC_BACKWARD_LOOP(EXPR)                                                                    \
    for (ptrdiff_t i = 0; i < n; i++) {                                                           \
        const GC_T g = grad[i], s = saved[i];                                                     \
        out[i] = (EXPR);                                                                          \
    }                                                                                             \
    break

static void GC_FN(unary_backward_range)(int op, const GC_T *grad, const GC_T *saved, GC_T *out,
                                        ptrdiff_t n)
{
    switch (op) {
    case GC_UNARY_RELU: GC_BACKWARD_LOOP(s > GC_C(0) ? g : GC_C(0)); /* saved = x */
    case GC_UNARY_SIGMOID: GC_BACKWARD_LOOP(g * s * (GC_C(1) - s)); /* saved = y */
    case GC_UNARY_TANH: GC_BACKWARD_LOOP(g * (GC_C(1) - s * s));    /* saved = y */
    case GC_UNARY_GELU: /* saved = x */
        if (GC_VGELU_BWD) {
            GC_VGELU_BWD(grad, saved, out, n);
            break;
        }
        GC_BACKWARD_LOOP(g * GC_FN(gelu_grad)(s));
    case GC_UNARY_GELU_TANH: GC_BACKWARD_LOOP(g * GC_FN(gelu_tanh_grad)(s));
    default: break;
    }
}
#undef GC_BACKWARD_LOOP

static void GC_FN(unary_backward_task)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const GC_FN(unary_job) *J = (const GC_FN(unary_job) *)ctx;
    GC_FN(unary_backward_range)(J->op, J->grad + lo, J->saved + lo, J->out + lo, hi - lo);
}

void GC_FN(gc_unary_backward)(int op, const GC_T *grad, const GC_T *saved, GC_T *out, ptrdiff_t n)
{
    const double cost = (op == GC_UNARY_GELU || op == GC_UNARY_GELU_TANH) ? 10.0 : 0.4;
    GC_FN(unary_job) J = {.op = op, .grad = grad, .saved = saved, .out = out};
    gc_parallel_range(n, 64, (double)n * cost, GC_FN(unary_backward_task), &J);
}

/* relu_backward of g [m, n] by the saved s (out = s > 0 ? g : +0: the activation's output or
 * input, positive at the same places) and the result's rows summed into bsum [n] (linear's bias
 * gradient), in one pass: each column summed in double row by row in order from 0, the reduce
 * kernel's order over dim 0 (reduce.c reduce_cols), so the bits of relu_backward then sum(0).
 * Threads take chunks of GC_RBB_CHUNK columns (a column's sum is one thread's: the same bits for
 * any count); the loops are per ISA (cpu/isa/relu_bias.h, through the gc_isa table). */
static void GC_FN(rbb_task)(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    GC_RBB_RANGE((const GC_FN(gc_rbb_args) *)ctx, lo, hi);
}

void GC_FN(gc_relu_backward_bias)(const GC_T *g, const GC_T *s, GC_T *out, GC_T *bsum,
                                  ptrdiff_t m, ptrdiff_t n)
{
    GC_FN(gc_rbb_args) J = {.g = g, .s = s, .out = out, .bsum = bsum, .m = m, .n = n};
    const ptrdiff_t chunks = (n + GC_RBB_CHUNK - 1) / GC_RBB_CHUNK;
    gc_parallel_range(chunks, 1, (double)m * (double)n * 0.6, GC_FN(rbb_task), &J);
}

#undef GC_C
#undef GC_SQRT1_2
#undef GC_INV_SQRT_2PI
#undef GC_SQRT_2_PI
#undef GC_GELU_A

#endif

/* special.c: the drivers of torch.special's functions in C, gc_special (one argument) and
 * gc_special2 (two), and the functions of one argument not in a family file: erfcx, ndtri and
 * entr.  Computed
 * in double (float32 inputs widened and the result rounded once), except the orthogonal
 * polynomials, which run in the element's type as PyTorch's (special_poly.c).  The family files
 * (special.h): special_bessel.c (I, J, Y, K, spherical j0, Ai), special_gamma.c (zeta, igamma),
 * special_poly.c.  The methods of this file:
 *   erfcx: exp(x^2) erfc(x) with x^2's rounding error put back (Dekker) for x < 26, the
 *          asymptotic series beyond, inf below -26.7 (exp(x^2) overflows);
 *   ndtri: Abramowitz & Stegun 26.2.23 refined by three Halley steps on the lower tail (Newton
 *          on log ndtr below 1e-250), the upper half by symmetry;
 *   entr:  -x log x, 0 at 0, -inf below 0.
 * Every element is computed on its own, so any split over threads gives the same bits. */
#include "isa.h"
#include "kernels.h"
#include "special.h"

#include <math.h>

static double exp_square(double x) /* exp(x * x), x * x's rounding error put back */
{
    volatile double c = 134217729.0 * x; /* volatile: no contraction of Dekker's split */
    const double xh = c - (c - x), xl = x - xh;
    const double hi = x * x;
    const double lo = ((xh * xh - hi) + 2 * xh * xl) + xl * xl;
    return exp(hi) * (1 + lo);
}

static double erfcx(double x)
{
    if (x < -26.7)
        return INFINITY;
    if (x < 26.0)
        return exp_square(x) * erfc(x);
    double term = 1.0, s = 1.0; /* NaN and large x: the asymptotic series */
    const double r = 1 / (2 * x * x);
    for (int k = 1; k <= 12; k++) {
        term = -term * (2 * k - 1) * r;
        s += term;
    }
    return s / (x * sqrt(GC_PI));
}

static double ndtr(double x)
{
    return 0.5 * erfc(-x / sqrt(2.0));
}

static double ndtri(double p)
{
    if (!(p >= 0 && p <= 1))
        return NAN;
    if (p == 0)
        return -INFINITY;
    if (p == 1)
        return INFINITY;
    if (p == 0.5)
        return 0.0;
    const int upper = p > 0.5;
    const double q = upper ? 1 - p : p;
    const double t = sqrt(-2 * log(q));
    double x = -(t - (2.515517 + t * (0.802853 + t * 0.010328)) /
                         (1 + t * (1.432788 + t * (0.189269 + t * 0.001308))));
    if (q >= 1e-250) {
        for (int i = 0; i < 3; i++) { /* Halley: f = ndtr(x) - q, f' = phi(x), f'' = -x phi */
            const double e = ndtr(x) - q;
            const double u = e / q * sqrt(2 * GC_PI) * exp(log(q) + x * x / 2);
            x = x - u / (1 + x * u / 2);
        }
    } else { /* Newton on log ndtr(x) = log(erfcx(-x/sqrt2) / 2) - x^2/2 */
        const double lq = log(q);
        for (int i = 0; i < 4; i++) {
            const double ex = erfcx(-x / sqrt(2.0));
            x = x - (log(ex / 2) - x * x / 2 - lq) * ex / sqrt(2 / GC_PI);
        }
    }
    return upper ? -x : x;
}

static double entr(double x)
{
    if (isnan(x))
        return x;
    if (x > 0)
        return -x * log(x);
    return x == 0 ? 0.0 : -INFINITY;
}

static double special1(int op, double x)
{
    switch (op) {
    case GC_SPECIAL_I0: return gc_sp_bessel_i(0, 0, x);
    case GC_SPECIAL_I0E: return gc_sp_bessel_i(0, 1, x);
    case GC_SPECIAL_I1: return gc_sp_bessel_i(1, 0, x);
    case GC_SPECIAL_I1E: return gc_sp_bessel_i(1, 1, x);
    case GC_SPECIAL_ERFCX: return erfcx(x);
    case GC_SPECIAL_NDTRI: return ndtri(x);
    case GC_SPECIAL_ENTR: return entr(x);
    case GC_SPECIAL_BESSEL_J0: return gc_sp_bessel_j(0, x);
    case GC_SPECIAL_BESSEL_J1: return gc_sp_bessel_j(1, x);
    case GC_SPECIAL_BESSEL_Y0: return gc_sp_bessel_y(0, x);
    case GC_SPECIAL_BESSEL_Y1: return gc_sp_bessel_y(1, x);
    case GC_SPECIAL_MODIFIED_BESSEL_K0: return gc_sp_bessel_k(0, 0, x);
    case GC_SPECIAL_MODIFIED_BESSEL_K1: return gc_sp_bessel_k(1, 0, x);
    case GC_SPECIAL_SCALED_MODIFIED_BESSEL_K0: return gc_sp_bessel_k(0, 1, x);
    case GC_SPECIAL_SCALED_MODIFIED_BESSEL_K1: return gc_sp_bessel_k(1, 1, x);
    case GC_SPECIAL_SPHERICAL_BESSEL_J0: return gc_sp_spherical_j0(x);
    case GC_SPECIAL_AIRY_AI: return gc_sp_airy_ai(x);
    default: return NAN;
    }
}

typedef struct {
    int op, f64;
    const void *x;
    void *out;
} special_ctx;

static void special_range(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const special_ctx *c = ctx;
    if (c->f64) {
        const double *x = c->x;
        double *o = c->out;
        for (ptrdiff_t i = lo; i < hi; i++)
            o[i] = special1(c->op, x[i]);
    } else {
        const float *x = c->x;
        float *o = c->out;
        for (ptrdiff_t i = lo; i < hi; i++)
            o[i] = (float)special1(c->op, (double)x[i]);
    }
}

void gc_special(int op, int f64, const void *x, void *out, ptrdiff_t n)
{
    special_ctx c = {.op = op, .f64 = f64, .x = x, .out = out};
    /* the series, recurrences and quadratures: ~0.05-0.5 us per element */
    gc_parallel_range(n, 64, (double)n * 150.0, special_range, &c);
}

/* ------------------------------------------------------------------ two arguments */

static double special2_d(int op, double a, double b)
{
    switch (op) {
    case GC_SPECIAL2_ZETA: return gc_sp_zeta(a, b);
    case GC_SPECIAL2_IGAMMA: return gc_sp_igamma(a, b, 0);
    case GC_SPECIAL2_IGAMMAC: return gc_sp_igamma(a, b, 1);
    default: return gc_sp_poly_d(op, a, b);
    }
}

static float special2_f(int op, float a, float b)
{
    if (op == GC_SPECIAL2_ZETA || op == GC_SPECIAL2_IGAMMA || op == GC_SPECIAL2_IGAMMAC)
        return (float)special2_d(op, a, b); /* in double, rounded once (PyTorch's acc type) */
    return gc_sp_poly_f(op, a, b);
}

typedef struct {
    int op, f64;
    const void *a, *b;
    ptrdiff_t sa, sb;
    void *out;
} special2_ctx;

static void special2_range(void *ctx, ptrdiff_t lo, ptrdiff_t hi)
{
    const special2_ctx *c = ctx;
    if (c->f64) {
        const double *a = c->a, *b = c->b;
        double *o = c->out;
        for (ptrdiff_t i = lo; i < hi; i++)
            o[i] = special2_d(c->op, a[i * c->sa], b[i * c->sb]);
    } else {
        const float *a = c->a, *b = c->b;
        float *o = c->out;
        for (ptrdiff_t i = lo; i < hi; i++)
            o[i] = special2_f(c->op, a[i * c->sa], b[i * c->sb]);
    }
}

void gc_special2(int op, int f64, const void *a, ptrdiff_t sa, const void *b, ptrdiff_t sb,
                 void *out, ptrdiff_t n)
{
    special2_ctx c = {.op = op, .f64 = f64, .a = a, .b = b, .sa = sa, .sb = sb, .out = out};
    /* zeta ~0.3 us, igamma ~0.1-10 us (sqrt(a) steps near x = a), a polynomial of degree d
     * ~2d ns: the split is by element count, the estimate only decides how many threads */
    gc_parallel_range(n, 64, (double)n * 200.0, special2_range, &c);
}

/* special_gamma.c: the Hurwitz zeta function and the regularized incomplete gamma functions of
 * torch.special, one element at a time in double.
 *   zeta(x, q) = sum_k (k + q)^-x: the direct sum until its term is below eps of the sum (then
 *     it stops) or a = q + i > 9 with at least 9 terms, then the Euler-Maclaurin tail (an
 *     asymptotic series, stopped at its first term below eps), with Cephes' (and PyTorch's)
 *     domain: inf at x == 1 and at q a non-positive integer, NaN for x < 1 and for q < 0 with
 *     x not an integer; below q = -256 from three positive-q values (no -q-term loop);
 *   P(a, x) / Q(a, x): the series for x < a + 1 (terms x / (a + n) < 1), Legendre's continued
 *     fraction by the modified Lentz algorithm beyond, both times the prefactor
 *     x^a e^-x / Gamma(a), taken for a >= 10 by Stirling's series around x = a so that the
 *     terms of size a cancel exactly (1e-10 would be lost at a = 1e5 otherwise); PyTorch's
 *     values at the edges (NaN for negative arguments, 0 and 1 at the ends). */
#define _DEFAULT_SOURCE /* lgamma_r: no write to the global signgam from the pool's threads */
#include "special.h"

#include <float.h>
#include <math.h>

#define EPS DBL_EPSILON

/* (2k)! / B_2k, k = 1..12: the Euler-Maclaurin tail's coefficients (B_2k the Bernoulli
 * numbers; tools-free check: 2!/B_2 = 2/(1/6) = 12, 4!/B_4 = 24/(-1/30) = -720, ...). */
static const double EM[12] = {
    12.0,
    -720.0,
    30240.0,
    -1209600.0,
    47900160.0,
    -1892437580.3183792,
    74724249600.0,
    -2950130727918.164,
    116467828143500.67,
    -4597978722407473.0,
    1.8152105401943546e+17,
    -7.166165256175667e+18,
};

/* Below this q the direct sum would take -q terms before its tail (1e15 at q = -1e15: a hang),
 * so zeta(x, q) is taken from three positive-q values instead (see gc_sp_zeta). */
#define ZETA_REFLECT_BELOW (-256.0)

double gc_sp_zeta(double x, double q)
{
    if (x == 1)
        return INFINITY;
    if (x < 1)
        return NAN;
    if (q <= 0) {
        if (q == floor(q))
            return INFINITY;
        if (x != floor(x))
            return NAN; /* q^-x not real */
        if (q < ZETA_REFLECT_BELOW) {
            /* q = f - n, 0 < f < 1: the terms k < n are (f - m)^-x = (-1)^x (m - f)^-x,
             * m = 1..n, whose sum is (-1)^x (zeta(x, 1 - f) - zeta(x, n + 1 - f)). The two
             * O(1) values are combined first: for odd x they cancel (exactly at f = 1/2). */
            const double n = -floor(q), f = q + n, sign = fmod(x, 2.0) == 0 ? 1.0 : -1.0;
            const double head = gc_sp_zeta(x, f) + sign * gc_sp_zeta(x, 1 - f);
            return head - sign * gc_sp_zeta(x, n + 1 - f);
        }
    }
    double s = pow(q, -x), a = q, b = 0.0;
    int i = 0;
    while (i < 9 || a <= 9.0) {
        i++;
        a += 1.0;
        b = pow(a, -x);
        s += b;
        if (-EPS * s < b && b < EPS * s)
            return s;
    }
    const double w = a;
    s += b * w / (x - 1) - 0.5 * b;
    double fac = 1.0, k = 0.0;
    for (int j = 0; j < 12; j++) {
        fac *= x + k;
        b /= w;
        const double t = fac * b / EM[j];
        s += t;
        if (fabs(t / s) < EPS)
            break;
        k += 1.0;
        fac *= x + k;
        b /= w;
        k += 1.0;
    }
    return s;
}

/* log(1 + t) - t without cancellation (its series below 0.2), for t > -0.2. */
static double log1p_minus(double t)
{
    if (fabs(t) >= 0.2)
        return log1p(t) - t;
    double term = -t * t, acc = term / 2;
    for (int k = 3; k < 26; k++) {
        term = -term * t;
        acc += term / k;
        if (fabs(term) < 1e-17 * fabs(acc))
            break;
    }
    return acc;
}

/* log(x^a e^-x / Gamma(a)); for a >= 10 a (log1p(t) - t) + log(a)/2 - log(2 pi)/2 - the
 * Stirling correction, t = (x - a) / a. */
static double log_prefactor(double a, double x)
{
    if (a >= 10) {
        const double r = 1 / (a * a);
        const double corr =
            (1.0 / 12 - r * (1.0 / 360 - r * (1.0 / 1260 - r * (1.0 / 1680 - r / 1188)))) / a;
        const double t = (x - a) / a;
        /* a (log1p(t) - t); below t = -0.2 as a log(x / a) - (x - a): log1p near -1 would
         * magnify t's rounding a / x times (1e-12 at a = 15, x = 0.004) */
        const double main = t < -0.2 ? a * log(x / a) - (x - a) : a * log1p_minus(t);
        return main + 0.5 * log(a) - 0.5 * log(2 * GC_PI) - corr;
    }
    int sign;
    return a * log(x) - x - lgamma_r(a, &sign);
}

static double gamma_series(double a, double x) /* P(a, x), x < a + 1 */
{
    double term = 1.0 / a, s = term, ap = a;
    for (int i = 0; i < 100000; i++) {
        ap += 1;
        term *= x / ap;
        s += term;
        if (fabs(term) < fabs(s) * EPS)
            break;
    }
    return s * exp(log_prefactor(a, x));
}

static double gamma_cf(double a, double x) /* Q(a, x), x >= a + 1: modified Lentz */
{
    const double tiny = 1e-300;
    double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
    for (int i = 1; i < 100000; i++) {
        const double an = -i * (i - a);
        b += 2;
        d = an * d + b;
        if (fabs(d) < tiny)
            d = tiny;
        c = b + an / c;
        if (fabs(c) < tiny)
            c = tiny;
        d = 1 / d;
        const double delta = d * c;
        h *= delta;
        if (fabs(delta - 1) < EPS)
            break;
    }
    return h * exp(log_prefactor(a, x));
}

double gc_sp_igamma(double a, double x, int upper)
{
    const double lo = upper ? 1.0 : 0.0, hi = 1.0 - lo; /* P's 0 and 1 as P or Q */
    if (isnan(a) || isnan(x) || a < 0 || x < 0)
        return NAN;
    if (a == 0)
        return x > 0 ? hi : NAN;
    if (x == 0)
        return lo;
    if (isinf(a))
        return isinf(x) ? NAN : lo;
    if (isinf(x))
        return hi;
    if (x < a + 1) {
        const double p = gamma_series(a, x);
        return upper ? 1 - p : p;
    }
    const double qc = gamma_cf(a, x);
    return upper ? qc : 1 - qc;
}

/* special_bessel.c: the Bessel-type functions of torch.special, one element at a time in double:
 * J0, J1, Y0, Y1, K0, K1 (and exp(x) K), the spherical j0 = sin(x)/x and Airy's Ai.
 *
 * Each argument range gets the method that is accurate there (the error stays within a few
 * 1e-14 of the function's envelope; tests/ops/test_bessel.py checks 5e-13 against mpmath):
 *   J, Y, x < 2:      the power series (DLMF 10.2.2; Y by A&S 9.1.11, whose logarithmic term
 *                     is J's series);
 *   J, Y, 2..25:      Miller's backward recurrence from order 70, normalised by
 *                     1 = J0 + 2 sum J_2k; Y0 and Y1 by Neumann's series over the same J_k
 *                     (DLMF 10.23.15 and its derivative): no cancellation beyond the log's;
 *   J, Y, x >= 25:    Hankel's expansion (DLMF 10.17.3), cos and sin of x taken exactly by libm
 *                     and the phase shift applied after, so huge x keep their digits;
 *   K, x <= 0.1:      the series (A&S 9.6.13, 9.6.11) over I's;
 *   K, 0.1..2:        exp(x) K_n(x) = int_0^inf exp(-2x sinh(t/2)^2) cosh(n t) dt by the
 *                     trapezoidal rule, which converges geometrically on this analytic,
 *                     doubly-exponentially decaying integrand (33 to 48 nodes);
 *   K, 2..25:         Steed's algorithm for Temme's continued fraction (K_mu and K_mu+1 for
 *                     |mu| <= 1/2 together; 10 to 40 steps of plain arithmetic);
 *   K, x >= 25:       the asymptotic expansion (DLMF 10.40.2);
 *   Ai, -1..2.09:     the Maclaurin series of Ai(0) f + Ai'(0) g;
 *   Ai, x > 2.09:     sqrt(x/3)/pi K_1/3(zeta), zeta = 2/3 x^1.5 (DLMF 9.6.1), K as above;
 *   Ai, x < -1:       sqrt(z)/3 (J_1/3(zeta) + J_-1/3(zeta)), z = -x (DLMF 9.6.6), the
 *                     fractional J by the series, Miller's recurrence (normalised by A&S
 *                     9.1.87, (x/2)^nu = sum (nu+2k) Gamma(nu+k)/k! J_nu+2k) or Hankel's
 *                     expansion as above.
 * Values at the ends as PyTorch: J, Y, Ai NaN at +-inf; Y(0) = -inf, K(0) = inf, K(inf) = 0;
 * NaN for negative arguments of Y and K. */
#include "special.h"

#include <math.h>

#define GAMMA_1_3 2.6789385347077476337 /* Gamma(1/3) */
#define GAMMA_2_3 1.3541179394264004169 /* Gamma(2/3) */
#define MILLER_TOP 66                   /* miller_top(x) at most */

/* ------------------------------------------------------------------------------- J and Y */

/* J_nu(x) by its series, lead = (x/2)^nu / Gamma(nu + 1), for x below 2. */
static double j_series(double nu, double lead, double x)
{
    double term = lead, s = lead;
    const double q = -(x * x) / 4;
    for (int k = 1; k < 30; k++) {
        term *= q / (k * (k + nu));
        s += term;
        if (fabs(term) < 1e-17 * fabs(s))
            break;
    }
    return s;
}

static double y_series(int n, double x) /* Y_0, Y_1, 0 < x < 2 */
{
    const double q = x * x / 4, lg = log(x / 2);
    double term = 1.0, s = 0.0, h = 0.0;
    if (n == 0) {
        for (int k = 1; k < 30; k++) { /* (-1)^(k+1) H_k q^k / (k!)^2 */
            h += 1.0 / k;
            term *= -q / ((double)k * k);
            s -= h * term;
            if (fabs(h * term) < 1e-17 * fabs(s))
                break;
        }
        return (2 / GC_PI) * ((lg + GC_EULER) * j_series(0, 1.0, x) + s);
    }
    for (int k = 0; k < 30; k++) { /* psi(k+1) + psi(k+2) = -2 gamma + H_k + H_(k+1) */
        if (k)
            term *= -q / ((double)k * (k + 1));
        const double c = (-2 * GC_EULER + 2 * h + 1.0 / (k + 1)) * term;
        s += c;
        h += 1.0 / (k + 1);
        if (k && fabs(c) < 1e-17 * fabs(s))
            break;
    }
    return -2 / (GC_PI * x) + (2 / GC_PI) * lg * j_series(1, x / 2, x) - x / (2 * GC_PI) * s;
}

/* The even order Miller's recurrence starts from at x < 25: J_top(x) / max_k J_k(x) < 1e-19. */
static int miller_top(double x)
{
    return 2 * (int)((x + 42) / 2);
}

/* J0, J1, Y0, Y1 at 2 <= x < 25 (out[0..3]) by Miller's recurrence and Neumann's series. */
static void jy01_miller(double x, double out[4])
{
    double jp1 = 0.0, j = 1e-30, norm = 0.0, y0s = 0.0, y1s = 0.0;
    for (int k = miller_top(x); k > 0; k--) { /* j = J_k, jp1 = J_k+1 (unnormalised) */
        const double jm1 = (2.0 * k / x) * j - jp1;
        if (k % 2 == 0) {
            const double sgn = (k / 2) % 2 == 0 ? 1.0 : -1.0;
            norm += j;
            y0s += sgn * j / (k / 2);
            y1s += sgn * (jm1 - jp1) / (k / 2);
        }
        jp1 = j;
        j = jm1;
    }
    const double scale = 1.0 / (j + 2 * norm);
    const double j0 = j * scale, j1 = jp1 * scale, lg = log(x / 2) + GC_EULER;
    out[0] = j0;
    out[1] = j1;
    out[2] = (2 / GC_PI) * (lg * j0 - 2 * y0s * scale);
    out[3] = (2 / GC_PI) * (-j0 / x + lg * j1 + y1s * scale);
}

/* J_nu(x), nu = +-1/3, 2 <= x < 25, by Miller's recurrence normalised by A&S 9.1.87; g0 is
 * Gamma(nu) and gnu1 Gamma(nu + 1). */
static double j_frac_miller(double nu, double g0, double gnu1, double x)
{
    double g[MILLER_TOP / 2 + 1]; /* Gamma(nu + k) / k! */
    g[0] = g0;
    for (int k = 1; k <= MILLER_TOP / 2; k++)
        g[k] = g[k - 1] * (nu + k - 1) / k;
    double jp1 = 0.0, j = 1e-30, sum = 0.0;
    for (int m = miller_top(x); m > 0; m--) { /* j = J_nu+m (unnormalised) */
        if (m % 2 == 0)
            sum += (nu + m) * g[m / 2] * j;
        const double jm1 = (2 * (nu + m) / x) * j - jp1;
        jp1 = j;
        j = jm1;
    }
    sum += gnu1 * j; /* nu Gamma(nu) J_nu */
    return j * pow(x / 2, nu) / sum;
}

/* Hankel's P and Q (DLMF 10.17.3) for x >= 25: each term at most k/50 of the one before. */
static void hankel_pq(double nu, double x, double *p, double *q)
{
    const double mu = 4 * nu * nu;
    double term = 1.0, ps = 1.0, qs = 0.0;
    for (int k = 1; k <= 30; k++) {
        const double odd = 2.0 * k - 1;
        term *= (mu - odd * odd) / (8.0 * k * x);
        const double t = (k / 2) % 2 == 0 ? term : -term;
        if (k % 2)
            qs += t;
        else
            ps += t;
        if (fabs(term) < 1e-17)
            break;
    }
    *p = ps;
    *q = qs;
}

/* sqrt(2/(pi x)) (P cos chi - Q sin chi) (J) or (P sin chi + Q cos chi) (Y), chi = x -
 * (nu/2 + 1/4) pi: cos and sin of x exact (libm), the shift by the angle sum formulas. */
static double jy_hankel(double nu, double x, int want_y)
{
    double p, q;
    hankel_pq(nu, x, &p, &q);
    const double w = (nu / 2 + 0.25) * GC_PI, cw = cos(w), sw = sin(w);
    const double cx = cos(x), sx = sin(x);
    const double cchi = cx * cw + sx * sw, schi = sx * cw - cx * sw;
    const double amp = sqrt(2 / (GC_PI * x));
    return amp * (want_y ? p * schi + q * cchi : p * cchi - q * schi);
}

/* J_n(x) (want_y 0) or Y_n(x) (1) for n 0 or 1 and finite x > 0. */
static double jy_pos(int n, double x, int want_y)
{
    if (x < 2.0)
        return want_y ? y_series(n, x) : j_series(n, n ? x / 2 : 1.0, x);
    if (x < 25.0) {
        double v[4];
        jy01_miller(x, v);
        return v[n + 2 * want_y];
    }
    return jy_hankel(n, x, want_y);
}

double gc_sp_bessel_j(int n, double x)
{
    if (isnan(x) || isinf(x))
        return NAN; /* as PyTorch (Cephes' cos(inf)) */
    if (x == 0)
        return n ? 0.0 : 1.0;
    const double v = jy_pos(n, fabs(x), 0);
    return n && x < 0 ? -v : v;
}

double gc_sp_bessel_y(int n, double x)
{
    if (x == 0)
        return -INFINITY;
    if (!(x > 0) || isinf(x))
        return NAN;
    return jy_pos(n, x, 1);
}

/* J_nu(x) for nu = +-1/3 and finite x > 0 (Airy's left side). */
static double j_frac(double nu, double x)
{
    const double g0 = nu > 0 ? GAMMA_1_3 : -3 * GAMMA_2_3, gnu1 = nu * g0;
    if (x < 2.0)
        return j_series(nu, pow(x / 2, nu) / gnu1, x);
    if (x < 25.0)
        return j_frac_miller(nu, g0, gnu1, x);
    return jy_hankel(nu, x, 0);
}

/* ------------------------------------------------------------------------------- K */

static double i_series_small(int n, double x) /* I_n(x), x <= 0.1: positive terms */
{
    double term = n ? x / 2 : 1.0, s = term;
    const double q = x * x / 4;
    for (int k = 1; k < 30; k++) {
        term *= q / ((double)k * (k + n));
        s += term;
        if (term < 1e-18 * s)
            break;
    }
    return s;
}

static double k_series(int n, double x) /* K_0, K_1 for 0 < x <= 0.1 */
{
    const double q = x * x / 4, lg = log(x / 2);
    double term = 1.0, s = 0.0, h = 0.0;
    if (n == 0) {
        for (int k = 1; k < 30; k++) {
            h += 1.0 / k;
            term *= q / ((double)k * k);
            s += h * term;
            if (h * term < 1e-18 * s)
                break;
        }
        return -(lg + GC_EULER) * i_series_small(0, x) + s;
    }
    for (int k = 0; k < 30; k++) {
        if (k)
            term *= q / ((double)k * (k + 1));
        const double c = (-2 * GC_EULER + 2 * h + 1.0 / (k + 1)) * term;
        s += c;
        h += 1.0 / (k + 1);
        if (k && fabs(c) < 1e-18 * fabs(s))
            break;
    }
    return 1 / x + lg * i_series_small(1, x) - x / 4 * s;
}

/* exp(x) K_n(x), n 0 or 1, for 0.1 < x < 2 by the trapezoidal rule: the step is the smaller of
 * 0.15 and 0.5/sqrt(x), the width of the integrand's peak, and the nodes end where the integrand
 * is below e^-60 of it. */
static double k_scaled_trapezoid(int n, double x)
{
    const double h = fmin(0.15, 0.5 / sqrt(x));
    const int count = (int)ceil(2 * asinh(sqrt(30.0 / x)) / h) + 1;
    /* node j: e^(t/2) = (1 + a1)^j kept as a = e^(t/2) - 1 (a recurrence of positive terms, so
     * sinh(t/2) = (a + a / (1 + a)) / 2 has no cancellation even where t is tiny) */
    const double a1 = expm1(h / 2);
    double a = 0.0, total = 0.5; /* node 0: exp(0) cosh(0), half weight */
    for (int i = 1; i < count; i++) {
        a = a + a1 * (1 + a);
        const double sh = (a + a / (1 + a)) / 2, s2 = sh * sh;
        double f = exp(fmax(-2 * x * s2, -700.0)); /* no denormals: they are slow */
        if (n)
            f *= 1 + 2 * s2; /* cosh t */
        total += f;
    }
    return h * total;
}

/* exp(x) K_mu(x) and exp(x) K_mu+1(x) for |mu| <= 1/2 and 2 <= x < 25 by Steed's algorithm for
 * Temme's continued fraction (Temme 1975; Numerical Recipes' CF2): K_mu+1 / K_mu from the
 * continued fraction, K_mu from the sum of its convergents' series; 10 to 40 steps of plain
 * arithmetic (no exp per step). */
static void k_steed(double mu, double x, double *k_mu, double *k_mu1)
{
    double b = 2 * (1 + x), d = 1 / b, h = d, delh = d;
    double q1 = 0.0, q2 = 1.0;
    const double a1 = 0.25 - mu * mu;
    double q = a1, c = a1, a = -a1, s = 1 + q * delh;
    for (int i = 2; i < 1000; i++) {
        a -= 2 * (i - 1);
        c = -a * c / i;
        const double qnew = (q1 - b * q2) / a;
        q1 = q2;
        q2 = qnew;
        q += c * qnew;
        b += 2;
        d = 1 / (b + a * d);
        delh = (b * d - 1) * delh;
        h += delh;
        const double dels = q * delh;
        s += dels;
        if (fabs(dels) < 1e-17 * fabs(s))
            break;
    }
    *k_mu = sqrt(GC_PI / (2 * x)) / s;
    *k_mu1 = *k_mu * (mu + x + 0.5 - a1 * h) / x;
}

/* exp(x) K_mu(x) for x >= 25 by its asymptotic expansion (DLMF 10.40.2): each term at most
 * k/50 of the one before, 25 of them below 1e-17. */
static double k_asymptotic(double mu, double x)
{
    const double m4 = 4 * mu * mu;
    double term = 1.0, s = 1.0;
    for (int k = 1; k <= 40; k++) {
        const double odd = 2.0 * k - 1;
        term *= (m4 - odd * odd) / (8.0 * k * x);
        s += term;
        if (fabs(term) < 1e-17)
            break;
    }
    return sqrt(GC_PI / (2 * x)) * s;
}

double gc_sp_bessel_k(int n, int scaled, double x)
{
    if (x == 0)
        return INFINITY;
    if (x == INFINITY)
        return 0.0;
    if (!(x > 0))
        return NAN;
    double v;
    if (x <= 0.1) {
        v = k_series(n, x) * exp(x);
    } else if (x < 2) {
        v = k_scaled_trapezoid(n, x);
    } else if (x >= 25) {
        v = k_asymptotic(n, x);
    } else {
        double k0, k1;
        k_steed(0.0, x, &k0, &k1);
        v = n ? k1 : k0;
    }
    return scaled ? v : v * exp(-x);
}

/* ------------------------------------------------------------------------------- j0, Ai */

double gc_sp_spherical_j0(double x)
{
    if (isnan(x))
        return x;
    if (isinf(x))
        return 0.0;
    if (fabs(x) < 0.5) { /* Taylor: sin(x)/x loses bits to cancellation there */
        const double z = x * x;
        return 1 - z / 6 * (1 - z / 20 * (1 - z / 42 * (1 - z / 72 * (1 - z / 110 *
                                                                         (1 - z / 156)))));
    }
    return sin(x) / x;
}

#define AI0 0.355028053887817239260  /* Ai(0) */
#define AIP0 0.258819403792806798405 /* -Ai'(0) */

static double airy_maclaurin(double x) /* -1 <= x <= 2.09 (1e-14 of cancellation at 2) */
{
    const double x3 = x * x * x;
    double f = 1.0, g = x, tf = 1.0, tg = x;
    for (int k = 1; k < 60; k++) {
        tf *= x3 / ((3.0 * k - 1) * (3.0 * k));
        tg *= x3 / ((3.0 * k) * (3.0 * k + 1));
        f += tf;
        g += tg;
        if (fabs(tf) < 1e-18 && fabs(tg) < 1e-18)
            break;
    }
    return AI0 * f - AIP0 * g;
}

double gc_sp_airy_ai(double x)
{
    if (isnan(x) || isinf(x))
        return NAN; /* as PyTorch */
    if (x >= -1.0 && x <= 2.09)
        return airy_maclaurin(x);
    if (x > 2.09) { /* zeta >= 2: K_1/3 by Steed's algorithm, by the expansion from 25 */
        const double xr = fmin(x, 200.0); /* Ai(200) underflows: 0 beyond, as PyTorch */
        const double zeta = 2.0 / 3.0 * xr * sqrt(xr);
        double k = 0.0, k1;
        if (zeta < 25)
            k_steed(1.0 / 3.0, zeta, &k, &k1);
        else
            k = k_asymptotic(1.0 / 3.0, zeta);
        return sqrt(xr / 3) / GC_PI * k * exp(-zeta);
    }
    const double z = -x, zeta = 2.0 / 3.0 * z * sqrt(z);
    return sqrt(z) / 3 * (j_frac(1.0 / 3.0, zeta) + j_frac(-1.0 / 3.0, zeta));
}

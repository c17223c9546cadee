/* special_bessel.c: the Bessel-type functions of torch.special, one element at a time in double:
 * J0, J1, Y0, Y1, K0, K1 (and exp(x) K), the spherical j0 = sin(x)/x and Airy's Ai.
 *
 * Away from 0 every function is one short Chebyshev series (12 to 26 terms, no loop that runs
 * until it converges, at most one exp or one sin/cos pair per element); the coefficients are
 * the Chebyshev interpolants of the smooth factor, computed with mpmath at 40 digits and cut
 * below 2e-18 of the leading term (tests/ops/test_bessel.py checks 5e-13 against mpmath):
 *   J, Y, x < 8:      J0, J1/x and the entire parts of Y0, Y1 (A&S 9.1.13) in x^2;
 *   J, Y, x >= 8:     Hankel's P and Q (DLMF 10.17.3) in 1/x^2, smooth down to 1/x = 0, with
 *                     cos and sin of x taken exactly by libm and the phase shift applied after,
 *                     so huge x keep their digits;
 *   K, x < 2:         the series (A&S 9.6.13, 9.6.11) over I's, about 12 terms at x = 2;
 *   K, x >= 2:        sqrt(x) exp(x) K_n(x) in 1/x (DLMF 10.40.2's smooth factor);
 *   Ai, -4..2.09:     the Maclaurin series of Ai(0) f + Ai'(0) g;
 *   Ai, x > 2.09:     the smooth factor of exp(-zeta) / (2 sqrt(pi) x^1/4) in 1/zeta (DLMF
 *                     9.7.5), zeta = 2/3 x^1.5;
 *   Ai, x < -4:       the modulus factors P, Q of DLMF 9.7.9 in 1/zeta^2.
 * Values at the ends as PyTorch: J, Y, Ai NaN at +-inf; Y(0) = -inf, K(0) = inf, K(inf) = 0;
 * NaN for negative arguments of Y and K. */
#include "special.h"

#include <math.h>

/* ------------------------------------------------------------------------------- J and Y */

/* Chebyshev series for J and Y of order 0 and 1 (coefficients: the interpolants at 64 Chebyshev
 * nodes, computed with mpmath at 40 digits, cut where they fall below 2e-18 of the leading ones).
 * x < 8, in t = x^2/32 - 1: J0, J1/x, and the entire parts of Y (A&S 9.1.13),
 * Y0 - (2/pi) log(x/2) J0 and (Y1 - (2/pi) log(x/2) J1 + 2/(pi x)) / x.
 * x >= 8, in t = 128/x^2 - 1: Hankel's P_n and x Q_n (DLMF 10.17.3), which are smooth in 1/x^2
 * down to 1/x = 0, so one short expansion covers the whole half line. */
static const double J0S[17] = {
    0.31545594294978023913,
    -0.0087234423528522212908,
    0.26517861320333680987,
    -0.37009499387264977903,
    0.15806710233209726128,
    -0.034893769411408885163,
    0.0048191800694676044968,
    -0.00046062616620627504750,
    0.000032460328821005080806,
    -1.7619469077621507495e-6,
    7.6081635924187818670e-8,
    -2.6792535305576728983e-9,
    7.8486963144794644165e-11,
    -1.9438346867370165706e-12,
    4.1253205956343739326e-14,
    -7.5885081254475463376e-16,
    1.2218515873961411034e-17,
};
static const double J1S[17] = {
    0.16208969265131623021,
    -0.14897514506765210906,
    0.16099926235720970255,
    -0.082680491766817906597,
    0.022213639654966035410,
    -0.0036469406007692759578,
    0.00040503377283548218331,
    -0.000032555548668572585168,
    1.9858774049915167414e-6,
    -9.5219847567504361821e-8,
    3.6871337590971482385e-9,
    -1.1780266226958848398e-10,
    3.1601545803480033215e-12,
    -7.2217552396517734285e-14,
    1.4232144003513942316e-15,
    -2.4441972916190463893e-17,
    3.6912682997929332622e-19,
};
static const double Y0S[17] = {
    0.072909396182320887220,
    -0.27832370940758248315,
    0.29604999902071481676,
    0.098255084081878640577,
    -0.10755155280627783505,
    0.031799074084414515427,
    -0.0051613971058107149490,
    0.00054985253200390115387,
    -0.000041996983149420130705,
    2.4290361107923793976e-6,
    -1.1049969793472956112e-7,
    4.0665173659791104930e-9,
    -1.2374148898289852487e-10,
    3.1685725528945944421e-12,
    -6.9269560324310010835e-14,
    1.3086308625876684015e-15,
    -2.1586201986914483197e-17,
};
static const double Y1S[17] = {
    0.076601539704847557657,
    -0.081825614127328264064,
    -0.024867707612196400509,
    0.047967452752746982920,
    -0.018525884510898022173,
    0.0036806076878235111017,
    -0.00046272540602933687152,
    0.000040694002695808698676,
    -2.6617695125295626191e-6,
    1.3506026913254338045e-7,
    -5.4835241103362765753e-9,
    1.8245086841229007743e-10,
    -5.0706666365911291344e-12,
    1.1956162517587949013e-13,
    -2.4231624427124732278e-15,
    4.2681265130729623577e-17,
    -6.5960609787230412421e-19,
};
static const double P0L[13] = {
    1.9989206986950373307,
    -0.00053652204681321174247,
    3.0751847875194746219e-6,
    -5.1705945376060977010e-8,
    1.6306464635151383095e-9,
    -7.8640913772370699990e-11,
    5.1682623873491924622e-12,
    -4.3045788699253912224e-13,
    4.3265957431549405642e-14,
    -5.0690340959352360775e-15,
    6.7480722157338737041e-16,
    -1.0011513723467785834e-16,
    1.6305919233744184736e-17,
};
static const double Q0L[16] = {
    -0.24889367368539214559,
    0.00054708159540893196795,
    -5.9315987288485178116e-6,
    1.4377965798375193428e-7,
    -5.8175327494930559835e-9,
    3.3760975237349907551e-10,
    -2.5653979367973077957e-11,
    2.4049161002813650490e-12,
    -2.6690625482579415976e-13,
    3.4041800321963688986e-14,
    -4.8799441053120400078e-15,
    7.7297031762426053902e-16,
    -1.3348852171502517040e-16,
    2.4865952389390515470e-17,
    -4.9528926298865159420e-18,
    1.0473158973776097239e-18,
};
static const double P1L[13] = {
    2.0018060817200273998,
    0.00089898983308594085557,
    -3.9872843004889085228e-6,
    6.1776339606442985349e-8,
    -1.8718907491063066087e-9,
    8.8168986595823388985e-11,
    -5.7048636403956447019e-12,
    4.6991955152305423752e-13,
    -4.6842237839904892216e-14,
    5.4526748960447171683e-15,
    -7.2211808422740179189e-16,
    1.0667689114335412457e-16,
    -1.7312313216116334973e-17,
};
static const double Q1L[15] = {
    0.74844459311256520385,
    -0.00077021788393256634594,
    7.3108922063643632996e-6,
    -1.6767825107266737968e-7,
    6.5833546621204433032e-9,
    -3.7490909505415561844e-10,
    2.8121750359748864681e-11,
    -2.6114525394623199408e-12,
    2.8774212663332233544e-13,
    -3.6490019160618377554e-14,
    5.2066263662267071631e-15,
    -8.2153180254585942908e-16,
    1.4141084390211833283e-16,
    -2.6267615898385291684e-17,
    5.2192649196714082425e-18,
};

static double cheb_sum(const double *c, int m, double t) /* Clenshaw: sum' c_i T_i(t) */
{
    const double t2 = 2 * t;
    double b1 = 0.0, b2 = 0.0;
    for (int i = m - 1; i > 0; i--) {
        const double b0 = t2 * b1 - b2 + c[i];
        b2 = b1;
        b1 = b0;
    }
    return t * b1 - b2 + c[0] / 2;
}

#define CHEB(c, t) cheb_sum(c, (int)(sizeof c / sizeof c[0]), t)

/* J_n(x) (want_y 0) or Y_n(x) (1) for n 0 or 1 and finite x > 0. */
static double jy_pos(int n, double x, int want_y)
{
    if (x < 8.0) {
        const double t = x * x / 32 - 1;
        const double j = n ? x * CHEB(J1S, t) : CHEB(J0S, t);
        if (!want_y)
            return j;
        const double lj = (2 / GC_PI) * log(x / 2) * j;
        return n ? lj - 2 / (GC_PI * x) + x * CHEB(Y1S, t) : lj + CHEB(Y0S, t);
    }
    const double t = 128 / (x * x) - 1;
    const double p = n ? CHEB(P1L, t) : CHEB(P0L, t);
    const double q = (n ? CHEB(Q1L, t) : CHEB(Q0L, t)) / x;
    /* chi = x - (n/2 + 1/4) pi: cos and sin of x exact (libm), the shift by the angle sums */
    const double cx = cos(x), sx = sin(x), r = 0.70710678118654752440; /* cos(pi/4) */
    const double c4 = r * (cx + sx), s4 = r * (sx - cx); /* cos, sin of x - pi/4 */
    const double cchi = n ? s4 : c4, schi = n ? -c4 : s4;
    const double amp = sqrt(2 / (GC_PI * x));
    return amp * (want_y ? p * schi + q * cchi : p * cchi - q * schi);
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

/* ------------------------------------------------------------------------------- K */

static double i_series_small(int n, double x) /* I_n(x), x < 2: positive terms */
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

static double k_series(int n, double x) /* K_0, K_1 for 0 < x < 2 */
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

/* sqrt(x) exp(x) K_n(x) for x >= 2 as a Chebyshev series in t = 4/x - 1 (-1 < t <= 1): the
 * coefficients are the interpolant's at 80 Chebyshev nodes, computed with mpmath at 40 digits
 * and cut where they fall below 2e-18 of the value (the function is smooth in 1/x up to x = inf,
 * so one expansion covers the whole range: one Clenshaw sum, no loop to converge; exp(x) K at
 * x = 2 is 0.84, so the 1e-18 cut is far below double's rounding). */
static const double K0_CHEB[26] = {
    2.4403030820659554547,
    -0.031448101311964500543,
    0.0015698838857300533749,
    -0.00012849549581627802638,
    0.000013949813718876499364,
    -1.8317555227191194848e-6,
    2.7668136394450150761e-7,
    -4.6604898976879476656e-8,
    8.5740340174142260858e-9,
    -1.6975345093890615156e-9,
    3.5773972814003284472e-10,
    -7.9574892444773970377e-11,
    1.8559491149549265550e-11,
    -4.5145978833745191751e-12,
    1.1403405882073442347e-12,
    -2.9800969231481783548e-13,
    8.0328907750683743694e-14,
    -2.2275133267462963604e-14,
    6.3400764762766459661e-15,
    -1.8485933779209071694e-15,
    5.5120559994043333649e-16,
    -1.6782311257549006383e-16,
    5.2103917776435541125e-17,
    -1.6475805939842632815e-17,
    5.3004337711773357710e-18,
    -1.7331712005821000278e-18,
};
static const double K1_CHEB[26] = {
    2.7206261904844426694,
    0.10392373657681723844,
    -0.0028578168596227793868,
    0.00019521551847135163111,
    -0.000019361979741660829600,
    2.4064849478372171171e-6,
    -3.5019606030878125421e-7,
    5.7410841254500492923e-8,
    -1.0345762465678097027e-8,
    2.0150497551970346161e-9,
    -4.1903547593419255842e-10,
    9.2183151876053141258e-11,
    -2.1299678384277910216e-11,
    5.1396396734823435404e-12,
    -1.2891739609498229352e-12,
    3.3484196660522431201e-13,
    -8.9767051820101460692e-14,
    2.4771544242195986813e-14,
    -7.0198370892147688513e-15,
    2.0387031662398608799e-15,
    -6.0570472706430178228e-16,
    1.8380935752430454256e-16,
    -5.6894628491936483743e-17,
    1.7940510478863572914e-17,
    -5.7567444820733024503e-18,
    1.8778651901623267401e-18,
};

double gc_sp_bessel_k(int n, int scaled, double x)
{
    if (x == 0)
        return INFINITY;
    if (x == INFINITY)
        return 0.0;
    if (!(x > 0))
        return NAN;
    if (x < 2) {
        const double v = k_series(n, x);
        return scaled ? v * exp(x) : v;
    }
    const double t = 4 / x - 1, v = (n ? CHEB(K1_CHEB, t) : CHEB(K0_CHEB, t)) / sqrt(x);
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

static double airy_maclaurin(double x) /* -4 <= x <= 2.09 (1e-14 of cancellation at 2) */
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

/* Ai beyond the Maclaurin range as Chebyshev series (mpmath at 40 digits, 80 nodes, cut below
 * 2e-18 of the leading coefficients) of the smooth factors of its asymptotic forms (DLMF 9.7.5,
 * 9.7.9), zeta = 2/3 |x|^1.5:
 *   x > 2.09 (zeta >= 2):  Ai = exp(-zeta) / (2 sqrt(pi) x^1/4) R, R in t = 4/zeta - 1;
 *   x < -4 (zeta > 16/3):  Ai = (P cos(zeta - pi/4) + Q sin(zeta - pi/4)) / (sqrt(pi) |x|^1/4),
 *                          P and zeta Q in t = (512/9)/zeta^2 - 1, where Bi's pair (-P sin +
 *                          Q cos) gave the second equation that fixed them. */
static const double AIR[24] = {
    1.9703641130772845184,
    -0.014089605985948988201,
    0.00066801067512692175593,
    -0.000053666873672947437982,
    5.7700746038473341279e-6,
    -7.5315578939566600236e-7,
    1.1329847714402568723e-7,
    -1.9027468532718795138e-8,
    3.4925583426554892680e-9,
    -6.9022640643721010294e-10,
    1.4524474656607538654e-10,
    -3.2268372400994674671e-11,
    7.5182436447578888592e-12,
    -1.8271838826513864380e-12,
    4.6117006004528612712e-13,
    -1.2043732315143059145e-13,
    3.2444440900656925475e-14,
    -8.9919603846713987662e-15,
    2.5581011221364147452e-15,
    -7.4554476165912557420e-16,
    2.2221440816720059872e-16,
    -6.7631880015163205441e-17,
    2.0990562973207186921e-17,
    -6.6353789245435669861e-18,
};
static const double AIP[18] = {
    1.9987417781485556672,
    -0.00062168365843741160973,
    7.1811937743686448636e-6,
    -2.3162698135017581462e-7,
    1.3216283888528755700e-8,
    -1.0938736172758126305e-9,
    1.1794620737908534301e-10,
    -1.5518841909929855678e-11,
    2.3869274114924659902e-12,
    -4.1655288920103499744e-13,
    8.0716781107414667956e-14,
    -1.7087573211105669480e-14,
    3.9029451485408147306e-15,
    -9.5239767849070646067e-16,
    2.4632810885752602868e-16,
    -6.7090774634648577927e-17,
    1.9139396837187071248e-17,
    -5.6930843621137699859e-18,
};
static const double AIQ[22] = {
    0.13764341112616001832,
    -0.00060891518408326939554,
    0.000013174151014089972291,
    -6.0140719129082979041e-7,
    4.3275373422984992838e-8,
    -4.2477317329547254795e-9,
    5.2322853768344936894e-10,
    -7.6722909751150238509e-11,
    1.2923809452698711277e-11,
    -2.4385297571082899612e-12,
    5.0590472378720842463e-13,
    -1.1378513792256328040e-13,
    2.7441377308322257031e-14,
    -7.0344821126325794951e-15,
    1.9032114367198915676e-15,
    -5.4030405414093073907e-16,
    1.6016711026585233244e-16,
    -4.9375274403528066790e-17,
    1.5773435797781152340e-17,
    -5.2061295818384580042e-18,
    1.7706787947400164478e-18,
    -6.1916696207832746923e-19,
};

double gc_sp_airy_ai(double x)
{
    if (isnan(x) || isinf(x))
        return NAN; /* as PyTorch */
    if (x >= -4.0 && x <= 2.09)
        return airy_maclaurin(x);
    if (x > 2.09) {
        const double xr = fmin(x, 200.0); /* Ai(200) underflows: 0 beyond, as PyTorch */
        const double zeta = 2.0 / 3.0 * xr * sqrt(xr);
        return CHEB(AIR, 4 / zeta - 1) * exp(-zeta) / (2 * sqrt(GC_PI * sqrt(xr)));
    }
    const double z = -x, zeta = 2.0 / 3.0 * z * sqrt(z), t = (512.0 / 9.0) / (zeta * zeta) - 1;
    const double p = CHEB(AIP, t), q = CHEB(AIQ, t) / zeta;
    const double cz = cos(zeta), sz = sin(zeta), r = 0.70710678118654752440; /* cos(pi/4) */
    return (p * r * (cz + sz) + q * r * (sz - cz)) / sqrt(GC_PI * sqrt(z));
}

/* special_poly.h: the body of special_poly.c, included once per element type with PT (float or
 * double), PF(name) (the name with the type's suffix) and PFMS(a, b, c) (a * b - c rounded once,
 * as the fused multiply-add PyTorch's compiled recurrences use) defined; <tgmath.h> gives each
 * libm call the type's own version, so float32 runs in float as PyTorch's CPU kernels do. */

/* n as PyTorch's static_cast<int64_t>(n) gives it on x86: NaN, infinities and |n| >= 2^63 are
 * INT64_MIN (cvttsd2si's "integer indefinite"), so they count as negative degrees. */
static int64_t PF(degree)(PT n)
{
    if (!(fabs(n) < (PT)9.2233720368547758e18))
        return INT64_MIN;
    return (int64_t)n;
}

/* 2n + 1 and n + 1 as int64 wrapping the way x86 does (PyTorch computes them in int64). */
static PT PF(odd)(int64_t n)
{
    return (PT)(int64_t)((uint64_t)n + (uint64_t)n + 1u);
}

static PT PF(next)(int64_t n)
{
    return (PT)(int64_t)((uint64_t)n + 1u);
}

/* The Chebyshev polynomial of kind 'kind' (0 T, 1 U, 2 V, 3 W) at y (2x - 1 for the shifted
 * forms) after the end points: the trigonometric closed form inside (-1, 1) above degree
 * `closed` (PyTorch's: 6 or 8, 4 for the shifted W), else the recurrence
 * p_k = 2y p_(k-1) - p_(k-2), left as soon as it is NaN (it stays NaN, and a huge degree at
 * |y| > 1 overflows within a few hundred steps). */
static PT PF(chebyshev)(int kind, PT y, int64_t n, int64_t closed)
{
    if (n > closed && fabs(y) < 1) {
        const PT t = acos(y);
        switch (kind) {
        case 0: return cos((PT)n * t);
        case 1:
            if (sin(t) != 0)
                return sin(PF(next)(n) * t) / sin(t);
            return PF(next)(n) * cos(PF(next)(n) * t) / y;
        case 2:
            if (sin(t / 2) != 1)
                return cos(((PT)n + (PT)0.5) * t) / cos(t / 2);
            return n % 2 == 0 ? PF(odd)(n) : -PF(odd)(n);
        default:
            if (cos(t / 2) != 1)
                return sin(((PT)n + (PT)0.5) * t) / sin(t / 2);
            if (y > 0)
                return PF(odd)(n);
            return n % 2 == 0 ? (PT)1 : (PT)-1;
        }
    }
    if (n == 0)
        return 1;
    const PT first[4] = {y, y + y, y + y - 1, y + y + 1};
    PT p = 1, q = first[kind];
    for (int64_t k = 2; k <= n && q == q; k++) {
        const PT r = PFMS(y + y, q, p);
        p = q;
        q = r;
    }
    return q;
}

/* Value at y = 1 (top) or -1 of the Chebyshev polynomial of kind 'kind'. */
static PT PF(chebyshev_end)(int kind, int top, int64_t n)
{
    const int even = n % 2 == 0;
    switch (kind) {
    case 0: return top || even ? (PT)1 : (PT)-1;
    case 1: return top || even ? PF(next)(n) : -PF(next)(n);
    case 2: return top ? (PT)1 : even ? PF(odd)(n) : -PF(odd)(n);
    default: return top ? PF(odd)(n) : even ? (PT)1 : (PT)-1;
    }
}

static PT PF(hermite_h)(PT x, int64_t n)
{
    if (n == 0)
        return 1;
    PT p = 1, q = x + x;
    for (int64_t j = 2; j <= n && q == q; j++) { /* PyTorch's k = 2 (j - 1) */
        const PT r = PFMS(x + x, q, (PT)(2 * (j - 1)) * p);
        p = q;
        q = r;
    }
    return q;
}

static PT PF(hermite_he)(PT x, int64_t n)
{
    if (n == 0)
        return 1;
    PT p = 1, q = x;
    for (int64_t k = 1; k < n && q == q; k++) {
        const PT r = PFMS(x, q, (PT)k * p);
        p = q;
        q = r;
    }
    return q;
}

static PT PF(laguerre)(PT x, int64_t n)
{
    if (fabs(x) == 0 || n == 0)
        return 1;
    PT p = 1, q = 1 - x;
    for (int64_t k = 1; k < n && q == q; k++) {
        const PT r = PFMS((PT)(k + k) + (1 - x), q, (PT)k * p) / (PT)(k + 1);
        p = q;
        q = r;
    }
    return q;
}

static PT PF(legendre)(PT x, int64_t n)
{
    if (fabs(x) == 1)
        return x > 0 || n % 2 == 0 ? (PT)1 : (PT)-1;
    if (n == 0)
        return 1;
    PT p = 1, q = x;
    for (int64_t k = 1; k < n && q == q; k++) {
        const PT r = PFMS((PT)(k + k + 1) * x, q, (PT)k * p) / (PT)(k + 1);
        p = q;
        q = r;
    }
    return q;
}

PT PF(gc_sp_poly)(int op, PT x, PT nv)
{
    const int64_t n = PF(degree)(nv);
    if (n < 0)
        return 0;
    switch (op) {
    case GC_SPECIAL2_CHEBYSHEV_POLYNOMIAL_T:
    case GC_SPECIAL2_CHEBYSHEV_POLYNOMIAL_U:
    case GC_SPECIAL2_CHEBYSHEV_POLYNOMIAL_V:
    case GC_SPECIAL2_CHEBYSHEV_POLYNOMIAL_W: {
        const int kind = op - GC_SPECIAL2_CHEBYSHEV_POLYNOMIAL_T;
        if (fabs(x) == 1)
            return PF(chebyshev_end)(kind, x > 0, n);
        return PF(chebyshev)(kind, x, n, kind ? 8 : 6);
    }
    case GC_SPECIAL2_SHIFTED_CHEBYSHEV_POLYNOMIAL_T:
    case GC_SPECIAL2_SHIFTED_CHEBYSHEV_POLYNOMIAL_U:
    case GC_SPECIAL2_SHIFTED_CHEBYSHEV_POLYNOMIAL_V:
    case GC_SPECIAL2_SHIFTED_CHEBYSHEV_POLYNOMIAL_W: {
        const int kind = op - GC_SPECIAL2_SHIFTED_CHEBYSHEV_POLYNOMIAL_T;
        if (x == 1 || x == 0)
            return PF(chebyshev_end)(kind, x == 1, n);
        return PF(chebyshev)(kind, x + x - 1, n, kind == 3 ? 4 : 6); /* PyTorch's W: n > 4 */
    }
    case GC_SPECIAL2_HERMITE_POLYNOMIAL_H: return PF(hermite_h)(x, n);
    case GC_SPECIAL2_HERMITE_POLYNOMIAL_HE: return PF(hermite_he)(x, n);
    case GC_SPECIAL2_LAGUERRE_POLYNOMIAL_L: return PF(laguerre)(x, n);
    case GC_SPECIAL2_LEGENDRE_POLYNOMIAL_P: return PF(legendre)(x, n);
    default: return NAN;
    }
}

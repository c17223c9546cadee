/* Vectorized float32 exp, log, tanh, sigmoid, gelu (erf form), gelu (tanh form), and softmax's
 * fused exp-shift-sum (VM_EXP_SHIFT_SUM, at the end), included by cpu/isa/avx2.c,
 * cpu/isa/avx512.c and cpu/isa/neon.c after they define the operations below.  Written once, so
 * the ISAs give bitwise-identical function values (the sums differ with the lane count).
 *
 * Accuracy against float64 (checked on a dense sweep of the whole float range by
 * tests/backends/cpu/test_isa.py): relative error <= 2e-7 for exp, tanh and sigmoid, <= 1e-6 for
 * log and both gelus, for results in the normal range; results that are denormal are within a
 * few units of the smallest denormal.  inf, -inf, nan, +-0, denormal inputs and large magnitudes
 * give the exact limits (exp(-inf) = 0, tanh(+-inf) = +-1, sigmoid(-inf) = 0, gelu(-inf) = -0,
 * log(0) = -inf, log(x < 0) = nan, ...).  Coefficients: cpu/isa/fit_vmath.py.
 *
 * The including file defines (VF: float vector, VI: int32 vector, VM: lane mask, VD: double
 * vector of half the lanes, VLANES: lanes of VF):
 *   vf_set1 vf_loadu vf_storeu vf_loadn(p, n) vf_storen(p, v, n) (first n lanes)
 *   vf_add vf_sub vf_mul vf_div vf_fma(a, b, c) = a*b + c   vf_fnma(a, b, c) = c - a*b
 *   vf_min vf_max (return the second operand when either is NaN, like minps / maxps)
 *   vf_and vf_or vf_xor vf_andnot(a, b) = ~a & b (bitwise)   vf_round (to nearest even)
 *   vf_cvti (float -> int32, nearest)  vi_cvtf   vi_set1 vi_add vi_sub vi_srai vi_slli vi_and
 *   vf_asi vi_asf (reinterpret)   vf_lt vf_le vf_gt vf_ge vf_eq vf_isnan -> VM
 *   vf_blend(m, a, b) = m ? b : a   vm_bits(m): lane k of m as bit k (unsigned)
 *   vd_lo vd_hi (VF -> VD of the low / high lanes)  vd_tof2(lo, hi) (-> VF)
 *   vd_set1 vd_add vd_mul vd_fma(a, b, c) = a*b + c  vd_sub
 *   vd_storeu(p, v) (VLANES / 2 doubles)
 */

#define VM_C(v) vf_set1((float)(v))

/* ---- exp -------------------------------------------------------------------------------------
 * n = round(x / ln2), r = x - n ln2 (ln2 in two parts, FMA), exp(r) = 1 + r + r^2 P(r), then
 * times 2^n as 2^(n/2) * 2^(n - n/2): both factors are normal floats for every n in [-150, 128],
 * the first product is exact and the second rounds once (also into the denormals, or to inf). */
/* exp(r) 2^(n + k) from the reduced argument r (|r| <= ln2 / 2) and n (as a float) */
static inline VF vm_exp_tail(VF nf, VF r, int k)
{
    VF p = VM_C(0.00019826496f);
    p = vf_fma(p, r, VM_C(0.0013946021f));
    p = vf_fma(p, r, VM_C(0.00833343f));
    p = vf_fma(p, r, VM_C(0.04166627f));
    p = vf_fma(p, r, VM_C(0.16666666f));
    p = vf_fma(p, r, VM_C(0.5f));
    p = vf_add(vf_fma(vf_mul(p, r), r, r), VM_C(1.0f));
    const VI n = vi_add(vf_cvti(nf), vi_set1(k));
    const VI n1 = vi_srai(n, 1), n2 = vi_sub(n, n1);
    const VF s1 = vi_asf(vi_slli(vi_add(n1, vi_set1(127)), 23));
    const VF s2 = vi_asf(vi_slli(vi_add(n2, vi_set1(127)), 23));
    return vf_mul(vf_mul(p, s1), s2);
}

static inline VF vm_exp_k(VF x, int k)
{
    /* exp(x) 2^k for k in [0, 64]: clamp so that n + k stays in [-150, 128] */
    const VF lo = VM_C(-104.0f - 0.693147181f * (float)k), hi = VM_C(89.0f - 0.693147181f * (float)k);
    const VF xc = vf_max(lo, vf_min(hi, x)); /* NaN stays NaN */
    const VF nf = vf_round(vf_mul(xc, VM_C(1.44269504088896341f)));
    VF r = vf_fnma(nf, VM_C(0.693145751953125f), xc);
    r = vf_fnma(nf, VM_C(1.42860682030941723212e-6f), r);
    return vm_exp_tail(nf, r, k);
}

/* exp(xh + xl) 2^k for xh in [-140, 0], |xl| <= 2 (k in [0, 64]): xh - n ln2hi is exact when
 * |xh| >= 1 (both are multiples of ulp(xh) or of 2^-15, the difference below 2), xl joins the
 * small remainder, so the sum's rounding error stays off the argument. */
static inline VF vm_exp2_k(VF xh, VF xl, int k)
{
    const VF xc = vf_max(VM_C(-140.0f), xh);
    const VF nf = vf_round(vf_mul(vf_add(xc, xl), VM_C(1.44269504088896341f)));
    VF r = vf_add(vf_fnma(nf, VM_C(0.693145751953125f), xc), xl);
    r = vf_fnma(nf, VM_C(1.42860682030941723212e-6f), r);
    return vm_exp_tail(nf, r, k);
}

static inline VF vm_exp(VF x)
{
    return vm_exp_k(x, 0);
}

#define VM_2P64 1.8446744073709552e19f /* 2^64 */
#define VM_2M64 5.421010862427522e-20f /* 2^-64 */

/* ---- log -------------------------------------------------------------------------------------
 * x = m 2^e with m in [sqrt(1/2), sqrt(2)) (denormals scaled by 2^25 first), f = m - 1 exactly,
 * log(1 + f) = f - f^2/2 + f^3 P(f), plus e ln2 in two parts. */
static inline VF vm_log(VF x)
{
    const VM tiny = vf_lt(x, VM_C(1.17549435e-38f));
    const VF xs = vf_blend(tiny, x, vf_mul(x, VM_C(33554432.0f))); /* 2^25 */
    VI bits = vf_asi(xs);
    VI e = vi_sub(vi_srai(bits, 23), vi_set1(127));
    VF m = vi_asf(vi_or(vi_and(bits, vi_set1(0x007fffff)), vi_set1(0x3f800000)));
    const VM big = vf_gt(m, VM_C(1.41421356f));
    m = vf_blend(big, m, vf_mul(m, VM_C(0.5f)));
    VF ef = vf_add(vi_cvtf(e), vf_blend(big, VM_C(0.0f), VM_C(1.0f)));
    ef = vf_blend(tiny, ef, vf_sub(ef, VM_C(25.0f)));
    const VF f = vf_sub(m, VM_C(1.0f));
    const VF f2 = vf_mul(f, f);
    VF p = VM_C(0.06675272f);
    p = vf_fma(p, f, VM_C(-0.11646435f));
    p = vf_fma(p, f, VM_C(0.11904712f));
    p = vf_fma(p, f, VM_C(-0.12411269f));
    p = vf_fma(p, f, VM_C(0.14217891f));
    p = vf_fma(p, f, VM_C(-0.16667643f));
    p = vf_fma(p, f, VM_C(0.20002204f));
    p = vf_fma(p, f, VM_C(-0.25000015f));
    p = vf_fma(p, f, VM_C(0.3333331f));
    VF y = vf_mul(vf_mul(p, f2), f);
    y = vf_fma(ef, VM_C(-2.12194440e-4f), y);
    y = vf_fma(f2, VM_C(-0.5f), y);
    VF r = vf_fma(ef, VM_C(0.693359375f), vf_add(f, y));
    /* specials: x < 0 or NaN -> NaN, 0 -> -inf, +inf -> +inf */
    r = vf_blend(vf_eq(x, VM_C(0.0f)), r, VM_C(-INFINITY));
    r = vf_blend(vf_eq(x, VM_C(INFINITY)), r, x);
    r = vf_blend(vf_lt(x, VM_C(0.0f)), r, VM_C(NAN));
    return vf_blend(vf_isnan(x), r, x);
}

/* ---- tanh ------------------------------------------------------------------------------------
 * |x| < 0.625: x + x^3 P(x^2); otherwise sign(x) (1 - 2 / (exp(2|x|) + 1)), the quotient with
 * an exact denominator as in vm_sigmoid. */
static inline VF vm_tanh(VF x)
{
    const VF sign = vf_and(x, vi_asf(vi_set1((int)0x80000000u)));
    const VF ax = vf_xor(x, sign);
    const VF z = vf_mul(x, x);
    VF p = VM_C(0.002148991f);
    p = vf_fma(p, z, VM_C(-0.00818467f));
    p = vf_fma(p, z, VM_C(0.021704003f));
    p = vf_fma(p, z, VM_C(-0.053947456f));
    p = vf_fma(p, z, VM_C(0.13333212f));
    p = vf_fma(p, z, VM_C(-0.3333333f));
    const VF small = vf_fma(vf_mul(p, z), x, x);
    /* 2 / (e + 1) with e + 1 = dh + dl exactly (e >= 1) and the residual-corrected quotient */
    const VF e = vm_exp(vf_min(VM_C(20.0f), vf_add(ax, ax))); /* tanh(10) is 1; NaN stays */
    const VF dh = vf_add(e, VM_C(1.0f));
    const VF dl = vf_add(vf_sub(e, dh), VM_C(1.0f));
    const VF q0 = vf_div(VM_C(2.0f), dh);
    const VF q = vf_add(q0, vf_div(vf_fnma(q0, dl, vf_fnma(q0, dh, VM_C(2.0f))), dh));
    const VF big = vf_or(vf_sub(VM_C(1.0f), q), sign);
    const VF r = vf_blend(vf_lt(ax, VM_C(0.625f)), big, small); /* NaN: big is NaN */
    return vf_blend(vf_eq(x, VM_C(0.0f)), r, x);                /* -0 stays -0 */
}

/* ---- sigmoid ---------------------------------------------------------------------------------
 * e = exp(-|x|), sigmoid = num / (1 + e) with num = 1 (x >= 0) or e (x < 0): no overflow, no
 * cancellation.  1 + e is kept exactly as hi + lo and the quotient corrected by its residual, so
 * the error is exp's plus one rounding. */
static inline VF vm_sigmoid(VF x)
{
    const VF signbit = vi_asf(vi_set1((int)0x80000000u));
    const VF e = vm_exp(vf_or(x, signbit));
    const VF num = vf_blend(vf_lt(x, VM_C(0.0f)), VM_C(1.0f), e);
    const VF dh = vf_add(VM_C(1.0f), e);
    const VF dl = vf_add(vf_sub(VM_C(1.0f), dh), e);
    const VF q0 = vf_div(num, dh);
    const VF res = vf_fnma(q0, dl, vf_fnma(q0, dh, num));
    const VF r = vf_add(q0, vf_div(res, dh));
    return vf_blend(vf_isnan(x), r, x);
}

/* erfc(w) / 2 = h exp(-x2h / 2) for w = ax / sqrt 2 (ax = |x| <= 16): returns h = t / 2 exp(Q(s)
 * - x2l / 2), t = 1 / (1 + w/2), Q a polynomial in s = (t - mid) / half, with x^2 = x2h + x2l
 * exactly (FMA), since erfc's relative error is 2 w^2 times that of w^2 (vm_gelu_erfc). */
static inline VF vm_erfc_t(VF ax)
{
    return vf_div(VM_C(1.0f), vf_fma(ax, VM_C(0.35355339059327376f), VM_C(1.0f)));
}

static inline VF vm_erfc_q(VF t, VF x2l)
{
    const VF sv = vf_fma(t, VM_C(2.353553295135498f), VM_C(-1.3535534143447876f));
    VF q = VM_C(-7.298795026144944e-06f);
    q = vf_fma(q, sv, VM_C(-2.5670244212960824e-05f));
    q = vf_fma(q, sv, VM_C(8.96097844815813e-05f));
    q = vf_fma(q, sv, VM_C(0.0001354074920527637f));
    q = vf_fma(q, sv, VM_C(-0.0006529187085106969f));
    q = vf_fma(q, sv, VM_C(-0.00022232615447137505f));
    q = vf_fma(q, sv, VM_C(0.004126444924622774f));
    q = vf_fma(q, sv, VM_C(-0.001528748543933034f));
    q = vf_fma(q, sv, VM_C(-0.03114810585975647f));
    q = vf_fma(q, sv, VM_C(0.018184229731559753f));
    q = vf_fma(q, sv, VM_C(0.5808932185173035f));
    q = vf_fma(q, sv, VM_C(-0.5698438286781311f));
    return vf_fma(x2l, VM_C(-0.5f), q);
}

/* ---- gelu, erf form --------------------------------------------------------------------------
 * Everywhere (vm_gelu_erfc): gelu(x) = x (1 - erfc(w) / 2) for x >= 0 and x erfc(w) / 2 for x < 0, w = |x| / sqrt 2 (no
 * cancellation either way).  erfc(w) = t exp(Q(s)) exp(-w^2), t = 1 / (1 + w/2), Q a polynomial
 * in s = (t - mid) / half; w^2 = x^2 / 2 is taken exactly as hi + lo (FMA), since erfc's relative
 * error is 2 w^2 times that of w^2.  |x| is clamped to 16 (beyond, gelu is x or -0). */
static inline VF vm_gelu_erfc(VF x)
{
    const VF signbit = vi_asf(vi_set1((int)0x80000000u));
    const VF ax = vf_min(vf_andnot(signbit, x), VM_C(16.0f)); /* -ax == x for -16 <= x < 0 */
    const VF x2h = vf_mul(ax, ax);
    const VF x2l = vf_fma(ax, ax, vf_sub(VM_C(0.0f), x2h)); /* ax*ax - x2h exactly */
    /* erfc(w) / 2 = (t / 2) exp(Q - x^2 / 2) = (t / 2) e64 2^-64, one exp of -x2h / 2 + (Q -
     * x2l / 2); for x < 0 the result is taken as (x t / 2) e64 2^-64 with x t / 2 ~ -0.7, so
     * that only the last product can round into the denormals */
    const VF ht = vf_mul(vm_erfc_t(ax), VM_C(0.5f));
    const VF e64 = vm_exp2_k(vf_mul(x2h, VM_C(-0.5f)), vm_erfc_q(vf_add(ht, ht), x2l), 64);
    const VF pos = vf_fnma(x, vf_mul(ht, vf_mul(e64, VM_C(VM_2M64))), x);
    const VF neg = vf_mul(vf_mul(vf_mul(vf_xor(ax, signbit), ht), e64), VM_C(VM_2M64));
    VF r = vf_blend(vf_lt(x, VM_C(0.0f)), pos, neg);
    r = vf_blend(vf_eq(x, VM_C(INFINITY)), r, x);           /* inf * 0 inside */
    r = vf_blend(vf_eq(x, VM_C(-INFINITY)), r, VM_C(-0.0f)); /* the limit, -0 */
    r = vf_blend(vf_eq(x, VM_C(0.0f)), r, x);                /* +-0 keep their sign */
    return vf_blend(vf_isnan(x), r, x);
}

/* Near zero (vm_gelu_poly), -1.25 <= x <= 3: gelu(x) = x Phi(x), Phi(x) = 1/2 + x P(x^2) with
 * P(u) = erf(sqrt(u / 2)) / (2 sqrt u) of degree 10 (|x| <= 3, fit_vmath.py): a fifth of the
 * erfc form's work.  For x < 0, Phi = 1/2 - |x P| cancels: P's relative error is amplified by
 * (1/2 - Phi) / Phi, 3.7 at x = -1.25 (6.5 at -1.5), which bounds the range on that side (error
 * <= 3.3e-7 there, as the erfc form's). */
static inline VF vm_gelu_poly(VF x)
{
    const VF u = vf_mul(x, x);
    VF p = VM_C(4.733898e-13f);
    p = vf_fma(p, u, VM_C(-3.7281615e-11f));
    p = vf_fma(p, u, VM_C(1.4000663e-09f));
    p = vf_fma(p, u, VM_C(-3.4235896e-08f));
    p = vf_fma(p, u, VM_C(6.2753264e-07f));
    p = vf_fma(p, u, VM_C(-9.301873e-06f));
    p = vf_fma(p, u, VM_C(0.00011508752f));
    p = vf_fma(p, u, VM_C(-0.0011868061f));
    p = vf_fma(p, u, VM_C(0.009973118f));
    p = vf_fma(p, u, VM_C(-0.06649021f));
    p = vf_fma(p, u, VM_C(0.39894226f));
    return vf_mul(x, vf_fma(x, p, VM_C(0.5f))); /* +-0 keep their sign */
}

/* gelu (and its derivative) over an array: each element by the polynomial NEAR when |x - MID| <=
 * HALF (gelu: -1.25 <= x <= 3, MID 0.875, HALF 2.125; one compare, NaN fails it), else by the
 * erfc form FAR.  A vector with one or two elements outside sends them to a vector of such
 * elements (positions kept), run through the erfc form when full and at the end; one with more
 * runs the erfc form itself and blends.  The cost follows the number of far elements more than
 * the number of vectors holding one, and the choice is made per element from its value, so
 * every lane count gives the same bits.  y may be x. */
#define VM_GELU_SELECT(NAME, NEAR, FAR, MID, HALF)                                                \
    static void NAME##_far(const float *px, const ptrdiff_t *pi, int np, float *y)                \
    {                                                                                             \
        float g[VLANES];                                                                          \
        vf_storeu(g, FAR(vf_loadn(px, np)));                                                      \
        for (int j = 0; j < np; j++)                                                              \
            y[pi[j]] = g[j];                                                                      \
    }                                                                                             \
    static void NAME(const float *x, float *y, ptrdiff_t n)                                       \
    {                                                                                             \
        const VF signbit = vi_asf(vi_set1((int)0x80000000u));                                     \
        float xv[VLANES], px[VLANES];                                                             \
        ptrdiff_t pi[VLANES];                                                                     \
        int np = 0;                                                                               \
        for (ptrdiff_t i = 0; i < n; i += VLANES) {                                               \
            const ptrdiff_t r = n - i < VLANES ? n - i : VLANES;                                  \
            const VF v = r == VLANES ? vf_loadu(x + i) : vf_loadn(x + i, r);                      \
            const VM near = vf_le(vf_andnot(signbit, vf_sub(v, VM_C(MID))), VM_C(HALF));           \
            unsigned far = ~vm_bits(near) & (unsigned)((1ull << r) - 1u);                         \
            const unsigned f1 = far & (far - 1u); /* far less its lowest bit */                   \
            const int many = (f1 & (f1 - 1u)) != 0;  /* three or more */                          \
            VF g = NEAR(v);                                                                       \
            if (many) /* the whole vector through the erfc form */                                \
                g = vf_blend(near, FAR(v), g);                                                    \
            else if (far)                                                                         \
                vf_storeu(xv, v); /* before y is written: y may be x */                           \
            if (r == VLANES)                                                                      \
                vf_storeu(y + i, g);                                                              \
            else                                                                                  \
                vf_storen(y + i, g, r);                                                           \
            if (many)                                                                             \
                continue;                                                                         \
            for (; far; far &= far - 1u) { /* one or two: gathered */                             \
                const int j = __builtin_ctz(far);                                                 \
                px[np] = xv[j];                                                                   \
                pi[np] = i + j;                                                                   \
                if (++np == VLANES) {                                                             \
                    NAME##_far(px, pi, np, y);                                                    \
                    np = 0;                                                                       \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
        if (np)                                                                                   \
            NAME##_far(px, pi, np, y);                                                            \
    }
#define VM_GELU_ARRAY(NAME) VM_GELU_SELECT(NAME, vm_gelu_poly, vm_gelu_erfc, 0.875f, 2.125f)

/* ---- gelu's derivative, erf form ------------------------------------------------------------
 * gelu'(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi), chosen per element as gelu
 * is (VM_GELU_SELECT, on its own range: the same bits on every lane count and ISA):
 * near zero (vm_gelu_grad_poly, -1.25 <= x <= 2): 1/2 + x D(x^2), D(u) = P(u) + exp(-u / 2) /
 *   sqrt(2 pi) with P vm_gelu_poly's, fitted as one polynomial of degree 8 (fit_vmath.py; max
 *   relative error of D 2.8e-8): no exp at all.  Up to 3, as gelu's range, the alternating terms
 *   of D in float32 cost ~2e-6 (1e-7 below 2);
 * elsewhere (vm_gelu_grad_erfc): one exp, E = exp(-x^2 / 2) with x^2 = hi + lo (FMA); H =
 *   Phi(-|x|) = erfc(w) / 2 = (t / 2) K(s) E, K(s) = erfcx(w) / t = exp(Q(s)) fitted as a
 *   polynomial of degree 11 (4.2e-8) in place of vm_erfc_q's second exp; Phi = 1 - H for x >= 0.
 * Past |x| ~ 13 both terms are below float's normal range; +-inf give NaN (inf * 0), as the
 * scalar loop does. */
static inline VF vm_gelu_grad_poly(VF x)
{
    const VF u = vf_mul(x, x);
    VF d = VM_C(1.6562097471251036e-08f);
    d = vf_fma(d, u, VM_C(-5.189406806493935e-07f));
    d = vf_fma(d, u, VM_C(8.869442353898194e-06f));
    d = vf_fma(d, u, VM_C(-0.00011253817501710728f));
    d = vf_fma(d, u, VM_C(0.0011537307873368263f));
    d = vf_fma(d, u, VM_C(-0.009498732164502144f));
    d = vf_fma(d, u, VM_C(0.05984180048108101f));
    d = vf_fma(d, u, VM_C(-0.26596173644065857f));
    d = vf_fma(d, u, VM_C(0.7978845834732056f));
    return vf_fma(x, d, VM_C(0.5f)); /* NaN never comes here: it fails the range test */
}

static inline VF vm_gelu_grad_erfc(VF x)
{
    const VF signbit = vi_asf(vi_set1((int)0x80000000u));
    const VF ax = vf_min(vf_andnot(signbit, x), VM_C(16.0f));
    const VF x2h = vf_mul(ax, ax);
    const VF x2l = vf_fma(ax, ax, vf_sub(VM_C(0.0f), x2h));
    const VF eh = vm_exp(vf_mul(x2h, VM_C(-0.5f)));          /* exp(-hi / 2) */
    const VF e = vf_fnma(eh, vf_mul(x2l, VM_C(0.5f)), eh); /* exp(-x^2 / 2) */
    const VF t = vm_erfc_t(ax);
    const VF sv = vf_fma(t, VM_C(2.353553295135498f), VM_C(-1.3535534143447876f));
    VF k = VM_C(2.787437551887706e-07f);
    k = vf_fma(k, sv, VM_C(9.141226655628998e-06f));
    k = vf_fma(k, sv, VM_C(5.586489351117052e-06f));
    k = vf_fma(k, sv, VM_C(-8.584666647948325e-05f));
    k = vf_fma(k, sv, VM_C(1.8971270037582144e-05f));
    k = vf_fma(k, sv, VM_C(0.0006758836680091918f));
    k = vf_fma(k, sv, VM_C(-0.0007619009120389819f));
    k = vf_fma(k, sv, VM_C(-0.006587625481188297f));
    k = vf_fma(k, sv, VM_C(0.006835532374680042f));
    k = vf_fma(k, sv, VM_C(0.1057150810956955f));
    k = vf_fma(k, sv, VM_C(0.3285611569881439f));
    k = vf_fma(k, sv, VM_C(0.5656137466430664f));
    const VF big_h = vf_mul(vf_mul(vf_mul(t, VM_C(0.5f)), k), e); /* Phi(-|x|) */
    const VF cdf = vf_blend(vf_lt(x, VM_C(0.0f)), vf_sub(VM_C(1.0f), big_h), big_h);
    const VF r = vf_fma(vf_mul(x, e), VM_C(0.3989422804014327f), cdf);
    return vf_blend(vf_isnan(x), r, x);
}

/* out[i] = g[i] * gelu'(s[i]): the derivative of blocks of 256 elements into a stack buffer (the
 * select array above: the polynomial near zero, the one-exp erfc form elsewhere, far elements
 * gathered), then times g; y may be g or s. */
#define VM_GELU_BACKWARD_ARRAY(NAME)                                                              \
    VM_GELU_SELECT(NAME##_d, vm_gelu_grad_poly, vm_gelu_grad_erfc, 0.375f, 1.625f)                \
    static void NAME(const float *g, const float *s, float *y, ptrdiff_t n)                       \
    {                                                                                             \
        float d[256];                                                                             \
        for (ptrdiff_t i = 0; i < n; i += 256) {                                                  \
            const ptrdiff_t r = n - i < 256 ? n - i : 256;                                        \
            NAME##_d(s + i, d, r);                                                                \
            for (ptrdiff_t j = 0; j < r; j++)                                                     \
                y[i + j] = g[i + j] * d[j];                                                       \
        }                                                                                         \
    }

/* ---- gelu, tanh form -------------------------------------------------------------------------
 * 0.5 x (1 + tanh u) = x sigmoid(2u), 2u = 2 sqrt(2/pi) (x + 0.044715 x^3).  sigmoid(v) has
 * relative sensitivity |v| to the error of v (|v| reaches ~90 before the result underflows), so v
 * is computed in double and split into float hi + lo: exp(-|v|) = exp(-|hi|) (1 -+ lo). */
static inline VD vm_gelu_tanh_v(VD xd)
{
    const VD inner = vd_fma(vd_mul(vd_mul(xd, xd), xd), vd_set1(0.044715), xd);
    return vd_mul(inner, vd_set1(1.5957691216057307)); /* 2 sqrt(2 / pi) */
}

static inline VF vm_gelu_tanh(VF x)
{
    /* past |x| = 20 the sigmoid is 0 or 1 in float; clamping keeps v finite (NaN stays NaN) */
    const VF xc = vf_max(VM_C(-20.0f), vf_min(VM_C(20.0f), x));
    const VD vlo = vm_gelu_tanh_v(vd_lo(xc)), vhi = vm_gelu_tanh_v(vd_hi(xc));
    const VF vh = vd_tof2(vlo, vhi);
    const VF vl = vd_tof2(vd_sub(vlo, vd_lo(vh)), vd_sub(vhi, vd_hi(vh)));
    const VF signbit = vi_asf(vi_set1((int)0x80000000u));
    /* e = exp(-|v|) = exp(-|vh|) (1 - sign(vh) vl), kept scaled by 2^64: for v < 0 the result
     * x e / (1 + e) is formed as (x e 2^64 / (1 + e)) 2^-64 (one rounding into the denormals) */
    const VF svl = vf_xor(vl, vf_and(vh, signbit));
    VF e64 = vm_exp_k(vf_or(vh, signbit), 64);
    e64 = vf_fnma(e64, svl, e64);
    const VF d = vf_fma(e64, VM_C(VM_2M64), VM_C(1.0f));
    const VF rneg = vf_mul(vf_div(vf_mul(x, e64), d), VM_C(VM_2M64));
    VF r = vf_blend(vf_lt(vh, VM_C(0.0f)), vf_div(x, d), rneg);
    r = vf_blend(vf_eq(x, VM_C(-INFINITY)), r, VM_C(-0.0f)); /* -inf * 0 */
    return vf_blend(vf_isnan(x), r, x);
}

/* ---- array loops ------------------------------------------------------------------------- */

#define VM_ARRAY(NAME, FN)                                                                        \
    static void NAME(const float *x, float *y, ptrdiff_t n)                                       \
    {                                                                                             \
        ptrdiff_t i = 0;                                                                          \
        for (; i + 2 * VLANES <= n; i += 2 * VLANES) {                                            \
            const VF a = vf_loadu(x + i), b = vf_loadu(x + i + VLANES);                          \
            vf_storeu(y + i, FN(a));                                                              \
            vf_storeu(y + i + VLANES, FN(b));                                                     \
        }                                                                                         \
        for (; i < n; i += VLANES) {                                                              \
            const ptrdiff_t r = n - i < VLANES ? n - i : VLANES;                                 \
            vf_storen(y + i, FN(vf_loadn(x + i, r)), r);                                          \
        }                                                                                         \
    }

/* isa.h's vexp_shift_sum_f32: y[j] = exp(x[j] - m) (y may be x, or NULL: only the sum) and the
 * sum, in one pass with the exps in registers (softmax's exp pass and sum pass fused: one read
 * of the row instead of three reads and two writes).
 * The sum must be good to ~1e-6 *of sum - 1*: log-softmax's outputs near the max are -log(sum),
 * as small as 1e-4 when the max dominates.  A float accumulator would round every small term
 * added to the lane that holds exp(0) = 1 by up to 6e-8 (and widening every exp to double costs
 * ~40% of the pass on AVX2).  So the elements equal to m (exactly the exps that are 1) are only
 * counted, and the others, all < 1, summed in one float vector per chunk of GC_SM_CHUNK elements,
 * whose lanes are then widened into double accumulators: the float sum's error is relative to
 * the sum of the terms < 1 themselves.  The tail (only in the last chunk: 2 * VLANES divides
 * GC_SM_CHUNK) goes through the masked load / store, its live lanes added one by one in double
 * (the others hold exp(0 - m), not 0).  The order of every addition depends on n only. */
#define VM_EXP_SHIFT_SUM(NAME)                                                                    \
    static double NAME(const float *x, float *y, ptrdiff_t n, float m)                            \
    {                                                                                             \
        const VF vm = vf_set1(m), zero = vf_set1(0.0f), one = vf_set1(1.0f);                      \
        VD sd = vd_set1(0.0), sc = vd_set1(0.0);                                                  \
        double tail = 0.0;                                                                        \
        for (ptrdiff_t j0 = 0; j0 < n; j0 += GC_SM_CHUNK) {                                       \
            const ptrdiff_t w = n - j0 < GC_SM_CHUNK ? n - j0 : GC_SM_CHUNK;                     \
            const float *xc = x + j0;                                                             \
            float *yc = y ? y + j0 : NULL;                                                        \
            VF acc = zero, cnt = zero;                                                            \
            ptrdiff_t j = 0;                                                                      \
            for (; j + 2 * VLANES <= w; j += 2 * VLANES) {                                        \
                const VF x0 = vf_loadu(xc + j), x1 = vf_loadu(xc + j + VLANES);                  \
                const VF e0 = vm_exp(vf_sub(x0, vm)), e1 = vm_exp(vf_sub(x1, vm));               \
                if (yc) {                                                                         \
                    vf_storeu(yc + j, e0);                                                        \
                    vf_storeu(yc + j + VLANES, e1);                                               \
                }                                                                                 \
                const VM t0 = vf_eq(x0, vm), t1 = vf_eq(x1, vm);                                  \
                acc = vf_add(acc, vf_add(vf_blend(t0, e0, zero), vf_blend(t1, e1, zero)));        \
                cnt = vf_add(cnt, vf_add(vf_blend(t0, zero, one), vf_blend(t1, zero, one)));      \
            }                                                                                     \
            sd = vd_add(sd, vd_add(vd_lo(acc), vd_hi(acc)));                                      \
            sc = vd_add(sc, vd_add(vd_lo(cnt), vd_hi(cnt)));                                      \
            for (; j < w; j += VLANES) {                                                          \
                const ptrdiff_t r = w - j < VLANES ? w - j : VLANES;                             \
                const VF e = vm_exp(vf_sub(vf_loadn(xc + j, r), vm));                            \
                if (yc)                                                                           \
                    vf_storen(yc + j, e, r);                                                      \
                float t[VLANES];                                                                  \
                vf_storeu(t, e);                                                                  \
                for (ptrdiff_t l = 0; l < r; l++)                                                 \
                    tail += (double)t[l];                                                         \
            }                                                                                     \
        }                                                                                         \
        double d[VLANES / 2], c[VLANES / 2];                                                      \
        vd_storeu(d, sd);                                                                         \
        vd_storeu(c, sc);                                                                         \
        double s = 0.0, k = 0.0;                                                                  \
        for (int l = 0; l < VLANES / 2; l++) {                                                    \
            s += d[l];                                                                            \
            k += c[l];                                                                            \
        }                                                                                         \
        return (k + s) + tail;                                                                    \
    }

/* isa.h's vmax_f32: 4 vector maxima (the max latency hides behind the loads); vf_max(v, acc)
 * keeps acc when v is NaN, so NaN is skipped as the contract says. */
#define VM_MAX(NAME)                                                                              \
    static float NAME(const float *x, ptrdiff_t n)                                                \
    {                                                                                             \
        const VF ninf = vf_set1(-INFINITY);                                                       \
        VF m0 = ninf, m1 = ninf, m2 = ninf, m3 = ninf;                                            \
        ptrdiff_t j = 0;                                                                          \
        for (; j + 4 * VLANES <= n; j += 4 * VLANES) {                                            \
            m0 = vf_max(vf_loadu(x + j), m0);                                                     \
            m1 = vf_max(vf_loadu(x + j + VLANES), m1);                                            \
            m2 = vf_max(vf_loadu(x + j + 2 * VLANES), m2);                                        \
            m3 = vf_max(vf_loadu(x + j + 3 * VLANES), m3);                                        \
        }                                                                                         \
        for (; j + VLANES <= n; j += VLANES)                                                      \
            m0 = vf_max(vf_loadu(x + j), m0);                                                     \
        float t[VLANES];                                                                          \
        vf_storeu(t, vf_max(vf_max(m0, m1), vf_max(m2, m3)));                                     \
        float r = -INFINITY;                                                                      \
        for (int l = 0; l < VLANES; l++)                                                          \
            r = t[l] > r ? t[l] : r;                                                              \
        for (; j < n; j++)                                                                        \
            r = x[j] > r ? x[j] : r;                                                              \
        return r;                                                                                 \
    }

/* isa.h's vsub2_mul_f32: y = ((x - a) - b) * c, the same operations in every lane and tail. */
#define VM_SUB2_MUL(NAME)                                                                         \
    static void NAME(const float *x, float *y, ptrdiff_t n, float a, float b, float c)            \
    {                                                                                             \
        const VF va = vf_set1(a), vb = vf_set1(b), vc = vf_set1(c);                               \
        ptrdiff_t i = 0;                                                                          \
        for (; i + 2 * VLANES <= n; i += 2 * VLANES) {                                            \
            const VF u = vf_loadu(x + i), v = vf_loadu(x + i + VLANES);                          \
            vf_storeu(y + i, vf_mul(vf_sub(vf_sub(u, va), vb), vc));                              \
            vf_storeu(y + i + VLANES, vf_mul(vf_sub(vf_sub(v, va), vb), vc));                     \
        }                                                                                         \
        for (; i < n; i += VLANES) {                                                              \
            const ptrdiff_t r = n - i < VLANES ? n - i : VLANES;                                 \
            vf_storen(y + i, vf_mul(vf_sub(vf_sub(vf_loadn(x + i, r), va), vb), vc), r);          \
        }                                                                                         \
    }

/* isa.h's vsoftmax4_f32: softmax (log-softmax when log_softmax) of 4 consecutive rows of n (row r
 * at x + r n, into y + r n; y may equal x), each row with the bits softmax.c gives it alone:
 * VM_MAX's max, VM_EXP_SHIFT_SUM's sum, and VM_SUB2_MUL's last pass with softmax.c's constants.
 * A short row (attention's 64 keys) is a chain of dependent steps (the max's reduction, the exp
 * polynomial, the sums' reductions) that left the core mostly idle one row at a time; here 4 rows
 * run side by side in each loop body, every row doing the same operations in the same order. */
#define VM_SOFTMAX4(NAME)                                                                         \
    static void NAME(const float *x, float *y, ptrdiff_t n, int log_softmax)                      \
    {                                                                                             \
        const VF ninf = vf_set1(-INFINITY), zero = vf_set1(0.0f), one = vf_set1(1.0f);           \
        float *ye = log_softmax ? NULL : y; /* the exps: stored by softmax only */                \
        float m[4];                                                                               \
        double s[4];                                                                              \
        VF mm[4][4];                                                                              \
        _Pragma("GCC unroll 4")                                                                   \
        for (int r = 0; r < 4; r++)                                                               \
            mm[r][0] = mm[r][1] = mm[r][2] = mm[r][3] = ninf;                                     \
        ptrdiff_t j = 0;                                                                          \
        for (; j + 4 * VLANES <= n; j += 4 * VLANES)                                              \
            _Pragma("GCC unroll 4")                                                               \
            for (int r = 0; r < 4; r++)                                                           \
                for (int u = 0; u < 4; u++)                                                       \
                    mm[r][u] = vf_max(vf_loadu(x + r * n + j + u * VLANES), mm[r][u]);           \
        for (; j + VLANES <= n; j += VLANES)                                                      \
            _Pragma("GCC unroll 4")                                                               \
            for (int r = 0; r < 4; r++)                                                           \
                mm[r][0] = vf_max(vf_loadu(x + r * n + j), mm[r][0]);                            \
        _Pragma("GCC unroll 4")                                                                   \
        for (int r = 0; r < 4; r++) {                                                             \
            float t[VLANES];                                                                      \
            vf_storeu(t, vf_max(vf_max(mm[r][0], mm[r][1]), vf_max(mm[r][2], mm[r][3])));         \
            float v = -INFINITY;                                                                  \
            for (int l = 0; l < VLANES; l++)                                                      \
                v = t[l] > v ? t[l] : v;                                                          \
            for (ptrdiff_t i = j; i < n; i++)                                                     \
                v = x[r * n + i] > v ? x[r * n + i] : v;                                          \
            m[r] = v;                                                                             \
        }                                                                                         \
        VF vm[4];                                                                                 \
        VD sd[4], sc[4];                                                                          \
        double tail[4];                                                                           \
        _Pragma("GCC unroll 4")                                                                   \
        for (int r = 0; r < 4; r++) {                                                             \
            vm[r] = vf_set1(m[r]);                                                                \
            sd[r] = sc[r] = vd_set1(0.0);                                                         \
            tail[r] = 0.0;                                                                        \
        }                                                                                         \
        for (ptrdiff_t j0 = 0; j0 < n; j0 += GC_SM_CHUNK) {                                       \
            const ptrdiff_t w = n - j0 < GC_SM_CHUNK ? n - j0 : GC_SM_CHUNK;                     \
            VF acc[4], cnt[4];                                                                    \
            _Pragma("GCC unroll 4")                                                               \
            for (int r = 0; r < 4; r++)                                                           \
                acc[r] = cnt[r] = zero;                                                           \
            ptrdiff_t i = 0;                                                                      \
            for (; i + 2 * VLANES <= w; i += 2 * VLANES)                                          \
                _Pragma("GCC unroll 4")                                                           \
                for (int r = 0; r < 4; r++) {                                                     \
                    const float *xc = x + r * n + j0 + i;                                         \
                    const VF x0 = vf_loadu(xc), x1 = vf_loadu(xc + VLANES);                      \
                    const VF e0 = vm_exp(vf_sub(x0, vm[r])), e1 = vm_exp(vf_sub(x1, vm[r]));     \
                    if (ye) {                                                                     \
                        vf_storeu(ye + r * n + j0 + i, e0);                                       \
                        vf_storeu(ye + r * n + j0 + i + VLANES, e1);                              \
                    }                                                                             \
                    const VM t0 = vf_eq(x0, vm[r]), t1 = vf_eq(x1, vm[r]);                        \
                    const VF a0 = vf_blend(t0, e0, zero), a1 = vf_blend(t1, e1, zero);           \
                    const VF c0 = vf_blend(t0, zero, one), c1 = vf_blend(t1, zero, one);         \
                    acc[r] = vf_add(acc[r], vf_add(a0, a1));                                      \
                    cnt[r] = vf_add(cnt[r], vf_add(c0, c1));                                      \
                }                                                                                 \
            _Pragma("GCC unroll 4")                                                               \
            for (int r = 0; r < 4; r++) {                                                         \
                sd[r] = vd_add(sd[r], vd_add(vd_lo(acc[r]), vd_hi(acc[r])));                      \
                sc[r] = vd_add(sc[r], vd_add(vd_lo(cnt[r]), vd_hi(cnt[r])));                      \
            }                                                                                     \
            for (; i < w; i += VLANES) {                                                          \
                const ptrdiff_t k = w - i < VLANES ? w - i : VLANES;                             \
                _Pragma("GCC unroll 4")                                                           \
                for (int r = 0; r < 4; r++) {                                                     \
                    const VF e = vm_exp(vf_sub(vf_loadn(x + r * n + j0 + i, k), vm[r]));         \
                    if (ye)                                                                       \
                        vf_storen(ye + r * n + j0 + i, e, k);                                     \
                    float t[VLANES];                                                              \
                    vf_storeu(t, e);                                                              \
                    for (ptrdiff_t l = 0; l < k; l++)                                             \
                        tail[r] += (double)t[l];                                                  \
                }                                                                                 \
            }                                                                                     \
        }                                                                                         \
        VF va[4], vb[4], vc[4];                                                                   \
        _Pragma("GCC unroll 4")                                                                   \
        for (int r = 0; r < 4; r++) {                                                             \
            double d[VLANES / 2], c[VLANES / 2];                                                  \
            vd_storeu(d, sd[r]);                                                                  \
            vd_storeu(c, sc[r]);                                                                  \
            double a = 0.0, b = 0.0;                                                              \
            for (int l = 0; l < VLANES / 2; l++) {                                                \
                a += d[l];                                                                        \
                b += c[l];                                                                        \
            }                                                                                     \
            s[r] = (b + a) + tail[r];                                                             \
            /* softmax.c: NaN for a row whose max is +inf; the constants of its last pass */      \
            const double sr = m[r] == INFINITY ? (double)NAN : s[r];                              \
            va[r] = vf_set1(log_softmax ? m[r] : 0.0f);                                           \
            vb[r] = vf_set1(log_softmax ? (float)log(sr) : 0.0f);                                 \
            vc[r] = vf_set1(log_softmax ? 1.0f : (float)(1.0 / sr));                              \
        }                                                                                         \
        const float *src = log_softmax ? x : y; /* log-softmax shifts x, softmax scales exps */  \
        ptrdiff_t i = 0;                                                                          \
        for (; i + VLANES <= n; i += VLANES)                                                      \
            _Pragma("GCC unroll 4")                                                               \
            for (int r = 0; r < 4; r++) {                                                         \
                const VF u = vf_loadu(src + r * n + i);                                           \
                vf_storeu(y + r * n + i, vf_mul(vf_sub(vf_sub(u, va[r]), vb[r]), vc[r]));        \
            }                                                                                     \
        if (i < n)                                                                                \
            _Pragma("GCC unroll 4")                                                               \
            for (int r = 0; r < 4; r++) {                                                         \
                const VF u = vf_loadn(src + r * n + i, n - i);                                    \
                vf_storen(y + r * n + i, vf_mul(vf_sub(vf_sub(u, va[r]), vb[r]), vc[r]), n - i); \
            }                                                                                     \
    }

"""Kernels of gpucore/ops/bessel.py: the Bessel functions of order 0 and 1 (J, Y, K, their
exponentially scaled forms), the spherical j0 and the Airy function Ai, by numpy in float64; I0,
I1 and their scaled forms in C (cpu/special.c, in double: the power series up to 30, the
large-argument expansion beyond).

Each function is split by the size of its argument into the method that is accurate there:
power series for small arguments (every term the same sign, or few terms); in the middle,
Miller's backward recurrence for J0/J1 (and Neumann's series for Y0/Y1), quadrature of the
integral representations for the fractional orders of Airy's function (Gauss-Legendre) and for
K (the trapezoidal rule, which converges geometrically on its doubly-exponentially decaying
integrand); Hankel's asymptotic expansions beyond 25-30, where the expansion's smallest term is
far below double rounding. Work is done in chunks so the quadrature's (nodes x elements)
arrays stay small.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .common import kernel, special_kernel

_EULER = 0.57721566490156328606
_CHUNK = 16384  # GL quadrature: 96 x _CHUNK float64 temporaries (12 MiB)
_MID = 25.0  # from here on the Hankel expansions (J, Y)


def _chunked(fn, x: np.ndarray) -> np.ndarray:
    """fn over float64 x in chunks (fn takes and returns 1-D arrays)."""
    flat = np.asarray(x, np.float64).reshape(-1)
    out = np.empty_like(flat)
    for s in range(0, flat.size, _CHUNK):
        out[s : s + _CHUNK] = fn(flat[s : s + _CHUNK])
    return out.reshape(np.shape(x))


@functools.cache
def _gauss_legendre() -> tuple:
    """96 Gauss-Legendre nodes and weights on [-1, 1] (made on first use: numpy.polynomial is
    slow to import)."""
    from numpy.polynomial.legendre import leggauss  # noqa: PLC0415

    return leggauss(96)


def _gl(f, a, b) -> np.ndarray:
    """Integral of f from a to b (per element) by 96-point Gauss-Legendre."""
    nodes, weights = _gauss_legendre()
    half = (b - a) / 2
    t = (b + a)[None, :] / 2 + half[None, :] * nodes[:, None]
    return half * (weights[:, None] * f(t)).sum(0)


# ----------------------------------------------------------------------------- J and Y
def _j_series(nu: float, x: np.ndarray) -> np.ndarray:
    """J_nu(x) = sum (-1)^k (x/2)^(2k+nu) / (k! Gamma(k+nu+1)) for 0 < x < 2 (30 terms)."""
    term = (x / 2) ** nu / math.gamma(nu + 1)
    s = term.copy()
    q = -(x * x) / 4
    for k in range(1, 30):
        term = term * q / (k * (k + nu))
        s += term
    return s


def _y_series(n: int, x: np.ndarray) -> np.ndarray:
    """Y_0, Y_1 for 0 < x < 2 by their series (Abramowitz & Stegun 9.1.11)."""
    q = x * x / 4
    lg = np.log(x / 2)
    if n == 0:
        s = np.zeros_like(x)
        term = np.ones_like(x)
        h = 0.0
        for k in range(1, 30):
            h += 1.0 / k
            term = term * (-q) / (k * k)
            s -= h * term  # (-1)^(k+1) H_k q^k / (k!)^2
        return (2 / math.pi) * ((lg + _EULER) * _j_series(0, x) + s)
    s = np.zeros_like(x)
    term = np.ones_like(x)
    h = 0.0  # psi(k+1) + psi(k+2) = -2 gamma + H_k + H_(k+1)
    for k in range(30):
        if k:
            term = term * (-q) / (k * (k + 1))
        s += (-2 * _EULER + 2 * h + 1.0 / (k + 1)) * term
        h += 1.0 / (k + 1)
    return -2 / (math.pi * x) + (2 / math.pi) * lg * _j_series(1, x) - x / (2 * math.pi) * s


def _jy_quad(nu: float, x: np.ndarray, want_y: bool) -> np.ndarray:
    """J_nu or Y_nu for 2 <= x < 25 from Schlaefli's integrals (DLMF 10.9.6, 10.9.7)."""
    zero = np.zeros_like(x)
    if want_y:
        first = _gl(lambda t: np.sin(x * np.sin(t) - nu * t), zero, zero + math.pi)
    else:
        first = _gl(lambda t: np.cos(nu * t - x * np.sin(t)), zero, zero + math.pi)
    end = np.arcsinh(50.0 / x)  # exp(-x sinh t) < e^-50 beyond
    if want_y:
        c = math.cos(nu * math.pi)
        tail = _gl(
            lambda t: (np.exp(nu * t) + c * np.exp(-nu * t)) * np.exp(-x * np.sinh(t)), zero, end
        )
        return (first - tail) / math.pi
    s = math.sin(nu * math.pi)
    if s == 0.0:
        return first / math.pi
    tail = _gl(lambda t: np.exp(-x * np.sinh(t) - nu * t), zero, end)
    return (first - s * tail) / math.pi


def _jy01_miller(x: np.ndarray) -> tuple:
    """J0, J1, Y0, Y1 for 2 <= x < 25 by Miller's backward recurrence from J_70 (below double
    rounding there), normalised by 1 = J0 + 2 sum J_2k; Y0 and Y1 by Neumann's series over the
    same J_k (DLMF 10.23.15; Y1's is Y0's derivative): no cancellation beyond the logarithm's,
    ~2e-14 of the envelope, and 15x faster than the quadrature."""
    jp1 = np.zeros_like(x)
    j = np.full_like(x, 1e-30)
    norm = np.zeros_like(x)  # sum_k J_2k
    y0s = np.zeros_like(x)  # sum_k (-1)^k J_2k / k
    y1s = np.zeros_like(x)  # sum_k (-1)^k (J_2k-1 - J_2k+1) / k
    for k in range(70, 0, -1):  # j = J_k, jp1 = J_k+1 (unnormalised)
        jm1 = (2 * k / x) * j - jp1
        if k % 2 == 0:
            sgn = 1.0 if (k // 2) % 2 == 0 else -1.0
            norm += j
            y0s += sgn * j / (k // 2)
            y1s += sgn * (jm1 - jp1) / (k // 2)
        jp1, j = j, jm1
    scale = 1.0 / (j + 2 * norm)
    j0, j1 = j * scale, jp1 * scale
    lg = np.log(x / 2) + _EULER
    y0 = (2 / math.pi) * (lg * j0 - 2 * y0s * scale)
    y1 = (2 / math.pi) * (-j0 / x + lg * j1 + y1s * scale)
    return j0, j1, y0, y1


def _hankel_pq(nu: float, x: np.ndarray):
    """Hankel's P and Q (DLMF 10.17.3) for x >= 25 (30 terms, each k/50 of the one before)."""
    mu = 4 * nu * nu
    term = np.ones_like(x)
    p = term.copy()
    q = np.zeros_like(x)
    for k in range(1, 31):
        term = term * (mu - (2 * k - 1) ** 2) / (8 * k * x)
        sign = 1.0 if (k // 2) % 2 == 0 else -1.0
        if k % 2:
            q += sign * term
        else:
            p += sign * term
    return p, q


def _jy_hankel(nu: float, x: np.ndarray, want_y: bool) -> np.ndarray:
    """sqrt(2/(pi x)) (P cos chi - Q sin chi) (J) or (P sin chi + Q cos chi) (Y), chi = x -
    (nu/2 + 1/4) pi, with cos/sin of x taken exactly by libm and the phase shift applied after."""
    p, q = _hankel_pq(nu, x)
    w = (nu / 2 + 0.25) * math.pi
    cx, sx = np.cos(x), np.sin(x)
    cchi = cx * math.cos(w) + sx * math.sin(w)
    schi = sx * math.cos(w) - cx * math.sin(w)
    amp = np.sqrt(2 / (math.pi * x))
    return amp * ((p * schi + q * cchi) if want_y else (p * cchi - q * schi))


def _jy_pos(nu: float, x: np.ndarray, want_y: bool) -> np.ndarray:
    """J_nu(x) or Y_nu(x) for finite x > 0."""
    out = np.empty_like(x)
    small = x < 2.0
    big = x >= _MID
    mid = ~(small | big)
    if small.any():
        xs = x[small]
        out[small] = _y_series(int(nu), xs) if want_y else _j_series(nu, xs)
    if mid.any() and nu in (0.0, 1.0):
        out[mid] = _jy01_miller(x[mid])[int(nu) + 2 * want_y]
    elif mid.any():
        out[mid] = _jy_quad(nu, x[mid], want_y)
    if big.any():
        out[big] = _jy_hankel(nu, x[big], want_y)
    return out


def _bessel_j(n: int):
    def f(x):
        a = np.abs(x)
        out = np.full_like(x, np.nan)  # NaN at +-inf, as PyTorch (Cephes' cos(inf))
        fin = np.isfinite(a) & (a > 0)
        out[fin] = _jy_pos(float(n), a[fin], False)
        out[a == 0] = 1.0 if n == 0 else 0.0
        if n == 1:
            out = np.where(x < 0, -out, out)
        out[np.isnan(x)] = np.nan
        return out

    return f


def _bessel_y(n: int):
    def f(x):
        out = np.full_like(x, np.nan)  # NaN at inf, as PyTorch
        pos = np.isfinite(x) & (x > 0)
        out[pos] = _jy_pos(float(n), x[pos], True)
        out[x == 0] = -np.inf
        out[(x < 0) | np.isnan(x)] = np.nan
        return out

    return f


# ----------------------------------------------------------------------------- I and K
def _i_series(n: int, x: np.ndarray) -> np.ndarray:
    """I_n(x) = sum (x/2)^(2k+n) / (k! (k+n)!) (positive terms: no cancellation), for K's
    series; i0/i1 themselves are cpu/special.c's."""
    term = (x / 2) ** n
    s = term.copy()
    q = x * x / 4
    for k in range(1, 90):
        term = term * q / (k * (k + n))
        s += term
        if k % 8 == 0 and not (term > 1e-17 * s).any():  # every remaining term is smaller
            break
    return s


def _k_series(n: int, x: np.ndarray) -> np.ndarray:
    """K_0, K_1 for 0 < x <= 0.1 (Abramowitz & Stegun 9.6.13, 9.6.11)."""
    q = x * x / 4
    lg = np.log(x / 2)
    term = np.ones_like(x)
    s = np.zeros_like(x)
    h = 0.0
    if n == 0:
        for k in range(1, 30):
            h += 1.0 / k
            term = term * q / (k * k)
            s += h * term
        return -(lg + _EULER) * _i_series(0, x) + s
    for k in range(30):
        if k:
            term = term * q / (k * (k + 1))
        s += (-2 * _EULER + 2 * h + 1.0 / (k + 1)) * term
        h += 1.0 / (k + 1)
    return 1 / x + lg * _i_series(1, x) - x / 4 * s


def k_scaled_trapezoid(nu: float, x: np.ndarray) -> np.ndarray:
    """exp(x) K_nu(x) = int_0^inf exp(-2 x sinh(t/2)^2) cosh(nu t) dt for x >= 0.1 by the
    trapezoidal rule (geometric convergence for this analytic, fast-decaying integrand); the step
    shrinks as 1/sqrt(x), the width of the integrand's peak, and the nodes end where the
    integrand is below e^-60 of its peak (22 to 48 nodes)."""
    if not x.size:
        return x.copy()
    h = np.minimum(0.15, 0.5 / np.sqrt(x))
    ends = 2 * np.arcsinh(np.sqrt(30.0 / x))  # 2 x sinh(t/2)^2 = 60 there
    count = int(np.ceil((ends / h).max())) + 1
    # node j: e^(t/2) = (1 + a1)^j kept as a = e^(t/2) - 1 (a recurrence of positive terms,
    # so sinh(t/2) = (a + a / (1 + a)) / 2 has no cancellation even where t is tiny)
    a1 = np.expm1(h / 2)
    a = np.zeros_like(x)
    grow = np.ones_like(x)  # e^(nu t), for the fractional orders
    step = np.exp(nu * h)
    total = np.full_like(x, 0.5)  # node 0: exp(0) cosh(0), half weight
    for _ in range(1, count):
        a = a + a1 * (1 + a)
        s2 = ((a + a / (1 + a)) / 2) ** 2
        f = np.exp(np.maximum(-2 * x * s2, -700.0))  # no denormals: they are slow
        if nu == 1.0:
            f *= 1 + 2 * s2  # cosh t
        elif nu != 0.0:
            grow = grow * step
            f *= (grow + 1 / grow) / 2
        total += f
    return h * total


def _k_scaled_pos(n: int, x: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    small = x <= 0.1  # the series cancels more as x grows (6e-13 at 2); the integral does not
    xs = x[small]
    out[small] = _k_series(n, xs) * np.exp(xs)
    out[~small] = k_scaled_trapezoid(float(n), x[~small])
    return out


def _modified_k(n: int, scaled: bool):
    def f(x):
        out = np.empty_like(x)
        pos = np.isfinite(x) & (x > 0)
        v = _k_scaled_pos(n, x[pos])
        out[pos] = v if scaled else v * np.exp(-x[pos])
        out[x == 0] = np.inf
        out[x == np.inf] = 0.0
        out[(x < 0) | np.isnan(x)] = np.nan
        return out

    return f


# ----------------------------------------------------------------------------- j0 and Ai
def _spherical_j0(x):
    out = np.zeros_like(x)  # sin(x)/x -> 0 at +-inf
    fin = np.isfinite(x)
    xf = x[fin]
    with np.errstate(all="ignore"):
        direct = np.sin(xf) / xf
    z = xf * xf  # Taylor series below 0.5 (sin(x)/x loses bits to cancellation there)
    series = 1 - z / 6 * (1 - z / 20 * (1 - z / 42 * (1 - z / 72 * (1 - z / 110 * (1 - z / 156)))))
    out[fin] = np.where(np.abs(xf) < 0.5, series, direct)
    out[np.isnan(x)] = np.nan
    return out


_AI0 = 0.355028053887817239260  # Ai(0)
_AIP0 = 0.258819403792806798405  # -Ai'(0)


def _airy_maclaurin(x: np.ndarray) -> np.ndarray:
    """Ai(x) = Ai(0) f(x) + Ai'(0) g(x) by their Maclaurin series (|x| <= 2: 40 terms)."""
    x3 = x * x * x
    f = np.ones_like(x)
    g = x.copy()
    tf, tg = f.copy(), g.copy()
    for k in range(1, 40):
        tf = tf * x3 / ((3 * k - 1) * (3 * k))
        tg = tg * x3 / ((3 * k) * (3 * k + 1))
        f += tf
        g += tg
    return _AI0 * f - _AIP0 * g


def _airy_ai(x):
    out = np.full_like(x, np.nan)  # NaN at +-inf, as PyTorch
    near = np.abs(x) <= 1.0
    out[near] = _airy_maclaurin(x[near])
    right = np.isfinite(x) & (x > 1.0)
    if right.any():  # Ai(x) = sqrt(x / 3) / pi K_1/3(zeta), zeta = 2/3 x^1.5 (DLMF 9.6.1)
        xr = np.minimum(x[right], 200.0)  # Ai(200) underflows: 0 beyond, as PyTorch
        zeta = 2.0 / 3.0 * xr * np.sqrt(xr)
        with np.errstate(under="ignore"):
            out[right] = np.sqrt(xr / 3) / math.pi * k_scaled_trapezoid(1 / 3, zeta) * np.exp(-zeta)
    left = np.isfinite(x) & (x < -1.0)
    if left.any():  # Ai(-z) = sqrt(z) / 3 (J_1/3(zeta) + J_-1/3(zeta)) (DLMF 9.6.6)
        z = -x[left]
        zeta = 2.0 / 3.0 * z * np.sqrt(z)
        js = _jy_pos(1 / 3, zeta, False) + _jy_pos(-1 / 3, zeta, False)
        out[left] = np.sqrt(z) / 3 * js
    out[np.isnan(x)] = np.nan
    return out


_FUNCTIONS = {
    "bessel_j0": _bessel_j(0),
    "bessel_j1": _bessel_j(1),
    "bessel_y0": _bessel_y(0),
    "bessel_y1": _bessel_y(1),
    "modified_bessel_k0": _modified_k(0, False),
    "modified_bessel_k1": _modified_k(1, False),
    "scaled_modified_bessel_k0": _modified_k(0, True),
    "scaled_modified_bessel_k1": _modified_k(1, True),
    "spherical_bessel_j0": _spherical_j0,
    "airy_ai": _airy_ai,
}


def _run(fn):
    def run(out, x):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            np.copyto(out, _chunked(fn, x), casting="unsafe")

    return run


for _name, _fn in _FUNCTIONS.items():
    kernel(_name)(_run(_fn))
for _name in ("i0", "i0e", "i1", "i1e"):  # in C (cpu/special.c), in double
    kernel(_name)(special_kernel(_name))

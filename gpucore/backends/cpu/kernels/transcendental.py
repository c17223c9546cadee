"""Kernels of gpucore/ops/transcendental.py: by numpy in float64 the Hurwitz zeta function
(Euler-Maclaurin summation, as Cephes) and the regularized incomplete gamma functions igamma /
igammac (series for x < a + 1, Lentz's continued fraction beyond); in C (cpu/special.c, in
double, through ``special_kernel``) the scaled complementary error function erfcx, the inverse
of the normal CDF ndtri (Halley's iteration on erfc) and entr.

erfc and lgamma come from the extension's unary kernels (libm's, in float64).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from .... import _cpu
from .common import UNARY, kernel, special_kernel

_EPS = np.finfo(np.float64).eps


def _unary(name: str, x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, np.float64)
    out = np.empty_like(x)
    _cpu.unary(UNARY[name], x.reshape(-1), out.reshape(-1))
    return out


def _bernoulli(n: int) -> Fraction:
    """B_n (B_1 = -1/2) by the Akiyama-Tanigawa recurrence, exactly."""
    a = [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        a[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
    return a[0] if n != 1 else Fraction(-1, 2)


@functools.cache
def _em_coefficients() -> tuple:
    """(2k)! / B_2k, k = 1..12: the Euler-Maclaurin tail's coefficients (Cephes' A[])."""
    return tuple(float(math.factorial(2 * k) / _bernoulli(2 * k)) for k in range(1, 13))


def _binary(a, b):
    a, b = np.broadcast_arrays(np.asarray(a, np.float64), np.asarray(b, np.float64))
    return a.reshape(-1).copy(), b.reshape(-1).copy(), a.shape


# ----------------------------------------------------------------------------- zeta
def _zeta_valid(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Hurwitz zeta for x > 1 and q > 0 or (q < 0 non-integer, x integer), as Cephes: the sum
    until its term is below eps (then it stops) or a = q + i > 9 (and 9 terms), then the
    Euler-Maclaurin tail, stopped at the first term below eps (an asymptotic series)."""
    s = q**-x
    a = q.copy()
    b = np.zeros_like(x)
    done = np.zeros(x.shape, bool)
    steps = np.maximum(9, np.ceil(9 - q)).astype(np.int64)
    for i in range(int(steps.max()) if steps.size else 0):
        m = (i < steps) & ~done
        a = np.where(m, a + 1, a)
        b = np.where(m, a**-x, b)
        s = np.where(m, s + b, s)
        done |= m & (-_EPS * s < b) & (b < _EPS * s)
    w = a
    summed = s
    s = s + b * w / (x - 1) - 0.5 * b
    fac = np.ones_like(x)
    k = 0.0
    tail_done = done.copy()
    for c in _em_coefficients():
        fac = fac * (x + k)
        b = b / w
        t = fac * b / c
        s = np.where(tail_done, s, s + t)
        tail_done |= np.abs(t / s) < _EPS
        k += 1
        fac = fac * (x + k)
        b = b / w
        k += 1
    return np.where(done, summed, s)


def zeta(x: np.ndarray, q: np.ndarray) -> np.ndarray:
    """zeta(x, q) = sum_k (k + q)^-x, with Cephes' (and PyTorch's) domain: inf at x == 1 and at
    q a non-positive integer, NaN for x < 1 and for q < 0 with x not an integer."""
    out = np.full(x.shape, np.nan)
    with np.errstate(all="ignore"):
        qint = q == np.floor(q)
        inf = (x == 1) | ((x > 1) & (q <= 0) & qint)
        ok = (x > 1) & ((q > 0) | (~qint & (x == np.floor(x))))
        out[ok] = _zeta_valid(x[ok], q[ok])
        out[inf] = np.inf
    return out


# ----------------------------------------------------------------------------- igamma
def _log1p_minus(t: np.ndarray) -> np.ndarray:
    """log(1 + t) - t without cancellation: its series -t^2/2 + t^3/3 - ... for |t| < 0.2."""
    out = np.empty_like(t)
    small = np.abs(t) < 0.2
    ts = t[small]
    term = -ts * ts
    acc = term / 2
    for k in range(3, 26):
        term = -term * ts
        acc += term / k
    out[small] = acc
    tb = t[~small]
    out[~small] = np.log1p(tb) - tb
    return out


def _log_prefactor(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """log(x^a e^-x / Gamma(a)). For a >= 10 by Stirling's series, as a (log1p(t) - t) +
    log(a) / 2 - log(2 pi) / 2 - (1/(12a) - 1/(360a^3) + ...), t = (x - a) / a: the terms of
    size a cancel exactly instead of in rounding (1e-10 lost at a = 1e5 otherwise)."""
    out = np.empty_like(a)
    big = a >= 10
    ab, xb = a[big], x[big]
    r = 1 / (ab * ab)
    corr = (1 / 12 - r * (1 / 360 - r * (1 / 1260 - r * (1 / 1680 - r / 1188)))) / ab
    t = (xb - ab) / ab
    out[big] = ab * _log1p_minus(t) + 0.5 * np.log(ab) - 0.5 * math.log(2 * math.pi) - corr
    a_, x_ = a[~big], x[~big]
    out[~big] = a_ * np.log(x_) - x_ - _unary("lgamma", a_)
    return out


def _gamma_series(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """P(a, x) by its series (x < a + 1: terms x / (a + n) < 1). The working arrays hold only
    the elements still converging (compacted every 8 steps; finished sums are written out)."""
    out = np.empty_like(a)
    idx = np.arange(a.size)
    aa, xx = a.copy(), x.copy()
    term = 1.0 / aa
    s = term.copy()
    ap = aa.copy()
    for step in range(1, 100000):
        ap += 1
        term *= xx / ap
        s += term
        if step % 8 == 0 or step < 8:
            going = np.abs(term) >= np.abs(s) * _EPS
            if not going.all():
                done = ~going
                out[idx[done]] = s[done]
                idx, aa, xx, term, s, ap = (v[going] for v in (idx, aa, xx, term, s, ap))
            if not idx.size:
                break
    out[idx] = s
    return out * np.exp(_log_prefactor(a, x))


def _gamma_cf(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Q(a, x) by Legendre's continued fraction, modified Lentz (x >= a + 1), on compacted
    working arrays as _gamma_series."""
    tiny = 1e-300
    out = np.empty_like(a)
    idx = np.arange(a.size)
    aa = a.copy()
    b = x + 1 - a
    c = np.full_like(a, 1 / tiny)
    d = 1 / b
    h = d.copy()
    for i in range(1, 100000):
        if not idx.size:
            break
        an = -i * (i - aa)
        b += 2
        d = an * d + b
        d[np.abs(d) < tiny] = tiny
        c = b + an / c
        c[np.abs(c) < tiny] = tiny
        d = 1 / d
        delta = d * c
        h *= delta
        going = np.abs(delta - 1) >= _EPS
        if not going.all():
            done = ~going
            out[idx[done]] = h[done]
            idx, aa, b, c, d, h = (v[going] for v in (idx, aa, b, c, d, h))
    out[idx] = h
    return out * np.exp(_log_prefactor(a, x))


def igamma(a: np.ndarray, x: np.ndarray, upper: bool) -> np.ndarray:
    """The regularized lower (P) or upper (Q = 1 - P) incomplete gamma function, with
    PyTorch's values at the edges (NaN for negative arguments, 0 and 1 at the ends)."""
    p = np.full(a.shape, np.nan)
    with np.errstate(all="ignore"):
        fin = np.isfinite(a) & np.isfinite(x) & (a > 0) & (x > 0)
        ser = fin & (x < a + 1)
        cf = fin & ~ser
        ps = _gamma_series(a[ser], x[ser])
        qc = _gamma_cf(a[cf], x[cf])
        if upper:
            p[ser], p[cf] = 1 - ps, qc
        else:
            p[ser], p[cf] = ps, 1 - qc
        lo, hi = (1.0, 0.0) if upper else (0.0, 1.0)  # values of P's 0 and 1 as P or Q
        nonneg = (a >= 0) & (x >= 0)
        p[nonneg & (x == 0) & (a > 0)] = lo
        p[nonneg & (a == 0) & (x > 0)] = hi
        p[nonneg & np.isinf(x) & np.isfinite(a)] = hi
        p[nonneg & np.isinf(a) & np.isfinite(x)] = lo
    return p


def _run2(fn):
    def run(out, a, b):
        a, b, shape = _binary(a, b)
        with np.errstate(over="ignore"):
            np.copyto(out, fn(a, b).reshape(shape), casting="unsafe")

    return run


kernel("erfcx")(special_kernel("erfcx"))
kernel("ndtri")(special_kernel("ndtri"))
kernel("entr")(special_kernel("entr"))
kernel("zeta")(_run2(zeta))
kernel("igamma")(_run2(lambda a, x: igamma(a, x, False)))
kernel("igammac")(_run2(lambda a, x: igamma(a, x, True)))

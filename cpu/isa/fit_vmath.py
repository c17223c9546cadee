"""Fits the polynomial coefficients used by cpu/isa/vmath.h (run: python cpu/isa/fit_vmath.py).

Weighted least squares on Chebyshev nodes in float64, weighted for relative error; the printed
float32 constants are pasted into vmath.h.  The C code is then checked against float64 libm on a
dense sweep of the float range (tests/backends/cpu/test_isa.py).
"""

from __future__ import annotations

import math

import numpy as np


def nodes(lo: float, hi: float, n: int = 6000) -> np.ndarray:
    k = np.arange(n) + 0.5
    return 0.5 * (lo + hi) + 0.5 * (hi - lo) * np.cos(np.pi * k / n)


def fit(x: np.ndarray, y: np.ndarray, w: np.ndarray, deg: int) -> np.ndarray:
    """Coefficients c[0..deg] (lowest first) minimizing sum(w * (poly(x) - y))**2."""
    v = np.vander(x, deg + 1, increasing=True)
    c, *_ = np.linalg.lstsq(v * w[:, None], y * w, rcond=None)
    return c


def fit_rounded(x: np.ndarray, y: np.ndarray, w: np.ndarray, deg: int) -> np.ndarray:
    """As fit, with the coefficients rounded to float32 one at a time, lowest first, the
    higher ones refitted after each rounding (absorbing its error)."""
    fixed: list = []
    for i in range(deg + 1):
        rest = y - sum(c * x**k for k, c in enumerate(fixed))
        fixed.append(float(np.float32(fit_tail(x, rest, w, i, deg)[0])))
    return np.array(fixed)


def fit_tail(x: np.ndarray, y: np.ndarray, w: np.ndarray, lo: int, deg: int) -> np.ndarray:
    """Coefficients c[lo..deg] minimizing sum(w * (sum c[k] x^k - y))**2."""
    v = np.vander(x, deg + 1, increasing=True)[:, lo:]
    c, *_ = np.linalg.lstsq(v * w[:, None], y * w, rcond=None)
    return c


def show(name: str, c: np.ndarray, err: float) -> None:
    body = ", ".join(f"{np.float32(v)}f" for v in c)
    print(f"{name} (max rel err {err:.2e}, lowest degree first): {body}")


def main() -> None:
    # exp(r) = 1 + r + r^2 * P(r), |r| <= ln2 / 2
    r = nodes(-math.log(2) / 2, math.log(2) / 2)
    y = (np.exp(r) - 1 - r) / r**2
    c = fit(r, y, r**2 / np.exp(r), 5)
    err = np.max(np.abs((1 + r + r**2 * np.polyval(c[::-1], r)) / np.exp(r) - 1))
    show("exp P", c, err)

    # log(1 + f) = f - f^2/2 + f^3 * P(f), f in [sqrt(1/2) - 1, sqrt(2) - 1]
    f = nodes(math.sqrt(0.5) - 1, math.sqrt(2) - 1)
    y = (np.log1p(f) - f + f**2 / 2) / f**3
    c = fit(f, y, np.abs(f**3 / np.log1p(f)), 8)
    err = np.max(np.abs((f - f**2 / 2 + f**3 * np.polyval(c[::-1], f)) / np.log1p(f) - 1))
    show("log P", c, err)

    # tanh(x) = x + x^3 * P(x^2), |x| <= 0.625
    x = nodes(1e-4, 0.625)
    y = (np.tanh(x) - x) / x**3
    c = fit(x * x, y, np.abs(x**3 / np.tanh(x)), 5)
    err = np.max(np.abs((x + x**3 * np.polyval(c[::-1], x * x)) / np.tanh(x) - 1))
    show("tanh P", c, err)

    # erfc(w) = t * exp(Q(s) - w^2), t = 1 / (1 + w/2), w in [0, 16 / sqrt 2], Q a polynomial
    # in s = (t - mid) / half in [-1, 1] (small coefficients: little cancellation in float32)
    lo = 1 / (1 + 8 / math.sqrt(2))
    mid, half = (1 + lo) / 2, (1 - lo) / 2
    t = nodes(lo, 1.0)
    w = (1 / t - 1) * 2
    erfcx = np.array([math.erfc(v) * math.exp(v * v) for v in w])
    c = fit((t - mid) / half, np.log(erfcx / t), np.ones_like(t), 11)
    wt = np.linspace(0, 8 * math.sqrt(2), 100001)
    t2 = 1 / (1 + wt / 2)
    ref = np.array([math.erfc(v) * math.exp(v * v) for v in wt])
    err = np.max(np.abs(t2 * np.exp(np.polyval(c[::-1], (t2 - mid) / half)) / ref - 1))
    print(f"erfc: s = t * {np.float32(1 / half)}f + {np.float32(-mid / half)}f")
    show("erfc Q(s)", c, err)

    # gelu near zero: Phi(x) = 1/2 + x P(x^2), P(u) = erf(sqrt(u / 2)) / (2 sqrt u), |x| <= 3
    x = nodes(1e-6, 3.0)
    y = np.array([math.erf(v / math.sqrt(2)) for v in x]) / (2 * x)
    c = fit_rounded(x * x, y, 1 / y, 10)
    err = np.max(np.abs(np.polyval(c[::-1], x * x) / y - 1))
    show("gelu P(u)", c, err)


if __name__ == "__main__":
    main()

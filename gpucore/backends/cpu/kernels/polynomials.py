"""Kernels of gpucore/ops/polynomials.py: the orthogonal polynomials of torch.special at x for
degree n (n truncated to an integer; 0 for negative n), by numpy in float64 with PyTorch's
algorithm: the three-term recurrence, and for the Chebyshev families inside (-1, 1) at high
degree the trigonometric closed forms (no error growth), with the exact values at the ends.
"""

from __future__ import annotations

import numpy as np

from .common import kernel


def _degree(n: np.ndarray) -> np.ndarray:
    """n as PyTorch's int64 cast: truncation, NaN and infinities as -2^63 (the x86 result)."""
    bad = ~np.isfinite(n) | (np.abs(n) >= 2.0**63)
    return np.where(bad, np.iinfo(np.int64).min, np.trunc(np.where(bad, 0, n))).astype(np.int64)


def _recurrence(n, first, second, step, needed=None):
    """p_n from p_0 = first, p_1 = second and p_(j) = step(j, p_(j-2), p_(j-1)) (per element n;
    only up to the largest n where ``needed``). Stops early once every element still recurring
    is NaN (NaN stays NaN: a degree of 1e9 at |x| > 1 overflows within a few hundred steps)."""
    p, q = first, second
    live = n if needed is None else np.where(needed, n, 0)
    top = int(live.max()) if n.size else 0
    for j in range(2, top + 1):
        r = step(j, p, q)
        m = j <= live
        p = np.where(m, q, p)
        q = np.where(m, r, q)
        if j % 64 == 0 and np.isnan(q[j < live]).all():
            break
    return np.where(n <= 0, first, q)


def _chebyshev(kind: str, y: np.ndarray, n: np.ndarray, shifted: bool) -> np.ndarray:
    """T, U, V or W at y (the shifted forms pass y = 2x - 1 and their own end tests)."""
    one = np.ones_like(y)
    first = {"t": y, "u": y + y, "v": y + y - 1, "w": y + y + 1}[kind]
    # the closed forms serve high degrees inside (-1, 1): recur only where they do not
    closed_ok = (n > (6 if kind == "t" or shifted else 8)) & (np.abs(y) < 1)
    out = _recurrence(n, one, first, lambda j, p, q: (y + y) * q - p, needed=~closed_ok)
    nf = n.astype(np.float64)
    even = n % 2 == 0
    inside = np.abs(y) < 1
    with np.errstate(all="ignore"):
        theta = np.arccos(np.clip(y, -1, 1))
        if kind == "t":
            closed = np.cos(nf * theta)
            at1 = one
            atm1 = np.where(even, 1.0, -1.0)
            high = n > 6
        elif kind == "u":
            st = np.sin(theta)
            closed = np.where(
                st != 0, np.sin((nf + 1) * theta) / st, (nf + 1) * np.cos((nf + 1) * theta) / y
            )
            at1 = nf + 1
            atm1 = np.where(even, nf + 1, -(nf + 1))
            high = n > 8
        elif kind == "v":
            half = np.cos(theta / 2)
            closed = np.where(
                np.sin(theta / 2) != 1,
                np.cos((nf + 0.5) * theta) / half,
                np.where(even, nf + nf + 1, -(nf + nf + 1)),
            )
            at1 = one
            atm1 = np.where(even, nf + nf + 1, -(nf + nf + 1))
            high = n > 8
        else:
            half = np.sin(theta / 2)
            closed = np.where(
                np.cos(theta / 2) != 1,
                np.sin((nf + 0.5) * theta) / half,
                np.where(y > 0, nf + nf + 1, np.where(even, 1.0, -1.0)),
            )
            at1 = nf + nf + 1
            atm1 = np.where(even, 1.0, -1.0)
            high = n > 8
    if shifted:
        high = n > 6
    out = np.where(high & inside, closed, out)
    out = np.where(y == 1, at1, np.where(y == -1, atm1, out))
    return np.where(n < 0, 0.0, out)


def _hermite_h(x, n):
    out = _recurrence(n, np.ones_like(x), x + x, lambda j, p, q: (x + x) * q - 2 * (j - 1) * p)
    return np.where(n < 0, 0.0, out)


def _hermite_he(x, n):
    out = _recurrence(n, np.ones_like(x), x, lambda j, p, q: x * q - (j - 1) * p)
    return np.where(n < 0, 0.0, out)


def _laguerre(x, n):
    def step(j, p, q):
        k = j - 1
        return ((k + k + (1 - x)) * q - k * p) / (k + 1)

    out = _recurrence(n, np.ones_like(x), 1 - x, step)
    return np.where(n < 0, 0.0, np.where(x == 0, 1.0, out))


def _legendre(x, n):
    def step(j, p, q):
        k = j - 1
        return ((k + k + 1) * x * q - k * p) / (k + 1)

    out = _recurrence(n, np.ones_like(x), x, step)
    ends = np.where((x > 0) | (n % 2 == 0), 1.0, -1.0)
    out = np.where(np.abs(x) == 1, ends, out)
    return np.where(n < 0, 0.0, out)


def _plain(kind):
    return lambda x, n: _chebyshev(kind, x, n, False)


def _shifted(kind):
    return lambda x, n: _chebyshev(kind, x + x - 1, n, True)


_POLYNOMIALS = {
    **{f"chebyshev_polynomial_{k}": _plain(k) for k in "tuvw"},
    **{f"shifted_chebyshev_polynomial_{k}": _shifted(k) for k in "tuvw"},
    "hermite_polynomial_h": _hermite_h,
    "hermite_polynomial_he": _hermite_he,
    "laguerre_polynomial_l": _laguerre,
    "legendre_polynomial_p": _legendre,
}


def _run(fn):
    def run(out, x, n):
        x, n = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(n, np.float64))
        with np.errstate(all="ignore"):
            np.copyto(out, fn(x, _degree(n)), casting="unsafe")

    return run


for _name, _fn in _POLYNOMIALS.items():
    kernel(_name)(_run(_fn))

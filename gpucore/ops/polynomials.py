"""The orthogonal polynomials of torch.special as registry ops, ``name(x, n)`` for degree ``n``
(a tensor or a number, truncated to an integer; 0 where n < 0): Chebyshev T, U, V, W and their
shifted forms on [0, 1], Hermite H (physicists') and He (probabilists'), Laguerre L and
Legendre P. No gradient, as PyTorch (their outputs do not require grad).

Computed in C on the CPU in the result's own dtype with PyTorch's algorithms (the three-term
recurrence; the Chebyshev closed forms inside (-1, 1) at high degree); Vulkan tensors go through
the host.

kernels: backends/cpu/kernels/polynomials.py (cpu/special_poly.c) · none on Vulkan.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from .bessel import full_precision_only
from .common import broadcast_shapes
from .registry import defop
from .samples import Sample, integers, uniform


def _np_poly(name: str):
    """numpy.polynomial's evaluator ``name`` (imported on first use: slow to import)."""

    def value(x, c):
        from numpy import polynomial  # noqa: PLC0415

        module, fn = name.split(".")
        return getattr(getattr(polynomial, module), fn)(x, c)

    return value


def _basis(module, shift=None, weight=None):
    """The float64 reference p_n(x) from numpy.polynomial's basis series (an independent
    evaluation: Clenshaw's algorithm on the coefficient vector e_n)."""

    def ref(x, n):
        x, n = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(n))
        out = np.zeros(x.shape)
        for i, (xv, nv) in enumerate(zip(x.reshape(-1), n.reshape(-1))):
            k = int(nv)
            if k < 0:
                continue
            c = np.zeros(k + 1)
            c[k] = 1.0
            xx = xv if shift is None else shift(xv)
            v = module(xx, c)
            out.reshape(-1)[i] = v if weight is None else weight(xx, k, v)
        return out

    return ref


def _cheb(kind: str):
    """T_n, U_n, V_n or W_n through numpy's Chebyshev-T series (U from its T expansion)."""

    def value(x, c):
        k = len(c) - 1
        chebval = _np_poly("chebyshev.chebval")
        if kind == "t":
            return chebval(x, c)
        # U_n = sum of T_j over j = n, n-2, ... (with T_0 counted once), times 2 (but T_0 once)
        u = lambda m: chebval(x, _u_coeffs(m))  # noqa: E731
        if kind == "u":
            return u(k)
        if kind == "v":  # V_n = U_n - U_(n-1)
            return u(k) - (u(k - 1) if k else 0.0)
        return u(k) + (u(k - 1) if k else 0.0)  # W_n = U_n + U_(n-1)

    return value


def _u_coeffs(m: int) -> np.ndarray:
    """Chebyshev-T coefficients of U_m: 2 (T_m + T_(m-2) + ...), with T_0's coefficient 1."""
    c = np.zeros(m + 1)
    for j in range(m, -1, -2):
        c[j] = 2.0 if j else 1.0
    return c


def _infer(name):
    def infer(x, n):
        dt = D.promote(x.dtype, n.dtype)
        return broadcast_shapes(
            name, x.shape, n.shape
        ), dt if dt.is_floating_point else D.default_float()

    return infer


def _samples(ref, low, high):
    def samples():
        return [
            Sample(
                uniform(3, 5, low=low, high=high, seed=1),
                integers(12, 3, 5, low=-1, seed=2),
                ref=ref,
            ),
            Sample(
                uniform(4, 1, low=low, high=high, seed=3), integers(30, 6, low=0, seed=4), ref=ref
            ),
            Sample(np.array([low, high, 0.5, 1.0, 0.0, -1.0]), integers(9, 6, seed=5), ref=ref),
        ]

    return samples


_SHIFT = lambda x: 2 * x - 1  # noqa: E731
_REFS = {
    **{f"chebyshev_polynomial_{k}": (_basis(_cheb(k)), -1.0, 1.0) for k in "tuvw"},
    **{f"shifted_chebyshev_polynomial_{k}": (_basis(_cheb(k), _SHIFT), 0.0, 1.0) for k in "tuvw"},
    "hermite_polynomial_h": (_basis(_np_poly("hermite.hermval")), -2.0, 2.0),
    "hermite_polynomial_he": (_basis(_np_poly("hermite_e.hermeval")), -2.0, 2.0),
    "laguerre_polynomial_l": (_basis(_np_poly("laguerre.lagval")), -1.0, 4.0),
    "legendre_polynomial_p": (_basis(_np_poly("legendre.legval")), -1.0, 1.0),
}
POLYNOMIALS = {
    name: defop(
        name, infer=full_precision_only(name, _infer(name)), samples=_samples(ref, low, high)
    )
    for name, (ref, low, high) in _REFS.items()
}

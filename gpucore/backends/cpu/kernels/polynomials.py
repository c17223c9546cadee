"""Kernels of gpucore/ops/polynomials.py: the orthogonal polynomials of torch.special at x for
degree n, in C (``_cpu.special2``, cpu/special_poly.c) in the output's own dtype with PyTorch's
algorithm: n cast to int64 as PyTorch does (truncation; NaN, infinities and |n| >= 2^63 count as
negative: 0), the three-term recurrence (left once it is NaN), and for the Chebyshev families
inside (-1, 1) at high degree the trigonometric closed forms, with the exact values at the ends.
"""

from __future__ import annotations

from .common import kernel, special2_kernel

_NAMES = (
    *(f"chebyshev_polynomial_{k}" for k in "tuvw"),
    *(f"shifted_chebyshev_polynomial_{k}" for k in "tuvw"),
    "hermite_polynomial_h",
    "hermite_polynomial_he",
    "laguerre_polynomial_l",
    "legendre_polynomial_p",
)
for _name in _NAMES:
    kernel(_name)(special2_kernel(_name))

"""Kernels of gpucore/ops/bessel.py, all in C (``_cpu.special``, in double; float32 rounded
once): I0, I1 and their scaled forms in cpu/special.c (the power series up to 30, the
large-argument expansion beyond); J0, J1, Y0, Y1, K0, K1 (and exp(x) K), the spherical j0 and
Airy's Ai in cpu/special_bessel.c (series for small arguments, Miller's backward recurrence for J
and Y in the middle, the trapezoidal rule on K's integral, Hankel's expansions beyond 25; Ai from
its Maclaurin series, K_1/3 and J_+-1/3).
"""

from __future__ import annotations

from .common import kernel, special_kernel

_NAMES = (
    "i0",
    "i0e",
    "i1",
    "i1e",
    "bessel_j0",
    "bessel_j1",
    "bessel_y0",
    "bessel_y1",
    "modified_bessel_k0",
    "modified_bessel_k1",
    "scaled_modified_bessel_k0",
    "scaled_modified_bessel_k1",
    "spherical_bessel_j0",
    "airy_ai",
)
for _name in _NAMES:
    kernel(_name)(special_kernel(_name))

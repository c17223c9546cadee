"""Kernels of gpucore/ops/transcendental.py, all in C in double (float32 rounded once): erfcx,
ndtri and entr (``_cpu.special``, cpu/special.c); the Hurwitz zeta function (Euler-Maclaurin
summation, as Cephes and PyTorch) and the regularized incomplete gamma functions igamma /
igammac (series for x < a + 1, Lentz's continued fraction beyond, Stirling's series in the
prefactor for a >= 10) through ``_cpu.special2`` (cpu/special_gamma.c).
"""

from __future__ import annotations

from .common import kernel, special2_kernel, special_kernel

for _name in ("erfcx", "ndtri", "entr"):
    kernel(_name)(special_kernel(_name))
for _name in ("zeta", "igamma", "igammac"):
    kernel(_name)(special2_kernel(_name))

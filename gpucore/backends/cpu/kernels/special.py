"""Kernels of gpucore/ops/special.py: fmod, remainder, atan2, hypot and signbit by numpy (exact as
C's libm; numpy broadcasts the inputs into ``out``)."""

from __future__ import annotations

import numpy as np

from .common import kernel


def _no_int_zero(name: str, out: np.ndarray, b: np.ndarray) -> None:
    if out.dtype.kind in "iub" and (b == 0).any():
        raise ZeroDivisionError(f"{name}(): integer division by zero")


@kernel("fmod")
def _fmod(out, a, b):
    _no_int_zero("fmod", out, b)
    with np.errstate(all="ignore"):
        np.fmod(a, b, out=out, casting="unsafe")


@kernel("remainder")
def _remainder(out, a, b):
    _no_int_zero("remainder", out, b)
    with np.errstate(all="ignore"):
        if out.dtype.kind != "f":
            np.remainder(a, b, out=out, casting="unsafe")
            return
        # PyTorch's: fmod, then + b where the signs differ (so -0.0 % 3 stays -0.0)
        m = np.fmod(a, b, dtype=out.dtype)
        np.copyto(out, np.where((m != 0) & ((b < 0) != (m < 0)), m + b, m), casting="unsafe")


@kernel("atan2")
def _atan2(out, a, b):
    np.arctan2(a, b, out=out, dtype=out.dtype, casting="unsafe")


@kernel("hypot")
def _hypot(out, a, b):
    with np.errstate(all="ignore"):
        np.hypot(a, b, out=out, dtype=out.dtype, casting="unsafe")


@kernel("signbit")
def _signbit(out, x):
    np.signbit(x, out=out)

"""Kernels of gpucore/ops/special.py: fmod, remainder, div_rounded, atan2, hypot and signbit by
numpy (exact as C's libm; numpy broadcasts the inputs into ``out``)."""

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


@kernel("div_rounded")
def _div_rounded(out, a, b, rounding_mode):
    _no_int_zero("div", out, b)
    with np.errstate(all="ignore"):
        if rounding_mode == "floor":  # Python's floor for floats (1 // 0.1 is 9), as PyTorch
            np.floor_divide(a, b, out=out, dtype=out.dtype, casting="unsafe")
        elif out.dtype.kind == "f":
            np.trunc(np.divide(a, b, dtype=out.dtype), out=out)
        else:  # integers toward zero, exactly: the floor quotient + 1 where it rounded down
            q = np.floor_divide(a, b, dtype=out.dtype)
            up = (a - q * b != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0))
            np.add(q, up, out=out, casting="unsafe")


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

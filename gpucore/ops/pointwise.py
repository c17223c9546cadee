"""Pointwise compositions: lerp and nan_to_num (no kernels: compositions of where and
arithmetic, so they run and differentiate on every backend).

kernels: none (the composed ops').
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..errors import DTypeError
from ..tensor import Tensor
from .api import public
from .common import scalar_tensor
from .elementwise import where

# The largest finite value of each float dtype (nan_to_num's default replacements for +-inf).
_FMAX = {
    D.float16: float(np.finfo(np.float16).max),
    D.bfloat16: 3.3895313892515355e38,
    D.float32: float(np.finfo(np.float32).max),
    D.float64: float(np.finfo(np.float64).max),
}


@public("lerp", inplace=True)
def lerp(input: Tensor, end: Tensor, weight) -> Tensor:
    """``input + weight * (end - input)``, as torch.lerp (weight a number or a tensor;
    computed as ``end - (end - input) * (1 - weight)`` where ``|weight| >= 0.5``, as PyTorch,
    so that weight 1 gives ``end`` exactly)."""
    if not input.dtype.is_floating_point or end.dtype is not input.dtype:
        raise DTypeError(
            f"lerp(): input and end must have one float dtype, got {input.dtype} and {end.dtype}"
        )
    diff = end - input
    if not isinstance(weight, Tensor):
        if isinstance(weight, bool) or not isinstance(weight, (int, float, np.number)):
            raise DTypeError(f"lerp(): weight must be a number or a Tensor, got {weight!r}")
        w = float(weight)
        return input + diff * w if abs(w) < 0.5 else end - diff * (1.0 - w)
    if weight.dtype is not input.dtype:
        raise DTypeError(
            f"lerp(): weight must have the dtype of input ({input.dtype}), got {weight.dtype}"
        )
    low = input + diff * weight
    high = end - diff * (1.0 - weight)
    return where(weight.abs() < 0.5, low, high)


@public("nan_to_num", inplace=True, saves_self=False)
def nan_to_num(input: Tensor, nan: float = 0.0, posinf=None, neginf=None) -> Tensor:
    """input with NaN replaced by ``nan``, +inf by ``posinf`` and -inf by ``neginf`` (by
    default the dtype's largest and lowest finite values), as torch.nan_to_num; integer and
    bool tensors come back unchanged (a copy)."""
    if not input.dtype.is_floating_point:
        return input.clone()
    big = _FMAX[input.dtype]
    pos = big if posinf is None else posinf
    neg = -big if neginf is None else neginf
    x = input
    out = where(x != x, scalar_tensor(nan, x.dtype), x)
    out = where(x == float("inf"), scalar_tensor(pos, x.dtype), out)
    return where(x == float("-inf"), scalar_tensor(neg, x.dtype), out)

"""Membership: ``isin`` (torch.isin), a registry op with a C kernel (the test elements sorted
into scratch, every element found by binary search; ``cpu/isin.c``).

Semantics as PyTorch: the two operands are promoted to one dtype (a number on either side takes
PyTorch's scalar rule), the result is a bool tensor of ``elements``' shape, NaN is never a member,
-0.0 equals 0.0, bool operands are refused. Device tensors run as a composition of comparisons on
the device (equality with blocks of the test elements, OR-ed), which gives the same bits.

kernels: backends/cpu/kernels/membership.py (``_cpu.isin``); Vulkan: the composition above.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..errors import ArgumentTypeError, DTypeError
from ..tensor import Tensor
from .api import public, type_name
from .common import as_operands
from .registry import apply, defop
from .samples import Sample, halves, uniform

# Device composition: elements x test-block comparisons held at once.
_DEVICE_BLOCK = 1 << 22


def _np_isin(elements, test, invert):
    return np.isin(elements, test, invert=invert)


def _isin_infer(elements, test, invert):
    return (elements.shape, D.bool_)


def _isin_samples():
    nan = uniform(3, 4, seed=35)
    nan[0, 0] = nan[2, 3] = np.nan
    big = np.round(uniform(5000, seed=36) * 50)  # above the GPU threshold, many members
    return [
        Sample(halves(3, 5, seed=31), halves(4, seed=32), invert=False, ref=_np_isin, grad=False),
        Sample(halves(2, 3, seed=33), halves(2, 2, seed=34), invert=True, ref=_np_isin, grad=False),
        Sample(nan, np.array([np.nan, nan[1, 1], 0.0]), invert=False, ref=_np_isin, grad=False),
        Sample(halves(4, seed=37), np.zeros(0), invert=False, ref=_np_isin, grad=False),
        Sample(np.zeros((0, 2)), halves(3, seed=38), invert=True, ref=_np_isin, grad=False),
        Sample(halves(seed=39), halves(6, seed=40), invert=False, ref=_np_isin, grad=False),
        Sample(big, np.round(uniform(40, seed=41) * 50), invert=False, ref=_np_isin, grad=False),
    ]


ISIN = defop("isin", infer=_isin_infer, samples=_isin_samples)


def _device_isin(elements: Tensor, test: Tensor, invert: bool) -> Tensor:
    """isin composed of device ops: each element against blocks of the test elements."""
    flat, t = elements.reshape(-1, 1), test.reshape(1, -1)
    n, m = flat.shape[0], t.shape[1]
    if n == 0 or m == 0:
        hit = elements.new_zeros(elements.shape, dtype=D.bool_)
    else:
        block = max(1, _DEVICE_BLOCK // max(n, 1))
        hit = None
        for s in range(0, m, block):
            part = (flat == t[:, s : s + block]).any(1)
            hit = part if hit is None else hit | part
        hit = hit.reshape(elements.shape)
    return hit.logical_not() if invert else hit


@public("isin", method=False)
def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
    """A bool tensor of ``elements``' shape: whether each element is among ``test_elements``
    (``invert=True``: is not), as torch.isin. Either side may be a number (not both); the two are
    promoted to one dtype first; NaN is never a member. ``assume_unique`` is accepted (the
    result does not depend on it)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise ArgumentTypeError(
            "isin(): one of 'elements' and 'test_elements' must be a Tensor, got "
            f"{type_name(elements)} and {type_name(test_elements)}"
        )
    for name, flag in (("assume_unique", assume_unique), ("invert", invert)):
        if not isinstance(flag, (bool, np.bool_)):
            raise ArgumentTypeError(
                f"isin(): argument '{name}' must be bool, not {type_name(flag)}"
            )
    e, t = as_operands("isin", elements, test_elements, ("elements", "test_elements"))
    if any(
        getattr(v, "dtype", None) is D.bool_ or isinstance(v, bool)
        for v in (e, t, elements, test_elements)
    ):
        raise DTypeError(
            "isin(): bool tensors are not supported (as in PyTorch); compare with == or convert "
            "them with .to(gpucore.uint8)"
        )
    if e._dev is not None or t._dev is not None:
        out = _device_isin(e, t, bool(invert))
    else:
        out = apply(ISIN, e, t.reshape(-1), invert=bool(invert))
    return out

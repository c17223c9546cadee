"""Tensor.new_zeros / new_ones / new_full / new_empty / new_tensor: new tensors with the dtype and
device of an existing one unless given (PyTorch's ``Tensor.new_*``). Not ops: creation.

kernels: none (creation's).
"""

from __future__ import annotations

from .. import creation
from ..creation import _sizes
from ..tensor import Tensor
from .api import public


def _dtype_device(self: Tensor, dtype, device):
    return (dtype if dtype is not None else self.dtype), (
        device if device is not None else self.device
    )


@public("new_zeros", function=False)
def new_zeros(
    self: Tensor,
    *args,
    size=None,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    **_ignored,
) -> Tensor:
    """Zeros of ``size`` with self's dtype and device unless given, as Tensor.new_zeros."""
    dt, dev = _dtype_device(self, dtype, device)
    shape = _sizes(args, size, "new_zeros")
    return creation.zeros(shape, dtype=dt, device=dev, requires_grad=requires_grad)


@public("new_ones", function=False)
def new_ones(
    self: Tensor,
    *args,
    size=None,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    **_ignored,
) -> Tensor:
    """Ones of ``size`` with self's dtype and device unless given, as Tensor.new_ones."""
    dt, dev = _dtype_device(self, dtype, device)
    shape = _sizes(args, size, "new_ones")
    return creation.ones(shape, dtype=dt, device=dev, requires_grad=requires_grad)


@public("new_empty", function=False)
def new_empty(
    self: Tensor,
    *args,
    size=None,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    **_ignored,
) -> Tensor:
    """An uninitialised tensor of ``size`` with self's dtype and device unless given, as
    Tensor.new_empty."""
    dt, dev = _dtype_device(self, dtype, device)
    shape = _sizes(args, size, "new_empty")
    return creation.empty(shape, dtype=dt, device=dev, requires_grad=requires_grad)


@public("new_full", function=False)
def new_full(
    self: Tensor,
    size,
    fill_value,
    *,
    dtype=None,
    device=None,
    requires_grad: bool = False,
    **_ignored,
) -> Tensor:
    """``fill_value`` in a tensor of ``size`` with self's dtype and device unless given, as
    Tensor.new_full."""
    dt, dev = _dtype_device(self, dtype, device)
    shape = _sizes((size,), None, "new_full")
    return creation.full(shape, fill_value, dtype=dt, device=dev, requires_grad=requires_grad)


@public("new_tensor", function=False)
def new_tensor(
    self: Tensor, data, dtype=None, device=None, requires_grad: bool = False, **_ignored
) -> Tensor:
    """A new tensor holding a copy of ``data`` (detached), with self's dtype and device unless
    given, as Tensor.new_tensor."""
    dt, dev = _dtype_device(self, dtype, device)
    return creation.tensor(data, dtype=dt, device=dev, requires_grad=requires_grad)

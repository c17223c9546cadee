"""Tensors as MPI buffers: zero-copy where MPI can use the tensor's memory, staged otherwise.

A contiguous CPU tensor of a dtype MPI knows is handed to MPI as it is (its numpy array exports
the buffer protocol). Everything else goes through one host array: a Vulkan tensor is copied to
the host and back (one copy each way), a strided view is packed and unpacked, float16 and
bfloat16 are reduced in float32 (MPI has no half-precision arithmetic) and moved as raw bits
otherwise.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..autograd.grad_mode import no_grad
from ..creation import from_numpy
from ..errors import DTypeError
from ..tensor import Tensor

_HALF = (D.float16, D.bfloat16)


class Staged:
    """The host array MPI reads or writes for one tensor, and how to put results back."""

    __slots__ = ("tensor", "array", "direct", "cast")

    def __init__(self, tensor: Tensor, array: np.ndarray, direct: bool, cast: bool):
        self.tensor = tensor
        self.array = array
        self.direct = direct  # array is the tensor's own memory
        self.cast = cast  # array holds float32 values of a half-precision tensor

    def write_back(self) -> None:
        """Make the tensor hold what MPI wrote into the array."""
        t = self.tensor
        if self.direct:
            t._vbox[0] += 1  # modified in place: autograd must see the new version
            return
        arr = self.array
        if self.cast:
            src = from_numpy(np.ascontiguousarray(arr)).to(t.dtype)
        elif t.dtype in _HALF:  # moved as raw bits
            src = Tensor._wrap(np.ascontiguousarray(arr).view(t.dtype.np), t.dtype)
        else:
            src = from_numpy(arr)
        with no_grad():
            t.copy_(src.reshape(t.shape))


def check_tensor(t, what: str, arg: str = "tensor") -> Tensor:
    """``t`` itself when it is a gpucore Tensor, else a TypeError naming the argument."""
    if not isinstance(t, Tensor):
        raise TypeError(f"{what}: {arg} must be a gpucore Tensor, got {type(t).__name__}")
    return t


def stage(t: Tensor, reduce: bool) -> Staged:
    """The array to give MPI for ``t``; ``reduce``: MPI will do arithmetic on it."""
    if t.dtype in _HALF:
        if reduce:
            arr = np.ascontiguousarray(t.detach().float().numpy(), dtype=np.float32)
            return Staged(t, arr.copy(), False, True)
        # bfloat16 is stored as uint16 already; float16 is viewed as its bits
        bits = np.array(t._host(), order="C", copy=True).view(np.uint16)
        return Staged(t, bits, False, False)
    if t._dev is None and t._data.flags.c_contiguous and t._data.flags.writeable:
        return Staged(t, t._data, True, False)
    return Staged(t, np.array(t._host(), order="C", copy=True), False, False)


def signature(what: str, tensors, **extra) -> str:
    """What every rank must agree on for a collective: the tensors' shapes and dtypes."""
    parts = ", ".join(f"{t._data.shape}:{t._dtype.name}" for t in tensors)
    more = " ".join(f"{k}={v}" for k, v in extra.items())
    return f"{what} [{parts}] {more}"


def check_reducible(t: Tensor, op_name: str, what: str) -> None:
    """Arithmetic MPI cannot do on this dtype raises before any rank starts the collective."""
    if op_name == "avg" and not t.dtype.is_floating_point:
        raise DTypeError(
            f"{what}: ReduceOp.AVG needs a floating-point tensor, got {t.dtype}; use SUM and "
            "divide, or convert the tensor"
        )
    if op_name in ("band", "bor", "bxor") and t.dtype.is_floating_point:
        raise DTypeError(f"{what}: ReduceOp.{op_name.upper()} needs an integer or bool tensor")

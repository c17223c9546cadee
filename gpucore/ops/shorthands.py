"""Thin PyTorch forms over existing ops (compositions: no kernels, gradients for free on every
backend): ravel, select, take, positive, isposinf/isneginf, inner, vdot, addmv, addr, rsub,
matrix_power, detach (as a function); Tensor.unfold (sliding windows, a copy
here where PyTorch returns a view), ndimension, is_signed, is_same_size, is_inference,
retains_grad.

kernels: none (the composed ops').
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..creation import arange
from ..errors import ArgumentTypeError, DTypeError, GpucoreIndexError, ShapeError
from ..tensor import Tensor
from .api import public, tensor_member, type_name
from .common import as_operands, host_quiet, wrap_dim
from .elementwise import where
from .linalg import _scaled_sum, outer
from .products import dot, mv, tensordot


def _int_arg(op: str, name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise ArgumentTypeError(f"{op}(): argument '{name}' must be int, not {type_name(v)}")
    return int(v)


@public("ravel")
def ravel(input: Tensor) -> Tensor:
    """input flattened to 1-D (a view when contiguous), as torch.ravel."""
    return input.reshape(-1)


@public("select")
def select(input: Tensor, dim: int, index: int) -> Tensor:
    """The slice at ``index`` along ``dim`` with that dim removed (a view), as torch.select."""
    d = wrap_dim(dim, input.ndim, "select()")
    i = _int_arg("select", "index", index)
    n = input.shape[d]
    if not -n <= i < n:
        raise GpucoreIndexError(
            f"select(): index {i} out of range for dim {d} of size {n} (shape {tuple(input.shape)})"
        )
    return input[(slice(None),) * d + (i,)]


@public("take")
def take(input: Tensor, index: Tensor) -> Tensor:
    """input read as 1-D at ``index`` (int64, negative counts from the end), of index's shape,
    as torch.take."""
    if index.dtype is not D.int64:
        raise DTypeError(f"take(): index must be an int64 tensor, got {index.dtype}")
    flat = input.reshape(-1)
    n = flat.shape[0]
    if index.numel():
        # a bounds check only (the graph does not depend on it): not a host read a capture refuses
        arr = host_quiet(index)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -n or hi >= n:
            raise GpucoreIndexError(
                f"take(): index values must be in [-{n}, {n}) for input of {n} elements; got "
                f"values in [{lo}, {hi}]"
            )
    idx = where(index < 0, index + n, index)
    return flat.index_select(0, idx.reshape(-1)).reshape(index.shape)


@public("positive")
def positive(input: Tensor) -> Tensor:
    """input itself (unary +), as torch.positive; bool tensors are refused, as PyTorch."""
    if input.dtype is D.bool_:
        raise DTypeError("positive(): not supported for bool tensors (as in PyTorch)")
    return input


def _isinf_signed(input: Tensor, value: float) -> Tensor:
    if not input.dtype.is_floating_point:
        return input.new_zeros(input.shape, dtype=D.bool_)
    return input == value


@public("isposinf")
def isposinf(input: Tensor) -> Tensor:
    """Whether each element is +inf (a bool tensor), as torch.isposinf."""
    return _isinf_signed(input, math.inf)


@public("isneginf")
def isneginf(input: Tensor) -> Tensor:
    """Whether each element is -inf (a bool tensor), as torch.isneginf."""
    return _isinf_signed(input, -math.inf)


@public("inner")
def inner(input: Tensor, other: Tensor) -> Tensor:
    """Sum over the last dims of both (a product when either is 0-d), as torch.inner."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise ShapeError(
            f"inner(): the last dims must match, got shapes {tuple(input.shape)} and "
            f"{tuple(other.shape)}"
        )
    if input.shape[-1] == 0:  # an empty sum: zeros of the result's shape
        a, b = as_operands("inner", input, other)
        return a.new_zeros(tuple(a.shape[:-1]) + tuple(b.shape[:-1]))
    return tensordot(input, other, ([input.ndim - 1], [other.ndim - 1]))


@public("vdot")
def vdot(input: Tensor, other: Tensor) -> Tensor:
    """The dot product of two 1-D tensors (real tensors: as dot), as torch.vdot."""
    return dot(input, other)


@public("addmv", inplace=True, saves_self=False)
def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * (mat @ vec)``, as torch.addmv (beta 0 ignores input)."""
    return _scaled_sum(input, mv(mat, vec), beta, alpha)


@public("addr", inplace=True, saves_self=False)
def addr(input: Tensor, vec1: Tensor, vec2: Tensor, *, beta=1, alpha=1) -> Tensor:
    """``beta * input + alpha * outer(vec1, vec2)``, as torch.addr (beta 0 ignores input)."""
    return _scaled_sum(input, outer(vec1, vec2), beta, alpha)


@public("rsub", method=False)
def rsub(input, other, *, alpha=1) -> Tensor:
    """``other - alpha * input``, as torch.rsub."""
    a, b = as_operands("rsub", input, other)
    return b - (a if alpha == 1 else a * alpha)


@public("matrix_power")
def matrix_power(input: Tensor, n: int) -> Tensor:
    """input (a square matrix or a batch of them) to the integer power ``n`` by repeated
    squaring (n = 0: the identity; n < 0: powers of the inverse), as torch.matrix_power."""
    n = _int_arg("matrix_power", "n", n)
    if input.ndim < 2 or input.shape[-1] != input.shape[-2]:
        raise ShapeError(f"matrix_power(): expects square matrices, got shape {tuple(input.shape)}")
    if n == 0:
        eye = (arange(input.shape[-1]).unsqueeze(1) == arange(input.shape[-1])).to(input.dtype)
        return eye.expand(tuple(input.shape)).contiguous()
    base = input if n > 0 else input.inverse()
    result = None
    k = abs(n)
    while k:
        if k & 1:
            result = base if result is None else result @ base
        k >>= 1
        if k:
            base = base @ base
    return result


@public("detach", method=False)
def detach(input: Tensor) -> Tensor:
    """input without its autograd history (sharing its data), as torch.detach."""
    return input.detach()


def _unfold(self: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """Tensor.unfold: every window of ``size`` elements along ``dimension``, ``step`` apart,
    as a new last dim (the windows replace that dim), as PyTorch's (a copy here, not a view)."""
    d = wrap_dim(dimension, max(self.ndim, 1), "unfold()")
    size, step = _int_arg("unfold", "size", size), _int_arg("unfold", "step", step)
    x = self.reshape(1) if self.ndim == 0 else self
    n = x.shape[d]
    if size < 0 or size > n or step <= 0:
        raise ShapeError(
            f"unfold(): need 0 <= size <= {n} (dim {d} of shape {tuple(self.shape)}) and step > "
            f"0, got size {size}, step {step}"
        )
    if self.ndim == 0:
        return self.reshape(size)  # PyTorch: a 0-d tensor's one window is 1-D
    count = (n - size) // step + 1
    idx = (arange(count).unsqueeze(1) * step + arange(size)).reshape(-1)
    w = x.index_select(d, idx).unflatten(d, (count, size))
    return w.movedim(d + 1, -1)


tensor_member("unfold", _unfold)
tensor_member("ndimension", lambda self: self.ndim)
tensor_member("is_signed", lambda self: self.dtype.is_signed)
tensor_member("is_same_size", lambda self, other: tuple(self.shape) == tuple(other.shape))
tensor_member("is_inference", lambda self: False)  # gpucore has no separate inference tensors
# True for a non-leaf tensor whose retain_grad() was called (leaves keep .grad anyway: False)
tensor_member("retains_grad", property(lambda self: self._grad_fn is not None and self._retain))

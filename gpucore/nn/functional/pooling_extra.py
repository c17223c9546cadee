"""max_unpool1d/2d/3d (a scatter of the pooled values to their indices), lp_pool1d/2d/3d (power
mean over windows, through avg_pool), and PyTorch's ``*_with_indices`` names of the max
poolings. Compositions: gradients on every backend for free."""

from __future__ import annotations

import math
import operator

from ...errors import ShapeError
from ...ops.common import host_quiet
from ...ops.pointwise import sgn
from ...tensor import Tensor
from ._utils import _check_tensor
from .activation import relu
from .pooling import (
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    avg_pool1d,
    avg_pool2d,
    max_pool1d,
    max_pool2d,
)
from .pooling3d import adaptive_max_pool3d, avg_pool3d, max_pool3d


def _tuple(op: str, name: str, v, n: int, least: int) -> tuple:
    try:
        t = tuple(operator.index(e) for e in v) if isinstance(v, (tuple, list)) else None
        t = t if t is not None else (operator.index(v),) * n
    except TypeError:
        t = ()
    if len(t) == 1:
        t = t * n
    if len(t) != n or any(e < least for e in t):
        raise ValueError(f"{op}(): {name} must be an int or {n} ints >= {least}, got {v!r}")
    return t


def _max_unpool(op, n, input, indices, kernel_size, stride, padding, output_size):
    _check_tensor(op, input)
    if not isinstance(indices, Tensor) or indices.dtype.is_floating_point:
        raise TypeError(f"{op}(): indices must be an int64 tensor (max_pool's return_indices)")
    if input.ndim not in (n + 1, n + 2):
        raise ShapeError(
            f"{op}(): expected a {n + 1}-D or {n + 2}-D input, got shape {tuple(input.shape)}"
        )
    if tuple(indices.shape) != tuple(input.shape):
        raise ShapeError(
            f"{op}(): Expected shape of indices to be same as that of the input tensor "
            f"({tuple(input.shape)}) but got indices tensor with shape {tuple(indices.shape)}"
        )
    k = _tuple(op, "kernel_size", kernel_size, n, 1)
    empty = stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0)
    s = k if empty else _tuple(op, "stride", stride, n, 1)
    p = _tuple(op, "padding", padding, n, 0)
    batched = input.ndim == n + 2
    x = input if batched else input.unsqueeze(0)
    idx = indices if batched else indices.unsqueeze(0)
    spatial = tuple(x.shape[2:])
    default = tuple((spatial[d] - 1) * s[d] - 2 * p[d] + k[d] for d in range(n))
    if output_size is None:
        out = default
    else:
        out = tuple(operator.index(e) for e in output_size)
        if len(out) == n + 2:
            out = out[2:]
        if len(out) != n:
            raise ValueError(
                f"{op}(): output_size should be a sequence containing {n} or {n + 2} elements, "
                f"but it has a length of '{len(out)}'"
            )
        for d in range(n):
            lo, hi = default[d] - s[d], default[d] + s[d]
            if not lo < out[d] < hi:
                raise ValueError(
                    f'{op}(): invalid output_size "{out}" (dim {d} must be between {lo} and {hi})'
                )
    nb, c = x.shape[:2]
    plane = math.prod(out)
    flat_idx = idx.reshape(nb, c, math.prod(spatial))
    # a bounds check only (the graph does not depend on it): not a host read a capture refuses
    arr = host_quiet(flat_idx) if flat_idx.numel() else None
    if arr is not None and (int(arr.min()) < 0 or int(arr.max()) >= plane):
        raise IndexError(
            f"{op}(): Found an invalid max index {int(arr.max())} (output volumes "
            f"are of size {plane})"
        )
    zeros = x.new_zeros((nb, c, plane))
    y = zeros.scatter(2, flat_idx, x.reshape(nb, c, math.prod(spatial))).reshape((nb, c) + out)
    return y if batched else y.squeeze(0)


def max_unpool1d(
    input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None
) -> Tensor:
    """The partial inverse of max_pool1d (torch.nn.functional.max_unpool1d): each value put
    back at its index of the length (L - 1) * stride - 2 * padding + kernel_size (or
    output_size), zeros elsewhere."""
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(
    input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None
) -> Tensor:
    """The partial inverse of max_pool2d (torch.nn.functional.max_unpool2d): values scattered
    to their flat H*W indices, zeros elsewhere."""
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(
    input: Tensor, indices: Tensor, kernel_size, stride=None, padding=0, output_size=None
) -> Tensor:
    """The partial inverse of max_pool3d (torch.nn.functional.max_unpool3d): values scattered
    to their flat D*H*W indices, zeros elsewhere."""
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)


def _lp(op, n, input, norm_type, kernel_size, stride, ceil_mode, avg):
    _check_tensor(op, input)
    k = _tuple(op, "kernel_size", kernel_size, n, 1)
    norm_type = float(norm_type)
    out = avg(input.pow(norm_type), k if n > 1 else k[0], stride, 0, ceil_mode)
    return (sgn(out) * relu(out.abs())).mul(math.prod(k)).pow(1.0 / norm_type)


def lp_pool1d(
    input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False
) -> Tensor:
    """Power-average pooling over [N, C, L] (torch.nn.functional.lp_pool1d):
    (sum over the window of x^p)^(1/p)."""
    return _lp("lp_pool1d", 1, input, norm_type, kernel_size, stride, ceil_mode, avg_pool1d)


def lp_pool2d(
    input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False
) -> Tensor:
    """Power-average pooling over [N, C, H, W] (torch.nn.functional.lp_pool2d)."""
    return _lp("lp_pool2d", 2, input, norm_type, kernel_size, stride, ceil_mode, avg_pool2d)


def lp_pool3d(
    input: Tensor, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False
) -> Tensor:
    """Power-average pooling over [N, C, D, H, W] (torch.nn.functional.lp_pool3d)."""
    return _lp("lp_pool3d", 3, input, norm_type, kernel_size, stride, ceil_mode, avg_pool3d)


def max_pool1d_with_indices(
    input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
    return_indices: bool = False,
):  # fmt: skip
    """max_pool1d returning (values, indices) whatever return_indices says (PyTorch's name)."""
    return max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(
    input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
    return_indices: bool = False,
):  # fmt: skip
    """max_pool2d returning (values, indices) (PyTorch's name)."""
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(
    input: Tensor, kernel_size, stride=None, padding=0, dilation=1, ceil_mode: bool = False,
    return_indices: bool = False,
):  # fmt: skip
    """max_pool3d returning (values, indices) (PyTorch's name)."""
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """adaptive_max_pool1d returning (values, indices) (PyTorch's name)."""
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """adaptive_max_pool2d returning (values, indices) (PyTorch's name)."""
    return adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size, return_indices: bool = False):
    """adaptive_max_pool3d returning (values, indices) (PyTorch's name)."""
    return adaptive_max_pool3d(input, output_size, True)

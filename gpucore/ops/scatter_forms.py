"""Writes and reads by position, as compositions (gradients from the composed ops, on every
backend): put (flat positions; accumulate through index_put), index_reduce (through
scatter_reduce; their in-place forms are in inplace_forms.py), select_scatter, slice_scatter,
diagonal_scatter (a clone written through the view: CopySlices' gradient), as_strided and
as_strided_scatter (positions computed from size, stride and offset over a contiguous tensor's
elements: a copy, not a view), unravel_index.

kernels: none (the composed ops').
"""

from __future__ import annotations

import math

import numpy as np

from .. import dtypes as D
from ..creation import tensor as _tensor
from ..errors import DTypeError, GpucoreIndexError, ShapeError
from ..tensor import Tensor
from .api import public, type_name
from .common import host_quiet, wrap_dim
from .elementwise import where
from .scatter import scatter_reduce
from .shorthands_more import index_put


def _int(op: str, name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{op}(): argument '{name}' must be int, not {type_name(v)}")
    return int(v)


@public("put")
def put(input: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """A copy of input with the elements at the flat positions ``index`` (int64; negative count
    from the end) set to ``source``'s values (added with accumulate), as torch.put."""
    if index.dtype is not D.int64:
        raise DTypeError(f"put(): index must be an int64 tensor, got {index.dtype}")
    if source.dtype is not input.dtype:
        raise DTypeError(
            f"put(): self and source expected to have the same dtype, got {input.dtype} and "
            f"{source.dtype}"
        )
    if source.numel() != index.numel():
        raise GpucoreIndexError(
            f"put(): source and index must have the same number of elements, got "
            f"source.numel() = {source.numel()}, index.numel() = {index.numel()}"
        )
    n = input.numel()
    idx = index.reshape(-1)
    if idx.numel():
        # a bounds check only (the graph does not depend on it): not a host read a capture refuses
        arr = host_quiet(idx)
        lo, hi = int(arr.min()), int(arr.max())
        if lo < -n or hi >= n:
            raise GpucoreIndexError(
                f"put(): index values must be in [-{n}, {n}) for a tensor of {n} elements, got "
                f"values in [{lo}, {hi}]"
            )
    idx = where(idx < 0, idx + n, idx)
    flat = input.reshape(-1)
    return index_put(flat, (idx,), source.reshape(-1), accumulate).reshape(tuple(input.shape))


_REDUCES = ("prod", "mean", "amax", "amin")


@public("index_reduce")
def index_reduce(
    input: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
    include_self: bool = True,
) -> Tensor:  # fmt: skip
    """A copy of input where the slices ``index`` names along ``dim`` are reduced with
    ``source``'s slices (reduce 'prod', 'mean', 'amax' or 'amin'; input's own values take part
    unless include_self=False), as torch.index_reduce."""
    if reduce not in _REDUCES:
        raise ValueError(f"index_reduce(): reduce must be one of {_REDUCES}, got {reduce!r}")
    d = wrap_dim(dim, max(input.ndim, 1), "index_reduce()")
    if index.ndim > 1 or index.dtype not in (D.int64, D.int32):
        raise ShapeError(
            f"index_reduce(): index must be a 1-D int64 or int32 tensor, got {index.dtype} of "
            f"shape {tuple(index.shape)}"
        )
    if source.dtype is not input.dtype:
        raise DTypeError(
            f"index_reduce(): self ({input.dtype}) and source ({source.dtype}) must have the same "
            "dtype"
        )
    if (
        source.ndim != input.ndim
        or (input.ndim and source.shape[d] != index.numel())
        or any(source.shape[k] != input.shape[k] for k in range(input.ndim) if k != d)
    ):
        raise ShapeError(
            f"index_reduce(): source {tuple(source.shape)} must have input's shape "
            f"{tuple(input.shape)} except along dim {d}, where it has index's length "
            f"{index.numel()}"
        )
    if input.ndim == 0:
        return scatter_reduce(input.reshape(1), 0, index.to(D.int64).reshape(-1), source.reshape(1),
                              reduce, include_self=include_self).reshape(())  # fmt: skip
    view = [1] * input.ndim
    view[d] = index.numel()
    idx = index.to(D.int64).reshape(view).expand(tuple(source.shape))
    return scatter_reduce(input, d, idx, source, reduce, include_self=include_self)


def _written(op: str, input: Tensor, src: Tensor, key) -> Tensor:
    """A clone of input with ``clone[key] = src`` (src must have the region's shape)."""
    out = input.clone()
    region = out[key]
    if tuple(region.shape) != tuple(src.shape):
        raise ShapeError(
            f"{op}(): src has shape {tuple(src.shape)} but the embedded region has shape "
            f"{tuple(region.shape)}"
        )
    out[key] = src  # cast to input's dtype, as PyTorch
    return out


@public("select_scatter")
def select_scatter(input: Tensor, src: Tensor, dim: int, index: int) -> Tensor:
    """A copy of input with ``src`` embedded at ``index`` along ``dim`` (the slice
    ``input.select(dim, index)`` replaced), as torch.select_scatter."""
    if input.ndim == 0:
        raise ShapeError("select_scatter(): cannot select from a 0-d tensor")
    d = wrap_dim(dim, input.ndim, "select_scatter()")
    i = _int("select_scatter", "index", index)
    n = input.shape[d]
    if not -n <= i < n:
        raise GpucoreIndexError(f"select_scatter(): index {i} out of range for dim {d} of size {n}")
    return _written("select_scatter", input, src, (slice(None),) * d + (i,))


@public("slice_scatter")
def slice_scatter(
    input: Tensor, src: Tensor, dim: int = 0, start=None, end=None, step: int = 1
) -> Tensor:
    """A copy of input with ``src`` embedded in the slice ``start:end:step`` along ``dim``, as
    torch.slice_scatter."""
    if input.ndim == 0:
        raise ShapeError("slice_scatter(): cannot slice a 0-d tensor")
    d = wrap_dim(dim, input.ndim, "slice_scatter()")
    if _int("slice_scatter", "step", step) <= 0:
        raise ValueError(f"slice_scatter(): step must be positive, got {step}")
    s = slice(None if start is None else _int("slice_scatter", "start", start),
              None if end is None else _int("slice_scatter", "end", end), step)  # fmt: skip
    return _written("slice_scatter", input, src, (slice(None),) * d + (s,))


@public("diagonal_scatter")
def diagonal_scatter(
    input: Tensor, src: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1
) -> Tensor:
    """A copy of input with ``src`` written on its diagonal (``input.diagonal(offset, dim1,
    dim2)``'s elements), as torch.diagonal_scatter."""
    out = input.clone()
    diag = out.diagonal(offset, dim1, dim2)
    if tuple(diag.shape) != tuple(src.shape):
        raise ShapeError(
            f"diagonal_scatter(): src has shape {tuple(src.shape)} but the diagonal has shape "
            f"{tuple(diag.shape)}"
        )
    diag.copy_(src)  # cast to input's dtype, as PyTorch
    return out


def _strided_index(op: str, input: Tensor, size, stride, storage_offset) -> Tensor:
    """int64 positions [size] into input's flat elements: offset + sum(i_k * stride_k)."""
    if not isinstance(size, (tuple, list)) or not isinstance(stride, (tuple, list)):
        raise TypeError(f"{op}(): size and stride must be sequences of ints")
    size = [_int(op, "size", s) for s in size]
    stride = [_int(op, "stride", s) for s in stride]
    if len(size) != len(stride):
        raise ShapeError(f"{op}(): mismatch in length of strides and shape ({size} and {stride})")
    if any(s < 0 for s in size) or any(s < 0 for s in stride):
        raise ValueError(f"{op}(): size and stride must be non-negative, got {size} and {stride}")
    if not input.is_contiguous():
        raise ShapeError(
            f"{op}(): gpucore reads positions of a contiguous tensor's elements; call "
            ".contiguous() first (a non-contiguous view's storage is not addressable here)"
        )
    off = 0 if storage_offset is None else _int(op, "storage_offset", storage_offset)
    pos = np.full(tuple(size), off, np.int64)
    for k, (n, s) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[k] = n
        pos = pos + (np.arange(n, dtype=np.int64) * s).reshape(shape)
    if pos.size and (pos.min() < 0 or pos.max() >= input.numel()):
        raise ShapeError(
            f"{op}(): size {tuple(size)}, stride {tuple(stride)} and offset {off} reach element "
            f"{int(pos.max())}, out of bounds for a tensor of {input.numel()} elements"
        )
    return _tensor(pos, device=input.device)


@public("as_strided")
def as_strided(input: Tensor, size, stride, storage_offset=None) -> Tensor:
    """The elements of contiguous ``input`` at ``storage_offset + sum(i_k * stride_k)`` for
    each index of ``size``, as torch.as_strided, but a copy, not a view (differentiable:
    overlapping positions sum their gradients, as PyTorch's)."""
    pos = _strided_index("as_strided", input, size, stride, storage_offset)
    return input.reshape(-1).index_select(0, pos.reshape(-1)).reshape(tuple(pos.shape))


@public("as_strided_scatter")
def as_strided_scatter(input: Tensor, src: Tensor, size, stride, storage_offset=None) -> Tensor:
    """A copy of contiguous input with ``src`` written at the positions ``as_strided(input,
    size, stride, storage_offset)`` reads, as torch.as_strided_scatter."""
    pos = _strided_index("as_strided_scatter", input, size, stride, storage_offset)
    if tuple(src.shape) != tuple(pos.shape):
        raise ShapeError(
            f"as_strided_scatter(): src has shape {tuple(src.shape)}, expected {tuple(pos.shape)}"
        )
    if src.dtype is not input.dtype:  # cast to input's dtype, as PyTorch
        src = src.to(input.dtype)
    flat = input.reshape(-1)
    return index_put(flat, (pos.reshape(-1),), src.reshape(-1)).reshape(tuple(input.shape))


@public("unravel_index", method=False)
def unravel_index(indices: Tensor, shape) -> tuple:
    """The coordinates of flat ``indices`` in a tensor of ``shape``: one int64 tensor per dim,
    each of indices' shape, as torch.unravel_index (computed with floor division and remainder,
    so indices wrap as PyTorch's)."""
    if indices.dtype.is_floating_point or indices.dtype is D.bool_:
        raise TypeError(
            f"unravel_index(): expected 'indices' to be integer dtype, got {indices.dtype}"
        )
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    if not isinstance(shape, (tuple, list)) or not all(
        isinstance(s, (int, np.integer)) and not isinstance(s, bool) for s in shape
    ):
        raise TypeError(
            f"unravel_index(): shape must be an int or a sequence of ints, got {shape!r}"
        )
    if any(s < 0 for s in shape):
        raise ValueError(f"unravel_index(): shape must be non-negative, got {tuple(shape)}")
    if math.prod(shape) == 0 and indices.numel():
        raise ValueError("unravel_index(): cannot unravel into a shape with no elements")
    idx = indices.to(D.int64)
    if math.prod(shape) == 0:  # no indices to unravel: empty coordinates, as PyTorch's
        return tuple(idx.clone() for _ in shape)
    out = []
    stride = math.prod(shape)
    for s in shape:
        stride //= s
        out.append((idx // stride) % s)
    return tuple(out)

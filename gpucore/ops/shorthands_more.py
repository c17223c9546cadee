"""More thin PyTorch forms (compositions): index_put (+ Tensor.index_put_, accumulate with
repeated indices adding up), unique_consecutive, trapezoid / trapz / cumulative_trapezoid,
absolute (abs's alias) and adjoint (the transpose of the last two dims: the conjugate transpose
of a real tensor).

kernels: none (the composed ops').
"""

from __future__ import annotations

import math

from .. import _caller_warnings as caller_warnings
from .. import dtypes as D
from ..errors import ArgumentTypeError, DTypeError, ShapeError
from ..tensor import Tensor
from .api import public, type_name
from .common import wrap_dim
from .joining import cat
from .registry import apply
from .scan import cumsum
from .scatter import index_add
from .unary import ABS


@public("index_put", inplace=True, saves_self=False)
def index_put(input: Tensor, indices, values, accumulate: bool = False) -> Tensor:
    """A copy of input with ``input[indices] = values`` (``indices`` a tuple of int64 / bool
    tensors, one per leading dim), or ``+=`` with ``accumulate=True``, where repeated indices
    add up, as torch.index_put."""
    if not isinstance(indices, (tuple, list)) or not all(isinstance(i, Tensor) for i in indices):
        raise ArgumentTypeError(
            f"index_put(): indices must be a tuple of Tensors, not {type_name(indices)}"
        )
    if not isinstance(values, Tensor):
        raise ArgumentTypeError(f"index_put(): values must be a Tensor, not {type_name(values)}")
    if values.dtype is not input.dtype:
        raise DTypeError(
            f"index_put(): values ({values.dtype}) must have input's dtype ({input.dtype}), as "
            "in PyTorch; convert them with .to(input.dtype)"
        )
    if not accumulate:
        out = input.clone()
        out[tuple(indices)] = values
        return out
    idx = []
    for i in indices:
        if i.dtype is D.bool_:
            idx.extend(i.nonzero().unbind(1))
        elif i.dtype is D.int64 or i.dtype is D.int32:
            idx.append(i.long())
        else:
            raise DTypeError(f"index_put(): indices must be int64 or bool tensors, got {i.dtype}")
    k = len(idx)
    if k > input.ndim:
        raise ShapeError(f"index_put(): {k} indices for a tensor of {input.ndim} dims")
    lead, rest = tuple(input.shape[:k]), tuple(input.shape[k:])
    lin = None
    for d, i in enumerate(idx):
        i = i + (i < 0).long() * lead[d]  # negative indices count from the end
        lin = i if lin is None else lin * lead[d] + i
    flat = input.reshape((math.prod(lead),) + rest)
    src = values.expand(tuple(lin.shape) + rest).reshape((-1,) + rest)
    return index_add(flat, 0, lin.reshape(-1), src).reshape(tuple(input.shape))


@public("unique_consecutive")
def unique_consecutive(
    input: Tensor, return_inverse: bool = False, return_counts: bool = False, dim=None
):
    """input with each run of equal consecutive elements (slices along ``dim``) kept once, as
    torch.unique_consecutive; with ``return_inverse`` each element's run index, with
    ``return_counts`` each run's length (int64)."""
    x = input.reshape(-1) if dim is None else input
    d = 0 if dim is None else wrap_dim(dim, input.ndim, "unique_consecutive()")
    n = x.shape[d] if x.ndim else 1
    if x.ndim == 0 or n == 0:
        keep = x.new_ones((n,), dtype=D.bool_)
    else:
        a, b = x.narrow(d, 1, n - 1), x.narrow(d, 0, n - 1)
        ne = a != b
        if x.ndim > 1:
            ne = ne.movedim(d, 0).reshape(n - 1, -1).any(1)
        keep = cat([x.new_ones((1,), dtype=D.bool_), ne])
    starts = keep.nonzero().reshape(-1)
    out = (x.reshape(1) if x.ndim == 0 else x).index_select(d, starts)
    result = [out]
    if return_inverse:
        inv = cumsum(keep.long(), 0) - 1
        result.append(inv.reshape(tuple(input.shape)) if dim is None else inv)
    if return_counts:
        ends = cat([starts[1:], starts.new_full((1,), n)]) if starts.numel() else starts
        result.append(ends - starts)
    return result[0] if len(result) == 1 else tuple(result)


def _trapz_parts(name: str, y: Tensor, x, dx, dim: int):
    d = wrap_dim(dim, y.ndim, f"{name}()")
    n = y.shape[d]
    m, s = max(n - 1, 0), min(n, 1)  # n = 0: empty parts
    avg = (y.narrow(d, s, m) + y.narrow(d, 0, m)) * 0.5
    if x is None:
        return avg * (1.0 if dx is None else dx), d
    if not isinstance(x, Tensor):
        raise ArgumentTypeError(f"{name}(): x must be a Tensor, not {type_name(x)}")
    if x.ndim == 1:
        if x.shape[0] != n:
            raise ShapeError(f"{name}(): x has {x.shape[0]} points but y has {n} along dim {d}")
        dxs = x[1:] - x[:-1]
        shape = [1] * y.ndim
        shape[d] = m
        return avg * dxs.reshape(shape), d
    xd = wrap_dim(dim, x.ndim, f"{name}()")
    return avg * (x.narrow(xd, s, m) - x.narrow(xd, 0, m)), d


@public("trapezoid", "trapz", method=False)
def trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """The trapezoidal rule along ``dim``: samples spaced ``dx`` apart (1 by default) or at the
    points ``x`` (1-D, or y's shape), as torch.trapezoid (torch.trapz)."""
    if not y.dtype.is_floating_point:
        y = y.to(D.default_float())
    parts, d = _trapz_parts("trapezoid", y, x, dx, dim)
    return parts.sum(d)


@public("cumulative_trapezoid", method=False)
def cumulative_trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
    """The running trapezoidal integral along ``dim`` (one value fewer than y there), as
    torch.cumulative_trapezoid."""
    if not y.dtype.is_floating_point:
        y = y.to(D.default_float())
    parts, d = _trapz_parts("cumulative_trapezoid", y, x, dx, dim)
    return parts.cumsum(d)


@public("absolute", inplace=True)
def absolute(input: Tensor) -> Tensor:
    """|input|: torch.absolute, the alias of abs."""
    return apply(ABS, input)


@public("adjoint")
def adjoint(input: Tensor) -> Tensor:
    """The conjugate transpose of the last two dims, a view, as torch.adjoint (gpucore's
    tensors are real: the transpose)."""
    if input.ndim == 0:  # PyTorch: deprecated there, the tensor itself (as a view)
        caller_warnings.warn(
            "adjoint() is deprecated on 0-D tensors. Consider using x.conj().",
            UserWarning,
        )
        return input.view(())
    if input.ndim < 2:
        raise ShapeError(
            f"adjoint(): tensor.adjoint() is only supported on matrices or batches of matrices. "
            f"Got {input.ndim}-D tensor."
        )
    return input.transpose(-2, -1)


# ----------------------------------------------------------------------------- real-tensor forms
# gpucore's tensors are real and never carry a lazy conjugate or negative bit: PyTorch's answers
# for such tensors.
@public("isreal")
def isreal(input: Tensor) -> Tensor:
    """True where input is real: everywhere for gpucore's (real) tensors, as torch.isreal."""
    return input.new_ones(tuple(input.shape), dtype=D.bool_)


@public("resolve_conj", "resolve_neg")
def resolve_conj(input: Tensor) -> Tensor:
    """input itself (no lazy conjugate or negative bit to materialize), as torch.resolve_conj /
    torch.resolve_neg on a real tensor."""
    return input


@public("is_conj", "is_neg")
def is_conj(input: Tensor) -> bool:
    """False: gpucore's tensors carry no lazy conjugate or negative bit (torch.is_conj /
    torch.is_neg)."""
    return False


@public("unsafe_chunk")
def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """torch.unsafe_chunk: chunk (PyTorch's form without view-aliasing checks)."""
    return input.chunk(chunks, dim)


@public("unsafe_split")
def unsafe_split(input: Tensor, split_size: int, dim: int = 0) -> tuple:
    """torch.unsafe_split: split (PyTorch's form without view-aliasing checks)."""
    return input.split(split_size, dim)


@public("unsafe_split_with_sizes")
def unsafe_split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """torch.unsafe_split_with_sizes: split_with_sizes (without view-aliasing checks)."""
    return input.split_with_sizes(split_sizes, dim)


@public("nonzero_static")
def nonzero_static(input: Tensor, *, size: int, fill_value: int = -1) -> Tensor:
    """The first ``size`` rows of nonzero(input), padded with fill_value rows to exactly
    ``size`` rows ([size, input.ndim] int64), as torch.nonzero_static."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ValueError(f"nonzero_static(): size must be a non-negative int, got {size!r}")
    idx = input.nonzero()[:size]
    if idx.shape[0] == size:
        return idx
    pad = idx.new_full((size - idx.shape[0], idx.shape[1]), fill_value)
    return cat([idx, pad], 0)

"""Comparisons and masked selection as compositions: equal, allclose, isclose, masked_select,
masked_scatter (so they run, and masked_select/masked_scatter differentiate, on every backend).

kernels: none (the composed ops').
"""

from __future__ import annotations

from .. import dtypes as D
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import as_operands, broadcast_shapes
from .elementwise import where


@public("equal")
def equal(input: Tensor, other: Tensor) -> bool:
    """True if both tensors have one shape and equal elements (NaN is never equal), as
    torch.equal."""
    if tuple(input.shape) != tuple(other.shape):
        return False
    a, b = as_operands("equal", input, other)
    return bool((a == b).all())


def _check_tol(op: str, rtol, atol) -> None:
    for name, v in (("rtol", rtol), ("atol", atol)):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise TypeError(f"{op}(): {name} must be a number, got {type(v).__name__}")
        if v < 0:
            raise ValueError(f"{op}(): {name} must be greater than or equal to zero, got {v}")


@public("isclose")
def isclose(
    input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> Tensor:
    """``|input - other| <= atol + rtol * |other|`` elementwise (equal infinities are close; NaN
    only with ``equal_nan``), as torch.isclose; one dtype for both (as PyTorch)."""
    _check_tol("isclose", rtol, atol)
    if input.dtype is not other.dtype:
        raise DTypeError(
            f"isclose(): input ({input.dtype}) and other ({other.dtype}) must have one dtype"
        )
    if input.dtype is D.bool_:
        return input == other
    same = input == other
    if equal_nan and input.dtype.is_floating_point:
        same = same | ((input != input) & (other != other))
    a, b = input, other
    if not a.dtype.is_floating_point:
        a, b = a.to(D.float64), b.to(D.float64)
    diff = (a - b).abs()
    close = diff <= atol + rtol * b.abs()
    # an infinite difference (inf vs a finite value, inf vs -inf) is never close
    finite = diff != float("inf")
    return same | (close & finite)


@public("allclose")
def allclose(
    input: Tensor, other: Tensor, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False
) -> bool:
    """True if every element is ``isclose`` (after broadcasting), as torch.allclose."""
    return bool(isclose(input, other, rtol, atol, equal_nan).all())


def _check_mask(op: str, mask: Tensor) -> None:
    if mask.dtype is not D.bool_ and mask.dtype is not D.uint8:
        raise DTypeError(f"{op}(): expected a bool mask, got {mask.dtype}")


@public("masked_select")
def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """The elements of input where ``mask`` (broadcast with input) is True, as a 1-D tensor in
    row-major order, as torch.masked_select."""
    _check_mask("masked_select", mask)
    shape = broadcast_shapes("masked_select", input.shape, mask.shape)
    x = input.expand(shape) if tuple(input.shape) != shape else input
    m = mask.expand(shape) if tuple(mask.shape) != shape else mask
    return x.reshape(-1)[m.to(D.bool_).reshape(-1)]


@public("masked_scatter", inplace=True, saves_self=False)
def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """input with the positions where ``mask`` (broadcast with input) is True filled, in
    row-major order, with the first elements of ``source``, as torch.masked_scatter (source
    needs at least as many elements as mask has True values)."""
    _check_mask("masked_scatter", mask)
    if source.dtype is not input.dtype:
        raise DTypeError(
            f"masked_scatter(): source ({source.dtype}) must have input's dtype ({input.dtype})"
        )
    shape = broadcast_shapes("masked_scatter", input.shape, mask.shape)
    m = mask.to(D.bool_).expand(shape).reshape(-1)
    count = int(m.sum())
    if count > source.numel():
        raise ShapeError(
            f"masked_scatter(): mask has {count} True values but source has only "
            f"{source.numel()} elements"
        )
    flat = input.expand(shape).reshape(-1)
    # position k of the output takes source[rank of k among the True positions]
    rank = m.to(D.int64).cumsum(0) - 1
    picked = source.reshape(-1)[where(m, rank, 0)] if flat.numel() else flat
    return where(m, picked, flat).reshape(shape)

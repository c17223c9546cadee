"""Joining and reshaping compositions of cat, reshape and indexing: atleast_1d/2d/3d, tile,
vstack/row_stack, hstack, column_stack, dstack, split_with_sizes, hsplit/vsplit/dsplit, unflatten,
block_diag,
diag_embed, diagflat, cartesian_prod, combinations and Tensor.type_as (gradients from the
composed ops, on every backend).

kernels: none (the composed ops').
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .. import dtypes as D
from ..creation import tensor as _tensor
from ..errors import ShapeError
from ..tensor import Tensor
from .api import public
from .common import scalar_tensor, tensor_list, wrap_dim
from .elementwise import where
from .joining import cat, split, stack, tensor_split
from .rearrange import meshgrid


def _atleast(op: str, nd: int, tensors):
    if len(tensors) == 1 and isinstance(tensors[0], Tensor):
        return _lift(tensors[0], nd)
    seq = tensors[0] if len(tensors) == 1 else tensors
    return tuple(_lift(t, nd) for t in tensor_list(op, seq))


def _lift(t: Tensor, nd: int) -> Tensor:
    if t.ndim >= nd:
        return t
    if t.ndim == 0:
        return t.reshape((1,) * nd)
    if t.ndim == 1:
        return t.reshape((1, t.shape[0], 1)[:nd] if nd == 3 else (1, t.shape[0]))
    return t.unsqueeze(-1)  # 2-D to 3-D: (m, n, 1)


@public("atleast_1d", method=False)
def atleast_1d(*tensors):
    """Each tensor with at least one dim (0-d becomes shape (1,)); one tensor in, one out."""
    return _atleast("atleast_1d", 1, tensors)


@public("atleast_2d", method=False)
def atleast_2d(*tensors):
    """Each tensor with at least two dims ((n,) becomes (1, n))."""
    return _atleast("atleast_2d", 2, tensors)


@public("atleast_3d", method=False)
def atleast_3d(*tensors):
    """Each tensor with at least three dims ((n,) becomes (1, n, 1), (m, n) becomes (m, n, 1))."""
    return _atleast("atleast_3d", 3, tensors)


@public("tile")
def tile(input: Tensor, dims) -> Tensor:
    """input repeated ``dims[i]`` times along each dim, as torch.tile (fewer dims than input:
    ones are prepended to dims; more: input gets leading dims of size 1)."""
    if isinstance(dims, int):
        dims = (dims,)
    dims = tuple(dims)
    if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) for d in dims):
        raise TypeError(f"tile(): dims must be a tuple of ints, got {dims!r}")
    if any(d < 0 for d in dims):
        raise ValueError(f"tile(): dims must be non-negative, got {dims}")
    dims = (1,) * (input.ndim - len(dims)) + dims
    return input.repeat(*dims)


@public("vstack", "row_stack", method=False)
def vstack(tensors) -> Tensor:
    """cat along dim 0 after atleast_2d, as torch.vstack."""
    return cat([_lift(t, 2) for t in tensor_list("vstack", tensors)], 0)


@public("hstack", method=False)
def hstack(tensors) -> Tensor:
    """cat along dim 1 (dim 0 for 1-D tensors) after atleast_1d, as torch.hstack."""
    ts = [_lift(t, 1) for t in tensor_list("hstack", tensors)]
    return cat(ts, 0 if ts and ts[0].ndim == 1 else 1)


@public("column_stack", method=False)
def column_stack(tensors) -> Tensor:
    """0-d and 1-D tensors as columns, then cat along dim 1, as torch.column_stack."""
    ts = tensor_list("column_stack", tensors)
    return cat([t.reshape(-1, 1) if t.ndim <= 1 else t for t in ts], 1)


@public("dstack", method=False)
def dstack(tensors) -> Tensor:
    """cat along dim 2 after atleast_3d, as torch.dstack."""
    return cat([_lift(t, 3) for t in tensor_list("dstack", tensors)], 2)


@public("split_with_sizes")
def split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """Views of consecutive pieces of the given sizes along dim (they must sum to its size)."""
    sizes = list(split_sizes)
    if any(isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 0 for s in sizes):
        raise ValueError(f"split_with_sizes(): sizes must be non-negative ints, got {sizes}")
    return split(input, sizes, dim)


def _dir_split(op: str, input: Tensor, indices_or_sections, dim: int, min_dims: int) -> tuple:
    if input.ndim < min_dims:
        raise ShapeError(
            f"{op}(): needs a tensor of at least {min_dims} dims, got shape {tuple(input.shape)}"
        )
    ios = indices_or_sections
    if isinstance(ios, (int, np.integer)) and not isinstance(ios, bool):
        n = input.shape[dim]
        if ios <= 0 or n % ios:
            raise ShapeError(
                f"{op}(): dim {dim} of size {n} cannot be split into {ios} equal sections; "
                "give a divisor of the size, or a list of indices"
            )
    return tensor_split(input, ios, dim)


@public("hsplit")
def hsplit(input: Tensor, indices_or_sections) -> tuple:
    """tensor_split along dim 1 (dim 0 of a 1-D tensor); equal sections must divide it."""
    return _dir_split("hsplit", input, indices_or_sections, 1 if input.ndim > 1 else 0, 1)


@public("vsplit")
def vsplit(input: Tensor, indices_or_sections) -> tuple:
    """tensor_split along dim 0 of a tensor of at least 2 dims; equal sections must divide it."""
    return _dir_split("vsplit", input, indices_or_sections, 0, 2)


@public("dsplit")
def dsplit(input: Tensor, indices_or_sections) -> tuple:
    """tensor_split along dim 2 of a tensor of at least 3 dims; equal sections must divide it."""
    return _dir_split("dsplit", input, indices_or_sections, 2, 3)


@public("unflatten")
def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
    """dim expanded into ``sizes`` (one of them may be -1), as torch.unflatten."""
    d = wrap_dim(dim, input.ndim, "unflatten")
    sizes = tuple(int(s) for s in sizes)
    if not sizes:
        raise ValueError("unflatten(): sizes must be non-empty")
    n = input.shape[d]
    if sizes.count(-1) > 1:
        raise ValueError(f"unflatten(): only one size may be -1, got {sizes}")
    known = math.prod(s for s in sizes if s != -1)
    if -1 in sizes:
        if known == 0 or n % known:
            raise ShapeError(f"unflatten(): sizes {sizes} do not fit dim {d} of size {n}")
        sizes = tuple(n // known if s == -1 else s for s in sizes)
    elif known != n:
        raise ShapeError(
            f"unflatten(): sizes {sizes} multiply to {known} but dim {d} has size {n}; the "
            "product must equal the dim's size"
        )
    shape = tuple(input.shape)
    return input.reshape(shape[:d] + sizes + shape[d + 1 :])


@public("type_as", function=False)
def type_as(input: Tensor, other: Tensor) -> Tensor:
    """input converted to other's dtype (input itself when it has it), as Tensor.type_as."""
    return input if input.dtype is other.dtype else input.to(other.dtype)


@public("block_diag", method=False)
def block_diag(*tensors) -> Tensor:
    """The tensors (0-, 1- or 2-D) as the blocks of a block-diagonal matrix, as
    torch.block_diag (dtypes promoted)."""
    ts = tensor_list("block_diag", tensors)
    blocks = []
    for i, t in enumerate(ts):
        if t.ndim > 2:
            raise ShapeError(
                f"block_diag(): input tensors must have 2 or fewer dims; tensor {i} has {t.ndim}"
            )
        blocks.append(t.reshape(1, -1) if t.ndim < 2 else t)
    if not blocks:
        return _tensor(np.zeros((1, 0)), dtype=D.default_float())  # as PyTorch
    dt = blocks[0].dtype
    for b in blocks[1:]:
        dt = D.promote(dt, b.dtype)
    width = sum(b.shape[1] for b in blocks)
    rows, col = [], 0
    for b in blocks:
        b = b.to(dt)
        r, c = b.shape
        left = b.new_zeros(r, col)
        right = b.new_zeros(r, width - col - c)
        rows.append(cat([left, b, right], 1))
        col += c
    return cat(rows, 0)


@public("diag_embed")
def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """The last dim of input as the ``offset``-th diagonal of matrices in dims (dim1, dim2) of
    a result with one more dim (zeros elsewhere), as torch.diag_embed."""
    nd = input.ndim + 1
    d1, d2 = wrap_dim(dim1, nd, "diag_embed"), wrap_dim(dim2, nd, "diag_embed")
    if d1 == d2:
        raise ValueError(f"diag_embed(): diagonal dimensions cannot be identical {dim1}, {dim2}")
    x = input if input.ndim else input.reshape(1)
    n = x.shape[-1]
    m = n + abs(offset)
    r, c = np.indices((m, m))
    on = (c - r) == offset
    idx = np.where(on, r if offset >= 0 else c, 0)
    if n == 0:
        out = x.new_zeros(tuple(x.shape[:-1]) + (m, m))
    else:
        vals = x[..., _tensor(idx.reshape(-1), device=x.device)].reshape(
            tuple(x.shape[:-1]) + (m, m)
        )
        zero = scalar_tensor(False if x.dtype is D.bool_ else 0, x.dtype)
        out = where(_tensor(on, device=x.device), vals, zero)
    if (d1, d2) == (nd - 2, nd - 1):
        return out
    batch = iter(range(nd - 2))
    perm = [nd - 2 if i == d1 else nd - 1 if i == d2 else next(batch) for i in range(nd)]
    return out.permute(perm)


@public("diagflat")
def diagflat(input: Tensor, offset: int = 0) -> Tensor:
    """The flattened input as the ``offset``-th diagonal of a square matrix, as torch.diagflat."""
    return diag_embed(input.reshape(-1), offset)


@public("cartesian_prod", method=False)
def cartesian_prod(*tensors) -> Tensor:
    """The cartesian product of 1-D tensors as rows of a 2-D tensor (one tensor: itself), as
    torch.cartesian_prod."""
    ts = tensor_list("cartesian_prod", tensors)
    for i, t in enumerate(ts):
        if t.ndim != 1:
            raise ShapeError(f"cartesian_prod(): expects 1-D tensors; tensor {i} is {t.ndim}-D")
    if len(ts) == 1:
        return ts[0]
    grids = meshgrid(*ts, indexing="ij")
    return stack([g.reshape(-1) for g in grids], 1)


@public("combinations")
def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
    """The length-``r`` combinations of a 1-D tensor's elements as rows (as itertools'
    combinations, or combinations_with_replacement), as torch.combinations."""
    if input.ndim != 1:
        raise ShapeError(f"combinations(): expects a 1-D tensor, got {input.ndim}-D")
    if isinstance(r, bool) or not isinstance(r, int) or r < 0:
        raise ValueError(f"combinations(): r must be a non-negative int, got {r!r}")
    if r == 0:
        return input.new_empty(0)
    gen = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = np.array(list(gen(range(input.shape[0]), r)), np.int64).reshape(-1, r)
    if idx.shape[0] == 0:
        return input.new_empty(0, r)
    return input[_tensor(idx, device=input.device)]

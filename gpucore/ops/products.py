"""Products as compositions of matmul and elementwise ops: dot, mv, cross (torch.cross and
linalg.cross), kron, tensordot (gradients from the composed ops, on every backend).

kernels: none (the composed ops').
"""

from __future__ import annotations

import math
import warnings

from .. import dtypes as D
from ..errors import DTypeError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import broadcast_shapes, wrap_dim
from .joining import cat
from .linalg import matmul


def _same_dtype(op: str, a: Tensor, b: Tensor) -> None:
    if a.dtype is not b.dtype:
        raise DTypeError(
            f"{op}(): expected both tensors to have the same dtype, but got {a.dtype} and {b.dtype}"
        )


@public("dot")
def dot(input: Tensor, tensor: Tensor) -> Tensor:
    """The inner product of two 1-D tensors of one size and dtype, as torch.dot."""
    if input.ndim != 1 or tensor.ndim != 1:
        raise ShapeError(
            f"dot(): 1D tensors expected, but got {input.ndim}D and {tensor.ndim}D tensors"
        )
    if input.shape[0] != tensor.shape[0]:
        raise ShapeError(
            f"dot(): inconsistent tensor size, expected tensor [{input.shape[0]}] and src "
            f"[{tensor.shape[0]}] to have the same number of elements"
        )
    _same_dtype("dot", input, tensor)
    return matmul(input, tensor)


@public("mv")
def mv(input: Tensor, vec: Tensor) -> Tensor:
    """Matrix (n x m) times vector (m), as torch.mv."""
    if input.ndim != 2 or vec.ndim != 1:
        raise ShapeError(
            f"mv(): expected a 2-D matrix and a 1-D vector, got {input.ndim}-D and {vec.ndim}-D"
        )
    if input.shape[1] != vec.shape[0]:
        raise ShapeError(
            f"mv(): size mismatch, got input ({input.shape[0]}x{input.shape[1]}), vec "
            f"({vec.shape[0]})"
        )
    _same_dtype("mv", input, vec)
    return matmul(input, vec)


def cross3(input: Tensor, other: Tensor, dim: int, op: str) -> Tensor:
    """The cross product along ``dim`` (of size 3) of broadcast inputs (dtypes promoted)."""
    shape = broadcast_shapes(op, input.shape, other.shape)
    if input.ndim != other.ndim:
        raise ShapeError(
            f"{op}(): inputs must have the same number of dimensions, got {input.ndim} and "
            f"{other.ndim}"
        )
    d = wrap_dim(dim, len(shape), op)
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise ShapeError(
            f"{op}(): dimension {dim} does not have size 3 (shapes {tuple(input.shape)} and "
            f"{tuple(other.shape)})"
        )
    dt = D.promote(input.dtype, other.dtype)
    a = input.to(dt).expand(shape)
    b = other.to(dt).expand(shape)
    a0, a1, a2 = (a.narrow(d, i, 1) for i in range(3))
    b0, b1, b2 = (b.narrow(d, i, 1) for i in range(3))
    return cat([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


@public("cross")
def cross(input: Tensor, other: Tensor, dim=None) -> Tensor:
    """The cross product of 3-vectors along ``dim``, as torch.cross (dim None: the first dim of
    size 3, with PyTorch's deprecation warning; linalg.cross defaults to -1)."""
    if dim is None:
        shape = broadcast_shapes("cross", input.shape, other.shape)
        sizes = [i for i, s in enumerate(shape) if s == 3]
        if not sizes:
            raise ShapeError(f"cross(): no dimension of size 3 in input {tuple(input.shape)}")
        warnings.warn(
            "Using torch.cross without specifying the dim arg is deprecated; pass dim",
            UserWarning,
            stacklevel=3,
        )
        dim = sizes[0]
    return cross3(input, other, dim, "cross")


@public("kron")
def kron(input: Tensor, other: Tensor) -> Tensor:
    """The Kronecker product, as torch.kron (the smaller-rank input gets leading 1 dims)."""
    nd = max(input.ndim, other.ndim)
    a = input.reshape((1,) * (nd - input.ndim) + tuple(input.shape))
    b = other.reshape((1,) * (nd - other.ndim) + tuple(other.shape))
    sa, sb = tuple(a.shape), tuple(b.shape)
    inter_a = tuple(x for s in sa for x in (s, 1))  # a0, 1, a1, 1, ...
    inter_b = tuple(x for s in sb for x in (1, s))  # 1, b0, 1, b1, ...
    out = a.reshape(inter_a) * b.reshape(inter_b)
    return out.reshape(tuple(x * y for x, y in zip(sa, sb)))


@public("tensordot", method=False)
def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """Sum over the last ``dims`` dims of a and the first ``dims`` of b (an int), or over the
    dims listed in ``dims = (dims_a, dims_b)``, as torch.tensordot."""
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise ValueError(f"tensordot(): dims must be non-negative, got {dims}")
        if dims > a.ndim or dims > b.ndim:
            raise ShapeError(
                f"tensordot(): dims={dims} exceeds the inputs' dims {a.ndim}, {b.ndim}"
            )
        da = list(range(a.ndim - dims, a.ndim))
        db = list(range(dims))
    else:
        if len(dims) != 2:
            raise ValueError(f"tensordot(): dims must be an int or a pair of lists, got {dims!r}")
        da, db = ([d] if isinstance(d, int) else list(d) for d in dims)
        if len(da) != len(db):
            raise ValueError(f"tensordot(): both dim lists should have same length, got {dims}")
        da = [wrap_dim(d, a.ndim, "tensordot") for d in da]
        db = [wrap_dim(d, b.ndim, "tensordot") for d in db]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise ShapeError(
                f"tensordot(): contracted dimensions need to match, but first has size "
                f"{a.shape[i]} in dim {i} and second has size {b.shape[j]} in dim {j}"
            )
    _same_dtype("tensordot", a, b)
    fa = [i for i in range(a.ndim) if i not in da]
    fb = [i for i in range(b.ndim) if i not in db]
    k = math.prod(a.shape[i] for i in da)
    am = a.permute(fa + da).reshape(-1, k)
    bm = b.permute(db + fb).reshape(k, -1)
    out = matmul(am, bm)
    return out.reshape(tuple(a.shape[i] for i in fa) + tuple(b.shape[i] for i in fb))

"""Rearranging elements: flip/fliplr/flipud, roll, rot90, repeat, repeat_interleave, meshgrid,
tril/triu and tril_indices/triu_indices, diag, all compositions of views, cat, indexing and where
(no kernels, gradients for free on every backend); and the view op ``diagonal`` (a strided view of
its input, as PyTorch's; its backward writes the gradient into a zero tensor's diagonal).

kernels: none (the composed ops'; diagonal's ``view`` function).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..creation import _check_device, _finish, _store, zeros
from ..creation import tensor as _tensor
from ..errors import ArgumentTypeError, DTypeError, ShapeError
from ..tensor import Tensor
from .api import public, type_name
from .common import args_or_keyword, scalar_tensor, wrap_dim
from .elementwise import where
from .indexing import COPY_SLICES, getitem, index_select
from .joining import cat
from .registry import apply, defop
from .samples import Sample, uniform


def _int_list(value, op: str, what: str) -> list:
    """An int or a sequence of ints as a list (dims, shifts, repeats)."""
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    for v in items:
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ArgumentTypeError(f"{op}(): {what} must be ints, got {type_name(v)}")
    return [int(v) for v in items]


def _dims(dims, ndim: int, op: str) -> list:
    out = [wrap_dim(d, ndim, f"{op}()") for d in _int_list(dims, op, "dims")]
    if len(set(out)) != len(out):
        raise ShapeError(f"{op}(): dims {tuple(dims)} repeats a dim")
    return out


# ----------------------------------------------------------------------------- flip, roll
@public("flip")
def flip(input: Tensor, *args, dims=None) -> Tensor:
    """A copy of input with the order of its elements reversed along ``dims`` (a sequence, also
    as ``dims=``, or varargs as ``x.flip(0, 1)``), as torch.flip."""
    dims = args if dims is None else args_or_keyword(args, dims, "flip", "dims")
    if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
        dims = dims[0]
    ds = _dims(dims, input.ndim, "flip")
    if input.ndim == 0:
        return input.clone()
    key = tuple(slice(None, None, -1) if d in ds else slice(None) for d in range(input.ndim))
    return getitem(input, key).clone()


@public("fliplr")
def fliplr(input: Tensor) -> Tensor:
    """input reversed along dim 1 (columns), as torch.fliplr; needs at least 2 dims."""
    if input.ndim < 2:
        raise ShapeError(f"fliplr(): input must have at least 2 dims, got shape {input.shape}")
    return flip(input, (1,))


@public("flipud")
def flipud(input: Tensor) -> Tensor:
    """input reversed along dim 0 (rows), as torch.flipud; needs at least 1 dim."""
    if input.ndim < 1:
        raise ShapeError("flipud(): input must have at least 1 dim, got a 0-d tensor")
    return flip(input, (0,))


@public("roll")
def roll(input: Tensor, shifts, dims=None) -> Tensor:
    """input with elements shifted by ``shifts`` along ``dims`` (wrapping around); without dims
    the flattened tensor is rolled and reshaped back, as torch.roll."""
    sh = _int_list(shifts, "roll", "shifts")
    if dims is None:
        if len(sh) != 1:
            raise ShapeError(f"roll(): shifts {tuple(sh)} need dims of the same length")
        return roll(input.reshape(-1), sh, 0).reshape(input.shape)
    ds = [wrap_dim(d, input.ndim, "roll()") for d in _int_list(dims, "roll", "dims")]
    if len(sh) != len(ds):
        raise ShapeError(
            f"roll(): shifts and dims must have the same length, got {len(sh)} and {len(ds)}"
        )
    out = input
    for s, d in zip(sh, ds):
        n = out.shape[d] if out.ndim else 1
        s = s % n if n else 0
        if s and out.ndim:
            out = cat([out.narrow(d, n - s, s), out.narrow(d, 0, n - s)], d)
    return out if out is not input else input.clone()


@public("rot90")
def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
    """input rotated by 90 degrees ``k`` times in the plane of ``dims`` (from the first towards
    the second), as torch.rot90."""
    ds = _dims(dims, input.ndim, "rot90")
    if len(ds) != 2:
        raise ShapeError(f"rot90(): dims must name 2 dims, got {tuple(dims)}")
    k = _int_list(k, "rot90", "k")[0] % 4
    a, b = ds
    if k == 1:
        return flip(input, (b,)).transpose(a, b)
    if k == 2:
        return flip(input, (a, b))
    if k == 3:
        return flip(input, (a,)).transpose(a, b)
    return input.clone()


# ----------------------------------------------------------------------------- repeat
@public("repeat", function=False)
def repeat(input: Tensor, *sizes, repeats=None) -> Tensor:
    """input tiled ``sizes`` times along each dim (leading new dims when there are more sizes
    than dims), as Tensor.repeat."""
    sizes = sizes if repeats is None else args_or_keyword(sizes, repeats, "repeat", "repeats")
    reps = _int_list(
        sizes[0] if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes,
        "repeat",
        "repeats",
    )
    if len(reps) < input.ndim:
        raise ShapeError(
            f"repeat(): the number of repeats ({len(reps)}) can not be smaller than the number "
            f"of dims of the tensor ({input.ndim}, shape {tuple(input.shape)})"
        )
    if any(r < 0 for r in reps):
        raise ShapeError(f"repeat(): repeats must be non-negative, got {tuple(reps)}")
    shape = (1,) * (len(reps) - input.ndim) + tuple(input.shape)
    inter, big = [], []
    for r, s in zip(reps, shape):
        inter += [1, s]
        big += [r, s]
    out = input.reshape(inter).expand(*big)
    return out.reshape([r * s for r, s in zip(reps, shape)])


@public("repeat_interleave")
def repeat_interleave(input: Tensor, repeats=None, dim=None, *, output_size=None) -> Tensor:
    """Each element repeated ``repeats`` times (an int, or a 1-D int tensor of one count per
    element) along ``dim`` (the flattened input when None), as torch.repeat_interleave.
    ``repeat_interleave(counts)`` alone gives the indices ``0, 0, 1, ...`` the counts repeat."""
    if repeats is None:  # repeat_interleave(repeats): the indices
        counts = input
        if counts.ndim != 1 or counts.dtype not in (D.int64, D.int32):
            raise ShapeError("repeat_interleave(): repeats must be a 1-D int tensor")
        c = counts._host().astype(np.int64)
        if (c < 0).any():
            raise ShapeError("repeat_interleave(): repeats must be non-negative")
        return _tensor(np.repeat(np.arange(c.size), c), device=counts.device)
    if dim is None:
        input, d = input.reshape(-1), 0
    else:
        d = wrap_dim(dim, input.ndim, "repeat_interleave()")
        if input.ndim == 0:
            input = input.reshape(1)
    n = input.shape[d]
    if isinstance(repeats, Tensor):
        if repeats.dtype not in (D.int64, D.int32) or repeats.ndim > 1:
            raise DTypeError(
                f"repeat_interleave(): repeats must be an int or a 0-d/1-D int tensor, got "
                f"{repeats.dtype} of shape {tuple(repeats.shape)}"
            )
        c = repeats._host().astype(np.int64).reshape(-1)
        if c.size == 1:
            repeats = int(c[0])
        elif c.size != n:
            raise ShapeError(
                f"repeat_interleave(): repeats has {c.size} counts but dim {d} of the input "
                f"has size {n}"
            )
        else:
            if (c < 0).any():
                raise ShapeError("repeat_interleave(): repeats must be non-negative")
            idx = _tensor(np.repeat(np.arange(n), c), device=input.device)
            out = index_select(input, d, idx)
            _check_output_size(out, d, output_size)
            return out
    r = _int_list(repeats, "repeat_interleave", "repeats")[0]
    if r < 0:
        raise ShapeError(f"repeat_interleave(): repeats must be non-negative, got {r}")
    shape = list(input.shape)
    big = shape[: d + 1] + [r] + shape[d + 1 :]
    out = input.unsqueeze(d + 1).expand(*big)
    out = out.reshape(shape[:d] + [n * r] + shape[d + 1 :])
    _check_output_size(out, d, output_size)
    return out


def _check_output_size(out: Tensor, d: int, output_size) -> None:
    if output_size is not None and out.shape[d] != output_size:
        raise ShapeError(
            f"repeat_interleave(): output_size {output_size} does not match the repeated "
            f"size {out.shape[d]}"
        )


# ----------------------------------------------------------------------------- meshgrid
@public("meshgrid", method=False)
def meshgrid(*tensors, indexing: str | None = None) -> tuple:
    """Coordinate grids from 1-D tensors (expanded views), as torch.meshgrid: with
    ``indexing='ij'`` (the default) grid i varies along dim i; ``'xy'`` swaps the first two dims
    (Cartesian, as numpy's default)."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise ArgumentTypeError(
                f"meshgrid(): expected Tensors, got {type_name(t)} at position {i}"
            )
        if t.ndim > 1:
            raise ShapeError(f"meshgrid(): expects 0-d or 1-D tensors, got shape {t.shape}")
    if indexing is None:
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid(): indexing must be 'ij' or 'xy', got {indexing!r}")
    if not tensors:
        raise ValueError("meshgrid(): expects at least one tensor")
    dt = tensors[0].dtype
    if any(t.dtype is not dt for t in tensors):
        raise DTypeError(
            "meshgrid(): expects all tensors to have the same dtype, got "
            f"{', '.join(str(t.dtype) for t in tensors)}"
        )
    sizes = [t.numel() for t in tensors]
    order = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        order[0], order[1] = 1, 0
    shape = [sizes[i] for i in order]
    out = []
    for i, t in enumerate(tensors):
        view = [1] * len(tensors)
        view[order.index(i)] = -1
        out.append(t.reshape(view).expand(*shape))
    return tuple(out)


# ----------------------------------------------------------------------------- tril / triu
def _triangle(input: Tensor, diagonal: int, lower: bool, op: str) -> Tensor:
    if input.ndim < 2:
        raise ShapeError(f"{op}(): input must have at least 2 dims, got shape {tuple(input.shape)}")
    diagonal = _int_list(diagonal, op, "diagonal")[0]
    n, m = input.shape[-2], input.shape[-1]
    keep = np.tri(n, m, diagonal, dtype=bool) if lower else ~np.tri(n, m, diagonal - 1, dtype=bool)
    dev = input.device if input._dev is not None else None
    mask = _tensor(keep, device=dev)
    zero = scalar_tensor(False if input.dtype is D.bool_ else 0, input.dtype)
    return where(mask, input, zero)


@public("tril", inplace=True, saves_self=False)
def tril(input: Tensor, diagonal: int = 0) -> Tensor:
    """The lower triangle of the last two dims (entries with column - row <= diagonal; the rest
    zero), as torch.tril."""
    return _triangle(input, diagonal, True, "tril")


@public("triu", inplace=True, saves_self=False)
def triu(input: Tensor, diagonal: int = 0) -> Tensor:
    """The upper triangle of the last two dims (entries with column - row >= diagonal; the rest
    zero), as torch.triu."""
    return _triangle(input, diagonal, False, "triu")


def _tri_indices(row: int, col: int, offset: int, lower: bool, dtype, device, op: str):
    be = _check_device(device, op)
    for v in (row, col, offset):
        _int_list(v, op, "row, col and offset")
    if row < 0 or col < 0:
        raise ShapeError(f"{op}(): row and col must be non-negative, got {row} and {col}")
    keep = (
        np.tri(row, col, offset, dtype=bool) if lower else ~np.tri(row, col, offset - 1, dtype=bool)
    )
    dt = D.as_dtype(dtype) if dtype is not None else D.int64
    return _finish(_store(np.stack(np.nonzero(keep)).reshape(2, -1), dt), dt, False, be)


@public("tril_indices", method=False)
def tril_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """The [2, N] coordinates of the lower triangle of a row x col matrix (row-major), as
    torch.tril_indices."""
    return _tri_indices(row, col, offset, True, dtype, device, "tril_indices")


@public("triu_indices", method=False)
def triu_indices(row: int, col: int, offset: int = 0, *, dtype=None, device=None) -> Tensor:
    """The [2, N] coordinates of the upper triangle of a row x col matrix (row-major), as
    torch.triu_indices."""
    return _tri_indices(row, col, offset, False, dtype, device, "triu_indices")


# ----------------------------------------------------------------------------- diagonals
def _diagonal_view(a: np.ndarray, offset: int, dim1: int, dim2: int) -> np.ndarray:
    """The diagonal as a writable strided view of ``a`` (numpy's np.diagonal is read-only): the
    other dims in order, then the diagonal, whose stride is the sum of the two dims' strides."""
    start = [slice(None)] * a.ndim
    start[dim2 if offset >= 0 else dim1] = slice(abs(offset), None)
    x = a[tuple(start)]
    rest = [d for d in range(a.ndim) if d not in (dim1, dim2)]
    shape = tuple(x.shape[d] for d in rest) + (min(x.shape[dim1], x.shape[dim2]),)
    strides = tuple(x.strides[d] for d in rest) + (x.strides[dim1] + x.strides[dim2],)
    return np.lib.stride_tricks.as_strided(x, shape, strides)


def _diagonal_bwd(ctx, g):
    # zeros of the input's shape with g written into its diagonal view (differentiable in g)
    z = zeros(ctx.attrs["src"], dtype=g.dtype)
    view_ops = ((DIAGONAL, ctx.attrs),)
    return apply(COPY_SLICES, z, g, view_ops=view_ops, src_shape=tuple(g.shape))


def _np_diagonal(x, offset, dim1, dim2, src):
    return np.diagonal(x, offset, dim1, dim2)


DIAGONAL = defop(
    "diagonal",
    view=lambda a, offset, dim1, dim2, src: _diagonal_view(a, offset, dim1, dim2),
    backward=_diagonal_bwd,
    samples=lambda: [
        Sample(uniform(3, 4, seed=1), offset=0, dim1=0, dim2=1, src=(3, 4), ref=_np_diagonal),
        Sample(uniform(3, 4, seed=2), offset=2, dim1=0, dim2=1, src=(3, 4), ref=_np_diagonal),
        Sample(uniform(4, 3, seed=3), offset=-1, dim1=1, dim2=0, src=(4, 3), ref=_np_diagonal),
        Sample(uniform(2, 3, 4, seed=4), offset=1, dim1=2, dim2=0, src=(2, 3, 4), ref=_np_diagonal),
        Sample(uniform(2, 3, seed=5), offset=5, dim1=0, dim2=1, src=(2, 3), ref=_np_diagonal),
    ],
)


@public("diagonal")
def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """The diagonal of the (dim1, dim2) planes, ``offset`` above (> 0) or below (< 0) the main
    one, as a new last dim, as torch.diagonal: a view (writes through it change ``input``)."""
    if input.ndim < 2:
        raise ShapeError(f"diagonal(): input must have at least 2 dims, got shape {input.shape}")
    a, b = wrap_dim(dim1, input.ndim, "diagonal()"), wrap_dim(dim2, input.ndim, "diagonal()")
    if a == b:
        raise ShapeError(f"diagonal(): dim1 and dim2 are both {a}; they must differ")
    offset = _int_list(offset, "diagonal", "offset")[0]
    return apply(DIAGONAL, input, offset=offset, dim1=a, dim2=b, src=tuple(input.shape))


_diagonal = diagonal  # diag's parameter of that name hides the function


@public("diag")
def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """A 1-D input as the ``diagonal``-th diagonal of a square matrix (zeros elsewhere); the
    ``diagonal``-th diagonal of a 2-D input, as torch.diag."""
    k = _int_list(diagonal, "diag", "diagonal")[0]
    if input.ndim == 2:
        return _diagonal(input, k)
    if input.ndim != 1:
        raise ShapeError(f"diag(): input must be 1-D or 2-D, got shape {tuple(input.shape)}")
    n = input.shape[0] + abs(k)
    r, c = np.indices((n, n))
    on = (c - r) == k
    idx = np.where(on, r if k >= 0 else c, 0)
    if input.shape[0] == 0:
        return input.new_zeros(n, n)
    vals = getitem(input, (_tensor(idx),))
    zero = scalar_tensor(False if input.dtype is D.bool_ else 0, input.dtype)
    return where(_tensor(on, device=input.device if input._dev is not None else None), vals, zero)

"""Sorting and searching: sort (values + int64 indices), topk, searchsorted; argsort, msort,
kthvalue, median, nanmedian and bucketize as compositions.

Order as PyTorch: NaN is the greatest value (last ascending, first descending); ``sort`` is stable
(equal elements keep their order, descending too).

kernels: backends/cpu/kernels/sorting.py (numpy); none on Vulkan (these ops run on the CPU).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from .. import dtypes as D
from ..creation import full_like, zeros
from ..creation import tensor as _tensor
from ..errors import ArgumentTypeError, DTypeError, GpucoreIndexError, ShapeError
from ..tensor import Tensor
from .api import public, type_name
from .common import wrap_dim
from .indexing import scatter_add
from .registry import apply, defop
from .samples import Sample, uniform

_SORT = namedtuple("sort", ["values", "indices"])
_TOPK = namedtuple("topk", ["values", "indices"])
_KTH = namedtuple("kthvalue", ["values", "indices"])
_MEDIAN = namedtuple("median", ["values", "indices"])
_NANMEDIAN = namedtuple("nanmedian", ["values", "indices"])


def _np_argsort(x: np.ndarray, axis: int, descending: bool) -> np.ndarray:
    """Stable argsort along ``axis`` with NaN greatest (the CPU kernels' and the samples' rule):
    descending sorts the reversed array ascending and reverses back, so equal elements keep
    their order and NaNs come first."""
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    idx = np.argsort(np.flip(x, axis), axis=axis, kind="stable")
    return (x.shape[axis] - 1) - np.flip(idx, axis)


def _np_sort(x, dim, descending, shape=None):
    if x.ndim == 0:
        return x, np.zeros((), np.int64)
    idx = _np_argsort(x, dim, descending)
    return np.take_along_axis(x, idx, dim), idx


def _np_topk(x, k, dim, largest, shape=None):
    v, i = _np_sort(x, dim, largest)
    if x.ndim == 0:
        return v, i
    return np.take(v, range(k), axis=dim), np.take(i, range(k), axis=dim)


def _scatter_back(ctx, g):
    """Gradient of sort/topk values: each value's gradient goes back to where it came from."""
    (idx,) = ctx.saved
    shape = ctx.attrs["shape"]
    if len(shape) == 0:
        return g
    return scatter_add(zeros(shape, dtype=g.dtype), ctx.attrs["dim"], idx, g)


def _ties(*shape, seed):
    """Values with ties and a NaN-free, well-separated spread (ties keep the gradient exact)."""
    return np.round(uniform(*shape, seed=seed) * 2) / 2


def _sort_samples():
    def s(x, dim, desc, **kw):
        return Sample(x, dim=dim, descending=desc, shape=x.shape, ref=_np_sort, **kw)

    nan = uniform(3, 6, seed=5)
    nan[0, 1] = nan[2, 4] = nan[2, 0] = np.nan
    return [
        s(uniform(3, 5, seed=1), 1, False),
        s(uniform(4, 3, seed=2), 0, True),
        s(_ties(2, 7, seed=3), 1, True, grad=False),  # ties: stable order
        s(_ties(2, 7, seed=4), 1, False, grad=False),
        s(nan, 1, False, grad=False),  # NaN last ascending, first descending
        s(nan, 1, True, grad=False),
        s(uniform(seed=6), 0, False),
        s(uniform(2, 0, 3, seed=7), 1, False),
        s(uniform(2, 3, 4, seed=8), 2, True),
    ]


def _sort_infer(x, dim, descending, shape):
    return [(x.shape, x.dtype), (x.shape, D.int64)]


SORT = defop(
    "sort",
    infer=_sort_infer,
    save_outputs=(1,),
    backward=_scatter_back,
    samples=_sort_samples,
)


def _topk_infer(x, k, dim, largest, shape):
    if x.ndim == 0:
        return [((), x.dtype), ((), D.int64)]
    out = tuple(k if d == dim else s for d, s in enumerate(x.shape))
    return [(out, x.dtype), (out, D.int64)]


def _topk_samples():
    def s(x, k, dim, largest, **kw):
        return Sample(x, k=k, dim=dim, largest=largest, shape=x.shape, ref=_np_topk, **kw)

    nan = uniform(3, 6, seed=15)
    nan[0, 1] = nan[2, 4] = np.nan
    return [
        s(uniform(3, 8, seed=11), 3, 1, True),
        s(uniform(5, 4, seed=12), 2, 0, False),
        s(uniform(2, 3, 9, seed=13), 9, 2, True),
        s(uniform(4, seed=14), 0, 0, True),
        s(nan, 2, 1, True, grad=False),  # NaN is the largest
        s(nan, 2, 1, False, grad=False),
        s(uniform(seed=16), 1, 0, True),
        s(uniform(50, 30, seed=17), 4, 1, True),  # the partition path (k small)
    ]


TOPK = defop(
    "topk",
    infer=_topk_infer,
    save_outputs=(1,),
    backward=_scatter_back,
    samples=_topk_samples,
)


def _searchsorted_infer(seq, values, right, out_int32):
    return (values.shape, D.int32 if out_int32 else D.int64)


def _np_searchsorted(seq, values, right, out_int32):
    side = "right" if right else "left"
    dt = np.int32 if out_int32 else np.int64
    if seq.ndim == 1:
        return np.searchsorted(seq, values, side=side).astype(dt)
    s2, v2 = seq.reshape(-1, seq.shape[-1]), values.reshape(-1, values.shape[-1])
    out = [np.searchsorted(a, b, side=side) for a, b in zip(s2, v2)]
    return np.array(out, dt).reshape(values.shape)


def _searchsorted_samples():
    seq = np.sort(uniform(7, seed=21))
    rows = np.sort(uniform(3, 6, seed=22), axis=1)
    ties = np.array([0.0, 0.5, 0.5, 0.5, 1.0, 2.0])
    return [
        Sample(seq, uniform(4, 5, seed=23), right=False, out_int32=False, ref=_np_searchsorted),
        Sample(rows, uniform(3, 4, seed=24), right=True, out_int32=False, ref=_np_searchsorted),
        Sample(
            ties, np.array([0.5, -1.0, 2.0, 3.0]), right=False, out_int32=True, ref=_np_searchsorted
        ),
        Sample(
            ties, np.array([0.5, -1.0, 2.0, 3.0]), right=True, out_int32=False, ref=_np_searchsorted
        ),
    ]


SEARCHSORTED = defop("searchsorted", infer=_searchsorted_infer, samples=_searchsorted_samples)


# ----------------------------------------------------------------------------- functions
def _sort_dim(input: Tensor, dim, op: str) -> int:
    return wrap_dim(dim, input.ndim, f"{op}()")


@public("sort")
def sort(input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> tuple:
    """(values, indices) of input sorted along ``dim``, as torch.sort: always stable here
    (``stable`` is accepted), NaN greatest, indices int64."""
    d = _sort_dim(input, dim, "sort")
    v, i = apply(SORT, input, dim=d, descending=bool(descending), shape=tuple(input.shape))
    return _SORT(v, i)


@public("argsort")
def argsort(
    input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False
) -> Tensor:
    """int64 indices that sort input along ``dim`` (stable; NaN greatest), as torch.argsort."""
    return sort(input, dim, descending).indices


@public("msort")
def msort(input: Tensor) -> Tensor:
    """input sorted along its first dim (ascending), as torch.msort."""
    return sort(input, 0).values


@public("topk")
def topk(
    input: Tensor,
    k: int,
    dim: int = -1,
    largest: bool = True,
    sorted: bool = True,  # noqa: A002 - PyTorch's name
) -> tuple:
    """The ``k`` largest (``largest=False``: smallest) elements along ``dim`` and their int64
    indices, as torch.topk; NaN counts as the largest value. Results are always sorted."""
    d = _sort_dim(input, dim, "topk")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise DTypeError(f"topk(): k must be an int, got {type(k).__name__}")
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise GpucoreIndexError(
            f"topk(): k {k} is out of range for dim {d} of size {n} (input shape "
            f"{tuple(input.shape)}); expected 0 <= k <= {n}"
        )
    v, i = apply(TOPK, input, k=int(k), dim=d, largest=bool(largest), shape=tuple(input.shape))
    return _TOPK(v, i)


def _pick(input: Tensor, dim: int, keepdim: bool, pos, op: str) -> tuple:
    """(values, indices) at sorted position ``pos`` (an int, or an int64 tensor with a size-1
    ``dim``) along ``dim`` of input sorted ascending."""
    if input.ndim == 0:
        return input.clone(), zeros((), dtype=D.int64)
    if input.shape[dim] == 0:
        raise GpucoreIndexError(
            f"{op}(): cannot take the {op} of dim {dim} of size 0 (shape {tuple(input.shape)})"
        )
    v, i = sort(input, dim)
    if isinstance(pos, int):
        v, i = v.narrow(dim, pos, 1), i.narrow(dim, pos, 1)
    else:
        v, i = v.gather(dim, pos), i.gather(dim, pos)
    if not keepdim:
        v, i = v.squeeze(dim), i.squeeze(dim)
    return v.contiguous(), i.contiguous()


@public("kthvalue")
def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> tuple:
    """(values, indices) of the ``k``-th smallest element along ``dim`` (k from 1), as
    torch.kthvalue."""
    d = _sort_dim(input, dim, "kthvalue")
    n = input.shape[d] if input.ndim else 1
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
        raise GpucoreIndexError(
            f"kthvalue(): k {k!r} is out of range for dim {d} of size {n} (input shape "
            f"{tuple(input.shape)}); expected 1 <= k <= {n}"
        )
    return _KTH(*_pick(input, d, keepdim, int(k) - 1, "kthvalue"))


def _median(input: Tensor, dim, keepdim: bool, skip_nan: bool, op: str):
    if dim is None:
        flat = input.reshape(-1)
        if flat.numel() == 0:
            return full_like(flat.sum(), float("nan")) if flat.dtype.is_floating_point else flat
        return _median(flat, 0, False, skip_nan, op)[0]
    d = _sort_dim(input, dim, op)
    if input.ndim == 0 or not input.dtype.is_floating_point:
        n = input.shape[d] if input.ndim else 1
        return _pick(input, d, keepdim, (n - 1) // 2, op)
    n = input.shape[d]
    nans = (input != input).sum(d, keepdim=True)._host()
    if skip_nan:  # the lower median of the non-NaN values (position 0: all NaN)
        pos = np.maximum((n - nans - 1) // 2, 0)
    else:  # NaN when there is one: its first occurrence, where sorting put it (NaN last)
        pos = np.where(nans > 0, n - nans, (n - 1) // 2)
    return _pick(input, d, keepdim, _tensor(pos.astype(np.int64)), op)


@public("median")
def median(input: Tensor, dim=None, keepdim: bool = False):
    """The lower median (the smaller middle value for an even count), NaN if there is one, as
    torch.median: a 0-d tensor without ``dim``; (values, indices) along ``dim``."""
    out = _median(input, dim, keepdim, False, "median")
    return out if dim is None else _MEDIAN(*out)


@public("nanmedian")
def nanmedian(input: Tensor, dim=None, keepdim: bool = False):
    """median ignoring NaNs (NaN only where every value is NaN), as torch.nanmedian."""
    out = _median(input, dim, keepdim, True, "nanmedian")
    return out if dim is None else _NANMEDIAN(*out)


@public("searchsorted", method=False)
def searchsorted(
    sorted_sequence: Tensor,
    input,
    *,
    out_int32: bool = False,
    right: bool = False,
    side: str | None = None,
    sorter: Tensor | None = None,
) -> Tensor:
    """Indices where ``input``'s values would be inserted into ``sorted_sequence`` (along its
    last dim) to keep it sorted, as torch.searchsorted: the first such place, or the last with
    ``right=True`` / ``side='right'``; ``sorter`` gives the order of an unsorted sequence."""
    if side is not None:
        if side not in ("left", "right"):
            raise ValueError(f"searchsorted(): side must be 'left' or 'right', got {side!r}")
        if right and side == "left":
            raise ValueError("searchsorted(): side='left' contradicts right=True")
        right = side == "right"
    scalar = not isinstance(input, Tensor)
    if scalar and (isinstance(input, bool) or not isinstance(input, (int, float, np.number))):
        raise ArgumentTypeError(
            "searchsorted(): argument 'input' (position 2) must be Tensor or a number, not "
            f"{type_name(input)}"
        )
    values = _tensor(input, dtype=sorted_sequence.dtype) if scalar else input
    if values.ndim == 0:
        values = values.reshape(1)
    if sorted_sequence.ndim == 0:
        raise ShapeError("searchsorted(): sorted_sequence must have at least 1 dim, got a 0-d one")
    if sorted_sequence.ndim > 1 and tuple(sorted_sequence.shape[:-1]) != tuple(values.shape[:-1]):
        raise ShapeError(
            "searchsorted(): sorted_sequence and input must match in every dim but the last; got "
            f"shapes {tuple(sorted_sequence.shape)} and {tuple(values.shape)}"
        )
    if sorter is not None:
        if tuple(sorter.shape) != tuple(sorted_sequence.shape) or sorter.dtype is not D.int64:
            raise ShapeError(
                "searchsorted(): sorter must be an int64 tensor of sorted_sequence's shape "
                f"{tuple(sorted_sequence.shape)}, got {sorter.dtype} {tuple(sorter.shape)}"
            )
        sorted_sequence = sorted_sequence.gather(-1, sorter)
    if values.dtype is not sorted_sequence.dtype:
        dt = D.promote(values.dtype, sorted_sequence.dtype)
        values, sorted_sequence = values.to(dt), sorted_sequence.to(dt)
    out = apply(SEARCHSORTED, sorted_sequence, values, right=bool(right), out_int32=out_int32)
    return out.reshape(()) if (scalar or input.ndim == 0) else out


@public("bucketize", method=False)
def bucketize(input, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """Index of the bucket of each value of ``input`` for 1-D ``boundaries``, as
    torch.bucketize: ``boundaries[i-1] < x <= boundaries[i]`` (``right=True``: ``<= x <``)."""
    if boundaries.ndim != 1:
        raise ShapeError(
            f"bucketize(): boundaries must be 1-D, got shape {tuple(boundaries.shape)}"
        )
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)

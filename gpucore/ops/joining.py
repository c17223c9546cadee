"""Joining and splitting: cat (an op), stack, split, chunk, narrow and unbind as compositions of
cat and views.

kernels: backends/cpu/kernels/joining.py (numpy); backends/vulkan/kernels/joining.py (cat: one
strided copy per input into its slice of the output)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..errors import GpucoreIndexError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import tensor_list, wrap_dim
from .indexing import GETITEM, _real_dim
from .registry import apply, defop
from .samples import Sample, uniform


def _cat_infer(*ts, dim, sizes):
    ref = ts[0].shape
    total = 0
    for t in ts:
        if t.ndim != len(ref) or any(t.shape[i] != ref[i] for i in range(len(ref)) if i != dim):
            raise ShapeError(
                f"cat(): tensors must match in every dim but {dim}; got shapes "
                f"{', '.join(str(tuple(x.shape)) for x in ts)}"
            )
        total += t.shape[dim]
    return (ref[:dim] + (total,) + ref[dim + 1 :], ts[0].dtype)


def _cat_bwd(ctx, g):
    dim = ctx.attrs["dim"]
    out, start = [], 0
    for n in ctx.attrs["sizes"]:
        out.append(g.narrow(dim, start, n))
        start += n
    return tuple(out)


def _np_cat(*ts, dim, sizes):
    return np.concatenate(ts, axis=dim)


CAT = defop(
    "cat",
    infer=_cat_infer,
    backward=_cat_bwd,
    samples=lambda: [
        Sample(
            uniform(2, 3, seed=1),
            uniform(2, 1, seed=2),
            uniform(2, 4, seed=3),
            dim=1,
            sizes=(3, 1, 4),
            ref=_np_cat,
        ),
        Sample(uniform(1, 3, seed=4), uniform(2, 3, seed=5), dim=0, sizes=(1, 2), ref=_np_cat),
        Sample(
            uniform(2, 0, 3, seed=6), uniform(2, 2, 3, seed=7), dim=1, sizes=(0, 2), ref=_np_cat
        ),
        Sample(uniform(3, seed=8), dim=0, sizes=(3,), ref=_np_cat),
    ],
)


@public("cat", "concat", "concatenate", method=False)
def cat(tensors, dim: int = 0) -> Tensor:
    """Concatenate tensors along an existing dim (dtypes promoted)."""
    tensors = tensor_list("cat", tensors)
    if not tensors:
        raise ValueError("cat(): expected a non-empty list of tensors")
    # PyTorch skips legacy empty 1-D tensors of shape (0,).
    nonempty = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or tensors[:1]
    dt = nonempty[0].dtype
    for t in nonempty[1:]:
        dt = D.promote(dt, t.dtype)
    nonempty = [t if t.dtype is dt else t.to(dt) for t in nonempty]
    for i, t in enumerate(nonempty):
        if t.ndim == 0:
            raise ShapeError(
                f"cat(): zero-dimensional tensor (at position {i}) cannot be concatenated; "
                "use stack() or unsqueeze(0) it first"
            )
    d = wrap_dim(dim, nonempty[0].ndim, "cat")
    sizes = tuple(t.shape[d] if t.ndim > d else 0 for t in nonempty)
    return apply(CAT, *nonempty, dim=d, sizes=sizes)


@public("stack", method=False)
def stack(tensors, dim: int = 0) -> Tensor:
    """Join tensors of equal shape along a new dim."""
    tensors = tensor_list("stack", tensors)
    if not tensors:
        raise ValueError("stack(): expected a non-empty list of tensors")
    shp = tensors[0].shape
    for t in tensors:
        if t.shape != shp:
            raise ShapeError(
                f"stack(): all tensors must have the same shape; got "
                f"{', '.join(str(tuple(x.shape)) for x in tensors)}"
            )
    d = wrap_dim(dim, len(shp) + 1, "stack")
    return cat([t.unsqueeze(d) for t in tensors], d)


@public("narrow")
def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """A view of ``length`` entries of dim starting at ``start``."""
    d = _real_dim(dim, input, "narrow")
    size = input.shape[d]
    if start < 0:
        start += size
    if start < 0 or length < 0 or start + length > size:
        raise GpucoreIndexError(
            f"narrow(): start {start} + length {length} exceeds dim {d} of size {size}"
        )
    return _view(input, (slice(None),) * d + (slice(start, start + length),))


def _view(t: Tensor, key: tuple) -> Tensor:
    """The basic-indexing view t[key] for a key of ints and slices the caller has checked
    (inside t's bounds): getitem without normalising or probing the key."""
    return apply(GETITEM, t, key=key, src=tuple(t._data.shape))


@public("split")
def split(tensor: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Views of consecutive pieces along dim: equal pieces of a given size, or given sizes."""
    d = _real_dim(dim, tensor, "split")
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        if s <= 0:
            raise ValueError(f"split(): split_size must be positive, got {s}")
        sizes = [min(s, n - i) for i in range(0, n, s)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise ShapeError(
                f"split(): sections {sizes} sum to {sum(sizes)} but dim {d} has size {n}"
            )
    out, start, pre = [], 0, (slice(None),) * d
    for s in sizes:
        out.append(_view(tensor, pre + (slice(start, start + s),)))
        start += s
    return tuple(out)


@public("chunk")
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Split into ``chunks`` pieces of ceil(size / chunks) (the last may be smaller)."""
    if chunks <= 0:
        raise ValueError(f"chunk(): chunks must be positive, got {chunks}")
    d = _real_dim(dim, input, "chunk")
    if input.shape[d] == 0:
        return tuple(narrow(input, d, 0, 0) for _ in range(chunks))  # as PyTorch: all empty
    return split(input, -(-input.shape[d] // chunks), d)


@public("unbind")
def unbind(input: Tensor, dim: int = 0) -> tuple:
    """Views of each slice along dim, with that dim removed."""
    d = _real_dim(dim, input, "unbind")
    pre = (slice(None),) * d
    return tuple(_view(input, pre + (i,)) for i in range(input.shape[d]))

"""Indexing and joining: basic indexing (views), advanced indexing (copies), gather/scatter_add,
index_select, cat/stack/split/chunk/narrow/unbind, one_hot, masked_fill."""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..errors import DTypeError, GpucoreIndexError, ShapeError
from ..tensor import Tensor
from .common import method, wrap_dim
from .registry import apply, defop

# ----------------------------------------------------------------------------- keys


def _key_part(k):
    if isinstance(k, Tensor):
        if k.dtype is D.bool_:
            return k._host()
        if k.dtype.is_floating_point:
            raise GpucoreIndexError(
                f"tensors used as indices must be long, int or bool tensors, got {k.dtype}"
            )
        if k.ndim == 0:
            return int(k.item())
        return k._host().astype(np.int64, copy=False)
    if isinstance(k, (list, np.ndarray)):
        arr = np.asarray(k)
        if arr.dtype.kind not in "biu":
            raise GpucoreIndexError(f"index lists must hold ints or bools, got {arr.dtype}")
        return arr
    if isinstance(k, bool):
        return np.asarray(k)
    if k is None or k is Ellipsis or isinstance(k, (int, slice, np.integer)):
        return k
    raise GpucoreIndexError(
        f"unsupported index {k!r} of type {type(k).__name__}; use ints, slices, None, ..., "
        "or integer/bool tensors"
    )


def normalize_key(key):
    """(numpy key tuple, is_basic) for a user's index expression."""
    if not isinstance(key, tuple):
        key = (key,)
    parts = tuple(_key_part(k) for k in key)
    basic = not any(isinstance(p, np.ndarray) for p in parts)
    return parts, basic


def _index_error(x: Tensor, key, e: Exception):
    return GpucoreIndexError(
        f"index {key!r} is out of range for a tensor of shape {tuple(x.shape)} ({e})"
    )


def _probe(x: Tensor, parts):
    """Result shape of indexing x with parts, raising our IndexError on bad keys."""
    try:
        probe = np.lib.stride_tricks.as_strided(np.zeros(1, np.uint8), x.shape, (0,) * x.ndim)
        return probe[parts].shape
    except IndexError as e:
        raise _index_error(x, parts, e) from None


def _real_dim(dim, x: Tensor, op: str) -> int:
    """wrap_dim for ops that need an actual dim (a 0-d tensor has none to index or split)."""
    if x.ndim == 0:
        raise GpucoreIndexError(
            f"{op}(): dim {dim} given but the tensor is 0-d (has no dims); reshape it to (1,) first"
        )
    return wrap_dim(dim, x.ndim, op)


# ----------------------------------------------------------------------------- ops
def _getitem_bwd(ctx, g):
    return apply(INDEX_BACKWARD, g, shape=ctx.attrs["src"], key=ctx.attrs["key"], basic=True)


def _basic_view(a, key, src):
    # Trailing Ellipsis: an all-int key gives a 0-d view, not a numpy scalar (a copy).
    return a[key] if any(k is Ellipsis for k in key) else a[key + (Ellipsis,)]


GETITEM = defop("getitem", view=_basic_view, backward=_getitem_bwd)


def _index_bwd(ctx, g):
    return apply(INDEX_BACKWARD, g, shape=ctx.attrs["src"], key=ctx.attrs["key"], basic=False)


INDEX = defop(
    "index",
    infer=lambda x, key, src: (_probe(x, key), x.dtype),
    backward=_index_bwd,
)


def _index_backward_bwd(ctx, gg):
    key = ctx.attrs["key"]
    if ctx.attrs["basic"]:
        return apply(GETITEM, gg, key=key, src=tuple(gg.shape)).contiguous()
    return apply(INDEX, gg, key=key, src=tuple(gg.shape))


INDEX_BACKWARD = defop(
    "index_backward",
    infer=lambda g, shape, key, basic: (shape, g.dtype),
    backward=_index_backward_bwd,
)


def _index_put_bwd(ctx, g):
    key, basic = ctx.attrs["key"], ctx.attrs["basic"]
    need_x, need_v = ctx.needs_input_grad
    gx = gv = None
    if need_x:
        zero = Tensor._wrap(np.zeros((), g.dtype.np), g.dtype)
        gx = apply(INDEX_PUT, g, zero, key=key, basic=basic)
    if need_v:
        gv = (
            apply(GETITEM, g, key=key, src=tuple(g.shape))
            if basic
            else apply(INDEX, g, key=key, src=tuple(g.shape))
        )
    return gx, gv


INDEX_PUT = defop(
    "index_put", infer=lambda x, v, key, basic: (x.shape, x.dtype), backward=_index_put_bwd
)


@method("__getitem__")
def getitem(input: Tensor, key) -> Tensor:
    """Basic indexing (ints, slices, None, ...) gives a view; tensor/list/bool indices copy."""
    parts, basic = normalize_key(key)
    if basic:
        _probe(input, parts)
        return apply(GETITEM, input, key=parts, src=tuple(input.shape))
    _probe(input, parts)
    return apply(INDEX, input, key=parts, src=tuple(input.shape))


@method("__setitem__")
def setitem(input: Tensor, key, value) -> None:
    """``x[key] = value`` in place (value broadcast to the indexed region)."""
    from .inplace import inplace

    parts, basic = normalize_key(key)
    region = _probe(input, parts)
    if not isinstance(value, Tensor):
        from ..creation import tensor

        value = tensor(value, dtype=input.dtype)
    if value.dtype is not input.dtype:
        value = value.to(input.dtype)
    try:
        np.broadcast_shapes(tuple(value.shape), region)
    except ValueError:
        raise ShapeError(
            f"__setitem__: value of shape {tuple(value.shape)} cannot be broadcast to the "
            f"indexed region of shape {region} (tensor shape {tuple(input.shape)})"
        ) from None
    inplace(input, lambda x: apply(INDEX_PUT, x, value, key=parts, basic=basic), saves_self=False)


# ----------------------------------------------------------------------------- gather / scatter
def _gather_infer(x, index, dim, src):
    if index.dtype is not D.int64:
        raise DTypeError(f"gather(): index must be int64, got {index.dtype}")
    if index.ndim != x.ndim:
        raise ShapeError(
            f"gather(): index has {index.ndim} dims but input has {x.ndim} "
            f"(shapes {tuple(index.shape)} and {tuple(x.shape)})"
        )
    for d in range(x.ndim):
        if d != dim and index.shape[d] > x.shape[d]:
            raise ShapeError(
                f"gather(): index shape {tuple(index.shape)} exceeds input shape "
                f"{tuple(x.shape)} in dim {d}"
            )
    return (index.shape, x.dtype)


def _gather_bwd(ctx, g):
    from ..creation import zeros

    (index,) = ctx.saved
    return scatter_add(zeros(ctx.attrs["src"], dtype=g.dtype), ctx.attrs["dim"], index, g), None


GATHER = defop("gather", infer=_gather_infer, save_inputs=(1,), backward=_gather_bwd)


def _scatter_add_bwd(ctx, g):
    (index,) = ctx.saved
    dim = ctx.attrs["dim"]
    need_x, _, need_src = ctx.needs_input_grad
    return (g if need_x else None), None, (gather(g, dim, index) if need_src else None)


SCATTER_ADD = defop(
    "scatter_add",
    infer=lambda x, index, src, dim: (x.shape, x.dtype),
    save_inputs=(1,),
    backward=_scatter_add_bwd,
)


@method("gather")
def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """out[i][j] = input[index[i][j]][j] for dim=0 (and so on), as torch.gather."""
    d = _real_dim(dim, input, "gather")
    return apply(GATHER, input, index, dim=d, src=tuple(input.shape))


@method("scatter_add")
def scatter_add(input: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """A copy of input with src added at the positions index names along dim."""
    d = _real_dim(dim, input, "scatter_add")
    if index.dtype is not D.int64:
        raise DTypeError(f"scatter_add(): index must be int64, got {index.dtype}")
    if index.ndim != input.ndim or src.ndim != input.ndim:
        raise ShapeError(
            f"scatter_add(): input, index and src must have the same number of dims; got shapes "
            f"{tuple(input.shape)}, {tuple(index.shape)}, {tuple(src.shape)}"
        )
    for i in range(input.ndim):
        if index.shape[i] > src.shape[i] or (i != d and index.shape[i] > input.shape[i]):
            raise ShapeError(
                f"scatter_add(): index shape {tuple(index.shape)} is too large for input "
                f"{tuple(input.shape)} / src {tuple(src.shape)} in dim {i}"
            )
    if src.dtype is not input.dtype:
        src = src.to(input.dtype)
    return apply(SCATTER_ADD, input, index, src, dim=d)


@method("index_select")
def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """Rows (along dim) picked by a 1-D int index tensor."""
    d = _real_dim(dim, input, "index_select")
    if index.ndim > 1:
        raise ShapeError(f"index_select(): index must be 1-D, got shape {tuple(index.shape)}")
    return getitem(input, (slice(None),) * d + (index.reshape(-1),))


@method("masked_fill")
def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """input with value where mask is True; the result keeps input's dtype (value is cast to it,
    so an int tensor filled with 1.5 holds 1, as PyTorch)."""
    from .common import scalar_tensor
    from .elementwise import where

    if isinstance(value, Tensor):
        if value.dtype is not input.dtype:
            value = value.to(input.dtype)
    else:
        value = scalar_tensor(value, input.dtype)
    return where(mask, value, input)


# ----------------------------------------------------------------------------- joining
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


CAT = defop("cat", infer=_cat_infer, backward=_cat_bwd)


def cat(tensors, dim: int = 0) -> Tensor:
    """Concatenate tensors along an existing dim (dtypes promoted)."""
    tensors = [t for t in tensors]
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


concat = cat


def stack(tensors, dim: int = 0) -> Tensor:
    """Join tensors of equal shape along a new dim."""
    tensors = list(tensors)
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


@method("narrow")
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
    return getitem(input, (slice(None),) * d + (slice(start, start + length),))


@method("split")
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
    out, start = [], 0
    for s in sizes:
        out.append(narrow(tensor, d, start, s))
        start += s
    return tuple(out)


@method("chunk")
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Split into ``chunks`` pieces of ceil(size / chunks) (the last may be smaller)."""
    if chunks <= 0:
        raise ValueError(f"chunk(): chunks must be positive, got {chunks}")
    d = _real_dim(dim, input, "chunk")
    size = -(-input.shape[d] // chunks) if input.shape[d] else 1
    return split(input, max(size, 1), d)


@method("unbind")
def unbind(input: Tensor, dim: int = 0) -> tuple:
    """Views of each slice along dim, with that dim removed."""
    d = _real_dim(dim, input, "unbind")
    return tuple(getitem(input, (slice(None),) * d + (i,)) for i in range(input.shape[d]))


ONE_HOT = defop("one_hot", infer=lambda t, num_classes: (tuple(t.shape) + (num_classes,), D.int64))


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding with a trailing class dim."""
    if tensor.dtype is not D.int64:
        raise DTypeError(f"one_hot(): expects an int64 tensor of class indices, got {tensor.dtype}")
    data = tensor._host()
    if num_classes < 0:
        if data.size == 0:
            raise ValueError("one_hot(): cannot infer num_classes from an empty tensor")
        num_classes = int(data.max()) + 1
    if data.size and (data.min() < 0 or data.max() >= num_classes):
        raise GpucoreIndexError(
            f"one_hot(): class values must be in [0, {num_classes}); got values in "
            f"[{int(data.min())}, {int(data.max())}]"
        )
    return apply(ONE_HOT, tensor, num_classes=num_classes)


# ----------------------------------------------------------------------------- in-place views
def _copy_slices_bwd(ctx, g):
    from ..creation import zeros

    view_ops = ctx.attrs["view_ops"]
    need_base, need_src = ctx.needs_input_grad
    gb = gs = None
    if need_base:
        gb = apply(COPY_SLICES, g, zeros(ctx.attrs["src_shape"], dtype=g.dtype), view_ops=view_ops,
                   src_shape=ctx.attrs["src_shape"])
    if need_src:
        gs = replay_views(g, view_ops)
    return gb, gs


COPY_SLICES = defop(
    "copy_slices",
    infer=lambda base, src, view_ops, src_shape: (base.shape, base.dtype),
    backward=_copy_slices_bwd,
)


def replay_views(t: Tensor, view_ops) -> Tensor:
    """Apply a view chain (as recorded on a view tensor) to another tensor, in the graph."""
    for op, attrs in view_ops:
        t = apply(op, t, **attrs)
    return t

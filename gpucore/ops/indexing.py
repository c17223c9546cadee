"""Indexing: basic indexing (views), advanced indexing (copies), index_put, gather/scatter_add,
index_select, one_hot, masked_fill, copy_slices (cat and friends are in joining.py).

kernels: backends/cpu/kernels/indexing.py (numpy); on Vulkan only gather
(backends/vulkan/kernels/indexing.py; index_select lowers to it in captured graphs)."""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..creation import tensor as _tensor
from ..creation import zeros
from ..errors import DTypeError, GpucoreIndexError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import check_indices, scalar_tensor, wrap_dim
from .elementwise import where
from .registry import CAPTURE, apply, capturing, defop, view_of
from .samples import Sample, integers, uniform, via
from .shape import PERMUTE, VIEW

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


_PLAIN_KEYS = frozenset((int, slice, type(None), type(Ellipsis)))


def _basic_view(a, key, src):
    # Trailing Ellipsis: an all-int key gives a 0-d view, not a numpy scalar (a copy).
    return a[key] if any(k is Ellipsis for k in key) else a[key + (Ellipsis,)]


def _np_index(x, key, src):
    return np.array(x[key])


_MASK = np.array(
    [[True, False, True, True], [False, False, False, False], [True, True, False, True]]
)
_S = slice(None)
# (input shape, normalised key) pairs of basic and advanced indexing
_BASIC_KEYS = [
    ((4, 5), (slice(1, 3),)),
    ((3, 4, 5), (1, slice(None, None, 2), None)),
    ((3, 4, 5), (Ellipsis, 2)),
    ((3, 4), (2, 1)),
    ((2, 3), (slice(5, 7),)),
    ((3, 4), (slice(-2, None), slice(3, 0, -2))),
]
_ADV_KEYS = [
    ((5, 3), (np.array([0, 2, 2, 4]),)),  # a repeated row: gradients accumulate
    ((4, 5), (_S, np.array([[1, 0], [3, 3]]))),
    ((3, 4), (_MASK,)),
    ((3, 4, 5), (np.array([0, 2]), _S, np.array([1, -1]))),  # split: dims go first
    ((3, 4, 5), (1, np.array([0, 3]))),
    ((3, 4), (np.array([-1, 0]),)),
]


def _key_samples(keys, **kw):
    return lambda: [
        Sample(uniform(*shape, seed=i), key=key, src=shape, ref=_np_index, **kw)
        for i, (shape, key) in enumerate(keys)
    ]


GETITEM = defop(
    "getitem", view=_basic_view, backward=_getitem_bwd, samples=_key_samples(_BASIC_KEYS)
)


def _index_bwd(ctx, g):
    return apply(INDEX_BACKWARD, g, shape=ctx.attrs["src"], key=ctx.attrs["key"], basic=False)


INDEX = defop(
    "index",
    infer=lambda x, key, src: (_probe(x, key), x.dtype),
    backward=_index_bwd,
    samples=_key_samples(_ADV_KEYS),
)


def _index_backward_bwd(ctx, gg):
    key = ctx.attrs["key"]
    if ctx.attrs["basic"]:
        return apply(GETITEM, gg, key=key, src=tuple(gg.shape)).contiguous()
    return apply(INDEX, gg, key=key, src=tuple(gg.shape))


def _np_index_backward(g, shape, key, basic):
    out = np.zeros(shape)
    if basic:
        out[key] = g
    else:
        np.add.at(out, key, g)  # repeated indices sum
    return out


def _index_backward_samples():
    keys = [(k, True) for k in _BASIC_KEYS] + [(k, False) for k in _ADV_KEYS]
    return [
        Sample(
            uniform(*np.zeros(shape)[key].shape, seed=i),
            shape=shape,
            key=key,
            basic=basic,
            ref=_np_index_backward,
        )
        for i, ((shape, key), basic) in enumerate(keys)
    ]


INDEX_BACKWARD = defop(
    "index_backward",
    infer=lambda g, shape, key, basic: (shape, g.dtype),
    backward=_index_backward_bwd,
    samples=_index_backward_samples,
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


def _np_index_put(x, v, key, basic):
    out = x.copy()
    out[key] = v
    return out


def _index_put_samples():
    """Basic and advanced keys, values of the region's shape and broadcast to it (no repeated
    index: which of two writes wins is unspecified, as in PyTorch)."""

    def s(x, v, key, basic, seed):
        return Sample(
            uniform(*x, seed=seed),
            uniform(*v, seed=seed + 1),
            key=key,
            basic=basic,
            ref=_np_index_put,
        )

    return [
        s((4, 5), (2, 5), (slice(1, 3),), True, 1),
        s((3, 4), (), (_S, 1), True, 3),
        s((3, 4, 5), (4, 1), (0, slice(None, None, -1)), True, 5),
        s((5, 3), (2, 3), (np.array([4, 0]),), False, 7),
        s((3, 4), (1,), (_MASK,), False, 9),
        s((3, 4, 5), (2, 4), (np.array([0, 2]), _S, np.array([1, -1])), False, 11),
    ]


INDEX_PUT = defop(
    "index_put",
    infer=lambda x, v, key, basic: (x.shape, x.dtype),
    backward=_index_put_bwd,
    samples=_index_put_samples,
)


@public("__getitem__", function=False)
def getitem(input: Tensor, key) -> Tensor:
    """Basic indexing (ints, slices, None, ...) gives a view; tensor/list/bool indices copy."""
    tracer = capturing() if CAPTURE[0] is not None else None
    if tracer is not None:  # (before the key's values are read, which would be refused)
        tracer.check_constant_key("x[index]", key)  # the key's values become attributes
    else:
        # The common key (ints, slices, None, ...) on host data: numpy makes the view and
        # checks the bounds itself, with no probe and no key normalisation.
        parts = key if type(key) is tuple else (key,)
        data = input._data
        if type(data) is np.ndarray and all(type(k) in _PLAIN_KEYS for k in parts):
            try:
                arr = _basic_view(data, parts, None)
            except IndexError as e:
                raise _index_error(input, parts, e) from None
            return view_of(GETITEM, input, arr, {"key": parts, "src": data.shape})
    parts, basic = normalize_key(key)
    if basic:
        _probe(input, parts)
        return apply(GETITEM, input, key=parts, src=tuple(input.shape))
    _probe(input, parts)
    return apply(INDEX, input, key=parts, src=tuple(input.shape))


@public("__setitem__", function=False)
def setitem(input: Tensor, key, value) -> None:
    """``x[key] = value`` in place (value broadcast to the indexed region)."""
    # ops.inplace imports this module (COPY_SLICES, replay_views): a module-level cycle
    from .inplace import inplace

    tracer = capturing()
    if tracer is not None:  # the key's values become attributes
        tracer.check_constant_key("x[index] = value", key)
    parts, basic = normalize_key(key)
    region = _probe(input, parts)
    if not isinstance(value, Tensor):
        value = _tensor(value, dtype=input.dtype)
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
    (index,) = ctx.saved
    return scatter_add(zeros(ctx.attrs["src"], dtype=g.dtype), ctx.attrs["dim"], index, g), None


def _np_gather(x, index, dim, src):
    pos = list(np.indices(index.shape))
    pos[dim] = index
    return x[tuple(pos)]


GATHER = defop(
    "gather",
    infer=_gather_infer,
    save_inputs=(1,),
    backward=_gather_bwd,
    samples=lambda: [
        Sample(uniform(3, 4, seed=1), integers(4, 3, 2, seed=2), dim=1, src=(3, 4), ref=_np_gather),
        Sample(uniform(4, 3, seed=3), integers(4, 2, 3, seed=4), dim=0, src=(4, 3), ref=_np_gather),
        Sample(
            uniform(3, 4, 5, seed=5),
            integers(4, 2, 6, 5, seed=6),
            dim=1,
            src=(3, 4, 5),
            ref=_np_gather,
        ),  # index smaller than x in dim 0, longer along dim
    ],
)


def _scatter_add_bwd(ctx, g):
    (index,) = ctx.saved
    dim = ctx.attrs["dim"]
    need_x, _, need_src = ctx.needs_input_grad
    return (g if need_x else None), None, (gather(g, dim, index) if need_src else None)


def _np_scatter_add(x, index, src, dim):
    out = x.copy()
    for pos in np.ndindex(*index.shape):
        at = list(pos)
        at[dim] = index[pos]
        out[tuple(at)] += src[pos]
    return out


SCATTER_ADD = defop(
    "scatter_add",
    infer=lambda x, index, src, dim: (x.shape, x.dtype),
    save_inputs=(1,),
    backward=_scatter_add_bwd,
    samples=lambda: [
        Sample(
            uniform(3, 5, seed=1),
            integers(5, 3, 4, seed=2),
            uniform(3, 4, seed=3),
            dim=1,
            ref=_np_scatter_add,
        ),  # repeated indices in a row sum
        Sample(
            uniform(4, 3, seed=4),
            integers(4, 5, 3, seed=5),
            uniform(5, 3, seed=6),
            dim=0,
            ref=_np_scatter_add,
        ),
        # src larger than index: only index's part is added, the rest of src gets no gradient
        Sample(
            uniform(4, 3, seed=7),
            integers(4, 2, 2, seed=8),
            uniform(3, 3, seed=9),
            dim=0,
            ref=_np_scatter_add,
            call=via(lambda x, i, s, dim: scatter_add(x, dim, i, s)),
        ),
    ],
)


@public("gather")
def gather(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """out[i][j] = input[index[i][j]][j] for dim=0 (and so on), as torch.gather.

    Index values outside [0, input.size(dim)) raise IndexError, except for an index that already
    lives on a Vulkan device: that one is not read back (no wait for the device), and its
    out-of-range entries give NaN (float data) or 0 (other dtypes), never a read out of bounds.
    """
    d = _real_dim(dim, input, "gather")
    return apply(GATHER, input, index, dim=d, src=tuple(input.shape))


@public("scatter_add", inplace=True, saves_self=False)
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
    if tuple(src.shape) != tuple(index.shape):
        # Only index's region of src is added: the op sees that view, so src's gradient is
        # zero outside it (the op's backward gathers one value per index).
        src = src[tuple(slice(0, n) for n in index.shape)]
    return apply(SCATTER_ADD, input, index, src, dim=d)


@public("index_select")
def index_select(input: Tensor, dim: int, index: Tensor) -> Tensor:
    """Rows (along dim) picked by a 1-D int index tensor."""
    d = _real_dim(dim, input, "index_select")
    if index.dtype not in (D.int64, D.int32):
        raise DTypeError(
            f"index_select(): index must be an int64 or int32 tensor, got {index.dtype}"
        )
    if index.ndim > 1:
        raise ShapeError(f"index_select(): index must be 1-D, got shape {tuple(index.shape)}")
    check_indices("index_select", index, input.shape[d], f"dim {d}")
    if capturing() is not None:
        # A captured graph must read the index as a tensor (getitem's key is an attribute):
        # the same rows through gather, whose index is an input.
        shape = [1] * input.ndim
        shape[d] = -1
        size = list(input.shape)
        size[d] = index.numel()
        return gather(input, d, index.reshape(-1).to(D.int64).reshape(shape).expand(*size))
    return getitem(input, (slice(None),) * d + (index.reshape(-1),))


@public("masked_fill")
def masked_fill(input: Tensor, mask: Tensor, value) -> Tensor:
    """input with value where mask is True; the result keeps input's dtype (value is cast to it,
    so an int tensor filled with 1.5 holds 1, as PyTorch)."""
    if isinstance(value, Tensor):
        if value.dtype is not input.dtype:
            value = value.to(input.dtype)
    else:
        value = scalar_tensor(value, input.dtype, checked=True)
    return where(mask, value, input)


# ----------------------------------------------------------------------------- one_hot
def _np_one_hot(t, num_classes):
    return (t[..., None] == np.arange(num_classes)).astype(np.int64)


ONE_HOT = defop(
    "one_hot",
    infer=lambda t, num_classes: (tuple(t.shape) + (num_classes,), D.int64),
    samples=lambda: [
        Sample(integers(4, 5, seed=1), num_classes=4, ref=_np_one_hot),
        Sample(integers(5, 2, 3, seed=2), num_classes=6, ref=_np_one_hot),
        Sample(np.zeros(0, np.int64), num_classes=3, ref=_np_one_hot),
    ],
)


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
    view_ops = ctx.attrs["view_ops"]
    need_base, need_src = ctx.needs_input_grad
    gb = gs = None
    if need_base:
        gb = apply(
            COPY_SLICES,
            g,
            zeros(ctx.attrs["src_shape"], dtype=g.dtype),
            view_ops=view_ops,
            src_shape=ctx.attrs["src_shape"],
        )
    if need_src:
        gs = replay_views(g, view_ops)
    return gb, gs


def _copy_slices_samples():
    """``base[view] = src`` through view chains: a strided slice, a transpose then an int (src
    broadcast to the region), a reshape then a column."""

    def put(base, region, src):
        out = base.copy()
        region(out)[...] = src
        return out

    def s(base, src, view_ops, region, seed):
        return Sample(
            uniform(*base, seed=seed),
            uniform(*src, seed=seed + 1),
            view_ops=view_ops,
            src_shape=src,
            ref=lambda b, v, view_ops, src_shape: put(b, region, v),
        )

    step = (slice(1, 3), slice(None, None, 2))
    return [
        s((4, 5), (2, 3), [(GETITEM, {"key": step, "src": (4, 5)})], lambda a: a[step], 1),
        s(
            (3, 4),
            (1,),
            [(PERMUTE, {"dims": (1, 0)}), (GETITEM, {"key": (2,), "src": (4, 3)})],
            lambda a: a.T[2],
            3,
        ),
        s(
            (6,),
            (2,),
            [(VIEW, {"shape": (2, 3), "src": (6,)}), (GETITEM, {"key": (_S, 1), "src": (2, 3)})],
            lambda a: a.reshape(2, 3)[:, 1],
            5,
        ),
    ]


COPY_SLICES = defop(
    "copy_slices",
    infer=lambda base, src, view_ops, src_shape: (base.shape, base.dtype),
    backward=_copy_slices_bwd,
    samples=_copy_slices_samples,
)


def replay_views(t: Tensor, view_ops) -> Tensor:
    """Apply a view chain (as recorded on a view tensor) to another tensor, in the graph."""
    for op, attrs in view_ops:
        t = apply(op, t, **attrs)
    return t

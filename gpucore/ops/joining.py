"""Joining and splitting: cat (an op), stack, split, chunk, tensor_split, narrow and unbind as
compositions of cat and views.

split, chunk, tensor_split and unbind give views of their input whose gradients meet in one node
(``SPLIT``, PyTorch's SplitBackward / UnbindBackward): its backward is one cat of the outputs'
gradients (zeros only for outputs that got none), not one zero-filled, input-sized tensor per
output summed (what separate ``x[i]`` views cost: a fused qkv projection's q, k and v).

kernels: backends/cpu/kernels/joining.py (cat: one copy.c strided copy per input);
backends/vulkan/kernels/joining.py (cat: one strided copy per input into its slice of the
output)."""

from __future__ import annotations

import numpy as np

from .. import _cpu
from .. import dtypes as D
from ..autograd.grad_mode import _state as _grad_state
from ..autograd.graph import Ctx, OutputSlot, SplitNode, edge_of
from ..creation import zeros
from ..errors import GpucoreIndexError, ShapeError
from ..tensor import Tensor
from .api import public
from .common import tensor_list, wrap_dim
from .indexing import GETITEM, _basic_view, _real_dim
from .registry import AUTOCAST, CAPTURE, OpDef, apply, capturing, defop
from .samples import Sample, uniform

_fast_view = _cpu.fast_view
_ALL = slice(None)
_ELLIPSIS = (Ellipsis,)


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


def _split_bwd(ctx, grads: dict):
    """The input's gradient from the outputs' (``grads``: output index -> gradient; outputs
    that got none are absent): one cat along dim, zeros in the absent outputs' places."""
    a = ctx.attrs
    dim, unbind = a["dim"], a["unbind"]
    g0 = next(iter(grads.values()))
    parts = []
    for i, n in enumerate(a["sizes"]):
        g = grads.get(i)
        if g is None:
            shape = a["shape"][:dim] + (n,) + a["shape"][dim + 1 :]
            g = zeros(shape, dtype=g0.dtype, device=g0.device)
        elif unbind:
            g = g.unsqueeze(dim)
        parts.append(g)
    return apply(CAT, *parts, dim=dim, sizes=tuple(a["sizes"]))


# The node the outputs of split / chunk / tensor_split / unbind share (each output's grad_fn is
# an OutputSlot on it). Graph-only, as inplace.OVERWRITE: never applied, so no kernel and not in
# REGISTRY; its backward is cat, which runs (and differentiates) on every backend.
SPLIT = OpDef("split", None, _split_bwd, (), (), None, False)


def _pieces(t: Tensor, d: int, sizes: list, unbind: bool = False) -> tuple:
    """The views of ``t`` along dim ``d`` of the given sizes (unbind: the single entries, dim
    removed). Under autograd they share one SPLIT node; under graph capture or autocast each is
    a plain getitem view through ``apply`` (what those hooks record)."""
    data = t._data
    if (
        CAPTURE[0] is None
        and AUTOCAST[0] is None
        and not (t._requires_grad and _grad_state.enabled)
    ):
        # the common case inline (a qkv split: 3 pieces in ~1.5 µs): per piece one numpy view and
        # one Tensor built in C (Tensor._make_view's fast_view), nothing else
        pre = (_ALL,) * d
        src = data.shape
        out = []
        start = 0
        for s in sizes:
            k = pre + ((start,) if unbind else (slice(start, start + s),))
            va = {"key": k, "src": src}
            v = _fast_view(t, data[k + _ELLIPSIS], GETITEM, va)
            out.append(
                v if v is not None else Tensor._make_view(t, data[k + _ELLIPSIS], GETITEM, va)
            )
            start += s
        return tuple(out)
    pre = (slice(None),) * d
    keys, start = [], 0
    for s in sizes:
        keys.append(pre + ((start,) if unbind else (slice(start, start + s),)))
        start += s
    hooked = (CAPTURE[0] is not None and capturing()) or AUTOCAST[0] is not None
    if not (t._requires_grad and _grad_state.enabled) or hooked:
        if hooked:
            return tuple(_view(t, k) for k in keys)
        data = t._data  # the keys hold ints and slices only: no Ellipsis to place
        src = tuple(data.shape)
        view = Tensor._make_view  # (no graph to record: view_of's checks are already made)
        return tuple(
            [view(t, data[k + (Ellipsis,)], GETITEM, {"key": k, "src": src}) for k in keys]
        )
    src = tuple(t._data.shape)
    attrs = {"dim": d, "sizes": tuple(sizes), "unbind": unbind, "shape": src}
    node = SplitNode(SPLIT, Ctx(SPLIT.name, (), attrs, (True,)), (edge_of(t),), ((src, t._dtype),))
    out = []
    for i, key in enumerate(keys):
        va = {"key": key, "src": src}
        v = Tensor._make_view(t, _basic_view(t._data, **va), GETITEM, va)
        slot = OutputSlot(node, i, (v._data.shape, v._dtype))
        slot.version = v._vbox[0]  # a view's node: rebuilt from t if t changes in place
        v._grad_fn = slot
        v._requires_grad = True
        out.append(v)
    return tuple(out)


@public("split")
def split(tensor: Tensor, split_size_or_sections, dim: int = 0) -> tuple:
    """Views of consecutive pieces along dim: equal pieces of a given size, or given sizes."""
    shape = tensor._data.shape
    nd = len(shape)
    d = dim + nd if type(dim) is int and -nd <= dim < 0 else dim  # (the common case inline)
    if type(d) is not int or not 0 <= d < nd:
        d = _real_dim(dim, tensor, "split")
    n = shape[d]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        if s <= 0:
            raise ValueError(f"split(): split_size must be positive, got {s}")
        q, r = divmod(n, s)
        sizes = [s] * q + [r] if r or not q else [s] * q  # (n == 0: one empty piece)
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise ShapeError(
                f"split(): sections {sizes} sum to {sum(sizes)} but dim {d} has size {n}"
            )
    return _pieces(tensor, d, sizes)


@public("chunk")
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """Split into ``chunks`` pieces of ceil(size / chunks) (the last may be smaller)."""
    if chunks <= 0:
        raise ValueError(f"chunk(): chunks must be positive, got {chunks}")
    d = _real_dim(dim, input, "chunk")
    if input.shape[d] == 0:
        return tuple(narrow(input, d, 0, 0) for _ in range(chunks))  # as PyTorch: all empty
    return split(input, -(-input.shape[d] // chunks), d)


@public("tensor_split")
def tensor_split(input: Tensor, indices_or_sections, dim: int = 0) -> tuple:
    """Views along dim: ``n`` pieces as equal as possible (the first ``size % n`` one longer),
    or the pieces between the given indices (Python slice bounds), as torch.tensor_split."""
    d = _real_dim(dim, input, "tensor_split")
    n = input.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        if ios.dtype is not D.int64 or ios.ndim > 1:  # as PyTorch: int64 only
            raise ShapeError(
                "tensor_split(): a tensor indices_or_sections must be a 0-d or 1-d int64 "
                f"tensor, got {ios.dtype} of shape {tuple(ios.shape)}"
            )
        ios = int(ios.item()) if ios.ndim == 0 else [int(i) for i in ios.tolist()]
    if isinstance(ios, (int, np.integer)) and not isinstance(ios, bool):
        if ios <= 0:
            raise ValueError(f"tensor_split(): number of sections must be positive, got {ios}")
        q, r = divmod(n, int(ios))
        return _pieces(input, d, [q + 1] * r + [q] * (int(ios) - r))
    try:
        idx = [int(i) for i in ios if isinstance(i, (int, np.integer)) and not isinstance(i, bool)]
        if len(idx) != len(ios):  # floats and bools refused, as PyTorch
            raise TypeError
    except TypeError:
        raise TypeError(
            "tensor_split(): indices_or_sections must be an int, a sequence of ints or an "
            f"integer tensor, got {type(indices_or_sections).__name__}"
        ) from None
    bounds = [0] + [min(max(i + n if i < 0 else i, 0), n) for i in idx] + [n]
    if all(a <= b for a, b in zip(bounds, bounds[1:])):
        return _pieces(input, d, [b - a for a, b in zip(bounds, bounds[1:])])
    pre = (slice(None),) * d  # bounds that go back: pieces overlap, each its own view
    return tuple(_view(input, pre + (slice(a, max(a, b)),)) for a, b in zip(bounds, bounds[1:]))


@public("unbind")
def unbind(input: Tensor, dim: int = 0) -> tuple:
    """Views of each slice along dim, with that dim removed."""
    d = _real_dim(dim, input, "unbind")
    return _pieces(input, d, [1] * input.shape[d], unbind=True)

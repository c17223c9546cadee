"""View ops: reshape/view, permute/transpose/T, expand, squeeze/unsqueeze, flatten.

A view shares its input's storage (and version counter); its backward maps the gradient back
through the inverse view. ``reshape`` copies only when no view is possible, as PyTorch.

kernels: none (each op's ``view`` function; a reshape that must copy runs ``clone``).
"""

from __future__ import annotations

import math

import numpy as np

from .. import _cpu
from .. import dtypes as D
from ..autograd.grad_mode import _state as _grad_state
from ..errors import ArgumentTypeError, DTypeError, ShapeError
from ..tensor import Tensor
from .api import public, tensor_member
from .common import args_or_keyword, broadcast_shapes, shape_arg, wrap_dim
from .registry import AUTOCAST, CAPTURE, apply, capturing, defop, view_of
from .samples import Sample, uniform

# a float host tensor's reshape that needs a copy, in C (cpu/python/fastpath_view.c)
_fast_reshape_copy = _cpu.fast_reshape_copy


def _view_array(arr: np.ndarray, shape: tuple) -> np.ndarray:
    v = arr.view()
    v.shape = shape  # raises AttributeError when a copy would be needed
    return v


def _reshape_bwd(ctx, g):
    return g.reshape(ctx.attrs["src"])


VIEW = defop(
    "view",
    view=lambda a, shape, src: _view_array(a, shape),
    backward=_reshape_bwd,
    samples=lambda: [
        Sample(uniform(2, 3, 4, seed=1), shape=(6, 1, 4), src=(2, 3, 4), ref=_np_reshape),
        Sample(uniform(seed=2), shape=(1, 1), src=(), ref=_np_reshape),
        Sample(uniform(4, 3, seed=3), shape=(12,), src=(4, 3), ref=_np_reshape),
        Sample(np.zeros((0, 3)), shape=(3, 0), src=(0, 3), ref=_np_reshape),
    ],
)


def _np_reshape(x, shape, src):
    return np.reshape(x, shape)


def _infer_shape(op: str, x: Tensor, shape: tuple) -> tuple:
    shape = tuple(shape)
    n = x._data.size
    if -1 not in shape:  # the common case, checked with the fewest Python steps
        if (not shape or min(shape) >= 0) and math.prod(shape) == n and len(shape) <= 8:
            return shape
    elif shape.count(-1) > 1:
        raise ShapeError(f"{op}: only one dimension can be -1, got {shape}")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or n % known:
            raise ShapeError(
                f"{op}: shape {shape} is invalid for input of shape {tuple(x.shape)} ({n} elements)"
            )
        shape = tuple(n // known if s == -1 else s for s in shape)
    if any(s < 0 for s in shape) or math.prod(shape) != n:
        raise ShapeError(
            f"{op}: shape {shape} is invalid for input of shape {tuple(x.shape)} ({n} elements); "
            "the number of elements must stay the same"
        )
    if len(shape) > 8:
        raise ShapeError(f"{op}: tensors have at most 8 dims, got {shape}")
    return shape


def _can_view(x: Tensor, shape: tuple) -> bool:
    try:
        _view_array(x._data, shape)
        return True
    except AttributeError:
        return False


@public("view", function=False)
def view(input: Tensor, *shape, size=None, dtype=None) -> Tensor:
    """A view with a new shape (varargs, a sequence or ``size=``), or the same bytes read as
    ``dtype``; raises when the strides do not allow the shape (use reshape)."""
    if dtype is not None:
        if shape or size is not None:
            raise ArgumentTypeError("view(): give a shape or a dtype, not both")
        return _view_dtype(input, dtype)
    shape = shape if size is None else args_or_keyword(shape, size, "view", "size")
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer, tuple, list)):
        return _view_dtype(input, shape[0])
    shape = _infer_shape("view", input, shape_arg(shape))
    if not _can_view(input, shape):
        raise ShapeError(
            f"view: shape {shape} is not compatible with the strides of input of shape "
            f"{tuple(input.shape)} (it is not contiguous); use .reshape(...) instead"
        )
    return apply(VIEW, input, shape=shape, src=tuple(input.shape))


def _view_dtype(input: Tensor, dtype) -> Tensor:
    """``view(dtype)``: the same bytes read as another dtype of the same size (PyTorch's bit
    reinterpretation, not a value conversion), sharing storage and version counter."""
    dt = D.as_dtype(dtype)
    if dt is input.dtype:
        return apply(VIEW, input, shape=tuple(input.shape), src=tuple(input.shape))
    if dt.itemsize != input.dtype.itemsize:
        raise DTypeError(
            f"view({dt}): reinterpreting a {input.dtype} tensor (shape {tuple(input.shape)}) as "
            f"{dt} needs equal element sizes ({input.dtype.itemsize} vs {dt.itemsize} bytes) in "
            "gpucore; to convert the values use .to(dtype)"
        )
    if input._requires_grad:
        raise DTypeError(
            f"view({dt}): a {input.dtype} tensor that requires grad cannot be reinterpreted as "
            f"another dtype (the bits are not differentiable); use .detach().view({dt}), or "
            ".to(dtype) to convert the values"
        )
    tracer = capturing()
    if tracer is not None:  # a bit cast of the storage: no registry op records it
        tracer.refuse_if_dynamic(
            f"view({dt})", input, "convert values with .to(dtype) or reinterpret outside forward()"
        )
    return Tensor._wrap(input._data.view(dt.np), dt, input._vbox, input._dev)


@public("reshape")
def reshape(input: Tensor, *args, shape=None) -> Tensor:
    """A tensor with the same data and a new shape (varargs, a sequence or ``shape=``); a view
    when possible, else a copy."""
    shape = _infer_shape(
        "reshape",
        input,
        shape_arg(args if shape is None else args_or_keyword(args, shape, "reshape", "shape")),
    )
    data = input._data
    if type(data) is np.ndarray and input._dev is None:
        contiguous = data.flags.c_contiguous
        graph = (input._requires_grad and _grad_state.enabled) or AUTOCAST[0] is not None
        if not (contiguous or graph) and CAPTURE[0] is None:
            out = _fast_reshape_copy(input, shape)  # numpy's copy below, in one C call, or None
            if out is not None:
                return out
        arr = data.reshape(shape)  # a view where one is possible, else numpy's C-order copy
        if contiguous or arr.base is (data if data.base is None else data.base):
            return view_of(VIEW, input, arr, {"shape": shape, "src": data.shape})
        if not graph and (CAPTURE[0] is None or capturing() is None):
            return Tensor._from_kernel(arr, input._dtype)  # the copy, made once (no graph)
    try:
        arr = _view_array(data, shape)
    except AttributeError:
        input = input.contiguous()
        arr = _view_array(input._data, shape)
    return view_of(VIEW, input, arr, {"shape": shape, "src": tuple(data.shape)})


@public("view_as", function=False)
def view_as(input: Tensor, other: Tensor) -> Tensor:
    return view(input, tuple(other.shape))


@public("reshape_as", function=False)
def reshape_as(input: Tensor, other: Tensor) -> Tensor:
    return reshape(input, tuple(other.shape))


@public("flatten")
def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """Merge dims start_dim..end_dim into one."""
    if input.ndim == 0:
        return input.reshape(1)
    s = wrap_dim(start_dim, input.ndim, "flatten")
    e = wrap_dim(end_dim, input.ndim, "flatten")
    if s > e:
        raise ValueError(f"flatten: start_dim {start_dim} comes after end_dim {end_dim}")
    shp = tuple(input.shape)
    return input.reshape(shp[:s] + (math.prod(shp[s : e + 1]),) + shp[e + 1 :])


def _permute_bwd(ctx, g):
    dims = ctx.attrs["dims"]
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return g.permute(tuple(inv))


PERMUTE = defop(
    "permute",
    view=lambda a, dims: a.transpose(dims),
    backward=_permute_bwd,
    samples=lambda: [
        Sample(uniform(2, 3, 4, seed=1), dims=(2, 0, 1), ref=_np_permute),
        Sample(uniform(3, 5, seed=2), dims=(1, 0), ref=_np_permute),
        Sample(uniform(2, 1, 3, 2, seed=3), dims=(3, 1, 0, 2), ref=_np_permute),
        Sample(uniform(seed=4), dims=(), ref=_np_permute),
    ],
)


def _np_permute(x, dims):
    return np.transpose(x, dims)


@public("permute")
def permute(input: Tensor, *args, dims=None) -> Tensor:
    """A view with dims reordered (varargs, a sequence or ``dims=``)."""
    dims = shape_arg(args if dims is None else args_or_keyword(args, dims, "permute", "dims"))
    nd = input.ndim
    if len(dims) != nd:
        raise ShapeError(
            f"permute: got {len(dims)} dims {dims} for a tensor of {nd} dims "
            f"(shape {tuple(input.shape)})"
        )
    dims = tuple(wrap_dim(d, nd, "permute") for d in dims)
    if sorted(dims) != list(range(nd)):
        raise ValueError(f"permute: dims {dims} repeat a dimension")
    return view_of(PERMUTE, input, input._data.transpose(dims), {"dims": dims})


@public("transpose", "swapaxes", "swapdims")
def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """A view with dims dim0 and dim1 swapped."""
    data = input._data
    nd = data.ndim
    if type(dim0) is int and type(dim1) is int and -nd <= dim0 < nd and -nd <= dim1 < nd:
        d0, d1 = dim0 % nd, dim1 % nd  # (wrap_dim's common case inline: every attention)
    else:
        d0, d1 = wrap_dim(dim0, nd, "transpose"), wrap_dim(dim1, nd, "transpose")
        if nd == 0:
            return input  # dims 0 and -1 only, as PyTorch
    dims = list(range(nd))
    dims[d0], dims[d1] = d1, d0
    dims = tuple(dims)
    return view_of(PERMUTE, input, data.transpose(dims), {"dims": dims})


@public("t")
def t(input: Tensor) -> Tensor:
    """Transpose of a tensor of at most 2 dims."""
    if input.ndim > 2:
        raise ShapeError(f"t(): expects a tensor with <= 2 dims, got shape {tuple(input.shape)}")
    return input if input.ndim < 2 else transpose(input, 0, 1)


tensor_member("T", property(lambda self: permute(self, tuple(range(self.ndim - 1, -1, -1)))))
tensor_member("mT", property(lambda self: transpose(self, -2, -1)))


def _expand_bwd(ctx, g):
    return g.sum_to_size(ctx.attrs["src"])


def _np_expand(x, shape, src):
    return x * np.ones(shape)  # broadcasting by arithmetic


EXPAND = defop(
    "expand",
    view=lambda a, shape, src: np.broadcast_to(a, shape),
    backward=_expand_bwd,
    samples=lambda: [
        Sample(uniform(3, 1, seed=1), shape=(2, 3, 4), src=(3, 1), ref=_np_expand),
        Sample(uniform(1, seed=2), shape=(5,), src=(1,), ref=_np_expand),
        Sample(uniform(seed=3), shape=(2, 3), src=(), ref=_np_expand),
        Sample(uniform(1, 4, 1, seed=4), shape=(3, 4, 2), src=(1, 4, 1), ref=_np_expand),
    ],
)


@public("expand")
def expand(input: Tensor, *sizes, size=None) -> Tensor:
    """A view with size-1 dims repeated to ``sizes`` (varargs, a sequence or ``size=``; -1 keeps
    a dim); writes are not allowed."""
    sizes = shape_arg(sizes if size is None else args_or_keyword(sizes, size, "expand", "size"))
    shp = tuple(input.shape)
    if len(sizes) < len(shp):
        raise ShapeError(
            f"expand: the number of sizes {len(sizes)} must be >= the tensor's dims "
            f"(shape {shp}, sizes {sizes})"
        )
    lead = len(sizes) - len(shp)
    out = []
    for i, s in enumerate(sizes):
        if i < lead:
            if s < 0:
                raise ShapeError(f"expand: -1 is not allowed in a new leading dim ({sizes})")
            out.append(s)
            continue
        cur = shp[i - lead]
        if s == -1:
            s = cur
        elif s < 0:
            raise ShapeError(f"expand: size {s} in {sizes} is negative (only -1, keep, is allowed)")
        if cur != s and cur != 1:
            raise ShapeError(
                f"expand: the size {cur} of dim {i - lead} (shape {shp}) must match {s} or be 1"
            )
        out.append(s)
    out = tuple(out)
    if out == shp:
        return input
    return apply(EXPAND, input, shape=out, src=shp)


@public("expand_as", function=False)
def expand_as(input: Tensor, other: Tensor) -> Tensor:
    return expand(input, tuple(other.shape))


@public("broadcast_to")
def broadcast_to(input: Tensor, shape) -> Tensor:
    """``input.expand(shape)``, numpy's name."""
    return expand(input, tuple(shape))


@public("broadcast_tensors", method=False)
def broadcast_tensors(*tensors: Tensor) -> tuple:
    """Views of the tensors expanded to their common broadcast shape."""
    shape = broadcast_shapes("broadcast_tensors", *[t.shape for t in tensors])
    return tuple(t.expand(shape) for t in tensors)


@public("squeeze")
def squeeze(input: Tensor, dim=None) -> Tensor:
    """Remove size-1 dims (all of them, or those in ``dim``)."""
    shp = tuple(input.shape)
    if dim is None:
        dims = {i for i, s in enumerate(shp) if s == 1}
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        dims = {wrap_dim(d, input.ndim, "squeeze") for d in dims}
        dims = {d for d in dims if input.ndim and shp[d] == 1}
    new = tuple(s for i, s in enumerate(shp) if i not in dims)
    return input if new == shp else input.reshape(new)


@public("unsqueeze")
def unsqueeze(input: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at ``dim``."""
    d = wrap_dim(dim, input.ndim + 1, "unsqueeze")
    shp = tuple(input.shape)
    return input.reshape(shp[:d] + (1,) + shp[d:])


@public("movedim", "moveaxis")
def movedim(input: Tensor, source: int, destination: int) -> Tensor:
    """A view with dim ``source`` moved to position ``destination`` (the others keep order)."""
    nd = input.ndim
    s, d = wrap_dim(source, nd, "movedim"), wrap_dim(destination, nd, "movedim")
    order = [i for i in range(nd) if i != s]
    order.insert(d, s)
    return permute(input, tuple(order))

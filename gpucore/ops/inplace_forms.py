"""The remaining in-place forms, as PyTorch's: the in-place comparisons and logical ops
(``x.ge_(y)``: the result in x's dtype), the in-place view ops squeeze_ / unsqueeze_ / t_ /
transpose_ / swapaxes_ / swapdims_ (self becomes the view, keeping its storage), resize_ /
resize_as_, put_ and index_reduce_, set_, Tensor.new (PyTorch's legacy constructor), the top-level
in-place functions (``gpucore.exp_(x)``, ``gpucore.sigmoid_(x)``, ``gpucore.dropout_(x, p,
train)``, ...), and the ``*_copy`` functions (a view op's result as a fresh contiguous tensor).

kernels: none (the out-of-place ops').
"""

from __future__ import annotations

import math

import numpy as np

from .. import _caller_warnings as caller_warnings
from ..autograd.grad_mode import _state as _grad_state
from ..backends.cpu import empty_array
from ..errors import AutogradError, DTypeError, ShapeError
from ..tensor import Size, Tensor
from . import api
from .api import public, tensor_member
from .attributes import storage_offset
from .common import wrap_dim
from .inplace import _inplace_form, inplace
from .registry import capturing
from .scatter_forms import index_reduce, put

# ----------------------------------------------------------------------------- in-place ops
_COMPUTED = ("eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less")
_COMPUTED += ("less_equal", "not_equal", "logical_and", "logical_or", "logical_xor")
_COMPUTED += ("logical_not", "log1p", "rsqrt", "square", "addmm")
for _name in _COMPUTED:
    if not hasattr(Tensor, _name + "_"):
        tensor_member(_name + "_", _inplace_form(_name, saves_self=True))


def _restride(self: Tensor, view: Tensor, op: str) -> Tensor:
    """self becomes ``view`` (a view of self): its shape and strides change, its storage and
    version counter stay (the counter moves on, as PyTorch's), and its history becomes the
    view's. A base hands its old layout to a hidden base and becomes a view of it, so views
    taken before (whose steps are relative to that layout) still replay correctly."""
    if _grad_state.enabled and self._requires_grad and self._grad_fn is None:
        raise AutogradError(
            f"{op}: a leaf tensor that requires grad is being used in an in-place operation; "
            "wrap it in gpucore.no_grad() or use the out-of-place form"
        )
    if self._base is None and not (self._requires_grad and self._grad_fn is None):
        hidden = Tensor._wrap(self._data, self._dtype, self._vbox, self._dev)
        hidden._grad_fn, hidden._requires_grad = self._grad_fn, self._requires_grad
        self._base = hidden
    self._data = view._data
    if self._base is not None:  # a view stays a view of its base, one step further
        self._view_ops = view._view_ops
    if view._requires_grad:
        self._grad_fn = view._grad_fn
    self._vbox[0] += 1
    if self._grad_fn is not None and self._grad_fn.version is not None:
        self._grad_fn.version = self._vbox[0]  # the new layout is this node's own output
    tracer = capturing()
    if tracer is not None:
        tracer.rebind_view(self, view)  # a captured graph reads self from the view's node
    return self


@public("squeeze_", function=False)
def squeeze_(self: Tensor, dim=None) -> Tensor:
    """In-place squeeze: self drops its dims of size 1 (or ``dim``, if of size 1); returns
    self, as Tensor.squeeze_."""
    return _restride(self, self.squeeze() if dim is None else self.squeeze(dim), "squeeze_")


@public("unsqueeze_", function=False)
def unsqueeze_(self: Tensor, dim: int) -> Tensor:
    """In-place unsqueeze: self gains a dim of size 1 at ``dim``; returns self."""
    return _restride(self, self.unsqueeze(dim), "unsqueeze_")


@public("t_", function=False)
def t_(self: Tensor) -> Tensor:
    """In-place t: a matrix becomes its transpose (0-d and 1-D stay); returns self."""
    return _restride(self, self.t(), "t_")


@public("transpose_", "swapaxes_", "swapdims_", function=False)
def transpose_(self: Tensor, dim0: int, dim1: int) -> Tensor:
    """In-place transpose of dims ``dim0`` and ``dim1``; returns self."""
    return _restride(self, self.transpose(dim0, dim1), "transpose_")


def _resize_to(self: Tensor, shape: tuple, op: str) -> Tensor:
    if self._requires_grad:
        raise AutogradError(f"{op}: cannot resize a tensor that requires grad (as PyTorch)")
    if any(s < 0 for s in shape):
        raise ShapeError(f"{op}: negative dimension in {shape}")
    tracer = capturing()
    if tracer is not None:
        tracer.refuse_inplace(op, self)
    n = math.prod(shape)
    base = self._base
    off = storage_offset(self) if base is not None else 0
    if n == self.numel() and self.is_contiguous():
        self._data = self._data.reshape(shape)  # the same storage, as PyTorch
    elif (
        base is not None
        and self._dev is None
        and base._data.flags.c_contiguous
        and off + n <= base.numel()
    ):
        # PyTorch's: a contiguous tensor over the storage from self's first element (memory
        # order), sharing it
        self._data = base._data.reshape(-1)[off : off + n].reshape(shape)
        self._base, self._view_ops = None, None
    else:
        # a new storage: the old elements in order, then uninitialised ones (PyTorch keeps its
        # storage when it is large enough; here other views of the old one stop seeing self)
        old = np.ascontiguousarray(self._host()).reshape(-1)
        new = empty_array(shape, old.dtype)
        k = min(n, old.size)
        new.reshape(-1)[:k] = old[:k]
        self._data = new if self._dev is None else self._dev.upload(new, self._dtype)
        self._base, self._view_ops = None, None
    self._vbox[0] += 1
    return self


@public("resize_", function=False)
def resize_(self: Tensor, *sizes, memory_format=None) -> Tensor:
    """Give self the shape ``sizes``, keeping its first elements in row-major order (new ones
    uninitialised), as Tensor.resize_; not for tensors that require grad. A view that fits in
    its base's storage becomes a contiguous tensor over that storage from its first element
    (memory order, as PyTorch); otherwise the elements are kept in logical order."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, Size)):
        sizes = tuple(sizes[0])
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"resize_(): sizes must be ints, got {sizes!r}")
    return _resize_to(self, tuple(int(s) for s in sizes), "resize_()")


@public("resize_as_", function=False)
def resize_as_(self: Tensor, the_template: Tensor, memory_format=None) -> Tensor:
    """resize_ to ``the_template``'s shape, as Tensor.resize_as_."""
    return _resize_to(self, tuple(the_template.shape), "resize_as_()")


def _resized(self: Tensor, sizes: tuple, op: str) -> Tensor:
    """PyTorch's deprecated out-of-place resize: the same elements in a new shape (a reshape
    that must keep the number of elements), with its warning."""
    caller_warnings.warn(f"non-inplace {op} is deprecated", UserWarning)
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
            raise TypeError(f"{op}(): sizes must be ints, got {sizes!r}")
    n = math.prod(int(s) for s in sizes)
    if n != self.numel():
        raise ShapeError(
            f"{op}(): requested resize to {tuple(sizes)} ({n} elements in total), but the given "
            f"tensor has a size of {tuple(self.shape)} ({self.numel()} elements); the "
            "out-of-place resize only changes the shape (use resize_ to change the size)"
        )
    return self.reshape(tuple(int(s) for s in sizes))


@public("resize", function=False)
def resize(self: Tensor, *sizes) -> Tensor:
    """Tensor.resize (deprecated in PyTorch): self's elements in the shape ``sizes`` (the same
    number of elements), differentiable."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list, Size)):
        sizes = tuple(sizes[0])
    return _resized(self, sizes, "resize")


@public("resize_as", function=False)
def resize_as(self: Tensor, tensor: Tensor) -> Tensor:
    """Tensor.resize_as (deprecated in PyTorch): resize to ``tensor``'s shape."""
    return _resized(self, tuple(tensor.shape), "resize_as")


@public("set_", function=False)
def set_(self: Tensor, source: Tensor | None = None) -> Tensor:
    """Make self share ``source``'s storage, shape and version counter (``set_()``: an empty
    tensor), as Tensor.set_ (source must have self's dtype; the storage-offset / size / stride
    form of PyTorch is not provided: gpucore tensors do not address raw storages)."""
    if self._requires_grad and self._grad_fn is None and _grad_state.enabled:
        raise AutogradError(
            "set_(): a leaf tensor that requires grad is being used in an in-place operation"
        )
    if source is None:
        tracer = capturing()
        if tracer is not None:
            tracer.refuse_inplace("set_()", self)
        self._data = empty_array((0,), self._data.dtype)
        self._dev, self._vbox = None, [self._vbox[0] + 1]
    else:
        if source.dtype is not self.dtype:
            raise DTypeError(
                f"set_(): could not set a tensor of {self.dtype} to one of {source.dtype}"
            )
        self._data, self._dev, self._vbox = source._data, source._dev, source._vbox
        tracer = capturing()
        if tracer is not None:
            tracer.rebind_view(self, source)  # self now holds source's values
    self._base, self._view_ops = None, None
    return self


@public("new", function=False)
def new(self: Tensor, *args, **kwargs) -> Tensor:
    """PyTorch's legacy ``x.new(...)``: ``x.new(2, 3)`` / ``x.new(Size)`` an uninitialised
    tensor, ``x.new(data)`` a copy of ``data``, ``x.new()`` an empty one, in x's dtype and on
    its device (``dtype=`` / ``device=`` may say otherwise)."""
    if not args or all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args):
        return self.new_empty(tuple(int(a) for a in args) or (0,), **kwargs)
    if len(args) == 1 and isinstance(args[0], Size):
        return self.new_empty(tuple(args[0]), **kwargs)
    if len(args) == 1:
        return self.new_tensor(args[0], **kwargs)
    raise TypeError(f"new(): expected sizes or one data argument, got {len(args)} arguments")


@public("put_", function=False)
def put_(self: Tensor, index: Tensor, source: Tensor, accumulate: bool = False) -> Tensor:
    """In-place put: self's elements at the flat positions ``index`` set to (or, with
    accumulate, increased by) ``source``; returns self, as Tensor.put_."""
    return inplace(self, lambda x: put(x, index, source, accumulate), saves_self=False, op="put_")


@public("index_reduce_", function=False)
def index_reduce_(
    self: Tensor, dim: int, index: Tensor, source: Tensor, reduce: str, *,
    include_self: bool = True,
) -> Tensor:  # fmt: skip
    """In-place index_reduce; returns self, as Tensor.index_reduce_."""
    return inplace(
        self,
        lambda x: index_reduce(x, dim, index, source, reduce, include_self=include_self),
        saves_self=True,
        op="index_reduce_",
    )


# ----------------------------------------------------------------------------- top level
# torch's top-level in-place functions: gpucore.<name>_(input, ...) is input.<name>_(...)
_TOP_INPLACE = ("abs", "acos", "acosh", "addmv", "arccos", "arccosh", "arcsin", "arcsinh")
_TOP_INPLACE += ("arctan", "arctanh", "asin", "asinh", "atan", "atanh", "ceil", "clamp")
_TOP_INPLACE += ("clamp_max", "clamp_min", "clip", "cos", "cosh", "deg2rad", "detach", "erf")
_TOP_INPLACE += ("erfc", "exp2", "exp", "expm1", "fill", "fix", "floor", "frac", "gcd", "i0")
_TOP_INPLACE += ("index_put", "lcm", "ldexp", "log10", "log1p", "log2", "log", "logit")
_TOP_INPLACE += ("nan_to_num", "neg", "negative", "rad2deg", "reciprocal", "relu", "round")
_TOP_INPLACE += ("rsqrt", "sigmoid", "sin", "sinc", "sinh", "sqrt", "square", "tan", "tanh")
_TOP_INPLACE += ("trunc", "xlogy", "zero", "resize_as")


def _top_level(name: str):
    method = name + "_"

    def fn(input: Tensor, *args, **kwargs) -> Tensor:
        return getattr(input, method)(*args, **kwargs)

    fn.__name__ = fn.__qualname__ = method
    fn.__doc__ = f"torch.{method}: ``input.{method}(...)``, in place; returns input."
    return fn


for _name in _TOP_INPLACE:
    if _name + "_" not in api.FUNCTIONS:
        api.export(_name + "_", api.checked(_name + "_", _top_level(_name)))


def _functional_inplace(name: str, fname: str, params: tuple):
    """torch.<name>_: nn.functional.<fname>(input, ..., inplace=True)."""

    def fn(input: Tensor, *args) -> Tensor:
        from ..nn import functional as F  # nn imports the ops: looked up on call

        if len(args) > len(params):
            raise TypeError(f"{name}_(): takes at most {len(params) + 1} arguments")
        return getattr(F, fname)(input, *args, inplace=True)

    fn.__name__ = fn.__qualname__ = name + "_"
    fn.__doc__ = (
        f"torch.{name}_: ``nn.functional.{fname}(input, {', '.join(params)}, inplace=True)``."
    )
    return fn


for _name, _fname, _params in (
    ("dropout", "dropout", ("p", "train")),
    ("alpha_dropout", "alpha_dropout", ("p", "train")),
    ("feature_alpha_dropout", "feature_alpha_dropout", ("p", "train")),
    ("celu", "celu", ("alpha",)),
    ("selu", "selu", ()),
    ("rrelu", "rrelu", ("lower", "upper", "training")),
    ("threshold", "threshold", ("threshold", "value")),
):
    api.export(_name + "_", api.checked(_name + "_", _functional_inplace(_name, _fname, _params)))


# ----------------------------------------------------------------------------- *_copy
def _copy_of(name: str):
    """torch.<name>_copy: the view op's result as a fresh contiguous tensor (a list of them
    for split / unbind)."""

    def fn(input: Tensor, *args, **kwargs):
        r = getattr(Tensor, name)(input, *args, **kwargs)
        if isinstance(r, (tuple, list)):
            return [t.clone() for t in r]
        return r.clone()

    fn.__name__ = fn.__qualname__ = name + "_copy"
    fn.__doc__ = f"torch.{name}_copy: ``input.{name}(...)`` as a new tensor (not a view)."
    return fn


_VIEWS = ("as_strided", "detach", "diagonal", "expand", "narrow", "permute", "select")
_VIEWS += ("split", "split_with_sizes", "squeeze", "t", "transpose", "unbind", "unfold")
_VIEWS += ("unsqueeze",)
for _name in _VIEWS:
    api.export(_name + "_copy", api.checked(_name + "_copy", _copy_of(_name)))
tensor_member("narrow_copy", api.FUNCTIONS["narrow_copy"])  # PyTorch's method too


def _alias_copy(input: Tensor) -> Tensor:
    """torch.alias_copy: a copy of input (with its history)."""
    return input.clone()


def _slice_copy(input: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    """torch.slice_copy: ``input[start:end:step]`` along ``dim`` as a new tensor."""
    d = wrap_dim(dim, input.ndim, "slice_copy()")
    return input[(slice(None),) * d + (slice(start, end, step),)].clone()


def _view_copy(input: Tensor, *shape) -> Tensor:
    """torch.view_copy: ``input.view(shape)``'s values as a new tensor (any layout: a copy)."""
    return input.reshape(*shape).clone()


api.export("alias_copy", api.checked("alias_copy", _alias_copy))
api.export("view_copy", api.checked("view_copy", _view_copy))
api.export("slice_copy", api.checked("slice_copy", _slice_copy))

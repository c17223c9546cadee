"""In-place ops (``x.add_(y)``, ``x += y``, ``x[i] = v``, ``zero_``, ``fill_``, ``copy_``...).

An in-place op computes its result with the out-of-place op, writes it into the tensor's storage
and bumps the storage's version counter. Under autograd the tensor takes the result's grad_fn;
when it is a view, its base gets a CopySlices node (base with the view region replaced), so the
gradient reaches whatever the base came from. A saved tensor that an in-place op later modifies is
caught by the version check at backward time.

kernels: none of its own (the out-of-place ops'; copy_slices is in indexing.py).
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..autograd.grad_mode import _state as _grad_state
from ..autograd.grad_mode import no_grad
from ..autograd.graph import Ctx, Node, edge_of, grad_fn_of, view_base
from ..creation import tensor, zeros_like
from ..errors import AutogradError, DTypeError, ShapeError
from ..tensor import Tensor
from . import api
from .api import public, tensor_member
from .common import host_quiet, scalar_tensor
from .indexing import COPY_SLICES, replay_views
from .random import _normal_f32, _uniform_f32
from .registry import OpDef, capturing


def _alias(x: Tensor, copy: bool) -> Tensor:
    """A stand-in for x before modification: same history, and its own data when the op saves it."""
    if copy:
        data = x._data.copy() if x._dev is None else x._dev.clone_array(x._data)
        a = Tensor._wrap(data, x._dtype, None, x._dev)
    else:
        a = Tensor._wrap(x._data, x._dtype, x._vbox, x._dev)
    a._grad_fn = x._grad_fn
    a._requires_grad = x._requires_grad
    a._acc = x._acc
    return a


def _write(x: Tensor, r: Tensor, op: str) -> None:
    if r.shape != x.shape:
        raise ShapeError(
            f"{op}: the result has shape {tuple(r.shape)} but the in-place target has shape "
            f"{tuple(x.shape)}; an in-place op cannot change a tensor's shape"
        )
    if r.dtype is not x.dtype:
        if r.dtype.is_floating_point and not x.dtype.is_floating_point:
            raise DTypeError(
                f"{op}: result type {r.dtype} can't be cast to the in-place target's type {x.dtype}"
            )
        with no_grad():
            r = r.to(x.dtype)
    try:
        if x._dev is not None:
            x._dev.copy_into(x._data, r)
        else:
            np.copyto(x._data, host_quiet(r))  # the capture rebinds x to r below
    except ValueError as e:
        raise ShapeError(
            f"{op}: cannot write into this tensor ({e}); it is an expanded view whose elements "
            "share memory; clone() it first"
        ) from None
    x._vbox[0] += 1
    tracer = capturing()
    if tracer is not None:
        tracer.rebind(x, r)  # a captured graph reads x's new value from r's node


def inplace(x: Tensor, compute, saves_self: bool = True, op: str = "in-place op") -> Tensor:
    """Run ``compute(x_before)`` and store its result in x, keeping autograd correct."""
    if not _grad_state.enabled:
        _write(x, compute(x), op)
        return x
    base = view_base(x)
    if x._requires_grad and x._grad_fn is None:
        raise AutogradError(
            f"{op}: a leaf tensor that requires grad is being used in an in-place operation; "
            "wrap the update in gpucore.no_grad() or use an out-of-place op"
        )
    if base is not None and base._requires_grad and base._grad_fn is None:
        raise AutogradError(
            f"{op}: a view of a leaf tensor that requires grad is being modified in place; "
            "wrap the update in gpucore.no_grad() or clone() the view first"
        )
    old_fn = grad_fn_of(x) if x._requires_grad else None  # a view's history, rebuilt if stale
    if x._requires_grad:
        # The op sees x before modification: its own copy when it may save it for backward.
        r = compute(_alias(x, copy=saves_self))
    else:
        r = compute(x)  # no copy in the common case (nothing requires grad)
        if saves_self and r._requires_grad:
            r = compute(_alias(x, copy=True))  # e.g. c.mul_(w): mul saved c, which changes next
    _write(x, r, op)
    if base is not None:
        if r._requires_grad or base._requires_grad:
            _rebase_view(x, base, r)
    elif r._requires_grad:
        x._grad_fn = r._grad_fn
        x._requires_grad = True
    elif x._requires_grad:
        # The new value does not depend on anything that requires grad (zero_, fill_, copy_ of a
        # constant): x keeps requires_grad, and its old history receives zero gradient.
        x._grad_fn = Node(
            OVERWRITE,
            Ctx(OVERWRITE.name, (), {"op": op}),
            (old_fn,),
            ((x.shape, x.dtype),),
        )
    return x


def _overwrite_bwd(ctx, g):
    return zeros_like(g)


# The node an in-place op that cuts a tensor's history leaves behind (PyTorch's FillBackward).
# Graph-only: never applied, so it has no kernel and stays out of REGISTRY.
OVERWRITE = OpDef("overwrite", None, _overwrite_bwd, (), (), None, False)


def _rebase_view(x: Tensor, base: Tensor, r: Tensor) -> None:
    """Give base a CopySlices node and x a fresh view node on top of it."""
    base_in = _alias(base, copy=False)
    attrs = {"view_ops": x._view_ops, "src_shape": tuple(r.shape)}
    node = Node(
        COPY_SLICES,
        Ctx(COPY_SLICES.name, (), attrs, (base_in._requires_grad, r._requires_grad)),
        (edge_of(base_in), edge_of(r)),
        ((base.shape, base.dtype), (r.shape, r.dtype)),
    )
    base._grad_fn = node
    base._requires_grad = True
    v = replay_views(base, x._view_ops)
    x._grad_fn = v._grad_fn
    x._requires_grad = True


# ----------------------------------------------------------------------------- methods
def _inplace_form(name: str, saves_self: bool):
    """Tensor.<name>_: self = self.<name>(...), through ``inplace``."""
    op = name + "_"

    def method_(self, *args, **kw):
        fn = getattr(Tensor, name)
        return inplace(self, lambda x: fn(x, *args, **kw), saves_self=saves_self, op=op)

    method_.__name__ = method_.__qualname__ = op
    method_.__doc__ = f"In-place {name}: self = {name}(self, ...); returns self."
    return method_


# The in-place forms the op modules declared (``public(..., inplace=True)``); ops/__init__
# imports this module after every family so that the table is complete.
for _op, (_name, _saves) in api.INPLACE.items():
    tensor_member(_op, _inplace_form(_name, _saves))

for _dunder, _op in (
    ("__iadd__", "add_"),
    ("__isub__", "sub_"),
    ("__imul__", "mul_"),
    ("__itruediv__", "div_"),
    ("__ipow__", "pow_"),
    ("__ifloordiv__", "floor_divide_"),
    ("__imod__", "remainder_"),
):
    tensor_member(_dunder, getattr(Tensor, _op))


@public("copy_", function=False)
def copy_(self: Tensor, src: Tensor) -> Tensor:
    """Copy src (broadcast, cast) into self; differentiable with respect to src."""
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): src must be a Tensor, got {type(src).__name__}")

    def compute(x):
        s = src if src.dtype is x.dtype else src.to(x.dtype)
        return s.expand(tuple(x.shape)) * 1 if s.shape != x.shape else s.clone()

    return inplace(self, compute, saves_self=False, op="copy_")


@public("fill_", function=False)
def fill_(self: Tensor, value) -> Tensor:
    """Set every element to value."""

    def compute(x):
        v = value if isinstance(value, Tensor) else scalar_tensor(value, x.dtype, checked=True)
        return (v.to(x.dtype) if v.dtype is not x.dtype else v).expand(tuple(x.shape)).clone()

    return inplace(self, compute, saves_self=False, op="fill_")


@public("zero_", function=False)
def zero_(self: Tensor) -> Tensor:
    """Set every element to 0."""
    return fill_(self, 0)


@public("masked_fill_", function=False)
def masked_fill_(self: Tensor, mask: Tensor, value) -> Tensor:
    """Set the elements where mask is True to value, in place."""
    return inplace(self, lambda x: x.masked_fill(mask, value), saves_self=False, op="masked_fill_")


@public("fill_diagonal_", function=False)
def fill_diagonal_(self: Tensor, fill_value, wrap: bool = False) -> Tensor:
    """Set the main diagonal (every index equal) to fill_value, in place, as PyTorch: at least
    2 dims, all of one length beyond 2; ``wrap`` restarts a tall matrix's diagonal every
    ``columns + 1`` rows."""
    shape = tuple(self.shape)
    if len(shape) < 2:
        raise ShapeError(f"fill_diagonal_(): dimensions must be larger than 1, got shape {shape}")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise ShapeError(
            f"fill_diagonal_(): all dimensions of input must be of equal length, got {shape}"
        )
    mask = np.zeros(shape, dtype=bool)
    if len(shape) > 2:
        mask[(np.arange(shape[0]),) * len(shape)] = True
    else:
        rows, cols = shape
        flat = mask.reshape(-1)
        end = flat.size if wrap else min(rows, cols) * cols
        flat[0 : end : cols + 1] = True
    return masked_fill_(self, tensor(mask, device=self.device), fill_value)


def _random_values(self: Tensor, arr32) -> Tensor:
    """The float32 samples ``arr32`` (made where self lives) as a tensor to write into self."""
    if self._dev is not None:
        return Tensor._wrap(arr32, D.float32, dev=self._dev)  # _write casts to self's dtype
    return tensor(arr32, dtype=self.dtype)


@public("uniform_", function=False)
def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0) -> Tensor:
    """Fill with uniform samples from [a, b) (Philox stream; drawn on self's device)."""
    # Through inplace(): the new values depend on nothing, so a tensor with a history gets zero
    # gradient from here on, and a leaf that requires grad needs no_grad(), as PyTorch.
    return inplace(
        self,
        lambda x: _random_values(x, _uniform_f32(tuple(x.shape), a, b, be=x._dev)),
        saves_self=False,
        op="uniform_",
    )


@public("normal_", function=False)
def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0) -> Tensor:
    """Fill with normal samples (Philox stream; drawn on self's device)."""
    return inplace(
        self,
        lambda x: _random_values(x, _normal_f32(tuple(x.shape), mean, std, be=x._dev)),
        saves_self=False,
        op="normal_",
    )

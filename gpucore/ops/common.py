"""Helpers shared by the op families: argument normalisation and broadcasting."""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..creation import tensor
from ..errors import ArgumentTypeError, DTypeError, GpucoreIndexError, ShapeError
from ..tensor import HOST_READ_HOOK, Tensor
from .api import type_name


def same_result(x, *_, **__):
    """infer rule of ops whose output has the input's shape and dtype."""
    return (x.shape, x.dtype)


def float_result(x, **_):
    """infer rule of float math: the input's shape; exp/log/... of an integer tensor give the
    default floating dtype, as PyTorch."""
    return (x.shape, x.dtype if x.dtype.is_floating_point else D.default_float())


def float_input(x: Tensor) -> Tensor:
    """x for a composition of float math: integer and bool tensors in the default floating dtype
    (as PyTorch), so that ``logsumexp`` of an int8 tensor neither overflows nor truncates."""
    return x if x.dtype.is_floating_point else x.to(D.default_float())


def float_operands(input, other) -> tuple:
    """(input, other) of an op that computes in float (true division): an integer tensor with an
    int number is converted to the default floating dtype first, as PyTorch computes it, so the
    number converts exactly (uint8 / -2 is -0.5) instead of wrapping to the tensor's dtype."""
    t, n = (input, other) if isinstance(input, Tensor) else (other, input)
    if (
        isinstance(t, Tensor)
        and not t.dtype.is_floating_point
        and isinstance(n, (int, np.integer))
        and not isinstance(n, (bool, np.bool_))
    ):
        t = t.to(D.default_float())
        return (t, n) if isinstance(input, Tensor) else (n, t)
    return input, other


def tensor_list(op: str, tensors) -> list:
    """cat's and stack's ``tensors``: a sequence of Tensors, else ArgumentTypeError."""
    if isinstance(tensors, (Tensor, str)) or not hasattr(tensors, "__iter__"):
        raise ArgumentTypeError(
            f"{op}(): argument 'tensors' (position 1) must be a sequence of Tensors, not "
            f"{type_name(tensors)}"
        )
    out = list(tensors)
    for i, t in enumerate(out):
        if not isinstance(t, Tensor):
            raise ArgumentTypeError(
                f"{op}(): expected a Tensor as element {i} of argument 'tensors', got "
                f"{type_name(t)}"
            )
    return out


def no_bool(op: str):
    """A check refusing bool operands of ``op`` (PyTorch refuses ``-`` on bools)."""

    def check(*operands):
        for t in operands:
            if isinstance(t, Tensor) and t.dtype is D.bool_:
                raise DTypeError(
                    f"{op} of a bool tensor is not supported (as in PyTorch); use logical_not() / "
                    "logical_xor(), or convert with .int() or .float() first"
                )

    return check


def scalar_tensor(value, dtype, checked: bool = False) -> Tensor:
    """A 0-d tensor holding a Python number, for mixing scalars into tensor ops. An int for an
    integer dtype wraps as PyTorch's number operands do (uint8: -2 is 254); ``checked`` (fill
    values) refuses what does not fit instead (``dtypes.int_scalar``)."""
    arr = np.empty((), dtype.np)
    if (
        isinstance(value, (int, np.integer))
        and not isinstance(value, (bool, np.bool_))
        and not dtype.is_floating_point
        and dtype is not D.bool_
    ):
        arr[()] = D.int_scalar(value, dtype, checked)
    elif dtype is D.bfloat16:
        arr[()] = D.f32_to_bf16(np.array([value], np.float32))[0]
    else:
        arr[()] = value
    return Tensor._wrap(arr, dtype)


def as_operands(op: str, a, b, names: tuple = ("input", "other"), position: int = 1):
    """Two operands as tensors of one common dtype (PyTorch promotion; scalars lift category).

    Each is a Tensor, a number or a numpy array/scalar; anything else raises ArgumentTypeError
    naming the op and the argument (``names``, the first at ``position``)."""
    if type(a) is Tensor and type(b) is Tensor and a._dtype is b._dtype:
        return a, b  # the common case, decided without the promotion rules
    a, b = _lift_numpy(a), _lift_numpy(b)
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    if ta and tb:
        if a.ndim == 0 and b.ndim > 0 and _category(a.dtype) <= _category(b.dtype):
            dt = b.dtype  # a 0-d tensor acts like a scalar of its category (PyTorch)
        elif b.ndim == 0 and a.ndim > 0 and _category(b.dtype) <= _category(a.dtype):
            dt = a.dtype
        else:
            dt = D.promote(a.dtype, b.dtype)
        return (a if a.dtype is dt else a.to(dt)), (b if b.dtype is dt else b.to(dt))
    if not ta:
        _check_scalar(op, a, names[0], position)
    if not tb:
        _check_scalar(op, b, names[1], position + 1)
    if ta:
        dt = D.scalar_result(a.dtype, b)
        return (a if a.dtype is dt else a.to(dt)), scalar_tensor(b, dt)
    if tb:
        dt = D.scalar_result(b.dtype, a)
        return scalar_tensor(a, dt), (b if b.dtype is dt else b.to(dt))
    raise ArgumentTypeError(
        f"{op}(): argument '{names[0]}' (position {position}) must be Tensor, not "
        f"{type_name(a)} (one of '{names[0]}' and '{names[1]}' must be a Tensor)"
    )


def _category(dt) -> int:
    """PyTorch's promotion categories: bool < integer < floating."""
    return 2 if dt.is_floating_point else (0 if dt is D.bool_ else 1)


def _lift_numpy(v):
    """numpy scalars become Python numbers, numpy arrays tensors (PyTorch accepts both)."""
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return tensor(v)
    return v


def _check_scalar(op, v, name, position):
    if not isinstance(v, (int, float, bool, np.number)):
        raise ArgumentTypeError(
            f"{op}(): argument '{name}' (position {position}) must be Tensor or a number, not "
            f"{type_name(v)}"
        )


def host_quiet(t: Tensor) -> np.ndarray:
    """``t._host()`` for gpucore's own plumbing that a capture records otherwise (an in-place
    write's copy, a device move, a runtime op's evaluation, a bounds check): not a host read
    of the model's: HOST_READ_HOOK (runtime/capture/trace.py) is told it is ``quiet``, which
    a shapes-only trace still stops at (its values were not computed)."""
    hook = HOST_READ_HOOK[0]  # (read once: another thread's capture may end meanwhile)
    if hook is not None:
        hook(t, quiet=True)
    return t._data if t._dev is None else t._dev.host_view(t._data)


def check_indices(op: str, index, size: int, what: str) -> None:
    """Raise GpucoreIndexError unless every value of ``index`` (a Tensor or an array) lies in
    [0, size): the index-taking ops (index_select, embedding, nll_loss...) refuse negative
    indices, as PyTorch; only indexing itself (``x[idx]``) counts them from the end."""
    # a check only (the graph does not depend on it): not a host read a capture must refuse
    arr = host_quiet(index) if isinstance(index, Tensor) else np.asarray(index)
    if arr.size == 0:
        return
    lo, hi = int(arr.min()), int(arr.max())
    if lo < 0 or hi >= size:
        raise GpucoreIndexError(
            f"{op}(): index {lo if lo < 0 else hi} is out of range for {what} of size {size} "
            f"(expected 0 <= index < {size})"
        )


def broadcast_shapes(op: str, *shapes) -> tuple:
    """numpy/PyTorch broadcasting of shapes, or ShapeError naming the op and the shapes."""
    nd = max(len(s) for s in shapes)
    out = []
    for i in range(nd):
        size = 1
        for s in shapes:
            j = len(s) - nd + i
            if j < 0:
                continue
            d = s[j]
            if d == 1:
                continue
            if size != 1 and d != size:
                raise ShapeError(
                    f"{op}: shapes {' and '.join(str(tuple(x)) for x in shapes)} are not "
                    f"broadcastable (dim {i - nd}: {size} vs {d}); make the sizes equal or 1"
                )
            size = d
        out.append(size)
    return tuple(out)


def wrap_dim(dim, ndim: int, op: str = "") -> int:
    lim = ndim if ndim > 1 else 1
    if type(dim) is int and -lim <= dim < lim:  # the common case first: every op wraps dims
        return dim + lim if dim < 0 else dim
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
        raise ArgumentTypeError(f"{op}: dim must be an int, got {type_name(dim)}")
    if dim < -lim or dim >= lim:
        raise GpucoreIndexError(
            f"{op}: dim {dim} is out of range for a tensor of {ndim} dims; "
            f"expected a value in [{-lim}, {lim - 1}]"
        )
    return int(dim) + lim if dim < 0 else int(dim)


def norm_dims(dim, ndim: int, op: str = "") -> tuple:
    """dim (None, int, or tuple) as a sorted tuple of non-negative dims; None means all.

    An empty tuple means all dims too (PyTorch's ``x.sum(())``). A 0-d tensor accepts dim 0 and
    -1 (as PyTorch) and has no dims to reduce."""
    if dim is None or (isinstance(dim, (list, tuple)) and len(dim) == 0):
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        dims = tuple(sorted({wrap_dim(d, ndim, op) for d in dim}))
        if len(dims) != len(dim):
            raise ValueError(f"{op}: dim {tuple(dim)} repeats a dimension")
        return dims if ndim else ()
    d = wrap_dim(dim, ndim, op)
    return (d,) if ndim else ()


def args_or_keyword(args: tuple, value, op: str, name: str) -> tuple:
    """The varargs of ``op(*args)``, or PyTorch's keyword form of them (``flip(x, dims=(0,))``,
    ``x.reshape(shape=(2, 3))``) as a one-element tuple; both at once raise."""
    if value is None:
        return args
    if args:
        raise ArgumentTypeError(
            f"{op}(): got {name} both as positional arguments {args} and as {name}={value!r}"
        )
    if not isinstance(value, (tuple, list)):  # as PyTorch: the keyword takes a sequence
        raise ArgumentTypeError(
            f"{op}(): argument '{name}' must be a tuple of ints, not {type(value).__name__}"
        )
    return (value,)


def shape_arg(args) -> tuple:
    """Shape given as varargs or as one tuple/list."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = args[0]
    return tuple(map(int, args))


def reduced_shape(shape: tuple, dims: tuple, keepdim: bool) -> tuple:
    if keepdim:
        return tuple(1 if i in dims else s for i, s in enumerate(shape))
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def host_contiguous(t):
    """t, copied C-contiguous when it is a strided host tensor (a gradient expanded by sum's
    backward, say), so that the C fast lanes, which take contiguous tensors only, can run it."""
    return t if t._dev is not None or t._data.flags.c_contiguous else t.contiguous()

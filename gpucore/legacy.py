"""PyTorch's legacy typed constructors (``gpucore.FloatTensor``, ``LongTensor``, ...) and the
default floating dtype's public names (``get_default_dtype`` / ``set_default_dtype``; the value
itself is ``dtypes.default_float()``).

A typed constructor takes sizes or data, as PyTorch's: ``FloatTensor(2, 3)`` and
``FloatTensor(gpucore.Size([2, 3]))`` are uninitialised 2x3 tensors, ``FloatTensor([1, 2])`` holds
the data, ``FloatTensor()`` is empty, ``FloatTensor(t)`` shares a tensor of that dtype (another
dtype raises). ``isinstance(t, gpucore.FloatTensor)`` is True for float32 tensors, on any device.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from . import dtypes as D
from .creation import empty
from .creation import tensor as _tensor
from .errors import DTypeError
from .tensor import Size, Tensor

__all__ = [
    "FloatTensor",
    "DoubleTensor",
    "HalfTensor",
    "BFloat16Tensor",
    "LongTensor",
    "IntTensor",
    "CharTensor",
    "ByteTensor",
    "BoolTensor",
    "get_default_dtype",
    "set_default_dtype",
    "set_default_tensor_type",
]


def _is_size(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


class _TensorType(type):
    """The metaclass of the typed constructors (PyTorch's ``torch.tensortype``)."""

    dtype: D.dtype

    def __instancecheck__(cls, other) -> bool:
        return isinstance(other, Tensor) and other.dtype is cls.dtype

    def __call__(cls, *args, device=None):
        dt = cls.dtype
        if not args:
            return empty(0, dtype=dt, device=device)
        if all(_is_size(a) for a in args):
            return empty(*(int(a) for a in args), dtype=dt, device=device)
        if len(args) == 1:
            (a,) = args
            if isinstance(a, Size):
                return empty(*a, dtype=dt, device=device)
            if isinstance(a, Tensor):
                if a.dtype is not dt:
                    raise DTypeError(
                        f"{cls.__name__}(tensor): expected a {dt} tensor, got {a.dtype}; use "
                        f"tensor.to({dt}) to convert"
                    )
                t = a.detach()
                return t if device is None else t.to(device)
            if isinstance(a, (Sequence, np.ndarray)) and not isinstance(a, (str, bytes)):
                return _tensor(a, dtype=dt, device=device)
        raise TypeError(
            f"{cls.__name__}() takes sizes (ints or a gpucore.Size), data (a list or array) or a "
            f"{dt} tensor, got ({', '.join(type(a).__name__ for a in args)})"
        )

    def __repr__(cls) -> str:
        return f"gpucore.{cls.__name__}"


def _typed(name: str, dtype: D.dtype) -> type:
    doc = f"Legacy constructor of {dtype} tensors (see gpucore.legacy); isinstance checks dtype."
    return _TensorType(name, (), {"dtype": dtype, "__doc__": doc, "__module__": __name__})


FloatTensor = _typed("FloatTensor", D.float32)
DoubleTensor = _typed("DoubleTensor", D.float64)
HalfTensor = _typed("HalfTensor", D.float16)
BFloat16Tensor = _typed("BFloat16Tensor", D.bfloat16)
LongTensor = _typed("LongTensor", D.int64)
IntTensor = _typed("IntTensor", D.int32)
ShortTensor = _typed("ShortTensor", D.int16)
CharTensor = _typed("CharTensor", D.int8)
ByteTensor = _typed("ByteTensor", D.uint8)
BoolTensor = _typed("BoolTensor", D.bool_)
# by name, for Tensor.type("torch.FloatTensor") (gpucore/ops/elementwise.py)
LEGACY_TYPES = {
    t.__name__: t
    for t in (FloatTensor, DoubleTensor, HalfTensor, BFloat16Tensor, LongTensor, IntTensor,
              ShortTensor, CharTensor, ByteTensor, BoolTensor)
}  # fmt: skip


def get_default_dtype() -> D.dtype:
    """The default floating dtype: of tensors made from Python floats, of the float creation
    functions without ``dtype=``, of new nn parameters and of float results of integer inputs.
    ``gpucore.float32`` unless ``set_default_dtype`` changed it (as torch.get_default_dtype)."""
    return D.default_float()


def set_default_dtype(d) -> None:
    """Set the default floating dtype to ``d`` (float16, bfloat16, float32 or float64), as
    torch.set_default_dtype: later ``tensor(1.5)``, ``zeros(2)``, ``rand(2)``, ``arange(0.5)``,
    ``nn.Linear(...)`` parameters, ``int_tensor / 2`` and ``int_tensor * 1.5`` get it; existing
    tensors and explicit ``dtype=`` are unaffected, and ``FloatTensor`` stays float32. The setting
    is process-global (every thread sees it), as PyTorch's; restore it with
    ``set_default_dtype(gpucore.float32)``. Non-floating dtypes raise TypeError."""
    try:
        dt = D.as_dtype(d)
    except DTypeError:
        dt = None
    if dt is None or not dt.is_floating_point:
        raise DTypeError(  # a TypeError, as PyTorch's
            f"set_default_dtype({d!r}): only floating-point types are supported as the default "
            "type (gpucore.float16, bfloat16, float32 or float64)"
        )
    D.set_default_float(dt)


def set_default_tensor_type(t) -> None:
    """PyTorch's deprecated form of ``set_default_dtype``: ``t`` is a floating legacy class
    (``gpucore.DoubleTensor``) or its name (``"torch.DoubleTensor"``); warns, as PyTorch 2.x does.
    CUDA types do not exist in gpucore (tensors go to the GPU with ``.to('vulkan')``)."""
    warnings.warn(
        "set_default_tensor_type() is deprecated (as in PyTorch since 2.1); use "
        "gpucore.set_default_dtype()",
        UserWarning,
        stacklevel=2,
    )
    if isinstance(t, str):
        cls = LEGACY_TYPES.get(t.rsplit(".", 1)[-1])
        if cls is None or ".cuda." in t:
            raise DTypeError(
                f"set_default_tensor_type({t!r}): invalid type; give a floating legacy class such "
                "as gpucore.DoubleTensor or its name (CUDA types do not exist: use .to('vulkan'))"
            )
        t = cls
    if not isinstance(t, _TensorType):
        raise DTypeError(
            f"set_default_tensor_type({t!r}): invalid type object: only floating-point types are "
            "supported as the default type (e.g. gpucore.DoubleTensor)"
        )
    set_default_dtype(t.dtype)

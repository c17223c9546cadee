"""Tensor attributes and small members PyTorch scripts use: data_ptr, storage_offset, nbytes,
itemsize, get_device, layout, type (legacy type names and conversions), H / mH, pin_memory /
is_pinned, share_memory_ / is_shared, apply_ / map_, and the predicates is_floating_point,
is_complex, is_nonzero as functions.

kernels: none.
"""

from __future__ import annotations

import numpy as np

from .. import dtypes as D
from ..autograd.graph import view_base
from ..errors import DeviceError, ShapeError
from ..tensor import Tensor
from .api import public, tensor_member
from .elementwise import _to
from .inplace import inplace


class layout:  # noqa: N801 - PyTorch's name (torch.layout)
    """A tensor's memory layout: gpucore tensors are dense and strided (``gpucore.strided``)."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"gpucore.{self.name}"


strided = layout("strided")


def _host_array(t: Tensor, what: str) -> np.ndarray:
    if t._dev is not None:
        raise DeviceError(
            f"{what} of a Vulkan tensor: its memory is a device buffer; use .cpu() first"
        )
    return t._data


tensor_member("layout", property(lambda self: strided, doc="gpucore.strided (dense tensors)."))
tensor_member(
    "nbytes", property(lambda self: self.numel() * self.element_size(), doc="Bytes of the data.")
)
tensor_member("itemsize", property(lambda self: self.element_size(), doc="Bytes per element."))
tensor_member(
    "H",
    property(lambda self: _adjoint(self, 2), doc="The transpose of a 2-D tensor (real: .T)."),
)
tensor_member(
    "mH",
    property(lambda self: _adjoint(self, None), doc="The last two dims swapped (real: .mT)."),
)


def _adjoint(t: Tensor, need) -> Tensor:
    if need is not None and t.ndim not in (0, 2):
        raise ShapeError(f"tensor.H is only supported on matrices (2-D tensors), got {t.ndim}-D")
    if t.ndim < 2:
        if need is None:
            raise ShapeError(f"tensor.mH is only supported on tensors of >= 2 dims, got {t.ndim}")
        return t
    return t.transpose(-2, -1)


@public("data_ptr", function=False)
def data_ptr(input: Tensor) -> int:
    """The address of the first element in host memory (CPU tensors)."""
    return int(_host_array(input, "data_ptr()").__array_interface__["data"][0])


@public("storage_offset", function=False)
def storage_offset(input: Tensor) -> int:
    """Elements between the start of the storage (the base tensor's data) and this view's."""
    base = view_base(input)
    if base is None or input._dev is not None:
        return 0
    a = input._data.__array_interface__["data"][0]
    b = base._data.__array_interface__["data"][0]
    return (a - b) // input.element_size()


@public("get_device", function=False)
def get_device(input: Tensor) -> int:
    """-1 for a CPU tensor, the device index (0) for a Vulkan one, as PyTorch."""
    return -1 if input._dev is None else 0


@public("pin_memory", function=False)
def pin_memory(input: Tensor, device=None) -> Tensor:
    """The tensor itself: host memory needs no pinning here (no CUDA transfers)."""
    return input


@public("is_pinned", function=False)
def is_pinned(input: Tensor, device=None) -> bool:
    """False: gpucore has no page-locked host memory."""
    return False


@public("share_memory_", function=False)
def share_memory_(input: Tensor) -> Tensor:
    """The tensor itself (worker processes receive tensors by pickling)."""
    return input


@public("is_shared", function=False)
def is_shared(input: Tensor) -> bool:
    """False: tensors are not in shared memory."""
    return False


def _python_map(op: str, self: Tensor, fn, other: Tensor | None) -> Tensor:
    if self._requires_grad:
        raise RuntimeError(f"{op} is only supported on tensors that do not require grad")
    a = self.detach().numpy(force=True)
    b = None if other is None else np.broadcast_to(other.detach().numpy(force=True), a.shape)
    flat = a.reshape(-1)
    vals = (
        [fn(v) for v in flat.tolist()]
        if b is None
        else [fn(v, w) for v, w in zip(flat.tolist(), b.reshape(-1).tolist())]
    )
    new = np.array(vals, dtype=a.dtype if self.dtype is not D.bfloat16 else np.float32)
    from ..creation import tensor  # noqa: PLC0415

    out = tensor(new.reshape(a.shape), dtype=self.dtype, device=self.device)
    return inplace(self, lambda x: out, saves_self=False, op=op)


@public("apply_", function=False)
def apply_(self: Tensor, callable) -> Tensor:  # noqa: A002 - PyTorch's name
    """Replace each element by ``callable(element)`` (a Python function; slow, CPU), in place."""
    return _python_map("apply_", self, callable, None)


@public("map_", function=False)
def map_(self: Tensor, tensor: Tensor, callable) -> Tensor:  # noqa: A002
    """Replace each element by ``callable(element, other_element)`` (other broadcast)."""
    return _python_map("map_", self, callable, tensor)


@public("is_floating_point", method=False)
def is_floating_point(input: Tensor) -> bool:
    """True for float16, bfloat16, float32 and float64 tensors."""
    return input.dtype.is_floating_point


@public("is_complex")
def is_complex(input: Tensor) -> bool:
    """False: gpucore has no complex dtypes."""
    return False


@public("is_nonzero")
def is_nonzero(input: Tensor) -> bool:
    """The truth of a one-element tensor, as torch.is_nonzero (more elements raise)."""
    if input.numel() != 1:
        raise ShapeError(
            f"is_nonzero(): a tensor with {input.numel()} elements cannot be converted to a bool"
        )
    return bool(input.reshape(()).item())


def _type(self: Tensor, dtype=None, non_blocking: bool = False):
    """PyTorch's ``Tensor.type``: no argument gives the legacy name ("gpucore.FloatTensor"); a
    dtype, legacy class (``imgs.type(Tensor)``) or name ("torch.LongTensor") converts."""
    # gpucore.legacy builds on creation, which imports the ops: a module-level import is a cycle
    from ..legacy import LEGACY_TYPES

    if dtype is None:
        names = {cls.dtype: name for name, cls in LEGACY_TYPES.items()}
        names.update({d: f"UInt{d.itemsize * 8}Tensor" for d in D.LIMITED})  # (no classes)
        return f"gpucore.{names[self.dtype]}" if self.dtype in names else str(self.dtype)
    if isinstance(dtype, str):
        cls = LEGACY_TYPES.get(dtype.rsplit(".", 1)[-1])
        if cls is None or ".cuda." in dtype:
            raise TypeError(f"type(): invalid type {dtype!r}; use a dtype, a gpucore legacy "
                            "class such as gpucore.FloatTensor, or its name (CUDA types do not "
                            "exist: use .to('vulkan'))")  # fmt: skip
        dtype = cls
    return _to(self, getattr(dtype, "dtype", dtype) if isinstance(dtype, type) else dtype)


tensor_member("type", _type)

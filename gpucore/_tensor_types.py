"""Size and device: the small value types of a Tensor's metadata (its shape, where its data
lives), as ``torch.Size`` and ``torch.device``. Public as ``gpucore.tensor.Size`` and
``gpucore.tensor.device`` (their ``__module__``: pickles, reprs and stubs name them there, as
numpy names its functions ``numpy.*``); this file only keeps tensor.py under its line cap."""

from __future__ import annotations

from .errors import DeviceError


class Size(tuple):
    """A tensor's shape: a tuple of ints, as ``torch.Size``."""

    __module__ = "gpucore.tensor"
    __slots__ = ()

    def numel(self) -> int:
        n = 1
        for s in self:
            n *= s
        return n

    def __getitem__(self, key):
        r = tuple.__getitem__(self, key)
        return Size(r) if isinstance(key, slice) else r

    def __add__(self, other):
        return Size(tuple.__add__(self, tuple(other)))

    def __radd__(self, other):
        return Size(tuple(other) + tuple(self))

    def __repr__(self) -> str:
        return f"gpucore.Size({list(self)})"


class device:
    """Where a tensor's data lives: ``device('cpu')`` or ``device('vulkan', index)``."""

    __module__ = "gpucore.tensor"
    __slots__ = ("type", "index")

    def __init__(self, type: str = "cpu", index: int | None = None):
        if isinstance(type, device):
            type, index = type.type, type.index
        if ":" in type:
            type, idx = type.split(":", 1)
            index = int(idx)
        if type not in ("cpu", "vulkan"):
            if type in ("cuda", "mps", "xpu", "hip", "xla", "mtia", "meta"):  # PyTorch's names
                raise DeviceError(
                    f"device {type!r} is not available: gpucore runs on Vulkan GPUs and the CPU "
                    "without CUDA; use 'vulkan' (gpucore.accelerator.current_accelerator()), "
                    "'cpu', or the 'auto' policy (gpucore.set_device_policy('auto'), the default)"
                )
            raise DeviceError(f"unknown device {type!r}; expected 'cpu' or 'vulkan'")
        self.type = type
        self.index = index

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except (ValueError, RuntimeError):  # 'cuda', 'vulkan:x': simply not this device
                return False
        return (
            isinstance(other, device)
            and self.type == other.type
            and (self.index == other.index or self.index is None or other.index is None)
        )

    def __hash__(self) -> int:
        return hash(self.type)

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        return (
            f"device(type='{self.type}')"
            if self.index is None
            else (f"device(type='{self.type}', index={self.index})")
        )

"""``gpucore.accelerator``: PyTorch's device-agnostic probe (``torch.accelerator``), answered
with gpucore's accelerator, the Vulkan device.

    device = gpucore.accelerator.current_accelerator() if gpucore.accelerator.is_available() \\
        else gpucore.device("cpu")

The answer is the 'auto' policy's: a Vulkan device counts when gpucore would run ops on it
(CPU-type devices such as Mesa's lavapipe only with GPUCORE_VULKAN_ALLOW_CPU=1), so a script
written for "any accelerator" lands on the GPU when there is one and on the CPU otherwise.
Importing this module creates no device; the first call asks for one, as ``gpucore.vulkan``.
"""

from __future__ import annotations

from . import vulkan
from .backends.vulkan import device as _vk_device
from .errors import DeviceError
from .tensor import device as _device

__all__ = [
    "current_accelerator",
    "current_device_index",
    "device_count",
    "is_available",
    "set_device_index",
    "synchronize",
]

_NONE = "Cannot access accelerator device when none is available."


def is_available() -> bool:
    """True when a usable Vulkan device exists (``gpucore.vulkan.is_available()``)."""
    return vulkan.is_available()


def current_accelerator(check_available: bool = False) -> _device | None:
    """``device('vulkan')`` when a usable Vulkan device exists, else None (so
    ``.to(current_accelerator())`` always names a device that works). ``check_available`` is
    accepted: the answer is always checked."""
    return _device("vulkan") if is_available() else None


def device_count() -> int:
    """The Vulkan devices gpucore could use (CPU-type ones only when allowed); 0 when none is
    usable. gpucore runs on one of them (``GPUCORE_VULKAN_DEVICE`` picks which)."""
    if not is_available():
        return 0
    allow_cpu = _vk_device.allow_cpu_device()
    usable = [d for d in vulkan.devices() if d["type"] != "cpu" or allow_cpu]
    return max(1, len(usable))


def current_device_index() -> int:
    """0, the device gpucore runs on; RuntimeError (DeviceError) when none is usable."""
    if not is_available():
        raise DeviceError(_NONE)
    return 0


def set_device_index(device) -> None:
    """Accepts the device gpucore runs on (0, 'vulkan', 'vulkan:0'); others raise DeviceError
    (choose one with GPUCORE_VULKAN_DEVICE before gpucore starts)."""
    if not is_available():
        raise DeviceError(_NONE)
    dev = _device(device) if isinstance(device, str) else device
    index = dev.index if isinstance(dev, _device) else dev
    if (isinstance(dev, _device) and dev.type != "vulkan") or index not in (None, 0):
        raise DeviceError(
            f"gpucore runs on one Vulkan device (index 0); got {device!r}. Choose it with "
            "GPUCORE_VULKAN_DEVICE=N before gpucore starts"
        )


def synchronize(device=None) -> None:
    """Wait until the Vulkan device has finished the work submitted so far."""
    if not is_available():
        raise DeviceError(_NONE)
    vulkan.synchronize()

"""``gpucore.cuda``: what a PyTorch script asks CUDA before any model code, answered for gpucore,
which runs on Vulkan GPUs and the CPU without CUDA.

``is_available()`` is False and ``device_count()`` 0, so ``device = "cuda" if
gpucore.cuda.is_available() else "cpu"`` picks the CPU (``gpucore.accelerator`` finds the Vulkan
device); the seeding functions seed gpucore's default generator (every device shares it);
``synchronize`` and ``empty_cache`` do nothing and the memory counters are 0. What needs a CUDA
device (``current_device``, ``get_device_name``, ``get_device_properties``, ``set_device``)
raises DeviceError naming the fix.
"""

from __future__ import annotations

from .. import random as _random
from ..errors import DeviceError
from . import amp

__all__ = [
    "amp",
    "current_device",
    "device_count",
    "empty_cache",
    "get_device_capability",
    "get_device_name",
    "get_device_properties",
    "initial_seed",
    "is_available",
    "is_bf16_supported",
    "is_initialized",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "reset_peak_memory_stats",
    "seed",
    "seed_all",
    "set_device",
    "synchronize",
]

NO_CUDA = (
    "CUDA is not available: gpucore runs on Vulkan GPUs and the CPU without CUDA. Use the "
    "'vulkan' device (gpucore.accelerator.current_accelerator()) or 'cpu', or leave placement to "
    "the 'auto' policy (gpucore.set_device_policy('auto'), the default)"
)


def is_available() -> bool:
    """False: gpucore has no CUDA backend (``gpucore.accelerator.is_available()`` asks for the
    Vulkan device)."""
    return False


def device_count() -> int:
    """0: no CUDA devices."""
    return 0


def is_initialized() -> bool:
    """False: there is no CUDA state."""
    return False


def is_bf16_supported(including_emulation: bool = True) -> bool:
    """False: no CUDA device."""
    return False


def manual_seed(seed: int) -> None:
    """Seed gpucore's default generator (PyTorch seeds the current CUDA device's)."""
    _random.manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    """Seed gpucore's default generator (PyTorch seeds every CUDA device's)."""
    _random.manual_seed(seed)


def seed() -> None:
    """Reseed gpucore's default generator from the OS entropy pool."""
    _random.seed()


def seed_all() -> None:
    """Reseed gpucore's default generator from the OS entropy pool."""
    _random.seed()


def initial_seed() -> int:
    """The seed of gpucore's default generator."""
    return _random.initial_seed()


def synchronize(device=None) -> None:
    """Nothing to wait for (``gpucore.accelerator.synchronize()`` waits for the Vulkan device)."""


def empty_cache() -> None:
    """Nothing to free (``gpucore.empty_cache()`` frees the host allocator's cache)."""


def memory_allocated(device=None) -> int:
    """0 bytes: no CUDA memory."""
    return 0


def max_memory_allocated(device=None) -> int:
    """0 bytes: no CUDA memory."""
    return 0


def memory_reserved(device=None) -> int:
    """0 bytes: no CUDA memory."""
    return 0


def max_memory_reserved(device=None) -> int:
    """0 bytes: no CUDA memory."""
    return 0


def reset_peak_memory_stats(device=None) -> None:
    """Nothing to reset."""


def current_device() -> int:
    """Raises DeviceError: there is no CUDA device."""
    raise DeviceError(NO_CUDA)


def get_device_name(device=None) -> str:
    """Raises DeviceError: there is no CUDA device."""
    raise DeviceError(NO_CUDA)


def get_device_properties(device=None):
    """Raises DeviceError: there is no CUDA device."""
    raise DeviceError(NO_CUDA)


def get_device_capability(device=None) -> tuple[int, int]:
    """Raises DeviceError: there is no CUDA device."""
    raise DeviceError(NO_CUDA)


def set_device(device) -> None:
    """Raises DeviceError: there is no CUDA device."""
    raise DeviceError(NO_CUDA)

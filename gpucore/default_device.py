"""The default device (torch.set_default_device / get_default_device): where the creation
functions (tensor, zeros, ones, full, empty, arange, linspace, logspace, eye, rand, randn,
randint, randperm, ...) and new nn parameters put a tensor when no ``device=`` is given.

The value lives here, process-global as PyTorch's; gpucore/creation.py's device check reads it.
``*_like`` functions and ``Tensor.new_*`` keep following their tensor, as in PyTorch.
"""

from __future__ import annotations

from .tensor import device as _device

# None: the host (the CPU); else a device('vulkan') the creation functions upload to.
_DEFAULT: list = [None]


def set_default_device(device) -> None:
    """Make ``device`` ('cpu', 'vulkan', a ``gpucore.device``, or None for the CPU) the device
    that creation functions and new nn parameters use when they are given no ``device=``, as
    torch.set_default_device. ``'cuda'`` raises DeviceError (gpucore runs on Vulkan and the
    CPU); asking for 'vulkan' where no Vulkan device is usable raises at the first creation."""
    if device is None:
        _DEFAULT[0] = None
        return
    if isinstance(device, bool) or not isinstance(device, (str, int, _device)):
        raise TypeError(
            f"set_default_device(): expected a device ('cpu', 'vulkan', gpucore.device) or None, "
            f"got {type(device).__name__}"
        )
    if isinstance(device, int):  # PyTorch reads an int as an accelerator index
        device = _device("vulkan", device)
    d = _device(device)
    _DEFAULT[0] = None if d.type == "cpu" else d


def get_default_device() -> _device:
    """The device creation functions use without ``device=`` (``device(type='cpu')`` unless
    set_default_device changed it), as torch.get_default_device."""
    d = _DEFAULT[0]
    return _device("cpu") if d is None else d


def default_device():
    """The default device for the creation functions: None for the host, else the device."""
    return _DEFAULT[0]

"""gpucore.signal: PyTorch's torch.signal (its ``windows`` module)."""

from . import windows

__all__ = ["windows"]

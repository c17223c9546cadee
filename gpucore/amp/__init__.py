"""``gpucore.amp``: automatic mixed precision helpers, PyTorch's ``torch.amp`` names.

``GradScaler`` (grad_scaler.py): dynamic loss scaling for half-precision training."""

from .grad_scaler import GradScaler

__all__ = ["GradScaler"]

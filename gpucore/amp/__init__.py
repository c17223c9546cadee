"""``gpucore.amp``: automatic mixed precision, PyTorch's ``torch.amp`` names.

``autocast`` (autocast_mode.py): regions where matrix products run in float16 / bfloat16 and
losses in float32; ``GradScaler`` (grad_scaler.py): dynamic loss scaling for half-precision
training."""

from .autocast_mode import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "get_autocast_dtype", "is_autocast_enabled"]

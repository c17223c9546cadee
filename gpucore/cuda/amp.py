"""``gpucore.cuda.amp``: PyTorch's older path to the AMP helpers (``torch.cuda.amp``).

``GradScaler(...)`` here is ``gpucore.amp.GradScaler("cuda", ...)``: with no CUDA behind it, an
enabled scaler disables itself with a warning, as PyTorch's does on a machine without CUDA, so
scripts that create one unconditionally run unchanged."""

from __future__ import annotations

from ..amp import GradScaler as _GradScaler

__all__ = ["GradScaler"]


class GradScaler(_GradScaler):
    """``torch.cuda.amp.GradScaler``: ``gpucore.amp.GradScaler`` for the "cuda" device."""

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ):
        super().__init__(
            "cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled
        )

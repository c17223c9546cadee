"""``gpucore.cuda.amp``: PyTorch's older path to the AMP helpers (``torch.cuda.amp``).

``autocast(...)`` here is ``gpucore.autocast("cuda", ...)`` and ``GradScaler(...)`` is
``gpucore.amp.GradScaler("cuda", ...)``: with no CUDA behind them, enabled ones disable
themselves with a warning, as PyTorch's do on a machine without CUDA, so scripts that create
them unconditionally run unchanged."""

from __future__ import annotations

from ..amp import GradScaler as _GradScaler
from ..amp import autocast as _autocast

__all__ = ["GradScaler", "autocast"]


class autocast(_autocast):  # noqa: N801 - PyTorch's name
    """``torch.cuda.amp.autocast``: ``gpucore.autocast("cuda", ...)``, which warns and does
    nothing when enabled (there is no CUDA)."""

    def __init__(self, enabled: bool = True, dtype=None, cache_enabled: bool = True):
        super().__init__("cuda", dtype, enabled, cache_enabled)


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

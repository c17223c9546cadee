"""``GradScaler``: dynamic loss scaling, PyTorch's ``torch.amp.GradScaler``.

Half-precision gradients underflow; multiplying the loss by a large factor before backward keeps
them representable. ``step`` divides the gradients by the factor again, skips the optimizer step
when any of them is inf or NaN, and ``update`` halves the factor after such a step (doubling it
after ``growth_interval`` clean ones). The non-finite check runs as tensor ops on whatever device
holds the gradients and is read on the host once per ``step``, not once per parameter.
"""

from __future__ import annotations

import enum
import math

import numpy as np

from .. import _caller_warnings as caller_warnings
from .. import dtypes as D
from ..autograd.grad_mode import no_grad
from ..tensor import Tensor


class _Stage(enum.Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _as_float(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"GradScaler: {name} must be a number, got {type(value).__name__}")
    return float(value)


class GradScaler:
    """Scales the loss, unscales and checks the gradients, skips steps with inf/NaN gradients
    and adapts the scale, as ``torch.amp.GradScaler``.

    device: "cpu" or "vulkan" (any gpucore device works: the scale is a Python float and the
    checks run where the gradients are); "cuda", PyTorch's default, has no CUDA behind it, so the
    scaler is disabled with a warning, as PyTorch does on a machine without CUDA.
    """

    def __init__(
        self,
        device: str = "cuda",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ):
        self._device = str(device)
        if enabled and self._device.startswith("cuda"):
            caller_warnings.warn(
                "GradScaler is enabled for 'cuda', but CUDA is not available (gpucore runs on "
                "Vulkan and the CPU). Disabling; pass device='vulkan' or 'cpu' to scale.",
            )
            enabled = False
        self._enabled = bool(enabled)
        init_scale = _as_float("init_scale", init_scale)
        growth_factor = _as_float("growth_factor", growth_factor)
        backoff_factor = _as_float("backoff_factor", backoff_factor)
        if growth_factor <= 1.0:
            raise ValueError(f"GradScaler: growth_factor should be > 1, got {growth_factor}")
        if not 0.0 < backoff_factor < 1.0:
            raise ValueError(
                f"GradScaler: backoff_factor should be in (0, 1), got {backoff_factor}"
            )
        if isinstance(growth_interval, bool) or not isinstance(growth_interval, int):
            raise TypeError("GradScaler: growth_interval must be an int")
        if growth_interval <= 0:
            raise ValueError(f"GradScaler: growth_interval should be > 0, got {growth_interval}")
        self._scale = _f32(init_scale)
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._growth_tracker = 0
        self._states: dict[int, dict] = {}

    # ----------------------------------------------------------------------------- scaling
    def scale(self, outputs):
        """``outputs`` (a tensor, or a list/tuple/iterable of tensors) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            return outputs * self._scale
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if hasattr(outputs, "__iter__"):
            return map(self.scale, outputs)
        raise ValueError("GradScaler.scale: outputs must be a Tensor or an iterable of Tensors")

    def unscale_(self, optimizer) -> None:
        """Divide ``optimizer``'s gradients by the scale in place (before clipping them) and
        record whether any is inf or NaN."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] is _Stage.UNSCALED:
            raise RuntimeError(
                "unscale_() has already been called on this optimizer since the last update()."
            )
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = _f32(1.0 / self._scale)
        found = None
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    g = p.grad
                    if g is None:
                        continue
                    if g.dtype is D.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    bad = (~g.isfinite()).any()
                    found = bad if found is None else found | bad
                    g.mul_(inv_scale)
        state["found_inf"] = found
        state["stage"] = _Stage.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """``optimizer.step(*args, **kwargs)`` unless a gradient was inf or NaN (then the step is
        skipped and None returned); unscales first if ``unscale_`` was not called."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stage"] is _Stage.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is _Stage.READY:
            self.unscale_(optimizer)
        result = None
        if not _found(state["found_inf"]):
            result = optimizer.step(*args, **kwargs)
        state["stage"] = _Stage.STEPPED
        return result

    def update(self, new_scale=None) -> None:
        """Adapt the scale after this iteration's steps (or set it to ``new_scale``)."""
        if not self._enabled:
            return
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                if new_scale.numel() != 1:
                    raise ValueError("GradScaler.update: new_scale must hold one element")
                new_scale = new_scale.item()
            self._scale = _f32(_as_float("new_scale", new_scale))
        else:
            unscaled = [s for s in self._states.values() if s["stage"] is not _Stage.READY]
            if not unscaled:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(_found(s["found_inf"]) for s in unscaled):
                self._scale = _f32(self._scale * self._backoff_factor)
                self._growth_tracker = 0
            else:
                successful = self._growth_tracker + 1
                if successful == self._growth_interval:
                    grown = _f32(self._scale * self._growth_factor)
                    if math.isfinite(grown):
                        self._scale = grown
                    self._growth_tracker = 0
                else:
                    self._growth_tracker = successful
        self._states = {}

    def _state(self, optimizer) -> dict:
        return self._states.setdefault(id(optimizer), {"stage": _Stage.READY, "found_inf": None})

    # ----------------------------------------------------------------------------- settings
    def get_scale(self) -> float:
        """The current scale (1.0 when disabled)."""
        return self._scale if self._enabled else 1.0

    def get_growth_factor(self) -> float:
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        self._growth_factor = _as_float("growth_factor", new_factor)

    def get_backoff_factor(self) -> float:
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        self._backoff_factor = _as_float("backoff_factor", new_factor)

    def get_growth_interval(self) -> int:
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        self._growth_interval = int(new_interval)

    def is_enabled(self) -> bool:
        return self._enabled

    def state_dict(self) -> dict:
        """PyTorch's keys; empty when disabled."""
        if not self._enabled:
            return {}
        return {
            "scale": self._scale,
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        if not self._enabled:
            raise RuntimeError(
                "GradScaler.load_state_dict() should only be called when the scaler is enabled."
            )
        if len(state_dict) == 0:
            raise RuntimeError(
                "The source state dict is empty, possibly because it was saved from a disabled "
                "instance of GradScaler."
            )
        self._scale = _f32(_as_float("scale", float(state_dict["scale"])))
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._growth_tracker = int(state_dict["_growth_tracker"])


def _f32(x: float) -> float:
    """``x`` rounded to float32, the precision PyTorch keeps the scale in."""
    return float(np.float32(x))


def _found(found) -> bool:
    return found is not None and bool(found.item())

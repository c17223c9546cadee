"""Anomaly detection (torch.autograd.detect_anomaly / set_detect_anomaly): while it is on with
``check_nan``, backward raises as soon as an op's backward returns a gradient holding NaN,
naming the op (``Function 'MulBackward' returned nan values in its 0th output.``), instead of
letting the NaN reach the leaves. Process-global, as PyTorch's. PyTorch also records each op's
forward traceback in this mode; gpucore names the op only."""

from __future__ import annotations

import warnings

from ..errors import AutogradError

# [enabled, check_nan]: read by the backward engine (gpucore/autograd/engine.py)
STATE = [False, True]


def is_anomaly_enabled() -> bool:
    """Whether anomaly detection is on (torch.is_anomaly_enabled)."""
    return STATE[0]


def is_anomaly_check_nan_enabled() -> bool:
    """Whether anomaly detection checks gradients for NaN (torch.is_anomaly_check_nan_enabled)."""
    return STATE[0] and STATE[1]


class set_detect_anomaly:  # noqa: N801 - PyTorch's name (a function-like class, as torch's)
    """Turn anomaly detection on or off, as torch.autograd.set_detect_anomaly: it takes effect
    at once, and as a context manager restores the previous setting on exit."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        if not isinstance(mode, bool):
            raise TypeError(f"set_detect_anomaly(): mode must be a bool, got {type(mode).__name__}")
        self.prev = tuple(STATE)
        STATE[0], STATE[1] = mode, bool(check_nan)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        STATE[0], STATE[1] = self.prev


class detect_anomaly:  # noqa: N801 - PyTorch's name
    """Context manager (and decorator) turning anomaly detection on inside, as
    torch.autograd.detect_anomaly (it warns that the mode slows backward down, as PyTorch)."""

    def __init__(self, check_nan: bool = True) -> None:
        self.check_nan = bool(check_nan)
        self.prev = None
        warnings.warn(
            "Anomaly Detection has been enabled. This mode will increase the runtime and should "
            "only be enabled for debugging.",
            UserWarning,
            stacklevel=2,
        )

    def __enter__(self) -> None:
        self.prev = tuple(STATE)
        STATE[0], STATE[1] = True, self.check_nan

    def __exit__(self, *exc) -> None:
        STATE[0], STATE[1] = self.prev

    def __call__(self, fn):
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__(self.check_nan):
                return fn(*args, **kwargs)

        return wrapper


def check_grads(node, grads) -> None:
    """Raise if one of ``grads`` (what ``node``'s backward returned) holds NaN."""
    for i, g in enumerate(grads):
        if g is not None and g.dtype.is_floating_point and g.numel() and bool(g.isnan().any()):
            raise AutogradError(
                f"Function '{node.name()}' returned nan values in its {i}th output."
            )
